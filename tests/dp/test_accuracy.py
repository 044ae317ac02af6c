"""Accuracy on request (issue 39, item 2): free from earlier releases when their stated error
meets the request, else the least charge that meets it, else a refusal; the cost preview."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp.accountant import make_accountant, noise_variance
from dp.accuracy import (
    AccuracyUnavailableError,
    combined_error,
    fresh_variance_needed,
    least_charge,
    variance_at,
)
from dp.domain import Domain, QueryBatch
from dp.engine import (
    Charged,
    DecisionKind,
    EngineConfig,
    EngineState,
    answer,
    decide,
    preview,
    start,
)
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler
from dp.strategy import identity_strategy

DOM = Domain.of(("cell", 4))
X = np.array([10.0, 20.0, 30.0, 40.0])
PRED = QueryBatch.from_dense(DOM, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
PAIR = QueryBatch.from_dense(DOM, [[1, 1, 0, 0]])  # not in P, answerable from the release
TOTAL = QueryBatch.from_dense(DOM, [[1, 1, 1, 1]])


def _epoch(predicted: QueryBatch | None = PRED, **kw: object) -> EngineState:
    cfg: dict[str, object] = dict(epsilon=1.0, delta=1e-3, stream_length=20, expected_fresh=10)
    cfg.update(kw)
    state, _ = start(
        EngineConfig(**cfg),  # type: ignore[arg-type]
        DOM,
        predicted,
        X,
        SeededSampler(1),
        strategy=identity_strategy(4),
    )
    return state


@pytest.mark.parametrize("kind", ["gdp", "basic", "pure"])
def test_least_charge_is_the_least_that_meets_the_variance(kind: str) -> None:
    delta = 0.0 if kind == "pure" else 1e-3
    acct = make_accountant(kind, epsilon=1.0, delta=delta, max_releases=21)
    for v, sens in ((20.0**2, 1.0), (10.0**2, 2.0), (500.0**2, 1.0)):
        c = least_charge(acct, variance=v, sensitivity=sens, limit=acct.total)
        assert c is not None
        assert variance_at(acct, c, sens) <= v
        assert variance_at(acct, c * (1 - 1e-9), sens) > v * (1 - 1e-6)  # none much smaller
    if kind == "gdp":  # (Delta / sigma)^2, to rounding
        c = least_charge(acct, variance=100.0, sensitivity=2.0, limit=acct.total)
        assert c == pytest.approx((2.0 / 10.0) ** 2, rel=1e-6)
    assert least_charge(acct, variance=1e-6, sensitivity=1.0, limit=acct.total) is None


def test_fresh_variance_needed_combines_with_what_is_known() -> None:
    assert fresh_variance_needed(10.0, [math.inf, math.inf]) == 100.0
    assert fresh_variance_needed(10.0, [50.0]) == 100.0  # the prior meets it alone
    need = fresh_variance_needed(10.0, [200.0, math.inf])
    assert need == 100.0  # the row without a prior decides
    need = fresh_variance_needed(10.0, [200.0])
    assert combined_error(200.0, need) == pytest.approx(10.0)


def test_answered_free_from_earlier_releases_when_their_error_meets_the_request() -> None:
    """[1,1,0,0] from the identity release has variance 2 sigma_MM^2: a request above its
    standard error is met for free (no charge, no fresh release); a request below it is
    charged the least that meets it; the statement's answer then has at most that error."""
    state = _epoch()
    known = decide(state, PAIR)  # no request: from the release (it beats the pacing)
    assert known.kind is DecisionKind.STORED and known.std_errors is not None
    se = known.std_errors[0]
    loose = decide(state, PAIR, max_error=se * 1.01)
    assert loose.kind is DecisionKind.STORED and loose.charge is None
    assert loose.std_errors == known.std_errors
    strict = decide(state, PAIR, max_error=se * 0.7)
    assert strict.kind is DecisionKind.FRESH and isinstance(strict.charge, Charged)
    # the fresh answer is combined with the marginal's stored releases (the release): the
    # least charge is the one whose combination meets the request, less than alone
    alone = least_charge(
        state.accountant,
        variance=(se * 0.7) ** 2,
        sensitivity=1.0,
        limit=state.accountant.total,
    )
    assert alone is not None and strict.charge.amount < alone
    after, d, r = answer(state, PAIR, X, SeededSampler(3), max_error=se * 0.7)
    assert d.kind is DecisionKind.FRESH and r.std_errors[0] <= se * 0.7 * (1 + 1e-9)
    assert after.accountant.spent == pytest.approx(state.accountant.spent + d.charge.amount)
    # a repeat is its stored answer: refused when stricter than it, never measured again
    assert decide(after, PAIR, max_error=se).kind is DecisionKind.REPEAT
    with pytest.raises(AccuracyUnavailableError, match="earlier answer"):
        decide(after, PAIR, max_error=r.std_errors[0] / 2)


