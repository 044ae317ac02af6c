"""No impossible answers: every released value kept inside the domain its SQL type and the
declaration allow, and never NULL on the word of noise alone.

An answer may be noisy; it must never be impossible. :func:`rewriter.answers.postprocess` turns
the noisy answers of a batch into rows; the checks here sit inside it, as post-processing of
the noisy answers and of public facts only (the declared domains, the statement, the public
noise scales), so they cost no privacy:

- **NULL only when no row can be there.** ``SUM``/``AVG``/``min``/``max``/percentiles are NULL
  over no (non-NULL) value, as in PostgreSQL. Whether a group holds rows is the data's secret:
  a noisy answer is NULL only when no declared value can reach the group (public: its rows of
  the batch are all zero), never because its noisy count rounds to zero (a group of thousands
  of rows measured with a noisy count of zero was answered NULL before). Exact answers
  (standard error 0, noise off) keep PostgreSQL's rule: NULL when the count is 0 (one for
  ``var_samp``/``stddev_samp``).
- **Counts** are integers ``>= 0`` (as before), and a count never exceeds another count of the
  same statement that counts a superset of its rows (``count(*) FILTER (WHERE c) <=
  count(*)``, ``count(x) <= count(*)``): which measure contains which is read from the batch's
  public weights.
- **SUM** stays in ``[n lo, n hi]`` (``[lo, hi]``: the range its argument takes in the group
  under the statement's conditions, public) when the statement releases the count ``n`` of the
  same rows; otherwise (the count is only measured to tell NULL apart, at a quarter of the
  weight, so four times as noisy) only its sign is kept (``>= 0`` when ``lo >= 0``, ``<= 0``
  when ``hi <= 0``): clamping by a count that noisy biased sums of big groups towards zero.
- **AVG** stays in ``[lo, hi]``; when the noisy count rounds to zero, it is the middle of
  ``[lo, hi]`` (no information on the mean).
- **An average written out**, ``sum(x) [FILTER (WHERE c)] / count(x) [FILTER (WHERE c)]``
  (with casts: ``sum(x)::numeric / count(*)``), is answered as an average of the same rows
  (:func:`mark_ratios`): the sum is kept in ``[n lo, n hi]`` of the count it is divided by,
  and a count that rounds to zero while the group holds rows divides as one (with the sum the
  middle of the range). PostgreSQL's types are kept (``int8 / int8`` still truncates).
- **min, max, percentiles, count(DISTINCT x)** come from the noisy histogram of ``x``
  (:mod:`rewriter.intervals`, from the ``Evidence`` here): only values a row of the group can
  have (public) are read.

Each value thus lies in the declared domain of its argument; the property test
``tests/rewriter/test_domaincheck.py`` draws random statements of every supported kind, answers
them with the engine's real noise and checks it against PostgreSQL (docs/sql.md §2.2).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .plan import (
    AggRef,
    Arith,
    Cast,
    Layout,
    Logical,
    MeasureKind,
    Plan,
    PostExpr,
    nodes,
    transform,
)


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the checks know of one group beyond its values: per measure, the noisy answer
    (scaled back; an array for a histogram), its standard error, whether a row can be there at
    all (public), the count measures that count a superset of its rows (public), and whether
    the statement releases it (public)."""

    raw: tuple[object, ...]
    errors: tuple[object, ...]
    reachable: tuple[bool, ...]
    within: tuple[tuple[int, ...], ...]
    asked: tuple[bool, ...]
    #: Per histogram measure, which of its values a row of the group can have (public).
    values: tuple[object, ...] = ()


def evidence(
    plan: Plan, answers: npt.NDArray[np.float64], se: npt.NDArray[np.float64] | None
) -> list[Evidence]:
    """Each group's :class:`Evidence`, from the batch's answers and standard errors (None:
    exact answers) and the plan's public weights."""
    width = plan.row_width
    groups = plan.num_groups
    layouts = plan.layouts or tuple(Layout(offset=j, width=1, scale=1.0) for j in range(width))
    if not width:
        return [Evidence((), (), (), (), ()) for _ in range(groups)]
    table = answers.reshape(groups, width)
    errs = np.zeros_like(table) if se is None else se.reshape(groups, width)
    matrix = plan.batch.matrix
    nonzero = np.diff(matrix.indptr).reshape(groups, width) > 0
    within = _within(plan, layouts)
    asked = _asked(plan)
    out: list[Evidence] = []
    for g in range(groups):
        raw: list[object] = []
        err: list[object] = []
        reach: list[bool] = []
        per_value: list[object] = []
        for lay in layouts:
            cells = slice(lay.offset, lay.offset + lay.width)
            values = table[g, cells] * lay.scale
            errors = errs[g, cells] * abs(lay.scale)
            if lay.values:
                raw.append(values)
                err.append(errors)
            else:
                raw.append(float(values[0]))
                err.append(float(errors[0]))
            reach.append(bool(nonzero[g, cells].any()))
            per_value.append(nonzero[g, cells] if lay.values else None)
        out.append(
            Evidence(tuple(raw), tuple(err), tuple(reach), within[g], asked, tuple(per_value))
        )
    return out


