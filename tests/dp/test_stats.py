"""Statistics of one noisy histogram (dp.stats): PostgreSQL's own answers on exact counts, and
each estimator's and interval's property on crafted histograms. Accuracy over random noise is
measured by ``python -m bench.stats`` (docs/benchmarks.md), not asserted here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp import stats


def _rows(counts: list[int]) -> list[int]:
    """The sorted rows of a histogram over the values 0, 1, 2, ..."""
    return [v for v, n in enumerate(counts) for _ in range(n)]


def _pg_disc(rows: list[int], f: float) -> int:
    return rows[max(math.ceil(f * len(rows)), 1) - 1]


def _pg_cont(rows: list[int], f: float) -> float:
    pos = f * (len(rows) - 1)
    lo, hi = rows[math.floor(pos)], rows[math.ceil(pos)]
    return lo + (hi - lo) * (pos - math.floor(pos))


@pytest.mark.parametrize("seed", range(40))
def test_exact_counts_give_postgresql_answers_and_a_point_interval(seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 12))
    counts = [int(c) for c in rng.integers(0, 4, k) * rng.integers(0, 2, k)]
    if not any(counts):
        counts[int(rng.integers(0, k))] = 1
    rows = _rows(counts)
    y, s = np.asarray(counts, dtype=float), np.zeros(k)
    for f in (0.0, 0.1, 0.25, 1 / 3, 0.5, 0.9, 1.0):
        disc = stats.percentile(y, s, f, cont=False)
        assert disc is not None and disc.lower == disc.upper == disc.low == disc.high
        assert disc.lower == _pg_disc(rows, f)
        cont = stats.percentile(y, s, f, cont=True)
        assert cont is not None and cont.lower is not None and cont.upper is not None
        assert cont.lower + (cont.upper - cont.lower) * cont.t == pytest.approx(_pg_cont(rows, f))
        assert (cont.low, cont.high) == (cont.lower, cont.upper)  # the two rows around it
    lo = stats.extreme(y, s, largest=False)
    hi = stats.extreme(y, s, largest=True)
    assert lo is not None and hi is not None
    assert (lo.lower, lo.low, lo.high) == (min(rows),) * 3
    assert (hi.lower, hi.low, hi.high) == (max(rows),) * 3
    d = stats.distinct(y, s)
    assert d.value == d.low == d.high == len(set(rows))


def test_no_rows() -> None:
    zero = np.zeros(5)
    assert stats.percentile(zero, zero, 0.5, cont=True) is None  # exact and empty: NULL
    assert stats.extreme([], [], largest=True) is None  # no value can hold a row
    assert stats.distinct(zero, zero) == stats.Counted(value=0, low=0, high=0)
    # a noisy total that rounds to 0 is no proof of an empty group: the largest noisy count
    # stands for it, within the interval
    noisy = stats.percentile([-3.0, 1.0, 0.5], [2.0, 2.0, 2.0], 0.5, cont=False)
    assert noisy is not None and noisy.low <= noisy.lower == 1 <= noisy.high <= 2
    assert stats.distinct([-3.0, 1.0, 1.0], [2.0] * 3) == stats.Counted(value=1, low=1, high=3)


def test_isotonic_cdf_is_the_monotone_least_squares_fit() -> None:
    y = np.array([5.0, -8.0, 2.0, 3.0, -1.0, 4.0])
    fit = stats.isotonic_cdf(y)
    assert np.all(np.diff(fit) >= -1e-12) and fit[0] >= 0
    c = np.cumsum(y)  # 5, -3, -1, 2, 1, 5
    # no non-decreasing sequence through 0 is closer (checked against perturbations)
    best = float(np.sum((fit - c) ** 2))
    rng = np.random.default_rng(0)
    for _ in range(2000):
        other = np.maximum.accumulate(np.maximum(fit + rng.normal(0, 0.5, fit.size), 0))
        assert float(np.sum((other - c) ** 2)) >= best - 1e-9
    assert np.array_equal(stats.isotonic_cdf([1.0, 2.0, 0.0, 4.0]), [1.0, 3.0, 3.0, 7.0])


def test_a_rare_maximum_is_found_through_its_tail() -> None:
    """Five cells of 10 rows above the bulk, each only 2 standard errors: the rule that
    kept a value only when its own count reached 3 standard errors cut them all; their tail
    (50 rows, 4.5 standard errors) stands out."""
    y = np.array([1000.0, 800.0, 0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 10.0])
    s = np.full(y.size, 5.0)
    hi = stats.extreme(y, s, largest=True)
    assert hi is not None and hi.lower == 8
    assert hi.low <= 8 <= hi.high == 8
    # empty cells above the data (noise-free here) never raise the maximum
    up = np.concatenate([y, np.zeros(4)])
    top = stats.extreme(up, np.full(up.size, 5.0), largest=True)
    assert top is not None and top.lower == 8 and top.high == 12  # one row cannot be ruled out
    lo = stats.extreme(y[::-1], s, largest=False)
    assert lo is not None and lo.lower == 0


def test_the_maximum_interval_is_one_test_deep() -> None:
    """The lower end of MAX's interval is the first cell whose tail above is not significantly
    positive: a big tail keeps it up, noise below does not pull it down."""
    y = np.array([500.0, 500.0, 0.0, 0.0, 0.0, 200.0])
    s = np.full(y.size, 10.0)
    hi = stats.extreme(y, s, largest=True)
    assert hi is not None and (hi.lower, hi.low, hi.high) == (5, 5, 5)
    weak = stats.extreme(np.array([500.0, 500.0, 0.0, 0.0, 0.0, 15.0]), s, largest=True)
    # 15 rows at 1.5 standard errors: found by the tail rule, but not certain
    assert weak is not None and weak.lower == 5 and weak.low == 1 and weak.high == 5


def test_percentile_interval_brackets_the_rank() -> None:
    # 100 rows at each of 10 values, noise 5 per cell: the median's cumulative count is
    # 500 +- a few standard errors (about 16): the interval is the values near it
    y = np.full(10, 100.0)
    s = np.full(10, 5.0)
    p = stats.percentile(y, s, 0.5, cont=False)
    assert p is not None and p.lower == 4 and p.low == 4 and p.high == 5
    wide = stats.percentile(y, np.full(10, 60.0), 0.5, cont=False)
    assert wide is not None and wide.low < 4 and wide.high > 5  # noise of 60 a cell


def test_percentile_ignores_negative_noise_below_the_data() -> None:
    """Cells below zero do not lift the total as clamping them at 0 would."""
    y = np.array([-20.0, -15.0, 300.0, 300.0, -10.0, -25.0])
    p = stats.percentile(y, np.full(6, 10.0), 0.5, cont=True)
    assert p is not None and p.lower == 2 and p.upper == 3


def test_distinct_counts_cells_less_twice_those_below_zero() -> None:
    y = np.array([50.0, 40.0, -3.0, 2.0, -1.0, 30.0, 0.4, 7.0])
    s = np.full(y.size, 5.0)
    d = stats.distinct(y, s)
    assert d.value == 8 - 2 * 2
    assert d.high == 8 and d.low <= d.value
    # exact cells count as they are; noisy ones as above
    mixed = stats.distinct([3.0, 0.0, 5.0, -2.0], [0.0, 0.0, 5.0, 5.0])
    assert mixed.value == 1  # 1 exact, then 2 noisy cells less twice the one below zero
    assert (mixed.low, mixed.high) == (1, 3)
    # cells far above the noise are certain: the interval starts there
    big = stats.distinct(np.array([500.0, 400.0, 300.0, 1.0]), np.full(4, 5.0))
    assert big.low >= 3 and big.high == 4


def _laplace_tail(weights: list[float], z: float) -> float:
    """P(sum w_i L_i > z sd) for independent unit Laplace variables, by numerical convolution
    of their densities on a fine grid."""
    from scipy.signal import fftconvolve

    step, half = 0.002, 40.0
    grid = np.arange(-half, half + step / 2, step)
    total = np.ones(1)
    sd = math.sqrt(sum(2 * w * w for w in weights))
    for w in weights:
        # the probability of each grid interval (exact, from the Laplace CDF)
        cdf = np.where(grid < 0, 0.5 * np.exp(grid / w), 1 - 0.5 * np.exp(-grid / w))
        total = fftconvolve(total, np.diff(cdf, prepend=0.0))
    xs = np.arange(total.size) * step - half * len(weights)
    return float(np.clip(total, 0, None)[xs > z * sd].sum())


@pytest.mark.parametrize(
    "weights",
    [[1.0], [1.0, 1.0], [1.0] * 3, [1.0] * 6, [1.0, 0.5], [1.0, 0.3, 0.3], [0.5, 0.5, 1.0, 2.0]],
)
def test_the_multiplier_holds_for_laplace_sums(weights: list[float]) -> None:
    """Z standard errors is the 97.5% point of one Laplace variable; a weighted sum of several
    has a lighter tail in units of its standard error (so one multiplier serves Gaussian and
    Laplace noise)."""
    tail = _laplace_tail(weights, stats.Z)
    assert tail <= 0.025 + 2e-4
    if len(weights) == 1:
        assert tail == pytest.approx(0.025, abs=2e-4)
    gaussian = 0.5 * math.erfc(stats.Z / math.sqrt(2))
    assert gaussian < 0.025


def test_invalid_input() -> None:
    with pytest.raises(ValueError):
        stats.percentile([1.0], [1.0, 2.0], 0.5, cont=True)
    with pytest.raises(ValueError):
        stats.percentile([1.0], [-1.0], 0.5, cont=True)
    with pytest.raises(ValueError):
        stats.percentile([1.0], [1.0], 1.5, cont=True)