def test_the_least_charge_may_be_below_or_above_the_pacing() -> None:
    state = _epoch(predicted=None)  # (nothing released: every answer is fresh)
    paced = decide(state, TOTAL)
    assert paced.kind is DecisionKind.FRESH and paced.charge is not None
    sd = math.sqrt(noise_variance(paced.charge.noise, paced.charge.scale))
    cheap = decide(state, TOTAL, max_error=sd * 3)
    pricey = decide(state, TOTAL, max_error=sd / 2)
    assert cheap.charge is not None and cheap.charge.amount == pytest.approx(
        paced.charge.amount / 9, rel=1e-6
    )
    assert pricey.charge is not None
    assert pricey.charge.amount == pytest.approx(paced.charge.amount * 4, rel=1e-6)
    # its charge is taken from the online pools, and the pacing goes on from what is left
    assert pricey.charge.pacing.bad_pool == pytest.approx(
        state.pacing.bad_pool - pricey.charge.amount
    )


def test_a_request_the_budget_cannot_meet_is_refused_saying_what_it_can_give() -> None:
    state = _epoch()
    with pytest.raises(AccuracyUnavailableError) as err:
        decide(state, TOTAL, max_error=0.5)
    msg = err.value.message
    assert "lapras.max_error = 0.5" in msg and "at best" in msg
    assert err.value.sqlstate == "42Q01" and isinstance(err.value, BudgetExhaustedError)
    best = float(msg.split("error of ")[1].split(" at best")[0])
    assert best > 0.5
    # ... and what it says can be given, is given
    d = decide(state, TOTAL, max_error=best * 1.001)
    assert d.kind is DecisionKind.FRESH


def test_paper_mode_spends_as_algorithm_1_and_only_refuses() -> None:
    state = _epoch(mode="paper", expected_fresh=None)
    d = decide(state, TOTAL)
    assert d.charge is not None
    sd = math.sqrt(noise_variance(d.charge.noise, d.charge.scale))
    same = decide(state, TOTAL, max_error=sd * 1.01)
    assert same.charge == d.charge
    with pytest.raises(AccuracyUnavailableError) as err:
        decide(state, TOTAL, max_error=sd / 2)
    assert err.value.hint is not None and "paper mode" in err.value.hint


def test_the_preview_charges_nothing_and_says_what_decide_does() -> None:
    state = _epoch()
    before = (state.accountant.spent, state.position, state.fresh, dict(state.answers))
    for q, req in ((PAIR, None), (TOTAL, None), (TOTAL, 1.0), (TOTAL, 0.5)):
        p = preview(state, q, max_error=req)
        try:
            d = decide(state, q, max_error=req)
        except BudgetExhaustedError:
            assert p.kind is None and p.refusal is not None and p.charge == 0.0
            continue
        assert p.kind is d.kind
        assert p.charge == (0.0 if d.charge is None else d.charge.amount)
        if d.charge is None:
            assert p.std_errors == d.std_errors
        else:  # what the answer will have: the release's combination, as answered
            _, _, r = answer(state, q, X, SeededSampler(4), max_error=req)
            assert p.std_errors == pytest.approx(r.std_errors, rel=1e-9)
    assert (state.accountant.spent, state.position, state.fresh, dict(state.answers)) == before


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(
        st.one_of(st.none(), st.floats(min_value=0.5, max_value=200.0)), min_size=1, max_size=25
    ),
    accountant=st.sampled_from(["gdp", "basic"]),
)
def test_requests_never_take_the_total_past_the_budget(
    requests: list[float | None], accountant: str
) -> None:
    state = _epoch(accountant=accountant)
    rng = np.random.default_rng(len(requests))
    sampler = SeededSampler(7)
    for req in requests:
        w = rng.integers(0, 3, 4).astype(float)
        w[0] += 1.0
        q = QueryBatch.from_dense(DOM, [w])
        try:
            state, _, r = answer(state, q, X, sampler, max_error=req)
        except BudgetExhaustedError:
            continue
        if req is not None:
            assert max(r.std_errors) <= req * (1 + 1e-9)
        assert state.accountant.spent <= state.accountant.total
