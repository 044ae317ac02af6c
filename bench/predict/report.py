"""The benchmark's tables, and its block of docs/benchmarks.md."""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.docs import write_block
from bench.predict import datasets as D
from bench.predict.run import (
    IDE_TITLES,
    ORACLE_SHARES,
    ROOT,
    SCENARIOS,
    TITLES,
    WORSE,
    Row,
    Run,
)

DOCS = ROOT / "docs" / "benchmarks.md"
HEADING = "## Template prediction (`bench/predict`)"
BEGIN, END = "<!-- predict:begin -->", "<!-- predict:end -->"


def _vals(rows: Sequence[Row], f: Callable[[Row], float | None]) -> list[float]:
    out = []
    for r in rows:
        v = f(r)
        if v is not None and not math.isnan(v):
            out.append(float(v))
    return out


def _mm(v: Sequence[float], fmt: str = ".2f") -> str:
    """mean (median)."""
    if not v:
        return "-"
    return f"{np.mean(v):{fmt}} ({np.median(v):{fmt}})"


def _med(v: Sequence[float], fmt: str = ".0f") -> str:
    return f"{np.median(v):{fmt}}" if v else "-"


def _mae(run: Run | None) -> float | None:
    return None if run is None else run.mae


def _title(dataset: str, scenario: str) -> str:
    return (IDE_TITLES if dataset == D.IDEBENCH else TITLES)[scenario]


def groups(rows: Sequence[Row]) -> list[tuple[str, str, list[Row]]]:
    out = []
    for name in D.DATASETS:
        for sc in SCENARIOS:
            rs = [r for r in rows if r.dataset == name and r.scenario == sc]
            if rs:
                out.append((name, sc, rs))
    return out


def worse(r: Row) -> bool:
    """The product's MAE above online-only by more than noise (WORSE)."""
    on = _mae(r.online)
    return on is not None and not math.isnan(r.product.mae) and r.product.mae > WORSE * on


