"""The default mode's Steady pacing: no precision cliff over a long stream (issue 39, item 1)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dp.domain import Domain, QueryBatch
from dp.engine import (
    Charged,
    DecisionKind,
    EngineConfig,
    EngineState,
    answer,
    next_count_error,
    start,
    status,
)
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler
from dp.pacing import (
    Pacing,
    steady_charge,
    steady_horizon,
    steady_tail,
)

# The demo's epoch (lapras demo): epsilon 1, delta 1e-3, S = 1000, the matrix-heavy split, the
# default mode (gdp, Steady); a predicted dashboard and a long stream of ad-hoc questions, over
# age x sex (the pacing depends on the configuration and the stream only, not on the domain).
DOM = Domain.of(("age", 73), ("sex", 2))
AGE = Domain.of(("age", 73))


def _range(lo: int, hi: int, sex: int | None = None) -> QueryBatch:
    w = np.zeros((73, 2))
    w[lo : hi + 1, :] = 1.0
    if sex is not None:
        w[:, 1 - sex] = 0.0
    return QueryBatch.from_dense(DOM, [w.reshape(-1)])


DASHBOARD = [_range(13, 22), _range(23, 32), _range(0, 72, 0), _range(0, 72, 1)]


def _stream(n: int, seed: int) -> list[QueryBatch]:
    """n distinct ad-hoc counts (age ranges, by sex or not), with the dashboard's statements
    asked again every 7th position (answered from the release: free)."""
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    out: list[QueryBatch] = []
    while len(seen) < n:
        lo = int(rng.integers(0, 73))
        hi = int(rng.integers(lo, 73))
        sex = [None, 0, 1][int(rng.integers(0, 3))]
        q = _range(lo, hi, sex)
        if q.key in seen:
            continue
        seen.add(q.key)
        out.append(q)
        if len(out) % 7 == 0:
            out.append(DASHBOARD[len(out) % len(DASHBOARD)])
    return out


def _demo(**kw: object) -> EngineConfig:
    base: dict[str, object] = dict(epsilon=1.0, delta=1e-3, stream_length=1000)
    base.update(kw)
    return EngineConfig(**base)  # type: ignore[arg-type]


def _fresh_errors(cfg: EngineConfig, stream: list[QueryBatch]) -> tuple[list[float], EngineState]:
    """The standard error of each fresh count's noise, in stream order (a count's
    sensitivity is 1), checking each against what the NOTICE promised before it."""
    x = np.random.default_rng(0).integers(0, 400, DOM.size).astype(float)
    state, _ = start(cfg, DOM, DASHBOARD, x, SeededSampler(1))
    sampler = SeededSampler(2)
    errors: list[float] = []
    for q in stream:
        promised = next_count_error(state)
        try:
            state, d, _ = answer(state, q, x, sampler)
        except BudgetExhaustedError:
            break
        if d.kind is DecisionKind.FRESH:
            assert isinstance(d.charge, Charged) and d.charge.sensitivity == 1.0
            assert promised is not None and d.charge.scale == pytest.approx(promised, rel=1e-9)
            errors.append(d.charge.scale)
    return errors, state


@pytest.mark.parametrize("expected", [35, None])
def test_demo_epoch_has_no_precision_cliff(expected: int | None) -> None:
    """Default mode, the demo's epoch: over 220 ad-hoc statements (100 or more fresh
    answers) -- well past the paper's
    T = ceil(log2 1000) = 10 and past the expected number of fresh answers E (35, as the demo's
    log gives it) -- the standard error of a fresh count changes by at most 2x (in fact
    sqrt 2) from one fresh answer to the next, and never improves; up to E it is flat."""
    cfg = _demo(expected_fresh=expected)
    errors, state = _fresh_errors(cfg, _stream(220, seed=3))
    # (the others were answered from stored releases, their variance below a fresh answer's)
    assert len(errors) >= 100 and state.fresh == len(errors)
    ratios = [b / a for a, b in itertools.pairwise(errors)]
    assert max(ratios) <= math.sqrt(2) * (1 + 1e-9)
    assert min(ratios) >= 1 - 1e-9
    e = cfg.expected
    if e < len(errors):  # flat up to E, then the tail
        assert errors[e - 1] == pytest.approx(errors[0], rel=1e-9)
        assert errors[-1] > errors[e - 1]
    # the whole online budget (half of it, matrix-heavy) over E answers, less the reserve's
    # third: sigma of the first = 1 / sqrt(mu^2 / 2 * (2/3) / E)
    mu2 = state.accountant.total
    assert errors[0] == pytest.approx(1 / math.sqrt(mu2 / 2 * (2 / 3) / e), rel=1e-6)
    assert state.accountant.spent <= state.accountant.total


def test_paper_mode_keeps_its_warm_up_cliff() -> None:
    """Paper mode (and the default mode with allocation = "static") still pay the warm-up of
    T = 10 answers from their own pool, then spread the bad pool over the estimate: the
    precision steps down at the 11th fresh answer, by far more than 2x."""
    for cfg in (_demo(mode="paper"), _demo(allocation="static")):
        errors, _ = _fresh_errors(cfg, _stream(40, seed=5))
        assert len(errors) >= 20
        assert errors[10] / errors[9] > 2.5


def test_status_says_the_next_precision_and_the_reserve() -> None:
    cfg = _demo(expected_fresh=35)
    x = np.ones(DOM.size)
    state, _ = start(cfg, DOM, DASHBOARD, x, SeededSampler(1))
    s = status(state)
    assert s.expected_fresh == 35 and s.b_est is None
    assert s.next_std_error == pytest.approx(next_count_error(state))
    # the reserve's third of the online half is kept for the answers beyond E
    assert s.reserve == pytest.approx(state.accountant.total / 2 / 3, rel=1e-9)
    paper = status(start(_demo(mode="paper"), DOM, DASHBOARD, x, SeededSampler(1))[0])
    assert paper.expected_fresh is None and paper.next_std_error is not None


@settings(max_examples=300, deadline=None)
@given(
    expected=st.integers(min_value=1, max_value=400),
    fractions=st.tuples(*(st.floats(min_value=0.0, max_value=1.0) for _ in range(3))).filter(
        lambda f: sum(f) > 0
    ),
    answers=st.integers(min_value=1, max_value=1200),
)
def test_steady_charges_change_by_at_most_2x_and_never_overspend(
    expected: int, fractions: tuple[float, float, float], answers: int
) -> None:
    tail = steady_tail(*fractions)
    p = Pacing(warmup_pool=0.0, bad_pool=1.0, reserve=0.0)
    last = None
    spent = 0.0
    for k in range(1, answers + 1):
        step = steady_charge(p, k=k, expected=expected, tail=tail)
        assert 0 < step.amount < p.bad_pool
        if last is not None:
            assert 0.5 * (1 - 1e-9) <= step.amount / last <= 1 + 1e-9
        last = step.amount
        spent += step.amount
        p = step.after
    assert spent < 1.0 and p.bad_pool > 0
    assert steady_horizon(1, expected, tail) >= 2 + tail


def test_a_ledger_written_before_the_steady_pacing_still_folds_as_it_was() -> None:
    """An older ledger's EpochStarted has no ``expected_fresh`` and says ``allocation =
    "static"`` (the default then): it folds to the same static pacing; a new one keeps
    ``expected_fresh`` and the steady pacing."""
    from dp.engine import fold
    from dp.engine_codec import decode_event, encode_event

    x = np.ones(DOM.size)
    _, events = start(_demo(expected_fresh=35), DOM, DASHBOARD, x, SeededSampler(1))
    encoded = [encode_event(ev) for ev in events]
    new = fold([decode_event(e) for e in encoded])
    assert new.config.allocation_kind.value == "steady" and new.config.expected == 35
    old = dict(encoded[0], config=dict(encoded[0]["config"], allocation="static"))
    del old["config"]["expected_fresh"]
    state = fold([decode_event(old), *(decode_event(e) for e in encoded[1:])])
    assert state.config.allocation_kind.value == "static" and state.pacing.warmup_pool > 0
