"""The Matrix Mechanism over many marginals: blocks, their strategies, one joint release.

The predicted set P of a whole-table epoch is a set of linear queries over *marginals* of the
table's domain (each statement's batch is over the attributes it uses). The release is built
in blocks (docs/mm.md §6):

1. **Blocks.** Each batch of P goes to a block: the blocks are the maximal attribute sets of P's
   batches (a batch over ``{age}`` joins a block over ``{age, sex}`` when P has one), so that a
   query contained in a larger predicted marginal is measured once, with it.
2. **Reduced domains.** A block's workload ``W_g`` is reduced losslessly: cells no query of the
   block touches are dropped, identical columns merged (``dp.strategy.reduce_domain``, computed
   here on the sparse matrix). The strategy lives on the reduced columns, so its size follows
   P, never the marginal's number of cells.
3. **Strategies.** Each block gets the certified-gap solver's strategy (``optimize_strategy``;
   ``l1_strategy`` for Laplace noise), normalised to unit sensitivity, with expected error
   ``e_g`` (total squared error of the block's queries per unit noise).
   With weights (the default mode's epoch: each statement's probability of being asked,
   public), a batch's rows are scaled by the square root of its weight in ``W_g``, so the
   strategies and the split below minimise the expected error of the statements that come
   (:func:`normalised_weights`); what is answered from the release does not depend on them.
4. **The budget split.** Block ``g`` is measured as ``c_g A_g x_g + Z`` with one noise scale for
   the whole release. Under Gaussian noise the total expected error ``sum_g e_g / c_g^2`` subject
   to ``sum_g c_g^2 = 1`` is minimised by ``c_g^2 = sqrt(e_g) / sum_h sqrt(e_h)``; under Laplace
   noise (``sum_g c_g = 1``) by ``c_g`` proportional to ``e_g^(1/3)``.
5. **Sensitivity, recomputed.** A row of the table adds one to one cell of every block's
   marginal (the pin is one histogram over the whole domain, ``dp.pin``), so the release's L2
   sensitivity is ``max over full cells sqrt(sum_g ||column of c_g A_g||^2)``. It is computed
   exactly over the product of the blocks' attributes when that product has at most
   :data:`EXACT_SENSITIVITY_CELLS` cells, else bounded above by ``sqrt(sum_g max ||.||^2)``
   (sound: noise calibrated to an upper bound is at least as private). L1 likewise.

A :class:`BlockRelease` answers a query over any marginal its block's marginal covers (the
query is lifted to the block's marginal, then reduced to its columns; a query that is not
constant on a merged group, or touches a dropped cell, is outside the row space and refused).
Everything it answers is post-processing of the release.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.domain import Domain, FloatArray, QueryBatch, lift, lifted_matrix, projection
from dp.release import ROW_SPACE_RTOL, NotInRowSpaceError, Release, group_means
from dp.strategy import Strategy, l1_strategy, optimize_strategy, splitmix, strategy_error
from dp.strategy import lift as lift_columns
from dp.units import Contribution

ROW_LEVEL = Contribution()

IntArray = npt.NDArray[np.intp]

#: The product of the blocks' attributes up to which the release's sensitivity is exact.
EXACT_SENSITIVITY_CELLS = 1 << 22
#: The solver's work budget for the whole release (seconds at its nominal rate), shared
#: between the blocks in proportion to their size.
SOLVER_SECONDS = 4.0
#: The largest reduced workload (rows x columns) a block may have: the solver and the release
#: hold it dense. Predicted statements that would make a block larger are left out of the
#: release (answered online, like unpredicted ones).
MAX_BLOCK_ENTRIES = 1 << 22
#: The least weight a predicted statement has in the workload, relative to the heaviest
#: (:func:`normalised_weights`), so that each keeps a usable part of the release however
#: unlikely it is.
MIN_WEIGHT = 1e-2


def normalised_weights(weights: Sequence[float]) -> FloatArray:
    """Weights of predicted statements as the release uses them: divided by the largest, at
    least :data:`MIN_WEIGHT`. A statement of weight ``w`` has its rows scaled by ``sqrt(w)``
    in the workload the strategies are optimised for, so the release minimises the
    ``w``-weighted sum of its rows' variances (with ``w`` the probability that the statement
    is asked: the expected squared error of the statements that come). The weights are
    public (they come from the query log, never from the data); the rows P answers, and how
    each answer is computed from the release, do not depend on them."""
    w = _positive(weights)
    return np.maximum(w / w.max(), MIN_WEIGHT) if w.size else w


def _positive(weights: Sequence[float]) -> FloatArray:
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError("the weights of predicted statements must be positive numbers")
    return w


@dataclass(frozen=True, slots=True, eq=False)
class Reduction:
    """A lossless reduction of a marginal's cells: ``groups[j]`` is the reduced column of cell
    ``j`` (``-1`` for a cell no query of the block touches); ``counts`` cells per column."""

    domain: Domain
    groups: IntArray
    counts: FloatArray
    #: Every cell its own column (no cell dropped, none merged).
    is_identity: bool = False

    @staticmethod
    def identity(domain: Domain) -> Reduction:
        n = domain.size
        return Reduction(domain, np.arange(n, dtype=np.intp), np.ones(n), is_identity=True)

    @property
    def num_columns(self) -> int:
        return int(self.counts.shape[0])

    def expand(self, reduced: FloatArray) -> FloatArray:
        """Rows over the columns as rows over the marginal's cells: a cell takes its column's
        value, a dropped cell zero (``dp.strategy.lift``)."""
        return lift_columns(np.atleast_2d(reduced), self.groups)

    def reduce_data(self, x: FloatArray) -> FloatArray:
        """The reduced histogram: each column's cells summed."""
        keep = self.groups >= 0
        out = np.bincount(self.groups[keep], weights=x[keep], minlength=self.num_columns)
        return np.asarray(out, dtype=np.float64)

    def reduce_queries(self, matrix: sp.csr_array) -> tuple[sp.csr_array, npt.NDArray[np.bool_]]:
        """Queries over the marginal as queries over the columns (``k x n_r``, sparse: their
        size follows the queries' support), and per row whether that is exact: zero on
        dropped cells, constant within every column's cells."""
        q = sp.csr_array(matrix)
        k = int(q.shape[0])
        if self.is_identity:
            return q, np.ones(k, dtype=np.bool_)
        rows = np.repeat(np.arange(k, dtype=np.intp), np.diff(q.indptr))
        cols = q.indices.astype(np.intp)
        vals = np.asarray(q.data, dtype=np.float64)
        grp = self.groups[cols]
        dropped = grp < 0
        bad = np.bincount(rows[dropped], weights=vals[dropped] ** 2, minlength=k)
        rows, grp, vals = rows[~dropped], grp[~dropped], vals[~dropped]
        p_rows, p_col, mean, resid = group_means(rows, grp, vals, self.counts, k)
        norm = np.bincount(rows, weights=vals**2, minlength=k) + bad
        ok = bad + resid <= ROW_SPACE_RTOL**2 * norm
        out = sp.csr_array((mean, (p_rows, p_col)), shape=(k, self.num_columns))
        return out, np.asarray(ok, dtype=np.bool_)


