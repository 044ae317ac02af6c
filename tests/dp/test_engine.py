"""The LAPRAS engine: hand-worked paper-mode traces, default-mode reuse, restart by fold."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp.accountant import AccountantKind, NoiseKind
from dp.calibration import SAFETY, agm_sigma, gaussian_sigma_for_mu, gdp_mu
from dp.domain import Domain, QueryBatch
from dp.engine import (
    Answered,
    Charged,
    Decision,
    DecisionKind,
    EngineConfig,
    EngineState,
    Event,
    MatrixReleased,
    Released,
    ReserveExhaustedError,
    StreamLengthExhaustedError,
    answer,
    apply,
    decide,
    fold,
    may_spend_nothing,
    release,
    release_all,
    start,
    status,
)
from dp.errors import BudgetExhaustedError, InternalError, PrivacyParameterError
from dp.noise import SeededSampler
from dp.pacing import Pool
from dp.strategy import identity_strategy

DOM = Domain.of(("cell", 4))
X = np.array([10.0, 20.0, 30.0, 40.0])
E0 = [1.0, 0.0, 0.0, 0.0]
E1 = [0.0, 1.0, 0.0, 0.0]
PRED = QueryBatch.from_dense(DOM, [E0, E1])
# distinct unpredicted ("bad") single queries
BAD = [
    QueryBatch.from_dense(DOM, [v])
    for v in (
        [1, 1, 0, 0],
        [0, 1, 1, 0],
        [0, 0, 1, 1],
        [1, 0, 1, 0],
        [0, 1, 0, 1],
        [1, 0, 0, 1],
        [1, 1, 1, 0],
        [0, 1, 1, 1],
        [1, 1, 1, 1],
        [2, 0, 0, 0],
    )
]
GOOD0 = QueryBatch.from_dense(DOM, [E0])


@dataclass
class Run:
    """Drives an engine like the proxy does, keeping the ledger of events."""

    state: EngineState
    ledger: list[Event]
    sampler: SeededSampler = field(default_factory=lambda: SeededSampler(5))

    @staticmethod
    def begin(cfg: EngineConfig, predicted: QueryBatch | None = PRED) -> Run:
        st_, evs = start(cfg, DOM, predicted, X, SeededSampler(1), strategy=identity_strategy(4))
        return Run(state=st_, ledger=list(evs))

    def ask(self, batch: QueryBatch) -> tuple[Decision, tuple[float, ...]]:
        self.state, d, r = answer(self.state, batch, X, self.sampler)
        self.ledger += [*d.events, *r.events]  # in order: the charge before the release
        return d, r.answers

    def charges(self) -> list[Charged]:
        return [e for e in self.ledger if isinstance(e, Charged)]


def paper(**kw: object) -> EngineConfig:
    base: dict[str, object] = dict(
        epsilon=1.0, delta=1e-3, stream_length=8, mode="paper", split="equal", eps_min=0.05
    )
    base.update(kw)
    return EngineConfig(**base)  # type: ignore[arg-type]


def test_paper_static_literal_trace() -> None:
    """S = 8, T = 3, equal split (1/4 each), eps_min = 0.05, basic accountant (hand-worked)."""
    run = Run.begin(paper())
    cfg = run.state.config
    assert cfg.t == 3 and cfg.accountant_kind is AccountantKind.BASIC
    mm = run.charges()[0]
    assert mm.pool is Pool.MATRIX and mm.amount == pytest.approx(0.25)

    seq = [BAD[0], GOOD0, BAD[1], BAD[2], BAD[3], BAD[4], BAD[5], BAD[6]]
    kinds = [run.ask(q)[0].kind for q in seq]
    assert kinds == [DecisionKind.FRESH, DecisionKind.MATRIX] + [DecisionKind.FRESH] * 6
    ch = run.charges()[1:]
    assert [c.position for c in ch] == [1, 3, 4, 5, 6, 7, 8]
    assert [c.b for c in ch] == [1, 2, 3, 4, 5, 6, 7]
    assert [c.pool for c in ch] == [Pool.WARMUP] * 3 + [Pool.BAD] * 2 + [Pool.RESERVE] * 2
    # warm-up, literal: eps <- eps - eps/T with T = 3
    w = [0.25 / 3, 0.25 * 2 / 9, 0.25 * 4 / 27]
    # b = T = 3 at position 4: B_est = 8 * 2 / 3; k = B_est - T; leftover joins the bad pool
    est = 8 * 2 / 3
    k = est - 3
    pool = 0.25 + 0.25 * 8 / 27
    bad = [pool / k, pool * (1 - 1 / k) / k]
    expected = [*w, *bad, 0.125, 0.0625]
    assert [c.amount for c in ch] == pytest.approx(expected, rel=1e-12)
    assert run.state.pacing.b_est == pytest.approx(est)
    # every online answer: AGM at (eps_b, delta / (S + 1)) for sensitivity 1 (0/1 queries)
    for c in ch:
        assert c.noise is NoiseKind.GAUSSIAN and c.sensitivity == 1.0
        assert c.scale >= agm_sigma(c.amount, 1e-3 / 9)
        assert c.scale == pytest.approx(agm_sigma(c.amount, 1e-3 / 9), rel=1e-8)
    assert run.state.accountant.spent == pytest.approx(0.25 + sum(expected))

    # b = 8: reserve / 2 = 0.03125 < eps_min = 0.05 -> refused, nothing recorded
    before = len(run.ledger)
    with pytest.raises(ReserveExhaustedError) as err:
        decide(run.state, BAD[7])
    assert err.value.sqlstate == "42Q01" and "reserve" in err.value.message
    assert len(run.ledger) == before
    # stored answers keep being served: an exact repeat, and a good query
    d, ans = run.ask(BAD[0])
    assert d.kind is DecisionKind.REPEAT and d.events == ()
    first = next(e for e in run.ledger if isinstance(e, Released) and e.key == BAD[0].key)
    assert ans == first.answers
    assert run.ask(QueryBatch.from_dense(DOM, [E1]))[0].kind is DecisionKind.MATRIX


def test_paper_static_even_and_stream_length_cap() -> None:
    """S = 4, T = 3: after S fresh releases the next bad query hits the S cap."""
    run = Run.begin(paper(stream_length=4, static_pacing="even", eps_min=1e-6))
    for q in BAD[:4]:
        assert run.ask(q)[0].kind is DecisionKind.FRESH
    ch = run.charges()[1:]
    # warm-up even: 0.25 / 3 each; B_est = 4 * 2 / 2 = 4, k = 1: b = 4 gets the bad pool
    assert [c.amount for c in ch] == pytest.approx([0.25 / 3] * 3 + [0.25])
    assert run.state.pacing.b_est == pytest.approx(4.0)
    with pytest.raises(StreamLengthExhaustedError) as err:
        decide(run.state, BAD[4])
    assert "stream length" in err.value.message
    assert run.state.accountant.releases == 5  # MM + S online = the basic accountant's cap


def test_paper_smooth_trace() -> None:
    run = Run.begin(paper(allocation="smooth"))
    for q in [BAD[0], GOOD0, BAD[1], BAD[2], BAD[3], BAD[4], BAD[5]]:
        run.ask(q)
    ch = [c for c in run.charges()[1:]]
    pool = 0.5  # badInit + bad merged
    expected = []
    # (b, n): B_hat(1) = S - n + 1; B_hat(b) = S (b - 1) / (n - 1)
    for b, n in [(1, 1), (2, 3), (3, 4), (4, 5), (5, 6)]:
        est = 8 - n + 1 if b == 1 else 8 * (b - 1) / (n - 1)
        a = pool / (max(1.0, est - b) + 1.0)
        expected.append(a)
        pool -= a
    expected.append(0.125)  # b = 6 > B_est = 16/3: the reserve
    assert [c.amount for c in ch] == pytest.approx(expected, rel=1e-12)
    assert [c.pool for c in ch][-1] is Pool.RESERVE


def test_warmup_options_and_no_prediction() -> None:
    cfg = paper(warmup="log2_squared", stream_length=100)
    assert cfg.t == 49
    assert paper(warmup=1).t == 3
    # without a predicted set the Matrix Mechanism's share goes to the bad pool
    run = Run.begin(paper(static_pacing="even"), predicted=None)
    assert run.charges() == []
    run.ask(GOOD0)  # not good any more: no P
    assert run.charges()[0].amount == pytest.approx(0.25 / 3)
    run.ask(BAD[0])
    run.ask(BAD[1])
    assert run.state.pacing.bad_pool == pytest.approx(0.5)


def test_group_by_batch_is_one_release_with_batch_sensitivity() -> None:
    run = Run.begin(paper())
    gb = QueryBatch.from_dense(DOM, np.eye(4))  # GROUP BY cell: L2 sensitivity 1
    d, ans = run.ask(gb)
    assert d.kind is DecisionKind.FRESH and len(ans) == 4
    assert run.state.fresh == 1 and len(run.charges()) == 2
    two = QueryBatch.from_dense(DOM, [[1, 1, 0, 0], [1, 0, 0, 0]])
    run.ask(two)
    c = run.charges()[-1]
    assert c.sensitivity == pytest.approx(np.sqrt(2))
    assert c.scale == pytest.approx(agm_sigma(c.amount, 1e-3 / 9, np.sqrt(2)), rel=1e-8)


def test_restart_is_the_fold_of_the_events() -> None:
    for cfg in (
        paper(),
        paper(allocation="smooth"),
        EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal"),
    ):
        run = Run.begin(cfg)
        for q in [BAD[0], GOOD0, BAD[1], BAD[0], BAD[2], BAD[3], BAD[4]]:
            run.ask(q)
        again = fold(run.ledger)
        live = run.state
        assert again.accountant == live.accountant
        assert again.pacing == live.pacing
        assert (again.position, again.bad, again.fresh) == (live.position, live.bad, live.fresh)
        assert dict(again.answers) == dict(live.answers)
        d1, d2 = decide(live, BAD[5]), decide(again, BAD[5])
        assert d1.kind == d2.kind and d1.events == d2.events


def test_charge_before_release_and_crash_between() -> None:
    run = Run.begin(paper())
    d = decide(run.state, BAD[0])
    with pytest.raises(InternalError):  # the charge was not applied: no noise may be drawn
        release(run.state, d, X, SeededSampler(0))
    # the charge is persisted, then the process dies before releasing
    ledger = [*run.ledger, *d.events]
    state = fold(ledger)
    assert state.accountant.spent == pytest.approx(0.25 + 0.25 / 3)  # the budget is gone
    assert state.fresh == 1 and BAD[0].key not in state.answers
    d2 = decide(state, BAD[0])  # asked again: a new charge (conservative), never a free redraw
    assert d2.kind is DecisionKind.FRESH and d2.charge is not None and d2.charge.b == 2


def test_several_charges_pending_at_once() -> None:
    """Group commit: statements decided in turn (each against the state after the previous
    ones' charges) are all pending before any noise is drawn; each release needs its own
    charge, consumes it once, and the ledger in that order folds to the same state."""
    gdp = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal", reuse=False)
    for cfg in (paper(), gdp):
        run = Run.begin(cfg)
        state, decisions = run.state, []
        for q in (BAD[8], BAD[6], BAD[7]):
            d = decide(state, q)
            assert d.kind is DecisionKind.FRESH and d.charge is not None
            for ev in d.events:
                state = apply(state, ev)
            decisions.append(d)
        charges = [d.charge for d in decisions if d.charge is not None]
        assert [c.position for c in charges] == [1, 2, 3]
        assert len(state.pending) == 3
        assert state.accountant.spent == pytest.approx(
            run.state.accountant.spent + sum(c.amount for c in charges)
        )
        released: list[Event] = []
        for d in reversed(decisions):  # in any order
            r = release(state, d, X, SeededSampler(7))
            for ev in r.events:
                state = apply(state, ev)
            released += r.events
            with pytest.raises(InternalError):  # its charge is consumed: never drawn twice
                release(state, d, X, SeededSampler(8))
        assert len(state.pending) == 0
        assert all(q.key in state.answers for q in (BAD[8], BAD[6], BAD[7]))
        with pytest.raises(InternalError):  # a position is charged once
            apply(state, charges[0])
        ledger = [*run.ledger, *(ev for d in decisions for ev in d.events), *released]
        again = fold(ledger)
        assert again.accountant == state.accountant and again.pacing == state.pacing
        assert dict(again.answers) == dict(state.answers) and len(again.pending) == 0
        # a crash after the charges' commit: all of the group's charges are spent, none released
        lost = fold([*run.ledger, *(ev for d in decisions for ev in d.events)])
        assert sorted(lost.pending) == [1, 2, 3] and lost.fresh == 3
        assert not any(q.key in lost.answers for q in (BAD[8], BAD[6], BAD[7]))


def test_release_all_draws_a_group_in_one_call_and_equals_releases_in_turn() -> None:
    """``release_all``: the group's noise in one draw per scale (a seeded sampler gives the
    values a seeded draw of the whole group gives, in order), each release's events applied
    before the next, the same answers and state as ``release`` in turn with those values;
    a decision whose charge is not applied is refused before any noise is drawn."""
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal", reuse=False)
    run = Run.begin(cfg)
    state, decisions = run.state, []
    for q in (BAD[8], BAD[6], BAD[7]):
        d = decide(state, q)
        for ev in d.events:
            state = apply(state, ev)
        decisions.append(d)
    results, after = release_all(state, decisions, X, SeededSampler(3))
    assert len(after.pending) == 0 and all(r.events for r in results)
    # the same draw, made once and sliced by hand, through release in turn
    scales = {d.charge.scale for d in decisions if d.charge is not None}
    assert len(scales) == 1
    one = SeededSampler(3).gaussian(scales.pop(), 3)
    by_hand = state
    for i, (d, r) in enumerate(zip(decisions, results, strict=True)):
        expected = release(by_hand, d, X, _Fixed(one[i : i + 1]))
        assert r.answers == expected.answers and r.events == expected.events
        for ev in expected.events:
            by_hand = apply(by_hand, ev)
    assert dict(by_hand.answers) == dict(after.answers)
    unapplied = decide(after, BAD[5])
    with pytest.raises(InternalError):
        release_all(after, [unapplied], X, SeededSampler(3))


@dataclass
class _Fixed:
    """A sampler that returns given values (for comparing with a draw made elsewhere)."""

    values: np.ndarray

    def gaussian(self, scale: float, size: int) -> np.ndarray:
        assert size == len(self.values)
        return self.values

    def laplace(self, scale: float, size: int) -> np.ndarray:
        raise AssertionError("no Laplace noise here")


def test_may_spend_nothing_is_false_only_for_fresh_or_refused() -> None:
    """The cheap pre-check a caller uses to decide what spends nothing first: when it says
    False, the decision is FRESH or a refusal, whatever the state."""
    reuse_off = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=4, split="equal", reuse=False)
    for cfg in (
        paper(stream_length=4),
        reuse_off,
        EngineConfig(epsilon=1.0, delta=1e-3, stream_length=4),
    ):
        run = Run.begin(cfg)
        for q in [*BAD, GOOD0, PRED, BAD[0], QueryBatch.from_dense(DOM, [[0, 0, 0, 0]])]:
            free = may_spend_nothing(run.state, q)
            try:
                d = decide(run.state, q)
            except BudgetExhaustedError:
                continue
            assert free or d.kind is DecisionKind.FRESH, (cfg.mode, q.key)
            if d.kind is not DecisionKind.FRESH:
                assert free
            run.ask(q)
    assert not may_spend_nothing(Run.begin(reuse_off).state, BAD[0])


def test_default_mode_reuse_and_exhaustion() -> None:
    cfg = EngineConfig(
        epsilon=1.0,
        delta=1e-3,
        stream_length=8,
        split="equal",
        eps_min=0.2,
        allocation="static",  # the paper's warm-up, in the default mode
    )
    assert cfg.accountant_kind is AccountantKind.GDP and cfg.reuse_releases
    run = Run.begin(cfg)
    mu2 = gdp_mu(1.0, 1e-3) ** 2
    mm = run.charges()[0]
    assert mm.scale == pytest.approx(gaussian_sigma_for_mu(np.sqrt(mu2 / 4)), rel=1e-9)
    # identity strategy: [1,1,0,0] has stored variance 2 sigma_MM^2 = 8/mu2 (= 53);
    # a fresh warm-up answer would have sigma^2 = 12/mu2 (= 80): answered from the release
    d, _ans = run.ask(BAD[0])
    assert d.kind is DecisionKind.STORED
    assert isinstance(d.events[0], Answered) and d.events[0].b == 1
    assert run.state.bad == 1 and run.state.fresh == 0 and run.state.position == 1
    assert run.state.accountant.spent == pytest.approx(mu2 / 4, rel=1e-9)
    # [1,1,1,1] has stored variance 4 sigma_MM^2 = 16/mu2 > fresh 12/mu2 -> fresh, and its
    # answer is the GLS combination with the release (smaller std error than the fresh noise)
    d, _ = run.ask(BAD[8])
    assert d.kind is DecisionKind.FRESH and d.charge is not None
    rel = next(e for e in run.ledger if isinstance(e, Released))
    assert rel.std_errors[0] < np.sqrt(rel.noise_variance)


def test_stored_inference_is_decomposed_once_per_value_and_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Default mode: a fresh release's answer (the GLS over every release of its marginal)
    and its event's application decompose the marginal's information matrix once between
    them; replaying the ledger decomposes nothing until a question is asked, and then gives
    the live state's estimates exactly."""
    calls = []
    eigh = np.linalg.eigh

    def counting(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        calls.append(a.shape)
        return eigh(a)

    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal", eps_min=0.2)
    run = Run.begin(cfg, predicted=None)
    monkeypatch.setattr(np.linalg, "eigh", counting)
    # the first release of the marginal has nothing to combine with; the second's decision
    # decomposes the first's value and its answer the combination; from then on, one each
    for q, expected in ((BAD[8], 0), (BAD[0], 2), (BAD[1], 1)):
        before = len(calls)
        d, _ = run.ask(q)
        assert d.kind is DecisionKind.FRESH
        assert len(calls) - before == expected
    calls.clear()
    again = fold(run.ledger)
    assert calls == []
    q = BAD[2].dense()  # (in the span of the three releases)
    live, replayed = run.state.stored[DOM], again.stored[DOM]
    assert np.array_equal(replayed.estimate(q)[0], live.estimate(q)[0])
    assert np.array_equal(replayed.variance(q), live.variance(q))
    assert len(calls) == 1  # the replayed value, once; the live one was decomposed already


def test_release_all_in_default_mode_solves_one_system_per_marginal_and_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Default mode: a group's fresh releases over one marginal are answered by the GLS over
    all of them and the marginal's stored releases, one decomposition for the group; the
    state after them is the fold of the ledger (same stored value, same estimates)."""
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=12, split="equal", eps_min=0.2)
    run = Run.begin(cfg, predicted=None)
    run.ask(BAD[8])  # a stored release of the marginal before the group
    state, decisions = run.state, []
    for q in (BAD[0], BAD[1], BAD[3]):  # independent of [1,1,1,1] and of each other
        d = decide(state, q)
        assert d.kind is DecisionKind.FRESH
        for ev in d.events:
            state = apply(state, ev)
        decisions.append(d)
    calls = []
    eigh = np.linalg.eigh

    def counting(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        calls.append(a.shape)
        return eigh(a)

    monkeypatch.setattr(np.linalg, "eigh", counting)
    results, after = release_all(state, decisions, X, SeededSampler(4))
    assert len(calls) == 1
    # by hand: the prior value plus the three measurements, estimated for each query
    by_hand = run.state.stored[DOM]
    for r, d in zip(results, decisions, strict=True):
        [ev] = r.events
        assert isinstance(ev, Released)
        by_hand = by_hand.add(
            d.batch.dense(), np.asarray(ev.measurement), np.full(1, ev.noise_variance)
        )
    for r, d in zip(results, decisions, strict=True):
        ans, var = by_hand.estimate(d.batch.dense())
        assert r.answers == pytest.approx(tuple(ans), rel=1e-9)
        assert r.std_errors == pytest.approx(tuple(np.sqrt(var)), rel=1e-9)
    again = fold(
        [
            *run.ledger,
            *(ev for d in decisions for ev in d.events),
            *(ev for r in results for ev in r.events),
        ]
    )
    q = BAD[2].dense()
    assert np.array_equal(again.stored[DOM].info, after.stored[DOM].info)
    assert again.stored[DOM].estimate(q)[0] == pytest.approx(after.stored[DOM].estimate(q)[0])
    assert dict(again.answers) == dict(after.answers)


def test_default_mode_answers_a_weakly_released_prediction_fresh() -> None:
    """A P measured with 2% of the budget: default mode answers its query online (a fresh
    answer at the pacing is more accurate), paper mode from the release; with the equal split
    the release is the more accurate and answers in both."""
    weak = (0.02, 0.49, 0.29, 0.2)
    d, _ = Run.begin(EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split=weak)).ask(GOOD0)
    assert d.kind is DecisionKind.FRESH and d.charge is not None and d.charge.b == 1
    d, _ = Run.begin(paper(split=weak)).ask(GOOD0)
    assert d.kind is DecisionKind.MATRIX
    for cfg in (EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal"), paper()):
        d, _ = Run.begin(cfg).ask(GOOD0)
        assert d.kind is DecisionKind.MATRIX


def test_default_mode_serves_stored_answers_when_budget_is_gone() -> None:
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=1, split="equal", eps_min=1e-3)
    run = Run.begin(cfg)
    run.ask(BAD[8])  # a fresh release: S = 1 used
    assert run.state.fresh == 1
    d, _ = run.ask(BAD[1])  # the S cap: answered from the stored releases instead
    assert d.kind is DecisionKind.STORED
    # paper mode: no reuse, so the same situation is a refusal
    run_p = Run.begin(paper(stream_length=1))
    run_p.ask(BAD[8])
    with pytest.raises(BudgetExhaustedError):
        run_p.ask(BAD[1])


def test_pure_accountant_uses_laplace_with_l1_sensitivity() -> None:
    cfg = EngineConfig(
        epsilon=1.0, delta=0.0, stream_length=8, accountant="pure", split="equal", reuse=False
    )
    run = Run.begin(cfg)
    two = QueryBatch.from_dense(DOM, [[1, 1, 0, 0], [1, 0, 0, 0]])  # L1 sens 2, L2 sqrt 2
    run.ask(two)
    c = run.charges()[-1]
    assert c.noise is NoiseKind.LAPLACE and c.sensitivity == 2.0
    assert c.scale == pytest.approx(2.0 / c.amount * (1 + SAFETY))
    assert status(run.state).unit == "epsilon"


@pytest.mark.parametrize(
    "kw",
    [
        dict(epsilon=0.0),
        dict(epsilon=float("nan")),
        dict(delta=0.0),
        dict(delta=1.0),
        dict(stream_length=0),
        dict(split="lopsided"),
        dict(split=(0.5, 0.5, 0.5, 0.0)),
        dict(split=(0.5, 0.5, -0.5, 0.5)),
        dict(allocation="greedy"),
        dict(accountant="rdp"),
        dict(accountant="pure"),  # pure needs delta = 0
        dict(warmup=0),
        dict(warmup="log10"),
        dict(static_pacing="geometric"),
        dict(eps_min=0.0),
        dict(eps_min=2.0),
        dict(mode="fast"),
        dict(expected_fresh=0),
        dict(expected_fresh=2.5),
    ],
)
def test_config_validation(kw: dict[str, object]) -> None:
    base: dict[str, object] = dict(epsilon=1.0, delta=1e-3, stream_length=10)
    base.update(kw)
    with pytest.raises(PrivacyParameterError):
        EngineConfig(**base)  # type: ignore[arg-type]


def test_mode_defaults() -> None:
    p = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=100, mode="paper")
    assert (p.accountant_kind, p.pacing_kind.value, p.reuse_releases, p.t) == (
        AccountantKind.BASIC,
        "literal",
        False,
        7,
    )
    d = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=100)
    assert (d.accountant_kind, d.pacing_kind.value, d.reuse_releases) == (
        AccountantKind.GDP,
        "even",
        True,
    )
    assert d.min_fraction == pytest.approx(1e-3)
    assert (p.reserve_kind.value, d.reserve_kind.value) == ("halving", "estimate")
    assert (p.allocation_kind.value, d.allocation_kind.value) == ("static", "steady")
    assert d.expected == 100  # E: S unless configured, and never above S
    assert (
        EngineConfig(epsilon=1.0, delta=1e-3, stream_length=100, expected_fresh=30).expected == 30
    )
    assert EngineConfig(epsilon=1.0, delta=1e-3, stream_length=10, expected_fresh=30).expected == 10
    e = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=10, split=(0.4, 0.2, 0.2, 0.2))
    assert e.fractions == pytest.approx((0.4, 0.2, 0.2, 0.2))


rows = st.lists(st.integers(min_value=0, max_value=2), min_size=4, max_size=4).filter(any)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(["paper", "default"]),
    accountant=st.sampled_from(["basic", "gdp", "pure"]),
    allocation=st.sampled_from(["static", "smooth", "steady"]),
    pacing=st.sampled_from(["literal", "even"]),
    split=st.sampled_from(["equal", "matrix-heavy", "query-heavy", "reserve-heavy"]),
    s=st.integers(min_value=1, max_value=12),
    stream=st.lists(st.lists(rows, min_size=1, max_size=3), min_size=1, max_size=25),
)
def test_no_stream_exceeds_the_budget(
    mode: str,
    accountant: str,
    allocation: str,
    pacing: str,
    split: str,
    s: int,
    stream: Sequence[Sequence[Sequence[int]]],
) -> None:
    cfg = EngineConfig(
        epsilon=1.0,
        delta=0.0 if accountant == "pure" else 1e-3,
        stream_length=s,
        mode=mode,  # type: ignore[arg-type]
        accountant=accountant,  # type: ignore[arg-type]
        allocation=allocation,  # type: ignore[arg-type]
        static_pacing=pacing,  # type: ignore[arg-type]
        split=split,
    )
    run = Run.begin(cfg)
    for q in stream:
        with contextlib.suppress(BudgetExhaustedError):
            run.ask(QueryBatch.from_dense(DOM, q))
    acct = run.state.accountant
    assert acct.spent_exact <= acct.cap
    assert run.state.fresh <= s
    again = fold(run.ledger)
    assert again.accountant == acct and again.pacing == run.state.pacing
    assert (again.position, again.bad, again.fresh) == (
        run.state.position,
        run.state.bad,
        run.state.fresh,
    )
    assert dict(again.answers) == dict(run.state.answers)


def test_stored_inference_matches_release_combine() -> None:
    """The engine's information-form GLS equals dp.release.combine on the same releases."""
    from dp.engine import StoredInference
    from dp.release import Release, combine

    rng = np.random.default_rng(0)
    n = 20  # 14 measured rows: a proper subspace
    a = rng.normal(size=(5, n))
    b = rng.integers(0, 2, (9, n)).astype(float)
    y1, y2 = rng.normal(size=5), rng.normal(size=9)
    v1, v2 = np.full(5, 2.0), rng.uniform(1, 5, 9)
    ref = combine(
        [Release(matrix=a, y=y1, noise_variance=v1), Release(matrix=b, y=y2, noise_variance=v2)]
    )
    ours = StoredInference.of(a, y1, v1).add(b, y2, v2)
    q = np.vstack([a[:2] + b[:2], b[3:6]])
    assert np.allclose(ours.estimate(q)[0], ref.estimate(q)[0], rtol=1e-9, atol=1e-9)
    assert np.allclose(ours.estimate(q)[1], ref.estimate(q)[1], rtol=1e-9)
    outside = rng.normal(size=(2, n))
    assert list(ours.can_answer(outside)) == list(ref.can_answer(outside)) == [False, False]
    assert np.all(np.isinf(ours.variance(outside)))
    with pytest.raises(InternalError):
        ours.estimate(outside)


def test_split_without_matrix_share_and_status() -> None:
    cfg = EngineConfig(
        epsilon=1.0, delta=1e-3, stream_length=8, mode="paper", split=(0.0, 0.5, 0.25, 0.25)
    )
    run = Run.begin(cfg)
    assert run.charges() == [] and run.state.matrix_blocks == ()
    d, _ = run.ask(GOOD0)  # in P, but there is no release: a fresh answer
    assert d.kind is DecisionKind.FRESH
    s = status(run.state)
    assert (s.unit, s.online_releases, s.position, s.stream_length) == ("epsilon", 1, 1, 8)
    assert s.spent == pytest.approx(0.5 / 3)


def test_events_round_trip_through_json_and_fold() -> None:
    import json

    from dp.engine_codec import decode_event, encode_event

    for cfg in (
        EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split=(0.4, 0.2, 0.2, 0.2)),
        paper(),
    ):
        run = Run.begin(cfg)
        for q in [BAD[0], GOOD0, BAD[8], BAD[1], QueryBatch.from_dense(DOM, np.eye(4))]:
            run.ask(q)
        text = json.dumps([encode_event(e) for e in run.ledger])
        decoded = [decode_event(d) for d in json.loads(text)]
        for a, b in zip(decoded, run.ledger, strict=True):
            if isinstance(a, MatrixReleased):
                assert isinstance(b, MatrixReleased)
                for ra, rb in zip(a.blocks, b.blocks, strict=True):
                    assert ra.domain == rb.domain
                    assert ra.release.y.tobytes() == rb.release.y.tobytes()
            else:
                assert a == b
        again = fold(decoded)
        assert again.accountant == run.state.accountant
        assert again.pacing == run.state.pacing
        assert dict(again.answers) == dict(run.state.answers)
        assert decide(again, BAD[5]).events == decide(run.state, BAD[5]).events
    # a tampered ledger is detected (paper run: every bad query was released fresh)
    d = encode_event(next(e for e in run.ledger if isinstance(e, Released)))
    d["batch"]["data"][0] = 5.0
    with pytest.raises(InternalError):
        decode_event(d)


