"""The Matrix Mechanism over several marginals: lossless reductions, blocks, the joint
release's sensitivity, the budget split between blocks, and the engine over whole tables."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

import dp.marginals
from dp.accountant import NoiseKind
from dp.domain import Domain, QueryBatch, lift, projection
from dp.engine import (
    Answered,
    Charged,
    DecisionKind,
    EngineConfig,
    EngineState,
    EpochStarted,
    Event,
    MatrixReleased,
    Released,
    answer,
    apply,
    decide,
    fold,
    start,
    warm,
)
from dp.engine_codec import decode_event, encode_event
from dp.marginals import (
    BlockRelease,
    Reduction,
    assign,
    block_domains,
    plan_release,
    planned_blocks,
    planned_error,
    release_sensitivity,
)
from dp.marginals import reduction as _sparse_reduction
from dp.noise import SeededSampler
from dp.pin import Pin
from dp.release import NotInRowSpaceError, Release
from dp.strategy import evaluate_strategy, identity_strategy

SOLVER = 0.5  # solver seconds per release in these tests (small workloads converge fast)


def reduction(dom: Domain, w: sp.csr_array) -> tuple[Reduction, np.ndarray]:
    """``dp.marginals.reduction`` with the reduced workload densified (it is sparse)."""
    red, w_r = _sparse_reduction(dom, w)
    assert sp.issparse(w_r)
    return red, np.asarray(w_r.toarray())


# ------------------------------------------------------------------------------------------
# helpers


def prefix_sums(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n)))


def ranges(n: int) -> np.ndarray:
    return np.array(
        [
            [1.0 if i <= j < k else 0.0 for j in range(n)]
            for i in range(n)
            for k in range(i + 1, n + 1)
        ]
    )


def batch(domain: Domain, names: tuple[str, ...], rows: np.ndarray) -> QueryBatch:
    return QueryBatch.from_dense(domain.marginal(names), rows)


def random_workload(rng: np.random.Generator, n: int) -> np.ndarray:
    """An ``m x n`` workload with untouched cells and many repeated columns."""
    distinct = int(rng.integers(2, max(3, n // 3)))
    m = int(rng.integers(2, 7))
    base = rng.integers(0, 3, (m, distinct)).astype(np.float64)
    base[:, 0] = 0.0  # base column 0 is the untouched one
    base[0, 1:] += 1.0  # the others are nonzero
    cols = rng.integers(0, distinct, n)
    w = base[:, cols]
    w[:, rng.random(n) < 0.3] *= -0.5  # more distinct values (bit-identical ones merge)
    return w


def same_columns(w: np.ndarray) -> np.ndarray:
    """``eq[j, k]``: columns ``j`` and ``k`` of ``w`` are identical (brute force)."""
    return np.all(w[:, :, None] == w[:, None, :], axis=0)


def dense(q_r: sp.csr_array, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Reduction.reduce_queries``' (sparse) queries as a dense matrix, with their flags."""
    assert sp.issparse(q_r)
    return np.asarray(q_r.toarray()), ok


def random_pin(rng: np.random.Generator, domain: Domain, n: int) -> Pin:
    """A pin of ``n`` rows, each cell index in ``[0, size)`` of its attribute."""
    cols = [rng.integers(0, a.size, n) for a in domain.attributes]
    return Pin.of(domain, np.stack(cols, axis=1).reshape(n, -1), rng.integers(1, 30, n))


def brute_sensitivity(
    blocks: list[tuple[Reduction, np.ndarray]], union: Domain
) -> tuple[float, float]:
    """max over every full cell of the union of sqrt(sum_g ||column||^2), and the L1 analogue."""
    best2, best1 = 0.0, 0.0
    for cell in itertools.product(*(range(s) for s in union.shape)):
        tot2, tot1 = 0.0, 0.0
        for red, a in blocks:
            idx = 0
            if red.domain.attributes:
                coords = tuple(cell[union.axis(n)] for n in red.domain.names)
                idx = int(np.ravel_multi_index(coords, red.domain.shape))
            g = int(red.groups[idx])
            if g >= 0:
                tot2 += float(np.sum(a[:, g] ** 2))
                tot1 += float(np.sum(np.abs(a[:, g])))
        best2, best1 = max(best2, tot2), max(best1, tot1)
    return math.sqrt(best2), best1


# ------------------------------------------------------------------------------------------
# reduction


@pytest.mark.parametrize("seed", range(8))
def test_reduction_is_lossless_and_maximal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dom = Domain.of(("a", int(rng.integers(2, 5))), ("b", int(rng.integers(2, 5))), ("c", 3))
    w = random_workload(rng, dom.size)
    red, w_r = reduction(dom, sp.csr_array(w))
    g = red.groups
    assert red.domain == dom and g.shape == (dom.size,)
    touched = np.any(w != 0, axis=0)
    assert np.array_equal(g >= 0, touched)
    assert np.array_equal(w[:, touched], w_r[:, g[touched]])  # W == W_r[:, groups] exactly
    assert np.all(w[:, ~touched] == 0)
    assert w_r.shape == (w.shape[0], red.num_columns)
    assert np.array_equal(red.counts, np.bincount(g[touched], minlength=red.num_columns))
    assert np.all(red.counts >= 1)
    # cells share a column exactly when their columns of W are identical
    eq = same_columns(w)
    tj = np.flatnonzero(touched)
    assert np.array_equal(g[tj][:, None] == g[tj][None, :], eq[np.ix_(tj, tj)])
    # so the reduced columns are pairwise distinct
    assert not np.any(same_columns(w_r) & ~np.eye(red.num_columns, dtype=bool))
    # the reduced data sums each column's cells
    x = rng.integers(0, 50, dom.size).astype(np.float64)
    x_r = red.reduce_data(x)
    for col in range(red.num_columns):
        assert x_r[col] == x[g == col].sum()
    assert np.allclose(w @ x, w_r @ x_r, rtol=1e-13, atol=1e-9)


def test_reduction_falls_back_to_an_exact_merge_on_hash_collisions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(11)
    dom = Domain.of(("a", 4), ("b", 5))
    w = random_workload(rng, dom.size)
    red, w_r = reduction(dom, sp.csr_array(w))
    monkeypatch.setattr(dp.marginals, "splitmix", lambda x: np.zeros_like(x))  # everything collides
    red2, w_r2 = reduction(dom, sp.csr_array(w))
    touched = red.groups >= 0
    assert np.array_equal(red2.groups >= 0, touched)
    g1, g2 = red.groups[touched], red2.groups[touched]
    assert np.array_equal(g1[:, None] == g1[None, :], g2[:, None] == g2[None, :])
    assert np.array_equal(w[:, touched], w_r2[:, g2])
    assert np.array_equal(w_r[:, g1], w_r2[:, g2])
    assert red2.num_columns == red.num_columns
    assert np.array_equal(red2.counts, np.bincount(g2, minlength=red2.num_columns))