def reduction(domain: Domain, workload: sp.csr_array) -> tuple[Reduction, sp.csc_array]:
    """The lossless reduction of ``workload`` (sparse, over ``domain``) and the reduced
    workload ``W_r`` (``m x n_r``, sparse). Columns are merged when bit-identical."""
    csc = sp.csc_array(workload)
    csc.sum_duplicates()
    csc.eliminate_zeros()
    n = int(csc.shape[1])
    nnz_per = np.diff(csc.indptr)
    touched = np.flatnonzero(nnz_per > 0)
    # hash every touched column's (row, value) pairs; verify exactly below
    col_of = np.repeat(np.arange(n), nnz_per)
    bits = (np.asarray(csc.data, dtype=np.float64) + 0.0).view(np.uint64)
    with np.errstate(over="ignore"):
        h_entry = splitmix(bits ^ splitmix(csc.indices.astype(np.uint64) + np.uint64(1)))
        h = np.zeros(n, dtype=np.uint64)
        np.add.at(h, col_of, h_entry)
    _, first, inverse = np.unique(h[touched], return_index=True, return_inverse=True)
    groups = np.full(n, -1, dtype=np.intp)
    groups[touched] = inverse.reshape(-1)
    reps = touched[first]
    w_r = sp.csc_array(csc[:, reps])
    if (w_r[:, groups[touched]] != csc[:, touched]).nnz:  # a hash collision: merge exactly
        dense_t = np.ascontiguousarray(csc[:, touched].toarray().T) + 0.0
        keys = dense_t.view(np.dtype((np.void, dense_t.dtype.itemsize * dense_t.shape[1])))
        _, first, inverse = np.unique(keys.reshape(-1), return_index=True, return_inverse=True)
        groups[touched] = inverse.reshape(-1)
        w_r = sp.csc_array(dense_t[first].T)
    counts = np.bincount(groups[groups >= 0], minlength=w_r.shape[1]).astype(np.float64)
    return Reduction(domain, groups, counts), w_r


