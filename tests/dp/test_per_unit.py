"""dp.per_unit: the histogram of a question about units against a brute-force reading of its
definition (per unit and group, PostgreSQL's aggregates, clamped), on random units and
questions; and its neighbours: removing one unit changes the histogram by at most one row
per group of that unit, within the sensitivities the module states."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

from dp.domain import Domain
from dp.per_unit import UnitAggregate, UnitQuestion, UnitsDomain, within
from dp.pin import Pin, UnitRows

BASE = Domain.of(("a", 4), ("b", 3))
GROUP_SHAPE = (4,)  # the group part: attribute a


def _question(rng: np.random.Generator) -> UnitQuestion:
    n = BASE.size
    # groups: by a (a's cells 0..3 -> 2 groups), some cells excluded by a WHERE
    by_a = np.array([0, 0, 1, 1])
    groups = np.repeat(by_a, 3)
    groups[rng.random(n) < 0.2] = -1
    places = np.array([0, 2])  # each group at its first cell of a
    aggs = (
        UnitAggregate.counting(rng.random(n) < 0.8, lo=0, hi=6),
        UnitAggregate(
            kind="sum",
            counted=rng.random(n) < 0.7,
            weights=rng.integers(-2, 4, n).astype(float),
            codes=np.zeros(n, dtype=np.int64),
            values=(),
            lo=-5,
            hi=9,
            nullable=True,
        ),
        UnitAggregate(
            kind="max",
            counted=rng.random(n) < 0.6,
            weights=np.zeros(n),
            codes=rng.integers(0, 3, n),
            values=(10, 11, 12),
            lo=10,
            hi=12,
            nullable=True,
        ),
        UnitAggregate(
            kind="min",
            counted=rng.random(n) < 0.6,
            weights=np.zeros(n),
            codes=rng.integers(0, 3, n),
            values=(10, 11, 12),
            lo=10,
            hi=12,
            nullable=True,
        ),
        UnitAggregate(
            kind="distinct",
            counted=rng.random(n) < 0.9,
            weights=np.zeros(n),
            codes=rng.integers(0, 3, n),
            values=(0, 1, 2),
            lo=0,
            hi=2,
            nullable=False,
        ),
    )
    return UnitQuestion(
        base=BASE, groups=groups, places=places, group_shape=GROUP_SHAPE, aggregates=aggs
    )


def _rows(rng: np.random.Generator, units: int) -> UnitRows:
    unit, a, b, n = [], [], [], []
    for u in range(units):
        for cell in rng.choice(BASE.size, size=rng.integers(1, 6), replace=False):
            unit.append(u)
            a.append(cell // 3)
            b.append(cell % 3)
            n.append(float(rng.integers(1, 4)))
    return UnitRows(units, np.array(unit), (np.array(a), np.array(b)), np.array(n))


def _brute(q: UnitQuestion, rows: UnitRows, positions: tuple[int, ...]) -> np.ndarray:
    """The definition, unit by unit and group by group."""
    entries: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
    for u, a, b, n in zip(rows.unit, *rows.columns, rows.counts, strict=True):
        m = int(a) * 3 + int(b)
        if n > 0 and q.groups[m] >= 0:
            entries[(int(u), int(q.groups[m]))].append((m, float(n)))
    full = np.zeros(q.shape)
    for (_, g), cells in entries.items():
        coord = [int(q.places[g])]
        for agg in q.aggregates:
            on = [(m, n) for m, n in cells if agg.counted[m]]
            null = agg.hi - agg.lo + 1
            if agg.kind == "count":
                v: int | None = int(sum(n for _, n in on))
            elif agg.kind == "sum":
                v = int(sum(n * agg.weights[m] for m, n in on)) if on else None
            elif agg.kind == "distinct":
                v = len({int(agg.codes[m]) for m, _ in on})
            else:
                vals = [agg.values[int(agg.codes[m])] for m, _ in on]
                v = (min(vals) if agg.kind == "min" else max(vals)) if vals else None
            coord.append(null if v is None else min(max(v, agg.lo), agg.hi) - agg.lo)
        full[tuple(coord)] += 1
    drop = tuple(i for i in range(full.ndim) if i not in positions)
    return np.asarray(full.sum(axis=drop) if drop else full).reshape(-1)


def _domain(q: UnitQuestion, positions: tuple[int, ...]) -> UnitsDomain:
    names = ("a", "n", "s", "hi", "lo", "d")
    return UnitsDomain.over(q, tuple((names[p], q.shape[p]) for p in positions), positions)


MARGINALS = [(), (0,), (1,), (0, 1), (2, 3), (0, 4, 5), (0, 1, 2, 3, 4, 5)]


@pytest.mark.parametrize("seed", range(6))
def test_the_histogram_is_the_definition_per_unit_and_group(seed: int) -> None:
    rng = np.random.default_rng(seed)
    q = _question(rng)
    rows = _rows(rng, 30)
    pin = Pin(BASE, (np.zeros(1, np.int64), np.zeros(1, np.int64)), np.ones(1), rows)
    for positions in MARGINALS:
        d = _domain(q, positions)
        assert within(BASE, d) and not BASE.covers(d)
        got = pin.marginal(d)
        want = _brute(q, rows, positions)
        assert got.tolist() == want.tolist(), positions
        assert Pin.from_bytes(BASE, pin.to_bytes()).marginal(d).tolist() == want.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_removing_one_unit_stays_within_the_stated_sensitivities(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    q = _question(rng)
    rows = _rows(rng, 12)
    keep = rows.unit < 11
    fewer = UnitRows(11, rows.unit[keep], tuple(c[keep] for c in rows.columns), rows.counts[keep])
    for positions in MARGINALS:
        d = _domain(q, positions)
        diff = _brute(q, rows, positions) - _brute(q, fewer, positions)
        assert np.all(diff >= 0) and diff.sum() <= q.num_groups
        for _ in range(5):  # random batches over the marginal
            w = rng.normal(size=(4, d.size))
            l2, l1 = d.sensitivities(w)
            assert np.linalg.norm(w @ diff) <= l2 + 1e-9
            assert np.abs(w @ diff).sum() <= l1 + 1e-9
    # one group per unit: every unit is one row, a histogram over units has sensitivity 1
    one = UnitQuestion(
        base=BASE,
        groups=np.zeros(BASE.size, dtype=np.int64),
        places=np.zeros(1, dtype=np.int64),
        group_shape=(),
        aggregates=(UnitAggregate.counting(np.ones(BASE.size), lo=0, hi=6),),
    )
    hist = UnitsDomain.over(one, (("n", 7),), (0,))
    assert hist.sensitivities(np.eye(7)) == (1.0, 1.0)


def test_a_question_is_compared_by_its_content() -> None:
    rng = np.random.default_rng(1)
    q1, q2 = _question(rng), _question(np.random.default_rng(1))
    assert q1 == q2 and hash(q1) == hash(q2) and repr(q1) == repr(q2)
    assert q1 != _question(np.random.default_rng(2))
    for p1, p2 in itertools.combinations(MARGINALS, 2):
        assert _domain(q1, p1) != _domain(q1, p2)