def test_reduction_of_lifted_marginal_workloads() -> None:
    """P over {a} and {a, b} lifted into {a, b, c}: c is never used, so cells differing only
    in c merge; cells b = 3 are touched by no query of {a, b} but are by the {a} rows."""
    dom = Domain.of(("a", 3), ("b", 4), ("c", 2))
    ab = np.zeros((3, 12))
    for i in range(3):
        ab[i, i * 4 : i * 4 + 3] = 1.0  # a = i, b in {0, 1, 2}
    w = sp.vstack(
        [
            lift(batch(dom, ("a", "b"), ab), dom).matrix,
            lift(batch(dom, ("a",), prefix_sums(3)[:2]), dom).matrix,  # a <= 0, a <= 1
        ],
        format="csr",
    )
    red, w_r = reduction(dom, w)
    # a = 2, b = 3 is untouched (the prefix sums stop at a <= 1)
    coords = np.stack(np.unravel_index(np.arange(dom.size), dom.shape), axis=1)
    dropped = (coords[:, 0] == 2) & (coords[:, 1] == 3)
    assert np.array_equal(red.groups < 0, dropped)
    # columns: (a, b < 3) for each a, and (a, b = 3) for a < 2: 5 distinct
    assert red.num_columns == 5 and sorted(red.counts.tolist()) == [2, 2, 6, 6, 6]
    assert np.array_equal(w.toarray()[:, ~dropped], w_r[:, red.groups[~dropped]])


def test_reduce_queries_is_exact_on_the_row_space() -> None:
    rng = np.random.default_rng(4)
    dom = Domain.of(("a", 3), ("b", 4), ("c", 2))
    ab = batch(dom, ("a", "b"), np.eye(12))
    a_only = batch(dom, ("a",), prefix_sums(3))
    w = sp.vstack([lift(ab, dom).matrix, lift(a_only, dom).matrix], format="csr")
    red, w_r = reduction(dom, w)
    x = rng.integers(0, 100, dom.size).astype(np.float64)
    x_r = red.reduce_data(x)
    queries = [
        w.toarray(),  # the workload itself
        rng.normal(size=(5, w.shape[0])) @ w.toarray(),  # combinations of its rows
        lift(batch(dom, ("b",), ranges(4)), dom).dense(),  # lifted sub-marginal queries
        lift(batch(dom, ("a",), [[1.0, -2.0, 0.5]]), dom).dense(),
        lift(QueryBatch.from_dense(Domain(()), [[3.0]]), dom).dense(),  # the total, x3
        np.zeros((1, dom.size)),
    ]
    for q in queries:
        q_r, ok = dense(*red.reduce_queries(sp.csr_array(q)))
        assert ok.all()
        assert q_r.shape == (q.shape[0], red.num_columns)
        assert np.allclose(q @ x, q_r @ x_r, rtol=1e-12, atol=1e-8)
        assert np.allclose(q_r[:, red.groups], q, rtol=1e-12, atol=1e-12)
    q_r, _ = dense(*red.reduce_queries(w))
    assert np.allclose(q_r, w_r)


def test_reduce_queries_flags_queries_outside_the_row_space() -> None:
    dom = Domain.of(("a", 3), ("b", 4))
    ab = np.zeros((3, 12))
    for i in range(3):
        ab[i, i * 4 : i * 4 + 3] = 1.0  # b = 3 is never touched; a-rows merge b in {0, 1, 2}
    red, _ = reduction(dom, sp.csr_array(ab))
    assert red.num_columns == 3 and np.all(red.groups[3::4] == -1)
    good = ab[0] + 2 * ab[2]
    dropped = np.zeros(12)
    dropped[3] = 1.0  # a = 0, b = 3: a dropped cell
    uneven = ab[0].copy()
    uneven[1] = 2.0  # not constant within the group of a = 0
    tiny = ab[1] * (1 + 1e-13)  # constant within the tolerance
    tiny[5] += 1e-14
    off = good + 1e-3 * dropped  # a small weight on a dropped cell is still refused
    single = np.zeros(12)
    single[0] = 1.0  # one cell of a merged group
    q = np.vstack([good, dropped, uneven, tiny, off, single])
    _, ok = red.reduce_queries(sp.csr_array(q))
    assert ok.tolist() == [True, False, False, True, False, False]
    # the reduced query is the group mean, whatever the flag
    q_r, _ = dense(*red.reduce_queries(sp.csr_array(uneven[None, :])))
    expect = np.zeros((1, 3))
    expect[0, red.groups[0]] = 4.0 / 3.0
    assert np.allclose(q_r, expect)


def test_identity_reduction() -> None:
    dom = Domain.of(("a", 2), ("b", 3))
    red = Reduction.identity(dom)
    x = np.arange(6.0)
    assert np.array_equal(red.reduce_data(x), x) and red.num_columns == 6
    q = np.random.default_rng(0).normal(size=(3, 6))
    q_r, ok = dense(*red.reduce_queries(sp.csr_array(q)))
    assert ok.all() and np.allclose(q_r, q)


# ------------------------------------------------------------------------------------------
# blocks


def test_a_predicted_statement_that_reads_no_cell_is_left_out_of_the_release() -> None:
    """An empty range (``WHERE age BETWEEN 5 AND 1``) in a real log: alone on its marginal
    its block would have no column; it is left out (the engine answers it 0 exactly), the
    rest is released, and a P of only such statements releases nothing."""
    dom = Domain.of(("a", 3), ("b", 2))
    empty = batch(dom, ("b",), np.zeros((1, 2)))
    real = batch(dom, ("a",), prefix_sums(3))
    plans = plan_release([empty, real], laplace=False)
    assert [pl.batches for pl in plans] == [(real,)]
    assert plan_release([empty], laplace=False) == ()
    cfg = EngineConfig(epsilon=1.0, delta=1e-6, stream_length=4)
    pin = random_pin(np.random.default_rng(1), dom, 20)
    state, events = start(cfg, dom, [empty], pin, SeededSampler(1))
    assert not any(isinstance(e, MatrixReleased) for e in events)
    _, _, r = answer(state, empty, pin, SeededSampler(2))
    assert r.answers == (0.0,)


def test_blocks_are_the_maximal_marginals_and_batches_go_to_the_smallest() -> None:
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
    p = [
        batch(dom, ("a",), prefix_sums(3)),
        batch(dom, ("a", "b"), np.eye(6)),
        batch(dom, ("c",), ranges(4)),
        batch(dom, ("b", "c"), np.eye(8)),
        batch(dom, ("b",), np.eye(2)),  # covered by both blocks: the smaller one, {a, b}
        batch(dom, ("a", "b"), np.ones((1, 6))),
    ]
    blocks = block_domains(p)
    assert [b.names for b in blocks] == [("a", "b"), ("b", "c")]
    assert block_domains(list(reversed(p))) == blocks  # canonical order
    members = assign(p, blocks)
    assert [m.num_queries for m in members[0]] == [3, 6, 2, 1]  # {a}, {a, b}, {b}, {a, b}
    assert [m.num_queries for m in members[1]] == [10, 8]  # {c}, {b, c}
    assert all(m.domain == blocks[0] for m in members[0])
    assert all(m.domain == blocks[1] for m in members[1])
    # a lifted batch answers as the original on the block's marginal
    pin = random_pin(np.random.default_rng(0), dom, 60)
    order = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3)]  # where each batch of p went
    for orig, (g, i) in zip(p, order, strict=True):
        m = members[g][i]
        assert m.num_queries == orig.num_queries
        assert np.allclose(m.answer(pin.marginal(m.domain)), orig.answer(pin.marginal(orig.domain)))


# ------------------------------------------------------------------------------------------
# the release's sensitivity