def block_domains(predicted: Sequence[QueryBatch]) -> tuple[Domain, ...]:
    """The blocks: the maximal attribute sets among P's batches (one domain per set, the
    first in a canonical order), in a canonical order."""
    by_set: dict[frozenset[str], Domain] = {}
    for d in sorted({b.domain for b in predicted}, key=lambda d: (d.names, d.shape)):
        by_set.setdefault(frozenset(d.names), d)
    maximal = [d for k, d in by_set.items() if not any(k < other for other in by_set)]
    return tuple(sorted(maximal, key=lambda d: (d.names, d.shape)))


def _home(batch: QueryBatch, blocks: Sequence[Domain]) -> int:
    """The smallest block that covers the batch's marginal."""
    return min(
        (i for i, d in enumerate(blocks) if d.covers(batch.domain)),
        key=lambda i: (blocks[i].size, i),
    )


def assign(predicted: Sequence[QueryBatch], blocks: Sequence[Domain]) -> list[list[QueryBatch]]:
    """Each batch of P lifted into the smallest block that covers it."""
    return [
        [lift(predicted[j], blocks[i]) for j in members]
        for i, members in enumerate(_homes(predicted, blocks))
    ]


def _homes(predicted: Sequence[QueryBatch], blocks: Sequence[Domain]) -> list[list[int]]:
    """For each block, the indices (in P's order) of the batches it is the home of."""
    out: list[list[int]] = [[] for _ in blocks]
    for j, b in enumerate(predicted):
        out[_home(b, blocks)].append(j)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class BlockPlan:
    """One block of the release, before measurement: its marginal's reduction and its
    strategy over the reduced columns, already scaled by the block's share ``c_g``."""

    reduction: Reduction
    strategy: FloatArray
    expected_error: float
    #: The batches of P this block answers (as P gave them).
    batches: tuple[QueryBatch, ...] = ()


def plan_release(
    predicted: Sequence[QueryBatch],
    *,
    laplace: bool,
    solver_seconds: float = SOLVER_SECONDS,
    weights: Sequence[float] | None = None,
) -> tuple[BlockPlan, ...]:
    """Blocks, reductions, strategies and the budget split for P (see the module doc). A
    block whose reduced workload would exceed :data:`MAX_BLOCK_ENTRIES` keeps, in P's order,
    the batches that fit; the others are left out of the release. A batch that reads no cell
    (an empty range: its answer is 0 whatever the data, which the engine gives exactly) is
    left out too: a block of such batches alone would have no column to measure. With
    ``weights`` (one positive weight per batch, as :func:`normalised_weights` makes them from
    probabilities), the strategies and the split minimise the weighted error; without, every
    row weighs alike."""
    plans = _strategies(predicted, laplace, solver_seconds, weights)
    errors = [_error(s, laplace) for _, s, _ in plans]
    shares, _ = block_shares(errors, laplace=laplace)
    return tuple(
        BlockPlan(
            red,
            s.matrix * (c / (s.sensitivity_l1 if laplace else s.sensitivity_l2)),
            e / c**2,
            bs,
        )
        for (red, s, bs), c, e in zip(plans, shares, errors, strict=True)
    )


