"""LAPRAS beside the other published mechanisms (issue 9, item 4): MAE and run time.

Two workloads on the Adult age histogram (n = 73), epsilon = 1:

1. ``table2``: the paper's Table 2 setting of ``bench.accuracy.run`` (S = 100, |P| = 100 random
   ranges, pool of 1,000 Bernoulli(1/2) 0/1 vectors) at overlaps rho in {0, 0.5, 1}.
2. ``ranges1000``: 1,000 distinct ranges drawn uniformly from all n(n+1)/2 contiguous ranges,
   streamed in random order (S = 1,000); LAPRAS is given P = a random 10% of them (100 ranges),
   the other 900 arrive unpredicted.

Approximate DP (delta = 1e-3): LAPRAS paper (query-heavy Smooth, the best paper-mode row of the
Table 2 sweep) and default (matrix-heavy Static, the product's default), Online Independent Noise,
OfflineMM, and MLDP / MWEM / selection-only PMW (``bench.others.run`` at the same
(epsilon, delta)). Pure DP (delta = 0): LAPRAS default with ``accountant="pure"`` (Laplace; the
strategy is ``dp.strategy.l1_strategy``, the one the engine picks when none is given), Online
Independent Noise with Laplace at epsilon/S per query, OfflineMM with the L1 strategy and Laplace
noise at epsilon, and MLDP / MWEM / PMW at delta = 0. OfflineMM, MLDP, MWEM and PMW see the
whole stream up front (offline); LAPRAS sees only P up front and the stream one query at a time.
Run times are wall time per stream, end to end (LAPRAS: strategy optimisation, start and the
whole stream; the offline methods: their whole fit and answers).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import others
from dp.baselines import offline_mm, online_independent_noise
from dp.domain import Domain, FloatArray, QueryBatch
from dp.engine import EngineConfig, answer, start
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler
from dp.release import measure
from dp.strategy import (
    Strategy,
    haar_matrix,
    hierarchical_matrix,
    l1_strategy,
    optimize_strategy,
)

EPS, DELTA = 1.0, 1e-3
T2_S, T2_P, T2_POOL = 100, 100, 1000
R_QUERIES, R_P = 1000, 100


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    privacy: str  # "approx" or "pure"
    kind: str  # "online" (LAPRAS, sees P up front only) or "offline" (sees the whole stream)


ROWS = [
    Row("LAPRAS paper (query-heavy Smooth)", "approx", "online"),
    Row("LAPRAS default (matrix-heavy Static)", "approx", "online"),
    Row("Online Independent Noise", "approx", "online"),
    Row("OfflineMM", "approx", "offline"),
    Row("MLDP", "approx", "offline"),
    Row("MWEM", "approx", "offline"),
    Row("PMW selection-only", "approx", "offline"),
    Row("LAPRAS pure (default, Laplace)", "pure", "online"),
    Row("Online Independent Noise (Laplace)", "pure", "online"),
    Row("OfflineMM (Laplace, L1 strategy)", "pure", "offline"),
    Row("MLDP (Laplace)", "pure", "offline"),
    Row("MWEM (pure)", "pure", "offline"),
    Row("PMW selection-only (pure)", "pure", "offline"),
]

Cell = tuple[float, int, float]  # (MAE, refused, seconds)

#: What the automatic choices picked, per workload: LAPRAS pure's L1 strategy, MLDP's training set.
NOTES: dict[str, dict[str, set[str]]] = {}


def _note(workload: str, what: str, value: str) -> None:
    NOTES.setdefault(workload, {}).setdefault(what, set()).add(value)


def notes_text() -> str:
    return "\n".join(
        f"- {wl}: " + "; ".join(f"{what}: {', '.join(sorted(v))}" for what, v in sorted(d.items()))
        for wl, d in sorted(NOTES.items())
    )


def strategy_name(a: FloatArray) -> str:
    """Which of ``l1_strategy``'s candidates ``a`` is (for the report)."""
    n = a.shape[1]
    if a.shape == (n, n) and np.array_equal(a, np.eye(n)):
        return "identity"
    for b in (2, 4, 8, 16):
        h = hierarchical_matrix(n, b)
        if h.shape == a.shape and np.allclose(h, a):
            return f"hierarchical b={b}"
    h = haar_matrix(n)
    if h.shape == a.shape and np.allclose(h, a):
        return "Haar"
    return "L2-optimal"


