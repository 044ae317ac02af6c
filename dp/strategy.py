"""Strategy optimisation for the Matrix Mechanism under Gaussian (L2) and Laplace (L1) noise.

A *strategy* ``A`` (``p x n``) is measured once, ``y = A x + noise``; the workload ``W``
(``m x n``, the predicted queries) is then answered as ``W A^+ y``. Under unit-scale noise per
unit of sensitivity the total squared error over the workload rows is

    err(A) = Delta2(A)^2 * ||W A^+||_F^2        (Delta2 = largest column L2 norm of A)

and minimising it is the convex program ``min trace(V X^-1) s.t. diag(X) <= 1, X psd`` with
``V = W^T W`` (Li et al. 2010; Yuan et al. 2016). The default solver is the dual fixed point of
PRIVACY-NOTES §5, derived in ``docs/mm.md``: weights ``d`` on the simplex give a certified lower
bound ``s(d)^2`` (``s(d) = ||W D^{1/2}||_*``) *and* a feasible strategy whose exact error is the
upper bound, so the relative gap is known at every step.

Privacy never depends on optimality: every :class:`Strategy` carries sensitivities recomputed
from the returned matrix itself, and those are what the caller must scale noise by.

>>> import numpy as np
>>> w = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
>>> s = optimize_strategy(w)
>>> s.matrix.shape[1], round(s.sensitivity_l2, 12), s.gap <= 1e-3
(3, 1.0, True)
>>> bool(s.expected_error < identity_strategy(3, workload=w).expected_error)
True
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.linalg as sla

from dp.domain import FloatArray
from dp.errors import InternalError

IntArray = npt.NDArray[np.intp]

# Largest acceptable max|R A - W| relative to max|W|: above it the answers from the release
# would be biased, which is a bug (the strategy is built inside the row space of W).
_UNBIASED_RTOL = 1e-8
# The multiplicative update's exponent: grown while s(d) increases, halved otherwise.
_OMEGA_MAX = 8.0
_OMEGA_GROW = 1.25
# Weights are floored relative to their maximum so that W D W^T stays positive definite.
_D_FLOOR = 1e-13
#: The largest dense matrix (rows x columns) a baseline strategy or the fallback builds: 32 MiB,
#: as large as a block's reduced workload may be (dp.marginals.MAX_BLOCK_ENTRIES). A baseline
#: over more cells (the identity of n cells is n x n) is not a candidate; the optimised
#: strategy, with rank(W) rows, always fits when the workload does.
MAX_DENSE_ENTRIES = 1 << 22
# Without a clock (the pure default), ``time_limit`` is converted into a deterministic work
# budget at this nominal rate: one solver step costs ~ 4 k^2 n_r + 6 k^3 flops.
NOMINAL_FLOPS_PER_SECOND = 1e10
#: The solver's defaults: the certified relative gap it stops at, and its most steps.
TOL = 1e-3
MAX_ITER = 100_000
#: The breakdowns of the solver's numerics after which :func:`_safe_strategy` is used instead.
_NUMERICAL_FAILURES = (np.linalg.LinAlgError, InternalError, FloatingPointError)
# The symmetry-class phase (docs/mm.md §3b) is used when the k x k Gram matrices of the classes
# take no more memory than the factor F itself (n_c k <= n_r), and classes are actually merged.
_CLASS_ROUNDS = 32  # at most this many colour-refinement rounds
# _thin_svd's Gram shortcut: kept eigenvalues at least this fraction of the largest, the rest
# at most this many p * eps of it (else the exact QR route).
_GRAM_KEEP = 1e-8
_GRAM_NOISE = 1e3
#: A :class:`Strategy`'s given sensitivity may be below the one recomputed from its matrix by
#: at most this relative amount (rounding of the same norms computed another way).
SENSITIVITY_RTOL = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class Strategy:
    """A measurement strategy over the full domain and what is known about it.

    ``matrix`` is ``p x n`` (read-only). ``sensitivity_l2`` / ``sensitivity_l1`` are the largest
    column L2 / L1 norms of ``matrix`` (add/remove-one-row neighbours change one cell of the
    histogram by one): every constructor here computes them from the matrix, and construction
    checks any given value against the matrix, refusing (``ValueError``) one below the
    recomputed norm by more than the relative :data:`SENSITIVITY_RTOL` (an over-estimate is
    sound: noise calibrated to it is at least as private). ``expected_error`` is the total squared
    error over the workload rows for unit noise per unit of L2 sensitivity,
    ``Delta2(A)^2 ||W A^+||_F^2``. ``gap`` is the certified relative gap
    ``expected_error / lower_bound - 1`` to the optimum of the L2 program (``inf`` when no
    certificate is known, e.g. for baselines).
    """

    matrix: FloatArray
    sensitivity_l2: float
    sensitivity_l1: float
    gap: float
    expected_error: float

    def __post_init__(self) -> None:
        m = np.array(self.matrix, dtype=np.float64, copy=True)
        if m.ndim != 2:
            raise ValueError("a strategy matrix must be two-dimensional")
        m.flags.writeable = False
        object.__setattr__(self, "matrix", m)
        l2, l1 = sensitivities(m)
        for name, given, actual in (
            ("sensitivity_l2", self.sensitivity_l2, l2),
            ("sensitivity_l1", self.sensitivity_l1, l1),
        ):
            # "not >=" also refuses NaN
            if not float(given) >= actual * (1.0 - SENSITIVITY_RTOL):
                raise ValueError(
                    f"{name} = {given!r} is below the strategy matrix's own ({actual!r}): "
                    "noise calibrated to it would not be private"
                )

    @property
    def lower_bound(self) -> float:
        """The certified lower bound on the optimal L2 error, ``expected_error / (1 + gap)``."""
        return self.expected_error / (1.0 + self.gap) if math.isfinite(self.gap) else 0.0

    @property
    def expected_error_l1(self) -> float:
        """Total squared error for unit Laplace *scale* per unit of L1 sensitivity, divided by
        two (the Laplace variance is ``2 b^2``): ``Delta1(A)^2 ||W A^+||_F^2``.
        """
        if self.sensitivity_l2 == 0.0:
            return 0.0
        return self.expected_error * (self.sensitivity_l1 / self.sensitivity_l2) ** 2


# --------------------------------------------------------------------------------------------
# helpers


def _as_workload(workload: npt.ArrayLike) -> FloatArray:
    w = np.asarray(workload, dtype=np.float64)
    if w.ndim == 1:
        w = w.reshape(1, -1)
    if w.ndim != 2 or w.shape[1] == 0:
        raise ValueError("the workload must be an m x n matrix with n > 0")
    if not np.all(np.isfinite(w)):
        raise ValueError("the workload must have finite weights")
    if not np.any(w):
        raise ValueError("the workload has no nonzero query: there is nothing to optimise")
    return w


def sensitivities(matrix: FloatArray) -> tuple[float, float]:
    """Largest column L2 and L1 norms of ``matrix`` (its add/remove-one-row sensitivities)."""
    if matrix.size == 0:
        return 0.0, 0.0
    l2 = float(np.sqrt(np.max(np.einsum("ij,ij->j", matrix, matrix))))
    l1 = float(np.max(np.sum(np.abs(matrix), axis=0)))
    return l2, l1


def reduce_domain(workload: FloatArray) -> tuple[FloatArray, IntArray]:
    """Lossless domain reduction: drop cells no query touches, merge identical columns.

    Returns ``(W_r, groups)`` with ``W_r`` of shape ``m x n_r`` and ``groups[j]`` the reduced
    cell of full cell ``j`` (``-1`` for a dropped cell). ``W x = W_r x_r`` where ``x_r`` sums
    ``x`` over each group, and lifting a reduced strategy (copying column ``g`` to every cell of
    group ``g``, zeros on dropped cells) keeps its sensitivity and its error (docs/mm.md §3).
    """
    touched = np.flatnonzero(np.any(workload != 0.0, axis=0))
    cols, inverse = unique_columns(workload[:, touched])
    groups = np.full(workload.shape[1], -1, dtype=np.intp)
    groups[touched] = inverse
    return np.ascontiguousarray(cols.T), groups


def unique_columns(matrix: FloatArray) -> tuple[FloatArray, IntArray]:
    """The distinct columns of ``matrix`` (as rows, in a deterministic order) and, for every
    column, the index of its distinct column. Columns are compared bit for bit (after mapping
    ``-0.0`` to ``0.0``), which is exact for the copies made by :func:`lift`.
    """
    t = np.ascontiguousarray(matrix.T, dtype=np.float64) + 0.0
    if t.shape[1] == 0:
        return t[:1], np.zeros(t.shape[0], dtype=np.intp)
    # Hash every column's bit pattern, group by hash, and verify bit for bit that each column
    # equals its group's first column; on a (vanishingly unlikely) collision, sort exactly.
    bits = t.view(np.uint64)
    with np.errstate(over="ignore"):
        salt = splitmix(np.arange(t.shape[1], dtype=np.uint64))
        h = np.sum(splitmix(bits ^ salt), axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.intp)
    if not np.array_equal(bits, bits[first[inverse]]):
        keys = t.view(np.dtype((np.void, t.dtype.itemsize * t.shape[1]))).reshape(-1)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1).astype(np.intp)
    return t[first], inverse


def splitmix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64 finaliser, elementwise (wrapping uint64 arithmetic): a fixed hash."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out: npt.NDArray[np.uint64] = x ^ (x >> np.uint64(31))
    return out


def symmetry_classes(workload: FloatArray) -> tuple[IntArray, int]:
    """Colour refinement of the weighted bipartite graph (queries x cells) of ``workload``.

    Returns ``(classes, n_c)``: cells get the same class when refinement cannot tell them apart
    (same multiset of (query class, weight) and vice versa). Cells in one orbit of a
    permutation symmetry of ``W`` (``W P = Q W``, ``Q`` a row permutation) always share a
    class; the converse is not guaranteed, and multiset hashes can collide, so callers treat the
    classes as a *guess*, verified by the certificate (docs/mm.md §3b). Deterministic.
    """
    m, n = workload.shape
    bits = (np.ascontiguousarray(workload, dtype=np.float64) + 0.0).view(np.uint64)
    # Nonzero entries, once in column-major and once in row-major order, so that the multiset
    # hashes are segment sums (uint64 sums wrap, so the hash is order-independent).
    cj, ci = np.nonzero(workload.T)
    ri, rj = np.nonzero(workload)
    cv, rv = splitmix(bits[ci, cj]), splitmix(bits[ri, rj])
    col_seg = np.flatnonzero(np.concatenate(([True], cj[1:] != cj[:-1])))
    row_seg = np.flatnonzero(np.concatenate(([True], ri[1:] != ri[:-1])))
    col_has, row_has = cj[col_seg], ri[row_seg]
    row = np.zeros(m, dtype=np.uint64)
    col = np.zeros(n, dtype=np.uint64)
    n_row, n_col = 1, 1
    col_ids = np.zeros(n, dtype=np.intp)
    mult = np.uint64(0x2545F4914F6CDD1D)
    for _ in range(_CLASS_ROUNDS):
        with np.errstate(over="ignore"):
            col_sum = np.zeros(n, dtype=np.uint64)
            col_sum[col_has] = np.add.reduceat(splitmix(splitmix(row)[ci] ^ cv), col_seg)
            _, col_inv = np.unique(splitmix(col * mult + col_sum), return_inverse=True)
            col_ids = col_inv.reshape(-1).astype(np.intp)
            row_sum = np.zeros(m, dtype=np.uint64)
            row_sum[row_has] = np.add.reduceat(
                splitmix(splitmix(col_ids.astype(np.uint64))[rj] ^ rv), row_seg
            )
            _, row_inv = np.unique(splitmix(row * mult + row_sum), return_inverse=True)
        new_col, new_row = int(np.max(col_ids)) + 1, int(np.max(row_inv)) + 1
        if new_col == n_col and new_row == n_row:
            break
        n_col, n_row = new_col, new_row
        col = col_ids.astype(np.uint64)
        row = row_inv.reshape(-1).astype(np.uint64)
    return col_ids, int(np.max(col_ids)) + 1


def lift(reduced: FloatArray, groups: IntArray) -> FloatArray:
    """Undo :func:`reduce_domain` on a strategy: column ``groups[j]`` for cell ``j`` (0 if -1)."""
    full = np.zeros((reduced.shape[0], groups.shape[0]))
    keep = groups >= 0
    full[:, keep] = reduced[:, groups[keep]]
    return full


def thin_svd(a: FloatArray, *, exact: bool = False) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Thin SVD ``a = u diag(sv) vt`` (``sv`` descending), fast for a wide ``p x n`` matrix.

    For ``n > 2p`` the ``p x p`` Gram matrix is used when its spectrum has a clean gap (see
    below), singular values under the gap returned as exact zeros (their ``vt`` rows zero);
    otherwise, or with ``exact=True``, a QR of ``a^T`` then the SVD of the small factor.
    """
    p, n = a.shape
    if n <= 2 * p or p == 0:
        return svd(a)
    if exact:
        q, r = sla.qr(a.T, mode="economic", check_finite=False)
        ur, sv, zt = svd(r)
        return zt.T, sv, (q @ ur).T
    # The p x p Gram matrix is much cheaper; it is accurate enough when its spectrum splits
    # cleanly into "kept" eigenvalues (>= _GRAM_KEEP * max, so that V = U^T a / sigma is
    # orthonormal to ~eps / _GRAM_KEEP) and rounding noise (<= _GRAM_NOISE * p * eps * max,
    # returned as exact zeros). Otherwise: QR of a^T, then the SVD of the small factor.
    lam, u = np.linalg.eigh(a @ a.T)
    lam, u = lam[::-1], u[:, ::-1]
    top = float(lam[0])
    keep = lam >= _GRAM_KEEP * top
    noise = lam <= _GRAM_NOISE * p * np.finfo(np.float64).eps * top
    if top > 0.0 and np.all(keep | noise):
        kk = int(np.sum(keep))
        proj = u[:, :kk].T @ a
        # A direction with a tiny but nonzero singular value hides among the "noise"
        # eigenvalues: the dropped part a - U_k U_k^T a must then be rounding-sized (as the
        # exact route's rank threshold sv[0] max(p, n) eps would drop it too).
        dropped = float(np.linalg.norm(a - u[:, :kk] @ proj))
        if dropped <= math.sqrt(top) * max(p, n) * np.finfo(np.float64).eps:
            sv = np.where(keep, np.sqrt(np.maximum(lam, 0.0)), 0.0)
            vt = np.zeros((p, n))
            vt[:kk] = proj / sv[:kk, None]
            return np.ascontiguousarray(u), sv, vt
    return thin_svd(a, exact=True)


