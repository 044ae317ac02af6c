"""LAPRAS accuracy on the paper's Table 2 setting (Adult ages, n = 73), against the baselines,
and the same setting on the paper's second dataset, the Gowalla check-ins.

Setting (PRIVACY-NOTES §4): S = 100 queries, |P| = 100 ranges drawn uniformly from all
n(n+1)/2 contiguous ranges, the unpredicted pool = 1,000 Bernoulli(1/2) 0/1 vectors,
epsilon = 1, delta = 1e-3; for each overlap rho the stream is floor(rho S) queries of P plus the
rest from the pool (both without replacement), shuffled. Reported: the median over runs of the
stream's mean absolute error over the answered queries, and the median number of unanswered
(refused) queries. Noise is seeded (benchmarks only).

Gowalla (:func:`checkin_day_histogram`): the paper's own Gowalla setting could not be found (see
the docs), so the analogue is built the Adult way: the histogram of the 157,251 check-ins of
``sql_fixtures/gowalla`` over the days of the data set's published span (2009-02-01 to
2010-10-31, n = 638 public cells), one check-in a row (sensitivity 1, as the paper's
histograms), date ranges as the predicted set, and the same S, |P|, pool, epsilon, delta and
rho sweep.

    python -m bench.accuracy --quick          # 2 runs, rho in {0, 0.5, 1}; comparison 3 runs
    python -m bench.accuracy --runs 5 --write-docs

After the sweep, ``bench.accuracy.compare`` puts LAPRAS beside MLDP, MWEM, selection-only PMW
and the pure-DP (Laplace) variants, on this workload at rho in {0, 0.5, 1} and on 1,000 random
ranges (median over max(3, runs) runs; plot ``bench/out/accuracy_compare.png``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import sql_fixtures.gowalla as gowalla
from bench.accuracy import compare
from dp.baselines import offline_mm, online_independent_noise
from dp.domain import Domain, FloatArray, QueryBatch
from dp.engine import EngineConfig
from dp.noise import SeededSampler
from dp.strategy import Strategy, optimize_strategy

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "sql_fixtures" / "adult" / "adult.data.gz"
FALLBACK = ROOT.parent / "shared" / "data" / "adult" / "adult.data"
OUT = ROOT / "bench" / "out"
DOCS = ROOT / "docs" / "benchmarks.md"

S, P_SIZE, POOL, EPS, DELTA = 100, 100, 1000, 1.0, 1e-3
#: The public span of the check-ins' days (the declaration's checkin_date, by day).
FIRST_DAY, LAST_DAY = dt.date(2009, 2, 1), dt.date(2010, 10, 31)


def age_histogram() -> FloatArray:
    """Counts of the 73 distinct ages of adult.data (column 0), in increasing age."""
    if DATA.exists():
        with gzip.open(DATA, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        lines = FALLBACK.read_text().splitlines()
    ages = np.array([int(line.split(",")[0]) for line in lines if line.count(",") > 5])
    _, counts = np.unique(ages, return_counts=True)
    return counts.astype(np.float64)


def checkin_day_histogram() -> FloatArray:
    """Check-ins per day of the public span (n = 638 days, 157,251 rows), in date order."""
    n = (LAST_DAY - FIRST_DAY).days + 1
    x = np.zeros(n)
    for row in gowalla.rows():
        x[(row[4] - FIRST_DAY).days] += 1.0
    return x


@dataclass(frozen=True, slots=True)
class Dataset:
    """A Table 2 setting: the histogram, its attribute's name, and how the docs present it."""

    key: str
    title: str
    attribute: str
    histogram: Callable[[], FloatArray]


DATASETS = {
    "adult": Dataset("adult", "Adult ages (n = 73)", "age", age_histogram),
    "gowalla": Dataset(
        "gowalla", "Gowalla check-ins per day (n = 638)", "day", checkin_day_histogram
    ),
}


@dataclass(frozen=True, slots=True)
class Method:
    name: str
    mode: str = ""
    split: str = ""
    allocation: str = ""


