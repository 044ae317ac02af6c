"""Statistics of one noisy histogram, with confidence intervals (post-processing).

``MIN``, ``MAX``, ``percentile_cont``/``percentile_disc`` and ``count(DISTINCT x)`` are answered
from one noisy count per public value of ``x``, in ascending order: ``y_i = x_i + e_i``, where
``x_i`` is the number of rows with the ``i``-th value and ``e_i`` has the standard error ``s_i``
the engine states for that row (public: a function of the noise scale and of the releases the
answer came from). Everything here is a function of ``(y, s)`` and of public constants, so it
costs no privacy (post-processing, Dwork & Roth 2014, Prop. 2.1). ``docs/sql.md`` §2.2 says
what each estimator is, and ``docs/benchmarks.md`` ("Statistics of a noisy histogram") how
biased each one is on Adult (``python -m bench.stats``).

Only cells that can hold a row are passed in (a value the statement's conditions exclude from
the group is known to be empty, from the declaration alone: the caller leaves it out). A cell
with ``s_i = 0`` is exact.

**The intervals** cover the statistic of the true histogram with probability at least
:data:`CONFIDENCE` (95%) when the errors ``e_i`` are independent, zero-mean and Gaussian or
Laplace with the stated standard errors. That holds for a fresh online release (i.i.d. noise on
every row); an answer the engine combined from several releases (generalised least squares,
the Matrix Mechanism release) may have correlated errors between the cells, and its interval is
then approximate (docs/sql.md §2.2). Every interval is an inversion of one-sided tests, each at
level 2.5%, of a linear function of the cells whose standard error is known exactly; the
multiplier :data:`Z` (2.118 standard errors) is the 97.5% point of a Laplace variable, above the
Gaussian's 1.960, so one constant serves both noise families (a weighted sum of independent
Laplace variables is closer to Gaussian than one Laplace variable: ``tests/dp/test_stats.py``
checks the tail numerically).

- A **percentile** at fraction ``f`` is the first value whose cumulative count ``C_k`` reaches
  its rank (``f`` times the total ``N``, PostgreSQL's definitions). ``C_k - f N`` is linear in
  the cells (weights ``1 - f`` up to ``k``, ``-f`` after), so its noisy value and standard
  error are known; the interval is the set of values ``v_k`` where ``C_k - f N`` is not
  significantly below its threshold and the one before it not significantly above: the smallest
  ``k`` where the test of "``C_k - fN`` reaches it" is not rejected, to the first ``k`` of the
  last run of cells where it is significantly reached. Only one test decides each end (at the
  true value, or just below it), so no correction for many tests is needed. ``MIN`` and ``MAX`` are the percentiles at 0 and 1 (``percentile_disc``).
- A **count of distinct values** has the interval from the larger of two lower bounds, each at
  level 2.5% (the cells significantly above zero, Bonferroni over the cells; and the sign
  statistic below with Hoeffding's inequality), up to the number of cells: noise can never rule
  out one row in a cell, so the upper end is every value the group can take.

**The point estimates** have little bias at realistic noise (measured, docs/benchmarks.md):

- **percentiles** invert the least-squares non-decreasing fit of the noisy cumulative counts
  (an isotonic regression through 0, so cells below zero do not lift the total as rounding
  them up to 0 would) at the rank ``f`` times the noisy total (unbiased), then are kept inside
  their interval;
- **MIN/MAX** are the first/last value whose *tail* -- the noisy number of rows at or beyond it,
  a sum of cells -- reaches :data:`TAIL_Z` of its own standard errors: one rare extreme value
  is found when the rows beyond it together stand out of the noise, which a cell-by-cell test
  misses (it cut every value whose own count was under three standard errors);
- **count(DISTINCT)** counts the cells, less twice the number of noisy cells below zero: an
  empty cell is below zero with probability 1/2 exactly (symmetric noise), a cell with rows
  with less, so ``K - 2 #{y_i < 0}`` estimates the number of non-empty cells without bias when
  their counts stand out of the noise, and under-counts by ``2 P(y_i < 0)`` a cell whose count
  does not (no estimator tells one row from none under noise of standard error 25).

With exact answers (every ``s_i = 0``) each statistic is PostgreSQL's own, and its interval is
that one value. With noise a statistic is never NULL while a cell can hold a row (whether a
group holds rows is the data's secret, ``rewriter.domaincheck``): when the noisy total rounds to
0, the cell with the largest noisy count stands for the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The confidence of every interval (two-sided).
CONFIDENCE = 0.95
#: The multiplier of a standard error for a one-sided test at level (1 - CONFIDENCE) / 2: the
#: 97.5% point of a Laplace variable of unit standard deviation, ln(20) / sqrt(2) = 2.118 (the
#: Gaussian's is 1.960), so that it holds for both noise families.
Z = math.log(1.0 / (1.0 - CONFIDENCE)) / math.sqrt(2.0)
#: MIN/MAX: a value is the extreme when its tail's noisy count reaches this many standard
#: errors of that count (chosen on Adult by bench.stats: the least mean absolute bias).
TAIL_Z = 0.5
#: Tolerance of comparisons of cumulative counts (exact answers are integers in floats).
_EPS = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Located:
    """A statistic located on the cells: its point estimate between cells ``lower`` and
    ``upper`` (``lower + t`` of the way to ``upper``: a ``percentile_cont`` interpolates; else
    ``t = 0``), and its interval from cell ``low`` to cell ``high``."""

    lower: int
    upper: int
    t: float
    low: int
    high: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Counted:
    """A count of distinct values: the estimate and its interval."""

    value: int
    low: int
    high: int


def _arrays(y: npt.ArrayLike, s: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    ya = np.asarray(y, dtype=np.float64).reshape(-1)
    sa = np.asarray(s, dtype=np.float64).reshape(-1)
    if ya.shape != sa.shape:
        raise ValueError("counts and standard errors differ in length")
    if np.any(sa < 0) or not np.all(np.isfinite(sa)) or not np.all(np.isfinite(ya)):
        raise ValueError("standard errors must be finite and non-negative, counts finite")
    return ya, sa


def has_rows(y: npt.ArrayLike) -> bool:
    """Whether the histogram's (noisy) total rounds to at least one row."""
    return float(np.sum(np.asarray(y, dtype=np.float64))) >= 0.5


