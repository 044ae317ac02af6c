"""Public histogram domains and linear queries over them.

A :class:`Domain` is the product of a few attributes, each with a public, finite number of
cells (from configuration, never from the data). Cells are flattened in C order (the last
attribute varies fastest), so the histogram of a domain is a vector of ``domain.size`` counts.

A :class:`QueryBatch` is a set of linear queries over one domain: a sparse ``m x n`` matrix
``W`` whose answer on a histogram ``x`` is ``W @ x``. Neighbouring databases differ by one row,
i.e. by +-1 in one cell of ``x``; so the batch's L2 sensitivity is the largest column L2 norm
of ``W`` (for one query: its largest absolute weight) and its L1 sensitivity is the largest
column L1 norm.

>>> d = Domain.of(("age", 3), ("sex", 2))
>>> d.size, d.shape
(6, (3, 2))
>>> b = QueryBatch.from_dense(d, [[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1]])
>>> b.sensitivity_l2, b.answer(np.arange(6.0)).tolist()
(1.0, [1.0, 14.0])
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Attribute:
    """One axis of a domain: a name and its number of cells (> 0)."""

    name: str
    size: int

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise ValueError(f"attribute {self.name!r} must have at least one cell")


@dataclass(frozen=True, slots=True)
class Domain:
    """A product of attributes; its histogram has ``size`` cells in C order.

    A *derived* domain (a subclass with ``derived = True``: ``dp.per_unit.UnitsDomain``) is
    no marginal of any other: its histogram is computed from an epoch's pin by its own rule
    (:meth:`histogram`), and it covers, and is covered by, nothing but itself."""

    attributes: tuple[Attribute, ...]
    derived: ClassVar[bool] = False

    @staticmethod
    def of(*pairs: tuple[str, int]) -> Domain:
        return Domain(tuple(Attribute(name, size) for name, size in pairs))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def axis(self, name: str) -> int:
        return self.names.index(name)

    def covers(self, other: Domain) -> bool:
        """Whether every attribute of ``other`` is one of this domain's, with as many cells
        (a query over ``other`` is then a query over a marginal of this domain)."""
        if self.derived or other.derived:
            return self == other
        mine = dict(zip(self.names, self.shape, strict=True))
        return all(mine.get(a.name) == a.size for a in other.attributes)

    def without(self, axis: int) -> Domain:
        """This domain without attribute ``axis`` (a derived domain stays derived)."""
        return Domain(self.attributes[:axis] + self.attributes[axis + 1 :])

    def histogram(self, pin: Any) -> FloatArray:
        """A derived domain's histogram, computed from an epoch's pin (``dp.pin.Pin``)."""
        raise ValueError("only a derived domain computes its own histogram")

    def marginal(self, names: Iterable[str]) -> Domain:
        """The sub-product of the named attributes, in this domain's order."""
        wanted = set(names)
        if not wanted <= set(self.names):
            raise ValueError("a marginal can only name attributes of its domain")
        return Domain(tuple(a for a in self.attributes if a.name in wanted))

    def union(self, other: Domain) -> Domain:
        """This domain's attributes, then those of ``other`` it lacks."""
        if not all(self.covers(Domain((a,))) for a in other.attributes if a.name in self.names):
            raise ValueError("an attribute has another number of cells in the other domain")
        return Domain(
            self.attributes + tuple(a for a in other.attributes if a.name not in self.names)
        )


@functools.lru_cache(maxsize=1024)
def _described(domain: Domain) -> bytes:
    """``repr(domain)``, encoded: part of every batch key and row key (a domain's repr costs
    about 10 us; batches over a few domains are made again and again)."""
    return repr(domain).encode()


def _frozen_csr(matrix: Any) -> sp.csr_array:
    """``matrix`` as a canonical CSR array (no duplicate entries, no explicit zeros, columns
    sorted within each row), its arrays read-only. A CSR array of floats is taken as it is
    (its arrays are shared either way); what is already canonical is not redone."""
    if isinstance(matrix, sp.csr_array) and matrix.dtype == np.float64:
        m = matrix
    else:
        m = sp.csr_array(matrix, dtype=np.float64)
    m.sum_duplicates()  # (each returns at once when its flag says there is nothing to do)
    if not np.all(m.data):
        m.eliminate_zeros()
    m.sort_indices()
    for arr in (m.data, m.indices, m.indptr):
        arr.flags.writeable = False
    return m