def random_blocks(
    rng: np.random.Generator, union: Domain, marginals: list[tuple[str, ...]]
) -> list[tuple[Reduction, np.ndarray]]:
    out = []
    for names in marginals:
        dom = union.marginal(names)
        w = random_workload(rng, dom.size)
        red, _ = reduction(dom, sp.csr_array(w))
        a = rng.normal(size=(int(rng.integers(1, 5)), red.num_columns))
        a *= rng.uniform(0.1, 2.0, red.num_columns)  # unequal column norms
        out.append((red, a))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_release_sensitivity_is_the_brute_force_maximum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    union = Domain.of(("a", 3), ("b", 2), ("c", 3), ("d", 2))
    marginals = [("a", "b"), ("b", "c"), ("c", "d"), ("a",), ("a", "b", "d")][: 2 + seed % 4]
    blocks = random_blocks(rng, union, marginals)
    l2, l1 = release_sensitivity(blocks)
    used = Domain(())
    for red, _ in blocks:
        used = used.union(red.domain)
    b2, b1 = brute_sensitivity(blocks, used)
    assert l2 == pytest.approx(b2, rel=1e-12)
    assert l1 == pytest.approx(b1, rel=1e-12)
    # the same over the whole union (attributes no block uses change nothing)
    assert brute_sensitivity(blocks, union) == pytest.approx((b2, b1), rel=1e-12)


def test_release_sensitivity_upper_bound_above_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(21)
    union = Domain.of(("a", 3), ("b", 2), ("c", 3), ("d", 2))
    for marginals in ([("a", "b"), ("b", "c"), ("c", "d")], [("a", "b"), ("c", "d")]):
        blocks = random_blocks(rng, union, marginals)
        exact = release_sensitivity(blocks)
        with monkeypatch.context() as m:
            m.setattr(dp.marginals, "EXACT_SENSITIVITY_CELLS", 0)
            bound = release_sensitivity(blocks)
        assert bound[0] >= exact[0] - 1e-12 and bound[1] >= exact[1] - 1e-12
        per2 = [
            max(float(np.sum(a[:, g] ** 2)) for g in set(red.groups[red.groups >= 0]))
            for red, a in blocks
        ]
        per1 = [
            max(float(np.sum(np.abs(a[:, g]))) for g in set(red.groups[red.groups >= 0]))
            for red, a in blocks
        ]
        assert bound[0] == pytest.approx(math.sqrt(sum(per2)), rel=1e-12)
        assert bound[1] == pytest.approx(sum(per1), rel=1e-12)
        if len(marginals) == 2:  # attribute-disjoint blocks: the bound is exact
            assert bound == pytest.approx(exact, rel=1e-12)


def test_release_sensitivity_exact_is_tighter_when_blocks_share_an_attribute() -> None:
    """Blocks over {a, b} and {b, c} whose heaviest columns lie at b = 0 and b = 1: no row
    reaches both, so the exact value is below sqrt(sum of the maxima)."""
    union = Domain.of(("a", 2), ("b", 2), ("c", 2))
    ab, bc = union.marginal(["a", "b"]), union.marginal(["b", "c"])
    a1 = np.diag([3.0, 1.0, 1.0, 1.0])  # cells (a, b): the heavy one is (0, 0)
    a2 = np.diag([1.0, 1.0, 2.0, 1.0])  # cells (b, c): the heavy one is (1, 0)
    blocks = [(Reduction.identity(ab), a1), (Reduction.identity(bc), a2)]
    l2, l1 = release_sensitivity(blocks)
    assert l2 == pytest.approx(math.sqrt(max(9 + 1, 1 + 4)))
    assert l1 == pytest.approx(4.0)
    assert (l2, l1) == pytest.approx(brute_sensitivity(blocks, union))
    assert l2 < math.sqrt(9 + 4)


def test_release_sensitivity_ignores_dropped_cells() -> None:
    dom = Domain.of(("a", 4))
    red = Reduction(dom, np.array([0, -1, 1, 1]), np.array([1.0, 2.0]))
    a = np.array([[2.0, 1.0], [0.0, 1.0]])
    assert release_sensitivity([(red, a)]) == pytest.approx((2.0, 2.0))
    # the empty marginal (one cell: the count of all rows) joins every full cell
    total = (Reduction.identity(Domain(())), np.array([[3.0]]))
    assert release_sensitivity([(red, a), total]) == pytest.approx((math.sqrt(13.0), 5.0))


# ------------------------------------------------------------------------------------------
# the budget split


def p_disjoint(dom: Domain) -> list[QueryBatch]:
    return [
        batch(dom, ("a", "b"), np.vstack([np.eye(6), np.ones((1, 6))])),
        batch(dom, ("a",), prefix_sums(3)),  # joins {a, b}
        batch(dom, ("c",), ranges(4)),
        batch(dom, ("d",), np.eye(2)),
    ]


def unscaled_errors(
    predicted: list[QueryBatch], plans: tuple[dp.marginals.BlockPlan, ...], *, l1: bool
) -> list[float]:
    """Each block's expected error at unit sensitivity, recomputed from its workload."""
    blocks = block_domains(predicted)
    members = assign(predicted, blocks)
    out = []
    for dom, bs, plan in zip(blocks, members, plans, strict=True):
        red, w_r = reduction(dom, sp.vstack([b.matrix for b in bs], format="csr"))
        assert plan.reduction.domain == dom
        assert np.array_equal(plan.reduction.groups, red.groups)
        s = evaluate_strategy(w_r, plan.strategy)
        assert math.isfinite(s.expected_error)  # the strategy answers its workload unbiased
        out.append(s.expected_error_l1 if l1 else s.expected_error)
    return out


def test_gaussian_budget_split_beats_the_equal_split() -> None:
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
    p = p_disjoint(dom)
    plans = plan_release(p, laplace=False, solver_seconds=SOLVER)
    assert [pl.reduction.domain.names for pl in plans] == [("a", "b"), ("c",), ("d",)]
    e = unscaled_errors(p, plans, l1=False)
    shares2 = [float(np.max(np.sum(pl.strategy**2, axis=0))) for pl in plans]  # c_g^2
    assert sum(shares2) == pytest.approx(1.0, abs=1e-9)
    for pl, eg, c2 in zip(plans, e, shares2, strict=True):
        assert pl.expected_error == pytest.approx(eg / c2, rel=1e-6)
    total = sum(pl.expected_error for pl in plans)
    g = len(plans)
    equal = sum(eg / (1.0 / g) for eg in e)
    assert total <= equal * (1 + 1e-9)
    assert total == pytest.approx(sum(math.sqrt(eg) for eg in e) ** 2, rel=1e-6)  # the optimum
    assert total < 0.99 * equal  # the blocks' errors differ: the split matters
    # and no other split on a grid does better
    for c2 in itertools.product(np.linspace(0.05, 0.9, 18), repeat=g - 1):
        if sum(c2) < 1:
            split = [*c2, 1 - sum(c2)]
            assert total <= sum(eg / s for eg, s in zip(e, split, strict=True)) * (1 + 1e-9)
    # the release has unit L2 sensitivity: the blocks are attribute-disjoint
    l2, _ = release_sensitivity([(pl.reduction, pl.strategy) for pl in plans])
    assert l2 == pytest.approx(1.0, abs=1e-9) and l2 <= 1 + 1e-9


