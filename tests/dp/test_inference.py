"""Inference over every release of an epoch (dp.inference): least squares on the atoms of
the measurements, across marginals, past the joint release's 2^17 cells (issue 39, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

from dp import inference as inf_mod
from dp.domain import Domain, QueryBatch, lifted_matrix
from dp.engine import DecisionKind, EngineConfig, answer, decide, start
from dp.inference import Inference, Measurement
from dp.marginals import JOINT_MAX_CELLS
from dp.noise import SeededSampler
from dp.release import Release, combine

RACE = Domain.of(("race", 5))
SEX = Domain.of(("sex", 2))
BOTH = Domain.of(("race", 5), ("sex", 2))


def _identity(dom: Domain) -> QueryBatch:
    return QueryBatch.from_dense(dom, np.eye(dom.size))


def _measured(key: int, batch: QueryBatch, x: np.ndarray, var: float, rng: np.random.Generator):
    y = batch.answer(x) + rng.normal(0.0, np.sqrt(var), batch.num_queries)
    return Measurement.of_batch(key, batch, y, var)


def test_one_marginal_is_the_generalised_least_squares_of_its_releases() -> None:
    """Over one marginal the estimate is exactly dp.release's GLS of the stacked releases."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, 10).astype(float)
    qs = [QueryBatch.from_dense(BOTH, rng.integers(0, 2, (3, 10)).astype(float)) for _ in range(4)]
    inf = Inference()
    rels = []
    for i, q in enumerate(qs):
        m = _measured(i, q, x, 4.0 + i, rng)
        inf = inf.add(m)
        rels.append(Release(matrix=q.dense(), y=m.y, noise_variance=m.variance))
    ask = QueryBatch.from_dense(BOTH, qs[0].dense()[:2] + qs[1].dense()[:2])
    got = inf.estimate(ask)
    assert got is not None
    want_ans, want_var = combine(rels).estimate(ask.dense())
    inf_mod.NON_NEGATIVE, saved = False, inf_mod.NON_NEGATIVE
    try:
        plain = Inference(inf.measurements).estimate(ask)
    finally:
        inf_mod.NON_NEGATIVE = saved
    assert plain is not None
    assert plain[0] == pytest.approx(want_ans, rel=1e-9, abs=1e-9)
    assert got[1] == pytest.approx(want_var, rel=1e-9)


def test_across_marginals_the_shared_counts_combine_and_the_rest_is_refused() -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(10, 60, 10).astype(float)  # over race x sex
    by_race = QueryBatch.from_dense(BOTH, np.kron(np.eye(5), np.ones((1, 2))))
    by_sex = QueryBatch.from_dense(BOTH, np.kron(np.ones((1, 5)), np.eye(2)))
    inf = Inference().add(_measured(0, by_race, x, 9.0, rng)).add(_measured(1, by_sex, x, 4.0, rng))
    total = QueryBatch.from_dense(RACE, [[1, 1, 1, 1, 1]])
    got = inf.estimate(total)
    assert got is not None
    # the total measured twice: 5 * 9 from the races, 2 * 4 from the sexes, combined
    assert got[1][0] == pytest.approx(1.0 / (1.0 / 45.0 + 1.0 / 8.0), rel=1e-9)
    # a race count plus a sex count is answerable; one cell of race x sex is not
    mixed = QueryBatch.from_dense(BOTH, [by_race.dense()[0] + by_sex.dense()[1]])
    assert inf.estimate(mixed) is not None
    assert inf.estimate(QueryBatch.from_dense(BOTH, [np.eye(10)[3]])) is None
    # the variance is that of the matrices and noise scales alone: the data does not enter
    other = Inference(
        [
            Measurement.of_batch(0, by_race, np.zeros(5), 9.0),
            Measurement.of_batch(1, by_sex, np.zeros(2), 4.0),
        ]
    ).estimate(total)
    assert other is not None and other[1] == pytest.approx(got[1], rel=1e-12)