def isotonic_cdf(y: npt.ArrayLike) -> FloatArray:
    """The least-squares non-decreasing fit to the noisy cumulative counts ``cumsum(y)``,
    through ``F_0 = 0`` (pool adjacent violators), never below 0. Exact counts are returned
    as their cumulative sums."""
    c = np.cumsum(np.asarray(y, dtype=np.float64))
    # blocks of (mean, weight); the anchor F_0 = 0 weighs as much as every other point
    means: list[float] = [0.0]
    weights: list[float] = [float(len(c) + 1)]
    sizes: list[int] = [1]
    for v in c:
        means.append(float(v))
        weights.append(1.0)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w = weights[-2] + weights[-1]
            m = (means[-2] * weights[-2] + means[-1] * weights[-1]) / w
            n = sizes[-2] + sizes[-1]
            del means[-1], weights[-1], sizes[-1]
            means[-1], weights[-1], sizes[-1] = m, w, n
    fit = np.repeat(np.asarray(means, dtype=np.float64), np.asarray(sizes))[1:]
    out: FloatArray = np.maximum(fit, 0.0)
    return out


def _first(mask: npt.NDArray[np.bool_], default: int) -> int:
    hits = np.flatnonzero(mask)
    return int(hits[0]) if hits.size else default


def _last_run(mask: npt.NDArray[np.bool_], default: int) -> int:
    """The first cell of the last run of True cells reaching the end; ``default`` if the last
    cell is False."""
    if mask.size == 0 or not mask[-1]:
        return default
    misses = np.flatnonzero(~mask)
    return int(misses[-1]) + 1 if misses.size else 0


