"""PostgreSQL's semantics for the scalar expressions the rewriter evaluates itself.

Two places evaluate SQL expressions without a database: over the *public* values of declared
attributes (a ``CASE``, ``LIKE`` or ``floor(age / 10) * 10`` in ``WHERE``, ``GROUP BY`` or inside
an aggregate, evaluated once per value of the domain, never per row) and over *noisy answers*
(``round(avg(age), 1)``, ``count(*) * 100.0 / 7``, casts with a type modifier). Both follow
PostgreSQL 16 here: the result types of operators and functions (``floor(int)`` is double
precision, ``5 / 2`` is 2, ``1.0 / 3`` has PostgreSQL's 20 significant digits, ``round`` of a
numeric rounds half away from zero and of a double half to even), three-valued logic and NULL
in, NULL out. ``tests/rewriter/test_pgeval.py`` diffs every function and operator here against
the real server.

Values are Python values: ``int`` (int2/int4/int8), ``Decimal`` (numeric), ``float`` (float8),
``str`` (text), ``bool``, ``datetime.date``, ``None`` (NULL). Types are PostgreSQL's canonical
names (``int4``, ``numeric``, ...); ``unknown`` is an untyped string literal.

An error PostgreSQL would raise for some value (division by zero, a value out of range) is
:class:`EvalError`, with PostgreSQL's SQLSTATE; the rewriter turns it into a refusal that names
no value (the values it evaluates over are the declared domain, which is public).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache

from . import pgfuncs
from .pgtypes import CTX as _CTX
from .pgtypes import (
    INTS,
    NUMBERS,
    PG_NAMES,
    TEXTS,
    EvalError,
    TypeMismatch,
    div_scale,
    is_number,
    is_text,
    numeric_div,
    numeric_scale,
    sql_type,
    unsigned_zero,
)

__all__ = [
    "INTS",
    "NUMBERS",
    "PG_NAMES",
    "TEXTS",
    "EvalError",
    "TypeMismatch",
    "is_number",
    "is_text",
    "numeric_div",
    "sql_type",
    "unsigned_zero",
]

_RANK = {"int2": 0, "int4": 1, "int8": 2, "numeric": 3, "float4": 4, "float8": 5}
_INT_RANGE = {"int2": 2**15, "int4": 2**31, "int8": 2**63}


# --- types --------------------------------------------------------------------------------


def numeric_join(a: str, b: str) -> str:
    """The common type of two numeric types (PostgreSQL's implicit casts)."""
    if a == "float4":
        a = "float8"
    if b == "float4":
        b = "float8"
    return a if _RANK[a] >= _RANK[b] else b


def common_type(types: Sequence[str], what: str) -> str:
    """The type ``CASE``/``COALESCE``/``GREATEST`` resolve their branches to."""
    known = [t for t in types if t != "unknown"]
    if not known:
        return "text"
    if all(is_number(t) for t in known):
        out = known[0]
        for t in known[1:]:
            out = numeric_join(out, t)
        return out
    if all(is_text(t) for t in known):
        return "text" if len(set(known)) > 1 else known[0]
    if all(t in pgtime.TYPES for t in known):
        return pgtime.common(known)
    if len(set(known)) == 1:
        return known[0]
    raise TypeMismatch(
        f"{what} types {' and '.join(sorted({sql_type(t) for t in known}))} cannot be matched",
        sqlstate="42804",
    )


def arith_type(op: str, a: str, b: str) -> str:
    """The result type of ``a op b`` for + - * / %."""
    if a == "unknown" and is_number(b):
        a = "numeric" if b not in INTS else b
    if b == "unknown" and is_number(a):
        b = "numeric" if a not in INTS else a
    if is_number(a) and is_number(b):
        t = numeric_join(a, b)
        if op == "%" and t in ("float8",):
            raise TypeMismatch("operator does not exist: double precision % double precision")
        return t
    if a in pgtime.TYPES or b in pgtime.TYPES:
        timed = pgtime.arith_type(op, a, b)
        if timed is not None:
            return timed
    raise TypeMismatch(f"operator does not exist: {sql_type(a)} {op} {sql_type(b)}")


def comparable(a: str, b: str, op: str) -> None:
    """Refuse comparisons PostgreSQL has no operator for, or whose answer depends on the
    database's collation (ordering of text)."""
    if "unknown" in (a, b):
        return
    if is_number(a) and is_number(b):
        return
    if is_text(a) and is_text(b):
        if op not in ("=", "<>"):
            raise TypeMismatch(
                "ordering comparisons of text depend on the database's collation and are not "
                "evaluated by the proxy",
                sqlstate="0A000",
            )
        return
    if a == b or pgtime.comparable(a, b):
        return
    raise TypeMismatch(f"operator does not exist: {sql_type(a)} {op} {sql_type(b)}")


# --- numbers ------------------------------------------------------------------------------


def _check_int(v: int, t: str) -> int:
    lim = _INT_RANGE.get(t)
    if lim is not None and not -lim <= v < lim:
        raise EvalError("22003", f"{sql_type(t)} out of range")
    return v


def to_decimal(v: object) -> Decimal:
    if isinstance(v, Decimal):
        return v
    if isinstance(v, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(v, int):
        return Decimal(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise EvalError("22003", "cannot convert infinity or NaN to numeric")
        return Decimal(repr(v))
    raise TypeError("not a number")


def numeric_variance(num: Decimal, den: Decimal, *, root: bool) -> Decimal:
    """``num / den`` (and its square root for a standard deviation) at the scale PostgreSQL's
    numeric variance and stddev give (numeric_stddev_internal: select_div_scale, then sqrt at
    the same scale)."""
    var = _CTX.divide(num, den)
    if root:
        var = var.sqrt(context=_CTX)
    return var.quantize(div_scale(num, den), rounding=ROUND_HALF_UP, context=_CTX)


def round_numeric(d: Decimal, s: int) -> Decimal:
    """round(numeric, s): half away from zero; a negative ``s`` rounds left of the point."""
    if s >= 0:
        return unsigned_zero(
            d.quantize(Decimal(1).scaleb(-s), rounding=ROUND_HALF_UP, context=_CTX)
        )
    q = d.scaleb(s).quantize(Decimal(1), rounding=ROUND_HALF_UP, context=_CTX).scaleb(-s)
    return unsigned_zero(q.quantize(Decimal(1), context=_CTX))


def trunc_numeric(d: Decimal, s: int) -> Decimal:
    if s >= 0:
        return unsigned_zero(d.quantize(Decimal(1).scaleb(-s), rounding=ROUND_DOWN, context=_CTX))
    q = d.scaleb(s).quantize(Decimal(1), rounding=ROUND_DOWN, context=_CTX).scaleb(-s)
    return unsigned_zero(q.quantize(Decimal(1), context=_CTX))


def typmod_numeric(d: Decimal, precision: int, scale: int) -> Decimal:
    """A cast to numeric(precision, scale): rounded half away from zero; 22003 when the
    integer digits do not fit."""
    r = round_numeric(d, scale)
    digits = len(r.as_tuple().digits) - numeric_scale(r) if r != 0 else 0
    if digits > precision - scale:
        raise EvalError("22003", "numeric field overflow")
    return r


def _num(v: object, t: str) -> object:
    """``v`` as a value of numeric type ``t``."""
    if t in INTS:
        return v
    if t == "numeric":
        return to_decimal(v)
    return float(v)  # type: ignore[arg-type]


def arith(op: str, a: object, b: object, t: str) -> object:
    """``a op b`` with result type ``t`` (from :func:`arith_type`)."""
    if a is None or b is None:
        return None
    if (
        t in pgtime.TYPES
        or isinstance(a, dt.date | pgtime.Interval)
        or isinstance(b, dt.date | pgtime.Interval)
    ):
        return pgtime.arith(op, a, b, t)
    x, y = _num(a, t), _num(b, t)
    if t in INTS:
        assert isinstance(x, int) and isinstance(y, int)
        if op == "+":
            return _check_int(x + y, t)
        if op == "-":
            return _check_int(x - y, t)
        if op == "*":
            return _check_int(x * y, t)
        if y == 0:
            raise EvalError("22012", "division by zero")
        q = abs(x) // abs(y)
        q = q if (x >= 0) == (y >= 0) else -q  # truncation toward zero
        return _check_int(q, t) if op == "/" else x - y * q
    if t == "numeric":
        assert isinstance(x, Decimal) and isinstance(y, Decimal)
        if op == "+":
            return unsigned_zero(_CTX.add(x, y))
        if op == "-":
            return unsigned_zero(_CTX.subtract(x, y))
        if op == "*":
            return unsigned_zero(_CTX.multiply(x, y))
        if op == "/":
            return numeric_div(x, y)
        if y == 0:
            raise EvalError("22012", "division by zero")
        return unsigned_zero(_CTX.remainder(x, y))
    assert isinstance(x, float) and isinstance(y, float)
    if op == "+":
        r = x + y
    elif op == "-":
        r = x - y
    elif op == "*":
        r = x * y
    else:
        if y == 0.0:
            raise EvalError("22012", "division by zero")
        r = x / y
    return float_checked(op, x, y, r)


def float_checked(op: str, x: float, y: float, r: float) -> float:
    """PostgreSQL's checks of a double's result (float8pl/mi/mul/div): an infinite result of
    finite operands overflows, a zero product or quotient of nonzero operands underflows."""
    if math.isinf(r) and not math.isinf(x) and not math.isinf(y):
        raise EvalError("22003", "value out of range: overflow")
    if r == 0.0 and op in "*/" and x != 0.0 and (y != 0.0 if op == "*" else not math.isinf(y)):
        raise EvalError("22003", "value out of range: underflow")
    return r


def negate(v: object) -> object:
    if v is None:
        return None
    if isinstance(v, bool):
        raise TypeError("a boolean cannot be negated")
    return -v  # type: ignore[operator]


# --- comparisons and logic ------------------------------------------------------------------


def _comparable_values(a: object, b: object) -> tuple[object, object]:
    if (isinstance(a, dt.date) and isinstance(b, dt.date) and type(a) is not type(b)) or (
        isinstance(a, dt.datetime)
        and isinstance(b, dt.datetime)
        and (a.tzinfo is None) != (b.tzinfo is None)
    ):
        return pgtime.promote(a, b)
    if isinstance(a, Decimal) and isinstance(b, float):
        return float(a), b
    if isinstance(b, Decimal) and isinstance(a, float):
        return a, float(b)
    return a, b


def compare(op: str, a: object, b: object) -> bool | None:
    if a is None or b is None:
        return None
    x, y = _comparable_values(a, b)
    if op == "=":
        return bool(x == y)
    if op == "<>":
        return bool(x != y)
    if op == "<":
        return bool(x < y)  # type: ignore[operator]
    if op == "<=":
        return bool(x <= y)  # type: ignore[operator]
    if op == ">":
        return bool(x > y)  # type: ignore[operator]
    if op == ">=":
        return bool(x >= y)  # type: ignore[operator]
    raise ValueError(op)


def logic(op: str, values: Sequence[object]) -> bool | None:
    if op == "not":
        v = values[0]
        return None if v is None else not v
    if op == "and":
        if any(v is False for v in values):
            return False
        return None if any(v is None for v in values) else True
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


@lru_cache(maxsize=256)
def _like_regex(pattern: str, escape: str | None, fold: bool) -> re.Pattern[str]:
    out = []
    i = 0
    esc = "\\" if escape is None else escape
    while i < len(pattern):
        c = pattern[i]
        if esc and c == esc:
            i += 1
            if i >= len(pattern):
                raise EvalError("22025", "LIKE pattern must not end with escape character")
            out.append(re.escape(pattern[i]))
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if fold else 0))


def like(
    value: object, pattern: object, *, fold: bool = False, escape: str | None = None
) -> bool | None:
    """``value LIKE pattern`` (``ILIKE`` with ``fold``): ``%`` any string, ``_`` one character,
    backslash escapes."""
    if value is None or pattern is None:
        return None
    if not isinstance(value, str) or not isinstance(pattern, str):
        raise TypeError("LIKE needs text")
    return _like_regex(pattern, escape, fold).fullmatch(value) is not None


# --- functions ------------------------------------------------------------------------------


def _float_round(x: float) -> float:
    return float(round(x))  # Python rounds half to even, as rint() does


def _text(v: object) -> str:
    """PostgreSQL's text output of a value."""
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, float):
        return float_text(v)
    if isinstance(v, dt.date | pgtime.Interval):
        return pgtime.text(v)
    return str(v)