METHODS = [
    *(
        Method(f"LAPRAS {mode} {split} {alloc}", mode, split, alloc)
        for mode in ("paper", "default")
        for split in ("matrix-heavy", "query-heavy")
        for alloc in ("static", "smooth")
    ),
    Method(
        "LAPRAS default matrix-heavy steady (the product's default)",
        "default",
        "matrix-heavy",
        "steady",
    ),
    Method("Online Independent Noise"),
    Method("OfflineMM (all queries known)"),
]


def run_lapras(
    m: Method,
    x: FloatArray,
    dom: Domain,
    pred: QueryBatch,
    strat: Strategy,
    stream: FloatArray,
    seed: int,
) -> tuple[float, int]:
    cfg = EngineConfig(
        epsilon=EPS,
        delta=DELTA,
        stream_length=S,
        mode=m.mode,  # type: ignore[arg-type]
        split=m.split,
        allocation=m.allocation,  # type: ignore[arg-type]
    )
    return compare.stream_mae(cfg, dom, pred, x, strat, stream, seed)


def one_run(
    r: int, overlaps: list[float], methods: list[Method], x: FloatArray, attribute: str = "age"
) -> dict[tuple[str, float], tuple[float, int]]:
    n = x.shape[0]
    dom = Domain.of((attribute, n))
    rng = np.random.default_rng(1000 + r)
    ranges = [(i, j) for i in range(n) for j in range(i, n)]
    picks = rng.choice(len(ranges), P_SIZE, replace=False)
    p_rows = np.zeros((P_SIZE, n))
    for k, idx in enumerate(picks):
        i, j = ranges[idx]
        p_rows[k, i : j + 1] = 1.0
    pool = rng.integers(0, 2, (POOL, n)).astype(np.float64)
    pred = QueryBatch.from_dense(dom, p_rows)
    strat = optimize_strategy(p_rows)
    out: dict[tuple[str, float], tuple[float, int]] = {}
    for rho in overlaps:
        g = int(np.floor(rho * S + 1e-9))
        stream = np.vstack(
            [
                p_rows[rng.choice(P_SIZE, g, replace=False)],
                pool[rng.choice(POOL, S - g, replace=False)],
            ]
        )
        stream = stream[rng.permutation(S)]
        truth = stream @ x
        seed = 7919 * r + int(rho * 100)
        for m in methods:
            if m.mode:
                out[(m.name, rho)] = run_lapras(m, x, dom, pred, strat, stream, seed)
            elif m.name.startswith("Online"):
                ans, _ = online_independent_noise(
                    stream, x, SeededSampler(seed), epsilon=EPS, delta=DELTA, stream_length=S
                )
                out[(m.name, rho)] = (float(np.mean(np.abs(ans - truth))), 0)
            else:
                ans, _ = offline_mm(
                    stream, x, SeededSampler(seed), epsilon=EPS, delta=DELTA, stream_length=S
                )
                out[(m.name, rho)] = (float(np.mean(np.abs(ans - truth))), 0)
    return out


def fmt_table(
    results: dict[tuple[str, float], list[tuple[float, int]]],
    overlaps: list[float],
    methods: list[Method],
) -> str:
    head = "| method | " + " | ".join(f"rho={o:g}" for o in overlaps) + " |"
    sep = "|---|" + "---|" * len(overlaps)
    lines = [head, sep]
    for m in methods:
        cells = []
        for o in overlaps:
            vals = results[(m.name, o)]
            mae = float(np.median([v[0] for v in vals]))
            un = float(np.median([v[1] for v in vals]))
            cells.append(f"{mae:.1f}" + (f" ({un:g})" if un else ""))
        lines.append(f"| {m.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(
    results: dict[tuple[str, float], list[tuple[float, int]]],
    overlaps: list[float],
    methods: list[Method],
    path: Path,
    title: str = "Adult ages (n = 73)",
) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for m in methods:
        ys = [float(np.median([v[0] for v in results[(m.name, o)]])) for o in overlaps]
        style = "-" if m.mode == "default" else "--" if m.mode == "paper" else ":"
        ax.plot(overlaps, ys, style, marker="o", ms=3, label=m.name)
    ax.set_yscale("log")
    ax.set_xlabel("overlap rho (fraction of the stream in P)")
    ax.set_ylabel("median MAE over the stream")
    ax.set_title(f"{title}, S=100, |P|=100, eps=1, delta=1e-3")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


