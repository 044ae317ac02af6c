"""Unit-level sensitivities (dp.units): upper bounds of the true ones, checked by brute force
over every contribution of one unit on small matrices; exact at row level; and what the engine
charges with them (online and Matrix Mechanism releases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dp.domain import Domain, QueryBatch, lifted_matrix
from dp.engine import EngineConfig, batch_sensitivity, decide, start
from dp.errors import PrivacyParameterError
from dp.marginals import plan_release, release_sensitivity
from dp.noise import SeededSampler
from dp.pin import Pin
from dp.units import Contribution


def _brute(m: np.ndarray, rows: int, per_cell: np.ndarray) -> tuple[float, float]:
    """max ||M d||_2 and ||M d||_1 over integer 0 <= d_j <= cap_j, sum(d) <= rows."""
    best2 = best1 = 0.0
    for d in itertools.product(*(range(int(c) + 1) for c in per_cell)):
        if sum(d) <= rows:
            v = m @ np.asarray(d, dtype=float)
            best2, best1 = max(best2, float(np.linalg.norm(v))), max(best1, float(np.abs(v).sum()))
    return best2, best1


def test_the_bounds_are_at_least_the_true_sensitivities_and_exact_at_row_level() -> None:
    rng = np.random.default_rng(7)
    for _ in range(250):
        n, q = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        m = rng.normal(size=(q, n)) * (rng.random((q, n)) < 0.7)
        k = int(rng.integers(1, 6))
        c = int(rng.integers(1, k + 1))
        cells = rng.integers(1, 3, size=n).astype(float)
        bound = Contribution(k, c)
        l2, l1 = bound.sensitivities(m, cells)
        want2, want1 = _brute(m, k, bound.caps(cells))
        assert l2 >= want2 - 1e-9 and l1 >= want1 - 1e-9, (m, k, c, cells)
        if k == 1:
            assert l2 == pytest.approx(want2) and l1 == pytest.approx(want1)


def test_exact_for_a_total_and_for_a_histogram() -> None:
    assert Contribution(9, 1).sensitivities(np.ones((1, 20))) == (9.0, 9.0)
    assert Contribution(9, 1).sensitivities(np.eye(20)) == (3.0, 9.0)
    assert Contribution(12, 3).sensitivities(np.eye(20)) == (6.0, 12.0)
    # a marginal cell aggregating 4 cells of the domain can take 4 rows at 1 per cell
    assert Contribution(12, 1).sensitivities(np.eye(5), 4) == (pytest.approx(48**0.5), 12.0)


def test_the_bound_is_validated() -> None:
    for bad in ((0, 0), (2, -1), (True, 0), (1.5, 0)):
        with pytest.raises(PrivacyParameterError):
            Contribution(*bad)  # type: ignore[arg-type]
    assert Contribution(5, 9).per_cell == 5 and Contribution(5).per_cell == 5


DOM = Domain.of(("a", 3), ("b", 2))


def test_an_online_charge_is_calibrated_to_the_unit_bound() -> None:
    """The same count, row level and with units of at most 7 rows: the charge's sensitivity is
    7 times larger, and so is its noise scale (the amount is the same)."""
    batch = QueryBatch.from_dense(DOM.marginal(["a"]), [[1, 1, 0]])
    row = EngineConfig(epsilon=1.0, delta=1e-6, stream_length=5)
    unit = EngineConfig(epsilon=1.0, delta=1e-6, stream_length=5, contribution=Contribution(7))
    pin = Pin.from_dense(DOM, np.arange(6.0))
    charges = []
    for cfg in (row, unit):
        state, _ = start(cfg, DOM, None, pin, SeededSampler(1))
        charges.append(decide(state, batch).charge)
    assert batch_sensitivity(batch, Contribution(7), DOM) == (7.0, 7.0)
    r, u = charges
    assert r is not None and u is not None
    assert (r.sensitivity, u.sensitivity) == (1.0, 7.0)
    assert r.amount == u.amount and u.scale == pytest.approx(7 * r.scale)


def test_the_matrix_mechanism_release_bound_covers_every_unit() -> None:
    """Blocks over two marginals: the release's unit-level bound is at least the brute-force
    maximum over every contribution of one unit to the full domain's cells."""
    p = [
        QueryBatch.from_dense(DOM.marginal(["a"]), [[1, 1, 0], [0, 1, 1]]),
        QueryBatch.from_dense(DOM.marginal(["b"]), [[1, 0], [1, 1]]),
    ]
    plans = [(plan.reduction, plan.strategy) for plan in plan_release(p, laplace=False)]
    stacked = np.vstack(
        [
            np.asarray(
                lifted_matrix(
                    QueryBatch(red.domain, red.expand(a) + 0.0),  # type: ignore[arg-type]
                    DOM,
                ).toarray()
            )
            for red, a in plans
        ]
    )
    for k, c in ((1, 1), (3, 1), (3, 3), (4, 2)):
        bound = Contribution(k, c)
        l2, l1 = release_sensitivity(plans, bound, DOM)
        want2, want1 = _brute(stacked, k, np.full(DOM.size, float(bound.per_cell)))
        assert l2 >= want2 - 1e-9 and l1 >= want1 - 1e-9, (k, c)
        if k == 1:
            assert l2 == pytest.approx(want2)
    cfg = EngineConfig(epsilon=1.0, delta=1e-6, stream_length=5, contribution=Contribution(3))
    _, events = start(cfg, DOM, p, Pin.from_dense(DOM, np.ones(6)), SeededSampler(2))
    charged = [ev for ev in events if type(ev).__name__ == "Charged"]
    assert charged and charged[0].sensitivity == pytest.approx(
        release_sensitivity(plans, Contribution(3), DOM)[0]
    )
