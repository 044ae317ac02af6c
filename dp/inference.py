"""Inference over every release of an epoch: least squares on the atoms of the measurements.

Every noisy value an epoch releases is a *measurement* ``y = A x_D + noise`` of a marginal
``x_D`` of the epoch's histogram (the Matrix Mechanism's blocks, and every fresh online
release whose matrix was kept), with a known noise variance per row. A later statement ``q``
over a marginal ``D_q`` can be answered from *all* of them, without new noise: this is the
generalised least squares (the best linear unbiased estimator) of ``q x`` from the stacked
measurements, when ``q`` lies in their row space. Everything here is post-processing of
released values; whether a statement is answered so, and with which variance, depends only on
the measurement matrices and noise variances (never on the data).

**The region.** For a statement over ``D_q`` the estimator takes a region ``U``: ``D_q``'s
attributes, then, in a fixed order (nearest first: the fewest attributes ``U`` lacks, then the
smallest domain, then the oldest), every measurement, as long as ``U`` (the product of the
attributes) stays within :data:`UNION_MAX_CELLS` cells and the work of finding the atoms (cells
times measurements) within :data:`WORK_MAX`. (A measurement over other attributes still helps:
through the counts they share, a total at least.) The measurements
whose attributes lie in ``U`` are used; the others are left out. Leaving measurements out
keeps the estimator linear and unbiased, with its variance computed exactly; it is only less
precise than the one using every release.

**Atoms.** Over ``U``'s cells, two cells that every used measurement weighs alike (the same
column of its matrix, or both outside it) are indistinguishable: the measurements depend on
``x`` only through the sums ``z`` of its cells over these *atoms*. A query is answerable only
if it is constant on every atom (else its value depends on how counts split inside an atom,
which nothing measured) and, on the atoms, in the row space of the stacked measurements. Then
``q x = q_a z``, and since ``z`` ranges over all vectors as ``x`` does, the GLS on the atoms is
the best linear unbiased estimator:

    H = sum_i A_i^T A_i / v_i,   h = sum_i A_i^T y_i / v_i   (over atoms),
    q x_hat = q_a H^+ h,         Var = q_a H^+ q_a^T.

The number of atoms is what the measurements distinguish, not the size of ``U``: a region of
a million cells measured by a few marginals has a few hundred atoms. At most
:data:`ATOMS_MAX` atoms are kept (the furthest measurements are left out first). One
eigendecomposition of ``H`` per region and set of measurements is kept (:class:`Inference`'s
cache), so statements over the same marginal reuse it until a new release joins.

**Consistency.** Answers computed from one region's estimate are consistent with each other
as linear functions of one vector ``z_hat``; with :data:`NON_NEGATIVE` (and at most
:data:`NNLS_MAX_ATOMS` atoms) they are computed from the projection of ``z_hat`` onto
``z >= 0`` in the norm of ``H`` (least squares with the
atoms' counts non-negative, as they are), so that within it a filtered count never exceeds the
count of its group. That projection is post-processing too; it moves the estimate towards the
truth in the ``H``-norm (a projection onto a convex set that contains the true ``z`` is
non-expansive), but it makes each answer slightly biased towards the feasible set. The
*stated* standard error stays that of the unprojected least squares: the data-independent
error the choice of source is made with (docs/privacy.md §4).

>>> import numpy as np
>>> from dp.domain import Domain, QueryBatch
>>> d = Domain.of(("a", 2), ("b", 2))
>>> by_a = QueryBatch.from_dense(Domain.of(("a", 2)), [[1, 0], [0, 1]])
>>> by_b = QueryBatch.from_dense(Domain.of(("b", 2)), [[1, 0], [0, 1]])
>>> inf = Inference().add(Measurement.of_batch(0, by_a, np.array([10.0, 20.0]), 1.0))
>>> inf = inf.add(Measurement.of_batch(1, by_b, np.array([14.0, 17.0]), 1.0))
>>> total = QueryBatch.from_dense(Domain.of(("a", 2)), [[1, 1]])
>>> ans, var = inf.estimate(total)
>>> round(float(ans[0]), 6), round(float(var[0]), 6)
(30.5, 1.0)
>>> inf.estimate(QueryBatch.from_dense(d, [[1, 0, 0, 0]])) is None  # a cell: not measured
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.optimize

from dp.domain import Domain, FloatArray, QueryBatch
from dp.marginals import reduction
from dp.release import ROW_SPACE_RTOL

IntArray = npt.NDArray[np.int64]

#: The largest region (product of the attributes of the measurements used) enumerated.
UNION_MAX_CELLS = 1 << 21
#: ... and the work of finding its atoms at most this (region cells times measurements).
WORK_MAX = 1 << 24
#: The most atoms of one least-squares system (it is dense: ATOMS_MAX^2 entries).
ATOMS_MAX = 1024
#: Answers from the projection of the estimate onto non-negative atom counts ...
NON_NEGATIVE = True
#: ... for systems of at most this many atoms (the projection, a non-negative least squares,
#: costs about 0.5 s at 512 atoms and grows as their cube).
NNLS_MAX_ATOMS = 384
#: Solved systems kept (by region and measurements).
CACHE_SIZE = 16
#: Eigenvalues below this fraction of the largest are a direction nothing measured.
EIG_RTOL = 1e-12


@dataclass(frozen=True, slots=True, eq=False)
class Measurement:
    """One release ``y = matrix[:, labels] x_domain + noise`` (noise variance ``variance``
    per row): ``labels`` maps each cell of ``domain`` to a column of ``matrix`` (``-1``: the
    release does not read the cell). ``key``: its place among the epoch's releases."""

    key: int
    domain: Domain
    labels: IntArray
    matrix: FloatArray
    y: FloatArray
    variance: FloatArray
    #: ``matrix^T diag(1/variance) matrix`` and ``matrix^T (y / variance)``, once asked.
    _info: list[tuple[FloatArray, FloatArray]] = field(default_factory=list, repr=False)

    @staticmethod
    def of_columns(
        key: int,
        domain: Domain,
        labels: npt.ArrayLike,
        matrix: npt.ArrayLike,
        y: npt.ArrayLike,
        variance: float | npt.ArrayLike,
    ) -> Measurement:
        a = np.asarray(matrix, dtype=np.float64)
        yy = np.asarray(y, dtype=np.float64).reshape(-1)
        v = np.broadcast_to(np.asarray(variance, dtype=np.float64), yy.shape).copy()
        lab = np.asarray(labels, dtype=np.int64).reshape(-1)
        if a.ndim != 2 or a.shape[0] != yy.shape[0] or lab.shape[0] != domain.size:
            raise ValueError("a measurement needs one label per cell and one value per row")
        if not (np.all(v > 0) and np.all(np.isfinite(v))):
            raise ValueError("every noise variance must be positive and finite")
        return Measurement(key, domain, lab, a, yy, v)

    @staticmethod
    def of_batch(
        key: int, batch: QueryBatch, y: npt.ArrayLike, variance: float | npt.ArrayLike
    ) -> Measurement:
        """An online release of ``batch`` (its identical columns merged)."""
        red, w_r = reduction(batch.domain, batch.matrix)
        return Measurement.of_columns(key, batch.domain, red.groups, w_r.toarray(), y, variance)

    def information(self) -> tuple[FloatArray, FloatArray]:
        if not self._info:
            aw = self.matrix / self.variance[:, None]
            self._info.append((aw.T @ self.matrix, aw.T @ self.y))
        return self._info[0]