def _strategies(
    predicted: Sequence[QueryBatch],
    laplace: bool,
    solver_seconds: float,
    weights: Sequence[float] | None,
) -> list[tuple[Reduction, Strategy, tuple[QueryBatch, ...]]]:
    """Each block's reduction, strategy (unit sensitivity, before the split) and batches."""
    return [
        (
            red,
            l1_strategy(w, time_limit=seconds)
            if laplace
            else optimize_strategy(w, time_limit=seconds),
            batches,
        )
        for red, w, seconds, batches in _fitted_blocks(predicted, solver_seconds, weights)
    ]


def _error(s: Strategy, laplace: bool) -> float:
    return s.expected_error_l1 if laplace else s.expected_error


def block_shares(errors: Sequence[float], *, laplace: bool) -> tuple[tuple[float, ...], float]:
    """The split of one release between blocks whose strategies have expected errors
    ``errors`` (``e_g``, at unit sensitivity), and the release's total expected error
    ``sum_g e_g / c_g^2``: under Gaussian noise ``sum c_g^2 = 1`` and ``c_g^2 = sqrt(e_g) /
    sum_h sqrt(e_h)`` (each block's share of the release's privacy cost is ``c_g^2``: the
    accountants add ``mu^2`` or its equivalent), total ``(sum_g sqrt(e_g))^2``; under Laplace
    noise ``sum c_g = 1`` and ``c_g`` proportional to ``e_g^(1/3)`` (its share of epsilon is
    ``c_g``), total ``(sum_g e_g^(1/3))^3``."""
    if not errors:
        return (), 0.0
    if laplace:
        roots = [e ** (1 / 3) for e in errors]
        return tuple(r / sum(roots) for r in roots), sum(roots) ** 3
    roots = [math.sqrt(e) for e in errors]
    return tuple(math.sqrt(r / sum(roots)) for r in roots), sum(roots) ** 2


def budget_shares(shares: Sequence[float], *, laplace: bool) -> tuple[float, ...]:
    """Each block's share of the release's privacy cost, from :func:`block_shares`' ``c_g``."""
    return tuple(shares) if laplace else tuple(c * c for c in shares)


def planned_error(
    predicted: Sequence[QueryBatch],
    *,
    laplace: bool,
    solver_seconds: float = SOLVER_SECONDS,
    weights: Sequence[float] | None = None,
) -> tuple[float, tuple[QueryBatch, ...]]:
    """The release :func:`plan_release` would plan, priced without building it: the total
    expected error ``sum_g expected_error_g`` of its blocks (each over its share ``c_g``) and
    the batches it keeps. Under Gaussian noise each block's error is the solver's certified
    error at its best iterate (:func:`dp.strategy.strategy_error`: what the strategy's own
    recomputes, up to rounding); under Laplace noise the strategies are built (their L1
    sensitivity is needed). For comparing candidate sets of P only; the epoch's release is
    always :func:`plan_release`'s. With ``weights``, the error is the weighted one."""
    blocks = planned_blocks(
        predicted, laplace=laplace, solver_seconds=solver_seconds, weights=weights
    )
    _, total = block_shares([e for e, _ in blocks], laplace=laplace)
    return total, tuple(b for _, batches in blocks for b in batches)


def planned_blocks(
    predicted: Sequence[QueryBatch],
    *,
    laplace: bool,
    solver_seconds: float = SOLVER_SECONDS,
    weights: Sequence[float] | None = None,
) -> tuple[tuple[float, tuple[QueryBatch, ...]], ...]:
    """The blocks of the release :func:`plan_release` would plan, each with its strategy's
    expected error ``e_g`` at unit sensitivity (:func:`block_shares` splits the release
    between them and prices the whole) and the batches of P it answers; built as
    :func:`planned_error` prices them. A block's ``e_g`` depends only on its own batches, so
    that a change of P can be priced by planning the blocks it touches again."""
    if laplace:  # the strategies are built: the split needs their L1 sensitivity
        return tuple(
            (_error(s, True), batches)
            for _, s, batches in _strategies(predicted, True, solver_seconds, weights)
        )
    blocks = _fitted_blocks(predicted, solver_seconds, weights)
    return tuple(
        (strategy_error(w, time_limit=seconds), batches) for _, w, seconds, batches in blocks
    )


