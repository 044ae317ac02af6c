"""PostgreSQL's text and mathematical functions, for :data:`rewriter.pgeval.FUNCTIONS`.

Each entry is ``name -> (type rule, implementation, strict)`` as in ``pgeval``: the type rule
resolves the call as PostgreSQL 16 does (or raises :class:`TypeMismatch`), the implementation
computes it over non-NULL values with PostgreSQL's results and errors (:class:`EvalError`,
with PostgreSQL's SQLSTATE and message). ``tests/rewriter/test_pgeval.py`` diffs each against
the real server, edge values included (empty strings, negative counts, NULL, zero).

Text: ``initcap``, ``split_part``, ``strpos``/``position``, ``starts_with``, ``lpad``/``rpad``,
``reverse``, ``md5`` (of the UTF-8 text: the database encoding the proxy requires), ``repeat``,
``ascii``, ``chr``. ``initcap`` cases letters as the database's ``LC_CTYPE`` of a UTF-8 locale
does, character by character (as ``lower``/``upper`` are evaluated). A text result longer than
:data:`MAX_TEXT` characters is an error (54000) rather than built in the proxy's memory.

Mathematics: PostgreSQL resolves ``sqrt``, ``exp``, ``ln``, ``log``, ``power`` (and ``^``) of
integers to their double precision variants (float8 is the preferred numeric type) and of a
``numeric`` to the numeric variant. The double precision variants call the C library's
functions, as PostgreSQL does (Python's ``math`` calls the same ``libm``), with PostgreSQL's
checks (``float.c``: ``dsqrt``, ``dexp``, ``dlog1``, ``dlog10``, ``dpow``, ``degrees``, ...).
Of the numeric variants only ``sqrt`` is evaluated (PostgreSQL's result scale, exact rounding:
``sqrt(variance(x))``); ``exp``, ``ln``, ``log`` and ``power`` of a numeric, and ``log(b, x)``
(numeric only), are refused with a hint to cast to double precision. ``div(a, b)`` (numeric
only) is the integer quotient truncated toward zero. ``cbrt``, ``degrees``, ``radians``,
``sin``, ``cos`` and ``pi`` exist in double precision only (a numeric argument is cast).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from decimal import Decimal

from .pgtypes import CTX as _CTX
from .pgtypes import INTS, EvalError, TypeMismatch, is_number, is_text, numeric_scale, sql_type
from .pgtypes import unsigned_zero as _unsigned_zero

#: The longest text result the proxy builds (characters); PostgreSQL's own limit is 1 GB.
MAX_TEXT = 1_000_000

#: float.c's RADIANS_PER_DEGREE
_RADIANS_PER_DEGREE = 0.0174532925199432957692

TypeRule = Callable[[Sequence[str]], str]
Entry = tuple[TypeRule, Callable[..., object], bool]


# --- type rules ------------------------------------------------------------------------------


def _no_function(name: str, args: Sequence[str]) -> TypeMismatch:
    return TypeMismatch(f"function {name}({', '.join(sql_type(a) for a in args)}) does not exist")


def _signature(name: str, result: str, *params: str) -> TypeRule:
    """A function of fixed parameters: ``text`` (any text type, or an untyped literal) and
    ``int`` (smallint or integer: PostgreSQL casts neither bigint nor numeric to integer
    implicitly)."""

    def rule(args: Sequence[str]) -> str:
        ok = len(args) == len(params) and all(
            is_text(a) if p == "text" else a in ("int2", "int4")
            for a, p in zip(args, params, strict=True)
        )
        if not ok:
            raise _no_function(name, args)
        return result

    return rule


def _float_only(name: str, arity: int) -> TypeRule:
    """Functions PostgreSQL has in double precision only (a numeric argument is cast)."""

    def rule(args: Sequence[str]) -> str:
        if len(args) != arity or not all(is_number(a) or a == "unknown" for a in args):
            raise _no_function(name, args)
        return "float8"

    return rule


def _float_or_numeric(name: str, numeric: bool) -> TypeRule:
    """PostgreSQL's choice between ``f(float8, ...)`` and ``f(numeric, ...)``: double
    precision when an argument is a double or all are integers (or untyped literals), numeric
    when an argument is numeric. ``numeric``: whether the numeric variant is evaluated."""

    def rule(args: Sequence[str]) -> str:
        if not all(is_number(a) or a == "unknown" for a in args):
            raise _no_function(name, args)
        if any(a in ("float4", "float8") for a in args) or "numeric" not in args:
            return "float8"
        if numeric:
            return "numeric"
        call = f"{name}({', '.join('x::float8' if a == 'numeric' else 'x' for a in args)})"
        raise TypeMismatch(
            f"function {name}({', '.join(sql_type(a) for a in args)}) is not evaluated by the "
            "proxy (the numeric variant's result scale is its own)",
            sqlstate="0A000",
            hint=f"cast the numeric argument to double precision: {call}",
        )

    return rule


def _t_log(args: Sequence[str]) -> str:
    if len(args) == 2:
        raise TypeMismatch(
            "function log(numeric, numeric) is not evaluated by the proxy (PostgreSQL has "
            "log(b, x) in numeric only, at a result scale of its own)",
            sqlstate="0A000",
            hint="write ln(x::float8) / ln(b::float8), or log(x) for base 10",
        )
    return _float_or_numeric("log", numeric=False)(args)


def _t_div(args: Sequence[str]) -> str:
    if len(args) != 2 or not all(a in (*INTS, "numeric", "unknown") for a in args):
        raise _no_function("div", args)
    return "numeric"


# --- text ------------------------------------------------------------------------------------


def _limited(n: int) -> int:
    if n > MAX_TEXT:
        raise EvalError(
            "54000",
            f"a text result longer than {MAX_TEXT} characters is not evaluated by the proxy",
        )
    return n


def _char_case(ch: str, upper: bool) -> str:
    """towupper/towlower: one character to one character (``ß`` stays ``ß``)."""
    out = ch.upper() if upper else ch.lower()
    return out if len(out) == 1 else ch


def _initcap(s: str) -> str:
    """str_initcap: a letter after a letter or digit is lowered, any other is raised; a word
    is a run of alphanumeric characters (after conversion)."""
    out = []
    alnum = False
    for ch in s:
        ch = _char_case(ch, upper=not alnum)
        out.append(ch)
        alnum = ch.isalnum()
    return "".join(out)


def _split_part(s: str, sep: str, n: int) -> str:
    """split_part: the n-th field (from the end when negative); the whole string is the one
    field when the separator is empty."""
    if n == 0:
        raise EvalError("22023", "field position must not be zero")
    if not s:
        return ""
    fields = s.split(sep) if sep else [s]
    if abs(n) > len(fields):
        return ""
    return fields[n - 1] if n > 0 else fields[n]


def _pad(s: str, n: int, fill: str = " ", *, left: bool) -> str:
    """lpad/rpad: ``s`` cut to ``n`` characters, or filled to ``n`` with ``fill`` repeated
    (``s`` only cut when ``fill`` is empty; a negative ``n`` is 0)."""
    n = _limited(max(n, 0))
    s = s[:n]
    if not fill or len(s) == n:
        return s
    need = n - len(s)
    pad = (fill * (need // len(fill) + 1))[:need]
    return pad + s if left else s + pad


def _repeat(s: str, n: int) -> str:
    if n <= 0:
        return ""
    _limited(len(s) * n)
    return s * n


def _chr(n: int) -> str:
    if n < 0:
        raise EvalError("22023", "character number must be positive")
    if n == 0:
        raise EvalError("54000", "null character not permitted")
    if n > 0x10FFFF:
        raise EvalError("54000", f"requested character too large for encoding: {n}")
    if 0xD800 <= n <= 0xDFFF:
        raise EvalError("54000", f"requested character not valid for encoding: {n}")
    return chr(n)


# --- double precision ------------------------------------------------------------------------


def _f(v: object) -> float:
    return float(v)  # type: ignore[arg-type]


def _checked(r: float, inf_ok: bool, zero_ok: bool) -> float:
    """float.c's check_float8_val."""
    if math.isinf(r) and not inf_ok:
        raise EvalError("22003", "value out of range: overflow")
    if r == 0.0 and not zero_ok:
        raise EvalError("22003", "value out of range: underflow")
    return r