def _out(v: object) -> str:
    """A value's output function (``concat``, ``concat_ws``): a boolean is ``t`` or ``f``
    (its cast to text, and ``||``, give ``true``)."""
    if isinstance(v, bool):
        return "t" if v else "f"
    return _text(v)


def _concat_ws(sep: object, *vs: object) -> str | None:
    """concat_ws(sep, ...): NULL when the separator is; NULL values are skipped."""
    if sep is None:
        return None
    return str(sep).join(_out(v) for v in vs if v is not None)


def float_text(x: float) -> str:
    """float8 output (PostgreSQL 12+: the shortest text that reads back exactly)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    r = repr(x)
    if r.endswith(".0"):
        r = r[:-2]
    if "e" in r:
        mant, e = r.split("e")
        mant = mant[:-2] if mant.endswith(".0") else mant
        n = int(e)
        if -4 <= n < 15:
            return (
                format(x, "f").rstrip("0").rstrip(".") if "." in format(x, "f") else format(x, "f")
            )
        r = f"{mant}e{'+' if n >= 0 else '-'}{abs(n):02d}"
    return r


def literal_type(v: object) -> str:
    """The type PostgreSQL gives a constant written as ``v`` (``unknown``: a string or NULL,
    typed by what it meets)."""
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int4" if -(2**31) <= v < 2**31 else ("int8" if -(2**63) <= v < 2**63 else "numeric")
    if isinstance(v, Decimal | Fraction):
        return "numeric"
    if isinstance(v, float):
        return "float8"
    if isinstance(v, dt.date):
        return "date"
    return "unknown"


def literal_sql(v: object, t: str) -> str:
    """A value of type ``t`` as SQL that reads back as it (``t`` empty or ``unknown``: as
    written)."""
    if v is None:
        return "NULL" if t in ("", "unknown") else f"CAST(NULL AS {sql_type(t)})"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int | Decimal):
        return str(v) if v >= 0 else f"({v})"
    if isinstance(v, float):
        return f"CAST('{float_text(v)}' AS double precision)"
    time = pgtime.literal_sql(v)
    if time is not None:
        return time
    text = "'" + str(v).replace("'", "''") + "'"
    return text if t in ("", "unknown", "text") else f"CAST({text} AS {sql_type(t)})"


def parse_bool(text: str) -> bool | None:
    """PostgreSQL's boolean input (``t``, ``yes``, ``on``, ``1``, …); None when it is none."""
    t = text.strip().lower()
    if t in ("t", "true", "y", "yes", "on", "1"):
        return True
    if t in ("f", "false", "n", "no", "off", "0"):
        return False
    return None


