"""The statistics of the audit: Clopper–Pearson bounds and the epsilon lower bound of one test.

A mechanism ``M`` that is ``(eps, delta)``-DP satisfies, for every event ``S`` and both orders
of a pair of neighbours ``D, D'``, ``P[M(D) in S] <= e^eps P[M(D') in S] + delta``. So if
``p_lo`` is a lower confidence bound of ``P[M(D) in S]`` and ``p_hi`` an upper one of
``P[M(D') in S]``, both holding together with probability at least ``1 - alpha``, then

    eps >= log((p_lo - delta) / p_hi)

with confidence ``1 - alpha`` (DP-Auditorium; the stochastic testers of Google's DP library;
Jagielski, Ullman & Oprea 2020). Each bound is a one-sided Clopper–Pearson bound at level
``alpha / 2`` (exact for a binomial count, never anti-conservative).

The event must not be chosen on the trials that estimate its probabilities. :func:`audit` takes
the trials of each dataset in two parts: on the first (the *selection* trials) it picks the
event ``{T > t}`` or ``{T <= t}`` over every threshold ``t`` at an order statistic, and the
order of the pair, with the largest bound computed on those trials (at the stricter level
:data:`SELECTION_ALPHA`); on the rest it estimates that one event's two probabilities. One
test, so no multiplicity correction is needed. For a mechanism whose claim is exactly tight
the bound exceeds the claim with probability at most ``alpha``; the audited Gaussian claims are
far from tight at these trial counts, the Laplace one nearly tight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import beta

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The level of the bound that chooses the event on the selection trials. Stricter than the
#: reported one: among thousands of thresholds, a tail event seen a few times looks best by
#: chance (the winner's curse); a strict level prefers events seen often enough to be measured
#: well on the evaluation trials (in simulation: the same median bound, a far better worst
#: case, for Laplace noise and for Gaussian noise alike).
SELECTION_ALPHA = 1e-3


def cp_lower(k: npt.ArrayLike, n: int, level: float) -> FloatArray:
    """One-sided Clopper–Pearson lower bound of a binomial ``p`` from ``k`` successes in ``n``:
    ``P[p >= bound] >= 1 - level``."""
    kk = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = beta.ppf(level, kk, n - kk + 1.0)
    return np.asarray(np.where(kk <= 0, 0.0, out), dtype=np.float64)


def cp_upper(k: npt.ArrayLike, n: int, level: float) -> FloatArray:
    """One-sided Clopper–Pearson upper bound: ``P[p <= bound] >= 1 - level``."""
    kk = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        out = beta.ppf(1.0 - level, kk + 1.0, n - kk)
    return np.asarray(np.where(kk >= n, 1.0, out), dtype=np.float64)


def eps_bound(
    k_num: npt.ArrayLike, k_den: npt.ArrayLike, n: int, delta: float, alpha: float
) -> FloatArray:
    """``log((p_lo - delta) / p_hi)`` for an event seen ``k_num`` times in ``n`` trials on the
    dataset in the numerator and ``k_den`` times in ``n`` on the other (``-inf`` when
    ``p_lo <= delta``); a lower bound on epsilon with confidence ``1 - alpha``."""
    lo = cp_lower(k_num, n, alpha / 2.0) - delta
    hi = cp_upper(k_den, n, alpha / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(lo > 0.0, np.log(np.maximum(lo, 1e-300) / hi), -np.inf)
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Bound:
    """The outcome of one audit: ``eps_lb`` (at least 0) holds with confidence ``1 - alpha``.

    ``event`` is ``"T > t"`` or ``"T <= t"``; ``first`` is 0 when the numerator's dataset is
    ``D`` (the first of the pair), 1 when it is ``D'``; ``k_num`` / ``k_den`` are the counts of
    the event among the ``n`` evaluation trials of each dataset."""

    eps_lb: float
    event: str
    threshold: float
    first: int
    k_num: int
    k_den: int
    n: int
    n_selection: int


def _counts(sorted_t: FloatArray, thresholds: FloatArray) -> tuple[IntArray, IntArray]:
    """Per threshold: how many of ``sorted_t`` are above it, and how many at or below it."""
    below = np.searchsorted(sorted_t, thresholds, side="right").astype(np.int64)
    return sorted_t.size - below, below


def audit(
    t_d: npt.ArrayLike,
    t_dp: npt.ArrayLike,
    *,
    delta: float,
    alpha: float = 0.05,
    selection: float = 0.25,
    selection_alpha: float = SELECTION_ALPHA,
) -> Bound:
    """The epsilon lower bound from the scalar statistics ``t_d`` (trials on ``D``) and
    ``t_dp`` (on ``D'``), as the module doc says; both have the same number of trials, the
    first ``selection`` of them (in order) choose the event, by the bound on them at the level
    ``selection_alpha``."""
    a = np.asarray(t_d, dtype=np.float64).reshape(-1)
    b = np.asarray(t_dp, dtype=np.float64).reshape(-1)
    if a.size != b.size or a.size < 8:
        raise ValueError("both datasets need the same number of trials, at least 8")
    if not 0.0 < selection < 1.0:
        raise ValueError("the selection fraction must be strictly between 0 and 1")
    m = max(2, int(a.size * selection))
    sel_a, sel_b = np.sort(a[:m]), np.sort(b[:m])
    ev_a, ev_b = np.sort(a[m:]), np.sort(b[m:])
    n = int(ev_a.size)
    cand = np.unique(np.concatenate([sel_a, sel_b]))
    above_a, below_a = _counts(sel_a, cand)
    above_b, below_b = _counts(sel_b, cand)
    # (event, numerator) pairs: above/below, D over D' and D' over D
    options = (
        ("T > t", 0, above_a, above_b),
        ("T > t", 1, above_b, above_a),
        ("T <= t", 0, below_a, below_b),
        ("T <= t", 1, below_b, below_a),
    )
    best: tuple[float, str, int, float] = (-math.inf, "T > t", 1, float(cand[0]))
    for event, first, sel_num, sel_den in options:
        sel_lb = eps_bound(sel_num, sel_den, m, delta, selection_alpha)
        i = int(np.argmax(sel_lb))
        if sel_lb[i] > best[0]:
            best = (float(sel_lb[i]), event, first, float(cand[i]))
    _, event, first, t = best
    e_above_a, e_below_a = _counts(ev_a, np.array([t]))
    e_above_b, e_below_b = _counts(ev_b, np.array([t]))
    k_a = int((e_above_a if event == "T > t" else e_below_a)[0])
    k_b = int((e_above_b if event == "T > t" else e_below_b)[0])
    k_num, k_den = (k_a, k_b) if first == 0 else (k_b, k_a)
    lb = float(eps_bound(k_num, k_den, n, delta, alpha).reshape(-1)[0])
    return Bound(
        eps_lb=max(lb, 0.0),
        event=event,
        threshold=t,
        first=first,
        k_num=k_num,
        k_den=k_den,
        n=n,
        n_selection=m,
    )
