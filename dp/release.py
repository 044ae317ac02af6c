"""Measurements of a strategy and inference over them (least squares, variances, row space).

A :class:`Release` is one noisy measurement ``y = A x + noise`` of a strategy ``A`` (``p x n``)
on the exact histogram ``x``, with a known noise variance per row. Anything computed from a
release is post-processing and costs no privacy. The estimator is (generalised) least squares:
for a query ``q`` in the row space of ``A`` the answer ``q x_hat`` is unbiased, with variance
``q (A^T Sigma^-1 A)^+ q^T``; a query outside the row space is refused (its least-squares
answer would be biased by an unknown amount). Derivation and the factorisation: docs/mm.md §4.

>>> import numpy as np
>>> from dp.noise import SeededSampler
>>> from dp.strategy import optimize_strategy
>>> w = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
>>> s = optimize_strategy(w)
>>> r = measure(s, np.array([5.0, 3.0, 2.0, 7.0]), 1e-9, SeededSampler(0))
>>> answers, variances = r.estimate(w)
>>> np.round(answers, 6).tolist()
[8.0, 5.0]
>>> r.can_answer(np.array([[1.0, 2.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]])).tolist()
[True, False]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.linalg as sla
import scipy.sparse as sp

from dp.domain import FloatArray
from dp.errors import InternalError
from dp.noise import Sampler
from dp.strategy import Strategy, svd, thin_svd, unique_columns

# A query is in the row space when its residual after projection is at most this fraction of
# its norm (both in the group-constant part and in the reduced coordinates).
ROW_SPACE_RTOL = 1e-8
# Above this many distinct columns the per-query work follows the queries' support instead of
# the domain (docs/mm.md §4b): O(nnz * (r + SKETCH)) per batch instead of O(k n_r r).
LARGE_DOMAIN = 4096
# Columns of the random sketch that certifies the part of a residual outside a query's support.
SKETCH = 8


class NotInRowSpaceError(InternalError):
    """A query outside the row space of a release was asked of it.

    Callers check :meth:`Release.can_answer` first (and answer such a query with fresh noise);
    reaching a client this is a bug, so it renders as an internal error (``XX000``).
    """


@dataclass(frozen=True, slots=True)
class _Factor:
    """The once-per-release least-squares precomputation (reduced coordinates, docs/mm.md §4).

    ``stacked`` is ``n_r x (c + r + 1)``: ``c`` columns for the row-space test (an orthonormal
    basis of the complement of the row space when that is cheaper, else of the row space
    itself), then ``r`` columns ``G`` with ``var(q_r x_hat) = ||q_r G||^2``, then ``x_hat``.
    One matrix product per call answers, tests and prices a batch of queries.
    """

    groups: npt.NDArray[np.intp]  # full cell -> reduced column (identical columns of A merged)
    counts: FloatArray  # cells per reduced column
    merged: bool  # whether any two columns of A were merged
    order: npt.NDArray[np.intp]  # full cells sorted by reduced column
    starts: npt.NDArray[np.intp]  # where each reduced column's run starts in ``order``
    stacked: FloatArray
    num_check: int  # c
    complement: bool  # whether the first c columns span the complement of the row space
    # Large domains (n_r > LARGE_DOMAIN), docs/mm.md §4b; ``stacked`` is then
    # ``n_r x (r + SKETCH)``: an orthonormal basis ``Q`` of the row space, then the sketch ``S``.
    large: bool = False
    beta: FloatArray | None = None  # answer of q_r = z Q^T is z @ beta
    var_map: FloatArray | None = None  # r x r: Var = ||z var_map||^2
    sketch_proj: FloatArray | None = None  # r x SKETCH: Q^T S


def _sq_norms(m: FloatArray) -> FloatArray:
    out: FloatArray = np.einsum("ij,ij->i", m, m)
    return out


def _as_rows(matrix: Any, n: int) -> FloatArray:
    q = matrix.toarray() if sp.issparse(matrix) else matrix
    q = np.array(q, dtype=np.float64, ndmin=2)
    if q.ndim != 2 or q.shape[1] != n:
        raise ValueError("queries must be a k x n matrix over the release's domain")
    if not np.all(np.isfinite(q)):
        raise ValueError("query weights must be finite")
    return q


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Release:
    """A stored measurement ``y = matrix @ x + noise`` with independent noise per row.

    ``matrix`` is ``p x n``, ``y`` has ``p`` values, ``noise_variance`` is the variance of each
    row's noise (``sigma^2`` for Gaussian, ``2 b^2`` for Laplace). The arrays are stored
    read-only. Estimates are generalised least squares (rows weighted by 1/variance), which is
    the best linear unbiased estimator; the factorisation is computed once, at construction.

    The privacy guarantee is that of the measurement that produced ``y`` (see :func:`measure`);
    everything a release answers is post-processing of ``y``.
    """

    matrix: FloatArray
    y: FloatArray
    noise_variance: FloatArray
    _factor: _Factor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        a = np.array(self.matrix, dtype=np.float64, copy=True)
        y = np.array(self.y, dtype=np.float64, copy=True).reshape(-1)
        v = np.array(self.noise_variance, dtype=np.float64, copy=True).reshape(-1)
        if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
            raise ValueError("a release needs a p x n strategy matrix with p, n >= 1")
        if y.shape[0] != a.shape[0] or v.shape[0] != a.shape[0]:
            raise ValueError("y and noise_variance need one value per strategy row")
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(y))):
            raise ValueError("the strategy and the measurement must be finite")
        if not np.all((v > 0.0) & np.isfinite(v)):
            raise ValueError("every noise variance must be positive and finite")
        for arr in (a, y, v):
            arr.flags.writeable = False
        object.__setattr__(self, "matrix", a)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "noise_variance", v)
        object.__setattr__(self, "_factor", _factorise(a, y, v))

    @property
    def num_cells(self) -> int:
        return int(self.matrix.shape[1])

    def solve(self, matrix: Any) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        """Answers, variances, and whether each query row lies in the row space (the answer
        and variance of a row outside it mean nothing)."""
        f = self._factor
        if f.large:
            return _solve_large(f, matrix, self.num_cells)
        q = _as_rows(matrix, self.num_cells)
        if f.merged:
            # A query in the row space is constant on every group of identical columns.
            if q.shape[0] == 1:
                sums = np.bincount(f.groups, weights=q[0], minlength=f.counts.shape[0])[None, :]
            else:
                sums = np.add.reduceat(q[:, f.order], f.starts, axis=1)
            q_r = sums / f.counts
            resid = q - q_r[:, f.groups]
            ok = _sq_norms(resid) <= ROW_SPACE_RTOL**2 * _sq_norms(q)
        else:
            q_r = q[:, f.order]
            ok = np.ones(q.shape[0], dtype=bool)
        z = q_r @ f.stacked
        c = f.num_check
        if f.complement:
            resid2 = _sq_norms(z[:, :c])
        else:
            resid2 = _sq_norms(q_r - z[:, :c] @ f.stacked[:, :c].T)
        ok &= resid2 <= ROW_SPACE_RTOL**2 * _sq_norms(q_r)
        return z[:, -1], _sq_norms(z[:, c:-1]), ok

    def can_answer(self, matrix: Any) -> npt.NDArray[np.bool_]:
        """Per query row: is it in the row space of the release (answerable without bias)?

        The test is a relative residual: the part of the row outside the row space has at most
        ``ROW_SPACE_RTOL`` times the row's norm.
        """
        return self.solve(matrix)[2]

    def estimate(self, matrix: Any) -> tuple[FloatArray, FloatArray]:
        """Unbiased least-squares answers to the query rows and their variances.

        ``matrix`` is ``k x n`` (dense, scipy sparse, or one row as a vector). Raises
        :class:`NotInRowSpaceError` if any row is outside the release's row space.
        """
        answers, variances, ok = self.solve(matrix)
        if not np.all(ok):
            raise NotInRowSpaceError(
                "a query outside the row space of the stored release cannot be answered from it"
            )
        return answers, variances

    def variance(self, matrix: Any) -> FloatArray:
        """Variance of each query row's estimate (``inf`` for a row outside the row space)."""
        _, variances, ok = self.solve(matrix)
        return np.where(ok, variances, np.inf)