def _sqrt(v: object) -> object:
    if isinstance(v, Decimal):
        return _numeric_sqrt(v)
    x = _f(v)
    if x < 0:
        raise EvalError("2201F", "cannot take square root of a negative number")
    return math.sqrt(x)


def _numeric_sqrt(d: Decimal) -> Decimal:
    """numeric_sqrt: at least 16 significant digits and no fewer than the argument's scale
    (rscale from the argument's weight in base-10000 digits), rounded half away from zero."""
    if d < 0:
        raise EvalError("2201F", "cannot take square root of a negative number")
    weight = d.adjusted() // 4 if d != 0 else 0
    sweight = (weight + 1) * 4 // 2 - 1
    rscale = min(max(16 - sweight, numeric_scale(d), 0), 1000)
    # floor(sqrt(d) * 10^(rscale+1)) exactly, then half away from zero on the last digit
    n = int(d.scaleb(2 * (rscale + 1), context=_CTX).to_integral_value(rounding="ROUND_FLOOR"))
    q = (math.isqrt(n) + 5) // 10
    return _unsigned_zero(Decimal(q).scaleb(-rscale, context=_CTX))


def _cbrt(v: object) -> float:
    x = _f(v)
    return _checked(math.cbrt(x), math.isinf(x), x == 0)


def _exp(v: object) -> float:
    x = _f(v)
    if math.isnan(x):
        return x
    if math.isinf(x):
        return x if x > 0 else 0.0
    try:
        r = math.exp(x)
    except OverflowError:
        raise EvalError("22003", "value out of range: overflow") from None
    return _checked(r, False, False)