def test_past_the_joint_release_limit_unbiased_with_its_stated_variance() -> None:
    """A region of 2^19 cells (well past the joint release's 2^17): three measurements over
    three two-attribute marginals, which distinguish 512 atoms of it; a count over ``a`` is
    answered from all three. Its variance is the least-squares variance over the same
    measurements written on the 512 atoms directly (dp.release), and from noise-free
    measurements it is the truth (a linear unbiased estimator)."""
    dom = Domain.of(("a", 8), ("b", 16), ("c", 64), ("d", 64))
    assert dom.size == 1 << 19 and dom.size > JOINT_MAX_CELLS
    ab, cd, ac = (
        Domain.of(*p)
        for p in ((("a", 8), ("b", 16)), (("c", 64), ("d", 64)), (("a", 8), ("c", 64)))
    )
    half = (np.arange(64) >= 32).astype(int)
    quad = np.array(
        [
            [float(half[c] == i and half[d] == j) for c in range(64) for d in range(64)]
            for i in (0, 1)
            for j in (0, 1)
        ]
    )
    by_a_half = np.array(
        [
            [float(a == i and half[c] == j) for a in range(8) for c in range(64)]
            for i in range(8)
            for j in (0, 1)
        ]
    )
    margs = [
        (QueryBatch.from_dense(ab, np.eye(128)), 16.0),
        (QueryBatch.from_dense(cd, quad), 25.0),
        (QueryBatch.from_dense(ac, by_a_half), 9.0),
    ]
    rng = np.random.default_rng(2)
    x = rng.poisson(0.2, dom.size).astype(float)
    exact = [b.answer(_marginal(x, dom, b.domain)) for b, _ in margs]
    ask = QueryBatch.from_dense(Domain.of(("a", 8)), [[1, 1, 0, 0, 0, 0, 0, 0]])
    truth = float(ask.answer(_marginal(x, dom, ask.domain))[0])
    # the same least squares written over (a, b, c-half, d-half) directly: 512 cells
    coarse = []
    for (b, var), e in zip(margs, exact, strict=True):
        rows = []
        for row in b.dense():
            w = np.zeros((8, 16, 2, 2))
            for a in range(8):
                for bb in range(16):
                    for i in (0, 1):
                        for j in (0, 1):
                            c, d = 32 * i, 32 * j  # a representative cell of the atom
                            cell = {"a": a, "b": bb, "c": c, "d": d}
                            w[a, bb, i, j] = row[_index(b.domain, cell)]
            rows.append(w.reshape(-1))
        coarse.append(Release(matrix=np.array(rows), y=e, noise_variance=np.full(len(rows), var)))
    q = np.zeros((8, 16, 2, 2))
    q[:2] = 1.0
    _, want = combine(coarse).estimate(q.reshape(1, -1))
    # noise-free measurements: a linear unbiased estimator gives the truth exactly
    inf = Inference()
    for i, ((b, var), e) in enumerate(zip(margs, exact, strict=True)):
        inf = inf.add(Measurement.of_batch(i, b, e, var))
    region, used = inf._region(ask.domain)
    assert region.size > JOINT_MAX_CELLS and len(used) == 3
    got = inf.estimate(ask)
    assert got is not None
    assert float(got[0][0]) == pytest.approx(truth, rel=1e-9)
    assert float(got[1][0]) == pytest.approx(float(want[0]), rel=1e-9)
    assert float(got[1][0]) < 32 * 16.0  # better than (a, b) alone


def _index(dom: Domain, cell: dict[str, int]) -> int:
    return int(np.ravel_multi_index([cell[n] for n in dom.names], dom.shape))


def _marginal(x: np.ndarray, dom: Domain, sub: Domain) -> np.ndarray:
    axes = tuple(i for i, n in enumerate(dom.names) if n not in sub.names)
    m = x.reshape(dom.shape).sum(axis=axes)
    order = [n for n in dom.names if n in sub.names]
    return np.transpose(m, [order.index(n) for n in sub.names]).reshape(-1)


