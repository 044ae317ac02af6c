"""A read-only mapping whose updates make new versions and share the old one's entries.

The engine's state is a value: :func:`dp.engine.apply` returns a new state and leaves the old
one as it was (a group commit decides on a state and drops it when its ledger write fails).
Its map of answered statements grows by one entry per answer, and copying it whole at every
event made each answer cost time in proportion to the answers before it, and the replay of an
epoch's ledger time in the square of its length (a 100,000-entry dict takes about 1.5 ms to
copy here). :class:`PersistentMap` keeps each version's entries in two dicts: a *base* shared
by many versions and never changed once made, and the small dict of the entries set since
(*top*), which an update copies; when *top* outgrows the square root of the base's size, the
update merges the two into a new base.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar, overload

_K = TypeVar("_K")
_V = TypeVar("_V")
_T = TypeVar("_T")

#: ``top`` holds at least this many entries before it is merged into a new base.
MIN_TOP = 64
_MISSING = object()


class PersistentMap(Mapping[_K, _V], Generic[_K, _V]):
    """An immutable mapping with :meth:`set`, which returns the mapping with one more (or one
    replaced) entry and leaves this one unchanged.

    Cost, with ``n`` entries: a lookup is two dict lookups; :meth:`set` copies at most
    ``max(MIN_TOP, sqrt(n))`` entries, and one update in about ``sqrt(n)`` merges ``n``
    (amortised ``O(sqrt n)`` per update, against ``O(n)`` for a copied dict). Iteration is in
    first-insertion order, as a dict's (a replaced entry keeps its place). No version is ever
    changed after it is made, so versions may be read from several threads."""

    __slots__ = ("_base", "_len", "_top")

    _base: dict[_K, _V]
    _top: dict[_K, _V]
    _len: int

    def __init__(self, items: Mapping[_K, _V] | Iterable[tuple[_K, _V]] = ()) -> None:
        self._base = dict(items)
        self._top = {}
        self._len = len(self._base)

    def set(self, key: _K, value: _V) -> PersistentMap[_K, _V]:
        """This mapping with ``key`` set to ``value`` (a new version; this one is unchanged)."""
        top = self._top.copy()
        top[key] = value
        new: PersistentMap[_K, _V] = PersistentMap.__new__(PersistentMap)
        new._len = self._len + (0 if key in self._top or key in self._base else 1)
        if len(top) > max(MIN_TOP, math.isqrt(len(self._base))):
            base = self._base.copy()
            base.update(top)
            new._base, new._top = base, {}
        else:
            new._base, new._top = self._base, top
        return new

    def __getitem__(self, key: _K) -> _V:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base[key]
        return value  # type: ignore[return-value]

    @overload
    def get(self, key: _K, /) -> _V | None: ...
    @overload
    def get(self, key: _K, default: _V | _T, /) -> _V | _T: ...
    def get(self, key: _K, default: object = None) -> object:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._top or key in self._base

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[_K]:
        yield from self._base
        base = self._base
        for key in self._top:
            if key not in base:
                yield key

    def __repr__(self) -> str:
        return f"PersistentMap({dict(self.items())!r})"