def _row_factor(w: FloatArray) -> FloatArray:
    """A full-row-rank ``k x n`` factor ``F`` with ``F^T F = W^T W`` (``k = rank W``)."""
    _, sv, vt = thin_svd(w)
    tol = sv[0] * max(w.shape) * np.finfo(np.float64).eps
    k = int(np.sum(sv > tol))
    factor: FloatArray = sv[:k, None] * vt[:k]
    return factor


def svd(a: FloatArray, *, full_matrices: bool = False) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``a = u diag(sv) vt`` (``sv`` descending), as ``np.linalg.svd``.

    LAPACK's divide and conquer (dgesdd) can fail to converge: NumPy's build did on a
    690 x 690 whitened strategy of a real log's release (values from 1e-28 to 0.05), where
    SciPy's build of the same routine did not. So NumPy's first, then SciPy's dgesdd, then
    the QR iteration (dgesvd), slower but the most robust; the factors agree to rounding."""
    try:
        u, sv, vt = np.linalg.svd(a, full_matrices=full_matrices)
        return u, sv, vt
    except np.linalg.LinAlgError:
        pass
    for driver in ("gesdd", "gesvd"):
        try:
            u, sv, vt = sla.svd(a, full_matrices=full_matrices, lapack_driver=driver)
            return u, sv, vt
        except (np.linalg.LinAlgError, ValueError):
            continue
    raise np.linalg.LinAlgError("no SVD routine converged")


def _eigh(k_mat: FloatArray, *, lower: bool = True) -> tuple[FloatArray, FloatArray]:
    """Eigenpairs of a symmetric matrix (the triangle ``lower`` or upper is read).

    LAPACK's MRRR (dsyevr) can fail to converge on clustered eigenvalues (seen on a 288 x 270
    0/1 workload, and on real query logs); divide and conquer (dsyevd) is slower but does not,
    and the QR iteration (dsyev) is the last resort."""
    for driver in ("evr", "evd", "ev"):
        try:
            lam, u = sla.eigh(k_mat, lower=lower, driver=driver, check_finite=False)
            return lam, u
        except (np.linalg.LinAlgError, ValueError):
            continue
    raise np.linalg.LinAlgError("no eigensolver converged")


def _dual_eval(f: FloatArray, d: FloatArray) -> tuple[float, FloatArray, FloatArray, FloatArray]:
    """For weights ``d``: ``s(d)``, squared column norms ``c`` of the strategy ``A(d)``, and the
    eigenpairs ``(lam, U)`` of ``F D F^T`` (``A(d) = diag(lam)^{-1/4} U^T F``)."""
    k_mat = (f * d) @ f.T
    lam, u = _eigh(k_mat)
    lam = np.maximum(lam, np.finfo(np.float64).tiny)  # PD in exact arithmetic
    sq = np.sqrt(lam)
    b = (u / np.sqrt(sq)).T @ f
    c = np.einsum("ij,ij->j", b, b)
    return float(np.sum(sq)), c, lam, u


def dual_bound(workload: npt.ArrayLike, weights: npt.ArrayLike) -> float:
    """The certified lower bound ``s(d)^2 = ||W D^{1/2}||_*^2`` for weights ``d >= 0``
    (normalised to sum 1) on the optimum of ``min trace(W^T W X^-1), diag(X) <= 1``.

    Any nonnegative ``d`` gives a valid bound (weak duality, docs/mm.md §1).
    """
    w = _as_workload(workload)
    d = np.clip(np.asarray(weights, dtype=np.float64).reshape(-1), 0.0, None)
    if d.shape[0] != w.shape[1] or not np.any(d):
        raise ValueError("one nonnegative weight per cell, not all zero, is required")
    d = d / np.sum(d)
    sv = np.linalg.svd(w * np.sqrt(d), compute_uv=False)
    return float(np.sum(sv)) ** 2


def _error_and_residual(w: FloatArray, a: FloatArray) -> tuple[float, float]:
    """``(||W A^+||_F^2, max|W A^+ A - W|)`` via the SVD of ``A``; inf if W is not in the span."""
    _, sv, qt = thin_svd(a)
    if sv.size == 0 or sv[0] == 0.0:
        return math.inf, float(np.max(np.abs(w)))
    r = int(np.sum(sv > sv[0] * max(a.shape) * np.finfo(np.float64).eps))
    wq = w @ qt[:r].T
    resid = float(np.max(np.abs(wq @ qt[:r] - w)))
    return float(np.sum((wq / sv[:r]) ** 2)), resid


def evaluate_strategy(
    workload: npt.ArrayLike, matrix: npt.ArrayLike, *, lower_bound: float | None = None
) -> Strategy:
    """Wrap any strategy matrix: recompute its sensitivities and its exact workload error.

    ``expected_error`` is ``inf`` when some workload row is outside the row space of
    ``matrix`` (relative residual above 1e-8). ``gap`` is relative to ``lower_bound`` when one
    is given (e.g. from :func:`dual_bound`), else ``inf``.
    """
    w = _as_workload(workload)
    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != w.shape[1]:
        raise ValueError("the strategy must have one column per cell of the workload")
    l2, l1 = sensitivities(a)
    norm2, resid = _error_and_residual(w, a)
    error = l2**2 * norm2 if resid <= _UNBIASED_RTOL * float(np.max(np.abs(w))) else math.inf
    gap = error / lower_bound - 1.0 if lower_bound and lower_bound > 0 else math.inf
    return Strategy(matrix=a, sensitivity_l2=l2, sensitivity_l1=l1, gap=gap, expected_error=error)


# --------------------------------------------------------------------------------------------
# solvers


def optimize_strategy(
    workload: np.ndarray,
    *,
    tol: float = TOL,
    time_limit: float = 10.0,
    max_iter: int = MAX_ITER,
    clock: Callable[[], float] | None = None,
) -> Strategy:
    """Near-optimal L2 strategy for ``workload`` (``m x n``), with a certified gap.

    Solves ``min trace(W^T W X^-1) s.t. diag(X) <= 1, X psd`` by the dual fixed point of
    PRIVACY-NOTES §5 / ``docs/mm.md``: lossless domain reduction, a first phase on the
    symmetry classes of the cells when there are few (``docs/mm.md`` §3b; only a starting point,
    certified by one full evaluation), then weights ``d`` updated by
    ``d_j <- d_j (r_j / (d_j s))^omega`` with an adaptive ``omega``; stops at the certified
    relative gap ``tol`` (``UB / LB - 1``), after ``max_iter`` steps, or when the time cap is
    reached, returning the best strategy found with its certified gap.

    The time cap: pure code reads no clock, so by default ``time_limit`` seconds are converted
    into a deterministic work budget at :data:`NOMINAL_FLOPS_PER_SECOND` (10 GFlop/s; on the
    project machine this is about real time when idle, and the result is reproducible). A caller
    outside ``dp`` that wants a wall-clock cap passes ``clock`` (e.g. ``time.monotonic``); then
    both limits apply.

    The returned matrix is over the full domain, has ``rank W`` rows, zero columns on cells no
    query touches, and is scaled to ``sensitivity_l2 == 1`` up to rounding (always use the
    recomputed field). Every workload row lies in its row space: ``W = (W A^+) A`` is checked
    (max deviation <= 1e-8 max|W|, else the fallback below).

    Never fails on a valid workload (rank-deficient, duplicate or near-parallel rows): should
    the numerics break down (an eigensolver that does not converge, a degenerate iterate), it
    warns (``RuntimeWarning``) and returns the identity over the reduced domain instead, or
    the workload's own rows when that identity would be too large to build
    (:func:`_safe_strategy`: unbiased, no certificate). Raises ``ValueError``
    for a workload that is not a finite matrix with a nonzero entry.

    >>> import numpy as np
    >>> w = np.tril(np.ones((4, 4)))          # the 4 prefix sums
    >>> s = optimize_strategy(w)
    >>> s.gap <= 1e-3, s.matrix.shape
    (True, (4, 4))
    """
    if not (tol > 0.0 and time_limit > 0.0 and max_iter >= 1):
        raise ValueError("tol and time_limit must be positive and max_iter at least 1")
    w = _as_workload(workload)
    try:
        return _optimize(w, tol=tol, time_limit=time_limit, max_iter=max_iter, clock=clock)
    except _NUMERICAL_FAILURES as e:
        return _safe_strategy(w, e)


@dataclass(frozen=True, slots=True)
class _Iterate:
    """Where the dual fixed point stopped: the reduced workload and its factor, the best and
    the first eigenpairs, and the certified bounds (``upper``: the error of the best
    iterate's strategy, in exact arithmetic what :func:`_finish` recomputes)."""

    w_r: FloatArray
    groups: IntArray
    f: FloatArray
    best: tuple[FloatArray, FloatArray]
    first: tuple[FloatArray, FloatArray]
    lower: float
    upper: float


def _optimize(
    w: FloatArray,
    *,
    tol: float,
    time_limit: float,
    max_iter: int,
    clock: Callable[[], float] | None,
) -> Strategy:
    """The dual fixed point of :func:`optimize_strategy` on a validated workload."""
    it = _iterate(w, tol=tol, time_limit=time_limit, max_iter=max_iter, clock=clock)
    strategy = _finish(w, it.w_r, it.groups, it.f, it.best, it.lower)
    if strategy is None:
        # Only if the best iterate is numerically degenerate: fall back to the first (uniform d).
        strategy = _finish(w, it.w_r, it.groups, it.f, it.first, it.lower)
    if strategy is None:
        raise InternalError("the optimised strategy does not span the workload")
    return strategy


def strategy_error(workload: np.ndarray, *, time_limit: float = 10.0) -> float:
    """The expected error (``Delta2(A)^2 ||W A^+||_F^2``) of the strategy
    :func:`optimize_strategy` returns for ``workload`` with this ``time_limit``, without
    building it: the certified upper bound at its best iterate, which is that strategy's error
    in exact arithmetic (:func:`optimize_strategy` recomputes it from the matrix, and differs
    by rounding only). For planning (comparing releases of candidate workloads); noise is
    never calibrated from it. Where the optimiser would fall back (its numerics break down),
    the fallback's error."""
    w = _as_workload(workload)
    try:
        return _iterate(w, tol=TOL, time_limit=time_limit, max_iter=MAX_ITER, clock=None).upper
    except _NUMERICAL_FAILURES as e:
        return _safe_strategy(w, e).expected_error


def _iterate(
    w: FloatArray,
    *,
    tol: float,
    time_limit: float,
    max_iter: int,
    clock: Callable[[], float] | None,
) -> _Iterate:
    """The dual fixed point's iterations (:func:`optimize_strategy`), up to its stopping rule."""
    start = clock() if clock is not None else 0.0
    w_r, groups = reduce_domain(w)
    f = _row_factor(w_r)
    k, n_r = f.shape
    step_flops = 4.0 * k * k * n_r + 6.0 * float(k) ** 3
    budget = time_limit * NOMINAL_FLOPS_PER_SECOND

    d = np.full(n_r, 1.0 / n_r)
    spent = 0.0
    # (n_c k <= n_r with n_c >= 2 needs 2k <= n_r: skip the refinement otherwise.)
    classes, n_c = symmetry_classes(w_r) if 2 * k <= n_r else (np.zeros(0, dtype=np.intp), n_r)
    class_lb = 0.0
    if n_c < n_r and n_c * k <= n_r:
        # Symmetry phase (docs/mm.md §3b): iterate on weights constant on each class, at
        # O(n_c k^2) per step; the result is only a starting point, certified below.
        d, class_lb, steps = _class_phase(f, classes, n_c, tol, max_iter, budget, clock, start)
        spent = steps * (float(k * (k + 1)) * n_c + 6.0 * float(k) ** 3) + 2.0 * k * k * n_r
    s, c, lam, u = _dual_eval(f, d)
    best_lb = max(s * s, class_lb)
    best_ub, best_eig = s * float(np.max(c)), (lam, u)
    first_eig = best_eig
    omega = 1.0
    for it in range(1, max_iter + 1):
        if best_ub <= best_lb * (1.0 + tol) or spent + (it + 1) * step_flops > budget:
            break
        if clock is not None and clock() - start > time_limit:
            break
        step = d * (c / s) ** omega
        step = np.maximum(step, _D_FLOOR * float(np.max(step)))
        step /= np.sum(step)
        s_new, c_new, lam_new, u_new = _dual_eval(f, step)
        best_lb = max(best_lb, s_new * s_new)
        ub_new = s_new * float(np.max(c_new))
        if ub_new < best_ub:
            best_ub, best_eig = ub_new, (lam_new, u_new)
        if s_new >= s or omega <= 1.0:
            # omega = 1 is the plain fixed point (monotone up to rounding): always accept it.
            omega = min(omega * _OMEGA_GROW, _OMEGA_MAX) if s_new >= s else 1.0
            d, s, c = step, s_new, c_new
        else:
            omega = max(1.0, omega / 2.0)

    return _Iterate(w_r, groups, f, best_eig, first_eig, best_lb, best_ub)


def _safe_strategy(w: FloatArray, why: BaseException) -> Strategy:
    """The fallback of :func:`optimize_strategy`: the identity on the workload's reduced
    domain (one measurement per group of identical cells, lifted), which answers every row of
    ``W`` without bias at sensitivity 1, with expected error ``||W_r||_F^2``; no certificate.
    When that identity would exceed :data:`MAX_DENSE_ENTRIES`, the workload's own rows instead
    (``W`` is in its own row space: unbiased; sensitivity and error recomputed)."""
    w_r, groups = reduce_domain(w)
    large = w_r.shape[1] * w.shape[1] > MAX_DENSE_ENTRIES
    warnings.warn(
        f"the strategy optimiser failed ({type(why).__name__}: {why}); "
        + (
            "measuring the workload's own queries instead (unbiased, not optimal)"
            if large
            else "measuring every cell of the reduced domain instead (unbiased, not optimal)"
        ),
        RuntimeWarning,
        stacklevel=3,
    )
    if large:
        return evaluate_strategy(w, w)
    matrix = lift(np.eye(w_r.shape[1]), groups)
    l2, l1 = sensitivities(matrix)
    error = l2 * l2 * float(np.sum(w_r * w_r))
    return Strategy(
        matrix=matrix, sensitivity_l2=l2, sensitivity_l1=l1, gap=math.inf, expected_error=error
    )


def _class_phase(
    f: FloatArray,
    classes: IntArray,
    n_c: int,
    tol: float,
    max_iter: int,
    budget: float,
    clock: Callable[[], float] | None,
    start: float,
) -> tuple[FloatArray, float, int]:
    """The fixed point restricted to weights constant on each class (docs/mm.md §3b).

    With ``d_j = delta_g`` on class ``g`` (``n_g`` cells), ``F D F^T = sum_g delta_g C_g``
    with ``C_g = F_g F_g^T`` (k x k), and the class-average squared column norm is
    ``cbar_g = <C_g, U Lam^{-1/2} U^T> / n_g`` (the gradient of ``s`` in ``delta_g``, over
    ``n_g``). Returns the full-domain weights, the best lower bound ``s^2`` seen (valid for any
    weights), and the number of steps taken. Stops at ``s max cbar <= (1 + tol) s^2``: that
    is the true upper bound only when every cell of a class has the same column norm (exact
    orbits), which the caller checks with one full evaluation.
    """
    k, n_r = f.shape
    order = np.argsort(classes, kind="stable")
    sizes = np.bincount(classes, minlength=n_c)
    # C_g = F_g F_g^T, one small product per class (classes are contiguous after sorting);
    # only the packed upper triangle is kept.
    iu = np.triu_indices(k)
    fs = f[:, order]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    packed = np.empty((n_c, iu[0].shape[0]))
    for g in range(n_c):
        block = fs[:, bounds[g] : bounds[g + 1]]
        packed[g] = (block @ block.T)[iu]
    twice = np.where(iu[0] == iu[1], 1.0, 2.0)
    nsz = sizes.astype(np.float64)
    step_flops = float(k * (k + 1)) * n_c + 6.0 * float(k) ** 3

    def evaluate(delta: FloatArray) -> tuple[float, FloatArray]:
        kmat = np.zeros((k, k))
        kmat[iu] = np.einsum("g,gp->p", delta, packed)
        lam, u = _eigh(kmat, lower=False)
        lam = np.maximum(lam, np.finfo(np.float64).tiny)
        mmat = np.einsum("ia,a,ja->ij", u, 1.0 / np.sqrt(lam), u)
        cbar: FloatArray = np.einsum("gp,p->g", packed, mmat[iu] * twice) / nsz
        return float(np.sum(np.sqrt(lam))), cbar

    delta = np.full(n_c, 1.0 / n_r)
    s, cbar = evaluate(delta)
    best_lb, best_delta = s * s, delta
    omega = 1.0
    it = 0
    for it in range(1, max_iter + 1):
        if s * float(np.max(cbar)) <= s * s * (1.0 + tol) or (it + 1) * step_flops > budget:
            break
        if clock is not None and clock() - start > budget / NOMINAL_FLOPS_PER_SECOND:
            break
        step = delta * (cbar / s) ** omega
        step = np.maximum(step, _D_FLOOR * float(np.max(step)))
        step /= float(step @ nsz)
        s_new, c_new = evaluate(step)
        if s_new * s_new > best_lb:
            best_lb, best_delta = s_new * s_new, step
        if s_new >= s or omega <= 1.0:
            omega = min(omega * _OMEGA_GROW, _OMEGA_MAX) if s_new >= s else 1.0
            delta, s, cbar = step, s_new, c_new
        else:
            omega = max(1.0, omega / 2.0)
    d: FloatArray = best_delta[classes]
    return d / float(np.sum(d)), best_lb, it


def _finish(
    w: FloatArray,
    w_r: FloatArray,
    groups: IntArray,
    f: FloatArray,
    eig: tuple[FloatArray, FloatArray],
    lower_bound: float,
) -> Strategy | None:
    """The full-domain strategy ``A(d)`` with recomputed sensitivity, error and gap, or None if
    it fails the unbiasedness check ``max|R A - W| <= 1e-8 max|W|``."""
    lam, u = eig
    a_r = (u / lam[None, :] ** 0.25).T @ f
    a_r /= math.sqrt(float(np.max(np.einsum("ij,ij->j", a_r, a_r))))
    matrix = lift(a_r, groups)
    l2, l1 = sensitivities(matrix)
    # Error and unbiasedness from one SVD of the returned (reduced) strategy: R = W_r A_r^+.
    # Lifting copies columns, so R A = W on the full domain iff R A_r = W_r (docs/mm.md §3).
    ua, sa, qa = thin_svd(a_r)
    r = int(np.sum(sa > sa[0] * max(a_r.shape) * np.finfo(np.float64).eps))
    wq = (w_r @ qa[:r].T) / sa[:r]
    dev = float(np.max(np.abs((wq @ ua[:, :r].T) @ a_r - w_r)))
    if not dev <= _UNBIASED_RTOL * float(np.max(np.abs(w))):
        return None
    error = l2 * l2 * float(np.sum(wq * wq))
    gap = max(error / lower_bound - 1.0, 0.0)
    return Strategy(
        matrix=matrix, sensitivity_l2=l2, sensitivity_l1=l1, gap=gap, expected_error=error
    )


def identity_strategy(n: int, *, workload: np.ndarray | None = None) -> Strategy:
    """The identity strategy (measure every cell): sensitivity 1 in L2 and L1.

    ``expected_error`` is ``||W||_F^2`` for the given workload, or ``n`` (the error over the
    identity workload) without one; ``gap`` is ``inf`` (no certificate).
    """
    if n <= 0:
        raise ValueError("the domain must have at least one cell")
    if workload is None:
        error = float(n)
    else:
        w = _as_workload(workload)
        if w.shape[1] != n:
            raise ValueError("the workload must have n columns")
        error = float(np.sum(w * w))
    return Strategy(
        matrix=np.eye(n), sensitivity_l2=1.0, sensitivity_l1=1.0, gap=math.inf, expected_error=error
    )


def hierarchical_matrix(n: int, branching: int = 2) -> FloatArray:
    """The hierarchical (tree of interval sums) strategy over ``n`` ordered cells, unweighted.

    Every level of a ``branching``-ary tree over ``n`` cells padded to a power of the
    branching factor, restricted to the first ``n`` cells; empty and duplicate rows dropped.
    Full column rank (the leaves are included).
    """
    if n <= 0 or branching < 2:
        raise ValueError("need n >= 1 and branching >= 2")
    # Each node is the interval [start, end) of the cells it sums; the rows in descending
    # lexicographic order of their 0/1 patterns: by start, then the longer interval first.
    intervals: set[tuple[int, int]] = set()
    width = 1
    while True:
        intervals.update((s0, min(s0 + width, n)) for s0 in range(0, n, width))
        if width >= n:
            break
        width *= branching
    ordered = sorted(intervals, key=lambda iv: (iv[0], -iv[1]))
    a = np.zeros((len(ordered), n))
    for i, (s0, e0) in enumerate(ordered):
        a[i, s0:e0] = 1.0
    return a


def _tree_rows(n: int, branching: int) -> int:
    """At most the rows of :func:`hierarchical_matrix` (``n``, ``branching``): one per node."""
    rows, width = 0, 1
    while True:
        rows += -(-n // width)
        if width >= n:
            return rows
        width *= branching


def haar_matrix(n: int) -> FloatArray:
    """The (unnormalised) Haar wavelet strategy over ``n`` ordered cells.

    Rows: the total, then for every dyadic interval the difference of its two halves, over
    ``n`` padded to a power of two and restricted to the first ``n`` cells (all-zero rows
    dropped). Full column rank.
    """
    if n <= 0:
        raise ValueError("need n >= 1")
    size = 1 << max(0, (n - 1).bit_length())
    rows = [np.ones(size)]
    width = size
    while width >= 2:
        for s0 in range(0, size, width):
            row = np.zeros(size)
            row[s0 : s0 + width // 2] = 1.0
            row[s0 + width // 2 : s0 + width] = -1.0
            rows.append(row)
        width //= 2
    a = np.vstack(rows)[:, :n]
    return np.asarray(a[np.any(a != 0.0, axis=1)], dtype=np.float64)


def l1_strategy(workload: np.ndarray, *, time_limit: float = 10.0) -> Strategy:
    """A strategy for Laplace noise (pure DP): the best of several sound candidates.

    Under Laplace noise of scale ``b = Delta1(A) / epsilon`` per row, the total squared error is
    ``2 Delta1(A)^2 ||W A^+||_F^2 / epsilon^2``. The candidates are the identity, the
    L2-optimal strategy of :func:`optimize_strategy` (whose L1 sensitivity is recomputed, not
    assumed), hierarchical trees (branching 2, 4, 8, 16) and the Haar wavelet over the cell order;
    the one with the lowest ``Delta1(A)^2 ||W A^+||_F^2`` (:attr:`Strategy.expected_error_l1`)
    is returned. A baseline whose dense matrix would exceed :data:`MAX_DENSE_ENTRIES` (the
    identity over more than 2,048 cells, say) is not a candidate. Soundness does not depend
    on the choice: the caller scales the noise by the returned ``sensitivity_l1``. ``gap`` is
    that of the L2 program (``inf`` for a baseline).

    >>> import numpy as np
    >>> w = np.triu(np.ones((8, 8)))
    >>> s = l1_strategy(w)
    >>> bool(s.expected_error_l1 <= identity_strategy(8, workload=w).expected_error_l1)
    True
    """
    w = _as_workload(workload)
    n = w.shape[1]
    l2_opt = optimize_strategy(w, time_limit=time_limit)
    candidates = [identity_strategy(n, workload=w)] if n * n <= MAX_DENSE_ENTRIES else []
    candidates.append(l2_opt)
    if (1 << max(0, (n - 1).bit_length())) * n <= MAX_DENSE_ENTRIES:
        candidates.append(_full_rank_baseline(w, haar_matrix(n)))
    for b in (2, 4, 8, 16):
        if (b < n or b == 2) and _tree_rows(n, b) * n <= MAX_DENSE_ENTRIES:
            candidates.append(_full_rank_baseline(w, hierarchical_matrix(n, b)))
    best = min(candidates, key=lambda s: s.expected_error_l1)
    if best is l2_opt:
        return best
    gap = best.expected_error / l2_opt.lower_bound - 1.0 if l2_opt.lower_bound > 0 else math.inf
    return Strategy(
        matrix=best.matrix,
        sensitivity_l2=best.sensitivity_l2,
        sensitivity_l1=best.sensitivity_l1,
        gap=gap,
        expected_error=best.expected_error,
    )


def _full_rank_baseline(w: FloatArray, a: FloatArray) -> Strategy:
    """:func:`evaluate_strategy` for a strategy of full column rank (the trees and the Haar
    basis): ``A^+ A = I`` answers every workload without bias, and
    ``||W A^+||_F^2 = trace(W (A^T A)^-1 W^T)`` comes from a Cholesky factor of the
    ``n x n`` Gram matrix, several times cheaper than an SVD of ``A``. Should ``A^T A`` not
    be numerically positive definite, :func:`evaluate_strategy` decides."""
    try:
        factor = sla.cho_factor(a.T @ a, check_finite=False)
    except np.linalg.LinAlgError:
        return evaluate_strategy(w, a)
    norm2 = float(np.sum(w.T * sla.cho_solve(factor, w.T, check_finite=False)))
    l2, l1 = sensitivities(a)
    return Strategy(
        matrix=a, sensitivity_l2=l2, sensitivity_l1=l1, gap=math.inf, expected_error=l2 * l2 * norm2
    )


def optimize_strategy_cvxpy(
    workload: np.ndarray, *, solver: str = "CLARABEL", time_limit: float | None = None
) -> Strategy:
    """Reference solver (tests and benchmarks only): the SDP via cvxpy on the full domain.

    ``min trace(T) s.t. [[X, F^T], [F, T]] psd, diag(X) <= 1`` with ``F^T F = W^T W``; the
    strategy is ``X^{1/2}`` (eigenvalues floored at ``1e-9 * max``, so that it spans the
    domain even when the solver's ``X`` is numerically singular). Its error is *re-evaluated* from the
    returned matrix (a solver's reported objective can be far off when X is near-singular), and
    its gap is certified by the lower bound from the solver's dual of ``diag(X) <= 1``.
    cvxpy is imported lazily: it is not a runtime dependency.
    """
    cp: Any = importlib.import_module("cvxpy")

    w = _as_workload(workload)
    n = w.shape[1]
    f = _row_factor(w)
    k = f.shape[0]
    x = cp.Variable((n, n), symmetric=True)
    t = cp.Variable((k, k), symmetric=True)
    diag_con = cp.diag(x) <= 1
    block = cp.bmat([[x, f.T], [f, t]])
    prob = cp.Problem(cp.Minimize(cp.trace(t)), [block >> 0, diag_con])
    opts: dict[str, object] = {}
    if time_limit is not None:
        opts = (
            {"time_limit": time_limit} if solver == "CLARABEL" else {"time_limit_secs": time_limit}
        )
    prob.solve(solver=solver, **opts)
    if x.value is None:
        raise InternalError("the reference solver returned no solution")
    lam, vec = np.linalg.eigh((x.value + x.value.T) / 2.0)
    # X is often numerically singular (|P| < n); floor its spectrum so that A spans the domain.
    a = (vec * np.sqrt(np.maximum(lam, 1e-9 * float(np.max(lam))))).T
    dual = diag_con.dual_value
    lb: float | None = None
    if dual is not None and np.any(np.asarray(dual) > 0):
        lb = dual_bound(w, np.asarray(dual, dtype=np.float64))
    return evaluate_strategy(w, a, lower_bound=lb)