#: A block another benchmark writes into the section (markers included).
BLOCK = re.compile(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", re.S)
READING = re.compile(r"<!-- reading:(\w+) -->.*?<!-- /reading -->", re.DOTALL)


def write_docs(section: str) -> None:
    """Replace the body of the '## Accuracy' section of docs/benchmarks.md (only that one).

    Hand-written readings between ``<!-- reading:NAME -->`` and ``<!-- /reading -->`` in the old
    section are kept: each replaces the placeholder of the same name in the new text. The
    blocks the other accuracy benchmarks write (``python -m bench.accuracy statements``,
    ``... marginals``: between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->``) are kept as
    they are, in their order.
    """
    text = DOCS.read_text()
    head = "## Accuracy (`bench/accuracy`)"
    start_i = text.index(head) + len(head)
    nxt = text.find("\n## ", start_i)
    end_i = len(text) if nxt < 0 else nxt + 1
    old = text[start_i:end_i]
    blocks = [m.group(0) for m in BLOCK.finditer(old)]
    for block in blocks:
        old = old.replace(block, "")
    kept = {m.group(1): m.group(0) for m in READING.finditer(old)}
    section = READING.sub(lambda m: kept.get(m.group(1), m.group(0)), section).strip()
    for block in blocks:
        section += "\n\n" + block
    DOCS.write_text(text[:start_i] + "\n\n" + section + "\n\n" + text[end_i:])


def sweep(
    data: Dataset, runs: int, overlaps: list[float]
) -> tuple[str, dict[tuple[str, float], list[tuple[float, int]]], float]:
    """The Table 2 sweep on ``data``: its table, the results, and the seconds it took."""
    x = data.histogram()
    results: dict[tuple[str, float], list[tuple[float, int]]] = {}
    t0 = time.perf_counter()
    for r in range(runs):
        for key, val in one_run(r, overlaps, METHODS, x, data.attribute).items():
            results.setdefault(key, []).append(val)
        print(
            f"{data.key}: run {r + 1}/{runs} done ({time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
        )
    table = fmt_table(results, overlaps, METHODS)
    print(f"{data.title}\n{table}")
    png = OUT / ("accuracy.png" if data.key == "adult" else f"accuracy_{data.key}.png")
    with contextlib.suppress(Exception):
        if plot(results, overlaps, METHODS, png, data.title):
            print(f"plot: {png.relative_to(ROOT)}", file=sys.stderr)
    return table, results, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 runs, overlaps 0, 0.5, 1")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--dataset",
        choices=[*DATASETS, "all"],
        default="all",
        help="the Table 2 sweep on Adult, on the Gowalla check-ins, or both (the default)",
    )
    ap.add_argument("--no-compare", action="store_true", help="skip the comparison with MLDP etc.")
    ap.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args(argv)
    if args.write_docs and (args.dataset != "all" or args.no_compare):
        ap.error("--write-docs needs every dataset and the comparison")
    runs = 2 if args.quick else args.runs
    overlaps = [0.0, 0.5, 1.0] if args.quick else [round(0.1 * i, 1) for i in range(11)]
    chosen = list(DATASETS.values()) if args.dataset == "all" else [DATASETS[args.dataset]]
    tables: dict[str, tuple[str, float]] = {}
    for data in chosen:
        table, _, seconds = sweep(data, runs, overlaps)
        tables[data.key] = (table, seconds)
    if args.no_compare:
        return 0
    x = age_histogram()
    t1 = time.perf_counter()
    cmp_runs = max(3, runs)
    cmp_overlaps = [0.0, 0.5, 1.0]
    cmp: dict[tuple[str, object], list[compare.Cell]] = {}
    for r in range(cmp_runs):
        for key, val in compare.table2_run(r, x, cmp_overlaps).items():
            cmp.setdefault(key, []).append(val)
        for name, val in compare.ranges_run(r, x).items():
            cmp.setdefault((name, "ranges"), []).append(val)
        print(f"comparison run {r + 1}/{cmp_runs} done", file=sys.stderr)
    cmp_cols: list[object] = [*cmp_overlaps, "ranges"]
    cmp_labels = [f"Table 2, rho={o:g}" for o in cmp_overlaps] + ["1,000 ranges, S=1000"]
    cmp_table = compare.fmt(cmp, cmp_cols, cmp_labels)
    notes = compare.notes_text()
    print(cmp_table)
    print(notes)
    png2 = OUT / "accuracy_compare.png"
    with contextlib.suppress(Exception):
        if compare.plot(cmp, cmp_cols, cmp_labels, png2):
            print(f"plot: {png2.relative_to(ROOT)}", file=sys.stderr)
    cmp_seconds = time.perf_counter() - t1
    if args.write_docs:
        cmd = "python -m bench.accuracy" + (" --quick" if args.quick else f" --runs {runs}")
        adult_table, adult_seconds = tables["adult"]
        text = section_text(cmd, runs, adult_table, adult_seconds)
        text += "\n" + gowalla_text(cmd, runs, *tables["gowalla"])
        text += "\n" + compare_text(cmd, cmp_runs, cmp_table, notes, cmp_seconds)
        write_docs(text)
    return 0


