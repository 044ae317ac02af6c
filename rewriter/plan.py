"""The intermediate representation handed to the DP core, and post-processing of answers.

A :class:`Plan` is small and frozen and holds no sqlglot node. Its ``batch`` (a
:class:`dp.domain.QueryBatch`) carries every linear query of the statement, laid out
group-major: row ``g * len(measures) + j`` is measure ``j`` restricted to group ``g``. The
DP core answers the batch (noisy ``W @ x``); :func:`postprocess` then turns the answers into
the rows PostgreSQL would return: rounding counts, AVG = SUM / COUNT, HAVING, ORDER BY,
OFFSET and LIMIT. Everything in :func:`postprocess` is post-processing of noisy answers and
costs no privacy.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from dp.domain import Domain, QueryBatch


class MeasureKind(Enum):
    """A linear query per group: rows counted, non-NULL values counted, values summed."""

    COUNT_STAR = "count_star"
    COUNT = "count"
    SUM = "sum"


@dataclass(frozen=True, slots=True, kw_only=True)
class Measure:
    kind: MeasureKind
    attribute: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputColumn:
    """A result column as PostgreSQL describes it: name and type OID."""

    name: str
    type_oid: int


# --- post-processing expressions (evaluated per group on noisy answers) -------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRef:
    """The value of group attribute ``index``, converted to ``pg_type``."""

    index: int
    pg_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AggRef:
    """An aggregate: ``count`` (measure ``value``), ``sum`` (measure ``value`` times
    ``scale``) or ``avg`` (``value`` / ``count``), typed ``pg_type``."""

    func: str
    value: int
    count: int | None = None
    scale: int = 1
    pg_type: str = "int8"


@dataclass(frozen=True, slots=True, kw_only=True)
class Const:
    value: object


@dataclass(frozen=True, slots=True, kw_only=True)
class Compare:
    op: str  # one of = <> < <= > >=
    left: PostExpr
    right: PostExpr


@dataclass(frozen=True, slots=True, kw_only=True)
class Logic:
    op: str  # and, or, not
    args: tuple[PostExpr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Arith:
    op: str  # + - * /
    left: PostExpr
    right: PostExpr


PostExpr: TypeAlias = KeyRef | AggRef | Const | Compare | Logic | Arith


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderItem:
    expr: PostExpr
    desc: bool = False
    nulls_first: bool | None = None  # None: PostgreSQL's default (NULLS LAST for ASC)


@dataclass(frozen=True, slots=True, kw_only=True)
class PostProcess:
    outputs: tuple[PostExpr, ...]
    having: PostExpr | None = None
    order_by: tuple[OrderItem, ...] = ()
    limit: int | None = None
    offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Fingerprint:
    """A template (literals -> ``$n`` placeholders), its literal bindings and a stable key."""

    template: str
    bindings: tuple[object, ...]
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A DP statement reduced to linear queries over one view's histogram."""

    table: str  # schema-qualified
    view: str
    domain: Domain
    batch: QueryBatch
    measures: tuple[Measure, ...]
    columns: tuple[OutputColumn, ...]
    group_keys: tuple[tuple[object, ...], ...]  # one per group, in batch order
    post: PostProcess
    fingerprint: Fingerprint

    @property
    def num_groups(self) -> int:
        return len(self.group_keys)


# --- evaluation --------------------------------------------------------------------------

_CTX = decimal.Context(prec=28)


def _round_int(x: float) -> int:
    return int(np.rint(x))


def _typed(value: float | int | None, pg_type: str) -> object:
    if value is None:
        return None
    if pg_type in ("int8", "int4", "int2"):
        return _round_int(float(value))
    if pg_type == "numeric":
        if isinstance(value, int):
            return Decimal(value)
        return _CTX.create_decimal(repr(float(value)))
    return float(value)


def _convert_key(value: object, pg_type: str) -> object:
    if value is None:
        return None
    if pg_type in ("text", "varchar", "bpchar"):
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, dt.date):
            return value.isoformat()
        return str(value)
    if pg_type == "numeric" and isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    if pg_type in ("float4", "float8") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _agg(ref: AggRef, row: npt.NDArray[np.float64]) -> object:
    if ref.func == "count":
        return max(0, _round_int(row[ref.value]))
    if ref.func == "sum":
        # SUM over no (non-NULL) value is NULL: decided on the rounded noisy count
        if ref.count is not None and _round_int(row[ref.count]) <= 0:
            return None
        raw = float(row[ref.value]) * ref.scale
        if ref.pg_type in ("int8", "numeric", "int4", "int2"):
            # SUM of integers is an integer: rounding the noisy sum is post-processing.
            return _typed(_round_int(raw), ref.pg_type)
        return _typed(raw, ref.pg_type)
    # avg = sum / count; NULL when the (rounded, noisy) count is not positive, as over 0 rows
    assert ref.count is not None
    n = _round_int(row[ref.count])
    if n <= 0:
        return None
    total = float(row[ref.value]) * ref.scale
    if ref.pg_type == "numeric":
        return _CTX.divide(_CTX.create_decimal(repr(total)), Decimal(n))
    return total / n


