"""Strategy optimisation: the fast dual fixed point against cvxpy, and its certificates."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dp.strategy import (
    Strategy,
    dual_bound,
    evaluate_strategy,
    haar_matrix,
    hierarchical_matrix,
    identity_strategy,
    l1_strategy,
    lift,
    optimize_strategy,
    optimize_strategy_cvxpy,
    reduce_domain,
)


def ranges(n: int, m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    all_r = list(itertools.combinations_with_replacement(range(n), 2))
    idx = rng.choice(len(all_r), size=min(m, len(all_r)), replace=False)
    w = np.zeros((idx.size, n))
    for k, t in enumerate(idx):
        i, j = all_r[t]
        w[k, i : j + 1] = 1.0
    return w


def true_error(w: np.ndarray, a: np.ndarray) -> float:
    """Independent re-evaluation: Delta2(A)^2 ||W A^+||_F^2 with numpy's pinv."""
    delta2 = np.max(np.linalg.norm(a, axis=0))
    return float(delta2**2 * np.linalg.norm(w @ np.linalg.pinv(a), "fro") ** 2)


def bias(w: np.ndarray, a: np.ndarray) -> float:
    """max |R A - W| with R = W A^+."""
    return float(np.max(np.abs(w @ np.linalg.pinv(a) @ a - w)))


def check_certificates(w: np.ndarray, s: Strategy) -> None:
    a = s.matrix
    assert a.shape[1] == w.shape[1]
    # sensitivities are those of the returned matrix
    assert s.sensitivity_l2 == pytest.approx(np.max(np.linalg.norm(a, axis=0)), rel=1e-12)
    assert s.sensitivity_l1 == pytest.approx(np.max(np.abs(a).sum(axis=0)), rel=1e-12)
    # unbiased: the workload is in the row space
    assert bias(w, a) <= 1e-9 * np.max(np.abs(w))
    err = true_error(w, a)
    assert s.expected_error == pytest.approx(err, rel=1e-8)
    # certified: LB <= true error <= UB, i.e. gap >= 0 and LB really is a lower bound
    assert s.gap >= 0.0
    assert s.lower_bound <= err * (1 + 1e-9)


CASES = [
    ranges(6, 4, 0),  # m < n: near-singular optimum
    ranges(8, 20, 1),  # m > n
    ranges(10, 10, 2),
    np.tril(np.ones((7, 7))),  # prefix sums
    np.array([[1.0, 2.0, 0.0, -1.0], [0.0, 1.0, 1.0, 1.0], [3.0, 0.0, 0.0, 1.0]]),
]


