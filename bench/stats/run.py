"""Statistics of a noisy histogram on Adult (issue 39, item 4): the bias, the error and the
coverage of the 95% interval of MIN, MAX, percentiles and count(DISTINCT), beside the rule
they replace.

    python -m bench.stats                          # 400 noise draws per statement and level
    python -m bench.stats --draws 100              # quicker
    python -m bench.stats --write-docs             # also replace its block of docs/benchmarks.md
    python -m bench.stats --tail-z 0.5,1,1.5,2     # MIN/MAX: the tail threshold, compared

Data: ``sql_fixtures/adult`` in the embedded PostgreSQL (a temporary folder); the truth is
PostgreSQL's own answer to the same SQL. Each statement is classified by the rewriter and its
batch answered exactly on the pin of its columns; then, for each draw, i.i.d. Gaussian noise
of standard error ``sigma`` is added to every row (an online release of the histogram at that
noise scale: ``sigma`` is what the NOTICE states as a count's standard error; 25 is the
issue's example), and each aggregate is computed from the noisy histogram by the product
(``rewriter.intervals.of_histogram``, the code ``rewriter.postprocess`` runs) and by the rule
it replaces (a value kept only when its own rounded count reaches three standard errors, then
the smallest/largest kept value, their number, PostgreSQL's percentile over the kept counts;
the value with the largest noisy count when none is kept).

Reported per statement, aggregate and noise level, over the groups of the statement: the mean
absolute bias (|mean estimate - truth|, averaged over groups), the mean absolute error, the
share of draws whose interval holds the truth (the mean over groups, and the smallest), and
the interval's mean width. ``HAVING`` rows: the share of the groups that qualify which are
returned, and of those that do not which are returned anyway.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import rewriter
from bench.docs import write_block
from dp import stats
from rewriter import domaincheck, intervals
from rewriter.plan import AggRef
from sql_fixtures.adult import DECLARATION

TABLE = "adult"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
HEADING = "## Statistics of a noisy histogram (`bench/stats`)"
BEGIN, END = "<!-- bench-stats:begin -->", "<!-- bench-stats:end -->"

#: (label, SQL, number of group keys first in the select list)
STATEMENTS: tuple[tuple[str, str, int], ...] = (
    ("age, whole table", "SELECT min(age), max(age), percentile_cont(0.5) WITHIN GROUP (ORDER BY age), count(DISTINCT age) FROM adult", 0),
    ("hours, whole table", "SELECT min(hours_per_week), max(hours_per_week), percentile_disc(0.9) WITHIN GROUP (ORDER BY hours_per_week), count(DISTINCT hours_per_week) FROM adult", 0),
    ("country, whole table", "SELECT count(DISTINCT native_country) FROM adult", 0),
    ("country by sex", "SELECT sex, count(DISTINCT native_country) FROM adult GROUP BY 1", 1),
    ("age by marital status", "SELECT marital_status, min(age), max(age), percentile_cont(0.5) WITHIN GROUP (ORDER BY age) FROM adult GROUP BY 1", 1),
    ("age by race", "SELECT race, max(age), percentile_cont(0.25) WITHIN GROUP (ORDER BY age), percentile_cont(0.75) WITHIN GROUP (ORDER BY age) FROM adult GROUP BY 1", 1),
    ("hours by workclass", "SELECT workclass, min(hours_per_week), max(hours_per_week), percentile_cont(0.5) WITHIN GROUP (ORDER BY hours_per_week) FROM adult GROUP BY 1", 1),
    ("education_num by education", "SELECT education, min(education_num), max(education_num), count(DISTINCT education_num) FROM adult GROUP BY 1", 1),
    ("age by occupation, under 30", "SELECT occupation, max(age), count(DISTINCT age) FROM adult WHERE age < 30 GROUP BY 1", 1),
)  # fmt: skip
#: (label, SQL, the aggregate's position, the threshold): HAVING <aggregate> > threshold
HAVING: tuple[tuple[str, str, int, float], ...] = (
    ("max(age) > 80 by occupation", "SELECT occupation, max(age) FROM adult GROUP BY 1", 1, 80),
    ("max(age) > 80 by workclass", "SELECT workclass, max(age) FROM adult GROUP BY 1", 1, 80),
)
SIGMAS = (10.0, 25.0, 100.0)


@dataclass
class Cell:
    """One aggregate of one group: its truth and the estimates over draws."""

    truth: float
    old: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    width: list[float] = field(default_factory=list)
    variants: dict[float, list[float]] = field(default_factory=dict)


def old_rule(func: str, fraction: float | None, h: intervals.Hist) -> object:
    """The rule before: counts rounded and clamped at 0, a value kept when its own count
    reaches three standard errors (or 1/2), then the kept values' statistic; when none is
    kept, the value with the largest noisy count (rewriter.domaincheck, since bce64fd)."""
    counts = np.maximum(np.rint(h.counts), 0).astype(np.int64)
    counts[h.counts < np.maximum(3.0 * h.errors, 0.5)] = 0
    if not counts.any() and h.counts.size and np.any(h.errors > 0):
        counts[int(np.argmax(h.counts))] = 1  # rewriter.domaincheck: it stands for the group
    present = [i for i in range(len(h.values)) if counts[i] > 0]
    if func == "count_distinct":
        return len(present)
    if not present:
        return None
    if func == "min":
        return h.values[present[0]]
    if func == "max":
        return h.values[present[-1]]
    kept = counts[present]
    n = int(kept.sum())
    cum = np.cumsum(kept)
    f = float(fraction or 0.0)
    known = [h.values[i] for i in present]
    if func == "percentile_disc":
        return known[int(np.searchsorted(cum, max(math.ceil(f * n), 1)))]
    pos = f * (n - 1)
    lo = float(known[int(np.searchsorted(cum, math.floor(pos) + 1))])  # type: ignore[arg-type]
    hi = float(known[int(np.searchsorted(cum, math.ceil(pos) + 1))])  # type: ignore[arg-type]
    return lo + (hi - lo) * (pos - math.floor(pos))


def _num(v: object) -> float:
    return math.nan if v is None else float(v)  # type: ignore[arg-type]


def _key(values: tuple[object, ...]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _truth(conn: Any, sql: str, keys: int) -> dict[tuple[str, ...], tuple[float, ...]]:
    return {_key(tuple(r[:keys])): tuple(_num(v) for v in r[keys:]) for r in conn.execute(sql)}


def _plan(schema: rewriter.Schema, sql: str) -> rewriter.Plan:
    st = rewriter.classify(sql, schema)[0]
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, sql
    return st.plan


def _exact(plan: rewriter.Plan, pin: Any) -> np.ndarray:
    return np.asarray(plan.batch.answer(pin.marginal(plan.batch.domain)), dtype=np.float64)


def run_statement(
    plan: rewriter.Plan,
    exact: np.ndarray,
    truth: dict[tuple[str, ...], tuple[float, ...]],
    keys: int,
    sigma: float,
    draws: int,
    rng: np.random.Generator,
    tail_zs: tuple[float, ...],
) -> dict[tuple[int, int], Cell]:
    refs = [e for e in plan.post.outputs[keys:]]
    assert all(isinstance(r, AggRef) for r in refs)
    cells: dict[tuple[int, int], Cell] = {}
    gkeys = [_key(k) for k in plan.group_keys]
    # noise off: the product's answers are PostgreSQL's own
    for g, vals in enumerate(_hists(plan, exact, None)):
        for j, ref in enumerate(refs):
            assert isinstance(ref, AggRef)
            point, low, high = intervals.of_histogram(ref.func, ref.fraction, vals[ref.value])
            want = truth[gkeys[g]][j] if gkeys[g] in truth else 0.0
            if ref.func == "count_distinct" and gkeys[g] not in truth:
                want = 0.0
            got = _num(point)
            assert (math.isnan(want) and math.isnan(got)) or abs(got - want) < 1e-9, (
                plan.fingerprint.template,
                gkeys[g],
                ref.func,
                got,
                want,
            )
            assert low == high == point or ref.func == "percentile_cont"
            cells[(g, j)] = Cell(truth=want, variants={z: [] for z in tail_zs})
    se = np.full(exact.shape, sigma)
    for _ in range(draws):
        noisy = exact + rng.normal(0.0, sigma, exact.shape)
        for g, vals in enumerate(_hists(plan, noisy, se)):
            for j, ref in enumerate(refs):
                assert isinstance(ref, AggRef)
                h = vals[ref.value]
                assert isinstance(h, intervals.Hist)
                c = cells[(g, j)]
                if math.isnan(c.truth):
                    continue
                point, low, high = intervals.of_histogram(ref.func, ref.fraction, h)
                c.new.append(_num(point))
                c.old.append(_num(old_rule(ref.func, ref.fraction, h)))
                if low is not None:
                    c.covered.append(_num(low) - 1e-9 <= c.truth <= _num(high) + 1e-9)
                    c.width.append(_num(high) - _num(low))
                else:
                    c.covered.append(False)
                for z in tail_zs:
                    if ref.func in ("min", "max"):
                        loc = stats.extreme(h.counts, h.errors, largest=ref.func == "max", tail_z=z)
                        c.variants[z].append(
                            math.nan
                            if loc is None or loc.lower is None
                            else _num(h.values[loc.lower])
                        )
    return cells


def _hists(
    plan: rewriter.Plan, answers: np.ndarray, se: np.ndarray | None
) -> list[dict[int, intervals.Hist]]:
    """Each group's histograms (by measure), as ``rewriter.postprocess`` reads them."""
    out = []
    for ev in domaincheck.evidence(plan, answers, se):
        out.append(
            {
                j: intervals.hist_of(lay.values, ev.raw[j], ev.errors[j], ev.values[j])  # type: ignore[arg-type]
                for j, lay in enumerate(plan.layouts)
                if lay.values
            }
        )
    return out