def holds(j: int, least: int, ev: Evidence | None, n: int) -> bool:
    """Whether the group holds at least ``least`` rows of measure ``j`` (a count), by the rule
    of the module doc; ``n`` is its rounded noisy count (all there is without evidence)."""
    if ev is None or not ev.reachable:
        return n >= least
    if not ev.reachable[j]:
        return False
    se = ev.errors[j]
    assert isinstance(se, float)
    return se > 0 or n >= least


def count_value(ref: AggRef, n: int, ev: Evidence | None) -> int:
    """A released count (``n``: rounded, at least 0): at most each count of a superset of its
    rows in the same statement; as a divisor of an average written out, at least one when
    the group holds rows."""
    if ev is not None and ev.within:
        for k in ev.within[ref.value]:
            raw = ev.raw[k]
            assert isinstance(raw, float)
            n = min(n, max(0, round(raw)))
    if ref.ratio and n == 0 and holds(ref.value, 1, ev, n):
        return 1
    return n


def sum_parts(
    ref: AggRef, total: float, n: int, bounds: tuple[float, float] | None, ev: Evidence | None
) -> float:
    """A SUM inside its domain: ``[n lo, n hi]`` when the statement releases its count ``n``
    (or the sum is divided by it), else its sign only; the middle of the range for a sum
    divided by a count that rounds to zero."""
    if bounds is None:
        return total
    lo, hi = bounds
    asked = ev is None or not ev.asked or (ref.count is not None and ev.asked[ref.count])
    if ref.ratio:
        n = count_value(dataclasses.replace(ref, value=ref.count or 0), n, ev)
        if n == 0:
            return 0.0
        if ref.count is not None and ev is not None and ev.raw and round(_raw(ev, ref.count)) <= 0:
            return n * (lo + hi) / 2.0
        return min(max(total, n * lo), n * hi)
    if asked:
        return min(max(total, n * lo), n * hi)
    if lo >= 0:
        total = max(total, 0.0)
    if hi <= 0:
        total = min(total, 0.0)
    return total


def exists(j: int, value: float, ev: Evidence | None) -> bool:
    """An existence test (rewriter.probes) on count measure ``j`` (noisy ``value``): true when
    the noisy count rounds to at least 1 — the count ``SELECT count(*)`` of the same rows shows,
    so both agree, and with exact answers whether a row exists — and some declared value can
    be there (public)."""
    if ev is not None and ev.reachable and not ev.reachable[j]:
        return False
    return value >= 0.5


def mean_parts(total: float, n: int, bounds: tuple[float, float] | None) -> tuple[float, int]:
    """The sum and count an AVG divides: the middle of its range, once, when the noisy count
    rounds to zero (the group holds rows: :func:`holds`)."""
    if n > 0:
        return total, n
    if bounds is None:
        return 0.0, 1
    return (bounds[0] + bounds[1]) / 2.0, 1


def _raw(ev: Evidence, j: int) -> float:
    raw = ev.raw[j]
    assert isinstance(raw, float)
    return raw


# --- which count contains which (public: the batch's weights) --------------------------------

#: Containment of count measures, by batch key and measures (a repeat reuses it). Used from
#: several threads: each use is one call on the OrderedDict (atomic under the interpreter
#: lock), as for rewriter.reduce's caches.
_WITHIN: OrderedDict[tuple[object, ...], list[tuple[tuple[int, ...], ...]]] = OrderedDict()
_WITHIN_SIZE = 256