def cast(v: object, src: str, dst: str, typmod: Sequence[int] = (), zone: str = "UTC") -> object:
    """``v::dst`` (``v`` of type ``src``), with PostgreSQL's rounding and range checks
    (``zone``: the session's TimeZone, for a cast to ``timestamp with time zone``)."""
    if v is None:
        return None
    if (dst in pgtime.TYPES or src in pgtime.TYPES) and not (
        dst in TEXTS and not isinstance(v, dt.date | pgtime.Interval)
    ):
        return pgtime.cast(v, src, dst, typmod, zone)
    if dst in INTS:
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int):
            return _check_int(v, dst)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise EvalError("22003", f"{sql_type(dst)} out of range")
            return _check_int(int(_float_round(v)), dst)
        if isinstance(v, Decimal):
            if not v.is_finite():
                raise EvalError("22003", f"{sql_type(dst)} out of range")
            return _check_int(int(round_numeric(v, 0)), dst)
        if isinstance(v, str):
            try:
                return _check_int(int(v.strip()), dst)
            except ValueError:
                raise EvalError("22P02", f"invalid input syntax for type {sql_type(dst)}") from None
    if dst == "numeric":
        if isinstance(v, str):
            try:
                d = Decimal(v.strip())
            except InvalidOperation:
                raise EvalError("22P02", "invalid input syntax for type numeric") from None
        elif isinstance(v, float):
            if not math.isfinite(v):
                raise EvalError("22003", "cannot convert infinity or NaN to numeric")
            # float8_numeric: the double printed with DBL_DIG (15) significant digits
            d = unsigned_zero(Decimal(format(v, ".15g")))
        else:
            d = to_decimal(v)
        if len(typmod) >= 1:
            return typmod_numeric(d, typmod[0], typmod[1] if len(typmod) > 1 else 0)
        return d
    if dst in ("float8", "float4"):
        if isinstance(v, str):
            try:
                return float(v.strip())
            except ValueError:
                raise EvalError("22P02", "invalid input syntax for type double precision") from None
        return float(v)  # type: ignore[arg-type]
    if dst in ("text", "varchar", "bpchar"):
        s = _text(v)
        if typmod and dst in ("varchar", "bpchar"):
            s = s[: typmod[0]]
            if dst == "bpchar":
                s = s.ljust(typmod[0])
        return s
    if dst == "bool":
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v != 0
        if isinstance(v, str):
            b = parse_bool(v)
            if b is not None:
                return b
        raise EvalError("22P02", "invalid input syntax for type boolean")
    raise TypeMismatch(f"cannot cast type {sql_type(src)} to {sql_type(dst)}", sqlstate="42846")


