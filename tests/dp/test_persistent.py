"""dp.persistent: every version of a PersistentMap reads as the dict it stands for."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dp import persistent
from dp.persistent import PersistentMap

KEYS = st.integers(min_value=0, max_value=300)


@settings(max_examples=60, deadline=None)
@given(
    start=st.dictionaries(KEYS, st.integers(), max_size=200),
    updates=st.lists(st.tuples(KEYS, st.integers()), max_size=400),
)
def test_every_version_is_the_dict_it_stands_for(
    start: dict[int, int], updates: list[tuple[int, int]]
) -> None:
    """Each version equals the dict with the same updates (items, order, len, get, in), and
    stays so after later versions are made from it (or from an earlier one)."""
    versions = [(PersistentMap(start), dict(start))]
    for i, (k, v) in enumerate(updates):
        # branch from an earlier version now and then: a dropped group's state
        m, d = versions[-1] if i % 7 else versions[len(versions) // 2]
        d = dict(d)
        d[k] = v
        versions.append((m.set(k, v), d))
    for m, d in versions:
        assert list(m.items()) == list(d.items())  # first-insertion order, as a dict
        assert len(m) == len(d)
        assert m == d
        for k in range(-1, 302):
            assert (k in m) == (k in d)
            assert m.get(k) == d.get(k)
            assert m.get(k, "none") == d.get(k, "none")


def test_an_update_copies_little_and_merges_rarely() -> None:
    """``set`` shares the base between versions until the top outgrows sqrt(n); a missing
    key raises KeyError."""
    m: PersistentMap[int, int] = PersistentMap({i: i for i in range(10_000)})
    first = m
    merges = 0
    for i in range(10_000, 20_000):
        before = m._base
        m = m.set(i, -i)
        merges += m._base is not before
        assert len(m._top) <= max(persistent.MIN_TOP, 142)
    assert 50 <= merges <= 110  # about one in sqrt(n) updates
    assert len(m) == 20_000 and m[19_999] == -19_999 and m[3] == 3
    assert len(first) == 10_000 and 10_000 not in first
    try:
        first[10_000]
    except KeyError:
        pass
    else:
        raise AssertionError("a missing key must raise KeyError")