def test_laplace_budget_split_beats_the_equal_split() -> None:
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
    p = p_disjoint(dom)
    plans = plan_release(p, laplace=True, solver_seconds=SOLVER)
    e = unscaled_errors(p, plans, l1=True)
    shares = [float(np.max(np.sum(np.abs(pl.strategy), axis=0))) for pl in plans]  # c_g
    assert sum(shares) == pytest.approx(1.0, abs=1e-9)
    for pl, eg, c in zip(plans, e, shares, strict=True):
        assert pl.expected_error == pytest.approx(eg / c**2, rel=1e-6)
    total = sum(pl.expected_error for pl in plans)
    g = len(plans)
    assert total <= sum(eg * g**2 for eg in e) * (1 + 1e-9)
    assert total == pytest.approx(sum(eg ** (1 / 3) for eg in e) ** 3, rel=1e-6)
    _, l1 = release_sensitivity([(pl.reduction, pl.strategy) for pl in plans])
    assert l1 == pytest.approx(1.0, abs=1e-9)


def row_variances(plans: tuple[dp.marginals.BlockPlan, ...]) -> dict[int, np.ndarray]:
    """Each planned batch's row variances at unit noise (keyed by ``id`` of the batch)."""
    out = {}
    for plan in plans:
        k = plan.strategy.shape[0]
        release = Release(matrix=plan.strategy, y=np.zeros(k), noise_variance=np.ones(k))
        blk = BlockRelease(plan.reduction, release)
        for b in plan.batches:
            out[id(b)] = blk.estimate(b)[1]
    return out


def test_a_weighted_release_gives_the_likely_statements_more_accuracy() -> None:
    """P's statements weighted by the probability that each is asked: the strategies and the
    split between blocks minimise the weighted error, so the likely statements (here the
    block over {a, b}) get lower variances and the unlikely ones higher than with P's rows
    weighing alike, the weighted error is no higher than the unweighted plan's, and
    planned_error prices exactly that. Equal weights are the unweighted plan, bit for bit."""
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
    p = p_disjoint(dom)
    alike = plan_release(p, laplace=False, solver_seconds=SOLVER)
    alike_weights = dp.marginals.normalised_weights([0.3] * 4).tolist()
    same = plan_release(p, laplace=False, solver_seconds=SOLVER, weights=alike_weights)
    assert [pl.strategy.tobytes() for pl in same] == [pl.strategy.tobytes() for pl in alike]
    weights = [1.0, 0.5, 0.02, 0.05]
    weighted = plan_release(p, laplace=False, solver_seconds=SOLVER, weights=weights)
    v_alike, v_weighted = row_variances(alike), row_variances(weighted)
    for b, w in zip(p, weights, strict=True):
        likely = w >= 0.5
        assert np.all(v_weighted[id(b)] < v_alike[id(b)]) == likely
        assert np.all(v_weighted[id(b)] > v_alike[id(b)]) != likely
    norm = dp.marginals.normalised_weights(weights)
    assert norm.tolist() == [1.0, 0.5, 0.02, 0.05]

    def weighted_error(v: dict[int, np.ndarray]) -> float:
        return float(sum(w * v[id(b)].sum() for b, w in zip(p, norm, strict=True)))

    assert weighted_error(v_weighted) <= weighted_error(v_alike) * (1 + 1e-6)
    error, _ = planned_error(p, laplace=False, solver_seconds=SOLVER, weights=weights)
    assert error == pytest.approx(weighted_error(v_weighted), rel=1e-4)
    # weights relative to the heaviest, each at least MIN_WEIGHT; positive numbers only
    floor = dp.marginals.MIN_WEIGHT
    assert dp.marginals.normalised_weights([4.0, 2.0, 1e-9]).tolist() == [1.0, 0.5, floor]
    for bad in ([1.0, 0.0], [1.0, -1.0], [1.0, math.nan], [math.inf]):
        with pytest.raises(ValueError):
            dp.marginals.normalised_weights(bad)
    with pytest.raises(ValueError):
        plan_release(p, laplace=False, weights=[1.0])


@pytest.mark.parametrize("mode", ["default", "paper"])
def test_an_epoch_measures_p_with_the_weighted_plan_in_the_default_mode(mode: str) -> None:
    """dp.engine.start measures P's blocks with the strategies plan_release makes for P
    weighted by the statements' probabilities in the default mode, and with P's rows weighing
    alike in paper mode (Algorithm 1 optimises P as a set); the release's sensitivity is
    recomputed from what is measured either way."""
    rng = np.random.default_rng(5)
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
    p, weights = p_disjoint(dom), [1.0, 0.5, 0.02, 0.05]
    cfg = EngineConfig(epsilon=1.0, delta=1e-6, stream_length=8, mode=mode)  # type: ignore[arg-type]
    _, events = start(cfg, dom, p, random_pin(rng, dom, 50), SeededSampler(1), weights=weights)
    [mm] = [e for e in events if isinstance(e, MatrixReleased)]
    expected = plan_release(p, laplace=False, weights=weights if mode == "default" else None)
    assert len(mm.blocks) == len(expected)
    for blk, plan in zip(mm.blocks, expected, strict=True):
        assert np.allclose(blk.release.matrix, plan.strategy, atol=1e-6)
    with pytest.raises(ValueError):
        start(cfg, dom, p, random_pin(rng, dom, 50), SeededSampler(1), weights=[1.0])


@pytest.mark.parametrize("laplace", [False, True])
def test_the_planned_error_is_the_plans_without_building_them(laplace: bool) -> None:
    """What the predictor's cap compares: the total expected error of the release
    plan_release makes, and the batches it keeps (disjoint and overlapping blocks, a batch
    that reads no cell)."""
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
    empty = QueryBatch(dom, sp.csr_array((1, dom.size)))
    for p in (
        p_disjoint(dom),
        [
            batch(dom, ("a", "b"), np.eye(6)),
            batch(dom, ("b", "c"), np.vstack([np.eye(8), np.ones((1, 8))])),
            batch(dom, ("c",), prefix_sums(4)),
            empty,
        ],
    ):
        plans = plan_release(p, laplace=laplace, solver_seconds=SOLVER)
        error, kept = planned_error(p, laplace=laplace, solver_seconds=SOLVER)
        assert error == pytest.approx(sum(pl.expected_error for pl in plans), rel=1e-6)
        assert kept == tuple(b for pl in plans for b in pl.batches)
        assert empty not in kept
        # each block's error at unit sensitivity, and its share of the release's privacy cost:
        # its strategy's sensitivity (c_g) squared under Gaussian noise (the blocks add mu^2),
        # itself under Laplace (epsilon)
        blocks = planned_blocks(p, laplace=laplace, solver_seconds=SOLVER)
        assert [bs for _, bs in blocks] == [pl.batches for pl in plans]
        c_g, total = dp.marginals.block_shares([e for e, _ in blocks], laplace=laplace)
        assert total == pytest.approx(error, rel=1e-9)
        shares = dp.marginals.budget_shares(c_g, laplace=laplace)
        for (e, _), c, share, pl in zip(blocks, c_g, shares, plans, strict=True):
            a = np.abs(pl.strategy)
            sens = a.sum(axis=0).max() if laplace else np.sqrt((a * a).sum(axis=0).max())
            assert c == pytest.approx(sens, rel=1e-6)
            assert share == pytest.approx(c if laplace else c * c)
            assert e / c**2 == pytest.approx(pl.expected_error, rel=1e-6)
        assert sum(shares) == pytest.approx(1.0)
    assert planned_error([empty], laplace=laplace) == (0.0, ())