def _as_triplets(
    matrix: Any, n: int
) -> tuple[int, npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray]:
    """``(k, rows, cols, values)`` of the nonzero query weights, sorted by row (then column
    for dense input), duplicates summed; O(nnz) for sparse input, one scan for dense input."""
    if sp.issparse(matrix):
        q = sp.csr_matrix(matrix, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != n:
            raise ValueError("queries must be a k x n matrix over the release's domain")
        q.sum_duplicates()
        k = int(q.shape[0])
        rows = np.repeat(np.arange(k, dtype=np.intp), np.diff(q.indptr))
        cols, vals = q.indices.astype(np.intp), np.asarray(q.data, dtype=np.float64)
    else:
        dense = np.asarray(matrix, dtype=np.float64)
        if dense.ndim == 1:
            dense = dense.reshape(1, -1)
        if dense.ndim != 2 or dense.shape[1] != n:
            raise ValueError("queries must be a k x n matrix over the release's domain")
        k = int(dense.shape[0])
        rows, cols = np.nonzero(dense)
        rows, cols = rows.astype(np.intp), cols.astype(np.intp)
        vals = dense[rows, cols]
    if not np.all(np.isfinite(vals)):
        raise ValueError("query weights must be finite")
    keep = vals != 0.0
    if not np.all(keep):
        rows, cols, vals = rows[keep], cols[keep], vals[keep]
    return k, rows, cols, vals


def _row_sums(values: FloatArray, rows: npt.NDArray[np.intp], k: int) -> FloatArray:
    out = np.bincount(rows, weights=values, minlength=k)
    return np.asarray(out, dtype=np.float64)


def group_means(
    rows: npt.NDArray[np.intp],
    groups: npt.NDArray[np.intp],
    vals: FloatArray,
    counts: FloatArray,
    k: int,
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], FloatArray, FloatArray]:
    """Queries given as nonzero triplets (row, group of the cell, weight), over cells merged in
    groups of ``counts`` cells: for each (row, group) pair met, its row, group and mean weight
    over the group's cells; and for each of the ``k`` rows its squared within-group residual,
    exactly, as a sum of nonnegative terms: ``sum_{j in S} (q_j - mean_g)^2 +
    sum_g (n_g - |S cap g|) mean_g^2`` (zero when the row is constant on every group)."""
    n_r = counts.shape[0]
    pair, inv = np.unique(rows * n_r + groups, return_inverse=True)
    inv = inv.reshape(-1)
    sums = np.bincount(inv, weights=vals, minlength=pair.shape[0])
    hits = np.bincount(inv, minlength=pair.shape[0]).astype(np.float64)
    q_rows, q_idx = pair // n_r, pair % n_r
    q_val = sums / counts[q_idx]
    inside = _row_sums((vals - q_val[inv]) ** 2, rows, k)
    outside = _row_sums((counts[q_idx] - hits) * q_val * q_val, q_rows, k)
    return q_rows, q_idx, q_val, inside + outside


