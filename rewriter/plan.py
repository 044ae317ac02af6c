"""The intermediate representation: statements without sqlglot, and their expressions' values.

Everything below the parser speaks these small frozen values: expressions (:class:`AttrRef`,
:class:`Const`, :class:`Arith`, ... :data:`PostExpr`), conditions over cells (:data:`Pred`),
measures, a normalised statement (:class:`Logical`, with the public relations it joins:
:class:`Lookup`), and the :class:`Plan` handed to the DP core. A plan's ``batch`` (a
:class:`dp.domain.QueryBatch`) carries every linear query of the statement, laid out
group-major: row ``g * len(measures) + j`` is measure ``j`` restricted to group ``g``; the DP
core answers the batch (noisy ``W @ x``) and :func:`rewriter.answers.postprocess` turns the
answers into rows. Here too: :func:`evaluate_with`, an expression's value with PostgreSQL's
semantics (:mod:`rewriter.pgeval`), and window functions over rows (:func:`window_values`),
used by post-processing and by composed statements.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import TypeAlias, TypeVar

import numpy as np

from dp.domain import Domain, QueryBatch

from . import pgeval
from .errors import InvalidValueError
from .schema import TableDecl


@dataclass(frozen=True, slots=True)
class Param:
    """Parameter ``$n`` (``index`` = n - 1)."""

    index: int


# --- predicates over the cells of a view (sqlglot-free) --------------------------------------


@dataclass(frozen=True, slots=True)
class PCmp:
    attribute: str
    op: str
    value: object  # a Python literal value or a Param


@dataclass(frozen=True, slots=True)
class PIsNull:
    attribute: str


@dataclass(frozen=True, slots=True)
class PBool:
    """A bare boolean column."""

    attribute: str


@dataclass(frozen=True, slots=True)
class PConst:
    value: bool | None


@dataclass(frozen=True, slots=True)
class PLogic:
    op: str  # and, or, not
    args: tuple[Pred, ...]


@dataclass(frozen=True, slots=True)
class PExpr:
    """Any other condition: a boolean expression over attributes (:class:`AttrRef`),
    evaluated over the public values of the attributes it reads."""

    expr: PostExpr


Pred: TypeAlias = PCmp | PIsNull | PBool | PConst | PLogic | PExpr


class MeasureKind(Enum):
    """A linear query per group: rows counted, non-NULL values counted, values summed, squares
    of values summed, or one count per public value of an expression (a histogram)."""

    COUNT_STAR = "count_star"
    COUNT = "count"
    SUM = "sum"
    SUMSQ = "sumsq"
    HIST = "hist"


@dataclass(frozen=True, slots=True, kw_only=True)
class Measure:
    """``kind`` over ``attribute`` (a declared column) or ``expr`` (an expression over
    attributes), restricted to the cells where ``filter`` (an aggregate's ``FILTER (WHERE
    ...)``) holds. COUNT counts the cells where the column or expression is not NULL."""

    kind: MeasureKind
    attribute: str | None = None
    expr: PostExpr | None = None
    filter: Pred | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputColumn:
    """A result column as PostgreSQL describes it: name and type OID."""

    name: str
    type_oid: int


# --- expressions (over attributes in a cell, or over group keys and noisy aggregates) -------


@dataclass(frozen=True, slots=True, kw_only=True)
class AttrRef:
    """The value of declared attribute ``name`` in a cell (cell-level expressions only)."""

    name: str
    pg_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRef:
    """The value of group key ``index``, converted to ``pg_type``."""

    index: int
    pg_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AggRef:
    """An aggregate made from the group's noisy measures (indexes into the plan's measures).

    ``count``: measure ``value``. ``sum``: measure ``value`` times ``scale`` (NULL when measure
    ``count`` rounds to 0). ``avg``: ``value`` / ``count``, within the range its argument takes
    in the group. ``var_pop``/``var_samp``/``stddev_pop``/``stddev_samp``: from ``count``,
    ``value`` (sum) and ``square`` (sum of squares). ``percentile_cont``/``percentile_disc``
    (at ``fraction``), ``min``, ``max``, ``count_distinct`` and ``mode``: from the histogram
    measure ``value``. ``bound``: ``"low"``/``"high"`` for ``lapras_interval_low/high(<aggregate>)``,
    an end of the aggregate's 95% interval (:mod:`rewriter.intervals`).
    """

    func: str
    value: int
    count: int | None = None
    square: int | None = None
    scale: int = 1
    fraction: float | None = None
    pg_type: str = "int8"
    integral: bool = True  # the argument takes integer values only
    desc: bool = False  # mode() WITHIN GROUP (ORDER BY x DESC): a tie goes to the last value
    #: Part of an average written out, ``sum(x) / count(x)`` of the same rows
    #: (:func:`rewriter.domaincheck.mark_ratios`).
    ratio: bool = False
    bound: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Const:
    value: object
    pg_type: str = ""


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
    op: str  # + - * / %
    left: PostExpr
    right: PostExpr
    pg_type: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Func:
    """A function of :data:`rewriter.pgeval.FUNCTIONS`, or one of the SQL forms
    ``isnull``, ``like``, ``ilike``, ``coalesce``, ``nullif``, ``neg``, ``distinct`` (IS
    DISTINCT FROM)."""

    name: str
    args: tuple[PostExpr, ...]
    pg_type: str
    arg_types: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    whens: tuple[tuple[PostExpr, PostExpr], ...]
    default: PostExpr | None
    pg_type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Cast:
    arg: PostExpr
    pg_type: str
    source: str
    typmod: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """A window function over the grouped result: ``func(arg, *args) OVER (PARTITION BY ...
    ORDER BY ... [frame])``, by default with PostgreSQL's default frame (sum, count, avg, min, max, row_number,
    rank, dense_rank, percent_rank, cume_dist, ntile, lag, lead, first_value, last_value,
    nth_value). ``args``: the arguments after the first (lag's offset and default, nth_value's
    position); ntile's bucket count is ``arg``."""

    func: str
    arg: PostExpr | None
    partition: tuple[PostExpr, ...]
    order: tuple[OrderItem, ...]
    pg_type: str
    args: tuple[PostExpr, ...] = ()
    frame: Frame | None = None  # None: PostgreSQL's default frame