class _NoNoise:
    """A sampler that must not be used."""

    def gaussian(self, scale: float, size: int) -> np.ndarray:
        raise AssertionError("noise drawn")

    def laplace(self, scale: float, size: int) -> np.ndarray:
        raise AssertionError("noise drawn")


def test_post_processing_paths_draw_no_noise_and_read_no_data() -> None:
    for cfg in (paper(), EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal")):
        run = Run.begin(cfg)
        run.ask(BAD[8])
        nan = np.full(4, np.nan)
        for q in (BAD[8], GOOD0, BAD[0]):  # repeat, good, (default) stored
            d = decide(run.state, q)
            if d.kind is DecisionKind.FRESH:
                continue
            for ev in d.events:
                run.state = apply(run.state, ev)
            r = release(run.state, d, nan, _NoNoise())
            assert r.events == () and all(np.isfinite(r.answers))


def test_decisions_do_not_depend_on_the_data() -> None:
    """Same stream, same seeds, two different histograms: the same decisions and charges."""
    stream = [BAD[0], GOOD0, BAD[8], BAD[1], BAD[0], BAD[2], BAD[3], BAD[4], BAD[5], BAD[6]]
    for cfg in (
        paper(allocation="smooth"),
        EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split="equal"),
    ):
        traces = []
        for x in (X, np.array([1e6, 0.0, 3.0, 7e3])):
            st_, _ = start(cfg, DOM, PRED, x, SeededSampler(1), strategy=identity_strategy(4))
            trace = []
            smp = SeededSampler(9)
            for q in stream:
                try:
                    d = decide(st_, q)
                except BudgetExhaustedError as e:
                    trace.append(type(e).__name__)
                    continue
                trace.append((d.kind, d.charge))
                for ev in d.events:
                    st_ = apply(st_, ev)
                for ev in release(st_, d, x, smp).events:
                    st_ = apply(st_, ev)
            traces.append(trace)
        assert traces[0] == traces[1]