def test_answers_of_one_estimate_are_consistent_and_non_negative() -> None:
    """Small, noisy counts: the non-negative estimate never gives a filtered count above its
    group's count, nor a negative count."""
    x = np.array([0.0, 3.0, 1.0, 0.0, 0.0, 2.0, 0.0, 1.0, 0.0, 0.0])
    rng = np.random.default_rng(3)
    ident = _identity(BOTH)
    inf = Inference().add(_measured(0, ident, x, 25.0, rng))
    group = QueryBatch.from_dense(RACE, np.eye(5))
    cells = inf.estimate(ident)
    groups = inf.estimate(group)
    assert cells is not None and groups is not None
    assert np.all(cells[0] >= -1e-9)
    for r in range(5):
        for s in range(2):
            assert cells[0][2 * r + s] <= groups[0][r] + 1e-9


def test_the_engine_answers_from_every_release() -> None:
    """Default mode: P over race, one fresh release over sex; then the total is answered from
    both (no single source holds it at that variance), free; the matrices of a fresh release
    over a big marginal with few weights are kept for it."""
    dom = Domain.of(("race", 5), ("sex", 2), ("age", 73))
    rng = np.random.default_rng(4)
    x = rng.integers(0, 20, dom.size).astype(float)
    p = QueryBatch.from_dense(RACE, np.eye(5))
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=50, expected_fresh=5)
    state, _ = start(cfg, dom, p, x, SeededSampler(1))
    state, d, _ = answer(state, QueryBatch.from_dense(SEX, np.eye(2)), x, SeededSampler(2))
    assert d.kind is DecisionKind.FRESH and len(state.inference) == 2
    total = QueryBatch.from_dense(SEX, [[1, 1]])
    got = state.inference.estimate(total)
    assert got is not None
    alone = [s.inference.estimate(total) for s in (start(cfg, dom, p, x, SeededSampler(1))[0],)]
    assert alone[0] is not None and got[1][0] < alone[0][1][0]
    d = decide(state, total)
    assert d.kind is DecisionKind.STORED and d.std_errors is not None
    assert d.std_errors[0] == pytest.approx(np.sqrt(got[1][0]), rel=1e-9)
    # a fresh release over a big marginal (73 x 5 x 2 cells) with few weights is kept
    one_age = QueryBatch(
        dom, lifted_matrix(QueryBatch.from_dense(Domain.of(("age", 73)), [np.eye(73)[40]]), dom)
    )
    state, d, _ = answer(state, one_age, x, SeededSampler(3))
    assert d.kind is DecisionKind.FRESH and len(state.inference) == 3


def test_a_request_is_met_at_the_least_charge_with_every_release() -> None:
    """The total, known from a race release and a sex release; asked more precisely than
    that: one fresh release of it, charged less than a fresh answer alone would need, since
    its answer is the least squares over all three (as the decision promised)."""
    from dp.accuracy import least_charge

    dom = Domain.of(("race", 5), ("sex", 2))
    x = np.random.default_rng(5).integers(0, 40, dom.size).astype(float)
    cfg = EngineConfig(epsilon=1.0, delta=1e-3, stream_length=50, expected_fresh=5)
    state, _ = start(cfg, dom, QueryBatch.from_dense(RACE, np.eye(5)), x, SeededSampler(1))
    state, _, _ = answer(state, QueryBatch.from_dense(SEX, np.eye(2)), x, SeededSampler(2))
    total = QueryBatch.from_dense(SEX, [[1, 1]])
    known = state.inference.estimate(total)
    assert known is not None
    asked = 0.6 * float(np.sqrt(known[1][0]))
    d = decide(state, total, max_error=asked)
    assert d.kind is DecisionKind.FRESH and d.charge is not None
    alone = least_charge(
        state.accountant, variance=asked**2, sensitivity=1.0, limit=state.accountant.total
    )
    assert alone is not None and d.charge.amount < 0.9 * alone
    after, _, r = answer(state, total, x, SeededSampler(3), max_error=asked)
    assert r.std_errors[0] <= asked * (1 + 1e-9)
    assert after.accountant.spent == pytest.approx(state.accountant.spent + d.charge.amount)
