"""Noise: goodness of fit at the claimed scale, and rejection at wrong scales."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dp.noise import DrawnAhead, Sampler, SecureSampler, SeededSampler

N = 5000
ACCEPT_P = 1e-4  # false alarm probability per test at the claimed scale
REJECT_P = 1e-6  # 25% off (Gaussian), 40% off (Laplace): 0 misses in 3,000 simulated trials


@pytest.fixture(scope="module")
def secure() -> SecureSampler:
    return SecureSampler()


def _samplers(secure: SecureSampler) -> list[Sampler]:
    return [SeededSampler(20260301), secure]


@pytest.mark.parametrize("scale", [0.5, 3.0, 250.0])
def test_gaussian_fits_claimed_scale_only(secure: SecureSampler, scale: float) -> None:
    for sampler in _samplers(secure):
        x = sampler.gaussian(scale, N)
        assert x.shape == (N,) and x.dtype == np.float64
        assert stats.kstest(x, stats.norm(0, scale).cdf).pvalue > ACCEPT_P
        for wrong in (0.75 * scale, 1.25 * scale):
            assert stats.kstest(x, stats.norm(0, wrong).cdf).pvalue < REJECT_P
        # and its tails are Gaussian: the excess kurtosis is near 0 (a Laplace's is 3)
        assert abs(stats.kurtosis(x)) < 0.6


@pytest.mark.parametrize("scale", [0.5, 3.0, 250.0])
def test_laplace_fits_claimed_scale_only(secure: SecureSampler, scale: float) -> None:
    for sampler in _samplers(secure):
        x = sampler.laplace(scale, N)
        assert x.shape == (N,)
        assert stats.kstest(x, stats.laplace(0, scale).cdf).pvalue > ACCEPT_P
        # KS is less sharp on the Laplace's peak: test 40% off
        for wrong in (0.7 * scale, 1.4 * scale):
            assert stats.kstest(x, stats.laplace(0, wrong).cdf).pvalue < REJECT_P


def test_secure_sampler_draws_differ_and_validate(secure: SecureSampler) -> None:
    a, b = secure.gaussian(1.0, 8), secure.gaussian(1.0, 8)
    assert not np.array_equal(a, b)
    # samplers share OpenDP's (stateless) spaces, never a source of randomness: two of them
    # draw independently (8 equal draws of N(0, 1) would be a broken generator)
    assert not np.array_equal(SecureSampler().gaussian(1.0, 8), SecureSampler().gaussian(1.0, 8))
    assert secure.gaussian(1.0, 0).shape == (0,)
    assert secure.laplace(1.0, 0).shape == (0,)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            secure.gaussian(bad, 3)
        with pytest.raises(ValueError):
            secure.laplace(bad, 3)
    with pytest.raises(ValueError):
        secure.gaussian(1.0, -1)


def test_seeded_sampler_is_reproducible() -> None:
    assert np.array_equal(SeededSampler(7).gaussian(2.0, 5), SeededSampler(7).gaussian(2.0, 5))


class _Counting:
    """A sampler that counts its calls and hands out consecutive integers (which value went
    where is then visible)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int]] = []
        self._next = 0.0

    def _draw(self, kind: str, scale: float, size: int) -> np.ndarray:
        self.calls.append((kind, scale, size))
        out = np.arange(self._next, self._next + size, dtype=np.float64)
        self._next += size
        return out

    def gaussian(self, scale: float, size: int) -> np.ndarray:
        return self._draw("gaussian", scale, size)

    def laplace(self, scale: float, size: int) -> np.ndarray:
        return self._draw("laplace", scale, size)


def test_drawn_ahead_hands_out_each_value_once_in_one_call_per_scale() -> None:
    base = _Counting()
    ahead = DrawnAhead(base, [("gaussian", 2.0, 3), ("laplace", 1.0, 2), ("gaussian", 2.0, 4)])
    assert base.calls == [("gaussian", 2.0, 7), ("laplace", 1.0, 2)]
    first, second = ahead.gaussian(2.0, 3), ahead.gaussian(2.0, 4)
    assert first.tolist() == [0, 1, 2] and second.tolist() == [3, 4, 5, 6]
    assert ahead.laplace(1.0, 2).tolist() == [7, 8]
    # beyond what was announced: a draw of its own, never a value handed out before
    extra = ahead.gaussian(2.0, 2)
    assert base.calls[-1] == ("gaussian", 2.0, 2) and extra.tolist() == [9, 10]
    assert ahead.gaussian(5.0, 1).tolist() == [11]
    with pytest.raises(ValueError):
        DrawnAhead(base, [("uniform", 1.0, 1)])


def test_drawn_ahead_from_the_secure_sampler_is_the_claimed_gaussian(
    secure: SecureSampler,
) -> None:
    """Slices of one secure draw, taken by many small requests, are N(0, scale^2) i.i.d."""
    sizes = [1, 3, 2, 7] * 250
    ahead = DrawnAhead(secure, [("gaussian", 3.0, k) for k in sizes])
    x = np.concatenate([ahead.gaussian(3.0, k) for k in sizes])
    assert x.shape == (sum(sizes),)
    assert stats.kstest(x, stats.norm(0, 3.0).cdf).pvalue > ACCEPT_P
    for wrong in (0.75 * 3.0, 1.25 * 3.0):
        assert stats.kstest(x, stats.norm(0, wrong).cdf).pvalue < REJECT_P
