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

import dataclasses
import datetime as dt
import decimal
import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from dp.domain import Domain, QueryBatch

from . import domaincheck, intervals, pgeval


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


@dataclass(frozen=True, slots=True)
class _Group:
    """One group's measures (unscaled; a histogram's as its noisy counts) and the ranges of
    their expressions; ``evidence``: their standard errors and which values can hold a row."""

    key: tuple[object, ...]
    values: tuple[object, ...]
    ranges: tuple[tuple[float, float] | None, ...]
    layouts: tuple[Layout, ...]
    grouped: tuple[int, ...] | None = None  # the keys of its grouping set (None: all)
    evidence: domaincheck.Evidence | None = None  # what the domain checks need


def _agg(ref: AggRef, g: _Group) -> object:
    func = ref.func
    v = g.values[ref.value]
    if func == "count":
        n = domaincheck.count_value(ref, max(0, _round_int(float(v))), g.evidence)  # type: ignore[arg-type]
        if ref.bound:
            lo, hi = intervals.outwards(*intervals.around(float(v), _se(g, ref.value)))  # type: ignore[arg-type]
            return max(0, min(lo, n)) if ref.bound == "low" else max(hi, n)
        return n
    if func == "exists":  # an existence test (rewriter.probes)
        return domaincheck.exists(ref.value, float(v), g.evidence)  # type: ignore[arg-type]
    if func in intervals.HISTOGRAM_FUNCS:
        hist = _hist(g.evidence, ref.value, g.layouts[ref.value].values, v)
        if func == "mode":
            return widen(intervals.mode(hist, desc=ref.desc), ref.pg_type)
        point, low, high = intervals.of_histogram(func, ref.fraction, hist)
        chosen = low if ref.bound == "low" else high if ref.bound == "high" else point
        return widen(chosen, ref.pg_type)
    assert ref.count is not None
    n = max(0, _round_int(float(g.values[ref.count])))  # type: ignore[arg-type]
    least = 2 if func.endswith("_samp") else 1
    if not domaincheck.holds(ref.count, least, g.evidence, n):
        return None  # over no (non-NULL) value: NULL (rewriter.domaincheck decides)
    total = float(v) * ref.scale  # type: ignore[arg-type]
    bounds = g.ranges[ref.value]
    if ref.bound:
        return _scalar_bound(ref, g, total, n, bounds)
    if func == "sum":
        total = domaincheck.sum_parts(ref, total, n, bounds, g.evidence)
        if ref.pg_type in ("int8", "int4", "int2") or (ref.pg_type == "numeric" and ref.integral):
            return widen(_round_int(total), ref.pg_type)  # a SUM of integers is an integer
        return widen(total, ref.pg_type)
    if func == "avg":
        total, n = domaincheck.mean_parts(total, n, bounds)
        mean = total / n
        if bounds is not None and not bounds[0] <= mean <= bounds[1]:
            total = n * min(max(mean, bounds[0]), bounds[1])
        if ref.pg_type == "numeric":
            s = Decimal(_round_int(total)) if ref.integral else pgeval.to_decimal(total)
            return pgeval.numeric_div(s, Decimal(n))
        return total / n
    # variance family: (n * sum of squares - sum^2) / (n * (n or n - 1)), never negative
    assert ref.square is not None
    sq = float(g.values[ref.square])  # type: ignore[arg-type]
    samp = func.endswith("_samp")
    n = max(n, least)
    var = max(0.0, (sq - total * total / n) / (n - 1 if samp else n))
    cap = None if bounds is None else ((bounds[1] - bounds[0]) / 2.0) ** 2 * n / max(n - 1, 1)
    if ref.pg_type == "numeric" and ref.integral and (cap is None or var <= cap):
        # PostgreSQL's numeric computation (numeric_stddev_internal) on the rounded sums
        num = n * _round_int(sq) - _round_int(total) ** 2
        if num <= 0:
            return Decimal(0)
        return pgeval.numeric_variance(
            Decimal(num), Decimal(n * (n - 1 if samp else n)), root=func.startswith("stddev")
        )
    if cap is not None:
        var = min(var, cap)
    out = var**0.5 if func.startswith("stddev") else var
    if ref.pg_type == "numeric":
        return pgeval.to_decimal(out).quantize(Decimal(1).scaleb(-16), context=_CTX)
    return out


def _hist(
    ev: domaincheck.Evidence | None, j: int, values: tuple[object, ...], counts: object
) -> intervals.Hist:
    """Histogram measure ``j`` of a group: its noisy counts, standard errors and reachable
    values from the group's evidence (else ``counts``, exact)."""
    if ev is None or not ev.raw:
        return intervals.hist_of(values, counts)  # type: ignore[arg-type]
    return intervals.hist_of(values, ev.raw[j], ev.errors[j], ev.values[j])  # type: ignore[arg-type]