def _bias_mae(values: list[float], truth: float) -> tuple[float, float]:
    """|mean - truth| and the mean absolute error over the draws with a value (a NULL where
    the truth is a value is counted apart: the NULL column)."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return math.nan, math.nan
    return abs(float(arr.mean()) - truth), float(np.abs(arr - truth).mean())


def _nulls(values: list[float]) -> float:
    return float(np.isnan(np.asarray(values, dtype=np.float64)).mean())


def _fmt(x: float, digits: int = 1) -> str:
    return "–" if math.isnan(x) else f"{x:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.stats", description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=400, help="noise draws per statement and level")
    ap.add_argument("--sigmas", default=",".join(str(s) for s in SIGMAS))
    ap.add_argument("--tail-z", default="", help="MIN/MAX tail thresholds to compare")
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    sigmas = tuple(float(s) for s in args.sigmas.split(","))
    tail_zs = tuple(float(z) for z in args.tail_z.split(",") if z)
    t0 = time.perf_counter()

    import psycopg

    from proxy.embedded import EmbeddedPostgres, provision_adult

    schema = rewriter.load_schema(DECLARATION)
    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-stats-"))
    pg = EmbeddedPostgres(folder / "pg").start()
    rng = np.random.default_rng(args.seed)
    lines: list[str] = []
    try:
        provision_adult(pg, "bench", (), datasets=("adult",))
        with psycopg.connect(pg.dsn(database="bench")) as conn:
            names = [a.name for a in schema.tables[TABLE].attributes.values()]
            rows = conn.execute(rewriter.pin_sql(schema, TABLE, names)).fetchall()
            pin = rewriter.pin_from_rows(rewriter.pin_domain(schema, TABLE, names), rows)
            truths = {sql: _truth(conn, sql, keys) for _, sql, keys in STATEMENTS}
            having_truth = {sql: _truth(conn, sql, 1) for _, sql, _, _ in HAVING}
    finally:
        pg.stop()
    header = (
        "| statement | aggregate | groups | sigma | mean abs. bias: before | after "
        "| MAE: before | after | NULL: before | after | 95% interval holds the truth: mean | lowest "
        "| mean width |"
    )
    table = [header, "|" + "---|" * 13]
    variant_rows: list[str] = []
    summary: dict[float, list[tuple[float, float, float, float, float]]] = {s: [] for s in sigmas}
    for label, sql, keys in STATEMENTS:
        plan = _plan(schema, sql)
        exact = _exact(plan, pin)
        for sigma in sigmas:
            cells = run_statement(plan, exact, truths[sql], keys, sigma, args.draws, rng, tail_zs)
            refs = plan.post.outputs[keys:]
            for j, ref in enumerate(refs):
                assert isinstance(ref, AggRef)
                mine = [c for (g, jj), c in cells.items() if jj == j and not math.isnan(c.truth)]
                bo, mo, bn, mn, cov, width, nulls, nulls_old = [], [], [], [], [], [], [], []
                for c in mine:
                    b, m = _bias_mae(c.old, c.truth)
                    bo.append(b)
                    mo.append(m)
                    b, m = _bias_mae(c.new, c.truth)
                    bn.append(b)
                    mn.append(m)
                    nulls.append(_nulls(c.new))
                    nulls_old.append(_nulls(c.old))
                    cov.append(float(np.mean(c.covered)))
                    width.append(float(np.mean(c.width)) if c.width else math.nan)
                text = _agg_text(sql, keys + j)
                table.append(
                    f"| {label} | `{text}` | {len(mine)} | {sigma:g} "
                    f"| {_fmt(_nanmean(bo))} | {_fmt(_nanmean(bn))} | {_fmt(_nanmean(mo))} "
                    f"| {_fmt(_nanmean(mn))} | {100 * _nanmean(nulls_old):.0f}% | {100 * _nanmean(nulls):.0f}% "
                    f"| {100 * _nanmean(cov):.1f}% | {100 * min(cov):.1f}% | {_fmt(_nanmean(width))} |"
                )
                summary[sigma].append(
                    (_nanmean(bo), _nanmean(bn), _nanmean(mo), _nanmean(mn), _nanmean(cov))
                )
                if ref.func in ("min", "max") and tail_zs:
                    row = [f"{label}: `{text}`", f"{sigma:g}"]
                    for z in tail_zs:
                        vb = [_bias_mae(c.variants[z], c.truth) for c in mine]
                        row.append(
                            f"{_fmt(_nanmean([b for b, _ in vb]))} / {_fmt(_nanmean([m for _, m in vb]))}"
                        )
                    variant_rows.append("| " + " | ".join(row) + " |")
    having_rows = [
        "| condition | sigma | qualifying groups returned: before | after | others returned: before | after |",
        "|---|---|---|---|---|---|",
    ]
    for label, sql, pos, threshold in HAVING:
        plan = _plan(schema, sql)
        exact = _exact(plan, pin)
        truth = having_truth[sql]
        gkeys = [_key(k) for k in plan.group_keys]
        qualify = [gkeys[g] in truth and truth[gkeys[g]][0] > threshold for g in range(len(gkeys))]
        ref = plan.post.outputs[pos]
        assert isinstance(ref, AggRef)
        for sigma in sigmas:
            kept_old = np.zeros(len(gkeys))
            kept_new = np.zeros(len(gkeys))
            se = np.full(exact.shape, sigma)
            for _ in range(args.draws):
                noisy = exact + rng.normal(0.0, sigma, exact.shape)
                for g, vals in enumerate(_hists(plan, noisy, se)):
                    h = vals[ref.value]
                    assert isinstance(h, intervals.Hist)
                    old = old_rule("max", None, h)
                    new = intervals.of_histogram("max", None, h)[0]
                    kept_old[g] += old is not None and _num(old) > threshold
                    kept_new[g] += new is not None and _num(new) > threshold
            q = np.asarray(qualify)

            def share(k: np.ndarray, m: np.ndarray) -> float:
                return 100 * float((k[m] / args.draws).mean()) if m.any() else math.nan

            having_rows.append(
                f"| `HAVING {label}` ({int(q.sum())} of {len(q)} qualify) | {sigma:g} "
                f"| {_fmt(share(kept_old, q), 0)}% | {_fmt(share(kept_new, q), 0)}% "
                f"| {_fmt(share(kept_old, ~q), 0)}% | {_fmt(share(kept_new, ~q), 0)}% |"
            )
    overall = [
        "| sigma | mean abs. bias: before | after | MAE: before | after | coverage (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for sigma in sigmas:
        rows_ = summary[sigma]
        overall.append(
            f"| {sigma:g} | {_fmt(_nanmean([r[0] for r in rows_]))} | {_fmt(_nanmean([r[1] for r in rows_]))} "
            f"| {_fmt(_nanmean([r[2] for r in rows_]))} | {_fmt(_nanmean([r[3] for r in rows_]))} "
            f"| {100 * _nanmean([r[4] for r in rows_]):.1f}% |"
        )
    lines += [
        f"`python -m bench.stats --draws {args.draws}` ({time.perf_counter() - t0:.0f} s; "
        f"seed {args.seed}; Gaussian noise of standard error sigma on every row of the histogram).",
        "",
        "Over every aggregate below (the mean of the per-aggregate figures):",
        "",
        *overall,
        "",
        *table,
        "",
        *having_rows,
    ]
    if variant_rows:
        lines += [
            "",
            "MIN/MAX, the tail threshold (mean abs. bias / MAE) for TAIL_Z = "
            + ", ".join(f"{z:g}" for z in tail_zs)
            + ":",
            "",
            "| statement | sigma | " + " | ".join(f"{z:g}" for z in tail_zs) + " |",
            "|" + "---|" * (2 + len(tail_zs)),
            *variant_rows,
        ]
    text = "\n".join(lines)
    print(text)
    if args.write_docs:
        write_block(
            DOCS, text, begin=BEGIN, end=END, heading=HEADING, before="## Strategy optimisation"
        )
    return 0


def _nanmean(xs: list[float]) -> float:
    arr = np.asarray(xs, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def _agg_text(sql: str, position: int) -> str:
    """The select-list item at ``position`` of ``sql`` (as written)."""
    import sqlglot

    tree = sqlglot.parse_one(sql, read="postgres")
    return tree.expressions[position].sql(dialect="postgres")


if __name__ == "__main__":
    sys.exit(main())