@pytest.mark.parametrize("w", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_matches_cvxpy_reference(w: np.ndarray) -> None:
    fast = optimize_strategy(w, tol=1e-6)
    check_certificates(w, fast)
    assert fast.gap <= 1e-6 * (1 + 1e-6)
    ref = optimize_strategy_cvxpy(w)
    # the reference's dual certifies a lower bound too; both bound the same optimum
    assert ref.lower_bound <= fast.expected_error * (1 + 1e-7)
    assert fast.lower_bound <= ref.expected_error * (1 + 1e-7)
    # and the fast solver's strategy is at least as good as what the reference returns
    assert fast.expected_error <= ref.expected_error * (1 + 1e-6)
    assert fast.expected_error == pytest.approx(ref.lower_bound, rel=1e-5)


def test_default_tolerance_gives_certified_gap() -> None:
    w = ranges(40, 60, 3)
    s = optimize_strategy(w)
    check_certificates(w, s)
    assert s.gap <= 1e-3 * (1 + 1e-9)
    assert s.sensitivity_l2 == pytest.approx(1.0, rel=1e-12)
    # a strictly better strategy than the identity and the hierarchical baselines
    assert s.expected_error < identity_strategy(40, workload=w).expected_error
    assert s.expected_error < evaluate_strategy(w, hierarchical_matrix(40)).expected_error


def test_dual_bound_is_a_lower_bound_for_any_weights() -> None:
    w = ranges(9, 7, 4)
    best = optimize_strategy(w, tol=1e-7).expected_error
    rng = np.random.default_rng(0)
    for _ in range(20):
        assert dual_bound(w, rng.random(9)) <= best * (1 + 1e-9)


def test_domain_reduction_is_lossless() -> None:
    base = ranges(6, 8, 5)
    # full domain: duplicate some columns, add untouched cells, shuffle
    w = np.hstack([base, base[:, [1, 1, 4]], np.zeros((8, 3))])
    perm = np.random.default_rng(1).permutation(w.shape[1])
    w = w[:, perm]
    w_r, groups = reduce_domain(w)
    assert w_r.shape[1] <= 6
    assert np.array_equal(lift(w_r, groups)[:, groups >= 0], w[:, groups >= 0])
    assert np.all(w[:, groups < 0] == 0)
    # x_r sums x over groups: W x = W_r x_r
    x = np.arange(w.shape[1], dtype=float)
    x_r = np.bincount(groups[groups >= 0], weights=x[groups >= 0], minlength=w_r.shape[1])
    assert np.allclose(w @ x, w_r @ x_r)
    # the optimum on the full domain (cvxpy, no reduction) equals the reduced one
    fast = optimize_strategy(w, tol=1e-7)
    check_certificates(w, fast)
    assert np.all(fast.matrix[:, groups < 0] == 0.0)
    ref = optimize_strategy_cvxpy(w)
    assert fast.expected_error == pytest.approx(ref.lower_bound, rel=1e-5)
    assert fast.expected_error == pytest.approx(
        optimize_strategy(w_r, tol=1e-7).expected_error, rel=1e-6
    )


def test_time_cap_returns_best_so_far_with_valid_certificate() -> None:
    w = ranges(30, 40, 6)
    ticks = iter(range(10**6))
    s = optimize_strategy(w, tol=1e-12, time_limit=2.5, clock=lambda: float(next(ticks)))
    check_certificates(w, s)
    assert s.gap > 1e-12  # stopped by the (fake) clock, not by convergence
    one = optimize_strategy(w, tol=1e-12, max_iter=1)
    check_certificates(w, one)
    assert one.gap >= s.gap * (1 - 1e-9)


def test_default_time_cap_is_a_deterministic_work_budget() -> None:
    w = ranges(30, 40, 6)
    tiny = optimize_strategy(w, tol=1e-12, time_limit=1e-9)  # budget for no step at all
    check_certificates(w, tiny)
    assert tiny.gap > 1e-3
    again = optimize_strategy(w, tol=1e-12, time_limit=1e-9)
    assert np.array_equal(tiny.matrix, again.matrix) and tiny.gap == again.gap
    full = optimize_strategy(w)
    assert np.array_equal(full.matrix, optimize_strategy(w).matrix)
    assert full.gap <= 1e-3 < tiny.gap


def test_invalid_workloads_are_refused() -> None:
    with pytest.raises(ValueError):
        optimize_strategy(np.zeros((3, 4)))
    with pytest.raises(ValueError):
        optimize_strategy(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError):
        optimize_strategy(np.ones((2, 2)), tol=0.0)


def test_strategy_is_frozen_and_read_only() -> None:
    s = optimize_strategy(np.eye(3))
    with pytest.raises(AttributeError):
        s.gap = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        s.matrix[0, 0] = 5.0


def test_an_understated_sensitivity_is_refused() -> None:
    """A caller-supplied sensitivity below the matrix's own (largest column L2 / L1 norm) would
    calibrate too little noise: construction refuses it; an over-estimate is sound and kept."""
    a = 10.0 * np.eye(3)
    common = {"gap": math.inf, "expected_error": 3.0}
    with pytest.raises(ValueError, match="sensitivity_l2"):
        Strategy(matrix=a, sensitivity_l2=1.0, sensitivity_l1=10.0, **common)
    with pytest.raises(ValueError, match="sensitivity_l1"):
        Strategy(matrix=a, sensitivity_l2=10.0, sensitivity_l1=1.0, **common)
    with pytest.raises(ValueError):
        Strategy(matrix=a, sensitivity_l2=float("nan"), sensitivity_l1=10.0, **common)
    # the first column has L2 norm 5 and L1 norm 7
    b = np.array([[3.0, 1.0], [4.0, 0.0]])
    with pytest.raises(ValueError):
        Strategy(matrix=b, sensitivity_l2=5.0 * (1 - 1e-6), sensitivity_l1=7.0, **common)
    exact = Strategy(matrix=b, sensitivity_l2=5.0 * (1 - 1e-12), sensitivity_l1=7.0, **common)
    assert exact.sensitivity_l2 == pytest.approx(5.0)  # rounding is tolerated
    over = Strategy(matrix=a, sensitivity_l2=20.0, sensitivity_l1=30.0, **common)
    assert (over.sensitivity_l2, over.sensitivity_l1) == (20.0, 30.0)


def test_identity_strategy() -> None:
    s = identity_strategy(5)
    assert s.matrix.shape == (5, 5)
    assert (s.sensitivity_l2, s.sensitivity_l1, s.expected_error) == (1.0, 1.0, 5.0)
    w = ranges(5, 3, 7)
    assert identity_strategy(5, workload=w).expected_error == pytest.approx(
        true_error(w, np.eye(5))
    )
    # the identity workload is optimally answered by the identity
    assert optimize_strategy(np.eye(5)).expected_error == pytest.approx(5.0, rel=1e-3)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_baseline_matrices_have_full_column_rank(n: int) -> None:
    for a in (hierarchical_matrix(n, 2), hierarchical_matrix(n, 4), haar_matrix(n)):
        assert a.shape[1] == n
        assert np.linalg.matrix_rank(a) == n


def test_l1_strategy_is_sound_and_no_worse_than_candidates() -> None:
    w = ranges(16, 30, 8)
    s = l1_strategy(w)
    a = s.matrix
    assert s.sensitivity_l1 == pytest.approx(np.max(np.abs(a).sum(axis=0)), rel=1e-12)
    assert bias(w, a) <= 1e-9
    l1_err = s.sensitivity_l1**2 * np.linalg.norm(w @ np.linalg.pinv(a), "fro") ** 2
    assert s.expected_error_l1 == pytest.approx(l1_err, rel=1e-8)
    for cand in (np.eye(16), hierarchical_matrix(16), haar_matrix(16)):
        c = evaluate_strategy(w, cand)
        assert s.expected_error_l1 <= c.expected_error_l1 * (1 + 1e-9)
    assert s.lower_bound <= s.expected_error * (1 + 1e-9)


def test_evaluate_strategy_flags_a_workload_outside_the_span() -> None:
    w = np.array([[1.0, 1.0, 1.0]])
    assert evaluate_strategy(w, np.array([[1.0, 1.0, 0.0]])).expected_error == np.inf
    assert evaluate_strategy(w, np.array([[1.0, 1.0, 1.0]])).expected_error == pytest.approx(1.0)
    assert evaluate_strategy(w, np.eye(3)).expected_error == pytest.approx(3.0)


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.int64, st.tuples(st.integers(1, 6), st.integers(1, 6)), elements=st.integers(-2, 2))
)
def test_random_small_workloads(w_int: np.ndarray) -> None:
    w = w_int.astype(np.float64)
    if not np.any(w):
        with pytest.raises(ValueError):
            optimize_strategy(w)
        return
    s = optimize_strategy(w, tol=1e-4)
    check_certificates(w, s)
    assert s.gap <= 1e-4 * (1 + 1e-6)
    # no strategy beats the certified lower bound; the identity is one strategy
    assert s.lower_bound <= identity_strategy(w.shape[1], workload=w).expected_error * (1 + 1e-9)


