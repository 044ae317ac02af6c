"""The other published mechanisms as accuracy baselines: MLDP and PMW/MWEM.

``run(histogram, stream_queries, epsilon, delta, seed)`` answers every query of the stream with

- ``mldp``: model publishing (``dp.mldp``), training set chosen automatically by expected error
  on the stream's queries (taken as the public candidate workload), one release at
  ``(epsilon, delta)``, every query answered from the fitted model;
- ``mwem``: MWEM (``dp.pmw``, final synthetic distribution) on the stream's queries as workload;
- ``pmw_selection_only``: the selection-only private multiplicative weights (average
  distribution).

All three see the whole stream up front (an offline setting, like OfflineMM); each spends the
full budget on its own. With ``delta == 0`` they are pure ``epsilon``-DP; with ``delta > 0``,
MLDP uses Gaussian noise (AGM) and PMW the zCDP accounting. The total of the histogram is *not*
taken as public: PMW spends 5% of epsilon on a noisy total. Returns, per method, the mean
absolute error over the stream, the wall time, and the mechanism's parameters.

Run as a script for a quick look on the Adult age histogram:
``python bench/others.py`` (1,000 random ranges, epsilon = 1).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dp.mldp import MLDPModel
from dp.noise import SeededSampler
from dp.pmw import Variant, mwem

#: Rounds of MWEM and of the selection-only variant (chosen on Adult age, 1,000 ranges, eps = 1).
MWEM_ROUNDS = 30
SELECTION_ONLY_ROUNDS = 100


def _matrix(stream_queries: Any, n: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    if hasattr(stream_queries, "matrix"):  # a QueryBatch
        stream_queries = stream_queries.matrix
    if hasattr(stream_queries, "toarray"):
        stream_queries = stream_queries.toarray()
    w = np.asarray(stream_queries, dtype=np.float64)
    if w.ndim == 1:
        w = w.reshape(1, -1)
    if w.ndim != 2 or w.shape[1] != n:
        raise ValueError("stream queries must be a matrix with one column per histogram cell")
    return w


def run(
    histogram: Any,
    stream_queries: Any,
    epsilon: float,
    delta: float,
    seed: int,
    *,
    mwem_rounds: int = MWEM_ROUNDS,
    selection_only_rounds: int = SELECTION_ONLY_ROUNDS,
) -> dict[str, dict[str, Any]]:
    """MAE and run time of MLDP, MWEM and selection-only PMW on a stream of linear queries."""
    x = np.asarray(histogram, dtype=np.float64).reshape(-1)
    w = _matrix(stream_queries, x.shape[0])
    truth = w @ x
    out: dict[str, dict[str, Any]] = {}

    t0 = time.perf_counter()
    model = MLDPModel.fit(
        x, epsilon=epsilon, delta=delta, sampler=SeededSampler(seed), candidates=w
    )
    answers = model.answer(w)
    out["mldp"] = {
        "mae": float(np.mean(np.abs(answers - truth))),
        "seconds": time.perf_counter() - t0,
        "answered": int(w.shape[0]),
        "training": model.training_name,
        "training_queries": int(model.training.shape[0]),
        "noise": model.noise,
        "noise_scale": model.noise_scale,
    }

    runs: tuple[tuple[str, Variant, int, int], ...] = (
        ("mwem", "mwem", mwem_rounds, 1),
        ("pmw_selection_only", "selection_only", selection_only_rounds, 2),
    )
    for name, variant, rounds, offset in runs:
        t0 = time.perf_counter()
        result = mwem(
            x,
            w,
            epsilon=epsilon,
            delta=delta,
            rounds=rounds,
            variant=variant,
            sampler=SeededSampler(seed + 1_000_003 * offset),
        )
        answers = result.answer(w)
        out[name] = {
            "mae": float(np.mean(np.abs(answers - truth))),
            "seconds": time.perf_counter() - t0,
            "answered": int(w.shape[0]),
            "rounds": rounds,
            "accounting": result.accounting,
            "epsilon_select": result.epsilon_select,
            "epsilon_measure": result.epsilon_measure,
        }
    return out


def _adult_age_histogram() -> np.ndarray[Any, np.dtype[np.float64]]:
    import sql_fixtures.adult as adult

    ages = np.array([int(line.split(",")[0]) for line in adult.csv_text().splitlines()])
    return np.bincount(ages - 17, minlength=73).astype(np.float64)


if __name__ == "__main__":
    hist = _adult_age_histogram()
    rng = np.random.default_rng(0)
    n = hist.shape[0]
    queries = np.zeros((1000, n))
    for i in range(1000):
        a, b = sorted(rng.integers(0, n + 1, 2))
        queries[i, a : max(b, a + 1)] = 1.0
    for eps, dlt in ((1.0, 0.0), (1.0, 1e-3)):
        for method, row in run(hist, queries, eps, dlt, seed=0).items():
            print(
                f"eps={eps} delta={dlt} {method:20s} MAE {row['mae']:9.2f}  {row['seconds']:.3f} s"
            )