def _width_bucket(x: object, lo: object, hi: object, n: object, *, floats: bool = False) -> int:
    """width_bucket(operand, b1, b2, count) as PostgreSQL 16 computes it. ``floats``: the
    double precision version, which PostgreSQL picks when an argument is a double or all are
    integers (float8 is the preferred numeric type): ``count * ((x - b1) / (b2 - b1))`` in
    doubles, truncated, at most count - 1, plus 1 (width_bucket_float8). Otherwise the numeric
    version: ``(x - b1) * count / (b2 - b1)`` exactly but the division rounded at
    PostgreSQL's scale (select_div_scale), plus 1, floored (compute_bucket)."""
    assert isinstance(n, int)
    if n <= 0:
        raise EvalError("2201G", "count must be greater than zero")
    if floats:
        fx, flo, fhi = float(x), float(lo), float(hi)  # type: ignore[arg-type]
        if math.isnan(fx) or math.isnan(flo) or math.isnan(fhi):
            raise EvalError("2201G", "operand, lower bound, and upper bound cannot be NaN")
        if flo == fhi:
            raise EvalError("2201G", "lower bound cannot equal upper bound")
        if flo < fhi:
            if fx < flo:
                return 0
            if fx >= fhi:
                return n + 1
            q = n * ((fx - flo) / (fhi - flo))
        else:
            if fx > flo:
                return 0
            if fx <= fhi:
                return n + 1
            q = n * ((flo - fx) / (flo - fhi))
        return min(int(q), n - 1) + 1
    dx, dlo, dhi = to_decimal(x), to_decimal(lo), to_decimal(hi)
    if dlo == dhi:
        raise EvalError("2201G", "lower bound cannot equal upper bound")
    if dlo < dhi:
        if dx < dlo:
            return 0
        if dx >= dhi:
            return n + 1
        num, den = _CTX.multiply(_CTX.subtract(dx, dlo), Decimal(n)), _CTX.subtract(dhi, dlo)
    else:
        if dx > dlo:
            return 0
        if dx <= dhi:
            return n + 1
        num, den = _CTX.multiply(_CTX.subtract(dlo, dx), Decimal(n)), _CTX.subtract(dlo, dhi)
    quotient = numeric_div(num, den)
    return int(_CTX.add(quotient, Decimal(1)).to_integral_value(rounding="ROUND_FLOOR"))