def compare_text(cmd: str, runs: int, table: str, notes: str, seconds: float) -> str:
    return f"""### Beside MLDP, MWEM, PMW and pure DP (issue 9)

Same command (`{cmd} --write-docs`; this part {seconds:.0f} s; plot in
`bench/out/accuracy_compare.png`), `bench/accuracy/compare.py`. Epsilon = 1 throughout; rows
marked (1, 1e-3) are (epsilon, delta)-DP with delta = 1e-3, rows marked (1, 0) pure epsilon-DP
(Laplace noise). Two workloads on the Adult age histogram:

- **Table 2, rho = 0 / 0.5 / 1**: the setting above (S = 100, |P| = 100, same construction and
  seeds; the sweep draws streams for all its overlaps from one generator, so outside `--quick`
  the streams at rho > 0 differ from the sweep's).
- **1,000 ranges**: 1,000 distinct ranges drawn uniformly from all 2,701 contiguous age ranges,
  streamed in random order, S = 1,000; LAPRAS is given P = a random 10% of them (100 ranges,
  the size of the Table 2 P; the other 900 arrive unpredicted). The offline mechanisms get all
  1,000.

Each cell: the median over {runs} runs of the stream's MAE, and in parentheses the median wall
time for the whole stream, end to end (LAPRAS: strategy optimisation, `start` and every
`decide`/`release`; the others: fit and answers), on the loaded 2-core machine, one BLAS thread.
"sees": LAPRAS is told only P up front and answers the stream one query at a time; Online
Independent Noise answers each query alone; **OfflineMM, MLDP, MWEM and PMW see the whole stream
up front** (an offline setting: a strictly easier problem). LAPRAS paper = query-heavy Smooth
(the best paper-mode row above); LAPRAS default = matrix-heavy Static (the product default);
LAPRAS pure = default mode with `accountant="pure"`, delta = 0, Laplace noise, the strategy from
`dp.strategy.l1_strategy` (the lowest Delta1(A)^2 ||W A^+||_F^2 among identity, the L2-optimal
strategy, hierarchical trees b = 2/4/8/16 and Haar; the engine's choice when none is given).
Online Independent Noise (Laplace): scale S/epsilon per query. OfflineMM (Laplace): the L1
strategy of the whole stream, scale Delta1(A)/epsilon. MLDP / MWEM / PMW: `bench/others.py` at
the same (epsilon, delta) (MLDP: training set chosen automatically from the stream's queries;
MWEM {compare.others.MWEM_ROUNDS} rounds, selection-only PMW {compare.others.SELECTION_ONLY_ROUNDS} rounds,
5% of epsilon on a noisy total). OfflineMM keeps the paper's delta/(S+1); MLDP and PMW use the
full delta.

{table}

What the automatic choices picked (all runs):

{notes}

<!-- reading:compare -->
(Reading of this run: to be written by hand; kept by `--write-docs`.)
<!-- /reading -->
"""