def stream_mae(
    cfg: EngineConfig,
    dom: Domain,
    pred: QueryBatch,
    x: FloatArray,
    strat: Strategy,
    stream: FloatArray,
    seed: int,
) -> tuple[float, int]:
    """Start an epoch (``cfg``, predicted ``pred``, strategy ``strat``) and answer ``stream``
    one query at a time: (mean absolute error of the answered queries, number refused)."""
    state, _ = start(cfg, dom, pred, x, SeededSampler(seed), strategy=strat)
    sampler = SeededSampler(seed + 1)
    errs: list[float] = []
    refused = 0
    for q in stream:
        batch = QueryBatch.from_dense(dom, [q])
        try:
            state, _, r = answer(state, batch, x, sampler)
        except BudgetExhaustedError:
            refused += 1
            continue
        errs.append(abs(r.answers[0] - float(q @ x)))
    return (float(np.mean(errs)) if errs else float("nan")), refused


def _lapras(
    x: FloatArray,
    p_rows: FloatArray,
    stream: FloatArray,
    seed: int,
    *,
    mode: str,
    split: str,
    allocation: str,
    pure: bool = False,
) -> Cell:
    t0 = time.perf_counter()
    n = x.shape[0]
    s = stream.shape[0]
    dom = Domain.of(("age", n))
    cfg = EngineConfig(
        epsilon=EPS,
        delta=0.0 if pure else DELTA,
        stream_length=s,
        mode=mode,  # type: ignore[arg-type]
        split=split,
        allocation=allocation,  # type: ignore[arg-type]
        accountant="pure" if pure else None,
    )
    strat = l1_strategy(p_rows) if pure else optimize_strategy(p_rows)
    pred = QueryBatch.from_dense(dom, p_rows)
    mae, refused = stream_mae(cfg, dom, pred, x, strat, stream, seed)
    return mae, refused, time.perf_counter() - t0


def _timed(fn: Callable[[], FloatArray], truth: FloatArray) -> Cell:
    t0 = time.perf_counter()
    ans = fn()
    return float(np.mean(np.abs(ans - truth))), 0, time.perf_counter() - t0


def _online_laplace(stream: FloatArray, x: FloatArray, seed: int) -> FloatArray:
    """Each query gets Laplace noise of scale S * Delta1(q) / epsilon (basic composition)."""
    s = stream.shape[0]
    scales = s * np.max(np.abs(stream), axis=1) / EPS  # add/remove one row: max |q_j|
    sampler = SeededSampler(seed)
    noise = np.array([sampler.laplace(float(b), 1)[0] if b > 0 else 0.0 for b in scales])
    return stream @ x + noise


def _offline_mm_laplace(stream: FloatArray, x: FloatArray, seed: int) -> FloatArray:
    strat = l1_strategy(stream)
    rel = measure(strat, x, strat.sensitivity_l1 / EPS, SeededSampler(seed), kind="laplace")
    return rel.estimate(stream)[0]


def evaluate(
    x: FloatArray, p_rows: FloatArray, stream: FloatArray, seed: int, workload: str = ""
) -> dict[str, Cell]:
    """Every row of :data:`ROWS` on one stream (``p_rows``: LAPRAS's predicted set)."""
    s = stream.shape[0]
    truth = stream @ x
    out: dict[str, Cell] = {}
    out[ROWS[0].name] = _lapras(
        x, p_rows, stream, seed, mode="paper", split="query-heavy", allocation="smooth"
    )
    out[ROWS[1].name] = _lapras(
        x, p_rows, stream, seed, mode="default", split="matrix-heavy", allocation="static"
    )
    out[ROWS[2].name] = _timed(
        lambda: online_independent_noise(
            stream, x, SeededSampler(seed), epsilon=EPS, delta=DELTA, stream_length=s
        )[0],
        truth,
    )
    out[ROWS[3].name] = _timed(
        lambda: offline_mm(
            stream, x, SeededSampler(seed), epsilon=EPS, delta=DELTA, stream_length=s
        )[0],
        truth,
    )
    labels = {
        DELTA: ("MLDP", "MWEM", "PMW selection-only"),
        0.0: ("MLDP (Laplace)", "MWEM (pure)", "PMW selection-only (pure)"),
    }
    for delta, names in labels.items():
        res = others.run(x, stream, EPS, delta, seed)
        _note(workload, f"MLDP training set at delta = {delta:g}", str(res["mldp"]["training"]))
        for key, label in zip(("mldp", "mwem", "pmw_selection_only"), names, strict=True):
            out[label] = (float(res[key]["mae"]), 0, float(res[key]["seconds"]))
    _note(workload, "LAPRAS pure strategy", strategy_name(l1_strategy(p_rows).matrix))
    out[ROWS[7].name] = _lapras(
        x,
        p_rows,
        stream,
        seed,
        mode="default",
        split="matrix-heavy",
        allocation="static",
        pure=True,
    )
    out[ROWS[8].name] = _timed(lambda: _online_laplace(stream, x, seed), truth)
    out[ROWS[9].name] = _timed(lambda: _offline_mm_laplace(stream, x, seed), truth)
    return out


