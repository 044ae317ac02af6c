"""MLDP: differentially private query learning by *model publishing*.

After Zhu, Xiong, Li, Zhou & Yu, "Differentially Private Query Learning: from Data Publishing to
Model Publishing" (IEEE Big Data 2017, arXiv:1710.05095). Instead of answering every query with
fresh noise, the curator

1. chooses a **training set** of linear queries ``Q`` (``k x n``) with high coverage of the
   domain and low mutual correlation, *from public information only* (the domain size or a
   candidate workload, never the data) -- so the choice itself costs no privacy;
2. answers the training set **once**: ``y = Q x + noise`` with Laplace noise of scale
   ``Delta_1(Q) / epsilon`` (or, for ``delta > 0``, Gaussian noise calibrated by the Analytic
   Gaussian Mechanism to ``Delta_2(Q)``);
3. fits a **regression model** on the pairs (query indicator vector ``q_i``, noisy answer
   ``y_i``): a linear model ``f(q) = q . theta`` without intercept, fitted by least squares with
   an optional ridge penalty ``lambda ||theta||^2`` and an optional ``theta >= 0`` constraint;
4. publishes the model: every later query ``q`` is answered as ``q . theta``.

Privacy claim (the docstring of :meth:`MLDPModel.fit` restates it). Neighbouring databases
differ by adding or removing one row, i.e. by ``+-1`` in one cell of the histogram ``x``. Then
``Q x`` changes by one column of ``Q``, so its L1 sensitivity is the **largest column L1 norm**
of ``Q`` and its L2 sensitivity the largest column L2 norm. The Laplace mechanism with scale
``b = Delta_1 / epsilon`` is ``epsilon``-DP (Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth
2014, Theorem 3.6); the Gaussian one with the AGM's sigma is ``(epsilon, delta)``-DP (Balle &
Wang 2018, Theorem 8). The training set is a function of public inputs only, and the model and
all its answers are functions of the noisy answers and public inputs only: post-processing
(Dwork & Roth 2014, Proposition 2.1), so any number of later answers costs nothing more.

Why the training set should have low sensitivity: the noise on *every* training answer scales
with the largest column norm, so a set of queries that overlap a lot (are highly correlated)
pays for each overlap on every answer. Disjoint intervals have ``Delta_1 = 1``; a ``b``-ary
hierarchy of intervals over an ordered domain has ``Delta_1 = `` its number of levels and lets
the least-squares fit answer every range from ``O(log n)`` noisy nodes (Hay, Rastogi, Miklau &
Suciu 2010: least squares on a hierarchy is their "constrained inference"). Which is best
depends on the domain size and the workload (under Laplace noise the identity wins on small
domains, hierarchies on large ones), so the default training set ``"auto"`` compares the
candidates by their exact expected error on the (public) workload: :func:`choose_training_set`.

>>> import numpy as np
>>> from dp.noise import SeededSampler
>>> x = np.array([5.0, 3.0, 2.0, 7.0])
>>> model = MLDPModel.fit(x, epsilon=1e9, sampler=SeededSampler(0), training="hierarchical")
>>> model.training_name, model.sensitivity, model.training.shape
('hierarchical-2', 3.0, (7, 4))
>>> np.round(model.answer(np.array([[1.0, 1.0, 1.0, 0.0]])), 6).tolist()
[10.0]
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import lsq_linear
from scipy.sparse.linalg import lsqr

from dp.calibration import agm_sigma, laplace_scale
from dp.domain import FloatArray
from dp.errors import PrivacyParameterError
from dp.noise import Sampler
from dp.params import as_query_matrix, check_delta, check_epsilon

NoiseName = Literal["laplace", "gaussian"]

#: Up to this many cells the sign-constrained fit uses dense BVLS.
DENSE_LIMIT = 128
#: Names of the built-in training sets (see :meth:`MLDPModel.fit`).
TRAINING_SETS = ("auto", "identity", "hierarchical", "greedy")
#: Largest training set accepted (rows); a guard against accidental huge workloads.
MAX_TRAINING_QUERIES = 1_000_000


# -- validation ---------------------------------------------------------------------------------


def _check_greedy_limits(max_column_l1: float | None, max_correlation: float) -> None:
    """The limits of :func:`greedy_training_set`: a column L1 cap (None: the caller's
    default) and a correlation bound."""
    if max_column_l1 is not None and not (
        isinstance(max_column_l1, int | float)
        and math.isfinite(max_column_l1)
        and max_column_l1 > 0
    ):
        raise PrivacyParameterError("max_column_l1 must be a finite number greater than 0")
    if not (isinstance(max_correlation, int | float) and 0 <= max_correlation <= 1):
        raise PrivacyParameterError("max_correlation must be a number between 0 and 1")


def _check_positive_int(value: int, what: str, *, minimum: int = 1) -> None:
    if not (isinstance(value, int | np.integer) and not isinstance(value, bool)):
        raise PrivacyParameterError(f"{what} must be an integer")
    if value < minimum:
        raise PrivacyParameterError(f"{what} must be at least {minimum}")


def _as_histogram(histogram: Any) -> FloatArray:
    x = np.asarray(histogram, dtype=np.float64)
    if x.ndim != 1 or x.shape[0] == 0:
        raise ValueError("the histogram must be a non-empty vector of cell counts")
    if not np.all(np.isfinite(x)):
        raise ValueError("the histogram must contain finite counts only")
    return x


def column_l1(matrix: sp.csr_array) -> float:
    """Largest column L1 norm: the L1 sensitivity of ``matrix @ x`` under add/remove-one-row."""
    return float(np.max(abs(matrix).sum(axis=0))) if matrix.nnz else 0.0


def column_l2(matrix: sp.csr_array) -> float:
    """Largest column L2 norm: the L2 sensitivity of ``matrix @ x`` under add/remove-one-row."""
    return float(np.sqrt(np.max(matrix.multiply(matrix).sum(axis=0)))) if matrix.nnz else 0.0


# -- training sets (public: they never look at the data) ----------------------------------------


def hierarchical_intervals(n: int, branching: int = 2) -> sp.csr_array:
    """All nodes of a ``branching``-ary tree of intervals over the ordered cells ``0..n-1``.

    The root is the whole domain; each node is split into ``branching`` near-equal children
    until single cells. Every cell lies in exactly one node per level, so the largest column
    L1 norm (the sensitivity) is the tree's number of levels, ``1 + ceil(log_b n)`` at most.
    """
    _check_positive_int(n, "the number of cells")
    _check_positive_int(branching, "the branching factor", minimum=2)
    rows: list[tuple[int, int]] = []
    level = [(0, n)]
    while level:
        rows.extend(level)
        nxt: list[tuple[int, int]] = []
        for lo, hi in level:
            width = hi - lo
            if width <= 1:
                continue
            parts = min(branching, width)
            cuts = [lo + (width * i) // parts for i in range(parts + 1)]
            nxt.extend((a, b) for a, b in itertools.pairwise(cuts) if b > a)
        level = nxt
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([hi - lo for lo, hi in rows])
    indices = np.concatenate([np.arange(lo, hi) for lo, hi in rows])
    data = np.ones(indices.shape[0], dtype=np.float64)
    return sp.csr_array((data, indices, indptr), shape=(len(rows), n))


def disjoint_intervals(n: int, width: int = 1) -> sp.csr_array:
    """Consecutive disjoint intervals of ``width`` cells covering ``0..n-1`` (sensitivity 1)."""
    _check_positive_int(n, "the number of cells")
    _check_positive_int(width, "the interval width")
    starts = np.arange(0, n, width)
    rows = [(int(s), min(int(s) + width, n)) for s in starts]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([hi - lo for lo, hi in rows])
    indices = np.arange(n, dtype=np.int64)
    return sp.csr_array((np.ones(n), indices, indptr), shape=(len(rows), n))


def greedy_training_set(
    candidates: Any,
    *,
    max_column_l1: float,
    max_correlation: float = 1.0,
    max_queries: int | None = None,
) -> sp.csr_array:
    """Greedily pick a high-coverage, low-correlation subset of a public candidate workload.

    Repeatedly adds the candidate carrying the most *new information*: the largest fraction
    ``||q - P q||^2 / ||q||^2`` of its norm outside the span of the rows picked so far (``P``
    the orthogonal projection on that span; 1 for a query uncorrelated with all of them, 0 for
    one they already determine), ties broken by the larger *discounted coverage* ``sum_j |q_j|
    / (1 + load_j)`` (``load`` = column L1 norms of the rows picked so far: an uncovered cell
    counts fully), then by the earlier candidate. Only candidates that keep every column L1
    norm ``<= max_column_l1`` (the sensitivity cap), whose cosine similarity with every picked
    row is ``<= max_correlation``, and that are not already in the span are eligible. Stops
    when none is, or after ``max_queries`` rows. The result's L1 sensitivity is at most
    ``max_column_l1`` by construction (:meth:`MLDPModel.fit` recomputes it from the rows used).

    Deterministic and data-independent: a function of the public candidates only.
    """
    _check_greedy_limits(max_column_l1, max_correlation)
    if max_queries is not None:
        _check_positive_int(max_queries, "max_queries")
    cand = as_query_matrix(candidates)
    if cand.shape[0] > MAX_TRAINING_QUERIES:
        raise ValueError("too many candidate queries for the greedy training-set selection")
    dense = np.asarray(cand.toarray(), dtype=np.float64)
    n = dense.shape[1]
    absw = np.abs(dense)
    sq = np.sum(dense * dense, axis=1)
    norms = np.sqrt(sq)
    alive = (norms > 0) & np.all(absw <= max_column_l1, axis=1)
    unit = np.divide(dense, norms[:, None], out=np.zeros_like(dense), where=norms[:, None] > 0)
    residual = np.ones(dense.shape[0])  # fraction of ||q||^2 outside the span so far
    load = np.zeros(n)
    max_corr = np.zeros(dense.shape[0])
    basis: list[FloatArray] = []
    picked: list[int] = []
    limit = max_queries if max_queries is not None else min(dense.shape[0], n)
    slack = 1e-12 * max_column_l1
    while len(picked) < limit:
        feasible = alive & np.all(load[None, :] + absw <= max_column_l1 + slack, axis=1)
        feasible &= (max_corr <= max_correlation + 1e-12) & (residual > 1e-9)
        if not feasible.any():
            break
        cover = absw @ (1.0 / (1.0 + load))
        # Lexicographic (residual, coverage): residuals are compared to 1e-9 relative.
        key = np.round(residual / 1e-9) * (1.0 + np.max(cover)) + cover
        key[~feasible] = -np.inf
        best = int(np.argmax(key))
        picked.append(best)
        alive[best] = False
        load += absw[best]
        max_corr = np.maximum(max_corr, np.abs(unit @ unit[best]))
        v = dense[best] - sum((b * float(b @ dense[best]) for b in basis), np.zeros(n))
        for b in basis:  # a second Gram-Schmidt pass for numerical orthogonality
            v -= b * float(b @ v)
        v /= np.linalg.norm(v)
        basis.append(v)
        residual = np.maximum(
            residual - np.divide((dense @ v) ** 2, sq, where=sq > 0, out=np.zeros_like(sq)), 0.0
        )
    return sp.csr_array(dense[picked], shape=(len(picked), n))


#: Branching factors tried by the ``"auto"`` training set.
AUTO_BRANCHINGS = (2, 4, 8, 16, 32)
#: Largest domain for which ``"auto"`` compares training sets by their exact expected error.
AUTO_LIMIT = 1024
#: Endpoints of the evaluation ranges used by ``"auto"`` without candidates: all ranges up to
#: this many cells, above it the ranges between ``AUTO_GRID + 1`` evenly spaced endpoints.
AUTO_GRID = 128
#: Grid of endpoints above ``AUTO_GRID`` cells.
AUTO_COARSE_GRID = 32
#: Training set used without comparison above :data:`AUTO_LIMIT` cells. Measured here with
#: :func:`expected_error` on grid ranges: 8-ary is best or near-best at n = 512..2048 under
#: Laplace noise (Qardaji, Yang & Li 2013 recommend about 16 with their own inference).
AUTO_FALLBACK_BRANCHING = 8


def _evaluation_ranges(n: int) -> sp.csr_array:
    """All ranges over ``n <= AUTO_GRID`` cells, else those with endpoints on a coarse grid."""
    grid = n if n <= AUTO_GRID else AUTO_COARSE_GRID
    points = np.unique(np.linspace(0, n, grid + 1).round().astype(np.int64))
    rows = [(int(a), int(b)) for a, b in itertools.combinations(points, 2)]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([hi - lo for lo, hi in rows])
    indices = np.concatenate([np.arange(lo, hi) for lo, hi in rows])
    return sp.csr_array((np.ones(indices.shape[0]), indices, indptr), shape=(len(rows), n))


def expected_error(training: Any, evaluation: Any, *, epsilon: float, delta: float = 0.0) -> float:
    """Expected mean squared error of the least-squares model on the ``evaluation`` queries.

    ``v(Q) * mean_q q (Q^T Q)^+ q^T`` with ``v`` the noise variance per training answer
    (``2 (Delta_1/epsilon)^2`` for Laplace, the AGM's ``sigma^2`` for ``delta > 0``). Returns
    ``inf`` when some evaluation query is outside the row space of the training set (its
    answer would then carry an unknown bias). Public inputs only: no privacy cost.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    q = as_query_matrix(training)
    e = np.asarray(as_query_matrix(evaluation, int(q.shape[1])).toarray(), dtype=np.float64)
    if q.nnz == 0:
        return math.inf
    if delta == 0:
        var = 2.0 * laplace_scale(epsilon, column_l1(q)) ** 2
    else:
        var = agm_sigma(epsilon, delta, column_l2(q)) ** 2
    gram = (q.T @ q).toarray()
    try:  # full column rank (identity, hierarchies): Cholesky, every query is answerable
        factor = cho_factor(gram, lower=True)
        inner = np.sum(e.T * cho_solve(factor, e.T), axis=0)
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(gram)
        keep = vals > 1e-10 * max(float(np.max(vals)), 1e-300)
        proj = e @ vecs
        outside = np.sum(proj[:, ~keep] ** 2, axis=1)
        if np.any(outside > 1e-8 * np.maximum(np.sum(e * e, axis=1), 1e-300)):
            return math.inf
        inner = np.sum(proj[:, keep] ** 2 / vals[keep], axis=1)
    return float(var * np.mean(inner))


def choose_training_set(
    n: int,
    *,
    epsilon: float,
    delta: float = 0.0,
    candidates: Any = None,
    max_column_l1: float | None = None,
    max_correlation: float = 1.0,
) -> tuple[str, sp.csr_array]:
    """The ``"auto"`` training set: the public family member with the least expected error.

    Candidates: disjoint cells (identity), ``b``-ary interval hierarchies for ``b`` in
    :data:`AUTO_BRANCHINGS` and, when a candidate workload is given, its greedy selection.
    They are compared by :func:`expected_error` on the candidate workload if given, else on
    all ranges (grid endpoints above :data:`AUTO_GRID` cells). Above :data:`AUTO_LIMIT` cells
    no comparison is made and the :data:`AUTO_FALLBACK_BRANCHING`-ary hierarchy is used.
    Returns ``(name, matrix)``. Data-independent.
    """
    _check_positive_int(n, "the number of cells")
    if n > AUTO_LIMIT:
        b = AUTO_FALLBACK_BRANCHING
        return f"hierarchical-{b}", hierarchical_intervals(n, b)
    options: list[tuple[str, sp.csr_array]] = [("identity", disjoint_intervals(n))]
    for b in AUTO_BRANCHINGS:
        if b < n:
            options.append((f"hierarchical-{b}", hierarchical_intervals(n, b)))
    if candidates is not None:
        cap = max_column_l1 if max_column_l1 is not None else 1.0 + math.ceil(math.log2(n))
        g = greedy_training_set(candidates, max_column_l1=cap, max_correlation=max_correlation)
        if g.shape[0] > 0:
            options.append(("greedy", g))
        evaluation = as_query_matrix(candidates, n)
    else:
        evaluation = _evaluation_ranges(n)
    errors = [expected_error(q, evaluation, epsilon=epsilon, delta=delta) for _, q in options]
    return options[int(np.argmin(errors))]


# -- the model ----------------------------------------------------------------------------------


def _fit_theta(
    training: sp.csr_array, answers: FloatArray, *, ridge: float, nonnegative: bool
) -> FloatArray:
    """``argmin ||Q theta - y||^2 + ridge ||theta||^2`` (minimum norm if rank-deficient).

    LSQR (Paige & Saunders 1982) on the sparse training matrix, run to a tight tolerance: from a
    zero start it converges to the minimum-norm solution, and it is deterministic. With
    ``nonnegative``, bounded least squares ``theta >= 0`` (BVLS up to :data:`DENSE_LIMIT` cells,
    else a trust-region method with LSMR).
    """
    k, n = training.shape
    if k == 0:
        return np.zeros(n)
    if nonnegative:
        q: Any = training
        y = answers
        if ridge > 0:
            q = sp.vstack([training, math.sqrt(ridge) * sp.identity(n, format="csr")], format="csr")
            y = np.concatenate([answers, np.zeros(n)])
        if n <= DENSE_LIMIT:
            res = lsq_linear(q.toarray(), y, bounds=(0.0, np.inf), method="bvls")
        else:
            res = lsq_linear(q, y, bounds=(0.0, np.inf), method="trf", lsmr_tol="auto")
        return np.asarray(res.x, dtype=np.float64)
    sol = lsqr(training, answers, damp=math.sqrt(ridge), atol=1e-13, btol=1e-13, iter_lim=50 * n)
    return np.asarray(sol[0], dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class MLDPModel:
    """A published MLDP model: the training set, its noisy answers and the fitted weights.

    Everything here is safe to publish: ``training`` is public, ``noisy_answers`` is the one
    DP release, and ``theta`` (and every :meth:`answer`) is post-processing of the two.
    """

    training: sp.csr_array
    noisy_answers: FloatArray
    theta: FloatArray
    epsilon: float
    delta: float
    noise: NoiseName
    noise_scale: float
    sensitivity: float
    ridge: float
    nonnegative: bool
    training_name: str

    @classmethod
    def fit(
        cls,
        histogram: Any,
        *,
        epsilon: float,
        sampler: Sampler,
        training: Any = "auto",
        candidates: Any = None,
        max_column_l1: float | None = None,
        max_correlation: float = 1.0,
        branching: int = 2,
        delta: float = 0.0,
        ridge: float = 0.0,
        nonnegative: bool = False,
    ) -> MLDPModel:
        """Answer a training set once with noise and fit the model (the only privacy cost).

        Training set (always from public inputs only): an explicit query matrix, or by name:

        - ``"auto"`` (default): :func:`choose_training_set`, the least expected error on the
          ``candidates`` (or on all ranges) among identity, interval hierarchies and the greedy
          selection from the candidates;
        - ``"identity"``: the disjoint single cells (sensitivity 1);
        - ``"hierarchical"``: the ``branching``-ary hierarchy of intervals;
        - ``"greedy"``: :func:`greedy_training_set` on ``candidates`` with the column L1 cap
          ``max_column_l1`` (default ``1 + ceil(log2 n)``, a binary hierarchy's level count)
          and pairwise correlation ``<= max_correlation``.

        Mechanism and claim: with ``delta == 0``, ``y = Q x + Laplace(b)^k`` with ``b =
        Delta_1(Q) / epsilon`` where ``Delta_1(Q)`` is the largest column L1 norm of the
        training matrix actually used: ``epsilon``-DP under add/remove-one-row neighbours
        (Laplace mechanism, Dwork & Roth 2014, Theorem 3.6). With ``delta > 0``, Gaussian noise
        with the Analytic Gaussian Mechanism's sigma for ``(epsilon, delta)`` and ``Delta_2(Q)``
        (largest column L2 norm): ``(epsilon, delta)``-DP (Balle & Wang 2018, Theorem 8). The
        fit and every later answer are post-processing (Dwork & Roth 2014, Proposition 2.1):
        no further privacy cost.

        Every parameter is validated before the histogram is read.
        """
        check_epsilon(epsilon)
        check_delta(delta)
        if not (isinstance(ridge, int | float) and math.isfinite(ridge) and ridge >= 0):
            raise PrivacyParameterError("ridge must be a finite number >= 0")
        _check_positive_int(branching, "the branching factor", minimum=2)
        _check_greedy_limits(max_column_l1, max_correlation)
        if isinstance(training, str) and training not in TRAINING_SETS:
            raise ValueError(
                "training must be a query matrix or one of " + ", ".join(TRAINING_SETS)
            )
        if isinstance(training, str) and training == "greedy" and candidates is None:
            raise ValueError("the greedy training set needs a candidate workload")
        n = int(np.shape(histogram)[0]) if np.ndim(histogram) == 1 else -1
        if n <= 0:
            raise ValueError("the histogram must be a non-empty vector of cell counts")
        cand = as_query_matrix(candidates, n) if candidates is not None else None
        name: str
        if not isinstance(training, str):
            name, q = "explicit", as_query_matrix(training, n)
        elif training == "auto":
            name, q = choose_training_set(
                n,
                epsilon=epsilon,
                delta=delta,
                candidates=cand,
                max_column_l1=max_column_l1,
                max_correlation=max_correlation,
            )
        elif training == "identity":
            name, q = "identity", disjoint_intervals(n)
        elif training == "hierarchical":
            name, q = f"hierarchical-{branching}", hierarchical_intervals(n, branching)
        else:
            cap = max_column_l1 if max_column_l1 is not None else 1.0 + math.ceil(math.log2(n))
            name = "greedy"
            q = greedy_training_set(cand, max_column_l1=cap, max_correlation=max_correlation)
        if q.shape[0] == 0 or q.nnz == 0:
            raise ValueError("the training set is empty: give candidates with non-zero queries")
        noise: NoiseName = "laplace" if delta == 0 else "gaussian"
        if noise == "laplace":
            sens = column_l1(q)
            scale = laplace_scale(epsilon, sens)
        else:
            sens = column_l2(q)
            scale = agm_sigma(epsilon, delta, sens)
        # Only now is the data read.
        x = _as_histogram(histogram)
        k = int(q.shape[0])
        exact = np.asarray(q @ x, dtype=np.float64)
        draw = sampler.laplace(scale, k) if noise == "laplace" else sampler.gaussian(scale, k)
        noisy = exact + np.asarray(draw, dtype=np.float64).reshape(k)
        return cls.from_noisy_answers(
            q,
            noisy,
            epsilon=epsilon,
            delta=delta,
            noise=noise,
            noise_scale=scale,
            sensitivity=sens,
            ridge=ridge,
            nonnegative=nonnegative,
            training_name=name,
        )

    @classmethod
    def from_noisy_answers(
        cls,
        training: Any,
        noisy_answers: Any,
        *,
        epsilon: float,
        delta: float = 0.0,
        noise: NoiseName = "laplace",
        noise_scale: float,
        sensitivity: float,
        ridge: float = 0.0,
        nonnegative: bool = False,
        training_name: str = "explicit",
    ) -> MLDPModel:
        """The regression step alone: a deterministic function of the release (post-processing).

        Given the same training set and noisy answers it returns the same model, bit for bit.
        The privacy fields are recorded as given (they describe how the answers were made).
        """
        q = as_query_matrix(training)
        y = np.array(noisy_answers, dtype=np.float64).reshape(-1)
        if y.shape[0] != q.shape[0]:
            raise ValueError("one noisy answer per training query is needed")
        if not np.all(np.isfinite(y)):
            raise ValueError("noisy answers must be finite numbers")
        theta = _fit_theta(q, y, ridge=float(ridge), nonnegative=nonnegative)
        q.data.flags.writeable = False
        y.flags.writeable = False
        theta.flags.writeable = False
        return cls(
            training=q,
            noisy_answers=y,
            theta=theta,
            epsilon=float(epsilon),
            delta=float(delta),
            noise=noise,
            noise_scale=float(noise_scale),
            sensitivity=float(sensitivity),
            ridge=float(ridge),
            nonnegative=bool(nonnegative),
            training_name=training_name,
        )

    @property
    def num_cells(self) -> int:
        return int(self.training.shape[1])

    def answer(self, matrix: Any) -> FloatArray:
        """Answers ``matrix @ theta`` of any later queries: post-processing, no privacy cost."""
        w = as_query_matrix(matrix, self.num_cells)
        return np.asarray(w @ self.theta, dtype=np.float64)

    def expected_variance(self, matrix: Any) -> FloatArray:
        """Noise variance of each answer under the unregularised least-squares fit.

        ``var(q theta) = v * q (Q^T Q)^+ q^T`` with ``v`` the per-answer noise variance (``2 b^2``
        for Laplace, ``sigma^2`` for Gaussian). Exact for ``ridge == 0`` without the sign
        constraint and for queries in the row space of ``Q``; a reference, not a bound, otherwise.
        """
        w = np.asarray(as_query_matrix(matrix, self.num_cells).toarray(), dtype=np.float64)
        per = 2.0 * self.noise_scale**2 if self.noise == "laplace" else self.noise_scale**2
        gram_pinv = np.linalg.pinv((self.training.T @ self.training).toarray())
        return np.asarray(per * np.einsum("ij,jk,ik->i", w, gram_pinv, w), dtype=np.float64)


def fit(histogram: Any, *, epsilon: float, sampler: Sampler, **options: Any) -> MLDPModel:
    """Function form of :meth:`MLDPModel.fit` (same arguments and guarantee)."""
    return MLDPModel.fit(histogram, epsilon=epsilon, sampler=sampler, **options)