def test_production_sampler_end_to_end() -> None:
    from dp.noise import SecureSampler

    secure = SecureSampler()
    for cfg in (paper(), EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8)):
        st_, _ = start(cfg, DOM, PRED, X, secure, strategy=identity_strategy(4))
        d = decide(st_, BAD[8])
        for ev in d.events:
            st_ = apply(st_, ev)
        r = release(st_, d, X, secure)
        assert len(r.answers) == 1 and np.isfinite(r.answers[0])


def test_pure_mode_releases_p_with_laplace_calibrated_to_the_l1_strategy() -> None:
    """accountant = "pure": the Matrix Mechanism release is Laplace noise of scale
    Delta1(A) / eps_MM on a strategy chosen for L1 (dp.strategy.l1_strategy)."""
    import numpy as np

    from dp import engine
    from dp.accountant import NoiseKind
    from dp.domain import Domain, QueryBatch
    from dp.noise import SeededSampler

    d = Domain.of(("age", 20))
    p = QueryBatch.from_dense(d, [[1.0] * i + [0.0] * (20 - i) for i in range(1, 21)])
    cfg = engine.EngineConfig(epsilon=1.0, delta=0.0, stream_length=10, accountant="pure")
    _, events = engine.start(cfg, d, p, np.arange(20.0), SeededSampler(0))
    [charge] = [e for e in events if isinstance(e, engine.Charged)]
    [released] = [e for e in events if isinstance(e, engine.MatrixReleased)]
    [block] = released.blocks
    l1 = float(np.max(np.abs(block.release.matrix).sum(axis=0)))
    assert charge.noise is NoiseKind.LAPLACE
    assert charge.sensitivity == l1
    assert charge.scale >= l1 / charge.amount  # b = Delta1 / eps, rounded in favour of privacy
    assert charge.scale == pytest.approx(l1 / charge.amount, rel=1e-6)