def test_overlapping_blocks_have_sensitivity_at_most_one() -> None:
    dom = Domain.of(("a", 3), ("b", 2), ("c", 4))
    p = [
        batch(dom, ("a", "b"), np.eye(6)),
        batch(dom, ("b", "c"), np.vstack([np.eye(8), np.ones((1, 8))])),
        batch(dom, ("c",), prefix_sums(4)),
    ]
    plans = plan_release(p, laplace=False, solver_seconds=SOLVER)
    assert len(plans) == 2
    shares2 = [float(np.max(np.sum(pl.strategy**2, axis=0))) for pl in plans]
    assert sum(shares2) == pytest.approx(1.0, abs=1e-9)
    l2, _ = release_sensitivity([(pl.reduction, pl.strategy) for pl in plans])
    assert l2 <= 1 + 1e-9


def test_block_release_answers_covered_marginals_exactly_without_noise() -> None:
    rng = np.random.default_rng(9)
    dom = Domain.of(("a", 3), ("b", 4), ("c", 2))
    p = [  # a = 2 is never asked
        batch(dom, ("a", "b"), np.eye(12)[[0, 1, 2, 4, 5, 6]]),
        batch(dom, ("a",), prefix_sums(3)[:2]),
    ]
    [plan] = plan_release(p, laplace=False, solver_seconds=SOLVER)
    pin = random_pin(rng, dom, 80)
    x_r = plan.reduction.reduce_data(pin.marginal(plan.reduction.domain))
    k = plan.strategy.shape[0]
    blk = BlockRelease(
        plan.reduction,
        Release(matrix=plan.strategy, y=plan.strategy @ x_r, noise_variance=np.ones(k)),
    )
    assert blk.domain == dom.marginal(["a", "b"])
    for q in (*p, batch(dom, ("a",), [[1.0, 1.0, 0.0], [0.0, 2.0, 0.0]])):
        ans, var = blk.estimate(q)
        assert np.allclose(ans, q.answer(pin.marginal(q.domain)), atol=1e-8)
        assert np.all(var > 0)
    # a = 2 was never asked: refused, per row
    dropped = np.zeros((2, 12))
    dropped[0, 8] = 1.0
    dropped[1, 0] = 1.0
    q = batch(dom, ("a", "b"), dropped)
    ans, var, ok = blk.solve(q)
    assert ok.tolist() == [False, True] and math.isinf(var[0]) and ans[0] == 0.0
    with pytest.raises(NotInRowSpaceError):
        blk.estimate(q)
    with pytest.raises(ValueError):  # a query using an attribute the block lacks
        blk.solve(batch(dom, ("c",), np.eye(2)))


def test_a_block_remembers_the_predicted_rows_answers_as_its_own_solve_gives_them() -> None:
    """``remember`` keeps each answerable row of P by its row key, with the answer and
    variance that solving it gives (alone or with other rows); a batch of known rows (in any
    order or combination) is answered from them, any other batch is solved as before."""
    rng = np.random.default_rng(10)
    dom = Domain.of(("a", 3), ("b", 4), ("c", 2))
    p = [
        batch(dom, ("a", "b"), np.eye(12)[[0, 1, 2, 4, 5, 6]]),  # a = 2 never asked
        batch(dom, ("a",), prefix_sums(3)[:2]),
    ]
    [plan] = plan_release(p, laplace=False, solver_seconds=SOLVER)
    x_r = plan.reduction.reduce_data(random_pin(rng, dom, 80).marginal(plan.reduction.domain))
    k = plan.strategy.shape[0]
    y = plan.strategy @ x_r + rng.normal(size=k)
    release = Release(matrix=plan.strategy, y=y, noise_variance=np.full(k, 2.0))
    fresh, blk = BlockRelease(plan.reduction, release), BlockRelease(plan.reduction, release)
    outside = batch(dom, ("a", "b"), np.eye(12)[[8]])  # a = 2: not in the row space
    blk.remember([*p, outside, batch(dom, ("c",), np.eye(2))])  # the last: not covered
    assert len(blk.known) == 8  # P's rows; neither the refused row nor the uncovered batch
    blk.remember([batch(dom, ("a", "b"), np.eye(12)[[3]])])  # only the first call fills
    assert len(blk.known) == 8
    mixed = batch(dom, ("a", "b"), np.eye(12)[[6, 0]])  # two known rows, another order
    sub = batch(dom, ("a",), prefix_sums(3)[1:2])
    for q in (*p, mixed, sub):
        keys = q.row_keys()
        assert all(key in blk.known for key in keys)
        got, want = blk.solve(q, keys), fresh.solve(q)
        assert got[2].all() and want[2].all()
        assert np.allclose(got[0], want[0], rtol=1e-12, atol=1e-9)
        assert np.allclose(got[1], want[1], rtol=1e-12)
    # a row outside P is solved, not looked up; one outside the row space is still refused
    other = batch(dom, ("a", "b"), np.eye(12)[[0, 3]])
    assert np.allclose(blk.solve(other)[0], fresh.solve(other)[0], atol=1e-9)
    assert blk.solve(outside)[2].tolist() == [False]


# ------------------------------------------------------------------------------------------
# the engine over several marginals

DOM = Domain.of(("a", 3), ("b", 2), ("c", 4), ("d", 2))
P = [
    batch(DOM, ("a", "b"), np.vstack([np.eye(6), np.kron(np.eye(3), np.ones((1, 2)))])),
    batch(DOM, ("a",), prefix_sums(3)[:2]),  # contained in {a, b}
    batch(DOM, ("c", "d"), np.vstack([np.eye(8), np.ones((1, 8))])),
]
PIN = random_pin(np.random.default_rng(2024), DOM, 120)
HUGE = dict(epsilon=1e6, delta=1e-3, stream_length=8)
# the noise's sd is ~3e-3 at epsilon = 1e6; a row counted wrongly moves a count by at least 1
TOL = 0.05


def exact(q: QueryBatch, pin: Pin = PIN) -> np.ndarray:
    return q.answer(pin.marginal(q.domain))


def run(state: EngineState, q: QueryBatch, ledger: list[Event], seed: int = 7) -> tuple:
    state, d, r = answer(state, q, PIN, SeededSampler(seed + len(ledger)))
    ledger += [*d.events, *r.events]
    return state, d, r


def test_engine_blocks_and_the_release_sensitivity() -> None:
    for kw in ({}, {"accountant": "pure", "delta": 0.0}):
        cfg = EngineConfig(**{**HUGE, **kw})  # type: ignore[arg-type]
        state, events = start(cfg, DOM, P, PIN, SeededSampler(1))
        assert [type(e).__name__ for e in events] == ["EpochStarted", "Charged", "MatrixReleased"]
        blocks = state.matrix_blocks
        assert [b.domain.names for b in blocks] == [("a", "b"), ("c", "d")]
        [mm] = [e for e in events if isinstance(e, MatrixReleased)]
        assert mm.blocks == blocks
        [charge] = [e for e in events if isinstance(e, Charged)]
        l2, l1 = release_sensitivity([(b.reduction, b.release.matrix) for b in blocks])
        if cfg.accountant == "pure":
            assert charge.noise is NoiseKind.LAPLACE
            assert charge.sensitivity == pytest.approx(l1, rel=1e-12) and l1 <= 1 + 1e-9
        else:
            assert charge.noise is NoiseKind.GAUSSIAN
            assert charge.sensitivity == pytest.approx(l2, rel=1e-12)
            assert l2 == pytest.approx(1.0, abs=1e-9)  # disjoint blocks, sum c_g^2 = 1
        assert charge.scale == pytest.approx(
            state.accountant.noise_scale(charge.amount, charge.sensitivity)
        )
        for b in blocks:
            assert np.all(b.release.noise_variance == b.release.noise_variance[0])


