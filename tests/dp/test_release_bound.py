"""dp.release_bound: a release priced by product strategies, against the engine's planner."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import dp.marginals as M
import dp.release_bound as RB
from dp.domain import Domain, QueryBatch
from dp.strategy import optimize_strategy

AB = Domain.of(("a", 6), ("b", 5))
A = Domain.of(("a", 6))


def batch(domain: Domain, rows: list[np.ndarray]) -> QueryBatch:
    return QueryBatch(domain, sp.csr_array(np.asarray(rows, dtype=np.float64)))


def product(fa: list[float], fb: list[float]) -> np.ndarray:
    return np.outer(fa, fb).reshape(-1)


def ranges(n: int, lo: int, hi: int) -> list[float]:
    return [1.0 if lo <= i < hi else 0.0 for i in range(n)]


def histogram_under(lo: int, hi: int) -> QueryBatch:
    """GROUP BY a WHERE b in [lo, hi): one row per value of a."""
    return batch(AB, [product(ranges(6, i, i + 1), ranges(5, lo, hi)) for i in range(6)])


def test_rows_are_factored_and_a_non_product_row_is_told_apart() -> None:
    values = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]  # a sum of a over b in [1, 3)
    total = product(values, ranges(5, 1, 3))
    either = np.clip(
        product(ranges(6, 0, 2), [1.0] * 5) + product([1.0] * 6, ranges(5, 0, 1)), 0, 1
    )
    f = RB.factor(batch(AB, [total, either]))
    assert f.product.tolist() == [True, False]
    rebuilt = np.outer(f.factors[0][0], f.factors[1][0]).reshape(-1)
    assert np.allclose(rebuilt, total)


def test_a_product_workload_is_priced_at_the_solvers_optimum() -> None:
    """Filtered histograms of one attribute under ranges of another: a product workload,
    whose optimal strategy is a product too. The bound matches the solver's certified optimum
    (within its gap), is never below its lower bound, and each row's variance adds up to it."""
    batches = [histogram_under(0, 5), histogram_under(1, 3), histogram_under(2, 5)]
    [block] = RB.bound_release(batches, laplace=False)
    w = np.vstack([b.dense() for b in batches])
    best = optimize_strategy(w, time_limit=5.0)
    assert block.error >= best.lower_bound * (1 - 1e-6)
    assert block.error <= best.expected_error * 1.02
    assert sum(float(np.sum(v)) for v in block.row_variances) == pytest.approx(block.error)
    assert block.batches == tuple(batches)


def test_the_blocks_and_the_weights_follow_the_engines_plan() -> None:
    """The blocks are plan_release's (a batch over a goes into the block over a and b), a
    batch that reads no cell is left out, and a weight scales a batch's part of the error."""
    over_a = batch(A, [ranges(6, 0, 3), ranges(6, 3, 6)])
    empty = batch(A, [[0.0] * 6])
    h = histogram_under(0, 2)
    blocks = RB.bound_release([over_a, empty, h], laplace=False)
    assert [b.domain for b in blocks] == [AB]
    assert set(map(id, blocks[0].batches)) == {id(over_a), id(h)}
    light = RB.bound_release([over_a, h], laplace=False, weights=[0.1, 1.0])[0]
    heavy = RB.bound_release([over_a, h], laplace=False, weights=[1.0, 1.0])[0]
    assert light.error < heavy.error
    # Laplace: priced at unit L1 column norm, at least the L2 price
    assert RB.bound_release([over_a, h], laplace=True)[0].error >= heavy.error * (1 - 1e-9)


def test_a_block_too_large_keeps_the_batches_that_fit_as_the_engine_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a small limit on the reduced workload, the batches kept are the engine's: in P's
    order, those that keep rows x distinct columns within the limit."""
    batches = [histogram_under(lo, hi) for lo, hi in [(0, 5), (0, 1), (1, 2), (2, 4), (4, 5)]]
    for limit in (30, 60, 150, 250, 400, 720):
        monkeypatch.setattr(M, "MAX_BLOCK_ENTRIES", limit)
        monkeypatch.setattr(RB, "MAX_BLOCK_ENTRIES", limit)
        engine = [bs for _, _, _, bs in M._fitted_blocks(batches, 0.1, None)]
        mine = [b.batches for b in RB.bound_release(batches, laplace=False)]
        assert [[id(b) for b in bs] for bs in mine] == [[id(b) for b in bs] for bs in engine]
