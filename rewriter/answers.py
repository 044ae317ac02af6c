"""Rows from a plan's answers: the post-processing of noisy (or exact) answers.

The DP core answers a :class:`rewriter.plan.Plan`'s batch (noisy ``W @ x``, laid out
group-major: row ``g * row_width + offset`` is a measure of group ``g``); :func:`postprocess`
turns the answers into the rows PostgreSQL would return: rounding counts, SUM within its
domain, AVG = SUM / COUNT, statistics from a group's noisy histogram, HAVING, window
functions, DISTINCT, ORDER BY, OFFSET and LIMIT, with the checks of :mod:`rewriter.domaincheck`
(no impossible answer) and the intervals of :mod:`rewriter.intervals`. The NOTICE's errors
come from :func:`aggregate_errors` and :func:`histogram_intervals`. Everything here is
post-processing of noisy answers and of public facts (the plan's weights, the declared
domains, the noise scales) and costs no privacy.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from . import domaincheck, intervals, pgeval
from .plan import (
    _CTX,
    AggRef,
    GroupingRef,
    KeyRef,
    Layout,
    Plan,
    PostExpr,
    Window,
    _convert_key,
    _post_eval,
    _round_int,
    _sort,
    nodes,
    widen,
    window_values,
    windows_of,
)


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


def _windows(exprs: Sequence[PostExpr], groups: Sequence[_Group]) -> list[dict[Window, object]]:
    """The value of every window function of ``exprs`` for each group (the rows after
    HAVING): :func:`window_values` over the groups."""
    found = windows_of(exprs)
    if not found:
        return [{} for _ in groups]
    return window_values(found, [functools.partial(_plain_leaf, g) for g in groups])


def _plain_leaf(g: _Group, e: PostExpr) -> object:
    return _leaf(e, g, {})


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


__all__ = ["aggregate_errors", "group_values", "histogram_intervals", "postprocess"]