def _compare(op: str, a: object, b: object) -> bool | None:
    if a is None or b is None:
        return None
    try:
        if op == "=":
            return bool(a == b)
        if op == "<>":
            return bool(a != b)
        if op == "<":
            return bool(a < b)  # type: ignore[operator]
        if op == "<=":
            return bool(a <= b)  # type: ignore[operator]
        if op == ">":
            return bool(a > b)  # type: ignore[operator]
        if op == ">=":
            return bool(a >= b)  # type: ignore[operator]
    except TypeError:
        return None
    raise ValueError(op)


def _num(v: object) -> Decimal | float | int:
    if isinstance(v, Decimal | float | int):
        return v
    raise TypeError("not a number")


def _arith(op: str, a: object, b: object) -> object:
    if a is None or b is None:
        return None
    x, y = _num(a), _num(b)
    if isinstance(x, Decimal) or isinstance(y, Decimal):
        x, y = Decimal(str(x)), Decimal(str(y))
    if op == "+":
        return x + y  # type: ignore[operator]
    if op == "-":
        return x - y  # type: ignore[operator]
    if op == "*":
        return x * y  # type: ignore[operator]
    if y == 0:
        return None
    if isinstance(x, int) and isinstance(y, int):
        return int(x / y)  # PostgreSQL integer division truncates
    return x / y  # type: ignore[operator]


def evaluate(expr: PostExpr, key: tuple[object, ...], row: npt.NDArray[np.float64]) -> object:
    """The value of a post-processing expression for one group."""
    if isinstance(expr, KeyRef):
        return _convert_key(key[expr.index], expr.pg_type)
    if isinstance(expr, AggRef):
        return _agg(expr, row)
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Compare):
        return _compare(expr.op, evaluate(expr.left, key, row), evaluate(expr.right, key, row))
    if isinstance(expr, Arith):
        return _arith(expr.op, evaluate(expr.left, key, row), evaluate(expr.right, key, row))
    vals = [evaluate(a, key, row) for a in expr.args]
    if expr.op == "not":
        return None if vals[0] is None else not vals[0]
    if expr.op == "and":
        if any(v is False for v in vals):
            return False
        return None if any(v is None for v in vals) else True
    if any(v is True for v in vals):
        return True
    return None if any(v is None for v in vals) else False


def _sort(
    rows: list[tuple[tuple[object, ...], tuple[object, ...]]],
    items: Sequence[OrderItem],
    keys: list[list[object]],
) -> list[int]:
    order = list(range(len(rows)))
    for pos in reversed(range(len(items))):
        item = items[pos]
        nulls_first = item.nulls_first if item.nulls_first is not None else item.desc
        # With reverse=True the flag order flips too; pick the flag so NULLs land as asked.
        null_flag = (1 if not nulls_first else 0) if not item.desc else (1 if nulls_first else 0)

        def sort_key(i: int, pos: int = pos, null_flag: int = null_flag) -> tuple[object, ...]:
            v = keys[i][pos]
            return (null_flag,) if v is None else (1 - null_flag, v)

        order.sort(key=sort_key, reverse=item.desc)
    return order


def postprocess(plan: Plan, noisy_answers: npt.ArrayLike) -> list[tuple[object, ...]]:
    """Rows of the statement's result from the answers to ``plan.batch`` (noisy or exact).

    Counts are rounded to integers and clamped at 0; SUM of integers is rounded; AVG is
    SUM / COUNT (NULL when the rounded count is not positive); then HAVING, ORDER BY
    (text ordered by code point, i.e. the C collation), OFFSET and LIMIT. Python values:
    ``int`` for int8, ``Decimal`` for numeric, ``float`` for float8, ``str`` for text,
    ``bool``, ``datetime.date``, ``None`` for NULL.
    """
    answers = np.asarray(noisy_answers, dtype=np.float64).reshape(-1)
    m = len(plan.measures)
    if answers.shape[0] != plan.batch.num_queries:
        raise ValueError("answers do not match the plan's batch")
    table = answers.reshape(plan.num_groups, m) if m else np.zeros((plan.num_groups, 0))
    post = plan.post
    out: list[tuple[tuple[object, ...], tuple[object, ...]]] = []
    sort_keys: list[list[object]] = []
    for key, row in zip(plan.group_keys, table, strict=True):
        if post.having is not None and evaluate(post.having, key, row) is not True:
            continue
        out.append((key, tuple(evaluate(e, key, row) for e in post.outputs)))
        sort_keys.append([evaluate(o.expr, key, row) for o in post.order_by])
    order = _sort(out, post.order_by, sort_keys) if post.order_by else list(range(len(out)))
    result = [out[i][1] for i in order]
    result = result[post.offset :]
    if post.limit is not None:
        result = result[: post.limit]
    return result