def _rank_interval(
    y: FloatArray, s: FloatArray, f: float, shift: float, z: float
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """For ``D_k = C_k - f N - shift`` (``C_k`` the cumulative count up to cell ``k``, ``N``
    the total): where ``D_k >= 0`` is plausible (not rejected at ``z``) and where it is
    significant."""
    c = np.cumsum(y)
    n = c[-1]
    v = s * s
    below = np.cumsum(v)
    above = below[-1] - below
    sd = np.sqrt((1.0 - f) ** 2 * below + f * f * above)
    d = c - f * n - shift
    return d + z * sd >= -_EPS, d - z * sd >= -_EPS


def percentile(
    y: npt.ArrayLike, s: npt.ArrayLike, f: float, *, cont: bool, z: float = Z
) -> Located | None:
    """``percentile_cont`` (``cont``) or ``percentile_disc`` at fraction ``f`` of the
    histogram ``y`` (cells in ascending order of their values) with standard errors ``s``.

    PostgreSQL's definitions on exact counts: ``percentile_disc`` is the first value whose
    cumulative count reaches ``max(ceil(f N), 1)``; ``percentile_cont`` interpolates between
    the rows at 0-based positions ``floor(f (N - 1))`` and ``ceil(f (N - 1))``. Noisy counts
    are first made a non-decreasing cumulative count (:func:`isotonic_cdf`). None (NULL) when
    no cell can hold a row, or every cell is exact and none holds one; a noisy histogram whose
    total rounds to 0 is not taken for an empty group (whether a group holds rows is the data's
    secret): the cell with the largest noisy count stands for it, within the interval."""
    ya, sa = _arrays(y, s)
    if not 0.0 <= f <= 1.0:
        raise ValueError("the fraction must be between 0 and 1")
    rows = has_rows(ya)
    if ya.size == 0 or (not rows and not np.any(sa > 0)):
        return None
    last = ya.size - 1
    fit = isotonic_cdf(ya)
    n = float(np.sum(ya))  # the raw total: unbiased (the fit's end is not, where it is flat)
    if cont:
        # rows r (0-based) are at the first cell whose cumulative count reaches r + 1;
        # C_k > f (N - 1) for the lower row, C_k >= f (N - 1) + 1 for the upper one
        pos = f * max(n - 1.0, 0.0)
        lo_r, hi_r = math.floor(pos), math.ceil(pos)
        lower = _first(fit >= lo_r + 1 - _EPS, last)
        upper = _first(fit >= hi_r + 1 - _EPS, last)
        t = pos - lo_r
        plausible, _ = _rank_interval(ya, sa, f, -f + _EPS * 2, z)
        _, significant = _rank_interval(ya, sa, f, 1.0 - f, z)
    else:
        target = max(f * n, 0.5)
        lower = upper = _first(fit >= target - _EPS, last)
        t = 0.0
        # f = 0 (MIN): the first cell with a row, C_k >= 1; else C_k >= f N
        shift = 1.0 if f == 0.0 else 0.0
        plausible, significant = _rank_interval(ya, sa, f, shift, z)
    low = _first(plausible, last)
    # the first cell of the last run of significant cells: the interval ends below k* only
    # if the test at k* - 1 (where C_k is short of the rank) rejects, one test at level 2.5%
    high = max(_last_run(significant, last), low)
    if not rows:
        lower = upper = int(np.argmax(ya))
    lower, upper = min(max(lower, low), high), min(max(upper, low), high)
    return Located(lower=lower, upper=upper, t=t if upper > lower else 0.0, low=low, high=high)


def extreme(
    y: npt.ArrayLike, s: npt.ArrayLike, *, largest: bool, z: float = Z, tail_z: float = TAIL_Z
) -> Located | None:
    """``MAX`` (``largest``) or ``MIN`` of the histogram: the last (first) cell whose tail --
    the noisy count of the rows at or beyond it -- reaches ``tail_z`` standard errors of that
    count (and 1/2, so that exact counts give the last (first) cell with a row); its interval
    is that of ``percentile_disc`` at 1 (0), and so is the estimate when no tail stands out
    although the histogram holds rows. None and NULL as :func:`percentile`."""
    ya, sa = _arrays(y, s)
    located = percentile(ya, sa, 1.0 if largest else 0.0, cont=False, z=z)
    if located is None or not has_rows(ya):
        return located
    order = slice(None, None, -1) if largest else slice(None)
    tail = np.cumsum(ya[order])[order]
    sd = np.sqrt(np.cumsum((sa * sa)[order])[order])
    found = np.flatnonzero(tail >= np.maximum(tail_z * sd, 0.5) - _EPS)
    k = int(found[-1] if largest else found[0]) if found.size else located.lower
    k = min(max(k, located.low), located.high)
    return Located(lower=k, upper=k, t=0.0, low=located.low, high=located.high)


def distinct(y: npt.ArrayLike, s: npt.ArrayLike, *, z_level: float = 1.0 - CONFIDENCE) -> Counted:
    """``count(DISTINCT x)``: the number of cells with a row.

    An exact cell (``s_i = 0``) counts when it holds a row. Of the ``K`` noisy cells, the
    estimate counts ``K - 2 #{y_i < 0} - #{y_i = 0}`` (see the module doc), within ``[1, K]`` (noise never
    tells a group without rows; 0 when every cell is exact and empty). The interval: from the larger
    of the cells above ``z_B`` standard errors (``z_B``: the Laplace point of
    ``z_level / (2 K)``, Bonferroni) and the estimate less ``2 sqrt(K ln(2 / z_level) / 2)``
    (Hoeffding), to every cell."""
    ya, sa = _arrays(y, s)
    exact = sa == 0.0
    sure = int(np.count_nonzero(exact & (ya >= 0.5)))
    noisy = ~exact
    k = int(np.count_nonzero(noisy))
    negative = int(np.count_nonzero(noisy & (ya < -_EPS)))
    # a noisy count of 0 (to rounding: exact answers combined from several releases carry
    # 1e-12 errors; probability ~0 under continuous noise, so the estimator's distribution is
    # unchanged) is half below zero: with no noise at all the estimate is the number of cells
    # with a row
    zero = int(np.count_nonzero(noisy & (np.abs(ya) <= _EPS)))
    if k == 0 and sure == 0:
        return Counted(value=0, low=0, high=0)
    # at least one: noise never tells a group without rows (unless every cell is exact)
    value = min(max(sure + k - 2 * negative - zero, 1), sure + k)
    if k == 0:
        return Counted(value=value, low=value, high=value)
    alpha = z_level / 2.0
    z_b = math.log(0.5 / (alpha / k)) / math.sqrt(2.0)  # one Laplace's point, >= Gaussian's
    strong = int(np.count_nonzero(noisy & (ya >= z_b * sa)))
    hoeffding = sure + k - 2 * (negative + math.sqrt(k * math.log(1.0 / alpha) / 2.0))
    low = max(sure + strong, math.ceil(hoeffding), 1 if sure + k else 0)
    return Counted(value=max(value, low), low=low, high=sure + k)
