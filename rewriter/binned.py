"""Expressions over columns declared in bins wider than one value: evaluated over each bin.

A cell of a binned column holds many values: the dates of a month (``unit = "month"``), the
integers of a bin (``edges = [0, 1, 1000, ...]``), the reals of a half-open numeric bin
(``lat`` in ``[30, 40)``). An expression over such a column is answered only when it takes
**one value on the whole cell**; then the cell belongs to one group, or has one weight, exactly
as each of its rows would. Otherwise it *cuts* the cell and the statement is refused (0A000),
naming the expression, the cell and what is accepted instead: answering a cut cell as if whole
would put rows in the wrong group.

- Cells of dates and integers are finite: :class:`rewriter.reduce._Values` evaluates the
  expression at every value of the cell (PostgreSQL's semantics, rewriter.pgeval) and checks
  that they agree.
- A cell of a ``numeric``/``double precision`` column declared by ``edges`` is a real interval
  and cannot be enumerated. :func:`evaluate` evaluates the expression over the interval, as
  interval arithmetic: each value is a :class:`Span` holding every value the expression can
  take on the cell (a sound over-approximation), made exact by PostgreSQL's own operations at
  the ends of monotone functions. A ``double precision`` value is a double: the cell
  ``[lo, hi)`` holds the doubles from the first at or above ``lo`` to the last below ``hi``,
  and IEEE arithmetic rounds monotonically, so ``x / 10`` over them lies between PostgreSQL's
  own quotients of those two doubles. ``floor``, ``ceil``, ``round``, ``trunc``,
  ``width_bucket``, ``sign``, casts, ``+ - * /`` by constants or other spans, ``abs``,
  ``greatest``/``least``, comparisons, ``AND``/``OR``/``NOT``, ``CASE``, ``COALESCE``, ``IN``
  are evaluated this way; anything else over a span is a cut. The result is answered only when
  it is a single value: ``floor(lat / 10) * 10`` over 10-degree bins is one value per bin,
  ``CASE WHEN lat >= 0 THEN 'N' ELSE 'S' END`` too, ``round(lat)`` is not.

The check is sound: a span always holds every value the expression takes on the cell, so a
single value is the value of every row of the cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from . import pgeval
from .errors import UnsupportedError
from .plan import Arith as ArithNode
from .plan import AttrRef, Case, Cast, Compare, Const, Func, Logic, PostExpr, widen
from .schema import AttributeDecl, DateUnit, Kind, TableDecl

INTS = pgeval.INTS
_Number = int | float | Fraction


class Cut(Exception):
    """The expression takes more than one value on a cell (or cannot be shown not to)."""


@dataclass(frozen=True, slots=True)
class Span:
    """Every value a numeric expression can take on a cell: ``[lo, hi]``, an end open when
    its flag says so, of PostgreSQL type ``t`` (``float8``: doubles, closed; an integer type:
    integers, closed; ``numeric``: exact fractions, open or closed)."""

    lo: _Number
    hi: _Number
    t: str
    lo_open: bool = False
    hi_open: bool = False


#: Truth values a condition can take on a cell: a frozenset of True, False and None (NULL).
Truths = frozenset[bool | None]


def _f(v: object) -> Fraction:
    """A number as an exact fraction (a double exactly)."""
    if isinstance(v, Fraction):
        return v
    if isinstance(v, bool):
        raise Cut
    if isinstance(v, int | float | Decimal):
        return Fraction(v)
    raise Cut


#: The smallest normal double: a double column's bins hold normal doubles and zero, the pin
#: leaving subnormal values (below 2.2e-308 in magnitude, never a measurement) out of every
#: cell (rewriter.histogram.cell_expr); else x / 10 would round to -0 for the few subnormal x
#: just below 0, and no expression dividing by a constant would keep a bin whole.
DBL_MIN = 2.2250738585072014e-308


def float_bounds(lo: Fraction, hi: Fraction) -> tuple[float, float]:
    """The first and last double of the bin ``[lo, hi)`` as PostgreSQL's pin reads it
    (``x >= lo AND x < hi``, the edges converted to double precision: correctly rounded),
    subnormal values left out."""
    first = float(lo)
    last = math.nextafter(float(hi), -math.inf)
    if 0 < first < DBL_MIN:
        first = DBL_MIN
    if -DBL_MIN < last < 0:
        last = -DBL_MIN
    return first, last


def cell_spans(attr: AttributeDecl) -> list[list[object]]:
    """Per cell of a column declared in numeric bins, the one abstract value of its rows (and
    NULL, for a nullable column's last cell)."""
    out: list[list[object]] = []
    for lo, hi in attr.bins:
        if attr.pg_type == "float8":
            first, last = float_bounds(lo, hi)
            if first > last:
                raise UnsupportedError(f"column {attr.name} has a bin with no double in it")
            out.append([Span(first, last, "float8")])
        elif attr.pg_type in INTS:
            out.append([Span(math.ceil(lo), math.ceil(hi) - 1, attr.pg_type)])
        elif attr.pg_type == "numeric":
            out.append([Span(lo, hi, "numeric", hi_open=True)])
        else:  # real: PostgreSQL's float4 arithmetic is not evaluated over intervals
            raise UnsupportedError(
                f"an expression over column {attr.name}, declared in numeric bins of type real",
                hint=f"compare {attr.name} with constants at its bin edges",
            )
    if attr.nullable:
        out.append([None])
    return out


# --- the evaluation --------------------------------------------------------------------------


def evaluate(expr: PostExpr, env: dict[str, object]) -> object:
    """The one value ``expr`` takes when its attributes take the values (or :class:`Span`s)
    of ``env``; :class:`Cut` when it takes more than one (or may)."""
    v = _eval(expr, env)
    if isinstance(v, Span):
        return _single(v)
    if isinstance(v, frozenset):
        raise Cut  # several truth values
    return v


def _single(s: Span) -> object:
    if s.lo_open or s.hi_open or s.lo != s.hi:
        raise Cut
    return _concrete(s.lo, s.t)


def _concrete(x: _Number, t: str) -> object:
    if t in INTS:
        return int(x)
    if t == "float8":
        return float(x)
    if isinstance(x, Fraction):
        return (
            Decimal(x.numerator) / Decimal(x.denominator)
            if x.denominator != 1
            else Decimal(x.numerator)
        )
    return pgeval.to_decimal(x)


def _span(v: object, t: str) -> Span:
    """A value (a single one, or a span) as a span of type ``t``."""
    if isinstance(v, Span):
        if v.t == t:
            return v
        return _convert(v, t)
    if v is None or isinstance(v, bool) or not isinstance(v, int | float | Decimal | Fraction):
        raise Cut
    if t == "float8":
        return Span(float(v), float(v), t)
    if t in INTS:
        if isinstance(v, int):
            return Span(v, v, t)
        raise Cut
    return Span(_f(v), _f(v), "numeric")


def _convert(s: Span, t: str) -> Span:
    """A span as a span of a wider numeric type (PostgreSQL's implicit casts)."""
    if t == "float8":
        if s.t == "numeric":  # numeric -> float8 rounds to nearest: monotone, ends may close
            return Span(float(s.lo), float(s.hi), t)
        return Span(float(s.lo), float(s.hi), t)
    if t == "numeric":
        if s.t == "float8":
            return Span(_f(s.lo), _f(s.hi), t)
        return Span(_f(s.lo), _f(s.hi), t, s.lo_open, s.hi_open)
    if t in INTS and s.t in INTS:
        return Span(s.lo, s.hi, t)
    raise Cut


def _eval(e: PostExpr, env: dict[str, object]) -> object:
    if isinstance(e, Const):
        return e.value
    if isinstance(e, AttrRef):
        return env[e.name]
    if isinstance(e, ArithNode):
        a, b = _eval(e.left, env), _eval(e.right, env)
        t = e.pg_type
        if not isinstance(a, Span) and not isinstance(b, Span):
            return pgeval.arith(e.op, a, b, t) if not _truthy(a, b) else _cut()
        if a is None or b is None:
            return None
        return _arith(e.op, _span(a, t), _span(b, t), t)
    if isinstance(e, Compare):
        a, b = _eval(e.left, env), _eval(e.right, env)
        if not isinstance(a, Span | frozenset) and not isinstance(b, Span | frozenset):
            return pgeval.compare(e.op, a, b)
        return _compare(e.op, a, b)
    if isinstance(e, Logic):
        return _logic(e.op, [_truths(_eval(a, env)) for a in e.args])
    if isinstance(e, Case):
        return _case(e, env)
    if isinstance(e, Cast):
        v = _eval(e.arg, env)
        if isinstance(v, frozenset):
            if len(v) == 1:
                return pgeval.cast(next(iter(v)), e.source, e.pg_type, e.typmod)
            raise Cut
        if not isinstance(v, Span):
            return pgeval.cast(v, e.source, e.pg_type, e.typmod)
        return _cast(v, e.pg_type, e.typmod)
    if isinstance(e, Func):
        return _func(e, env)
    raise Cut


def _truthy(a: object, b: object) -> bool:
    return isinstance(a, frozenset) or isinstance(b, frozenset)


def _cut() -> object:
    raise Cut


def _arith(op: str, a: Span, b: Span, t: str) -> Span:
    if t == "float8":
        if op == "/" and b.lo <= 0 <= b.hi:
            raise pgeval.EvalError("22012", "division by zero")
        if op not in "+-*/":
            raise Cut
        corners = [
            float(pgeval.arith(op, x, y, "float8"))  # type: ignore[arg-type]
            for x in (a.lo, a.hi)
            for y in (b.lo, b.hi)
        ]
        if op in "*/":
            # PostgreSQL raises an underflow for a zero result of nonzero operands: the
            # smallest nonzero magnitudes of the cell decide it (DBL_MIN next to a zero)
            x, y = _smallest_nonzero(a), _smallest_nonzero(b) if op == "*" else _largest(b)
            if x and y:
                pgeval.float_checked(op, x, y, pgeval.arith(op, x, y, "float8"))  # type: ignore[arg-type]
        return Span(min(corners), max(corners), t)
    if t in INTS:
        if op == "/" and b.lo <= 0 <= b.hi:
            raise pgeval.EvalError("22012", "division by zero")
        if op not in "+-*/":
            raise Cut
        ints = [
            int(pgeval.arith(op, int(x), int(y), t))  # type: ignore[call-overload]
            for x in (a.lo, a.hi)
            for y in (b.lo, b.hi)
        ]
        return Span(min(ints), max(ints), t)
    # numeric: exact fractions; + - * exact (the ends keep their openness), / rounds
    if op == "+":
        return Span(_f(a.lo) + _f(b.lo), _f(a.hi) + _f(b.hi), t, a.lo_open or b.lo_open,
                    a.hi_open or b.hi_open)  # fmt: skip
    if op == "-":
        return Span(_f(a.lo) - _f(b.hi), _f(a.hi) - _f(b.lo), t, a.lo_open or b.hi_open,
                    a.hi_open or b.lo_open)  # fmt: skip
    if op == "*":
        if b.lo == b.hi and not (b.lo_open or b.hi_open):
            k = _f(b.lo)
            lo, hi = _f(a.lo) * k, _f(a.hi) * k
            return (
                Span(lo, hi, t, a.lo_open, a.hi_open)
                if k >= 0
                else Span(hi, lo, t, a.hi_open, a.lo_open)
            )
        if a.lo == a.hi and not (a.lo_open or a.hi_open):
            return _arith("*", b, a, t)
        products = [_f(x) * _f(y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        return Span(min(products), max(products), t)  # closed: a sound widening
    if op == "/":
        if b.lo <= 0 <= b.hi:
            raise pgeval.EvalError("22012", "division by zero")
        quotients = [_f(x) / _f(y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        qlo, qhi = min(quotients), max(quotients)
        # numeric division rounds the quotient (to 16 significant digits and more: at least 12
        # decimals below 10^8, select_div_scale), monotonically: an end that is a decimal of
        # at most 12 places stays, closed (a quotient beside it may round onto it); another
        # may be passed by the rounding, and is widened by more than it can be
        return Span(_rounding_end(qlo, -1), _rounding_end(qhi, +1), t)
    raise Cut


def _rounding_end(q: Fraction, side: int) -> Fraction:
    if abs(q) < 10**8 and (q * 10**12).denominator == 1:
        return q
    return q + side * max(abs(q), Fraction(1)) / 10**11


def _smallest_nonzero(s: Span) -> float:
    """The smallest magnitude of a nonzero double of a float span (0.0: none)."""
    lo, hi = float(s.lo), float(s.hi)
    if lo <= 0.0 <= hi:
        return DBL_MIN if (lo < 0.0 or hi > 0.0) else 0.0
    return min(abs(lo), abs(hi))


def _largest(s: Span) -> float:
    return max(abs(float(s.lo)), abs(float(s.hi)))


def _rounded(fn: str, x: _Number, t: str, *, upper: bool, open_: bool) -> _Number:
    """A monotone rounding function at an end of a span (for an open end, its limit from
    inside the span)."""
    if t == "float8":
        v = float(x)
        if fn == "floor":
            return float(math.floor(v))
        if fn == "ceil":
            return float(math.ceil(v))
        if fn == "trunc":
            return float(math.trunc(v))
        return float(round(v))  # half to even, as rint
    q = _f(x)
    if fn == "floor":
        f = math.floor(q)
        return f - 1 if open_ and upper and f == q else f
    if fn == "ceil":
        c = math.ceil(q)
        return c + 1 if open_ and not upper and c == q else c
    if fn == "trunc":
        r = math.floor(q) if q >= 0 else math.ceil(q)
        if open_ and r == q:  # just inside the open end
            r = r - 1 if (upper and q > 0) else (r + 1 if (not upper and q < 0) else r)
        return r
    # round: half away from zero; at an open end the limit may differ at a half
    half = Fraction(1, 2)
    r = math.floor(q + half) if q >= 0 else -math.floor(-q + half)
    if open_:
        frac = q - math.floor(q)
        if frac == half:
            r = math.floor(q) if upper else math.ceil(q)
    return r


def _func(e: Func, env: dict[str, object]) -> object:
    args = [_eval(a, env) for a in e.args]
    spans = [a for a in args if isinstance(a, Span)]
    truth = [a for a in args if isinstance(a, frozenset)]
    if not spans and not truth:
        from .plan import _func as concrete_func

        return concrete_func(Func(name=e.name, args=tuple(Const(value=a) for a in args),
                                  pg_type=e.pg_type, arg_types=e.arg_types), lambda x: None)  # fmt: skip
    name = e.name
    if truth:
        if name == "isnull" and len(truth[0]) == 1:
            return next(iter(truth[0])) is None
        raise Cut
    if name in ("floor", "ceil", "trunc", "round") and len(args) == 1:
        s = args[0]
        assert isinstance(s, Span)
        t = e.pg_type
        lo = _rounded(name, s.lo, s.t, upper=False, open_=s.lo_open)
        hi = _rounded(name, s.hi, s.t, upper=True, open_=s.hi_open)
        return Span(lo, hi, "float8" if t == "float8" else "numeric")
    if name == "sign":
        s = args[0]
        assert isinstance(s, Span)
        lo_f, hi_f = _f(s.lo), _f(s.hi)
        lo = 1 if (s.lo_open and lo_f == 0) else (lo_f > 0) - (lo_f < 0)
        hi = -1 if (s.hi_open and hi_f == 0) else (hi_f > 0) - (hi_f < 0)
        return Span(lo, hi, "float8" if e.pg_type == "float8" else "numeric")
    if name == "neg":
        s = args[0]
        assert isinstance(s, Span)
        return _arith("*", s, _span(-1, s.t), s.t) if s.t != "float8" else Span(-s.hi, -s.lo, s.t)
    if name == "abs":
        s = args[0]
        assert isinstance(s, Span)
        if _f(s.lo) >= 0:
            return s
        if _f(s.hi) <= 0:
            return Span(-s.hi, -s.lo, s.t, s.hi_open, s.lo_open)
        return Span(0 if s.t != "float8" else 0.0, max(-s.lo, s.hi), s.t)
    if (
        name in ("width_bucket", "round", "trunc")
        and isinstance(args[0], Span)
        and not any(isinstance(a, Span) for a in args[1:])
    ):
        # monotone in its first argument: equal at both ends of the span, equal between
        s = args[0]
        lo_v, hi_v = _inside(s, upper=False), _inside(s, upper=True)
        ends = [pgeval.call(name, [v, *args[1:]], e.arg_types, e.pg_type) for v in (lo_v, hi_v)]
        if ends[0] == ends[1] and type(ends[0]) is type(ends[1]):
            return ends[0]
        raise Cut
    if name in ("greatest", "least"):
        t = e.pg_type
        ss = [_span(a, t) for a in args if a is not None]
        pick = max if name == "greatest" else min
        return (
            Span(pick(_f(x.lo) for x in ss), pick(_f(x.hi) for x in ss), "numeric")
            if (t == "numeric")
            else Span(pick(x.lo for x in ss), pick(x.hi for x in ss), t)
        )
    if name == "coalesce" and isinstance(args[0], Span):
        return args[0]  # a span holds values, never NULL
    if (
        name == "in"
        and isinstance(args[0], Span)
        and not any(isinstance(a, Span) for a in args[1:])
    ):
        s = args[0]
        hits = [v for v in args[1:] if v is not None and _contains(s, v)]
        if not hits:
            return None if any(v is None for v in args[1:]) else False
        raise Cut
    if name == "isnull":
        return False
    raise Cut


def _inside(s: Span, *, upper: bool) -> object:
    """A value of the span at its lower or upper end (for width_bucket, which is monotone and
    piecewise constant, right-continuous: at an open upper end, the last value below it)."""
    x = s.hi if upper else s.lo
    if s.t == "float8":
        return float(x)
    if s.t in INTS:
        return int(x)
    if (upper and s.hi_open) or (not upper and s.lo_open):
        raise Cut  # a numeric open end has no last value
    return _concrete(x, "numeric")


def _contains(s: Span, v: object) -> bool:
    x = _f(v)
    lo, hi = _f(s.lo), _f(s.hi)
    return (lo < x or (lo == x and not s.lo_open)) and (x < hi or (x == hi and not s.hi_open))


def _cast(s: Span, t: str, typmod: Sequence[int]) -> object:
    """A cast of a span: PostgreSQL's conversions are monotone (a double to numeric keeps 15
    significant digits, to an integer rounds), so the span of the results runs from the
    conversion of one end to the other's."""
    if t in ("float8",):
        return _convert(s, t)
    if t == "numeric":
        if s.t == "numeric" and not typmod:
            return s
        if s.lo_open or s.hi_open:
            raise Cut
        ends = [pgeval.cast(_concrete(x, s.t), s.t, t, typmod) for x in (s.lo, s.hi)]
        return Span(_f(ends[0]), _f(ends[1]), "numeric")
    if t in INTS:
        if s.t in INTS:
            return Span(s.lo, s.hi, t)
        if s.lo_open or s.hi_open:
            raise Cut
        ends = [pgeval.cast(_concrete(x, s.t), s.t, t) for x in (s.lo, s.hi)]
        return Span(ends[0], ends[1], t)  # type: ignore[arg-type]
    raise Cut


def _compare(op: str, a: object, b: object) -> object:
    if isinstance(a, frozenset) or isinstance(b, frozenset):
        raise Cut
    if a is None or b is None:
        return None
    # a double compared with a numeric constant: the constant is cast to double precision
    as_float = any(
        (isinstance(v, Span) and v.t == "float8") or isinstance(v, float) for v in (a, b)
    )
    lo_a, hi_a, lo_ao, hi_ao = _ends(a, as_float)
    lo_b, hi_b, lo_bo, hi_bo = _ends(b, as_float)
    # a < b everywhere / a > b everywhere / a = b nowhere, from the ends
    always_lt = hi_a < lo_b or (hi_a == lo_b and (hi_ao or lo_bo))
    always_gt = lo_a > hi_b or (lo_a == hi_b and (lo_ao or hi_bo))
    always_le = hi_a <= lo_b
    always_ge = lo_a >= hi_b
    point = lo_a == hi_a == lo_b == hi_b and not (lo_ao or hi_ao or lo_bo or hi_bo)
    never_eq = always_lt or always_gt
    result = {
        "<": (always_lt, always_ge),
        "<=": (always_le, always_gt),
        ">": (always_gt, always_le),
        ">=": (always_ge, always_lt),
        "=": (point, never_eq),
        "<>": (never_eq, point),
    }[op]
    if result[0]:
        return True
    if result[1]:
        return False
    return frozenset({True, False})


def _ends(v: object, as_float: bool) -> tuple[Fraction, Fraction, bool, bool]:
    if isinstance(v, Span):
        return _f(v.lo), _f(v.hi), v.lo_open, v.hi_open
    x = Fraction(float(v)) if as_float else _f(v)  # type: ignore[arg-type]
    return x, x, False, False


def _truths(v: object) -> Truths:
    if isinstance(v, frozenset):
        return v
    if v is None or isinstance(v, bool):
        return frozenset({v})
    raise Cut


def _logic(op: str, parts: list[Truths]) -> object:
    out: set[bool | None] = set()

    def combos(i: int, acc: list[bool | None]) -> None:
        if i == len(parts):
            out.add(pgeval.logic(op, acc))
            return
        for v in parts[i]:
            combos(i + 1, [*acc, v])

    combos(0, [])
    return next(iter(out)) if len(out) == 1 else frozenset(out)


def _case(e: Case, env: dict[str, object]) -> object:
    possible: list[object] = []
    for cond, value in e.whens:
        t = _truths(_eval(cond, env))
        if True in t:
            possible.append(_eval(value, env))
        if t == frozenset({True}):
            return _one(possible, e.pg_type)
    possible.append(None if e.default is None else _eval(e.default, env))
    return _one(possible, e.pg_type)


def _one(values: list[object], t: str) -> object:
    """The value of a CASE that may take any of ``values`` on the cell: the one they share
    (of the CASE's type, as PostgreSQL converts its branches)."""
    if any(isinstance(v, Span | frozenset) for v in values):
        if len(values) == 1:
            return values[0]
        raise Cut
    widened = [widen(v, t) for v in values]
    if all(type(v) is type(widened[0]) and v == widened[0] for v in widened):
        return widened[0]
    raise Cut


# --- what a cut is called ----------------------------------------------------------------------


def bin_text(attr: AttributeDecl, cell: int) -> str:
    """A cell of a binned column in words (public: the declaration)."""
    lo, hi = attr.bins[cell]
    if attr.kind is Kind.DATE:
        import datetime as dt

        a, b = dt.date.fromordinal(int(lo)), dt.date.fromordinal(int(hi))
        unit = attr.date_unit.value if attr.date_unit is not None else "bin"
        return f"{a.isoformat()} to {b.isoformat()} (one {unit})"
    if attr.kind is Kind.NUMERIC:
        return f"[{_num_text(lo)}, {_num_text(hi)})"
    return f"{_num_text(lo)} to {_num_text(hi)}"


def _num_text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else str(float(x))


def cut_error(
    expression: str, attrs: Sequence[AttributeDecl], cells: Sequence[int], table: TableDecl
) -> UnsupportedError:
    """The refusal of an expression that cuts a declared cell: the expression, the cell, and
    what is accepted instead."""
    wide = [(a, c) for a, c in zip(attrs, cells, strict=True) if not a.unit_bins]
    if not wide:
        wide = list(zip(attrs, cells, strict=True))
    attr, cell = wide[0]
    where = (
        f"the declared bin {bin_text(attr, cell)} of column {attr.name}"
        if cell < len(attr.bins)
        else f"column {attr.name}"
    )
    if attr.kind is Kind.DATE and attr.date_unit in (DateUnit.MONTH, DateUnit.YEAR):
        unit = attr.date_unit.value
        hint = (
            f'{attr.name} is declared by {unit} (unit = "{unit}" in lapras.toml): an '
            f"expression over it must take one value per {unit}, such as "
            f"date_trunc('{unit}', {attr.name}), extract(year FROM {attr.name}) or a "
            f"comparison with the first day of a {unit}; to answer it by day or weekday, "
            f'declare {attr.name} with unit = "day"'
        )
    elif attr.kind is Kind.NUMERIC:
        hint = (
            f"{attr.name} is declared in bins {bin_text(attr, 0)}, …: an expression over it "
            "must take one value on each bin (floor(x / w) * w with bins of width w, CASE on "
            f"the bin edges, comparisons at the edges: {attr.name} >= lo AND {attr.name} < hi)"
        )
    else:
        hint = (
            f"{attr.name} is declared in bins wider than one value: an expression over it "
            "must take one value on each bin (compare it at the bin edges)"
        )
    return UnsupportedError(f"{expression} cuts {where} of protected table {table.name}", hint=hint)