def _fitted_blocks(
    predicted: Sequence[QueryBatch], solver_seconds: float, weights: Sequence[float] | None
) -> list[tuple[Reduction, FloatArray, float, tuple[QueryBatch, ...]]]:
    """The blocks of a release (:func:`plan_release`): for each, its reduction, its reduced
    workload (dense; with ``weights``, each batch's rows scaled by the square root of its
    weight), the solver's seconds (``solver_seconds`` shared by workload size) and
    the batches of P it answers."""
    if weights is not None and len(weights) != len(predicted):
        raise ValueError("one weight per predicted batch")
    scales = np.sqrt(np.ones(len(predicted)) if weights is None else _positive(weights))
    keep = [i for i, b in enumerate(predicted) if b.matrix.nnz > 0]
    predicted = [predicted[i] for i in keep]
    scales = scales[keep]
    if not predicted:
        return []
    blocks = block_domains(predicted)
    fitted_blocks: list[tuple[Reduction, FloatArray, tuple[QueryBatch, ...]]] = []
    for dom, members in zip(blocks, _homes(predicted, blocks), strict=True):
        lifted = [lift(predicted[j], dom) for j in members]
        fitted = _fit(dom, lifted, [float(scales[j]) for j in members])
        if fitted is not None:
            red, w, chosen = fitted
            fitted_blocks.append(
                (
                    red,
                    np.asarray(w.toarray(), dtype=np.float64),
                    tuple(predicted[members[k]] for k in chosen),
                )
            )
    total = sum(w.size for _, w, _ in fitted_blocks) or 1
    return [
        (red, w, max(solver_seconds * w.size / total, 0.05), batches)
        for red, w, batches in fitted_blocks
    ]


def _fit(
    dom: Domain, batches: Sequence[QueryBatch], scales: Sequence[float]
) -> tuple[Reduction, sp.csc_array, tuple[int, ...]] | None:
    """The reduction of a block's batches (their rows scaled by ``scales``), or, when that
    exceeds MAX_BLOCK_ENTRIES, of those that fit taken in order (a batch that would make it
    too large is left out); with the indices of the batches kept. None when not one fits."""

    def reduce(items: Sequence[int]) -> tuple[Reduction, sp.csc_array]:
        rows = [
            batches[i].matrix * scales[i] if scales[i] != 1.0 else batches[i].matrix for i in items
        ]
        return reduction(dom, sp.vstack(rows, format="csr"))

    every = tuple(range(len(batches)))
    red, w = reduce(every)
    if w.shape[0] * w.shape[1] <= MAX_BLOCK_ENTRIES:
        return red, w, every
    chosen: tuple[int, ...] = ()
    best: tuple[Reduction, sp.csc_array, tuple[int, ...]] | None = None
    for i in every:
        red, w = reduce((*chosen, i))
        if w.shape[0] * w.shape[1] <= MAX_BLOCK_ENTRIES:
            chosen = (*chosen, i)
            best = (red, w, chosen)
    return best


def _union(domains: Iterable[Domain]) -> Domain:
    """The product of every attribute of ``domains`` (in order of first appearance)."""
    out = Domain(())
    for d in domains:
        out = out.union(d)
    return out


