"""Calibration: reference values, high-precision (mpmath) and dp_accounting cross-checks."""

from __future__ import annotations

import functools
import math

import mpmath
import pytest
from dp_accounting.gaussian_mechanism import get_sigma_gaussian
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.calibration import (
    SAFETY,
    agm_sigma,
    gaussian_sigma_for_mu,
    gdp_delta,
    gdp_epsilon,
    gdp_log_delta,
    gdp_mu,
    laplace_scale,
    zcdp_rho,
    zcdp_sigma,
)
from dp.errors import PrivacyParameterError

mpmath.mp.dps = 60


def mp_delta(eps: float, mu: mpmath.mpf) -> mpmath.mpf:
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    return mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)


@functools.cache
def mp_mu(eps: float, delta: float) -> mpmath.mpf:
    """The exact largest mu with delta(eps; mu) <= delta, by 130 bisection steps at 60 digits."""
    lo, hi = mpmath.mpf("1e-30"), mpmath.mpf(1)
    while mp_delta(eps, hi) <= delta:
        hi *= 2
    for _ in range(130):
        mid = (lo + hi) / 2
        if mp_delta(eps, mid) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


def test_reference_values() -> None:
    assert agm_sigma(1.0, 1e-3) == pytest.approx(2.5747, abs=1e-4)
    assert agm_sigma(0.01, 1e-5) == pytest.approx(243.79, abs=1e-2)
    assert gdp_mu(1.0, 1e-3) == pytest.approx(0.3884, abs=1e-4)
    assert zcdp_rho(1.0, 1e-3) == pytest.approx(0.0338, abs=1e-4)
    # PRIVACY-NOTES §4: 100 equal Gaussian releases under GDP vs zCDP vs basic composition
    assert gaussian_sigma_for_mu(gdp_mu(1.0, 1e-3) / 10.0) == pytest.approx(25.75, abs=0.01)
    assert zcdp_sigma(zcdp_rho(1.0, 1e-3) / 100) == pytest.approx(38.47, abs=0.01)
    assert agm_sigma(1.0 / 100, 1e-3 / 101) == pytest.approx(244.07, abs=0.01)
    # autodp returns 13.93 here (PRIVACY-NOTES §6); the exact value is 14.73
    assert agm_sigma(0.5, 1e-15) == pytest.approx(14.733, abs=1e-3)


GRID = [
    (eps, delta)
    for eps in (0.001, 0.01, 0.1, 0.5, 1.0, 3.0, 10.0)
    for delta in (1e-3, 1e-6, 1e-10, 1e-15)
]


@pytest.mark.parametrize(("eps", "delta"), GRID)
def test_mu_against_mpmath(eps: float, delta: float) -> None:
    exact = mp_mu(eps, delta)
    ours = gdp_mu(eps, delta)
    # never too large (the guarantee), and tight (within the documented slack)
    assert mpmath.mpf(ours) <= exact
    assert float((exact - ours) / exact) < 10 * SAFETY
    # the delta actually achieved, in high precision, is within the target
    assert mp_delta(eps, mpmath.mpf(ours)) <= delta


@pytest.mark.parametrize(("eps", "delta"), GRID)
def test_agm_against_dp_accounting(eps: float, delta: float) -> None:
    ref = get_sigma_gaussian(eps, delta, tol=1e-14)
    ours = agm_sigma(eps, delta)
    assert ours == pytest.approx(ref, rel=1e-7)
    assert ours >= ref * (1 - 1e-11)


@pytest.mark.parametrize(("eps", "delta"), GRID)
def test_log_delta_against_mpmath(eps: float, delta: float) -> None:
    mu = float(mp_mu(eps, delta))
    for m in (mu / 2, mu, mu * 2):
        exact = mp_delta(eps, mpmath.mpf(m))
        if exact > 0:
            assert gdp_log_delta(eps, m) == pytest.approx(float(mpmath.log(exact)), rel=1e-9)


def test_round_trips() -> None:
    for eps, delta in GRID:
        mu = gdp_mu(eps, delta)
        back = gdp_epsilon(mu, delta)
        assert back <= eps * (1 + 1e-12)
        assert back == pytest.approx(eps, rel=1e-6)
        assert gdp_delta(eps, mu) <= delta


def test_sensitivity_scales_linearly() -> None:
    assert agm_sigma(1.0, 1e-5, 3.0) == pytest.approx(3 * agm_sigma(1.0, 1e-5), rel=1e-12)
    assert agm_sigma(1.0, 1e-5, 0.0) == 0.0
    assert laplace_scale(0.5, 2.0) == pytest.approx(4.0, rel=1e-8)
    assert laplace_scale(0.5, 2.0) >= 4.0


@pytest.mark.parametrize(
    ("eps", "delta"),
    [(1e-9, 1e-15), (1e4, 1e-15), (50.0, 1e-300), (1e-6, 0.999), (1.0, 5e-324)],
)
def test_extremes_terminate_and_hold(eps: float, delta: float) -> None:
    mu = gdp_mu(eps, delta)
    assert math.isfinite(mu) and mu > 0
    assert gdp_log_delta(eps, mu) <= math.log(delta)
    exact = mp_delta(eps, mpmath.mpf(mu))
    assert exact <= delta
    assert gdp_log_delta(eps, mu) == pytest.approx(float(mpmath.log(exact)), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    eps=st.floats(min_value=1e-4, max_value=20.0),
    log10_delta=st.floats(min_value=-16.0, max_value=-1.0),
)
def test_property_valid_and_monotone(eps: float, log10_delta: float) -> None:
    delta = 10.0**log10_delta
    mu = gdp_mu(eps, delta)
    assert gdp_log_delta(eps, mu) <= math.log(delta)
    # more budget never means more noise
    assert gdp_mu(eps * 1.5, delta) >= mu
    assert gdp_mu(eps, min(delta * 10, 0.5)) >= mu
    assert agm_sigma(eps, delta) == pytest.approx(1.0 / mu, rel=1e-8)


@pytest.mark.parametrize(
    "call",
    [
        lambda: agm_sigma(0.0, 1e-5),
        lambda: agm_sigma(-1.0, 1e-5),
        lambda: agm_sigma(math.inf, 1e-5),
        lambda: agm_sigma(math.nan, 1e-5),
        lambda: agm_sigma(1.0, 0.0),
        lambda: agm_sigma(1.0, 1.0),
        lambda: agm_sigma(1.0, 1e-5, -1.0),
        lambda: gdp_mu(1.0, math.nan),
        lambda: gdp_delta(1.0, 0.0),
        lambda: laplace_scale(0.0, 1.0),
        lambda: zcdp_sigma(0.0),
    ],
)
def test_invalid_parameters(call: object) -> None:
    with pytest.raises(PrivacyParameterError):
        call()  # type: ignore[operator]


@settings(max_examples=150, deadline=None)
@given(
    log10_eps=st.floats(min_value=-9.0, max_value=1.7),
    log10_delta=st.floats(min_value=-300.0, max_value=-1.0),
)
def test_property_never_below_exact_sigma(log10_eps: float, log10_delta: float) -> None:
    """The delta actually achieved at the returned mu (60-digit arithmetic) meets the target."""
    eps, delta = 10.0**log10_eps, 10.0**log10_delta
    mu = gdp_mu(eps, delta)
    assert mp_delta(eps, mpmath.mpf(mu)) <= delta