def _se(g: _Group, j: int | None) -> float:
    """The standard error of measure ``j`` of the group (0: exact)."""
    if g.evidence is None or j is None or not g.evidence.errors:
        return 0.0
    se = g.evidence.errors[j]
    return float(se) if isinstance(se, float) else 0.0


def _scalar_bound(
    ref: AggRef, g: _Group, total: float, n: int, bounds: tuple[float, float] | None
) -> object:
    """An end of the 95% interval of a SUM or AVG (:mod:`rewriter.intervals`), holding the
    answer itself, on the side of 0 its argument's range allows, an AVG within that range (all
    of it when its noisy count rounds to 0)."""
    se = _se(g, ref.value) * ref.scale
    point = _agg(dataclasses.replace(ref, bound=""), g)
    if point is None:
        return None
    if ref.func == "avg":
        if n > 0:
            se = intervals.avg_error(total, n, se, _se(g, ref.count))
            low, high = intervals.around(total / n, se)
        elif bounds is not None:
            low, high = bounds
        else:
            low = high = float(point)  # type: ignore[arg-type]
        if bounds is not None:
            low, high = max(low, bounds[0]), min(high, bounds[1])
    elif ref.func == "sum":
        low, high = intervals.around(total, se)
        if bounds is not None:
            low = max(low, 0.0) if bounds[0] >= 0 else low
            high = min(high, 0.0) if bounds[1] <= 0 else high
    else:
        raise ValueError(f"no interval of {ref.func}")
    p = float(point)  # type: ignore[arg-type]
    low, high = min(low, p), max(high, p)
    if ref.pg_type in ("int8", "int4", "int2") or (
        ref.func == "sum" and ref.pg_type == "numeric" and ref.integral
    ):
        return widen(intervals.outwards(low, high)[0 if ref.bound == "low" else 1], ref.pg_type)
    end = low if ref.bound == "low" else high
    if end == p:
        return point  # exact, or on the side of the range the answer is on: the answer itself
    if ref.pg_type == "numeric":
        return pgeval.to_decimal(end).quantize(Decimal(1).scaleb(-16), context=_CTX)
    return end


def _leaf(e: PostExpr, g: _Group, windows: dict[Window, object]) -> object:
    if isinstance(e, KeyRef):
        return _convert_key(g.key[e.index], e.pg_type)
    if isinstance(e, AggRef):
        return _agg(e, g)
    if isinstance(e, Window):
        return windows[e]
    if isinstance(e, GroupingRef):
        bits = 0
        for k in e.keys:
            bits = bits * 2 + (0 if g.grouped is None or k in g.grouped else 1)
        return bits
    raise ValueError("a cell attribute in a post-processing expression")


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


def _windows(exprs: Sequence[PostExpr], groups: Sequence[_Group]) -> list[dict[Window, object]]:
    """The value of every window function of ``exprs`` for each group (the rows after
    HAVING): :func:`window_values` over the groups."""
    found = windows_of(exprs)
    if not found:
        return [{} for _ in groups]
    return window_values(found, [functools.partial(_plain_leaf, g) for g in groups])


def _plain_leaf(g: _Group, e: PostExpr) -> object:
    return _leaf(e, g, {})


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


def group_values(plan: Plan, answers: npt.NDArray[np.float64]) -> list[tuple[object, ...]]:
    """Each group's measures from the batch's answers: unscaled values (a histogram's noisy
    counts; their standard errors and which values can hold a row are in the group's
    :class:`domaincheck.Evidence`, its statistics in :mod:`rewriter.intervals`)."""
    width = plan.row_width
    table = answers.reshape(plan.num_groups, width) if width else np.zeros((plan.num_groups, 0))
    layouts = plan.layouts or tuple(Layout(offset=j, width=1, scale=1.0) for j in range(width))
    out: list[tuple[object, ...]] = []
    for g in range(plan.num_groups):
        vals: list[object] = []
        for lay in layouts:
            cells = table[g, lay.offset : lay.offset + lay.width] * lay.scale
            if lay.values:
                vals.append(cells)
            else:
                vals.append(float(cells[0]))
        out.append(tuple(vals))
    return out


def _split(plan: Plan, values: npt.NDArray[np.float64]) -> list[npt.NDArray[np.float64]]:
    bounds = np.cumsum([0, *(p.batch.num_queries for p in plan.parts)])
    return [values[a:b] for a, b in itertools.pairwise(bounds)]