def cells_of(source: Domain, region: Domain, cells: IntArray | None = None) -> IntArray:
    """For each cell of ``region`` (or those of ``cells``), the cell of ``source`` (whose
    attributes are among ``region``'s) it projects to; one attribute at a time (no array per
    attribute is kept)."""
    idx = np.arange(region.size, dtype=np.int64) if cells is None else cells
    out = np.zeros(idx.shape[0], dtype=np.int64)
    strides = {}
    step = 1
    for a in reversed(region.attributes):
        strides[a.name] = step
        step *= a.size
    for a in source.attributes:
        out *= a.size
        out += (idx // strides[a.name]) % a.size
    return out


_MISSING = object()


@dataclass(frozen=True, slots=True, eq=False)
class _System:
    """One region's least squares: its atoms (``atom`` per region cell), each used
    measurement's label per atom, and the eigen-factor of ``H``."""

    region: Domain
    atom: IntArray
    basis: FloatArray  # eigenvectors of H kept (n_atoms x r)
    coef: FloatArray  # basis / sqrt(eigenvalues): Var(q z_hat) = ||q coef||^2
    z_hat: FloatArray  # the estimate (projected onto z >= 0 with NON_NEGATIVE)
    #: The measurements offered (by key) and whether every one was taken; ``H`` and ``h``:
    #: a later system over more measurements of the region starts from them.
    offered: frozenset[int] = frozenset()
    complete: bool = False
    h_mat: FloatArray | None = None
    h_vec: FloatArray | None = None


class Inference:
    """All measurements of an epoch (append-only; :meth:`add` returns a new value sharing the
    cache of solved systems), answering a batch by least squares over the atoms of a region
    (see the module doc). Pure post-processing; thread-safe."""

    __slots__ = ("_cache", "measurements")

    def __init__(
        self,
        measurements: Sequence[Measurement] = (),
        cache: dict[tuple[object, ...], _System | None] | None = None,
    ) -> None:
        self.measurements = tuple(measurements)
        self._cache: dict[tuple[object, ...], _System | None] = {} if cache is None else cache

    def add(self, m: Measurement) -> Inference:
        if m.domain.derived:
            raise ValueError("a measurement over a derived domain is no marginal's")
        return Inference((*self.measurements, m), self._cache)

    def __len__(self) -> int:
        return len(self.measurements)

    def estimate(self, batch: QueryBatch) -> tuple[FloatArray, FloatArray] | None:
        """Answers and variances of every row of ``batch`` from the measurements, or None
        when a row is not answerable (outside the row space, or nothing measured it)."""
        if not self.measurements or batch.num_queries == 0 or batch.domain.derived:
            return None  # (a derived domain is no marginal of the histogram: dp.domain)
        region, used = self._region(batch.domain)
        if not used:
            return None
        system = self._system(region, used)
        if system is None:
            return None
        return _answer(system, batch)

    def _region(self, target: Domain) -> tuple[Domain, tuple[Measurement, ...]]:
        """The region for statements over ``target`` and the measurements it uses."""
        region = target
        used: list[Measurement] = []
        left = list(self.measurements)
        grown = True
        while grown:
            grown = False
            names = set(region.names)
            left.sort(key=lambda m: (len(set(m.domain.names) - names), m.domain.size, m.key))
            for m in list(left):
                try:
                    bigger = region.union(m.domain)
                except ValueError:
                    left.remove(m)
                    continue
                if bigger.size > UNION_MAX_CELLS or bigger.size * (len(used) + 1) > WORK_MAX:
                    continue
                left.remove(m)
                used.append(m)
                if bigger.size != region.size:
                    region = bigger
                    grown = True
                    break  # re-sort: nearer measurements now
                names = set(region.names)
        return region, tuple(used)

    def _system(self, region: Domain, used: tuple[Measurement, ...]) -> _System | None:
        keys = frozenset(m.key for m in used)
        key = (region, tuple(sorted(keys)))
        cache = self._cache
        found = cache.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        # a system of the region over fewer of these measurements, all taken: extended.
        # (Every step is one operation on the dict, atomic in CPython: two threads asking at
        # once compute the same system, and one of them is kept.)
        base = next(
            (
                s
                for (r, _), s in reversed(list(cache.items()))
                if r == region and s is not None and s.complete and s.offered <= keys
            ),
            None,
        )
        system = _solve(region, used, base)
        cache[key] = system
        while len(cache) > CACHE_SIZE:
            try:
                del cache[next(iter(cache))]
            except (KeyError, StopIteration, RuntimeError):
                break
        return system


def _atoms(
    region: Domain, used: Sequence[Measurement], start: IntArray | None = None
) -> tuple[IntArray, int, tuple[Measurement, ...]]:
    """Each region cell's atom, the number of atoms, and the measurements taken: in order
    (nearest first), each one that keeps the atoms within :data:`ATOMS_MAX` (from the atoms
    ``start`` of others: a measurement that splits none leaves every atom's number as it
    was)."""
    atom = np.zeros(region.size, dtype=np.int64) if start is None else start
    count = int(atom.max()) + 1
    taken = []
    for m in used:
        lab = m.labels[cells_of(m.domain, region)] + 1
        combined = atom * (int(lab.max()) + 1) + lab
        _, inverse = np.unique(combined, return_inverse=True)
        more = int(inverse.max()) + 1
        if more > ATOMS_MAX:
            continue  # it would distinguish too much: left out
        atom, count = inverse.reshape(-1).astype(np.int64), more
        taken.append(m)
    # number the atoms by their first cell: the same numbers however they were found
    first = np.full(count, region.size, dtype=np.int64)
    np.minimum.at(first, atom, np.arange(region.size, dtype=np.int64))
    rank = np.empty(count, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(count, dtype=np.int64)
    return rank[atom], count, tuple(taken)


def _solve(
    region: Domain, used: tuple[Measurement, ...], base: _System | None = None
) -> _System | None:
    """The least squares over the atoms of ``used`` in ``region`` (None: none fits). From
    ``base`` (a system of the region over some of them, every one taken) when the others are
    later releases, split no atom and are all taken: its ``H`` plus theirs, summed in the
    same order, so the same system, to the last bit, as made anew (what every proxy process
    and every replay of the ledger decides from)."""
    if base is not None and base.h_mat is not None and base.h_vec is not None:
        new = tuple(m for m in used if m.key not in base.offered)
        atom, n, taken = _atoms(region, new, base.atom)
        later = all(m.key > max(base.offered, default=-1) for m in new)
        if later and len(taken) == len(new) and n == base.h_mat.shape[0]:
            h_mat, h_vec = base.h_mat.copy(), base.h_vec.copy()
            _informed(h_mat, h_vec, region, atom, n, new)
            return _factored(region, atom, h_mat, h_vec, frozenset(m.key for m in used), True)
    atom, n, taken = _atoms(region, used)
    if not taken:
        return None
    h_mat, h_vec = np.zeros((n, n)), np.zeros(n)
    _informed(h_mat, h_vec, region, atom, n, taken)
    complete = len(taken) == len(used)
    return _factored(region, atom, h_mat, h_vec, frozenset(m.key for m in used), complete)


def _informed(
    h_mat: FloatArray,
    h_vec: FloatArray,
    region: Domain,
    atom: IntArray,
    n: int,
    used: Sequence[Measurement],
) -> None:
    """Add each measurement's information (over the atoms) to ``H`` and ``h``, in place."""
    first = np.full(n, -1, dtype=np.int64)
    first[atom[::-1]] = np.arange(region.size - 1, -1, -1, dtype=np.int64)
    for m in sorted(used, key=lambda m: m.key):  # (one order of the sums, however made)
        lab = m.labels[cells_of(m.domain, region, first)]
        g, b = m.information()
        on = np.flatnonzero(lab >= 0)
        cols = lab[on]
        h_mat[np.ix_(on, on)] += g[np.ix_(cols, cols)]
        h_vec[on] += b[cols]


def _factored(
    region: Domain,
    atom: IntArray,
    h_mat: FloatArray,
    h_vec: FloatArray,
    offered: frozenset[int],
    complete: bool,
) -> _System:
    lam, vec = scipy.linalg.eigh((h_mat + h_mat.T) / 2.0, check_finite=False)
    keep = lam > max(float(lam[-1]), 0.0) * EIG_RTOL if lam.size else np.zeros(0, bool)
    basis = np.ascontiguousarray(vec[:, keep])
    coef = basis / np.sqrt(lam[keep])
    z_hat = coef @ (coef.T @ h_vec)
    if NON_NEGATIVE and z_hat.shape[0] <= NNLS_MAX_ATOMS and np.any(z_hat < 0):
        z_hat = _non_negative(z_hat, basis, lam[keep])
    return _System(region, atom, basis, coef, z_hat, offered, complete, h_mat, h_vec)


def _non_negative(z_hat: FloatArray, basis: FloatArray, lam: FloatArray) -> FloatArray:
    """The nearest ``z >= 0`` to ``z_hat`` in the norm of ``H`` on its range, and to ``z_hat``
    itself (by a factor 1e-9 smaller) off it: ``min ||L (z - z_hat)||^2`` with ``L`` stacking
    ``sqrt(lam) basis^T`` and a small identity (so the problem is strictly convex)."""
    n = z_hat.shape[0]
    scale = math.sqrt(float(lam.max())) if lam.size else 1.0
    ell = np.vstack([np.sqrt(lam)[:, None] * basis.T, 1e-9 * scale * np.eye(n)])
    z, _ = scipy.optimize.nnls(ell, ell @ z_hat, maxiter=50 * n)
    return np.asarray(z, dtype=np.float64)


def _answer(system: _System, batch: QueryBatch) -> tuple[FloatArray, FloatArray] | None:
    """``batch``'s rows over the system's atoms, answered; None when a row is not constant on
    an atom (its identical columns merged, two columns of one atom differ in some row) or is
    not in the row space."""
    red, q_r = reduction(batch.domain, batch.matrix)
    q = np.hstack([q_r.toarray(), np.zeros((batch.num_queries, 1))])  # last: weight 0
    base = q.shape[1]
    lab = red.groups[cells_of(batch.domain, system.region)]  # each region cell's column
    pairs = np.unique(system.atom * base + (lab % base))  # (-1: the zero column)
    n = system.basis.shape[0]
    if pairs.shape[0] != n:
        return None  # an atom holds cells the batch weighs differently
    q_atoms = q[:, pairs % base]  # (pairs sorted by atom: one per atom, in order)
    proj = q_atoms @ system.basis
    resid = q_atoms - proj @ system.basis.T
    norms = np.einsum("ij,ij->i", q_atoms, q_atoms)
    if np.any(np.einsum("ij,ij->i", resid, resid) > ROW_SPACE_RTOL**2 * norms):
        return None
    t = q_atoms @ system.coef
    return q_atoms @ system.z_hat, np.einsum("ij,ij->i", t, t)