def _floor(v: object) -> object:
    if isinstance(v, Decimal):
        return unsigned_zero(v.to_integral_value(rounding="ROUND_FLOOR"))
    return float(math.floor(float(v)))  # type: ignore[arg-type]


def _ceil(v: object) -> object:
    if isinstance(v, Decimal):
        return unsigned_zero(v.to_integral_value(rounding="ROUND_CEILING"))
    return float(math.ceil(float(v)))  # type: ignore[arg-type]


def _round(v: object, s: object = None) -> object:
    if isinstance(v, Decimal):
        return round_numeric(v, 0 if s is None else int(s))  # type: ignore[call-overload]
    return _float_round(float(v))  # type: ignore[arg-type]


def _trunc(v: object, s: object = None) -> object:
    if isinstance(v, Decimal):
        return trunc_numeric(v, 0 if s is None else int(s))  # type: ignore[call-overload]
    return float(math.trunc(float(v)))  # type: ignore[arg-type]


def _sign(v: object) -> object:
    if isinstance(v, Decimal):
        return Decimal(0 if v == 0 else (1 if v > 0 else -1))
    x = float(v)  # type: ignore[arg-type]
    return 0.0 if x == 0 else (1.0 if x > 0 else -1.0)


def _substr(s: object, start: object, length: object = None) -> str:
    assert isinstance(s, str) and isinstance(start, int)
    if length is None:
        return s[max(start - 1, 0) :]
    assert isinstance(length, int)
    if length < 0:
        raise EvalError("22011", "negative substring length not allowed")
    end = start - 1 + length
    return s[max(start - 1, 0) : max(end, 0)]