def _solve_large(
    f: _Factor, matrix: Any, n: int
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """The support-proportional path (docs/mm.md §4b)."""
    assert f.beta is not None and f.var_map is not None and f.sketch_proj is not None
    k, rows, cols, vals = _as_triplets(matrix, n)
    ok = np.ones(k, dtype=bool)
    grp = f.groups[cols]
    if f.merged:
        q_rows, q_idx, q_val, resid = group_means(rows, grp, vals, f.counts, k)
        ok &= resid <= ROW_SPACE_RTOL**2 * _row_sums(vals * vals, rows, k)
    else:
        q_rows, q_idx, q_val = rows, grp, vals
    r = f.var_map.shape[0]
    zs = np.zeros((k, f.stacked.shape[1]))
    resid_on = np.zeros(k)
    # One gather of the stacked rows per query row; then z = q_S [Q_S | S_S] and the exact
    # on-support residual q_S - z Q_S^T (no cancellation).
    bounds = np.searchsorted(q_rows, np.arange(k + 1))
    for i in range(k):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        if lo == hi:
            continue
        first, last = int(q_idx[lo]), int(q_idx[hi - 1]) + 1
        if not f.merged and last - first <= 2 * (hi - lo) + 64:
            # Support within a short run of cells (cells are stored in their own order when
            # nothing is merged): a contiguous slice, no gather; the residual is then exact on
            # the whole run.
            dense = np.zeros(last - first)
            dense[q_idx[lo:hi] - first] = q_val[lo:hi]
            block = f.stacked[first:last]
            zs[i] = dense @ block
            on_support = dense - block[:, :r] @ zs[i, :r]
        else:
            gathered = f.stacked[q_idx[lo:hi]]
            zs[i] = q_val[lo:hi] @ gathered
            on_support = q_val[lo:hi] - gathered[:, :r] @ zs[i, :r]
        resid_on[i] = float(on_support @ on_support)
    z, sk = zs[:, :r], zs[:, r:]
    # Off the support, through the sketch S: E ||(q_r - z Q^T) S||^2 = SKETCH ||q_r - z Q^T||^2.
    lim = ROW_SPACE_RTOL**2 * _row_sums(q_val * q_val, q_rows, k)
    ok &= resid_on <= lim
    ok &= _sq_norms(sk - z @ f.sketch_proj) / SKETCH <= lim
    return z @ f.beta, _sq_norms(z @ f.var_map), ok


def _factorise(a: FloatArray, y: FloatArray, v: FloatArray) -> _Factor:
    """Merge identical columns, whiten the rows, and take one SVD (docs/mm.md §4)."""
    cols, groups = unique_columns(a)
    n_r = cols.shape[0]
    counts = np.bincount(groups, minlength=n_r).astype(np.float64)
    order = np.argsort(groups, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts[:-1]))).astype(np.intp)
    scale = 1.0 / np.sqrt(v)
    aw = cols.T * scale[:, None]
    if n_r > LARGE_DOMAIN:
        return _factorise_large(aw, y * scale, groups, counts, order, starts)
    # The complement of the row space costs n_r - r columns, the row space itself 2r (project
    # and subtract): keep whichever is smaller.
    complement = n_r - min(aw.shape) < 2 * min(aw.shape)
    u, sv, vt = svd(aw, full_matrices=complement)
    if sv.size == 0 or sv[0] == 0.0:
        r = 0
    else:
        r = int(np.sum(sv > sv[0] * max(aw.shape) * np.finfo(np.float64).eps))
    coef = vt[:r].T / sv[:r]
    x_hat = coef @ (u[:, :r].T @ (y * scale))
    check = vt[r:].T if complement else vt[:r].T
    return _Factor(
        groups=groups,
        counts=counts,
        merged=n_r < a.shape[1],
        order=order,
        starts=starts,
        stacked=np.ascontiguousarray(np.hstack([check, coef, x_hat[:, None]])),
        num_check=check.shape[1],
        complement=complement,
    )