@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """A window's frame: ``mode`` ROWS, GROUPS or RANGE; each bound one of
    ``unbounded_preceding``, ``preceding``, ``current``, ``following``,
    ``unbounded_following``, with its offset (a number of rows, or of peer groups)."""

    mode: str
    start: str
    end: str
    start_offset: int = 0
    end_offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupingRef:
    """``GROUPING(k1, k2, ...)`` of group keys ``keys``: a bit per key, the first the most
    significant, set when the row's grouping set does not group by that key (int4)."""

    keys: tuple[int, ...]
    pg_type: str = "int4"


PostExpr: TypeAlias = (
    KeyRef
    | AggRef
    | Const
    | Compare
    | Logic
    | Arith
    | AttrRef
    | Func
    | Case
    | Cast
    | Window
    | GroupingRef
)


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
    distinct: bool = False
    count_rows: bool = False  # the result is one row: the number of rows above


@dataclass(frozen=True, slots=True, kw_only=True)
class Fingerprint:
    """A template (literals -> ``$n`` placeholders), its literal bindings and a stable key."""

    template: str
    bindings: tuple[object, ...]
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Where measure ``j``'s answers sit in a group's rows of the batch: ``width`` rows from
    ``offset`` (one, or one per value of a histogram), each measuring the value divided by
    ``scale``; ``values``: a histogram's public values in ascending order."""

    offset: int
    width: int
    scale: float
    values: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A DP statement reduced to linear queries over the marginal of the columns it uses.

    The batch is group-major: group ``g``'s rows are ``g * row_width`` to ``(g + 1) *
    row_width``; ``layouts`` say where each measure's rows are. ``ranges[g][j]``: the smallest
    and largest value measure ``j``'s expression takes in group ``g`` (public: from the
    domain), or None.
    """

    table: str  # schema-qualified
    view: str
    domain: Domain
    batch: QueryBatch
    measures: tuple[Measure, ...]
    columns: tuple[OutputColumn, ...]
    group_keys: tuple[tuple[object, ...], ...]  # one per group, in batch order
    post: PostProcess
    fingerprint: Fingerprint
    layouts: tuple[Layout, ...] = ()
    ranges: tuple[tuple[tuple[float, float] | None, ...], ...] = ()
    parts: tuple[Plan, ...] = ()  # a UNION: the branches, their batches stacked in ``batch``
    # per group, the indexes of the keys its grouping set groups by (ROLLUP, CUBE, GROUPING
    # SETS; empty: every group is grouped by every key), for GROUPING()
    grouped: tuple[tuple[int, ...], ...] = ()

    @property
    def num_groups(self) -> int:
        return len(self.group_keys)

    @property
    def row_width(self) -> int:
        # identical measures share one layout: the row is as wide as its last layout's end
        if not self.layouts:
            return len(self.measures)
        return max(lay.offset + lay.width for lay in self.layouts)


def nodes(e: object) -> Iterator[object]:
    """Every node of a value of the IR (an expression, a predicate, tuples of them), in
    pre-order, left to right."""
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple):
            stack.extend(reversed(x))
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            yield x
            stack.extend(reversed([getattr(x, f.name) for f in dataclasses.fields(x)]))


_IR = TypeVar("_IR")


def transform(e: _IR, fn: Callable[[object], object | None]) -> _IR:
    """``e`` with every node for which ``fn`` returns a value replaced by it (a rebuild of
    the frozen IR; tuples are rebuilt element by element)."""
    got = fn(e)
    if got is not None:
        return got  # type: ignore[return-value]
    if isinstance(e, tuple):
        return tuple(transform(x, fn) for x in e)  # type: ignore[return-value]
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        changes = {}
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            nv = transform(v, fn)
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(e, **changes) if changes else e
    return e


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup:
    """A public relation of a normalised statement: its alias, the axis it is over among the
    statement's cells, how it is joined, its columns and their types, its rows (values of
    those types; None until a declared table's rows are bound:
    :func:`rewriter.lookups.filled`) and the join
    condition (``inner`` joins: in the WHERE; ``notin``: ``on`` the subquery's condition,
    ``member`` the comparison); ``sql``: how templates write it."""

    alias: str
    axis: str
    join: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...] | None
    table: str | None = None
    on: Pred | None = None
    member: Pred | None = None
    sql: str = ""


Value: TypeAlias = object  # a Python literal value or a Param


@dataclass(frozen=True, slots=True, kw_only=True)
class Logical:
    """A normalised DP statement (may still contain :class:`Param` values).

    ``group_by``: the grouping expressions over attributes (an :class:`AttrRef` for a plain
    column); ``grouping_sets``: for ``ROLLUP``/``CUBE``/``GROUPING SETS``, the indexes of
    ``group_by`` each set groups by (empty: one set of all of them).
    """

    table: TableDecl = field(repr=False)
    columns: tuple[OutputColumn, ...]
    outputs: tuple[PostExpr, ...]
    where: Pred | None
    group_by: tuple[PostExpr, ...]
    measures: tuple[Measure, ...]
    having: PostExpr | None
    order_by: tuple[OrderItem, ...]
    limit: Value | None
    offset: Value | None
    param_types: tuple[int, ...]
    attributes: frozenset[str]
    template: str
    bindings: tuple[Value, ...]
    zero_rows: bool = False
    grouping_sets: tuple[tuple[int, ...], ...] = ()
    distinct: bool = False
    count_rows: bool = False  # the result is the number of rows (a count of groups)
    branches: tuple[Logical, ...] = ()  # UNION [ALL]: the branches (this one is their union)
    #: The public relations it joins (:class:`Lookup`, rewriter.lookups); ``table`` then has
    #: their axes.
    lookups: tuple[Lookup, ...] = ()


def typed_const(v: object, t: str, zone: str = "UTC") -> Const:
    """An untyped literal given the type of what it is compared or combined with (``zone``:
    the session's TimeZone, for a ``timestamp with time zone``)."""
    if isinstance(v, str) and t != "unknown":
        try:
            return Const(value=pgeval.cast(v, "unknown", t, zone=zone), pg_type=t)
        except pgeval.EvalError as e:
            raise InvalidValueError(e.message) from None
        except pgeval.TypeMismatch:
            return Const(value=v, pg_type="text")
    return Const(value=v, pg_type=t if v is None else pgeval.literal_type(v))


# --- evaluation --------------------------------------------------------------------------

_CTX = decimal.Context(prec=28)


def _round_int(x: float) -> int:
    return int(np.rint(x))


def widen(value: object, pg_type: str) -> object:
    """A value of a numeric type as a value of the wider numeric type ``pg_type``."""
    if value is None or isinstance(value, bool):
        return value
    if pg_type == "numeric" and isinstance(value, int | float):
        return pgeval.to_decimal(value)
    if pg_type in ("float8", "float4") and isinstance(value, int | Decimal):
        return float(value)
    return value


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


Leaf = Callable[[PostExpr], object]


def evaluate_with(expr: PostExpr, leaf: Leaf) -> object:
    """The value of ``expr``; ``leaf`` gives the values of :class:`KeyRef`, :class:`AggRef`,
    :class:`AttrRef` and :class:`Window` nodes. PostgreSQL's semantics (:mod:`rewriter.pgeval`)."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Compare):
        return pgeval.compare(
            expr.op, evaluate_with(expr.left, leaf), evaluate_with(expr.right, leaf)
        )
    if isinstance(expr, Logic):
        return pgeval.logic(expr.op, [evaluate_with(a, leaf) for a in expr.args])
    if isinstance(expr, Arith):
        a, b = evaluate_with(expr.left, leaf), evaluate_with(expr.right, leaf)
        return pgeval.arith(expr.op, a, b, expr.pg_type or _legacy_type(a, b))
    if isinstance(expr, Func):
        return _func(expr, leaf)
    if isinstance(expr, Case):
        for cond, value in expr.whens:
            if evaluate_with(cond, leaf) is True:
                return widen(evaluate_with(value, leaf), expr.pg_type)
        return (
            None if expr.default is None else widen(evaluate_with(expr.default, leaf), expr.pg_type)
        )
    if isinstance(expr, Cast):
        return pgeval.cast(evaluate_with(expr.arg, leaf), expr.source, expr.pg_type, expr.typmod)
    return leaf(expr)


def _legacy_type(a: object, b: object) -> str:
    if isinstance(a, float) or isinstance(b, float):
        return "float8"
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return "numeric"
    return "int8"


def _func(expr: Func, leaf: Leaf) -> object:
    name = expr.name
    if name == "coalesce":
        for a in expr.args:
            v = evaluate_with(a, leaf)
            if v is not None:
                return widen(v, expr.pg_type)
        return None
    args = [evaluate_with(a, leaf) for a in expr.args]
    if name == "isnull":
        return args[0] is None
    if name in ("like", "ilike"):
        escape = args[2] if len(args) > 2 else None
        return pgeval.like(args[0], args[1], fold=name == "ilike", escape=escape)  # type: ignore[arg-type]
    if name == "nullif":
        return None if pgeval.compare("=", args[0], args[1]) is True else args[0]
    if name == "neg":
        return pgeval.negate(args[0])
    if name == "distinct":  # IS DISTINCT FROM
        if args[0] is None or args[1] is None:
            return (args[0] is None) != (args[1] is None)
        return pgeval.compare("<>", args[0], args[1])
    if name == "lookup_field":  # a column of a public relation's row (rewriter.lookups)
        row, k = args[0], args[1]
        return None if row is None else row[k]  # type: ignore[index]
    if name == "in":
        if args[0] is None:
            return None
        hits = [pgeval.compare("=", args[0], v) for v in args[1:]]
        return True if any(h is True for h in hits) else (None if None in hits else False)
    return pgeval.call(name, args, expr.arg_types, expr.pg_type)


def _sort(items: Sequence[OrderItem], keys: list[list[object]]) -> list[int]:
    """Indexes of ``keys`` in ORDER BY order (text by code point, i.e. the C collation)."""
    order = list(range(len(keys)))
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


def windows_of(exprs: object) -> list[Window]:
    """The distinct window functions of some expressions, in order of appearance."""
    found: list[Window] = []
    for node in nodes(exprs):
        if isinstance(node, Window) and node not in found:
            found.append(node)
    return found


def window_values(found: Sequence[Window], plain: Sequence[Leaf]) -> list[dict[Window, object]]:
    """The value of each window function of ``found`` for each row (``plain[i]`` gives row
    ``i``'s leaves), as PostgreSQL computes them (a value PostgreSQL would raise an error for
    with these noisy values, an argument ``100 / count(*)`` at a noisy count of zero or a sum
    out of range, is NULL, as in the select list: :func:`_post_eval`): partitions, the rows
    ordered in each (peers:
    rows equal in the ORDER BY), and the frame: by default from the partition's start to the
    current row's last peer (the whole partition when the window is not ordered), else the
    window's ROWS or GROUPS frame (:class:`Frame`). ``lag``
    and ``lead`` move by rows, ``ntile`` splits the partition into buckets whose sizes differ
    by at most one (the larger first), ``percent_rank`` is ``(rank - 1) / (rows - 1)`` and
    ``cume_dist`` the share of rows up to the current row's last peer."""
    out: list[dict[Window, object]] = [{} for _ in plain]
    for w in found:
        parts: dict[tuple[object, ...], list[int]] = {}
        for i, leaf in enumerate(plain):
            parts.setdefault(tuple(_post_eval(p, leaf) for p in w.partition), []).append(i)
        for members in parts.values():
            okeys = [[_post_eval(o.expr, plain[i]) for o in w.order] for i in members]
            ordered = [members[k] for k in _sort(w.order, okeys)] if w.order else members
            peers = [tuple(_post_eval(o.expr, plain[i]) for o in w.order) for i in ordered]
            args = [_post_eval(w.arg, plain[i]) if w.arg is not None else 1 for i in ordered]
            n = len(ordered)
            # peer groups: each row's group number, and each group's first and last row
            group = [0] * n
            for pos in range(1, n):
                same = not w.order or peers[pos] == peers[pos - 1]
                group[pos] = group[pos - 1] + (0 if same else 1)
            firsts: dict[int, int] = {}
            lasts: dict[int, int] = {}
            for pos, g in enumerate(group):
                firsts.setdefault(g, pos)
                lasts[g] = pos
            for pos, i in enumerate(ordered):
                here = group[pos]
                row = _Row(
                    pos=pos,
                    rank=firsts[here] + 1,
                    dense=here + 1,
                    last_peer=lasts[here],
                    frame=_frame(w.frame, pos, group, firsts, lasts),
                    n=n,
                )
                try:
                    out[i][w] = _window_row(w, row, args, plain[i])
                except pgeval.EvalError:  # as the select list's (_post_eval): NULL
                    out[i][w] = None
    return out


@dataclass(frozen=True, slots=True)
class _Row:
    """Where a row stands in its ordered partition: its position, rank and dense rank, its
    last peer, its frame's first and last row (first > last: an empty frame), the number of
    rows."""

    pos: int
    rank: int
    dense: int
    last_peer: int
    frame: tuple[int, int]
    n: int


def _frame(
    frame: Frame | None,
    pos: int,
    group: Sequence[int],
    firsts: dict[int, int],
    lasts: dict[int, int],
) -> tuple[int, int]:
    """The first and last row of a row's frame. The default frame is RANGE BETWEEN
    UNBOUNDED PRECEDING AND CURRENT ROW: from the first row to the row's last peer. ROWS
    offsets count rows; GROUPS offsets count peer groups (RANGE takes no offset here)."""
    n = len(group)
    g = group[pos]
    if frame is None:
        return 0, lasts[g]

    def bound(kind: str, offset: int, start: bool) -> int:
        if kind == "unbounded_preceding":
            return 0
        if kind == "unbounded_following":
            return n - 1
        step = 0 if kind == "current" else (-offset if kind == "preceding" else offset)
        if frame.mode == "rows":
            return pos + step
        target = g + step  # a peer group (GROUPS; RANGE with CURRENT ROW)
        if target < 0:
            return 0 if start else -1
        if target > group[-1]:
            return n if start else n - 1
        return firsts[target] if start else lasts[target]

    return bound(frame.start, frame.start_offset, True), bound(frame.end, frame.end_offset, False)


def _window_row(w: Window, row: _Row, args: Sequence[object], leaf: Leaf) -> object:
    """One row's value of window function ``w`` (see :func:`window_values`)."""
    func = w.func
    pos, n = row.pos, row.n
    if func == "row_number":
        return pos + 1
    if func == "rank":
        return row.rank
    if func == "dense_rank":
        return row.dense
    if func == "percent_rank":
        return 0.0 if n <= 1 else (row.rank - 1) / (n - 1)
    if func == "cume_dist":
        return (row.last_peer + 1) / n
    if func == "ntile":
        buckets = args[pos]
        if buckets is None:
            return None
        if not isinstance(buckets, int) or buckets <= 0:
            raise pgeval.EvalError("22014", "argument of ntile must be greater than zero")
        size, extra = divmod(n, buckets)
        big = extra * (size + 1)  # the first ``extra`` buckets hold one row more
        return pos // (size + 1) + 1 if pos < big else extra + (pos - big) // max(size, 1) + 1
    if func in ("lag", "lead"):
        extra_args = [evaluate_with(a, leaf) for a in w.args]
        offset = extra_args[0] if extra_args else 1
        if offset is None:
            return None
        at = pos - int(offset) if func == "lag" else pos + int(offset)  # type: ignore[call-overload]
        if 0 <= at < n:
            return widen(args[at], w.pg_type)
        return widen(extra_args[1], w.pg_type) if len(extra_args) > 1 else None
    lo, hi = max(row.frame[0], 0), min(row.frame[1], n - 1)
    frame = list(args[lo : hi + 1]) if lo <= hi else []
    if func in ("first_value", "last_value", "nth_value"):
        if func == "nth_value":
            nth = evaluate_with(w.args[0], leaf) if w.args else None
            if nth is None:
                return None
            if not isinstance(nth, int) or nth <= 0:
                raise pgeval.EvalError("22016", "argument of nth_value must be greater than zero")
            return widen(frame[nth - 1], w.pg_type) if nth <= len(frame) else None
        if not frame:
            return None
        return widen(frame[0] if func == "first_value" else frame[-1], w.pg_type)
    return _window_agg(w, [a for a in frame if a is not None], len(frame))


def _window_agg(w: Window, known: list[object], rows: int) -> object:
    if w.func == "count":
        return rows if w.arg is None else len(known)
    if not known:
        return None
    if w.func == "min":
        return min(known)  # type: ignore[type-var]
    if w.func == "max":
        return max(known)  # type: ignore[type-var]
    total: object = known[0]
    for v in known[1:]:
        total = pgeval.arith("+", widen(total, w.pg_type), widen(v, w.pg_type), w.pg_type)
    total = widen(total, w.pg_type)
    if w.func == "sum":
        return total
    if w.pg_type == "numeric":
        return pgeval.numeric_div(pgeval.to_decimal(total), Decimal(len(known)))
    return float(total) / len(known)  # type: ignore[arg-type]


def _post_eval(e: PostExpr, leaf: Leaf) -> object:
    """A select-list value; NULL where PostgreSQL would raise an error for these (noisy)
    values, e.g. a division by a noisy count of zero."""
    try:
        return evaluate_with(e, leaf)
    except pgeval.EvalError:
        return None