def _ranges(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i, n)]


def _rows_of(ranges: list[tuple[int, int]], picks: Any, n: int) -> FloatArray:
    m = np.zeros((len(picks), n))
    for k, idx in enumerate(picks):
        i, j = ranges[int(idx)]
        m[k, i : j + 1] = 1.0
    return m


def table2_run(r: int, x: FloatArray, overlaps: list[float]) -> dict[tuple[str, float], Cell]:
    """One run of the Table 2 workload; same draws as ``bench.accuracy.run.one_run``."""
    n = x.shape[0]
    rng = np.random.default_rng(1000 + r)
    ranges = _ranges(n)
    p_rows = _rows_of(ranges, rng.choice(len(ranges), T2_P, replace=False), n)
    pool = rng.integers(0, 2, (T2_POOL, n)).astype(np.float64)
    out: dict[tuple[str, float], Cell] = {}
    for rho in overlaps:
        g = int(np.floor(rho * T2_S + 1e-9))
        stream = np.vstack(
            [
                p_rows[rng.choice(T2_P, g, replace=False)],
                pool[rng.choice(T2_POOL, T2_S - g, replace=False)],
            ]
        )
        stream = stream[rng.permutation(T2_S)]
        seed = 7919 * r + int(rho * 100)
        for name, cell in evaluate(x, p_rows, stream, seed, "Table 2").items():
            out[(name, rho)] = cell
    return out


def ranges_run(r: int, x: FloatArray) -> dict[str, Cell]:
    """One run of the 1,000-range workload: P = the first 10% of a random order of the ranges."""
    n = x.shape[0]
    rng = np.random.default_rng(5000 + r)
    ranges = _ranges(n)
    stream = _rows_of(ranges, rng.choice(len(ranges), R_QUERIES, replace=False), n)
    p_rows = stream[rng.choice(R_QUERIES, R_P, replace=False)]
    return evaluate(x, p_rows, stream, 104729 * (r + 1), "1,000 ranges")


def _med(vals: list[Cell], i: int) -> float:
    return float(np.median([v[i] for v in vals]))


def fmt(results: dict[Any, list[Cell]], cols: list[Any], labels: list[str]) -> str:
    head = "| method | DP | sees | " + " | ".join(labels) + " |"
    lines = [head, "|---|---|---|" + "---|" * len(cols)]
    for row in ROWS:
        cells = []
        for c in cols:
            vals = results[(row.name, c)]
            mae, refused, sec = _med(vals, 0), _med(vals, 1), _med(vals, 2)
            ref = f", {refused:g} refused" if refused else ""
            cells.append(f"{mae:.1f} ({_sec(sec)}{ref})")
        dp = "(1, 1e-3)" if row.privacy == "approx" else "(1, 0)"
        sees = (
            "P, then online"
            if row.name.startswith("LAPRAS")
            else ("online" if row.kind == "online" else "whole stream")
        )
        lines.append(f"| {row.name} | {dp} | {sees} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _sec(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def plot(results: dict[Any, list[Cell]], cols: list[Any], labels: list[str], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 7))
    width = 0.8 / len(ROWS)
    cmap = plt.get_cmap("tab20")
    for k, row in enumerate(ROWS):
        xs = np.arange(len(cols)) + (k - len(ROWS) / 2) * width
        mae = [_med(results[(row.name, c)], 0) for c in cols]
        sec = [_med(results[(row.name, c)], 2) for c in cols]
        hatch = "//" if row.privacy == "pure" else None
        axes[0].bar(xs, mae, width, label=row.name, color=cmap(k), hatch=hatch)
        axes[1].bar(xs, sec, width, label=row.name, color=cmap(k), hatch=hatch)
    for ax, title in zip(axes, ("median MAE", "median wall time per stream (s)"), strict=True):
        ax.set_yscale("log")
        ax.set_xticks(np.arange(len(cols)), labels, fontsize=8)
        ax.set_title(title)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, fontsize=8, loc="lower center", ncol=4)
    fig.suptitle("Adult ages (n=73), eps=1: hatched = pure DP (delta=0), plain = delta=1e-3")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    fig.savefig(path, dpi=120)
    return True
