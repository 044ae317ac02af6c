"""The stopping-time estimator and the pacing rules (pure arithmetic)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.pacing import (
    Allocation,
    Pool,
    ReservePacing,
    StaticPacing,
    b_est,
    b_hat,
    initial_pacing,
    next_charge,
    warmup_length,
)


def test_warmup_length_and_clamp() -> None:
    assert warmup_length("log2", 100) == 7
    assert warmup_length("log2_squared", 100) == 49
    assert warmup_length("log2", 1) == 3  # S = 1 would give T = 0
    assert warmup_length("log2", 2) == 3  # T = 1 would give 0/0
    assert warmup_length(1, 100) == 3
    assert warmup_length(12, 100) == 12
    with pytest.raises(ValueError):
        warmup_length("log3", 100)


def test_estimator_formulas() -> None:
    assert b_hat(1, 5, 100) == 96.0  # S - n + 1 (gap #5: kept as in the paper)
    assert b_hat(3, 11, 100) == pytest.approx(20.0)
    assert b_est(7, 13, 100) == pytest.approx(50.0)


@pytest.mark.parametrize(("s", "bad", "t"), [(100, 30, 7), (100, 80, 7), (60, 12, 3)])
def test_theorem_4_2_unbiased_and_4_3_variance(s: int, bad: int, t: int) -> None:
    """Monte Carlo: B_est = S(T-1)/(n_T-1) is unbiased for B; its variance obeys Thm 4.3."""
    rng = np.random.default_rng(1234 + s + bad + t)
    runs = 40_000
    keys = rng.random((runs, s))
    # positions (1-based) of the B bad queries in a uniformly random order
    pos = np.argsort(keys, axis=1)[:, :bad] + 1
    n_t = np.sort(pos, axis=1)[:, t - 1]
    est = s * (t - 1) / (n_t - 1)
    se = est.std() / np.sqrt(runs)
    assert abs(est.mean() - bad) < 5 * se
    bound = s * (t - 1) / ((s - 1) * (t - 2)) * bad * (bad - 1) - bad * bad
    assert est.var() < bound * 1.05


def _drive(
    allocation: Allocation,
    pacing: StaticPacing,
    positions: list[int],
    s: int,
    t: int,
    reserve: ReservePacing = ReservePacing.HALVING,
    reallocate: bool = False,
    min_charge: float = 0.01,
):
    p = initial_pacing(warmup=0.25, bad=0.25, reserve=0.25, allocation=allocation)
    steps = []
    for b, n in enumerate(positions, start=1):
        step = next_charge(
            p,
            b=b,
            n=n,
            stream_length=s,
            t=t,
            allocation=allocation,
            static_pacing=pacing,
            reallocate=reallocate,
            min_charge=min_charge,
            reserve_pacing=reserve,
        )
        if step is None:
            steps.append(None)
            continue
        steps.append(step)
        p = step.after
    return steps


def test_static_even_spends_pools_exactly_when_estimate_is_right() -> None:
    # all 10 queries bad, S = 10, T = 3: B_est = 10 * 2 / 2 = 10
    steps = _drive(Allocation.STATIC, StaticPacing.EVEN, list(range(1, 11)), 10, 3)
    assert all(s is not None for s in steps)
    amounts = [s.amount for s in steps if s is not None]
    assert amounts[:3] == pytest.approx([0.25 / 3] * 3)
    assert amounts[3:] == pytest.approx([0.25 / 7] * 7)
    assert sum(amounts) == pytest.approx(0.5)


def test_static_literal_is_geometric() -> None:
    steps = _drive(Allocation.STATIC, StaticPacing.LITERAL, list(range(1, 11)), 10, 3)
    amounts = [s.amount for s in steps if s is not None]
    left = 0.25 * (2 / 3) ** 3
    assert amounts[:3] == pytest.approx([0.25 / 3, 0.25 * 2 / 9, 0.25 * 4 / 27])
    pool = 0.25 + left
    assert amounts[3] == pytest.approx(pool / 7)
    assert amounts[4] == pytest.approx(pool * 6 / 49)
    assert sum(amounts) < 0.5 * 0.8  # the literal reading under-spends


@settings(max_examples=200, deadline=None)
@given(
    s=st.integers(min_value=1, max_value=200),
    t=st.integers(min_value=3, max_value=20),
    allocation=st.sampled_from(list(Allocation)),
    pacing=st.sampled_from(list(StaticPacing)),
    reserve=st.sampled_from(list(ReservePacing)),
    reallocate=st.booleans(),
    data=st.data(),
)
def test_pacing_never_overspends_its_pools(
    s: int,
    t: int,
    allocation: Allocation,
    pacing: StaticPacing,
    reserve: ReservePacing,
    reallocate: bool,
    data: st.DataObject,
) -> None:
    """Lemma 4.5 and its Static analogue: whatever the positions, pools never go negative."""
    positions = sorted(
        data.draw(st.sets(st.integers(min_value=1, max_value=2 * s), max_size=2 * s))
    )
    steps = _drive(allocation, pacing, positions, s, t, reserve, reallocate)
    total = 0.0
    for step in steps:
        if step is None:
            continue
        assert step.amount >= 0
        total += step.amount
        a = step.after
        assert a.warmup_pool >= -1e-15 and a.bad_pool >= -1e-15 and a.reserve >= 0
        if step.pool is Pool.RESERVE:
            assert step.amount >= 0.01
    assert total <= 0.75 * (1 + 1e-12)


def test_reserve_estimate_survives_a_stream_whose_predicted_queries_come_first() -> None:
    """S = 40: 10 predicted statements answered from the release first, then 30 bad ones.
    B_est = 40 * 2 / 12 ~ 6.7 undershoots B = 30: halving runs the reserve out after ~10
    answers (eps_min = 1e-3 of the budget) and refuses the rest; the running estimate spreads it and answers every one, the
    reserve never spent whole."""
    positions = list(range(11, 41))
    halving = _drive(
        Allocation.STATIC, StaticPacing.EVEN, positions, 40, 3, ReservePacing.HALVING, True, 1e-3
    )
    spread = _drive(
        Allocation.STATIC, StaticPacing.EVEN, positions, 40, 3, ReservePacing.ESTIMATE, True, 1e-3
    )
    assert sum(x is None for x in halving) >= 10
    assert all(x is not None for x in spread)
    last = spread[-1]
    assert last is not None and last.after.reserve > 0
    # no single reserve charge takes more than half of what the reserve holds
    for prev, step in itertools.pairwise(spread):
        if prev is not None and step is not None and step.pool is Pool.RESERVE:
            held = prev.after.reserve + (prev.after.warmup_pool + prev.after.bad_pool)
            assert step.amount <= held / 2 + 1e-12
