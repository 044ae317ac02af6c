"""Questions about units: histograms over the units of a table, one contribution per unit.

A table with a privacy unit (``[tables.T] privacy_unit``) is also a relation of *units*: the
result of ``SELECT unit, g, agg ... FROM T WHERE w GROUP BY unit, g`` has one row per unit
and group ``g`` (none when ``g`` is absent), whose values are the unit's per-unit aggregates
(``count(*)``, ``sum(col)``, ``min``, ``max``, ``count(DISTINCT col)`` of its rows in the
group). A :class:`UnitQuestion` describes that derived relation ``D`` over public domains:

- its *group part*: the attributes the group expressions read, each group placed at one cell
  of them (the first of its cells, so that any expression of the group's key is exact there);
- one attribute per aggregate, over a public range of integers (counts ``0 .. k`` with ``k`` =
  ``max_rows_per_unit``, sums ``k`` times the column's range, min and max the column's
  values, ``count(DISTINCT)`` the number of its values), the value **clamped** into it, with
  one more cell for NULL where the aggregate can be NULL.

:class:`UnitsDomain` is a marginal of ``D``; its histogram counts the rows of ``D`` in each
cell, computed from each unit's rows (all of them, ``dp.pin.UnitRows``) by exactly the
semantics of PostgreSQL's ``GROUP BY`` and aggregates over the declared cells.

Neighbours and sensitivity. Adding or removing one unit (with all its rows) adds or removes
its rows of ``D`` and nothing else: which groups it is in, and its aggregates there, are
functions of its own rows only. It has at most one row in each of the ``G`` groups (public:
the statement and the domains), so in ``D`` it has at most ``G`` rows and at most one per
cell of the group part. A batch over a marginal of ``D`` then has the sensitivities of
``dp.units.Contribution(rows=G, per_cell=1)``, each column aggregating the group part's cells
that the marginal drops (``1`` when it keeps them all): for ``G = 1`` (grouped by the unit
alone) each unit is one row, and a histogram over units has L1 and L2 sensitivity 1.
Noise calibrated to these bounds by the epoch's accountant gives the epoch's guarantee for
the same neighbours (docs/privacy.md §1b).

>>> import numpy as np
>>> from dp.domain import Domain
>>> from dp.pin import Pin, UnitRows
>>> base = Domain.of(("hour", 3))
>>> q = UnitQuestion(base=base, groups=np.array([0, 0, 0]), places=np.array([0]),
...     group_shape=(), aggregates=(UnitAggregate.counting(np.ones(3), lo=0, hi=4),))
>>> d = UnitsDomain.over(q, (("n", 5),), (0,))
>>> rows = UnitRows(2, np.array([0, 0, 1]), (np.array([0, 2, 1]),), np.array([3.0, 4.0, 1.0]))
>>> Pin(base, (np.array([0]),), np.array([1.0]), rows).marginal(d).tolist()  # n = 7 -> 4, 1
[0.0, 1.0, 0.0, 0.0, 1.0]
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dp.domain import Attribute, Domain, FloatArray
from dp.pin import Pin
from dp.units import Contribution

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Kind = Literal["count", "sum", "min", "max", "distinct"]


def _frozen(a: npt.ArrayLike, dtype: Any) -> Any:
    out = np.array(a, dtype=dtype, copy=True).reshape(-1)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, slots=True, eq=False)
class UnitAggregate:
    """One per-unit aggregate over the cells of a question's base domain.

    ``count``: the unit's rows in the group's ``counted`` cells; ``sum``: the sum of
    ``weights`` over them (NULL when there is none); ``min``/``max``: the smallest / largest
    ``values[codes]`` among them (NULL when none); ``distinct``: how many distinct ``codes``
    they have. The value is clamped into ``lo .. hi``; its cell is ``value - lo`` (NULL: the
    last cell, when ``nullable``)."""

    kind: Kind
    counted: BoolArray
    weights: FloatArray
    codes: IntArray
    values: tuple[int, ...]
    lo: int
    hi: int
    nullable: bool

    def __post_init__(self) -> None:
        if self.hi < self.lo:
            raise ValueError("a per-unit aggregate needs lo <= hi")
        object.__setattr__(self, "counted", _frozen(self.counted, np.bool_))
        object.__setattr__(self, "weights", _frozen(self.weights, np.float64))
        object.__setattr__(self, "codes", _frozen(self.codes, np.int64))

    @staticmethod
    def counting(counted: npt.ArrayLike, *, lo: int, hi: int) -> UnitAggregate:
        c = np.asarray(counted, dtype=bool)
        z = np.zeros(c.shape[0])
        codes = np.zeros(c.shape[0], dtype=np.int64)
        return UnitAggregate(
            kind="count", counted=c, weights=z, codes=codes, values=(), lo=lo, hi=hi, nullable=False
        )

    @property
    def size(self) -> int:
        return self.hi - self.lo + 1 + (1 if self.nullable else 0)

    def digest(self, h: Any) -> None:
        h.update(repr((self.kind, self.values, self.lo, self.hi, self.nullable)).encode())
        for a in (self.counted, self.weights, self.codes):
            h.update(np.ascontiguousarray(a).tobytes())

    def cells(self, inv: IntArray, n: FloatArray, m: IntArray, pairs: int) -> IntArray:
        """The cell of this aggregate's value for each of ``pairs`` (unit, group) pairs, from
        the entries ``(pair inv[i], base cell m[i], rows n[i])``."""
        on = self.counted[m] & (n > 0)
        null = self.hi - self.lo + 1
        if self.kind in ("count", "sum"):
            w = n * on if self.kind == "count" else n * on * self.weights[m]
            total = np.bincount(inv, weights=w, minlength=pairs)
            value = np.clip(np.rint(total), self.lo, self.hi).astype(np.int64) - self.lo
            if self.kind == "sum":
                seen = np.bincount(inv[on], minlength=pairs) > 0
                value = np.where(seen, value, null)
            return np.asarray(value, dtype=np.int64)
        codes = self.codes[m][on]
        who = inv[on]
        if self.kind == "distinct":
            both = np.unique(who * (len(self.values) + 1) + codes)
            count = np.bincount(both // (len(self.values) + 1), minlength=pairs)
            return np.asarray(np.clip(count, self.lo, self.hi) - self.lo, dtype=np.int64)
        big = np.iinfo(np.int64).max
        if self.kind == "min":
            best = np.full(pairs, big, dtype=np.int64)
            np.minimum.at(best, who, codes)
        else:
            best = np.full(pairs, -1, dtype=np.int64)
            np.maximum.at(best, who, codes)
        none = (best == big) | (best < 0)
        vals = np.asarray(self.values, dtype=np.int64)
        picked = vals[np.where(none, 0, best)] if vals.size else np.zeros(pairs, np.int64)
        return np.where(none, null, np.clip(picked, self.lo, self.hi) - self.lo)


@dataclass(frozen=True, slots=True, eq=False)
class UnitQuestion:
    """A derived relation of units (the module doc). ``groups``: for each cell of ``base`` (a
    marginal of the epoch's domain), the group its rows fall in (``-1``: none, the WHERE
    excludes it); ``places``: for each group, its cell in the group part (C order over
    ``group_shape``); ``aggregates``: the per-unit aggregates. Compared by ``key``."""

    base: Domain
    groups: IntArray
    places: IntArray
    group_shape: tuple[int, ...]
    aggregates: tuple[UnitAggregate, ...]
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", _frozen(self.groups, np.int64))
        object.__setattr__(self, "places", _frozen(self.places, np.int64))
        if self.groups.shape[0] != self.base.size:
            raise ValueError("a question needs one group per cell of its base")
        if np.any(self.groups >= self.places.shape[0]) or np.any(
            self.places >= math.prod(self.group_shape)
        ):
            raise ValueError("a group or its place is outside the question")
        for a in self.aggregates:
            if a.counted.shape[0] != self.base.size:
                raise ValueError("an aggregate needs one entry per cell of the base")
        h = hashlib.sha256(repr((self.base, self.group_shape)).encode())
        for arr in (self.groups, self.places):
            h.update(arr.tobytes())
        for a in self.aggregates:
            a.digest(h)
        object.__setattr__(self, "key", h.hexdigest())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnitQuestion) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"UnitQuestion({self.key})"

    @property
    def num_groups(self) -> int:
        return int(self.places.shape[0])

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the whole derived relation: the group part, then the aggregates."""
        return (*self.group_shape, *(a.size for a in self.aggregates))


