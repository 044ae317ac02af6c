"""The pinned data of an epoch: the table's exact histogram over its whole domain, sparse.

An epoch's domain is the product of every declared attribute of its table, which is far too
large to hold as a vector (Adult's is about 10^15 cells). What is held instead is what one
``GROUP BY`` over the attributes' cell indices returns: for each combination of cells that
occurs, how many rows have it -- at most one entry per row of the table. The pin is one
histogram ``x`` over the whole domain, and every marginal is a marginal of that ``x``: so a
query over a few attributes may be answered from a release over more of them (summing the
others out) without bias. A row with a value outside a declared domain has no cell there, so
it is outside ``x`` altogether (``rewriter.pin_sql`` leaves it out): it counts in no answer.

Every linear query the engine answers is over a *marginal* (a sub-product of the attributes);
:meth:`Pin.marginal` computes that marginal's dense histogram when first asked and caches it.

Privacy. A pin is the exact data: it is never shown, logged or sent anywhere; only mechanisms
read it (``dp.engine``), and their outputs are what is released. The number of distinct cell
combinations is data-dependent, so it is padded to the next power of two with empty entries:
the cost of computing a marginal (its only observable trace, as timing) and the stored size
then depend only on that size class. docs/privacy.md §"What the pin reveals".

>>> from dp.domain import Domain
>>> d = Domain.of(("age", 3), ("sex", 2))
>>> pin = Pin.from_rows(d, [((0, 1), 4), ((2, 1), 1), ((2, 0), 2)])
>>> pin.marginal(Domain.of(("age", 3))).tolist(), pin.marginal(Domain(())).tolist()
([4.0, 0.0, 3.0], [7.0])
>>> pin.marginal(d).tolist()
[0.0, 4.0, 0.0, 0.0, 2.0, 1.0]
>>> Pin.from_bytes(d, pin.to_bytes()).marginal(d).tolist() == pin.marginal(d).tolist()
True
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dp.domain import Domain, FloatArray

#: The stored form's first bytes (then the number of attributes and of entries, little-endian).
MAGIC = b"LAPRAS-PIN\x01"
#: The optional section of each unit's rows, after the pin (then the number of units, of
#: attributes and of entries).
UNITS_MAGIC = b"LAPRAS-UNITS\x01"
#: Marginals kept in memory, by total size (float64 cells).
CACHE_BYTES = 512 * 2**20


def _padded(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length()) if n > 0 else 1


def _small(values: npt.ArrayLike, size: int) -> npt.NDArray[np.signedinteger[Any]]:
    """Cell indices in the smallest signed integer type that holds ``0 .. size - 1``."""
    dtype = np.int8 if size <= 127 else np.int16 if size <= 32767 else np.int32
    return np.asarray(values, dtype=dtype)


@dataclass(frozen=True, slots=True, eq=False)
class UnitRows:
    """Each unit's rows of an epoch, all of them (not only the ones the bound keeps): entry
    ``i`` says that unit ``unit[i]`` (an index ``0 .. units - 1`` the pin statement assigns;
    never the unit's identifier) has ``counts[i]`` rows in cell ``columns[a][i]`` of each
    attribute ``a`` of the pin's domain. What per-unit questions are computed from
    (``dp.per_unit``); exact data, kept and stored with the pin. Padded like the pin."""

    units: int
    unit: npt.NDArray[np.int32]
    columns: tuple[npt.NDArray[np.signedinteger[Any]], ...]
    counts: FloatArray

    def __post_init__(self) -> None:
        counts = np.array(self.counts, dtype=np.float64, copy=True).reshape(-1)
        n = counts.shape[0]
        if not (np.all(np.isfinite(counts)) and np.all(counts >= 0)):
            raise ValueError("a unit's counts must be finite and non-negative")
        unit = np.asarray(self.unit).reshape(-1)
        if unit.shape[0] != n or any(np.asarray(c).reshape(-1).shape[0] != n for c in self.columns):
            raise ValueError("each unit row needs a unit, a cell per attribute and a count")
        if unit.size and (int(np.min(unit)) < 0 or int(np.max(unit)) >= max(self.units, 1)):
            raise ValueError("a unit index is outside 0 .. units - 1")
        pad = _padded(n) - n
        cols = [
            np.concatenate([np.asarray(c).reshape(-1), np.zeros(pad, np.int32)])
            for c in self.columns
        ]
        arrays = [
            np.concatenate([unit, np.zeros(pad, np.int32)]).astype(np.int32),
            *(c.astype(np.int32) for c in cols),
            np.concatenate([counts, np.zeros(pad)]),
        ]
        for a in arrays:
            a.flags.writeable = False
        object.__setattr__(self, "unit", arrays[0])
        object.__setattr__(self, "columns", tuple(arrays[1:-1]))
        object.__setattr__(self, "counts", arrays[-1])

    def to_bytes(self) -> bytes:
        k, n = len(self.columns), self.counts.shape[0]
        parts = [UNITS_MAGIC, struct.pack("<QQQ", self.units, k, n)]
        parts += [
            np.ascontiguousarray(c, dtype="<i4").tobytes() for c in (self.unit, *self.columns)
        ]
        parts.append(self.counts.astype("<f8").tobytes())
        return b"".join(parts)

    @staticmethod
    def from_bytes(data: bytes | memoryview, k: int) -> UnitRows:
        view = memoryview(data)
        off = len(UNITS_MAGIC)
        if bytes(view[:off]) != UNITS_MAGIC:
            raise ValueError("not a stored section of unit rows")
        units, k_, n = struct.unpack_from("<QQQ", view, off)
        off += 24
        if k_ != k or len(view) != off + n * (4 * (k + 1) + 8):
            raise ValueError("the stored unit rows do not match their domain")
        arrays = [
            np.frombuffer(view, dtype="<i4", count=n, offset=off + 4 * n * j).astype(np.int32)
            for j in range(k + 1)
        ]
        counts = np.frombuffer(view, dtype="<f8", count=n, offset=off + 4 * n * (k + 1))
        return UnitRows(int(units), arrays[0], tuple(arrays[1:]), counts.astype(np.float64))


@dataclass(frozen=True, slots=True, eq=False)
class Pin:
    """The exact data of one epoch over ``domain``: entry ``i`` has cell ``columns[a][i]`` of
    attribute ``a`` and occurs ``counts[i]`` times. Read-only; padded with empty entries (see
    the module doc). Marginals are computed on demand and cached (bounded by
    :data:`CACHE_BYTES`; the cache is not for concurrent writers: a pin is used from one
    thread at a time). Each column is held in the smallest integer type for its domain."""

    domain: Domain
    columns: tuple[npt.NDArray[np.signedinteger[Any]], ...]
    counts: FloatArray
    #: Each unit's rows, for questions about units (a table with a privacy unit; None else).
    units: UnitRows | None = None
    _cache: OrderedDict[Domain, FloatArray] = field(
        default_factory=OrderedDict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        counts = np.array(self.counts, dtype=np.float64, copy=True).reshape(-1)
        n = counts.shape[0]
        if len(self.columns) != len(self.domain.attributes):
            raise ValueError("a pin needs one column per attribute of its domain")
        if not (np.all(np.isfinite(counts)) and np.all(counts >= 0)):
            raise ValueError("pinned counts must be finite and non-negative")
        pad = _padded(n) - n
        columns = []
        for col, size in zip(self.columns, self.domain.shape, strict=True):
            c = np.asarray(col).reshape(-1)
            if c.shape[0] != n:
                raise ValueError("a pin needs one count per combination of cells")
            if c.size and (int(np.min(c)) < 0 or int(np.max(c)) >= size):
                raise ValueError("a pinned cell index is outside its attribute's domain")
            c = _small(np.concatenate([c, np.zeros(pad, dtype=c.dtype)]) if pad else c, size)
            c.flags.writeable = False
            columns.append(c)
        if pad:
            counts = np.concatenate([counts, np.zeros(pad)])
        counts.flags.writeable = False
        object.__setattr__(self, "columns", tuple(columns))
        object.__setattr__(self, "counts", counts)

    @staticmethod
    def of(domain: Domain, cells: npt.ArrayLike, counts: npt.ArrayLike) -> Pin:
        """From an ``N x k`` array of cell indices and ``N`` counts."""
        k = len(domain.attributes)
        c = np.asarray(cells, dtype=np.int64).reshape(-1, k)
        return Pin(domain, tuple(c[:, j] for j in range(k)), np.asarray(counts, np.float64))

    @staticmethod
    def from_rows(domain: Domain, rows: Iterable[tuple[Sequence[int], float]]) -> Pin:
        """From ``(cells, count)`` rows."""
        cells: list[list[int]] = []
        counts: list[float] = []
        for c, n in rows:
            cells.append([int(v) for v in c])
            counts.append(float(n))
        return Pin.of(domain, cells, counts)

    @staticmethod
    def from_dense(domain: Domain, histogram: npt.ArrayLike) -> Pin:
        """From a dense histogram over ``domain`` (C order), e.g. an epoch pinned before."""
        x = np.asarray(histogram, dtype=np.float64).reshape(-1)
        if x.shape[0] != domain.size:
            raise ValueError("the histogram does not match the domain")
        nz = np.flatnonzero(x)
        return Pin(domain, tuple(np.unravel_index(nz, domain.shape)), x[nz])

    def marginal(self, domain: Domain) -> FloatArray:
        """The exact dense histogram of the marginal ``domain`` (read-only, cached)."""
        hit = self._cache.get(domain)
        if hit is not None:
            self._cache.move_to_end(domain)
            return hit
        x = self._compute(domain)
        self._cache[domain] = x
        while len(self._cache) > 1 and sum(v.nbytes for v in self._cache.values()) > CACHE_BYTES:
            self._cache.popitem(last=False)
        return x

    def _compute(self, domain: Domain) -> FloatArray:
        if domain.derived:  # a question about units (dp.per_unit), from the units' rows
            derived = np.asarray(domain.histogram(self), dtype=np.float64)
            derived.flags.writeable = False
            return derived
        if not self.domain.covers(domain):
            raise ValueError("the marginal is not over attributes of the pinned domain")
        if not domain.attributes:
            x = np.asarray([float(np.sum(self.counts))])
        else:
            cols = [self.columns[self.domain.axis(a.name)] for a in domain.attributes]
            index = np.zeros(self.counts.shape[0], dtype=np.int64)
            for col, size in zip(cols, domain.shape, strict=True):
                index *= size
                index += col
            x = np.bincount(index, weights=self.counts, minlength=domain.size)
            x = np.asarray(x, dtype=np.float64)
        x.flags.writeable = False
        return x

    @property
    def total(self) -> float:
        return float(np.sum(self.counts))

    @property
    def nbytes(self) -> int:
        """Memory held by the pin itself (the cached marginals excluded)."""
        return int(sum(c.nbytes for c in self.columns) + self.counts.nbytes)

    def to_bytes(self) -> bytes:
        """The stored form: a header, each column as little-endian int32, the counts as
        float64. Its length depends on the domain and the padded size only."""
        k, n = len(self.columns), self.counts.shape[0]
        cols = b"".join(np.ascontiguousarray(c, dtype="<i4").tobytes() for c in self.columns)
        out = MAGIC + struct.pack("<QQ", k, n) + cols + self.counts.astype("<f8").tobytes()
        return out if self.units is None else out + self.units.to_bytes()

    @staticmethod
    def from_bytes(domain: Domain, data: bytes) -> Pin:
        """The pin stored by :meth:`to_bytes` (over ``domain``)."""
        if not data.startswith(MAGIC):
            raise ValueError("not a stored pin")
        off = len(MAGIC)
        k, n = struct.unpack_from("<QQ", data, off)
        off += 16
        end = off + n * (4 * k + 8)
        if k != len(domain.attributes) or len(data) < end:
            raise ValueError("the stored pin does not match its domain")
        units = None
        if len(data) > end:
            units = UnitRows.from_bytes(memoryview(data)[end:], k)
        cols = tuple(
            np.frombuffer(data, dtype="<i4", count=n, offset=off + 4 * n * j).astype(np.int32)
            for j in range(k)
        )
        counts = np.frombuffer(data, dtype="<f8", count=n, offset=off + 4 * n * k)
        return Pin(domain, cols, counts.astype(np.float64), units)