def overlap_table(rows: Sequence[Row]) -> str:
    lines = [
        "| dataset | scenario | windows | S | refused by cell_limit | P product | P literal "
        "| rho product | rho literal | product >= literal | rho ranking | ranking >= literal "
        "| S predicted | predict (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, sc, rs in groups(rows):
        sent = sum(r.statements for r in rs)
        bad = sum(r.unresolved for r in rs)
        ok = sum(r.rho_product >= r.rho_literal - 1e-12 for r in rs)
        lines.append(
            f"| {name} | {_title(name, sc)} | {len(rs)} | {_med([r.s for r in rs])} "
            f"| {bad} of {sent:,} | {_med([r.p_product for r in rs])} "
            f"| {_med([r.p_literal for r in rs])} | {_mm([r.rho_product for r in rs])} "
            f"| {_mm([r.rho_literal for r in rs])} | {ok} / {len(rs)} "
            f"| {_mm(_vals(rs, lambda r: r.rho_ranked))} | {_ranking_ok(rs)} "
            f"| {_med(_vals(rs, lambda r: r.s_predicted))} "
            f"| {_med([r.predict_seconds for r in rs], '.1f')} |"
        )
    return "\n".join(lines)


def mae_table(rows: Sequence[Row]) -> str:
    lines = [
        "| dataset | scenario | MAE product | MAE online | MAE literal | MAE oracle "
        "| refused product / online / literal / oracle | product worse than online "
        "| model MAE product / online |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, sc, rs in groups(rows):

        def ref(f: Callable[[Row], Run | None], rs: list[Row] = rs) -> int:
            return sum(run.refused for r in rs if (run := f(r)) is not None)

        errors = sum(bool(r.product.error) + bool(r.literal.error) for r in rs)
        err = f" ({errors} engine errors)" if errors else ""
        lines.append(
            f"| {name} | {_title(name, sc)} | {_mm(_vals(rs, lambda r: r.product.mae), '.1f')} "
            f"| {_mm(_vals(rs, lambda r: _mae(r.online)), '.1f')} "
            f"| {_mm(_vals(rs, lambda r: r.literal.mae), '.1f')} "
            f"| {_mm(_vals(rs, lambda r: _mae(r.oracle)), '.1f')} "
            f"| {ref(lambda r: r.product)} / {ref(lambda r: r.online)} / "
            f"{ref(lambda r: r.literal)} / {ref(lambda r: r.oracle)} "
            f"| {sum(worse(r) for r in rs)} / {len(rs)}{err} "
            f"| {_med(_vals(rs, lambda r: r.expected_mae), '.1f')} / "
            f"{_med(_vals(rs, lambda r: r.expected_online), '.1f')} |"
        )
    return "\n".join(lines)


def _ranking_ok(rs: Sequence[Row]) -> str:
    """Windows where the predictor's ranking, cut at the literal baseline's size, covers at
    least as much as the baseline / windows that have the measure."""
    have = [r for r in rs if r.rho_ranked is not None]
    ok = sum(r.rho_ranked is not None and r.rho_ranked >= r.rho_literal - 1e-12 for r in have)
    return f"{ok} / {len(have)}"


def targets(rs: Sequence[Row]) -> tuple[str, str, str, str, str]:
    """Per target: windows meeting it / windows it applies to."""
    t1 = sum(r.rho_product >= r.rho_literal - 1e-12 and r.p_product <= 2 * r.s for r in rs)
    t2 = sum(not worse(r) for r in rs)
    elig = [r for r in rs if r.rho_literal >= 0.5 and r.online is not None]
    t3 = sum(
        not math.isnan(r.product.mae) and r.product.mae * 2 <= r.online.mae  # type: ignore[union-attr]
        for r in elig
    )
    bound = sum(
        r.oracle_best is not None and r.oracle_best.mae * 2 <= r.online.mae  # type: ignore[union-attr]
        for r in elig
    )
    t4 = sum(r.online is not None and r.product.refused <= r.online.refused for r in rs)
    n = len(rs)
    t3s = f"{t3} / {len(elig)} ({bound})" if elig else f"{t3} / 0"
    return f"{t1} / {n}", _ranking_ok(rs), f"{t2} / {n}", t3s, f"{t4} / {n}"


def targets_table(rows: Sequence[Row]) -> str:
    lines = [
        "| dataset | scenario | overlap >= literal at abs(P) <= 2S: P kept "
        "| the ranking at the literal's size | MAE not above online (5%) "
        "| >= 2x lower MAE where literal rho >= 0.5 (the oracle P's best) "
        "| refusals <= online |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, sc, rs in groups(rows):
        lines.append(f"| {name} | {_title(name, sc)} | " + " | ".join(targets(rs)) + " |")
    for sc in SCENARIOS:
        rs = [r for r in rows if r.scenario == sc]
        if rs and len({r.dataset for r in rs}) > 1:
            lines.append(f"| **all** | {TITLES[sc]} | " + " | ".join(targets(rs)) + " |")
    return "\n".join(lines)


def times(rows: Sequence[Row]) -> str:
    """Where the time went: the predictor and each engine run, summed."""

    def tot(f: Callable[[Row], Run | None]) -> float:
        return sum(run.seconds for r in rows if (run := f(r)) is not None) / 60

    pred = sum(r.predict_seconds for r in rows) / 60
    slowest = max((r.predict_seconds for r in rows), default=0.0)
    return (
        f"predictor {pred:.0f} min (slowest window {slowest:.0f} s); engine runs: product "
        f"{tot(lambda r: r.product):.0f} min, literal {tot(lambda r: r.literal):.0f} min, "
        f"online {tot(lambda r: r.online):.0f} min, oracle {tot(lambda r: r.oracle):.0f} min; "
        "one process's time, summed; a cached run counts the time it took when it was computed"
    )


def section(rows: Sequence[Row], *, command: str, seconds: float, jobs: int, date: str = "") -> str:
    today = date or dt.date.today().isoformat()
    names = sorted({r.dataset for r in rows}, key=D.DATASETS.index)
    return f"""Command: `{command}` ({today}; {seconds / 60:.1f} min with {jobs} worker processes on
{os.cpu_count()} cores; {times(rows)}). Method: the docstrings of `bench/predict/run.py`
(scenarios, the four runs), `replay.py` (traces to SQL) and `datasets.py` (the synthesised
tables). epsilon = 1, delta = 1e-6, `dp.engine` default mode; every run plans the S the product
predicted from the log; the product runs with the split its prediction chose, the others
matrix-heavy.

**Data** (synthesised; the traces' data tables are not shipped). Declared bins from the
traces' binning; rows from a seeded generator (`datasets.py`), `cell_limit` 1,000,000:

{D.describe(names)}

**Overlap and P.** Medians over the windows unless a column says otherwise; `rho` = the
share of the window's S distinct statements that are in P, mean (median); *product >=
literal*: windows where the product's overlap is at least the literal baseline's; *rho
ranking*: the overlap of the predictor's ranking before the error-aware cap
(`Prediction.ranked`), cut at the literal baseline's size (at most 2S), and *ranking >=
literal* the windows where it is at least the baseline's; *S
predicted*: the prediction's own S for the next window; *refused by cell_limit*: SQL
statements of the windows (with repeats) the rewriter refused (54000), left out of S.

{overlap_table(rows)}

**MAE and refusals.** MAE mean (median) over the windows, of the mean absolute error over the
rows of the answered statements; refusals (for budget) summed over the windows; *product
worse than online*: windows where the product's MAE is above online-only by more than 5%;
*model*: the prediction's expected MAE with its P and with everything online (medians).

{mae_table(rows)}

**Targets of issue 16** (windows meeting the target / windows it applies to; in brackets,
the windows where the oracle P itself gets a 2x lower MAE than online-only at the best MM
share of {", ".join(f"{m:g}" for m in ORACLE_SHARES)} whose refusals are at most online's:
what any predictor could reach with this engine):

{targets_table(rows)}
"""


def write_docs(body: str, path: Path = DOCS) -> None:
    """Put ``body`` between the predict markers of ``path`` (:func:`bench.docs.write_block`)."""
    write_block(path, body, begin=BEGIN, end=END, heading=HEADING)