def _greatest(*vs: object) -> object:
    known = [v for v in vs if v is not None]
    return max(known, key=lambda v: _comparable_values(v, 0.0)[0]) if known else None  # type: ignore[arg-type, return-value]


def _least(*vs: object) -> object:
    known = [v for v in vs if v is not None]
    return min(known, key=lambda v: _comparable_values(v, 0.0)[0]) if known else None  # type: ignore[arg-type, return-value]


#: name -> (result type from the argument types, implementation over non-NULL arguments).
#: ``strict`` functions return NULL when an argument is NULL (PostgreSQL's STRICT).
Impl = Callable[..., object]


def _t_same_number(args: Sequence[str]) -> str:
    t = args[0]
    if t == "unknown":
        return "numeric"
    if not is_number(t):
        raise TypeMismatch("function needs a number")
    return t


def _t_float_or_numeric(args: Sequence[str]) -> str:
    """floor/ceil/round/trunc/sign: numeric stays numeric, everything else is double."""
    t = args[0]
    if not (is_number(t) or t == "unknown"):
        raise TypeMismatch("function needs a number")
    return "numeric" if t in ("numeric", "unknown") else "float8"


def _t_round2(args: Sequence[str]) -> str:
    if args[0] in ("float8", "float4"):
        raise TypeMismatch(
            "function round(double precision, integer) does not exist; cast the value to numeric first"
        )
    if not (is_number(args[0]) or args[0] == "unknown") or args[1] not in (*INTS, "unknown"):
        raise TypeMismatch("function round needs a number and an integer")
    return "numeric"


def _t_text(args: Sequence[str]) -> str:
    if not all(is_text(a) for a in args[:1]):
        raise TypeMismatch("function needs text")
    return "text"