@pytest.mark.parametrize("mode", ["default", "paper"])
def test_engine_answers_p_from_the_blocks_unbiased(mode: str) -> None:
    cfg = EngineConfig(**HUGE, mode=mode)  # type: ignore[arg-type]
    for data in (PIN, PIN.marginal(DOM)):  # a pin, or the dense joint
        pin = PIN if isinstance(data, Pin) else Pin.from_dense(DOM, data)
        state, _ = start(cfg, DOM, P, data, SeededSampler(1))
        spent = state.accountant.spent
        for q in P:
            d = decide(state, q)
            assert d.kind is DecisionKind.MATRIX
            assert all(isinstance(e, Answered) for e in d.events)
            for ev in d.events:
                state = apply(state, ev)
            assert np.allclose(d.answers, exact(q, pin), rtol=0, atol=TOL)
            assert all(s < TOL / 5 for s in d.std_errors)
        # sub-batches of P's rows are good too
        sub = batch(DOM, ("c", "d"), np.eye(8)[[1, 6]])
        assert decide(state, sub).kind is DecisionKind.MATRIX
        assert state.accountant.spent == spent and state.fresh == 0 and state.position == 3


def test_engine_fresh_answers_over_other_marginals_are_exact_at_huge_epsilon() -> None:
    for mode in ("default", "paper"):
        cfg = EngineConfig(**HUGE, mode=mode)  # type: ignore[arg-type]
        state, ledger = start(cfg, DOM, P, PIN, SeededSampler(1))
        ledger = list(ledger)
        for q in (
            batch(DOM, ("a", "c"), np.eye(12)),
            batch(DOM, ("b", "d"), [[1.0, 0.0, 0.0, 1.0], [2.0, 1.0, 1.0, 0.0]]),
        ):
            spent = state.accountant.spent
            state, d, r = run(state, q, ledger)
            assert d.kind is DecisionKind.FRESH and state.accountant.spent > spent
            assert np.allclose(r.answers, exact(q), rtol=0, atol=TOL)
        assert state.fresh == 2


def test_engine_sub_marginal_queries_from_the_blocks() -> None:
    """{a} queries outside P, in the row space of the {a, b} block: STORED in default mode when
    their variance is below a fresh answer's, FRESH otherwise and always in paper mode."""
    q = batch(DOM, ("a",), [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    # the same number of rows and sensitivity, over a marginal no block covers
    probe = batch(DOM, ("a", "c"), [[1.0] * 3 + [0.0] * 9, [0.0] + [1.0] * 2 + [0.0] * 9])
    assert (probe.num_queries, probe.sensitivity_l2) == (q.num_queries, q.sensitivity_l2)
    for split, expect in (
        ("matrix-heavy", DecisionKind.STORED),
        ((0.01, 0.33, 0.33, 0.33), DecisionKind.FRESH),
    ):
        cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, split=split)
        state, _ = start(cfg, DOM, P, PIN, SeededSampler(1))
        [block] = [b for b in state.matrix_blocks if b.domain.names == ("a", "b")]
        # the lowest-variance source: the block, or the joint release over all blocks (the
        # total count, q's first row, is measured by both blocks: combined, it is better)
        assert state.matrix_joint is not None
        stored_var = min(float(np.sum(src.solve(q)[1])) for src in (block, state.matrix_joint))
        assert stored_var < float(np.sum(block.solve(q)[1]))
        fresh = decide(state, probe)
        assert fresh.kind is DecisionKind.FRESH and fresh.charge is not None
        fresh_var = fresh.charge.scale**2 * q.num_queries
        d = decide(state, q)
        assert d.kind is expect
        if expect is DecisionKind.STORED:
            assert stored_var <= fresh_var and d.charge is None
            assert sum(s**2 for s in d.std_errors) <= fresh_var
            assert sum(s**2 for s in d.std_errors) == pytest.approx(stored_var, rel=1e-6)
        else:
            assert stored_var > fresh_var
    # paper mode: no reuse
    state, _ = start(
        EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, mode="paper"),
        DOM,
        P,
        PIN,
        SeededSampler(1),
    )
    assert decide(state, q).kind is DecisionKind.FRESH
    # at huge epsilon the stored answer is exact (unbiased)
    state, _ = start(EngineConfig(**HUGE), DOM, P, PIN, SeededSampler(1))
    d = decide(state, q)
    assert d.kind is DecisionKind.STORED
    assert np.allclose(d.answers, exact(q), rtol=0, atol=TOL)


def test_engine_refuses_batches_outside_its_domain() -> None:
    state, _ = start(EngineConfig(**HUGE), DOM, P, PIN, SeededSampler(1))
    for dom in (Domain.of(("zip", 3)), Domain.of(("a", 4)), Domain.of(("a", 3), ("zip", 2))):
        with pytest.raises(ValueError):
            decide(state, QueryBatch.from_dense(dom, np.eye(dom.size)))
    with pytest.raises(ValueError):  # P over an attribute the epoch lacks
        start(
            EngineConfig(**HUGE),
            DOM,
            [*P, QueryBatch.from_dense(Domain.of(("zip", 3)), np.eye(3))],
            PIN,
            SeededSampler(1),
        )
    with pytest.raises(ValueError):  # data over another domain
        start(
            EngineConfig(**HUGE),
            DOM,
            P,
            Pin.from_dense(DOM.marginal(["a", "b"]), np.ones(6)),
            SeededSampler(1),
        )


def stream() -> list[QueryBatch]:
    return [
        P[1],
        batch(DOM, ("a", "c"), np.eye(12)),
        batch(DOM, ("a",), [[1.0, 1.0, 1.0]]),
        P[2],
        batch(DOM, ("b", "d"), np.ones((1, 4))),
        batch(DOM, ("a", "c"), np.eye(12)),  # a repeat
        batch(DOM, ("c",), np.eye(4)),
        QueryBatch.from_dense(Domain(()), [[1.0]]),
        batch(DOM, ("a", "c"), np.ones((1, 12))),
    ]