#: The paper's own Table 2 figures on Adult (median MAE at rho = 0 / 0.5 / 1; PRIVACY-NOTES §4).
PAPER_ADULT = """| the paper's Table 2 (Adult) | rho=0 | rho=0.5 | rho=1 |
|---|---|---|---|
| LAPRAS Static, query-heavy | 201.8 | 89.0 | 43.0 |
| LAPRAS Static, matrix-heavy | 368.6 | 123.5 | 14.3 |
| Online Independent Noise | 186.5 | 192.0 | 193.4 |
| OfflineMM (all queries known) | – | – | 6.96 |"""

METHODS_TEXT = """`paper` = Algorithm 1 as written (basic composition, AGM at delta/(S+1),
literal Static pacing, T = ceil(log2 S) = 7, no reuse); `default` = the default mode (GDP
filter, even Static pacing or Smooth, answers from stored releases when their variance beats a
fresh answer, GLS answers; docs/privacy.md) with the paper's pacings, and with the product's
own default pacing, Steady (no warm-up, the online budget spread over E = S expected fresh
answers, docs/privacy.md §4). Online Independent Noise: AGM at (eps/S, delta/(S+1)). OfflineMM:
the Matrix Mechanism on the whole stream known in advance, AGM at (eps, delta/(S+1))."""


def section_text(cmd: str, runs: int, table: str, seconds: float) -> str:
    return f"""Command: `{cmd} --write-docs` (Adult {seconds:.0f} s; plot in `bench/out/accuracy.png`).

Paper's Table 2 setting: Adult ages (n = 73 distinct ages, 32,561 rows), S = 100, |P| = 100
ranges drawn uniformly from all contiguous ranges, unpredicted pool = 1,000 Bernoulli(1/2) 0/1
vectors, epsilon = 1, delta = 1e-3. Each cell: the median over {runs} runs of the stream's mean
absolute error over the answered queries; in parentheses the median number of refused
(unanswered) queries when not 0. {METHODS_TEXT}

{table}

The paper's own figures for this setting, for comparison (the pool of unpredicted queries is not
given in the paper; PRIVACY-NOTES §4):

{PAPER_ADULT}

<!-- reading:sweep -->
(Reading of this run: to be written by hand; kept by `--write-docs`.)
<!-- /reading -->
"""


def gowalla_text(cmd: str, runs: int, table: str, seconds: float) -> str:
    return f"""### Table 2 on the paper's second dataset: the Gowalla check-ins

Same command (`{cmd} --write-docs`; this part {seconds:.0f} s; plot in
`bench/out/accuracy_gowalla.png`; `--dataset gowalla` runs it alone).

**The paper's Gowalla setting and figures could not be quoted.** The paper's PDF is not
available here, and the sources that could be searched (its abstract on arXiv and elsewhere,
the ICML 2026 poster page, the project page lapras-query.netlify.app, the authors' blog post, a
paper summary) say only that Gowalla is the second of "two real datasets" and that LAPRAS gets
"over an order of magnitude lower MAE than online baselines on Adult and Gowalla" at high
overlap: neither the histogram the paper builds from the check-ins, nor its domain size, nor
its numbers. What follows is the closest analogue, built as the paper builds the Adult setting:
the histogram of the 157,251 check-ins of `sql_fixtures/gowalla` (the 1,000-user Gowalla subset
the product ships) over the days of the data set's published span, 2009-02-01 to 2010-10-31
(n = 638 public cells: the declaration's `checkin_date` domain by day; 72 days have no
check-in), each check-in one row (add or remove one check-in: sensitivity 1, as the paper's
histograms; the product's own declaration of the table is user-level), the predicted set 100
date ranges drawn uniformly from all 203,841 contiguous ranges, the same pool of 1,000
Bernoulli(1/2) 0/1 vectors, S = 100, epsilon = 1, delta = 1e-3 and the same rho sweep and seeds
as the Adult rows. {METHODS_TEXT}

{table}

<!-- reading:gowalla -->
(Reading of this run: to be written by hand; kept by `--write-docs`.)
<!-- /reading -->
"""


Runner = Callable[[], None]