def _within(plan: Plan, layouts: Sequence[Layout]) -> list[tuple[tuple[int, ...], ...]]:
    """Per group, per measure: the count measures whose rows are a superset of its own (a
    count measure only; weights compared cell by cell, so multiplicities count too)."""
    counts = [
        j
        for j, m in enumerate(plan.measures)
        if m.kind in (MeasureKind.COUNT_STAR, MeasureKind.COUNT)
    ]
    empty = tuple(() for _ in plan.measures)
    if len(counts) < 2:
        return [empty] * plan.num_groups
    key = (plan.batch.key, plan.measures, tuple(layouts))
    hit = _WITHIN.get(key)
    if hit is not None:
        with contextlib.suppress(KeyError):  # dropped meanwhile by another thread
            _WITHIN.move_to_end(key)
        return hit
    m = plan.batch.matrix
    width = plan.row_width
    out: list[tuple[tuple[int, ...], ...]] = []
    for g in range(plan.num_groups):
        rows = {}
        for j in counts:
            lay = layouts[j]
            r = g * width + lay.offset
            lo, hi = int(m.indptr[r]), int(m.indptr[r + 1])
            rows[j] = (m.indices[lo:hi], m.data[lo:hi] * lay.scale)
        per: list[tuple[int, ...]] = []
        for j in range(len(plan.measures)):
            if j not in rows:
                per.append(())
                continue
            cols, w = rows[j]
            sup = []
            for k in counts:
                if k == j:
                    continue
                kc, kw = rows[k]
                if _contains(kc, kw, cols, w):
                    sup.append(k)
            per.append(tuple(sup))
        out.append(tuple(per))
    _WITHIN[key] = out
    while len(_WITHIN) > _WITHIN_SIZE:
        try:
            _WITHIN.popitem(last=False)
        except KeyError:
            break
    return out


def _contains(
    big_cols: npt.NDArray[np.int32],
    big_w: npt.NDArray[np.float64],
    cols: npt.NDArray[np.int32],
    w: npt.NDArray[np.float64],
) -> bool:
    """Whether every cell of ``cols`` is in ``big_cols`` with at least its weight (both sorted:
    canonical CSR rows)."""
    if cols.size == 0:
        return True
    if cols.size > big_cols.size:
        return False
    at = np.searchsorted(big_cols, cols)
    if np.any(at >= big_cols.size):
        return False
    return bool(np.all(big_cols[at] == cols) and np.all(big_w[at] >= w - 1e-9))


def _asked(plan: Plan) -> tuple[bool, ...]:
    """For each measure, whether the statement releases an aggregate made from it (a count
    kept only to tell whether a SUM is NULL is not released)."""
    asked = [False] * len(plan.measures)
    post = plan.post
    for e in nodes((post.outputs, post.having, tuple(o.expr for o in post.order_by))):
        if isinstance(e, AggRef):
            asked[e.value] = True
            if e.square is not None:
                asked[e.square] = True
            if e.count is not None and (e.func != "sum" or e.ratio):
                asked[e.count] = True
    return tuple(asked)


# --- averages written out ------------------------------------------------------------------


def marked(logical: Logical) -> Logical:
    """``logical`` with its averages written out marked (:func:`mark_ratios`) in the select
    list, HAVING and ORDER BY."""
    outputs = tuple(mark_ratios(e) for e in logical.outputs)
    having = None if logical.having is None else mark_ratios(logical.having)
    order = tuple(dataclasses.replace(o, expr=mark_ratios(o.expr)) for o in logical.order_by)
    if outputs == logical.outputs and having == logical.having and order == logical.order_by:
        return logical
    return dataclasses.replace(logical, outputs=outputs, having=having, order_by=order)


def mark_ratios(e: PostExpr) -> PostExpr:
    """``e`` with each count that divides (under casts: ``... / count(*)``) marked
    (``AggRef.ratio``: a noisy count of zero divides as one), and a ``sum(x)`` divided by its
    own count (the same rows' non-NULL values: the measure the SUM is NULL by) marked too, as
    an average written out: see the module doc."""

    def core(x: PostExpr) -> AggRef | None:
        while isinstance(x, Cast) and not x.typmod:
            x = x.arg
        return x if isinstance(x, AggRef) else None

    def marked(x: PostExpr) -> PostExpr:
        if isinstance(x, Cast):
            return dataclasses.replace(x, arg=marked(x.arg))
        assert isinstance(x, AggRef)
        return dataclasses.replace(x, ratio=True)

    def fix(x: object) -> object | None:
        if not (isinstance(x, Arith) and x.op == "/"):
            return None
        s, c = core(x.left), core(x.right)
        if c is None or c.func != "count":
            return None
        own = s is not None and s.func == "sum" and s.scale == 1 and c.value == s.count
        left = marked(x.left) if own else transform(x.left, fix)
        return dataclasses.replace(x, left=left, right=marked(x.right))

    return transform(e, fix)


__all__ = [
    "Evidence",
    "count_value",
    "evidence",
    "exists",
    "holds",
    "mark_ratios",
    "marked",
    "mean_parts",
    "sum_parts",
]