@pytest.mark.parametrize("mode", ["default", "paper"])
def test_engine_events_round_trip_and_fold(mode: str) -> None:
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8, mode=mode)  # type: ignore[arg-type]
    state, evs = start(cfg, DOM, P, PIN, SeededSampler(1))
    ledger = list(evs)
    kinds = []
    for q in stream():
        state, d, _ = run(state, q, ledger)
        kinds.append(d.kind)
    assert (
        DecisionKind.FRESH in kinds
        and DecisionKind.MATRIX in kinds
        and DecisionKind.REPEAT in kinds
    )
    text = json.dumps([encode_event(e) for e in ledger])
    decoded = [decode_event(d) for d in json.loads(text)]
    assert len(decoded) == len(ledger)
    for a, b in zip(decoded, ledger, strict=True):
        if isinstance(a, MatrixReleased):
            assert isinstance(b, MatrixReleased) and a.legacy is None
            for ra, rb in zip(a.blocks, b.blocks, strict=True):
                assert ra.domain == rb.domain
                assert np.array_equal(ra.reduction.groups, rb.reduction.groups)
                assert np.array_equal(ra.reduction.counts, rb.reduction.counts)
                assert ra.release.matrix.tobytes() == rb.release.matrix.tobytes()
                assert ra.release.y.tobytes() == rb.release.y.tobytes()
                assert ra.release.noise_variance.tobytes() == rb.release.noise_variance.tobytes()
        else:
            assert a == b
    again = fold(decoded)
    assert again.accountant == state.accountant
    assert again.pacing == state.pacing
    assert (again.position, again.bad, again.fresh) == (state.position, state.bad, state.fresh)
    assert dict(again.answers) == dict(state.answers)
    assert again.predicted_rows == state.predicted_rows
    assert set(again.stored) == set(state.stored)
    for q in (batch(DOM, ("b", "c"), np.eye(8)), batch(DOM, ("a",), [[0.0, 1.0, 0.0]]), P[0]):
        d1, d2 = decide(state, q), decide(again, q)
        assert d1.kind == d2.kind and d1.events == d2.events
    # encoding is stable: the decoded events encode to the same JSON
    assert json.dumps([encode_event(e) for e in decoded]) == text


def test_a_block_remembers_whole_batches_within_its_work_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows beyond :data:`dp.marginals.KNOWN_MAX_WORK` are not remembered (whole batches, in
    order): they are solved when asked, to the same answers."""
    dom = Domain.of(("a", 3), ("b", 4), ("c", 2))
    p = [
        batch(dom, ("a", "b"), np.eye(12)[[0, 1, 2, 4, 5, 6]]),
        batch(dom, ("a",), prefix_sums(3)[:2]),
    ]
    [plan] = plan_release(p, laplace=False, solver_seconds=SOLVER)
    k = plan.strategy.shape[0]
    release = Release(matrix=plan.strategy, y=np.arange(k, dtype=float), noise_variance=np.ones(k))
    n = release.num_cells
    monkeypatch.setattr(dp.marginals, "KNOWN_MAX_WORK", 7 * n * n)  # room for 7 rows
    blk, fresh = BlockRelease(plan.reduction, release), BlockRelease(plan.reduction, release)
    blk.remember(p)
    assert set(blk.known) == set(p[0].row_keys())  # the second batch (2 rows) did not fit
    for q in p:
        assert np.allclose(blk.solve(q)[0], fresh.solve(q)[0], atol=1e-9)


def test_a_warm_fold_decides_as_a_cold_one() -> None:
    """``warm`` fills the blocks' memory of P's rows before any decision (what a proxy does
    when it loads an epoch); every decision is then the one a cold fold makes."""
    for mode in ("default", "paper"):
        cfg = EngineConfig(**HUGE, mode=mode)  # type: ignore[arg-type]
        _, events = start(cfg, DOM, P, PIN, SeededSampler(1))
        text = json.dumps([encode_event(e) for e in events])  # as a proxy reads its ledger
        cold = fold([decode_event(d) for d in json.loads(text)])
        hot = warm(fold([decode_event(d) for d in json.loads(text)]))
        assert not any(b.known for b in cold.matrix_blocks)
        assert all(b.known for b in hot.matrix_blocks)
        rows = sum(q.num_queries for q in P)
        assert len({k for b in hot.matrix_blocks for k in b.known}) == rows
        for q in (
            *P,
            batch(DOM, ("c", "d"), np.eye(8)[[6, 1]]),
            batch(DOM, ("a", "c"), np.eye(12)),
        ):
            d1, d2 = decide(cold, q), decide(hot, q)
            assert d1.kind == d2.kind and d1.events == d2.events


def test_legacy_matrix_release_decodes_and_folds() -> None:
    """A ledger written before whole-table epochs: one release over the epoch's domain, no
    blocks, and P as one batch."""
    dom = Domain.of(("a", 3), ("b", 2))
    pred = QueryBatch.from_dense(dom, np.vstack([np.eye(6), np.ones((1, 6))]))
    pin = random_pin(np.random.default_rng(5), dom, 30)
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=8)
    state, evs = start(cfg, dom, pred, pin, SeededSampler(3), strategy=identity_strategy(6))
    [block] = state.matrix_blocks
    encoded = [encode_event(e) for e in evs]
    legacy = {
        "type": "matrix_released",
        "matrix": [[float(v) for v in row] for row in block.release.matrix],
        "y": [float(v) for v in block.release.y],
        "noise_variance": [float(v) for v in block.release.noise_variance],
    }
    encoded[0]["predicted"] = encoded[0]["predicted"][0]  # the older form of P: one batch
    encoded[2] = legacy
    decoded = [decode_event(json.loads(json.dumps(d))) for d in encoded]
    mm = decoded[2]
    assert isinstance(mm, MatrixReleased) and mm.blocks == () and mm.legacy is not None
    assert encode_event(mm) == legacy  # re-encoded in its own format
    old = fold(decoded)
    [ob] = old.matrix_blocks
    assert ob.domain == dom and np.array_equal(ob.reduction.groups, np.arange(6))
    assert np.array_equal(ob.release.y, block.release.y)
    assert old.accountant == state.accountant and old.pacing == state.pacing
    for q in (pred, QueryBatch.from_dense(dom.marginal(["a"]), np.eye(3))):
        d_old, d_new = decide(old, q), decide(state, q)
        assert d_old.kind == d_new.kind
        assert d_old.kind in (DecisionKind.MATRIX, DecisionKind.STORED)
        assert np.allclose(d_old.answers, d_new.answers, rtol=1e-12, atol=1e-9)
    # and the epoch goes on from the folded state
    _, d, r = answer(
        old, QueryBatch.from_dense(dom.marginal(["b"]), [[1.0, -1.0]]), pin, SeededSampler(4)
    )
    assert len(r.answers) == 1 and np.isfinite(r.answers[0])
    if d.kind is DecisionKind.FRESH:
        assert isinstance(r.events[0], Released)


@pytest.mark.parametrize("seed", range(4))
def test_sub_marginal_answers_from_a_larger_block_are_exact(seed: int) -> None:
    """Batches over {a} and {b, c} answered from the {a, b, c} block: one predicted (MATRIX),
    the others not (STORED); all exact at huge epsilon, whatever the pin."""
    rng = np.random.default_rng(300 + seed)
    dom = Domain.of(("a", 3), ("b", 2), ("c", 2))
    pin = random_pin(rng, dom, int(rng.integers(5, 60)))
    pa = QueryBatch.from_dense(dom.marginal(["a"]), np.eye(3))
    full = QueryBatch.from_dense(dom, np.vstack([np.eye(12), np.ones((1, 12))]))
    state, _ = start(EngineConfig(**HUGE), dom, [pa, full], pin, SeededSampler(seed))
    assert [b.domain for b in state.matrix_blocks] == [dom]
    for q, kind in (
        (pa, DecisionKind.MATRIX),
        (QueryBatch.from_dense(dom.marginal(["a"]), prefix_sums(3)), DecisionKind.STORED),
        (QueryBatch.from_dense(dom.marginal(["b", "c"]), ranges(4)), DecisionKind.STORED),
        (QueryBatch.from_dense(Domain.of(("c", 2), ("a", 3)), np.eye(6)), DecisionKind.STORED),
    ):
        d = decide(state, q)
        assert d.kind is kind, q.domain.names
        assert np.allclose(d.answers, exact(q, pin), rtol=0, atol=TOL), q.domain.names


def test_projection_and_lift_agree_with_pin_marginals() -> None:
    """The identity the blocks rely on, on full rows: a sub-marginal's histogram is the
    projection-sum of the larger marginal's."""
    pin = random_pin(np.random.default_rng(1), DOM, 90)
    big = DOM.marginal(["a", "c", "d"])
    for names in (("a",), ("c", "d"), ("a", "d"), ()):
        small = DOM.marginal(names)
        proj = projection(small, big)
        summed = np.bincount(proj, weights=pin.marginal(big), minlength=small.size)
        assert np.array_equal(summed, pin.marginal(small))