def _factorise_large(
    aw: FloatArray,
    yw: FloatArray,
    groups: npt.NDArray[np.intp],
    counts: FloatArray,
    order: npt.NDArray[np.intp],
    starts: npt.NDArray[np.intp],
) -> _Factor:
    """docs/mm.md §4b: an orthonormal basis ``Q`` (n_r x r) of the row space of the whitened
    reduced matrix ``A~ = B Q^T`` (``B = A~ Q``, p x r), and ``B^+`` through the SVD of ``B``:
    for ``q_r = z Q^T`` the GLS answer is ``z B^+ y~`` and its variance ``||z B^+||^2``."""
    n_r = aw.shape[1]
    _, sv, vt = thin_svd(aw)
    r = int(np.sum(sv > sv[0] * max(aw.shape) * np.finfo(np.float64).eps)) if sv[0] > 0 else 0
    basis = vt[:r].T
    for _ in range(2 if r else 0):  # re-orthonormalise (CholeskyQR2): same span
        chol = np.linalg.cholesky(basis.T @ basis)
        basis = sla.solve_triangular(chol, basis.T, lower=True, check_finite=False).T
    b = aw @ basis
    # The basis must span every row of A~ to rounding (thin_svd's Gram route could drop a
    # direction with a tiny singular value): verify, else take the exact QR route.
    tol = 1e3 * np.finfo(np.float64).eps * max(aw.shape) * float(np.max(np.abs(aw)))
    if not float(np.max(np.abs(aw - b @ basis.T))) <= tol:
        _, sv, vt = thin_svd(aw, exact=True)
        r = int(np.sum(sv > sv[0] * max(aw.shape) * np.finfo(np.float64).eps))
        basis = vt[:r].T
        b = aw @ basis
    ub, sb, zbt = svd(b)
    var_map = zbt.T / sb
    beta = var_map @ (ub.T @ yw)
    n = groups.shape[0]
    merged = n_r < n
    if not merged:  # store the rows in cell order: a query's support is then often a run
        basis, groups = basis[groups], np.arange(n, dtype=np.intp)
        order, starts = groups, groups
    seed = int(np.sum(np.ascontiguousarray(yw).view(np.uint64) % np.uint64(1 << 31)))
    sketch = np.random.default_rng(seed).standard_normal((n_r, SKETCH))
    return _Factor(
        groups=groups,
        counts=counts,
        merged=merged,
        order=order,
        starts=starts,
        stacked=np.ascontiguousarray(np.hstack([basis, sketch])),
        num_check=0,
        complement=False,
        large=True,
        beta=beta,
        var_map=var_map,
        sketch_proj=basis.T @ sketch,
    )