@dataclass(frozen=True, slots=True, eq=False)
class QueryBatch:
    """Linear queries over one domain: ``answer(x) = W @ x`` with ``W`` sparse ``m x n``.

    The matrix is stored as a read-only CSR array. ``key`` identifies the batch exactly (same
    domain, same weights), so that a repeat is answered from the stored release.
    """

    domain: Domain
    matrix: sp.csr_array
    key: str = field(init=False)

    def __post_init__(self) -> None:
        frozen = _frozen_csr(self.matrix)
        if frozen.ndim != 2 or frozen.shape[1] != self.domain.size:
            raise ValueError("query matrix must have one column per cell of the domain")
        object.__setattr__(self, "matrix", frozen)
        h = hashlib.sha256()
        h.update(b"(" + _described(self.domain) + b", " + repr(frozen.shape).encode() + b")")
        for arr in (frozen.indptr.astype(np.int64), frozen.indices.astype(np.int64), frozen.data):
            h.update(np.ascontiguousarray(arr).tobytes())
        object.__setattr__(self, "key", h.hexdigest())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueryBatch) and (self.domain, self.key) == (
            other.domain,
            other.key,
        )

    def __hash__(self) -> int:
        return hash(self.key)

    @staticmethod
    def from_dense(domain: Domain, rows: Sequence[Sequence[float]] | FloatArray) -> QueryBatch:
        return QueryBatch(
            domain, sp.csr_array(np.asarray(rows, dtype=np.float64).reshape(-1, domain.size))
        )

    @staticmethod
    def stack(batches: Iterable[QueryBatch]) -> QueryBatch:
        items = list(batches)
        if not items or any(b.domain != items[0].domain for b in items):
            raise ValueError("stack needs at least one batch, all over the same domain")
        return QueryBatch(items[0].domain, sp.vstack([b.matrix for b in items], format="csr"))

    @property
    def num_queries(self) -> int:
        return int(self.matrix.shape[0])

    def dense(self) -> FloatArray:
        return np.asarray(self.matrix.toarray(), dtype=np.float64)

    @property
    def sensitivity_l2(self) -> float:
        """Largest column L2 norm: the L2 sensitivity under add/remove-one-row."""
        m = self.matrix  # canonical CSR (no duplicate entries): sums per column, row by row
        if not m.nnz:
            return 0.0
        sq = np.bincount(m.indices, weights=m.data * m.data, minlength=m.shape[1])
        return float(np.sqrt(np.max(sq)))

    @property
    def sensitivity_l1(self) -> float:
        """Largest column L1 norm: the L1 sensitivity under add/remove-one-row."""
        m = self.matrix
        if not m.nnz:
            return 0.0
        return float(np.max(np.bincount(m.indices, weights=np.abs(m.data), minlength=m.shape[1])))

    def answer(self, histogram: FloatArray) -> FloatArray:
        """Exact answers ``W @ x`` on a histogram vector of ``domain.size`` cells."""
        x = np.asarray(histogram, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.domain.size:
            raise ValueError("histogram does not match the domain")
        return np.asarray(self.matrix @ x, dtype=np.float64)

    def row_keys(self) -> list[bytes]:
        """One exact key per query row (its domain, cells and weights): equal rows over equal
        domains have equal keys. Sparse: the cost follows the rows' nonzeros."""
        m = self.matrix
        head = _described(self.domain)
        data = np.ascontiguousarray(m.data + 0.0)  # -0.0 -> 0.0
        idx = np.ascontiguousarray(m.indices.astype(np.int64))
        out = []
        for i in range(m.shape[0]):
            lo, hi = int(m.indptr[i]), int(m.indptr[i + 1])
            out.append(head + b"|" + idx[lo:hi].tobytes() + b"|" + data[lo:hi].tobytes())
        return out


@functools.lru_cache(maxsize=256)
def projection(source: Domain, target: Domain) -> npt.NDArray[np.int64]:
    """For each cell of ``target``, the cell of ``source`` (a sub-product of it) it projects to."""
    axes = [target.axis(name) for name in source.names]
    if not axes:
        return np.zeros(target.size, dtype=np.int64)
    coords = np.unravel_index(np.arange(target.size), target.shape)
    out = np.asarray(np.ravel_multi_index([coords[ax] for ax in axes], source.shape), np.int64)
    out.flags.writeable = False
    return out


def lift(batch: QueryBatch, target: Domain) -> QueryBatch:
    """Express ``batch`` over ``target``'s domain, exactly, or raise ValueError.

    An attribute of the batch's domain that ``target`` lacks must be one the queries do not
    use (their weights are constant along it): it is dropped. An attribute of ``target`` that
    the batch's domain lacks is summed over: column ``j`` of the lifted matrix is the column of
    the cell that ``j`` projects to. The answer on the joint histogram then equals the answer on
    the marginal.
    """
    if batch.domain == target:
        return batch
    return QueryBatch(target, lifted_matrix(batch, target))


def lifted_matrix(batch: QueryBatch, target: Domain) -> sp.csr_array:
    """The matrix of :func:`lift` (without building, and hashing, a new batch)."""
    if batch.domain == target:
        return batch.matrix
    sizes = dict(zip(target.names, target.shape, strict=True))
    source = batch.domain
    kept = [a for a in source.attributes if a.name in sizes]
    if any(sizes[a.name] != a.size for a in kept):
        raise ValueError("an attribute has another number of cells in the target domain")
    matrix = batch.matrix
    if len(kept) < len(source.attributes):
        dense = batch.dense().reshape((batch.num_queries, *source.shape))
        for axis in reversed(range(len(source.attributes))):
            if source.attributes[axis].name not in sizes:
                first = np.take(dense, [0], axis=axis + 1)
                if not np.array_equal(dense, np.broadcast_to(first, dense.shape)):
                    raise ValueError("the queries use an attribute outside the target domain")
                dense = np.take(dense, 0, axis=axis + 1)
        matrix = sp.csr_array(dense.reshape(batch.num_queries, -1))
    proj = projection(Domain(tuple(kept)), target)
    return sp.csr_array(matrix[:, proj])