@dataclass(frozen=True, slots=True)
class UnitsDomain(Domain):
    """A marginal of a question's derived relation: ``positions[i]`` is the index, in the
    question's :attr:`UnitQuestion.shape`, of attribute ``i`` of this domain."""

    question: UnitQuestion
    positions: tuple[int, ...]
    derived = True

    @staticmethod
    def over(
        question: UnitQuestion, attributes: tuple[tuple[str, int], ...], positions: tuple[int, ...]
    ) -> UnitsDomain:
        shape = question.shape
        if len(attributes) != len(positions) or any(
            shape[p] != size for (_, size), p in zip(attributes, positions, strict=True)
        ):
            raise ValueError("the attributes do not match the question's relation")
        return _pruned(
            UnitsDomain(tuple(Attribute(n, s) for n, s in attributes), question, positions)
        )

    def without(self, axis: int) -> UnitsDomain:
        """The marginal of the derived relation without attribute ``axis``."""
        keep = [i for i in range(len(self.attributes)) if i != axis]
        return _pruned(
            UnitsDomain(
                tuple(self.attributes[i] for i in keep),
                self.question,
                tuple(self.positions[i] for i in keep),
            )
        )

    def histogram(self, pin: Any) -> FloatArray:
        """How many rows of the derived relation fall in each cell (from ``pin.units``)."""
        if not isinstance(pin, Pin) or pin.units is None:
            raise ValueError("the epoch's pin holds no rows per unit")
        q, rows = self.question, pin.units
        if not pin.domain.covers(q.base):
            raise ValueError("the question is not over the epoch's domain")
        if q.base.attributes:
            axes = [pin.domain.axis(n) for n in q.base.names]
            m = np.ravel_multi_index([rows.columns[a] for a in axes], q.base.shape)
        else:
            m = np.zeros(rows.counts.shape[0], dtype=np.int64)
        m = np.asarray(m, dtype=np.int64)
        g = q.groups[m]
        keep = (g >= 0) & (rows.counts > 0)
        m, g, n = m[keep], g[keep], rows.counts[keep]
        pair = rows.unit[keep].astype(np.int64) * q.num_groups + g
        pairs, inv = np.unique(pair, return_inverse=True)
        inv = inv.reshape(-1).astype(np.int64)
        p = pairs.shape[0]
        coords: list[IntArray] = []
        if q.group_shape:
            place = q.places[pairs % q.num_groups]
            coords += [np.asarray(c, np.int64) for c in np.unravel_index(place, q.group_shape)]
        for a in q.aggregates:
            coords.append(a.cells(inv, n, m, p))
        if not self.attributes:
            return np.asarray([float(p)])
        picked = [coords[i] for i in self.positions]
        flat = np.ravel_multi_index(picked, self.shape)
        return np.asarray(np.bincount(flat, minlength=self.size), dtype=np.float64)

    @property
    def contribution(self) -> Contribution:
        """One unit's bound in the derived relation: a row per group, one per cell."""
        return Contribution(rows=self.question.num_groups, per_cell=1)

    def sensitivities(self, matrix: Any) -> tuple[float, float]:
        """``(L2, L1)`` of a batch over this domain for add/remove-one-unit neighbours (the
        module doc): each column aggregates the group part's cells this marginal drops."""
        q = self.question
        dropped = [s for i, s in enumerate(q.group_shape) if i not in self.positions]
        return self.contribution.sensitivities(matrix, float(math.prod(dropped)))


def _pruned(d: UnitsDomain) -> UnitsDomain:
    """``d`` with its question's aggregates that no attribute of ``d`` reads left out: which
    groups a unit is in does not depend on them, so the histogram is the same, and the same
    question asked with other unread aggregates has the same key (a repeat)."""
    q = d.question
    g = len(q.group_shape)
    used = sorted(p - g for p in d.positions if p >= g)
    if len(used) == len(q.aggregates):
        return d
    question = UnitQuestion(
        base=q.base,
        groups=q.groups,
        places=q.places,
        group_shape=q.group_shape,
        aggregates=tuple(q.aggregates[i] for i in used),
    )
    moved = {g + old: g + new for new, old in enumerate(used)}
    return UnitsDomain(d.attributes, question, tuple(moved.get(p, p) for p in d.positions))


def within(epoch: Domain, domain: Domain) -> bool:
    """Whether an epoch over ``epoch`` answers a batch over ``domain``: a marginal of it, or a
    question about units whose base is."""
    if isinstance(domain, UnitsDomain):
        return epoch.covers(domain.question.base)
    return epoch.covers(domain)
