"""Baselines for the benchmarks (paper §6): Online Independent Noise and OfflineMM.

Neither is used by the proxy. Both take the exact histogram and a sampler as arguments.
"""

from __future__ import annotations

import numpy as np

from dp.calibration import agm_sigma
from dp.domain import FloatArray
from dp.noise import Sampler
from dp.release import measure
from dp.strategy import Strategy, optimize_strategy


def online_independent_noise(
    workload: FloatArray,
    histogram: FloatArray,
    sampler: Sampler,
    *,
    epsilon: float,
    delta: float,
    stream_length: int,
) -> tuple[FloatArray, FloatArray]:
    """Answer each of the stream's queries with its own Gaussian noise; returns (answers, sigmas).

    Mechanism: query ``i`` (a row of ``workload``, L2 sensitivity = its largest absolute weight
    under add/remove-one-row) gets ``N(0, sigma_i^2)`` with ``sigma_i`` the Analytic Gaussian
    Mechanism's for ``(epsilon / S, delta / (S + 1))`` (Balle & Wang 2018, Theorem 8). Guarantee:
    ``(epsilon, delta)``-DP for at most ``S`` queries, by basic composition (Dwork & Roth 2014,
    Theorem 3.16).
    """
    w = np.atleast_2d(np.asarray(workload, dtype=np.float64))
    if w.shape[0] > stream_length:
        raise ValueError("more queries than the stream length")
    x = np.asarray(histogram, dtype=np.float64).reshape(-1)
    unit = agm_sigma(epsilon / stream_length, delta / (stream_length + 1))
    sens = np.max(np.abs(w), axis=1)
    sigmas = unit * sens
    noise = np.array([sampler.gaussian(float(s), 1)[0] if s > 0 else 0.0 for s in sigmas])
    return w @ x + noise, sigmas


def offline_mm(
    workload: FloatArray,
    histogram: FloatArray,
    sampler: Sampler,
    *,
    epsilon: float,
    delta: float,
    stream_length: int,
    strategy: Strategy | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The Matrix Mechanism on the whole stream, known in advance; returns (answers, variances).

    Mechanism: ``y = A x + N(0, sigma^2 I)`` for the optimised strategy ``A`` with
    ``sigma = Delta2(A) * sigma_AGM(epsilon, delta / (S + 1))`` (the paper's per-release delta),
    answers ``W A^+ y``. Guarantee: ``(epsilon, delta / (S + 1))``-DP, so ``(epsilon, delta)``-DP
    (add/remove one row; Balle & Wang 2018, Theorem 8; everything after ``y`` is
    post-processing).
    """
    w = np.atleast_2d(np.asarray(workload, dtype=np.float64))
    strat = strategy if strategy is not None else optimize_strategy(w)
    sigma = agm_sigma(epsilon, delta / (stream_length + 1), strat.sensitivity_l2)
    rel = measure(strat, histogram, sigma, sampler, kind="gaussian")
    return rel.estimate(w)