def test_blocks_of_one_marginal_in_two_attribute_orders() -> None:
    """One block per attribute set (the first domain in canonical order, {a, b}); the batch
    over {b, a} joins it, lifted by name, and answers as the original."""
    ab = Domain.of(("a", 3), ("b", 2))
    ba = Domain.of(("b", 2), ("a", 3))
    rng = np.random.default_rng(17)
    w_ba = rng.integers(-2, 3, (4, 6)).astype(np.float64)
    p = [QueryBatch.from_dense(ab, np.eye(6)), QueryBatch.from_dense(ba, w_ba)]
    for order in (p, p[::-1]):
        assert block_domains(order) == (ab,)
    [members] = assign(p, (ab,))
    assert [m.domain for m in members] == [ab, ab]
    assert members[0] is p[0]
    # column (a, b) of the lifted batch is column (b, a) of the original
    lifted = members[1].dense()
    for i, j in itertools.product(range(3), range(2)):
        assert np.array_equal(lifted[:, i * 2 + j], w_ba[:, j * 3 + i])
    pin = random_pin(rng, ab, 40)
    assert np.allclose(members[1].answer(pin.marginal(ab)), p[1].answer(pin.marginal(ba)))
    for laplace in (False, True):
        [plan] = plan_release(p, laplace=laplace, solver_seconds=SOLVER)
        assert plan.reduction.domain == ab
    # the engine releases one block and answers both batches from it, exactly at huge epsilon
    state, _ = start(EngineConfig(**HUGE), ab, p, pin, SeededSampler(2))
    assert [b.domain for b in state.matrix_blocks] == [ab]
    for q in p:
        d = decide(state, q)
        assert d.kind is DecisionKind.MATRIX
        assert np.allclose(d.answers, exact(q, pin), rtol=0, atol=TOL)


def test_a_predicted_batch_too_large_for_a_block_is_left_to_online_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A block's reduced workload is held dense by the solver and the release: a predicted
    batch that would make it exceed MAX_BLOCK_ENTRIES is left out of the release (and of P),
    the others of its block are kept, and the left-out one is answered online."""
    monkeypatch.setattr(dp.marginals, "MAX_BLOCK_ENTRIES", 64)
    dom = Domain.of(("a", 12), ("b", 8))
    pin = random_pin(np.random.default_rng(3), dom, 300)
    ab = dom.marginal(["a", "b"])
    big = QueryBatch(ab, sp.identity(ab.size, format="csr"))  # 96 x 96: a full GROUP BY a, b
    small = QueryBatch(dom.marginal(["a"]), sp.csr_array(np.tril(np.ones((3, 12)))))
    plans = plan_release([big, small], laplace=False, solver_seconds=SOLVER)
    assert [len(p.batches) for p in plans] == [1] and plans[0].batches == (small,)
    cfg = EngineConfig(epsilon=1e6, delta=1e-3, stream_length=10)
    state, events = start(cfg, dom, [big, small], pin, SeededSampler(4))
    started = events[0]
    assert isinstance(started, EpochStarted) and started.predicted == (small,)
    state, d_small, r_small = answer(state, small, pin, SeededSampler(5))
    assert d_small.kind is DecisionKind.MATRIX
    exact = small.answer(pin.marginal(small.domain))
    assert np.allclose(r_small.answers, exact, atol=0.05)
    _, d_big, _ = answer(state, big, pin, SeededSampler(6))
    assert d_big.kind is DecisionKind.FRESH


def test_a_marginal_that_holds_only_its_block_is_answered_by_the_block() -> None:
    """Default mode: the GLS over a marginal that holds only the Matrix Mechanism block's own
    release is that block's least squares (the same answers and variances), so the engine does
    not compute it; once an online release over the marginal is stored, the GLS over both is
    consulted again (here it answers what the block alone cannot)."""
    from dp.engine import _best

    cfg = EngineConfig(**HUGE, mode="default")  # type: ignore[arg-type]
    p = [batch(DOM, ("a", "b"), np.eye(6)[[0, 1, 2]])]  # cells 3-5 never predicted
    state, _ = start(cfg, DOM, p, PIN, SeededSampler(3))
    [block] = state.matrix_blocks
    assert block.domain in state.stored and block.domain in state.stored_by_block
    sub = batch(DOM, ("a", "b"), np.eye(6)[[0, 2]])
    own = block.estimate(sub)
    assert np.allclose(state.stored[block.domain].estimate(sub.dense()), own, rtol=1e-9)
    assert np.allclose(_best(state, sub, stored=True), own)
    # an online release over the same marginal: the GLS over both is consulted again
    fresh = batch(DOM, ("a", "b"), np.eye(6)[[3]])  # outside the block's row space
    state, d, _ = answer(state, fresh, PIN, SeededSampler(4))
    assert d.kind is DecisionKind.FRESH and block.domain not in state.stored_by_block
    both = batch(DOM, ("a", "b"), np.eye(6)[[0, 3]])
    assert block.solve(both)[2].tolist() == [True, False]
    found = _best(state, both, stored=True)
    assert found is not None
    assert np.allclose(found, state.stored[block.domain].estimate(both.dense()))
    assert np.allclose(found[0], exact(both, PIN), atol=TOL)


def test_the_joint_release_is_least_squares_over_every_block() -> None:
    """joint_release stacks the blocks over the union of their attributes: a query measured by
    several blocks gets a lower variance than from any one of them, a query made of parts from
    different blocks (in no single block) is answered, both unbiased."""
    from dp.marginals import joint_release

    state, _ = start(EngineConfig(**HUGE), DOM, P, PIN, SeededSampler(1))
    joint = state.matrix_joint
    assert joint is not None and joint_release(state.matrix_blocks[:1]) is None
    assert set(joint.domain.names) == {n for b in state.matrix_blocks for n in b.domain.names}
    total = batch(DOM, (), [[1.0]])
    singles = [float(b.solve(total)[1][0]) for b in state.matrix_blocks]
    ans, var, ok = joint.solve(total)
    assert ok.all() and var[0] < min(singles)
    assert np.allclose(ans, exact(total), atol=TOL)
    # a row over {a} plus a row over {c}: each from its block alone, together from the joint
    ac = DOM.marginal(["a", "c"])
    rows = np.zeros((1, ac.size))
    rows[0, :] = np.add.outer(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0, 0.0])).reshape(-1)
    mixed = QueryBatch(ac, sp.csr_array(rows))
    assert not any(b.domain.covers(ac) for b in state.matrix_blocks)
    ans, var, ok = joint.solve(mixed)
    assert ok.all() and np.allclose(ans, exact(mixed), atol=TOL)
    d = decide(state, mixed)
    assert d.kind is DecisionKind.STORED and np.allclose(d.answers, exact(mixed), atol=TOL)