def _log(fn: Callable[[float], float]) -> Callable[[object], float]:
    def log(v: object) -> float:
        x = _f(v)
        if x == 0:
            raise EvalError("2201E", "cannot take logarithm of zero")
        if x < 0:
            raise EvalError("2201E", "cannot take logarithm of a negative number")
        return _checked(fn(x), math.isinf(x), x == 1)

    return log


def _power(a: object, b: object) -> float:
    """dpow: PostgreSQL's errors for 0 ^ negative and negative ^ fractional, overflow and
    underflow; C99's pow otherwise."""
    x, y = _f(a), _f(b)
    if math.isnan(x) or math.isnan(y):
        return 1.0 if (y == 0 and not math.isnan(y)) or x == 1.0 else math.nan
    if x == 0 and y < 0:
        raise EvalError("2201F", "zero raised to a negative power is undefined")
    if x < 0 and math.floor(y) != y:
        raise EvalError(
            "2201F", "a negative number raised to a non-integer power yields a complex result"
        )
    if math.isinf(x) or math.isinf(y):
        return math.pow(x, y)
    try:
        r = math.pow(x, y)
    except OverflowError:
        raise EvalError("22003", "value out of range: overflow") from None
    if math.isinf(r):
        raise EvalError("22003", "value out of range: overflow")
    if r == 0.0 and x != 0.0:
        raise EvalError("22003", "value out of range: underflow")
    return r


def _trig(fn: Callable[[float], float]) -> Callable[[object], float]:
    def trig(v: object) -> float:
        x = _f(v)
        if math.isnan(x):
            return x
        if math.isinf(x):
            raise EvalError("22003", "input is out of range")
        return _checked(fn(x), False, True)

    return trig


def _degrees(v: object) -> float:
    x = _f(v)
    return _checked(x / _RADIANS_PER_DEGREE, math.isinf(x), x == 0)


def _radians(v: object) -> float:
    x = _f(v)
    return _checked(x * _RADIANS_PER_DEGREE, math.isinf(x), x == 0)


def _div(a: object, b: object) -> Decimal:
    """div(numeric, numeric): the quotient truncated toward zero, scale 0."""
    x, y = Decimal(a), Decimal(b)  # type: ignore[arg-type]
    if y == 0:
        raise EvalError("22012", "division by zero")
    return _unsigned_zero(_CTX.divide_int(x, y).quantize(Decimal(1), context=_CTX))


FUNCTIONS: dict[str, Entry] = {
    # text
    "initcap": (_signature("initcap", "text", "text"), _initcap, True),
    "split_part": (_signature("split_part", "text", "text", "text", "int"), _split_part, True),
    "strpos": (_signature("strpos", "int4", "text", "text"), lambda s, t: s.find(t) + 1, True),
    "starts_with": (_signature("starts_with", "bool", "text", "text"), str.startswith, True),
    "lpad": (
        lambda a: _signature("lpad", "text", "text", "int", *("text",) * (len(a) - 2))(a),
        lambda *a: _pad(*a, left=True),
        True,
    ),
    "rpad": (
        lambda a: _signature("rpad", "text", "text", "int", *("text",) * (len(a) - 2))(a),
        lambda *a: _pad(*a, left=False),
        True,
    ),
    "reverse": (_signature("reverse", "text", "text"), lambda s: s[::-1], True),
    "md5": (
        _signature("md5", "text", "text"),
        lambda s: hashlib.md5(s.encode(), usedforsecurity=False).hexdigest(),
        True,
    ),
    "repeat": (_signature("repeat", "text", "text", "int"), _repeat, True),
    "ascii": (_signature("ascii", "int4", "text"), lambda s: ord(s[0]) if s else 0, True),
    "chr": (_signature("chr", "text", "int"), _chr, True),
    # mathematics
    "sqrt": (_float_or_numeric("sqrt", numeric=True), _sqrt, True),
    "exp": (_float_or_numeric("exp", numeric=False), _exp, True),
    "ln": (_float_or_numeric("ln", numeric=False), _log(math.log), True),
    "log": (_t_log, _log(math.log10), True),
    "log10": (_float_or_numeric("log10", numeric=False), _log(math.log10), True),
    "power": (_float_or_numeric("power", numeric=False), _power, True),
    "pow": (_float_or_numeric("pow", numeric=False), _power, True),
    "cbrt": (_float_only("cbrt", 1), _cbrt, True),
    "degrees": (_float_only("degrees", 1), _degrees, True),
    "radians": (_float_only("radians", 1), _radians, True),
    "sin": (_float_only("sin", 1), _trig(math.sin), True),
    "cos": (_float_only("cos", 1), _trig(math.cos), True),
    "pi": (_float_only("pi", 0), lambda: math.pi, True),
    "div": (_t_div, _div, True),
}
FUNCTIONS["position"] = FUNCTIONS["strpos"]
