"""Releases: unbiased least-squares answers, exact variances, row-space detection, GLS."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dp.errors import LaprasError
from dp.noise import SeededSampler
from dp.release import NotInRowSpaceError, Release, combine, measure
from dp.strategy import identity_strategy, optimize_strategy

W = np.array(
    [
        [1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
        [0.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 1.0, 1.0, 0.0],
    ]
)  # cell 5 is untouched by the workload
X = np.array([12.0, 7.0, 3.0, 9.0, 4.0, 30.0])


def monte_carlo(rel_of: object, queries: np.ndarray, reps: int, seed: int) -> np.ndarray:
    sampler = SeededSampler(seed)
    out = np.empty((reps, queries.shape[0]))
    for i in range(reps):
        out[i] = rel_of(sampler).estimate(queries)[0]  # type: ignore[operator]
    return out


def test_estimates_are_unbiased_with_the_predicted_variance() -> None:
    s = optimize_strategy(W)
    sigma = 2.0
    queries = np.vstack([W, W[0] + 2 * W[3], [[0.5, 0.5, 0.0, 0.0, 0.0, 0.0]]])
    reps = 4000
    ans = monte_carlo(lambda smp: measure(s, X, sigma, smp), queries, reps, seed=11)
    var = measure(s, X, sigma, SeededSampler(0)).variance(queries)
    truth = queries @ X
    # means within 4.5 standard errors
    assert np.all(np.abs(ans.mean(axis=0) - truth) <= 4.5 * np.sqrt(var / reps))
    # empirical variances within ~10% (sd of a sample variance is sqrt(2/reps) ~ 2.2%)
    assert np.allclose(ans.var(axis=0, ddof=1) / var, 1.0, atol=0.1)
    # the predicted variance of the workload is sigma^2 ||W A^+||^2, i.e. the strategy's error
    w_var = measure(s, X, sigma, SeededSampler(0)).variance(W)
    assert np.sum(w_var) == pytest.approx(sigma**2 * s.expected_error / s.sensitivity_l2**2)


def test_laplace_measurement() -> None:
    s = identity_strategy(6)
    b = 1.5
    rel = measure(s, X, b, SeededSampler(3), kind="laplace")
    assert np.allclose(rel.noise_variance, 2 * b * b)
    ans = monte_carlo(lambda smp: measure(s, X, b, smp, kind="laplace"), W, 3000, seed=5)
    var = rel.variance(W)
    assert np.allclose(var, 2 * b * b * np.sum(W * W, axis=1))
    assert np.all(np.abs(ans.mean(axis=0) - W @ X) <= 4.5 * np.sqrt(var / 3000))
    assert np.allclose(ans.var(axis=0, ddof=1) / var, 1.0, atol=0.12)


def test_row_space_detection() -> None:
    s = optimize_strategy(W)
    rel = measure(s, X, 1.0, SeededSampler(1))
    inside = np.vstack([W[2] - W[1], 3 * W[2], np.zeros(6)])  # cell 0 alone is W[2] - W[1]
    outside = np.array(
        [
            [0.0, 0.0, 1.0, 0.0, 0.0, 0.0],  # a single cell (cells 0 and 1 would be inside)
            [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],  # the untouched cell
            [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],  # not a combination of the rows of W
        ]
    )
    assert rel.can_answer(inside).all()
    assert not rel.can_answer(outside).any()
    assert rel.can_answer(np.vstack([inside[0], outside[0]])).tolist() == [True, False]
    ans, var = rel.estimate(inside)
    assert ans[2] == 0.0 and var[2] == 0.0
    assert np.all(np.isinf(rel.variance(outside)))
    with pytest.raises(NotInRowSpaceError) as exc:
        rel.estimate(np.vstack([inside, outside[:1]]))
    assert isinstance(exc.value, LaprasError)
    # a perturbation far above the tolerance is refused
    assert not rel.can_answer(W[0] + 1e-6 * outside[0])[0]


def test_merged_columns_are_handled() -> None:
    w = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])  # cells 0 and 1 identical
    s = optimize_strategy(w)
    assert np.array_equal(s.matrix[:, 0], s.matrix[:, 1])
    rel = measure(s, np.array([1.0, 2.0, 3.0, 4.0]), 1e-9, SeededSampler(0))
    queries = np.array([[2.0, 2.0, 2.0, 0.0], [1.0, 0.0, 1.0, 0.0], [2.0, 2.0, 0.0, 0.0]])
    # not constant on the merged cells 0, 1 / constant but outside the span
    assert rel.can_answer(queries).tolist() == [True, False, False]
    ans, _ = rel.estimate(queries[:1])
    assert ans[0] == pytest.approx(12.0, abs=1e-6)


def test_sparse_and_vector_queries() -> None:
    s = optimize_strategy(W)
    rel = measure(s, X, 1.0, SeededSampler(2))
    dense = rel.estimate(W)
    sparse = rel.estimate(sp.csr_array(W))
    vec = rel.estimate(W[1])
    assert np.allclose(dense[0], sparse[0]) and np.allclose(dense[1], sparse[1])
    assert vec[0].shape == (1,) and vec[0][0] == pytest.approx(dense[0][1])


def test_combine_is_generalised_least_squares() -> None:
    n = 6
    rng = np.random.default_rng(0)
    a1 = rng.normal(size=(4, n))
    a2 = rng.normal(size=(5, n))
    v1, v2 = 1.0, 9.0
    y1 = a1 @ X + rng.normal(0, np.sqrt(v1), 4)
    y2 = a2 @ X + rng.normal(0, np.sqrt(v2), 5)
    r1 = Release(matrix=a1, y=y1, noise_variance=np.full(4, v1))
    r2 = Release(matrix=a2, y=y2, noise_variance=np.full(5, v2))
    both = combine([r1, r2])
    # reference GLS on the stacked (full column rank) system
    a = np.vstack([a1, a2])
    winv = np.diag(np.r_[np.full(4, 1 / v1), np.full(5, 1 / v2)])
    cov = np.linalg.inv(a.T @ winv @ a)
    x_gls = cov @ a.T @ winv @ np.r_[y1, y2]
    q = rng.normal(size=(3, n))
    ans, var = both.estimate(q)
    assert np.allclose(ans, q @ x_gls)
    assert np.allclose(var, np.einsum("ij,jk,ik->i", q, cov, q))
    # r1 alone cannot answer a generic query (rank 4 < 6); combined it can
    assert not r1.can_answer(q).any() and both.can_answer(q).all()
    # combining never increases a variance
    inside1 = rng.normal(size=(2, 4)) @ a1
    assert np.all(both.variance(inside1) <= r1.variance(inside1) * (1 + 1e-9))


def test_validation() -> None:
    s = identity_strategy(3)
    with pytest.raises(ValueError):
        measure(s, np.ones(3), 0.0, SeededSampler(0))
    with pytest.raises(ValueError):
        measure(s, np.ones(3), float("nan"), SeededSampler(0))
    with pytest.raises(ValueError):
        measure(s, np.ones(4), 1.0, SeededSampler(0))
    with pytest.raises(ValueError):
        measure(s, np.ones(3), 1.0, SeededSampler(0), kind="cauchy")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Release(matrix=np.eye(2), y=np.zeros(2), noise_variance=np.array([1.0, 0.0]))
    rel = measure(s, np.ones(3), 1.0, SeededSampler(0))
    with pytest.raises(ValueError):
        rel.estimate(np.ones((1, 4)))
    with pytest.raises(ValueError):
        combine([rel, measure(identity_strategy(4), np.ones(4), 1.0, SeededSampler(0))])
    with pytest.raises(ValueError):
        rel.y[0] = 1.0


@settings(max_examples=40, deadline=None)
@given(
    arrays(np.int64, st.tuples(st.integers(1, 5), st.integers(2, 7)), elements=st.integers(-2, 2)),
    st.integers(0, 2**31 - 1),
)
def test_row_space_property(a_int: np.ndarray, seed: int) -> None:
    a = a_int.astype(np.float64)
    if not np.any(a):
        return
    rng = np.random.default_rng(seed)
    n = a.shape[1]
    x = rng.integers(0, 50, n).astype(np.float64)
    rel = Release(matrix=a, y=a @ x, noise_variance=np.full(a.shape[0], 1.0))  # noiseless
    inside = rng.normal(size=(3, a.shape[0])) @ a
    assert rel.can_answer(inside).all()
    ans, var = rel.estimate(inside)
    assert np.allclose(ans, inside @ x, atol=1e-7 * (1 + np.abs(inside) @ x))
    # the variance is q (A^T A)^+ q^T for unit noise
    assert np.allclose(var, np.einsum("ij,jk,ik->i", inside, np.linalg.pinv(a.T @ a), inside))
    # a direction orthogonal to the row space is refused (when the row space is not everything)
    _, sv, vt = np.linalg.svd(a)
    rank = int(np.sum(sv > 1e-9 * sv[0]))
    if rank < n:
        out = inside[0] + vt[rank]
        assert not rel.can_answer(out)[0]


# --------------------------------------------------------------------------------------------
# large views (docs/mm.md §4b)


def _dense_twin(rel: Release) -> Release:
    """The same release factorised on the exact dense path (LARGE_DOMAIN raised)."""
    import dp.release as dr

    old = dr.LARGE_DOMAIN
    dr.LARGE_DOMAIN = 10**9
    try:
        return Release(matrix=rel.matrix, y=rel.y, noise_variance=rel.noise_variance)
    finally:
        dr.LARGE_DOMAIN = old


@pytest.mark.parametrize("merged", [False, True])
def test_large_domain_path_matches_the_dense_path(merged: bool) -> None:
    rng = np.random.default_rng(3)
    n_r, p = 5000, 25
    a_r = rng.standard_normal((p, n_r))
    groups = np.concatenate([np.arange(n_r), rng.integers(0, n_r, 4000)]) if merged else None
    a = a_r[:, groups] if groups is not None else a_r
    x = rng.poisson(3.0, a.shape[1]).astype(float)
    rel = Release(matrix=a, y=a @ x, noise_variance=rng.uniform(0.5, 2.0, p))
    assert rel._factor.large and rel._factor.merged == merged
    twin = _dense_twin(rel)
    assert not twin._factor.large
    inside = rng.standard_normal((6, p)) @ a
    inside[3] = 0.0
    inside[4, :] = inside[4, :] * (np.abs(inside[4]) > 1.0)  # not in the row space
    outside = inside[:3].copy()
    outside[0, 10] += 1e-4 * np.linalg.norm(outside[0])
    outside[1, 4999] += 1e-6 * np.linalg.norm(outside[1])
    outside[2] = rng.standard_normal(a.shape[1])
    queries = np.vstack([inside, outside])
    for q in (queries, sp.csr_matrix(queries)):
        ans, var, ok = rel.solve(q)
        ans2, var2, ok2 = twin.solve(queries)
        assert ok.tolist() == ok2.tolist() == [True] * 4 + [False, True] + [False] * 3
        assert np.allclose(ans[ok], ans2[ok], rtol=1e-9, atol=1e-9 * np.max(np.abs(ans2)))
        assert np.allclose(var[ok], var2[ok], rtol=1e-9, atol=1e-12)
    # noise-free measurement: the estimates are exactly the true answers (unbiased)
    good = inside[[0, 1, 2, 3, 5]]
    assert np.allclose(rel.estimate(good)[0], good @ x, rtol=1e-9, atol=1e-7)
    with pytest.raises(NotInRowSpaceError):
        rel.estimate(outside[:1])


def test_large_view_with_few_patterns_detects_split_groups_exactly() -> None:
    from dp.strategy import lift

    rng = np.random.default_rng(5)
    n, n_r, m = 20_000, 300, 40
    w_r = rng.integers(0, 3, size=(m, n_r)).astype(float) * (rng.random((m, n_r)) < 0.3)
    w_r[0] = 1.0
    groups = rng.integers(-1, n_r, size=n)
    groups[:n_r] = np.arange(n_r)
    w = lift(w_r, groups)
    s = optimize_strategy(w)
    x = rng.poisson(2.0, n).astype(float)
    rel = measure(s, x, 1e-9, SeededSampler(0))
    assert rel.can_answer(w).all()
    assert np.allclose(rel.estimate(w)[0], w @ x, rtol=1e-9, atol=1e-6)
    # split one merged group (cells 0 and the other cells of group 0) by a tiny amount
    mates = np.flatnonzero(groups == groups[0])
    assert mates.size >= 2
    split = w[[0, 0, 0]].copy()  # row 0 is the total: 1 on every touched cell
    split[0, mates[0]] += 1e-3  # relative residual ~ 1e-3 / sqrt(n) ~ 7e-6 > ROW_SPACE_RTOL
    split[1, mates[1:]] = 0.0
    split[2, np.flatnonzero(groups < 0)[:1]] = 1.0  # an untouched cell
    assert rel.can_answer(split).tolist() == [False, False, False]
    assert rel.can_answer(sp.csr_matrix(split)).tolist() == [False, False, False]
    # unbiased (noise-free estimates above are exact) with the GLS variance sigma^2 ||q A^+||^2
    sigma = 2.0
    q = w[[0, 5, 9]]
    var = measure(s, x, sigma, SeededSampler(0)).variance(q)
    assert np.allclose(var, sigma**2 * np.sum((q @ np.linalg.pinv(s.matrix)) ** 2, axis=1))


def test_an_svd_failure_falls_back_and_answers_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """NumPy's dgesdd raised "SVD did not converge" on a well-conditioned 690 x 690 whitened
    strategy of a real log's release (``lapras epoch start`` then failed); the factorisation
    then takes SciPy's routines (dp.strategy.svd) and answers as before, to rounding."""
    import dp.strategy as strategy

    w = np.vstack([np.tril(np.ones((8, 8))), np.eye(8)])
    a = optimize_strategy(w).matrix
    x = np.arange(8, dtype=np.float64)
    noise = SeededSampler(3).gaussian(float(np.sqrt(2.0)), a.shape[0])
    want = Release(matrix=a, y=a @ x + noise, noise_variance=np.full(a.shape[0], 2.0)).solve(w)
    calls = {"numpy": 0}

    def flaky(m: np.ndarray, *args: object, **kw: object) -> object:
        calls["numpy"] += 1
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(strategy.np.linalg, "svd", flaky)
    got = Release(matrix=a, y=a @ x + noise, noise_variance=np.full(a.shape[0], 2.0)).solve(w)
    assert calls["numpy"] >= 1
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9)
    assert got[2].all() and want[2].all()
