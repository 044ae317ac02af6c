"""MLDP (model publishing): sensitivity, noise at the claimed scale, post-processing, accuracy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from mechanism_helpers import SpySampler, histogram, ranges
from scipy import stats

from dp.calibration import agm_sigma
from dp.domain import Domain, QueryBatch
from dp.errors import PrivacyParameterError
from dp.mldp import (
    MLDPModel,
    choose_training_set,
    column_l1,
    column_l2,
    disjoint_intervals,
    expected_error,
    greedy_training_set,
    hierarchical_intervals,
)
from dp.noise import SeededSampler

# -- parameter validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0},
        {"epsilon": -1.0},
        {"epsilon": math.inf},
        {"epsilon": math.nan},
        {"epsilon": True},
        {"epsilon": "1"},
        {"delta": -0.1},
        {"delta": 1.0},
        {"ridge": -1.0},
        {"ridge": math.nan},
        {"branching": 1},
        {"max_column_l1": 0.0},
        {"max_correlation": 1.5},
    ],
)
def test_invalid_parameters_are_refused_before_the_data_is_read(kwargs: dict[str, Any]) -> None:
    spy = SpySampler()
    poisoned = np.full(8, np.nan)  # reading the data first would raise ValueError instead
    args: dict[str, Any] = {"epsilon": 1.0, **kwargs}
    with pytest.raises(PrivacyParameterError) as info:
        MLDPModel.fit(poisoned, sampler=spy, **args)
    assert info.value.sqlstate == "22023"
    assert spy.calls == []


def test_data_errors_are_not_privacy_parameter_errors_and_leak_nothing() -> None:
    x = np.array([1.0, 2.0, np.nan, 4.0])
    with pytest.raises(ValueError) as info:
        MLDPModel.fit(x, epsilon=1.0, sampler=SeededSampler(0))
    assert "nan" not in str(info.value).lower()


# -- training sets and sensitivities --------------------------------------------------------------


@pytest.mark.parametrize(("n", "b"), [(16, 2), (64, 4), (27, 3), (100, 2), (73, 16), (1, 2)])
def test_hierarchy_covers_each_cell_once_per_level(n: int, b: int) -> None:
    q = hierarchical_intervals(n, b)
    levels = 1 + math.ceil(math.log(n, b) - 1e-12) if n > 1 else 1
    counts = np.asarray(q.sum(axis=0)).ravel()
    assert counts.max() == column_l1(q) <= levels
    assert counts.min() >= 1
    assert column_l2(q) == pytest.approx(math.sqrt(column_l1(q)))
    if n == b ** round(math.log(n, b)):
        assert np.all(counts == levels)  # complete tree: every cell on every level
    # nested intervals: every row is a contiguous block
    for row in q.toarray():
        idx = np.flatnonzero(row)
        assert np.all(np.diff(idx) == 1)


def test_disjoint_intervals_have_sensitivity_one_and_cover_everything() -> None:
    q = disjoint_intervals(10, 3)
    assert q.shape == (4, 10)
    assert column_l1(q) == 1.0
    assert np.all(np.asarray(q.sum(axis=0)).ravel() == 1)


@pytest.mark.parametrize("cap", [1.0, 3.0, 8.0])
def test_greedy_selection_respects_the_cap_and_is_deterministic(cap: float) -> None:
    w = ranges(40, 300, seed=1)
    q1 = greedy_training_set(w, max_column_l1=cap)
    q2 = greedy_training_set(w, max_column_l1=cap)
    assert column_l1(q1) <= cap + 1e-9
    assert (q1 != q2).nnz == 0
    assert q1.shape[0] == np.linalg.matrix_rank(q1.toarray())  # no redundant row
    picked = {tuple(r) for r in q1.toarray()}
    assert picked <= {tuple(r) for r in w}  # a subset of the candidates


def test_greedy_with_correlation_limit_keeps_rows_nearly_orthogonal() -> None:
    w = ranges(30, 200, seed=2)
    q = greedy_training_set(w, max_column_l1=6.0, max_correlation=0.3).toarray()
    unit = q / np.linalg.norm(q, axis=1, keepdims=True)
    gram = np.abs(unit @ unit.T - np.eye(q.shape[0]))
    assert gram.max() <= 0.3 + 1e-12


def test_model_records_the_sensitivity_of_the_training_set_it_used() -> None:
    x = histogram(32, 1000, seed=0)
    for training in ("identity", "hierarchical", "auto"):
        m = MLDPModel.fit(x, epsilon=0.5, sampler=SeededSampler(0), training=training)
        assert m.sensitivity == column_l1(m.training)
        assert m.noise == "laplace"
        assert m.noise_scale == pytest.approx(m.sensitivity / 0.5, rel=1e-8)
        assert m.noise_scale >= m.sensitivity / 0.5
    g = MLDPModel.fit(x, epsilon=0.5, sampler=SeededSampler(0), delta=1e-5, branching=4)
    assert g.noise == "gaussian"
    assert g.sensitivity == column_l2(g.training)
    assert g.noise_scale == pytest.approx(agm_sigma(0.5, 1e-5, g.sensitivity))


# -- noise at the claimed scale -------------------------------------------------------------------


def test_laplace_noise_on_the_training_answers_has_the_claimed_scale() -> None:
    n, eps = 4096, 0.7
    x = histogram(n, 50_000, seed=3)
    m = MLDPModel.fit(x, epsilon=eps, sampler=SeededSampler(11), training="hierarchical")
    noise = m.noisy_answers - m.training @ x
    assert noise.shape[0] == 2 * n - 1
    b = column_l1(m.training) / eps
    assert column_l1(m.training) == 13.0
    assert m.noise_scale == pytest.approx(b, rel=1e-8)
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > 1e-3
    for wrong in (0.8 * b, 1.25 * b):
        assert stats.kstest(noise, stats.laplace(scale=wrong).cdf).pvalue < 1e-3
    assert stats.kstest(noise, stats.norm(scale=b * math.sqrt(2)).cdf).pvalue < 1e-3


def test_gaussian_noise_on_the_training_answers_has_the_claimed_scale() -> None:
    n, eps, delta = 4096, 1.0, 1e-6
    x = histogram(n, 50_000, seed=4)
    m = MLDPModel.fit(
        x, epsilon=eps, delta=delta, sampler=SeededSampler(12), training="hierarchical"
    )
    noise = m.noisy_answers - m.training @ x
    sigma = agm_sigma(eps, delta, column_l2(m.training))
    assert stats.kstest(noise, stats.norm(scale=sigma).cdf).pvalue > 1e-3
    for wrong in (0.85 * sigma, 1.15 * sigma):
        assert stats.kstest(noise, stats.norm(scale=wrong).cdf).pvalue < 1e-3


# -- post-processing ------------------------------------------------------------------------------


def test_the_model_is_a_deterministic_function_of_the_noisy_answers() -> None:
    x = histogram(48, 5000, seed=5)
    w = ranges(48, 200, seed=6)
    for options in ({}, {"ridge": 2.0}, {"nonnegative": True}, {"training": "hierarchical"}):
        spy = SpySampler(7)
        m = MLDPModel.fit(x, epsilon=1.0, sampler=spy, **options)
        assert len(spy.calls) == 1  # one release, once
        first = m.answer(w)
        again = m.answer(w)
        assert len(spy.calls) == 1  # answering draws no noise
        refit = MLDPModel.from_noisy_answers(
            m.training,
            m.noisy_answers,
            epsilon=m.epsilon,
            noise_scale=m.noise_scale,
            sensitivity=m.sensitivity,
            ridge=m.ridge,
            nonnegative=m.nonnegative,
        )
        assert np.array_equal(refit.theta, m.theta)
        assert np.array_equal(first, again)
        assert np.array_equal(refit.answer(w), first)
        # a different release gives a different model: the test can fail
        other = MLDPModel.from_noisy_answers(
            m.training,
            m.noisy_answers + 1.0,
            epsilon=m.epsilon,
            noise_scale=m.noise_scale,
            sensitivity=m.sensitivity,
            ridge=m.ridge,
            nonnegative=m.nonnegative,
        )
        assert not np.array_equal(other.answer(w), first)


def test_published_arrays_are_read_only_and_the_model_frozen() -> None:
    m = MLDPModel.fit(histogram(16, 100, 0), epsilon=1.0, sampler=SeededSampler(0))
    with pytest.raises(ValueError):
        m.theta[0] = 1.0
    with pytest.raises(ValueError):
        m.noisy_answers[0] = 1.0
    with pytest.raises(AttributeError):
        m.epsilon = 2.0  # type: ignore[misc]


def test_answers_accept_query_batches_sparse_dense_and_single_rows() -> None:
    x = histogram(6, 600, seed=8)
    m = MLDPModel.fit(x, epsilon=1e9, sampler=SeededSampler(0))
    d = Domain.of(("a", 3), ("b", 2))
    rows = [[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1]]
    batch = QueryBatch.from_dense(d, rows)
    expect = np.asarray(rows, dtype=float) @ x
    np.testing.assert_allclose(m.answer(batch), expect, atol=1e-5)
    np.testing.assert_allclose(m.answer(sp.csr_array(np.asarray(rows, float))), expect, atol=1e-5)
    np.testing.assert_allclose(m.answer(np.asarray(rows[0], float)), expect[:1], atol=1e-5)
    with pytest.raises(ValueError):
        m.answer(np.ones((2, 5)))


@pytest.mark.parametrize("training", ["identity", "hierarchical", "auto", "greedy"])
def test_without_noise_the_model_answers_exactly(training: str) -> None:
    x = histogram(20, 2000, seed=9)
    w = ranges(20, 100, seed=10)
    m = MLDPModel.fit(x, epsilon=1e12, sampler=SeededSampler(0), training=training, candidates=w)
    np.testing.assert_allclose(m.answer(w), w @ x, atol=1e-4)


def test_ridge_shrinks_and_nonnegativity_is_enforced() -> None:
    x = histogram(32, 200, seed=11)
    plain = MLDPModel.fit(x, epsilon=0.2, sampler=SeededSampler(1))
    ridge = MLDPModel.fit(x, epsilon=0.2, sampler=SeededSampler(1), ridge=50.0)
    nonneg = MLDPModel.fit(x, epsilon=0.2, sampler=SeededSampler(1), nonnegative=True)
    assert np.linalg.norm(ridge.theta) < np.linalg.norm(plain.theta)
    assert np.all(nonneg.theta >= 0)
    assert np.any(plain.theta < 0)  # the constraint did something


# -- expected error and the automatic choice ------------------------------------------------------


def test_expected_error_matches_monte_carlo() -> None:
    n, eps = 12, 1.0
    x = histogram(n, 3000, seed=12)
    w = ranges(n, 60, seed=13)
    q = hierarchical_intervals(n, 2)
    predicted = expected_error(q, w, epsilon=eps)
    sampler = SeededSampler(14)
    sq = [
        np.mean((MLDPModel.fit(x, epsilon=eps, sampler=sampler, training=q).answer(w) - w @ x) ** 2)
        for _ in range(300)
    ]
    assert np.mean(sq) == pytest.approx(predicted, rel=0.1)
    # per-query variance formula agrees with the aggregate
    m = MLDPModel.fit(x, epsilon=eps, sampler=sampler, training=q)
    assert np.mean(m.expected_variance(w)) == pytest.approx(predicted, rel=1e-9)


def test_expected_error_is_infinite_outside_the_row_space() -> None:
    q = disjoint_intervals(8, 2)  # pairs: a single cell is not determined
    assert expected_error(q, np.eye(8)[:1], epsilon=1.0) == math.inf
    assert math.isfinite(expected_error(q, np.ones((1, 8)), epsilon=1.0))


def test_auto_choice_is_the_least_expected_error_option() -> None:
    n = 40
    w = ranges(n, 200, seed=15)
    name, q = choose_training_set(n, epsilon=1.0, candidates=w)
    chosen = expected_error(q, w, epsilon=1.0)
    for other in (
        disjoint_intervals(n),
        hierarchical_intervals(n, 2),
        hierarchical_intervals(n, 4),
    ):
        assert chosen <= expected_error(other, w, epsilon=1.0) + 1e-9
    assert name in {"identity", "greedy"} or name.startswith("hierarchical-")


# -- accuracy sanity ------------------------------------------------------------------------------


def test_error_decreases_with_epsilon_and_beats_independent_laplace() -> None:
    n, m = 64, 1000
    x = histogram(n, 20_000, seed=16)
    w = ranges(n, m, seed=17)
    truth = w @ x
    mae: dict[float, float] = {}
    _, q = choose_training_set(n, epsilon=1.0)  # what "auto" picks; chosen once for speed
    for eps in (0.1, 1.0):
        errs = [
            np.mean(
                np.abs(
                    MLDPModel.fit(x, epsilon=eps, sampler=SeededSampler(s), training=q).answer(w)
                    - truth
                )
            )
            for s in range(5)
        ]
        mae[eps] = float(np.mean(errs))
        # each range query alone at eps/m: Laplace(m/eps), expected |error| = m/eps
        independent = np.mean(np.abs(SeededSampler(99).laplace(m / eps, m)))
        assert mae[eps] < 0.05 * independent
    assert mae[1.0] < 0.3 * mae[0.1]


def test_duplicate_sparse_entries_are_added_before_the_sensitivity_is_read() -> None:
    q = sp.csr_array(
        (np.array([0.5, 0.5, 1.0]), np.array([0, 0, 1]), np.array([0, 2, 3])), shape=(2, 2)
    )
    x = np.array([1.0, 2.0])
    g = MLDPModel.fit(x, epsilon=1.0, delta=1e-5, sampler=SeededSampler(0), training=q)
    assert g.sensitivity == 1.0  # sqrt((0.5 + 0.5)^2), not sqrt(0.5^2 + 0.5^2)
    assert q.data.tolist() == [0.5, 0.5, 1.0]  # the caller's matrix is untouched