def _t_concat_ws(args: Sequence[str]) -> str:
    if not args or not is_text(args[0]):
        raise TypeMismatch(
            f"function concat_ws({', '.join(sql_type(a) for a in args)}) does not exist"
        )
    return "text"


FUNCTIONS: dict[str, tuple[Callable[[Sequence[str]], str], Impl, bool]] = {
    "abs": (_t_same_number, abs, True),
    "floor": (_t_float_or_numeric, _floor, True),
    "ceil": (_t_float_or_numeric, _ceil, True),
    "round": (lambda a: _t_round2(a) if len(a) == 2 else _t_float_or_numeric(a), _round, True),
    "trunc": (lambda a: _t_round2(a) if len(a) == 2 else _t_float_or_numeric(a), _trunc, True),
    "sign": (_t_float_or_numeric, _sign, True),
    "width_bucket": (lambda a: "int4", _width_bucket, True),
    "lower": (_t_text, lambda s: s.lower(), True),
    "upper": (_t_text, lambda s: s.upper(), True),
    "length": (lambda a: "int4", lambda s: len(s), True),
    "substr": (_t_text, _substr, True),
    "btrim": (_t_text, lambda s, c=" ": s.strip(c), True),
    "ltrim": (_t_text, lambda s, c=" ": s.lstrip(c), True),
    "rtrim": (_t_text, lambda s, c=" ": s.rstrip(c), True),
    "left": (_t_text, lambda s, n: s[:n], True),
    "right": (_t_text, lambda s, n: s[-n:] if n > 0 else (s[-n:] if n < 0 else ""), True),
    "replace": (_t_text, lambda s, a, b: s.replace(a, b) if a else s, True),
    "concat": (lambda a: "text", lambda *vs: "".join(_out(v) for v in vs if v is not None), False),
    "concat_ws": (_t_concat_ws, _concat_ws, False),
    "||": (lambda a: "text", lambda x, y: _text(x) + _text(y), True),
    "greatest": (lambda a: common_type(a, "GREATEST"), _greatest, False),
    "least": (lambda a: common_type(a, "LEAST"), _least, False),
    "mod": (lambda a: arith_type("%", a[0], a[1]), None, True),  # type: ignore[dict-item]
}
FUNCTIONS["ceiling"] = FUNCTIONS["ceil"]
FUNCTIONS["char_length"] = FUNCTIONS["length"]
FUNCTIONS["character_length"] = FUNCTIONS["length"]
FUNCTIONS["substring"] = FUNCTIONS["substr"]


def function_type(name: str, args: Sequence[str]) -> str:
    """The result type of ``name(args)``; :class:`TypeMismatch` when PostgreSQL has none."""
    entry = FUNCTIONS.get(name)
    if entry is None:
        raise TypeMismatch(f"function {name} is not evaluated by the proxy", sqlstate="0A000")
    return entry[0](args)


def call(name: str, args: Sequence[object], types: Sequence[str], result: str) -> object:
    """``name(args)`` (argument types ``types``, result type ``result``)."""
    _, impl, strict = FUNCTIONS[name]
    if strict and any(a is None for a in args):
        return None
    if name == "mod":
        return arith("%", args[0], args[1], result)
    if name in ("greatest", "least"):
        return impl(
            *(None if a is None else _num(a, result) if is_number(result) else a for a in args)
        )
    if name == "width_bucket":
        # PostgreSQL's choice of width_bucket(float8, ...) or width_bucket(numeric, ...)
        floats = any(t in ("float4", "float8") for t in types[:3]) or all(
            t in INTS for t in types[:3]
        )
        return _width_bucket(*args, floats=floats)
    try:
        return impl(*args)
    except (TypeError, ValueError, OverflowError, InvalidOperation):
        raise EvalError("22023", f"invalid argument for function {name}") from None


from . import pgtime  # noqa: E402  (dates and times)

FUNCTIONS.update(pgfuncs.FUNCTIONS)
FUNCTIONS.update(pgtime.FUNCTIONS)
