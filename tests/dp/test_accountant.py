"""Accountants: one contract run against every accountant, plus the filter property."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.accountant import (
    Accountant,
    AccountantKind,
    BasicAccountant,
    GdpAccountant,
    NoiseKind,
    PureAccountant,
    make_accountant,
    noise_variance,
)
from dp.calibration import agm_sigma, gdp_delta, gdp_mu, laplace_scale
from dp.errors import BudgetExhaustedError, PrivacyParameterError

FACTORIES: dict[str, Callable[[], Accountant]] = {
    "basic": lambda: make_accountant("basic", epsilon=1.0, delta=1e-3, max_releases=101),
    "gdp": lambda: make_accountant("gdp", epsilon=1.0, delta=1e-3, max_releases=101),
    "pure": lambda: make_accountant("pure", epsilon=1.0, delta=0.0, max_releases=101),
}


@pytest.fixture(params=sorted(FACTORIES))
def acct(request: pytest.FixtureRequest) -> Accountant:
    return FACTORIES[request.param]()


class TestContract:
    def test_is_protocol(self, acct: Accountant) -> None:
        assert isinstance(acct, Accountant)
        assert acct.spent == 0.0 and acct.releases == 0
        assert acct.remaining() == acct.total > 0

    def test_check_then_compose(self, acct: Accountant) -> None:
        half = acct.total / 2
        assert acct.check(half)
        a2 = acct.compose(half)
        assert a2.spent == pytest.approx(half) and a2.releases == 1
        assert acct.spent == 0.0  # immutable
        assert a2.check(a2.remaining())
        assert not a2.check(half * 1.001)

    def test_refused_charge_raises_and_changes_nothing(self, acct: Accountant) -> None:
        full = acct.compose(acct.total)
        full = full.compose(full.remaining()) if full.remaining() > 0 else full
        assert full.remaining() == 0.0
        assert not full.check(1e-300)
        with pytest.raises(BudgetExhaustedError):
            full.compose(1e-300)
        assert full.spent == pytest.approx(acct.total, rel=1e-15)

    def test_exact_fill_by_equal_parts(self, acct: Accountant) -> None:
        for k in (3, 7, 10, 100):
            a = acct
            for _ in range(k):
                a = a.compose(min(acct.total / k, a.remaining()))
            assert a.spent <= acct.total
            assert a.remaining() <= acct.total * 1e-12

    def test_invalid_charges(self, acct: Accountant) -> None:
        for bad in (0.0, -1.0, math.nan, math.inf):
            assert not acct.check(bad)
            with pytest.raises(PrivacyParameterError):
                acct.compose(bad)

    def test_noise_scale_monotone(self, acct: Accountant) -> None:
        small, big = acct.total / 100, acct.total / 10
        assert acct.noise_scale(small, 1.0) > acct.noise_scale(big, 1.0)
        assert acct.noise_scale(big, 2.0) == pytest.approx(2 * acct.noise_scale(big, 1.0))


def test_units_and_scales() -> None:
    basic = BasicAccountant.create(1.0, 1e-3, 101)
    assert basic.noise is NoiseKind.GAUSSIAN and basic.kind is AccountantKind.BASIC
    # the paper: AGM at (eps_i, delta / (S + 1))
    assert basic.noise_scale(0.01, 1.0) == pytest.approx(agm_sigma(0.01, 1e-3 / 101), rel=1e-8)
    assert basic.noise_scale(0.01, 1.0) >= agm_sigma(0.01, 1e-3 / 101)
    gdp = GdpAccountant.create(1.0, 1e-3)
    assert gdp.total == pytest.approx(0.3884**2, rel=1e-3)
    # 100 equal Gaussian releases: sigma = 10 / mu_total = 25.75 (PRIVACY-NOTES §4)
    assert gdp.noise_scale(gdp.total / 100, 1.0) == pytest.approx(25.75, abs=0.01)
    pure = PureAccountant.create(2.0)
    assert pure.noise is NoiseKind.LAPLACE
    assert pure.noise_scale(0.5, 3.0) == pytest.approx(laplace_scale(0.5, 3.0))
    assert pure.sensitivity_of(2.0, 5.0) == 5.0 and gdp.sensitivity_of(2.0, 5.0) == 2.0
    assert noise_variance(NoiseKind.LAPLACE, 2.0) == 8.0
    assert noise_variance(NoiseKind.GAUSSIAN, 2.0) == 4.0


def test_basic_caps_the_number_of_releases() -> None:
    a: Accountant = BasicAccountant.create(1.0, 1e-3, 3)
    for _ in range(3):
        a = a.compose(0.01)
    assert not a.check(0.01) and a.remaining() == 0.0
    with pytest.raises(BudgetExhaustedError):
        a.compose(0.01)


@pytest.mark.parametrize(
    "call",
    [
        lambda: make_accountant("rdp", epsilon=1.0, delta=1e-3, max_releases=1),
        lambda: make_accountant("pure", epsilon=1.0, delta=1e-3, max_releases=1),
        lambda: make_accountant("gdp", epsilon=1.0, delta=0.0, max_releases=1),
        lambda: make_accountant("basic", epsilon=0.0, delta=1e-3, max_releases=1),
        lambda: make_accountant("basic", epsilon=1.0, delta=1e-3, max_releases=0),
    ],
)
def test_invalid_construction(call: Callable[[], object]) -> None:
    with pytest.raises(PrivacyParameterError):
        call()


charges = st.lists(
    st.one_of(
        st.floats(min_value=1e-12, max_value=1.2),
        st.sampled_from([1 / 3, 0.1, 0.25, 1e-300]),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["basic", "gdp", "pure"]),
    eps=st.floats(min_value=0.01, max_value=5.0),
    delta=st.floats(min_value=1e-12, max_value=0.1),
    fractions=charges,
    sensitivities=st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=1, max_size=5),
    fill=st.booleans(),
)
def test_no_sequence_of_charges_exceeds_the_budget(
    kind: str,
    eps: float,
    delta: float,
    fractions: list[float],
    sensitivities: list[float],
    fill: bool,
) -> None:
    """Whatever is asked, the releases the filter admits stay within (eps, delta)."""
    a = make_accountant(kind, epsilon=eps, delta=0.0 if kind == "pure" else delta, max_releases=20)
    admitted: list[tuple[float, float, float]] = []  # (charge, scale, sensitivity)
    for i, f in enumerate(fractions):
        charge = f * a.total
        if fill:
            charge = min(charge, a.remaining()) or charge
        sens = sensitivities[i % len(sensitivities)]
        if a.check(charge):
            a = a.compose(charge)
            admitted.append((charge, a.noise_scale(charge, sens), sens))
        else:
            with pytest.raises((BudgetExhaustedError, PrivacyParameterError)):
                a.compose(charge)
    assert sum(Fraction(c) for c, _, _ in admitted) <= a.cap  # the exact budget
    if kind == "gdp":
        mu2 = math.fsum((s / sc) ** 2 for _, sc, s in admitted)
        assert mu2 <= gdp_mu(eps, delta) ** 2
        if admitted:
            assert gdp_delta(eps, math.sqrt(mu2)) <= delta
    elif kind == "pure":
        assert math.fsum(s / sc for _, sc, s in admitted) <= eps
    else:
        assert len(admitted) <= 20
        assert math.fsum(c for c, _, _ in admitted) <= eps * (1 + 1e-15)
        for c, sc, s in admitted:  # each release meets (c, delta/20) at its own scale
            assert sc >= agm_sigma(c, delta / 20, s) * (1 - 1e-12)