def release_sensitivity(
    blocks: Sequence[tuple[Reduction, FloatArray]],
    contribution: Contribution = ROW_LEVEL,
    domain: Domain | None = None,
) -> tuple[float, float]:
    """The L2 and L1 sensitivities of the joint release of ``blocks`` (reduction, scaled
    strategy over its columns), recomputed from the matrices (see the module doc).

    With a privacy unit (``contribution``, over the epoch's ``domain``): the smaller of two
    upper bounds, ``rows`` times the row-level sensitivity (the triangle inequality over the
    unit's rows), and ``sqrt(sum_g L2_g^2)`` (``sum_g L1_g``) over the blocks' own unit-level
    bounds (``dp.units``; a block's column aggregates ``counts_j * |domain| / |marginal|``
    cells of the domain)."""
    if not contribution.row_level:
        if domain is None:
            raise ValueError("a unit-level sensitivity needs the epoch's domain")
        r2, r1 = release_sensitivity(blocks)
        per = [
            contribution.sensitivities(a, red.counts * (domain.size // red.domain.size))
            for red, a in blocks
        ]
        u2 = math.sqrt(sum(l2 * l2 for l2, _ in per))
        u1 = sum(l1 for _, l1 in per)
        return min(contribution.rows * r2, u2), min(contribution.rows * r1, u1)
    per_l2, per_l1 = [], []
    for red, a in blocks:
        per_l2.append((red.domain, red.expand(np.einsum("ij,ij->j", a, a))[0]))
        per_l1.append((red.domain, red.expand(np.sum(np.abs(a), axis=0))[0]))
    union = _union(red.domain for red, _ in blocks)
    if union.size <= EXACT_SENSITIVITY_CELLS:
        tot2, tot1 = np.zeros(union.size), np.zeros(union.size)
        for (dom, c2), (_, c1) in zip(per_l2, per_l1, strict=True):
            proj = projection(dom, union)
            tot2 += c2[proj]
            tot1 += c1[proj]
        return math.sqrt(float(np.max(tot2))), float(np.max(tot1))
    return (
        math.sqrt(sum(float(np.max(c)) for _, c in per_l2)),
        sum(float(np.max(c)) for _, c in per_l1),
    )


#: At most this many rows' answers are kept per block by :meth:`BlockRelease.remember`, ...
KNOWN_MAX_ROWS = 1 << 16
#: ... and at most this much work spent on them (rows times the square of the release's
#: columns, about the multiply-adds of their least squares: ~50 ms here at the limit), so
#: that a large reduced domain (whose every answer costs much) does not make loading an epoch
#: slow: its rows beyond the limit are solved when asked, as without the memory, ...
KNOWN_MAX_WORK = 1 << 30
#: ... solved in chunks of at most this many dense entries (rows times the release's columns).
KNOWN_CHUNK_ENTRIES = 1 << 22


@dataclass(frozen=True, slots=True, eq=False)
class BlockRelease:
    """One block of a stored Matrix Mechanism release: ``release`` is over the reduction's
    columns. Answers queries over any marginal the block's marginal covers.

    ``known`` is a cache of :meth:`solve`'s own results, filled once by :meth:`remember` with
    the rows of the predicted set (which is what the block is asked most): by row key
    (``QueryBatch.row_keys``), the answer and variance of each row in the row space. A row's
    answer from a release is its own least squares, whatever rows are asked with it, so a
    batch whose rows are all known is answered from them without solving. Only public values
    (the release and the queries) are kept; it is post-processing of the release."""

    reduction: Reduction
    release: Release
    #: :meth:`remember`'s memory, once made (a list of one: the value itself is frozen)
    _memory: list[dict[bytes, tuple[float, float]]] = field(
        default_factory=list, repr=False, compare=False
    )

    @property
    def known(self) -> Mapping[bytes, tuple[float, float]]:
        """The rows :meth:`remember` solved: answer and variance by row key (empty before)."""
        return self._memory[0] if self._memory else {}

    @property
    def domain(self) -> Domain:
        return self.reduction.domain

    def full_strategy(self) -> FloatArray:
        """The block's strategy over its marginal's cells (zero on dropped cells)."""
        return self.reduction.expand(self.release.matrix)

    def remember(self, batches: Iterable[QueryBatch]) -> None:
        """Solve, once in the block's life, the batches of ``batches`` over marginals it
        covers, stacked per marginal (in chunks of at most :data:`KNOWN_CHUNK_ENTRIES` dense
        entries), and keep their answerable rows in :attr:`known`: whole batches, in order,
        while their rows stay within :data:`KNOWN_MAX_ROWS` and :data:`KNOWN_MAX_WORK`. Later
        calls do nothing; two threads calling it at once both compute the same memory, and
        the first kept is used."""
        if self._memory:
            return
        n = max(1, self.release.num_cells)
        budget = min(KNOWN_MAX_ROWS, KNOWN_MAX_WORK // (n * n))
        per_domain: dict[Domain, list[QueryBatch]] = {}
        for b in batches:
            if b.num_queries and self.domain.covers(b.domain):
                if b.num_queries > budget:
                    break
                budget -= b.num_queries
                per_domain.setdefault(b.domain, []).append(b)
        chunk_rows = max(1, KNOWN_CHUNK_ENTRIES // n)
        known: dict[bytes, tuple[float, float]] = {}
        for group in per_domain.values():
            chunk: list[QueryBatch] = []
            size = 0
            for i, b in enumerate(group):
                chunk.append(b)
                size += b.num_queries
                if size >= chunk_rows or i == len(group) - 1:
                    stacked = QueryBatch.stack(chunk)
                    ans, var, ok = self._solve(stacked)
                    for key, a, v, good in zip(stacked.row_keys(), ans, var, ok, strict=True):
                        if good:
                            known[key] = (float(a), float(v))
                    chunk, size = [], 0
        self._memory.append(known)

    def solve(
        self, batch: QueryBatch, keys: Sequence[bytes] | None = None
    ) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        """Answers, variances and per-row answerability of ``batch`` (over a covered marginal);
        from :attr:`known` when every row of ``batch`` is there (``keys``: its row keys, if
        the caller has them)."""
        if self.known:
            rows = [self.known.get(k) for k in (batch.row_keys() if keys is None else keys)]
            if all(r is not None for r in rows):
                got = np.asarray(rows, dtype=np.float64).reshape(-1, 2)
                return got[:, 0].copy(), got[:, 1].copy(), np.ones(len(rows), dtype=np.bool_)
        return self._solve(batch)

    def _solve(self, batch: QueryBatch) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        q_r, ok = self.reduction.reduce_queries(lifted_matrix(batch, self.domain))
        var = np.full(batch.num_queries, np.inf)
        ans = np.zeros(batch.num_queries)
        if np.any(ok):
            a, v, inside = self.release.solve(q_r)
            ok = ok & inside
            ans, var = np.where(ok, a, 0.0), np.where(ok, v, np.inf)
        return ans, var, ok

    def estimate(self, batch: QueryBatch) -> tuple[FloatArray, FloatArray]:
        ans, var, ok = self.solve(batch)
        if not np.all(ok):
            raise NotInRowSpaceError("a query outside the block's row space was asked of it")
        return ans, var


#: The joint release over the union of several blocks' attributes is formed up to this many
#: cells of that union (it holds the stacked strategy densely over them).
JOINT_MAX_CELLS = 1 << 17


def joint_release(blocks: Sequence[BlockRelease]) -> BlockRelease | None:
    """All blocks as one release over the product of their attributes, when there are several
    and that product has at most :data:`JOINT_MAX_CELLS` cells (else None).

    Each block's strategy is lifted to the union (a row of the table lands in one cell of the
    union and in the cell of every block it projects to, so ``A_g M_g`` is the block's
    measurement of the union's histogram) and the measurements are stacked with their noise
    variances: its least squares (``dp.release``) is the generalised least squares over *all*
    the blocks together. A query answered from it uses every block that says anything about it
    (a count of ``income`` measured in three blocks is their variance-weighted combination), and
    a query no single block contains may still be in the row space of their union (a sum of
    queries from different blocks). Post-processing of the blocks' released values only.
    """
    if len(blocks) < 2:
        return None
    union = _union(b.domain for b in blocks)
    if union.size > JOINT_MAX_CELLS:
        return None
    parts = [b.full_strategy()[:, projection(b.domain, union)] for b in blocks]
    return BlockRelease(
        Reduction.identity(union),
        Release(
            matrix=np.vstack(parts),
            y=np.concatenate([b.release.y for b in blocks]),
            noise_variance=np.concatenate([b.release.noise_variance for b in blocks]),
        ),
    )