def measure(
    strategy: Strategy,
    histogram: npt.ArrayLike,
    noise_scale: float,
    sampler: Sampler,
    *,
    kind: Literal["gaussian", "laplace"] = "gaussian",
) -> Release:
    """Release ``y = A x + noise`` for the strategy ``A`` on the exact histogram ``x``.

    ``noise_scale`` is the per-row noise scale, computed by the caller as the strategy's
    recomputed sensitivity times the unit scale of its accountant: the standard deviation
    ``sigma`` for ``kind="gaussian"``, the Laplace ``b`` for ``kind="laplace"``.

    Guarantee (add/remove-one-row neighbours, which change one cell of ``x`` by one):

    - Gaussian: the release is ``mu``-GDP with ``mu = Delta2(A) / sigma``
      (``Delta2 = strategy.sensitivity_l2``, the largest column L2 norm), hence
      ``(epsilon, delta(epsilon))``-DP on the GDP curve
      ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Dong, Roth & Su 2019,
      Corollary 2.13; equivalently the Analytic Gaussian Mechanism, Balle & Wang 2018, Thm 8).
    - Laplace: the release is ``epsilon``-DP with ``epsilon = Delta1(A) / b``
      (``Delta1 = strategy.sensitivity_l1``; Dwork et al. 2006).

    Every answer later derived from the returned :class:`Release` is post-processing.
    All parameters are validated before the histogram is touched.
    """
    if kind not in ("gaussian", "laplace"):
        raise ValueError("kind must be 'gaussian' or 'laplace'")
    if not (np.isfinite(noise_scale) and noise_scale > 0.0):
        raise ValueError("noise_scale must be positive and finite")
    a = strategy.matrix
    x = np.asarray(histogram, dtype=np.float64).reshape(-1)
    if x.shape[0] != a.shape[1]:
        raise ValueError("the histogram does not match the strategy's domain")
    if kind == "gaussian":
        noise = sampler.gaussian(noise_scale, a.shape[0])
        var = noise_scale**2
    else:
        noise = sampler.laplace(noise_scale, a.shape[0])
        var = 2.0 * noise_scale**2
    y = a @ x + np.asarray(noise, dtype=np.float64).reshape(-1)
    return Release(matrix=a, y=y, noise_variance=np.full(a.shape[0], var))


def combine(releases: Sequence[Release]) -> Release:
    """One release from several over the same domain: the stacked system, estimated by
    generalised least squares (each row weighted by its own noise variance).

    The combined release answers every query in the sum of the row spaces, with the smallest
    variance any linear unbiased combination of the measurements achieves. Privacy: the
    releases were already made and paid for; combining them is post-processing.
    """
    items = list(releases)
    if not items or any(r.num_cells != items[0].num_cells for r in items):
        raise ValueError("combine needs at least one release, all over the same domain")
    return Release(
        matrix=np.vstack([r.matrix for r in items]),
        y=np.concatenate([r.y for r in items]),
        noise_variance=np.concatenate([r.noise_variance for r in items]),
    )