# --------------------------------------------------------------------------------------------
# large views: few distinct cell patterns, and many distinct patterns with symmetry


def _patterned(n: int, n_r: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A workload over n cells whose columns take n_r distinct 0/1/2 patterns (plus untouched
    cells), and the explicitly reduced workload."""
    rng = np.random.default_rng(seed)
    w_r = rng.integers(0, 3, size=(m, n_r)).astype(float) * (rng.random((m, n_r)) < 0.3)
    w_r[0] = 1.0  # the total: no pattern is all zero
    groups = rng.integers(-1, n_r, size=n)
    groups[:n_r] = np.arange(n_r)  # every pattern used
    return lift(w_r, groups), w_r


def test_large_domain_with_few_patterns_equals_the_reduced_problem() -> None:
    w, w_r = _patterned(20_000, 300, 40, seed=7)
    full, red = optimize_strategy(w), optimize_strategy(w_r)
    assert full.gap <= 1e-3 and red.gap <= 1e-3
    # same optimum: both certified within 0.1% of their own lower bound
    assert full.expected_error <= red.lower_bound * (1 + 1e-3) * (1 + 1e-9)
    assert red.expected_error <= full.lower_bound * (1 + 1e-3) * (1 + 1e-9)
    assert full.sensitivity_l2 == pytest.approx(1.0)
    # the full strategy is the reduced one lifted: constant on merged groups, zero if untouched
    _, groups = reduce_domain(w)
    a = full.matrix
    assert np.all(a[:, groups < 0] == 0.0)
    w_back, _ = reduce_domain(a)
    assert w_back.shape[1] <= 300
    resid = w - (w @ np.linalg.pinv(a)) @ a
    assert np.max(np.abs(resid)) <= 1e-8 * np.max(np.abs(w))


def _marginals(sizes: tuple[int, ...]) -> np.ndarray:
    """Adult-like queries over a product domain: per-value counts of every attribute but the
    first, sums of the first attribute's value, and ranges over the first attribute."""
    grid = np.indices(sizes).reshape(len(sizes), -1)
    rows = [np.ones(grid.shape[1]), grid[0] + 17.0]
    for a in range(1, len(sizes)):
        rows += [(grid[a] == v).astype(float) for v in range(sizes[a])]
    rows += [((grid[0] >= lo) & (grid[0] < lo + 4)).astype(float) for lo in range(0, sizes[0], 4)]
    rows.append((grid[1] == 0) * (grid[0] + 17.0))  # breaks the symmetry of attribute 1
    return np.vstack(rows)


def test_symmetry_classes_give_the_same_certified_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    import dp.strategy as ds

    w = _marginals((8, 3, 4, 5, 3))  # 1440 distinct columns, 8 * 2 symmetry classes
    _, n_c = ds.symmetry_classes(reduce_domain(w)[0])
    assert n_c == 16
    fast = optimize_strategy(w)
    assert fast.gap <= 1e-3
    # without the symmetry phase (every cell its own class): the same optimum
    monkeypatch.setattr(ds, "symmetry_classes", lambda w_r: (np.arange(w_r.shape[1]), w_r.shape[1]))
    plain = optimize_strategy(w)
    assert plain.gap <= 1e-3
    assert fast.expected_error <= plain.lower_bound * (1 + 1e-3) * (1 + 1e-9)
    assert plain.expected_error <= fast.lower_bound * (1 + 1e-3) * (1 + 1e-9)
    # classes that are not orbits (a wrong guess): still certified, by the full iteration
    monkeypatch.setattr(ds, "symmetry_classes", lambda w_r: (np.arange(w_r.shape[1]) % 7, 7))
    wrong = optimize_strategy(w)
    assert wrong.gap <= 1e-3
    assert wrong.expected_error == pytest.approx(true_error(w, wrong.matrix), rel=1e-9)


def test_thin_svd_gram_route_matches_lapack() -> None:
    from dp.strategy import thin_svd

    rng = np.random.default_rng(2)
    a = rng.standard_normal((12, 8)) @ rng.standard_normal((8, 5000))  # rank 8, wide
    u, sv, vt = thin_svd(a)
    ref = np.linalg.svd(a, compute_uv=False)
    assert np.allclose(sv[:8], ref[:8], rtol=1e-12) and np.all(sv[8:] == 0.0)
    assert np.allclose((u[:, :8] * sv[:8]) @ vt[:8], a, atol=1e-10 * np.max(np.abs(a)))
    assert np.allclose(vt[:8] @ vt[:8].T, np.eye(8), atol=1e-12)
    # an ill-conditioned spectrum takes the exact route and is still right
    b = a.copy()
    b[0] = b[1] + 1e-7 * rng.standard_normal(5000)
    _, sv2, _ = thin_svd(b)
    assert np.allclose(sv2, np.linalg.svd(b, compute_uv=False), rtol=1e-6, atol=1e-12 * sv2[0])


def test_an_eigensolver_failure_falls_back_to_divide_and_conquer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """LAPACK's dsyevr raised LinAlgError once (a 288 x 270 0/1 workload); the solver then
    uses dsyevd and returns the same certified strategy."""
    import scipy.linalg as sla

    import dp.strategy as strategy

    w = np.tril(np.ones((12, 12)))
    want = strategy.optimize_strategy(w)
    real = sla.eigh
    calls = {"evr": 0}

    def flaky(a: np.ndarray, *args: object, **kw: object) -> object:
        if kw.get("driver") == "evr":
            calls["evr"] += 1
            raise np.linalg.LinAlgError("Internal Error")
        return real(a, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(strategy.sla, "eigh", flaky)
    got = strategy.optimize_strategy(w)
    assert calls["evr"] > 0
    assert (
        got.gap <= 1e-3
        and abs(got.expected_error - want.expected_error) <= 1e-6 * want.expected_error
    )


def test_the_optimiser_never_raises_on_real_shapes_of_workloads() -> None:
    """Duplicate, near-parallel and rank-deficient rows (what query logs hold: the same
    histogram asked with jittered ranges, sums of other rows): a strategy that answers every
    row, never an exception."""
    rng = np.random.default_rng(5)
    base = (rng.random((12, 40)) < 0.3).astype(float)
    near = base + 1e-9 * rng.standard_normal(base.shape)
    sums = base[:4].sum(axis=0, keepdims=True)
    for w in (
        np.vstack([base, base]),  # duplicates
        np.vstack([base, near]),  # near-parallel
        np.vstack([base, sums, 2 * sums]),  # rank-deficient
        np.ones((30, 40)),  # rank one
    ):
        s = optimize_strategy(w, time_limit=0.5)
        a_pinv = np.linalg.pinv(s.matrix)
        assert np.allclose(w @ a_pinv @ s.matrix, w, atol=1e-6 * np.max(np.abs(w)))


def test_the_fallback_strategy_is_unbiased_with_unit_sensitivity() -> None:
    from dp.strategy import _safe_strategy

    w = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    with pytest.warns(RuntimeWarning, match="measuring every cell of the reduced domain"):
        s = _safe_strategy(w, np.linalg.LinAlgError("no convergence"))
    assert s.matrix.shape == (2, 4) and s.sensitivity_l2 == 1.0 and s.gap == math.inf
    assert np.allclose(w @ np.linalg.pinv(s.matrix) @ s.matrix, w)
    assert s.expected_error == pytest.approx(float(np.sum(np.array([[1, 0], [0, 1], [1, 1]]) ** 2)))


def test_the_l1_strategy_of_a_wide_workload_builds_no_dense_baseline() -> None:
    """A few queries over many cells (a histogram of a wide marginal): the identity, the trees
    and the Haar basis over 5,000 cells would each be hundreds of MB; only the optimised
    strategy (rank W rows) is built, and it is sound."""
    import tracemalloc

    from dp.strategy import MAX_DENSE_ENTRIES

    rng = np.random.default_rng(7)
    w = (rng.random((6, 5000)) < 0.3).astype(np.float64)
    tracemalloc.start()
    try:
        s = l1_strategy(w, time_limit=0.5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.matrix.size <= MAX_DENSE_ENTRIES
    assert peak < 8 * MAX_DENSE_ENTRIES  # one dense 5,000 x 5,000 identity alone is 25x that
    assert bias(w, s.matrix) <= 1e-9
    assert s.sensitivity_l1 == pytest.approx(np.max(np.abs(s.matrix).sum(axis=0)), rel=1e-12)


def test_the_fallback_of_a_wide_workload_measures_its_own_queries() -> None:
    from dp.strategy import _safe_strategy

    rng = np.random.default_rng(8)
    w = rng.random((5, 5000))  # 5,000 distinct cells: the reduced domain is as wide
    with pytest.warns(RuntimeWarning, match="measuring the workload's own queries"):
        s = _safe_strategy(w, np.linalg.LinAlgError("no convergence"))
    assert s.matrix.shape == (5, 5000)
    assert bias(w, s.matrix) <= 1e-9
    assert s.sensitivity_l2 == pytest.approx(np.max(np.linalg.norm(w, axis=0)), rel=1e-12)
    assert s.expected_error == pytest.approx(s.sensitivity_l2**2 * 5, rel=1e-8)  # rank 5


@pytest.mark.parametrize(
    "w",
    [
        ranges(16, 30, 3),
        np.vstack([np.eye(6), np.ones((1, 6))]),
        np.ones((30, 40)),  # rank one
        np.kron(np.eye(4), np.ones((1, 5))),  # symmetry classes
    ],
)
def test_strategy_error_is_the_optimised_strategys_without_building_it(w: np.ndarray) -> None:
    from dp.strategy import strategy_error

    assert strategy_error(w, time_limit=0.5) == pytest.approx(
        optimize_strategy(w, time_limit=0.5).expected_error, rel=1e-9
    )


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("b", [2, 3, 4, 16])
def test_the_tree_is_every_distinct_node_interval_in_descending_order(n: int, b: int) -> None:
    a = hierarchical_matrix(n, b)
    nodes = {
        (s0, min(s0 + b**k, n))
        for k in range(max(1, math.ceil(math.log(n, b)) + 1) + 1)
        for s0 in range(0, n, b**k)
    }
    expected = np.zeros((len(nodes), n))
    for i, (s0, e0) in enumerate(sorted(nodes, key=lambda iv: (iv[0], -iv[1]))):
        expected[i, s0:e0] = 1.0
    assert np.array_equal(a, expected)
    assert np.array_equal(a, np.unique(a, axis=0)[::-1])  # distinct rows, descending


def test_a_full_rank_baselines_error_is_evaluate_strategys() -> None:
    from dp.strategy import _full_rank_baseline

    w = ranges(40, 25, 4)
    for a in (hierarchical_matrix(40, 2), hierarchical_matrix(40, 8), haar_matrix(40)):
        fast, exact = _full_rank_baseline(w, a), evaluate_strategy(w, a)
        assert fast.expected_error == pytest.approx(exact.expected_error, rel=1e-12)
        assert (fast.sensitivity_l2, fast.sensitivity_l1) == (
            exact.sensitivity_l2,
            exact.sensitivity_l1,
        )