def _union_rows(
    plan: Plan, answers: npt.NDArray[np.float64], se: npt.NDArray[np.float64] | None
) -> list[tuple[object, ...]]:
    """A UNION's rows: each branch's, concatenated; UNION (not ALL) drops duplicate rows;
    then the union's ORDER BY (by output column), OFFSET and LIMIT."""
    errs = _split(plan, se) if se is not None else [None] * len(plan.parts)
    rows: list[tuple[object, ...]] = []
    for part, ans, err in zip(plan.parts, _split(plan, answers), errs, strict=True):
        rows.extend(postprocess(part, ans, err))
    post = plan.post
    if post.distinct:
        rows = list(dict.fromkeys(rows))
    if post.order_by:
        keys = [[r[o.expr.index] for o in post.order_by] for r in rows]  # type: ignore[union-attr]
        rows = [rows[i] for i in _sort(post.order_by, keys)]
    rows = rows[post.offset :]
    return rows if post.limit is None else rows[: post.limit]


def _post_eval(e: PostExpr, leaf: Leaf) -> object:
    """A select-list value; NULL where PostgreSQL would raise an error for these (noisy)
    values, e.g. a division by a noisy count of zero."""
    try:
        return evaluate_with(e, leaf)
    except pgeval.EvalError:
        return None


def postprocess(
    plan: Plan, noisy_answers: npt.ArrayLike, std_errors: npt.ArrayLike | None = None
) -> list[tuple[object, ...]]:
    """Rows of the statement's result from the answers to ``plan.batch`` (noisy or exact).

    Counts are rounded to integers and clamped at 0; SUM of integers is rounded and kept in
    the range its argument allows for the count; AVG is SUM / COUNT (NULL when the rounded
    count is not positive), within the range of its argument in the group; statistics come
    from the group's noisy histogram (:func:`group_values`); then HAVING, window functions,
    DISTINCT, ORDER BY (text ordered by code point, i.e. the C collation), OFFSET and LIMIT.
    All of it is post-processing of the answers. Python values: ``int`` for int8,
    ``Decimal`` for numeric, ``float`` for float8, ``str`` for text, ``bool``,
    ``datetime.date``, ``None`` for NULL.
    """
    answers = np.asarray(noisy_answers, dtype=np.float64).reshape(-1)
    if answers.shape[0] != plan.batch.num_queries:
        raise ValueError("answers do not match the plan's batch")
    se = None if std_errors is None else np.asarray(std_errors, dtype=np.float64).reshape(-1)
    if plan.parts:
        return _union_rows(plan, answers, se)
    layouts = plan.layouts or tuple(
        Layout(offset=j, width=1, scale=1.0) for j in range(plan.row_width)
    )
    ranges = plan.ranges or tuple((None,) * len(layouts) for _ in plan.group_keys)
    post = plan.post
    sets = plan.grouped or (None,) * plan.num_groups
    groups = [
        _Group(key=key, values=vals, ranges=rng, layouts=layouts, grouped=one, evidence=ev)
        for key, vals, rng, one, ev in zip(
            plan.group_keys,
            group_values(plan, answers),
            ranges,
            sets,
            domaincheck.evidence(plan, answers, se),
            strict=True,
        )
    ]
    if post.having is not None:
        having = post.having

        def kept(g: _Group) -> bool:
            return _post_eval(having, lambda e: _leaf(e, g, {})) is True

        groups = [g for g in groups if kept(g)]
    windows = _windows((*post.outputs, *(o.expr for o in post.order_by)), groups)
    rows: list[tuple[object, ...]] = []
    keys: list[list[object]] = []
    seen: set[tuple[object, ...]] = set()
    for g, win in zip(groups, windows, strict=True):

        def leaf(e: PostExpr, g: _Group = g, win: dict[Window, object] = win) -> object:
            return _leaf(e, g, win)

        row = tuple(_post_eval(e, leaf) for e in post.outputs)
        if post.distinct:
            if row in seen:
                continue
            seen.add(row)
        rows.append(row)
        keys.append([_post_eval(o.expr, leaf) for o in post.order_by])
    order = _sort(post.order_by, keys) if post.order_by else list(range(len(rows)))
    result = [rows[i] for i in order][post.offset :]
    if post.limit is not None:
        result = result[: post.limit]
    return [(len(result),)] if post.count_rows else result


