"""PostgreSQL's type names and numeric foundations, shared by :mod:`rewriter.pgeval` (numbers,
text, booleans) and :mod:`rewriter.pgtime` (dates and times): the type families, the errors
PostgreSQL raises on values (:class:`EvalError`) and types (:class:`TypeMismatch`), and numeric
division at PostgreSQL's result scale. Pure; no other module of the rewriter is imported.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal

INTS = ("int2", "int4", "int8")
NUMBERS = ("int2", "int4", "int8", "numeric", "float4", "float8")
TEXTS = ("text", "varchar", "bpchar", "unknown")
#: enough precision for PostgreSQL's display scales (at most 1000)
CTX = Context(prec=1100)


class EvalError(Exception):
    """An error PostgreSQL raises for some argument values (``sqlstate``, ``message``)."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message


class TypeMismatch(Exception):
    """No operator or function of PostgreSQL's takes these argument types (42883/42804)."""

    def __init__(self, message: str, sqlstate: str = "42883", hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        #: what to write instead (a refusal's hint), when PostgreSQL's own does not fit
        self.hint = hint


PG_NAMES = {
    "int2": "smallint", "int4": "integer", "int8": "bigint", "numeric": "numeric",
    "float4": "real", "float8": "double precision", "text": "text", "varchar": "character varying",
    "bpchar": "character", "bool": "boolean", "date": "date", "unknown": "unknown",
    "timestamptz": "timestamp with time zone", "timestamp": "timestamp without time zone",
    "interval": "interval",
}  # fmt: skip


def sql_type(t: str) -> str:
    return PG_NAMES.get(t, t)


def is_number(t: str) -> bool:
    return t in NUMBERS


def is_text(t: str) -> bool:
    return t in TEXTS


def weight_first(d: Decimal) -> tuple[int, int]:
    """PostgreSQL's numeric weight (base-10000 digits before the point, minus one) and first
    base-10000 digit of ``d`` (0, 0 for zero)."""
    if d == 0:
        return 0, 0
    a = abs(d)
    adj = a.adjusted()  # exponent of the leading decimal digit
    weight = adj // 4
    first = int((a.scaleb(-4 * weight)).to_integral_value(rounding=ROUND_DOWN))
    return weight, first


def numeric_scale(d: Decimal) -> int:
    exp = d.as_tuple().exponent
    return max(0, -exp) if isinstance(exp, int) else 0


def div_scale(a: Decimal, b: Decimal) -> Decimal:
    """The quantum of ``a / b`` at PostgreSQL's numeric result scale (select_div_scale: at
    least 16 significant digits, at least the operands' scales, at most 1000)."""
    w1, f1 = weight_first(a)
    w2, f2 = weight_first(b)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    rscale = min(max(16 - qweight * 4, numeric_scale(a), numeric_scale(b), 0), 1000)
    return Decimal(1).scaleb(-rscale)


def numeric_div(a: Decimal, b: Decimal) -> Decimal:
    """``a / b`` for numeric, rounded to PostgreSQL's result scale (select_div_scale)."""
    if b == 0:
        raise EvalError("22012", "division by zero")
    q = CTX.divide(a, b)
    return unsigned_zero(q.quantize(div_scale(a, b), rounding=ROUND_HALF_UP, context=CTX))


def unsigned_zero(d: Decimal) -> Decimal:
    """PostgreSQL's numeric has no negative zero."""
    return d.copy_abs() if d.is_zero() else d


def array_elements(text: str) -> list[str | None] | None:
    """The elements of PostgreSQL's one-dimensional array input ``{a,"b c",NULL}`` (None for
    an element written NULL); None for what this does not read (nested arrays, bounds)."""
    s = text.strip()
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        return None
    body = s[1:-1]
    if not body.strip():
        return []
    out: list[str | None] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i].isspace():
            i += 1
        if i < n and body[i] == "{":
            return None
        if i < n and body[i] == '"':
            i += 1
            chars: list[str] = []
            while i < n and body[i] != '"':
                if body[i] == "\\" and i + 1 < n:
                    i += 1
                chars.append(body[i])
                i += 1
            if i >= n:
                return None
            i += 1
            out.append("".join(chars))
            while i < n and body[i].isspace():
                i += 1
        else:
            start = i
            while i < n and body[i] != ",":
                if body[i] in '{}"\\':
                    return None
                i += 1
            word = body[start:i].strip()
            if not word:
                return None
            out.append(None if word.upper() == "NULL" else word)
        if i >= n:
            return out
        if body[i] != ",":
            return None
        i += 1
