"""The pinned data: marginals of the sparse exact histogram, its constructors, its stored form."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dp.domain import Attribute, Domain, projection
from dp.pin import MAGIC, Pin


def random_domain(rng: np.random.Generator) -> Domain:
    k = int(rng.integers(1, 5))
    names = rng.permutation(["age", "sex", "edu", "job", "race"])[:k]
    return Domain.of(*((str(n), int(rng.integers(1, 6))) for n in names))


def random_cells(rng: np.random.Generator, domain: Domain, n: int) -> np.ndarray:
    """``n`` rows of cell indices, each in ``[0, size)`` of its attribute."""
    cols = [rng.integers(0, size, n) for size in domain.shape]
    return np.stack(cols, axis=1).reshape(n, len(domain.shape))


def dense_joint(domain: Domain, cells: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The dense joint histogram over the domain (one axis per attribute)."""
    joint = np.zeros(domain.shape)
    for row, n in zip(cells, counts, strict=True):
        joint[tuple(int(c) for c in row)] += n
    return joint


def brute_marginal(domain: Domain, joint: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Sum the dense joint over the other attributes and order the kept axes as ``names``."""
    keep = [domain.axis(n) for n in names]
    others = tuple(i for i in range(len(domain.shape)) if i not in keep)
    m = np.sum(joint, axis=others)
    kept_sorted = sorted(keep)
    m = np.transpose(m, [kept_sorted.index(i) for i in keep]) if keep else m
    return np.asarray(m, dtype=np.float64).reshape(-1)


def all_marginals(domain: Domain) -> list[Domain]:
    out = []
    for r in range(len(domain.attributes) + 1):
        for names in itertools.combinations(domain.names, r):
            out.append(domain.marginal(names))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_marginals_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dom = random_domain(rng)
    n = int(rng.integers(0, 40))
    cells = random_cells(rng, dom, n)
    counts = rng.integers(1, 9, n).astype(np.float64)
    pin = Pin.of(dom, cells, counts)
    joint = dense_joint(dom, cells, counts)
    for marg in all_marginals(dom):
        got = pin.marginal(marg)
        assert got.shape == (marg.size,)
        assert np.array_equal(got, brute_marginal(dom, joint, marg.names)), marg.names
    # the empty marginal is the number of rows; the full one is the joint itself
    assert pin.marginal(Domain(())).tolist() == [float(counts.sum())]
    assert pin.total == float(counts.sum())
    assert np.array_equal(pin.marginal(dom), joint.reshape(-1))
    # a marginal whose attributes are in another order than the pin's
    rev = Domain(tuple(reversed(dom.attributes)))
    assert np.array_equal(pin.marginal(rev), brute_marginal(dom, joint, rev.names))


def test_hand_computed_marginals() -> None:
    d = Domain.of(("age", 3), ("sex", 2), ("edu", 2))
    pin = Pin.from_rows(d, [((0, 1, 1), 4), ((2, 0, 0), 5), ((0, 0, 1), 2), ((1, 0, 1), 3)])
    assert pin.marginal(Domain(())).tolist() == [14.0]
    assert pin.marginal(d.marginal(["age"])).tolist() == [6.0, 3.0, 5.0]
    assert pin.marginal(d.marginal(["sex"])).tolist() == [10.0, 4.0]
    assert pin.marginal(d.marginal(["edu"])).tolist() == [5.0, 9.0]
    assert pin.marginal(d.marginal(["age", "sex"])).tolist() == [2, 4, 3, 0, 5, 0]
    assert pin.marginal(Domain.of(("sex", 2), ("age", 3))).tolist() == [2, 3, 5, 4, 0, 0]
    full = np.zeros(12)
    for cell, n in (((0, 1, 1), 4), ((2, 0, 0), 5), ((0, 0, 1), 2), ((1, 0, 1), 3)):
        full[np.ravel_multi_index(cell, d.shape)] = n
    assert np.array_equal(pin.marginal(d), full)


@pytest.mark.parametrize("seed", range(6))
def test_every_marginal_sums_out_of_every_larger_one(seed: int) -> None:
    """One histogram over the whole domain: a marginal is the larger marginal's projection-sum
    (what answering a sub-marginal query from a larger block relies on)."""
    rng = np.random.default_rng(50 + seed)
    dom = random_domain(rng)
    n = int(rng.integers(1, 40))
    pin = Pin.of(dom, random_cells(rng, dom, n), rng.integers(1, 9, n))
    for big in all_marginals(dom):
        for small in all_marginals(big):
            proj = projection(small, big)
            summed = np.bincount(proj, weights=pin.marginal(big), minlength=small.size)
            assert np.array_equal(summed, pin.marginal(small)), (small.names, big.names)
            assert float(np.sum(pin.marginal(big))) == pin.total


def test_marginal_cache_returns_equal_read_only_arrays() -> None:
    rng = np.random.default_rng(3)
    d = Domain.of(("a", 4), ("b", 3), ("c", 2))
    pin = Pin.of(d, random_cells(rng, d, 30), rng.integers(1, 5, 30))
    first = {m: np.array(pin.marginal(m)) for m in all_marginals(d)}
    for m in reversed(all_marginals(d)):
        again = pin.marginal(m)
        assert np.array_equal(again, first[m])
        assert not again.flags.writeable
        with pytest.raises(ValueError):
            again[0] = 1.0
    # an equal (not identical) domain object hits the same entry
    same = Domain.of(("a", 4), ("c", 2))
    assert np.array_equal(pin.marginal(same), first[d.marginal(["a", "c"])])


def test_cache_eviction_keeps_answers_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    import dp.pin

    monkeypatch.setattr(dp.pin, "CACHE_BYTES", 64)  # only the last marginal stays
    rng = np.random.default_rng(8)
    d = Domain.of(("a", 5), ("b", 4))
    cells = random_cells(rng, d, 25)
    counts = rng.integers(1, 4, 25).astype(np.float64)
    pin = Pin.of(d, cells, counts)
    joint = dense_joint(d, cells, counts)
    for _ in range(2):
        for m in all_marginals(d):
            assert np.array_equal(pin.marginal(m), brute_marginal(d, joint, m.names))
    assert len(pin._cache) <= 2


def test_constructors_agree() -> None:
    rng = np.random.default_rng(5)
    d = Domain.of(("a", 3), ("b", 4), ("c", 2))
    dense = rng.integers(0, 4, d.size).astype(np.float64)
    dense[rng.random(d.size) < 0.4] = 0.0
    nz = np.flatnonzero(dense)
    cells = np.stack(np.unravel_index(nz, d.shape), axis=1)
    a = Pin.from_dense(d, dense)
    b = Pin.of(d, cells, dense[nz])
    c = Pin.from_rows(
        d, [(tuple(int(v) for v in row), n) for row, n in zip(cells, dense[nz], strict=True)]
    )
    # duplicates of a combination are summed; the order of the rows does not matter
    perm = rng.permutation(nz.size)
    split = np.concatenate([cells[perm], cells[perm]])
    e = Pin.of(d, split, np.concatenate([dense[nz][perm] / 2, dense[nz][perm] / 2]))
    assert np.array_equal(a.marginal(d), dense)
    for m in all_marginals(d):
        ref = a.marginal(m)
        for other in (b, c, e):
            assert np.array_equal(other.marginal(m), ref)
    assert a.total == float(dense.sum())


def test_dense_round_trip_of_an_empty_histogram() -> None:
    d = Domain.of(("a", 3))
    pin = Pin.from_dense(d, np.zeros(3))
    assert pin.counts.shape == (1,) and pin.total == 0.0
    assert pin.marginal(d).tolist() == [0.0, 0.0, 0.0]
    assert pin.marginal(Domain(())).tolist() == [0.0]


@pytest.mark.parametrize("seed", range(6))
def test_bytes_round_trip(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    d = random_domain(rng)
    n = int(rng.integers(0, 30))
    pin = Pin.of(d, random_cells(rng, d, n), rng.integers(1, 1000, n) * 0.5)
    data = pin.to_bytes()
    assert data.startswith(MAGIC)
    back = Pin.from_bytes(d, data)
    assert back.counts.tobytes() == pin.counts.tobytes()
    for c1, c2 in zip(back.columns, pin.columns, strict=True):
        assert np.array_equal(c1, c2)
    for m in all_marginals(d):
        assert np.array_equal(back.marginal(m), pin.marginal(m))
    assert back.to_bytes() == data


def test_padding_to_a_power_of_two() -> None:
    d = Domain.of(("a", 200), ("b", 3))
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 100):
        cells = np.stack([rng.integers(0, 200, n), rng.integers(0, 3, n)], axis=1)
        pin = Pin.of(d, cells, np.ones(n))
        size = pin.counts.shape[0]
        assert size >= max(n, 1) and size & (size - 1) == 0 and size < 2 * max(n, 1)
        assert all(c.shape == (size,) for c in pin.columns)
        assert np.all(pin.counts[n:] == 0.0) and pin.total == float(n)
        # padded entries are empty entries at cell 0: they count in no marginal
        assert all(np.all(c[n:] == 0) for c in pin.columns)
        assert pin.marginal(Domain(())).tolist() == [float(n)]
        assert np.array_equal(
            pin.marginal(d.marginal(["b"])), np.bincount(cells[:, 1], minlength=3).astype(float)
        )
        assert np.array_equal(pin.marginal(d), dense_joint(d, cells, np.ones(n)).reshape(-1))
        assert not pin.counts.flags.writeable
        assert all(not c.flags.writeable for c in pin.columns)
    # columns in the smallest type for their attribute
    assert Pin.of(d, [[199, 2]], [1.0]).columns[0].dtype == np.int16
    assert Pin.of(d, [[199, 2]], [1.0]).columns[1].dtype == np.int8


def test_stored_size_depends_only_on_domain_and_size_class() -> None:
    d = Domain.of(("a", 10), ("b", 4), ("c", 3))
    rng = np.random.default_rng(2)

    def pin_with(n: int) -> Pin:
        cells = np.stack(
            [rng.permutation(10 * 4 * 3)[:n] // 12, rng.integers(0, 4, n), rng.integers(0, 3, n)],
            axis=1,
        )
        return Pin.of(d, cells, rng.integers(1, 50, n))

    # 5 and 8 distinct combinations: the same class (8); 9: the next one (16)
    five, eight, nine = pin_with(5), pin_with(8), pin_with(9)
    assert len(five.to_bytes()) == len(eight.to_bytes())
    assert len(nine.to_bytes()) > len(eight.to_bytes())
    k = len(d.attributes)
    assert len(five.to_bytes()) == len(MAGIC) + 16 + 8 * (4 * k + 8)
    assert len(nine.to_bytes()) == len(MAGIC) + 16 + 16 * (4 * k + 8)
    # the data (counts, cells) do not change the length
    big = Pin.of(d, [[9, 3, 2]] * 6, [1e9] * 6)
    assert len(big.to_bytes()) == len(five.to_bytes())
    # and neither does the attribute sizes' integer type
    wide = Domain.of(("a", 40000), ("b", 4), ("c", 3))
    assert len(Pin.of(wide, [[39999, 3, 2]] * 5, [1.0] * 5).to_bytes()) == len(five.to_bytes())


def test_nbytes_follows_the_padded_size() -> None:
    d = Domain.of(("a", 3), ("b", 300))
    p5 = Pin.of(d, [[0, 0]] * 5, [1.0] * 5)
    p7 = Pin.of(d, [[2, 299]] * 7, [2.0] * 7)
    assert p5.nbytes == p7.nbytes == 8 * (1 + 2 + 8)


@pytest.mark.parametrize(
    ("cells", "counts"),
    [
        ([[3, 0]], [1.0]),  # cell index == size
        ([[0, 7]], [1.0]),  # cell index > size
        ([[-1, 0]], [1.0]),  # -1 is no 'no cell' marker: out of range like any other
        ([[0, -1]], [1.0]),
        ([[-2, 0]], [1.0]),
        ([[0, 0]], [-1.0]),  # negative count
        ([[0, 0]], [float("nan")]),
        ([[0, 0]], [float("inf")]),
        ([[0, 0], [1, 1]], [1.0]),  # counts do not match the rows
        ([[0, 0, 0]], [1.0]),  # one column too many
        ([[0, 0, 0], [1, 1, 1]], [1.0, 1.0]),
        ([[0], [1], [2]], [1.0, 1.0, 1.0]),  # one column too few
    ],
)
def test_invalid_inputs_raise(cells: list[list[int]], counts: list[float]) -> None:
    d = Domain.of(("a", 3), ("b", 2))
    with pytest.raises(ValueError):
        Pin.of(d, cells, counts)


def test_invalid_direct_construction_raises() -> None:
    d = Domain.of(("a", 3), ("b", 2))
    col = np.array([0, 1])
    with pytest.raises(ValueError):  # wrong number of columns
        Pin(d, (col,), np.ones(2))
    with pytest.raises(ValueError):
        Pin(d, (col, col, col), np.ones(2))
    with pytest.raises(ValueError):  # columns of different lengths
        Pin(d, (col, np.array([0])), np.ones(2))
    with pytest.raises(ValueError):
        Pin(d, (col, np.array([0, 2])), np.ones(2))
    with pytest.raises(ValueError):
        Pin.from_rows(d, [((0, 1), 1.0), ((0,), 1.0)])
    with pytest.raises(ValueError):
        Pin.from_rows(d, [((0, 5), 1.0)])
    with pytest.raises(ValueError):  # no 'no cell' entries
        Pin.from_rows(d, [((0, 1), 2.0), ((2, -1), 1.0)])
    with pytest.raises(ValueError):
        Pin(d, (np.array([0, -1]), col), np.ones(2))
    with pytest.raises(ValueError):
        Pin.from_dense(d, np.ones(5))
    with pytest.raises(ValueError):
        Pin.from_dense(d, [1, 0, 0, -1, 0, 0])


def test_invalid_marginals_and_stored_forms_raise() -> None:
    d = Domain.of(("a", 3), ("b", 2))
    pin = Pin.from_rows(d, [((0, 1), 2.0), ((2, 0), 1.0)])
    with pytest.raises(ValueError):  # an attribute the pin does not have
        pin.marginal(Domain.of(("c", 2)))
    with pytest.raises(ValueError):  # the right name with another number of cells
        pin.marginal(Domain((Attribute("a", 4),)))
    data = pin.to_bytes()
    with pytest.raises(ValueError):
        Pin.from_bytes(d, b"X" + data[1:])
    with pytest.raises(ValueError):
        Pin.from_bytes(d, data[:-1])
    with pytest.raises(ValueError):
        Pin.from_bytes(d, data + b"\x00")
    with pytest.raises(ValueError):
        Pin.from_bytes(Domain.of(("a", 3)), data)
    with pytest.raises(ValueError):  # a cell out of range for the domain it is read over
        Pin.from_bytes(Domain.of(("a", 2), ("b", 2)), data)
    # a stored -1 (a 'no cell' entry of an older form) is refused like any out-of-range cell
    k, n = 2, pin.counts.shape[0]
    off = len(MAGIC) + 16 + 4 * n  # column b
    bad = data[:off] + np.array([-1], dtype="<i4").tobytes() + data[off + 4 :]
    assert len(bad) == len(data) and len(data) == len(MAGIC) + 16 + n * (4 * k + 8)
    with pytest.raises(ValueError):
        Pin.from_bytes(d, bad)