def aggregate_errors(
    plan: Plan, answers: npt.ArrayLike, std_errors: npt.ArrayLike, names: Sequence[str]
) -> list[tuple[str, float, float]]:
    """Each aggregate of the select list with the smallest and largest standard error of its
    value over the groups: counts and sums from the noise of their own rows (times their
    scale); an AVG by the delta method from its sum's and count's errors at the noisy values.
    MIN/MAX/percentiles/COUNT(DISTINCT) have intervals instead (:func:`histogram_intervals`);
    variances and ``mode`` are left out (no simple expression); so are
    ``lapras_interval_low/high``. ``names``: the aggregates' labels, one per output column.
    Post-processing of public noise scales and noisy answers only."""
    flat = np.asarray(answers, dtype=np.float64).reshape(-1)
    if plan.post.count_rows:
        return []  # the number of groups (after HAVING): no simple expression either
    if plan.parts:
        sef = np.asarray(std_errors, dtype=np.float64).reshape(-1)
        merged: dict[str, tuple[float, float]] = {}
        for part, a_part, s_part in zip(
            plan.parts, _split(plan, flat), _split(plan, sef), strict=True
        ):
            for label, low, high in aggregate_errors(part, a_part, s_part, names):
                lo0, hi0 = merged.get(label, (low, high))
                merged[label] = (min(lo0, low), max(hi0, high))
        return [(k, lo, hi) for k, (lo, hi) in merged.items()]
    width = plan.row_width
    if not width or flat.shape[0] != plan.num_groups * width:
        return []
    a = flat.reshape(plan.num_groups, width)
    se = np.asarray(std_errors, dtype=np.float64).reshape(plan.num_groups, width)
    out: list[tuple[str, float, float]] = []
    for expr, name in zip(plan.post.outputs, names, strict=True):
        ref = expr if isinstance(expr, AggRef) else _first_agg(expr)
        if (
            ref is None
            or ref.bound
            or ref.func.startswith(("var", "stddev"))
            or ref.func in intervals.HISTOGRAM_FUNCS
        ):
            continue
        lay = plan.layouts[ref.value]
        errs = se[:, lay.offset] * lay.scale * ref.scale
        if ref.func == "avg" and ref.count is not None:
            c = plan.layouts[ref.count]
            n = np.maximum(np.rint(a[:, c.offset] * c.scale), 1.0)
            mean = a[:, lay.offset] * lay.scale * ref.scale / n
            errs = np.sqrt(errs**2 + (mean * se[:, c.offset] * c.scale) ** 2) / n
        label = name if isinstance(expr, AggRef) else f"{ref.func} in {name}"
        out.append((label, float(errs.min()), float(errs.max())))
    return out


def histogram_intervals(
    plan: Plan, answers: npt.ArrayLike, std_errors: npt.ArrayLike, names: Sequence[str]
) -> list[str]:
    """The 95% interval of each MIN, MAX, percentile and COUNT(DISTINCT) of the select list
    (:mod:`dp.stats`, from the group's noisy histogram), as NOTICE text: ``max 84 to 90`` for
    one group; over several groups, how wide the intervals are (``max 2 to 12 wide``), or
    ``per group`` for values without a width (text). Post-processing only."""
    flat = np.asarray(answers, dtype=np.float64).reshape(-1)
    sef = np.asarray(std_errors, dtype=np.float64).reshape(-1)
    if plan.post.count_rows:
        return []  # the number of groups (after HAVING) is the output, not these aggregates
    if plan.parts:
        return [
            text
            for part, a_part, s_part in zip(
                plan.parts, _split(plan, flat), _split(plan, sef), strict=True
            )
            for text in histogram_intervals(part, a_part, s_part, names)
        ]
    if not plan.row_width or flat.shape[0] != plan.num_groups * plan.row_width:
        return []
    evidence = domaincheck.evidence(plan, flat, sef)
    out: list[str] = []
    for expr, name in zip(plan.post.outputs, names, strict=True):
        ref = expr if isinstance(expr, AggRef) else _first_agg(expr)
        if ref is None or ref.bound or ref.func not in intervals.INTERVAL_FUNCS:
            continue
        label = name if isinstance(expr, AggRef) else f"{ref.func} in {name}"
        values = plan.layouts[ref.value].values
        ends = [
            intervals.of_histogram(ref.func, ref.fraction, _hist(ev, ref.value, values, None))[1:]
            for ev in evidence
        ]
        ends = [(lo, hi) for lo, hi in ends if lo is not None]
        if not ends:
            continue
        if plan.num_groups == 1:
            out.append(f"{label} {_text(ends[0][0])} to {_text(ends[0][1])}")
        elif all(isinstance(x, int | float | Decimal) for e in ends for x in e):
            widths = [float(hi) - float(lo) for lo, hi in ends]  # type: ignore[arg-type]
            out.append(f"{label} {min(widths):.4g} to {max(widths):.4g} wide")
        else:
            out.append(f"{label} per group")
    return out


def _text(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _first_agg(e: object) -> AggRef | None:
    return next((n for n in nodes(e) if isinstance(n, AggRef)), None)
