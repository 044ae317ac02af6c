"""A fast upper bound on the error of a planned Matrix Mechanism release (for planning only).

``dp.marginals.plan_release`` gives each block of a release the certified-gap solver's strategy
over the block's reduced domain. On exploratory logs (hundreds of overlapping filtered
histograms in one block) that takes minutes per plan: a 2,318 x 1,792 reduced workload needs
its SVD and repeated eigendecompositions. A predictor that compares many candidate sets P, at
several origins of a backtest, cannot afford it; it prices each candidate by the error of a
*feasible* strategy that is cheap to compute and close to the optimum on such workloads.

The strategy (HDMM's product strategies, McKenna et al., PVLDB 2018, ``OPT_x``). A block's
marginal is a product of attributes ``a_1 .. a_k``; nearly every row the rewriter makes is a
product of one vector per attribute (``GROUP BY x`` under conjunctive filters: the group's
indicator on ``x`` times each filter's indicator on its attribute; a sum of ``x``: its values on
``x``; an attribute a row does not use: all ones). Take one strategy ``A_i`` per attribute,
normalised to unit L2 (or L1) column norm, and measure the block with ``A = A_1 x ... x A_k``
(Kronecker product): its column norms are the products of the factors', so its sensitivity is 1,
and a product row ``w = f_1 x ... x f_k`` has variance ``prod_i f_i^T (A_i^T A_i)^+ f_i`` per unit
noise. Each ``A_i`` is ``dp.strategy.optimize_strategy``'s for the attribute's factors, each
weighted by the row's weight times the row's variance on the other attributes (alternating
passes, as ``OPT_x`` does); the factors are small (one attribute's bins), so this takes
milliseconds where the block's own program takes minutes. A row that is no product is priced
exactly under the same strategy (``w^T (x_i M_i) w`` over its cells), or bounded above by the
largest eigenvalue when it has many cells.

What it gives. Each block's expected error ``e_g`` at unit sensitivity, as
``dp.marginals.planned_blocks`` gives it (``dp.marginals.block_shares`` then splits the release
and prices the whole), and each predicted row's own variance ``q`` under the block's strategy
(before the block's share: a row of block ``g`` has variance ``sigma^2 q / c_g^2``). Since the
product strategy is one the block's program could choose, ``e_g`` is at least that program's
optimum; it equalled the solver's on the two-attribute blocks of the prediction benchmark's
logs and was within 15% on the others measured (``tests/dp/test_release_bound.py`` checks
both directions on small workloads). The blocks, and the batches each keeps, follow
``plan_release``: the maximal marginals, each batch in the smallest that covers it, and a block
whose reduced workload would exceed ``dp.marginals.MAX_BLOCK_ENTRIES`` keeps, in P's order, the
batches that fit (its reduced columns counted exactly by hashing the cells when the marginal
has at most :data:`HASHED_CELLS` cells, else bounded above by the product of each attribute's
distinct columns, which may leave out a batch the engine keeps).

No noise is ever calibrated from this module: it is arithmetic on public workloads, used to
compare candidate predictions (``rewriter.predict_cap``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.domain import Domain, FloatArray, QueryBatch
from dp.marginals import MAX_BLOCK_ENTRIES, block_domains, normalised_weights
from dp.strategy import optimize_strategy, sensitivities

#: Alternating passes over the attributes (``OPT_x``); the second moves the error by a few
#: percent at most on the benchmark's blocks.
PASSES = 2
#: The solver's work budget for one attribute's strategy (nominal seconds: deterministic).
FACTOR_SECONDS = 0.05
#: A non-product row with at most this many cells is priced exactly, a larger one bounded.
EXACT_CELLS = 2048
#: The marginal size up to which a block's reduced columns are counted exactly.
HASHED_CELLS = 1 << 16

IntArray = npt.NDArray[np.intp]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, eq=False)
class Factored:
    """A batch's rows as products over its marginal's attributes.

    ``factors[i]`` is ``m x n_i`` (row ``r``'s vector on attribute ``i``); for a row that is no
    product (``product[r]`` False) it is the row's absolute sum over the other attributes (what
    the attribute's strategy is optimised for) and the row's cells are priced from
    ``matrix``."""

    domain: Domain
    factors: tuple[FloatArray, ...]
    product: BoolArray
    matrix: sp.csr_array

    @property
    def rows(self) -> int:
        return int(self.product.shape[0])


def factor(batch: QueryBatch) -> Factored:
    """The rows of ``batch`` as products of per-attribute vectors (see :class:`Factored`).

    A row is a product when its nonzero cells are the product of their projections and each
    value is the product of the row's marginal sums divided by its total to the power
    ``k - 1`` (exact for a product of nonnegative vectors; a row whose sums cancel is taken as
    no product, and priced from its cells)."""
    m = batch.matrix
    shape = batch.domain.shape
    k = len(shape)
    rows = m.shape[0]
    counts = np.diff(m.indptr)
    row_of = np.repeat(np.arange(rows), counts)
    coords = np.unravel_index(m.indices, shape) if k else ()
    values = np.asarray(m.data, dtype=np.float64)
    factors: list[FloatArray] = []
    for i, n in enumerate(shape):
        f = np.zeros((rows, n))
        np.add.at(f, (row_of, coords[i]), values)
        factors.append(f)
    total = np.zeros(rows)
    np.add.at(total, row_of, values)
    product = counts > 0
    if k > 1:
        support = np.ones(rows)
        for f in factors:
            support *= np.count_nonzero(f, axis=1)
        guess = np.ones(values.shape[0])
        for i, f in enumerate(factors):
            guess *= f[row_of, coords[i]]
        with np.errstate(divide="ignore", invalid="ignore"):
            guess /= total[row_of] ** (k - 1)
            close = np.isclose(guess, values, rtol=1e-9, atol=0.0)
        ok = np.ones(rows, dtype=np.bool_)
        np.logical_and.at(ok, row_of, close)
        product &= ok & (support == counts) & (total != 0.0)
        # scale: the product of the marginal sums is total^k; divide one factor by total^(k-1)
        scale = np.where(product, total, 1.0) ** (k - 1)
        factors[0] = factors[0] / np.where(scale == 0.0, 1.0, scale)[:, None]
        for i in range(k):  # a non-product row's factors: its absolute marginal sums
            if not product.all():
                g = np.zeros((rows, shape[i]))
                np.add.at(g, (row_of, coords[i]), np.abs(values))
                factors[i][~product] = g[~product]
    return Factored(
        domain=batch.domain,
        factors=tuple(factors),
        product=np.asarray(product, dtype=np.bool_),
        matrix=m,
    )


class FactorCache:
    """:func:`factor` by batch (key and domain), and each block's bound by its batches and
    weights: a predictor prices the same statements, often the same blocks, in many candidate
    releases."""

    def __init__(self) -> None:
        self._items: dict[tuple[Domain, str], Factored] = {}
        self.blocks: dict[tuple[object, ...], tuple[list[int], float, tuple[FloatArray, ...]]] = {}
        self.fits: dict[tuple[object, ...], _Fit] = {}

    def get(self, batch: QueryBatch) -> Factored:
        key = (batch.domain, batch.key)
        got = self._items.get(key)
        if got is None:
            got = self._items[key] = factor(batch)
        return got


@dataclass(frozen=True, slots=True, eq=False)
class BlockBound:
    """One block of a release priced by its product strategy: its expected error ``error``
    (``e_g``, at unit sensitivity, the batches' weights included), its batches (those kept, in
    P's order) and each kept batch's rows' variances per unit noise (unweighted, before the
    block's share of the release)."""

    domain: Domain
    error: float
    batches: tuple[QueryBatch, ...]
    row_variances: tuple[FloatArray, ...]


def bound_release(
    predicted: Sequence[QueryBatch],
    *,
    laplace: bool,
    weights: Sequence[float] | None = None,
    cache: FactorCache | None = None,
) -> tuple[BlockBound, ...]:
    """The blocks of the release ``dp.marginals.plan_release`` would plan for ``predicted``,
    each priced by its product strategy (module doc). ``weights``: one positive weight per
    batch, as for ``plan_release`` (normalised here alike). A batch that reads no cell is left
    out, as there."""
    if weights is not None and len(weights) != len(predicted):
        raise ValueError("one weight per predicted batch")
    cache = cache or FactorCache()
    w = normalised_weights(list(weights) if weights is not None else [1.0] * len(predicted))
    keep = [i for i, b in enumerate(predicted) if b.matrix.nnz > 0]
    if not keep:
        return ()
    batches = [predicted[i] for i in keep]
    ws = [float(w[i]) for i in keep]
    blocks = block_domains(batches)
    homes: list[list[int]] = [[] for _ in blocks]
    for j, b in enumerate(batches):
        home = min(
            (i for i, d in enumerate(blocks) if d.covers(b.domain)),
            key=lambda i: (blocks[i].size, i),
        )
        homes[home].append(j)
    out = []
    for dom, members in zip(blocks, homes, strict=True):
        items = [(batches[j], cache.get(batches[j]), ws[j]) for j in members]
        signature = (dom, laplace, *((b.domain, b.key, wt) for b, _, wt in items))
        got = cache.blocks.get(signature)
        if got is None:
            chosen = _fitting(
                dom, [f for _, f, _ in items], [b.key for b, _, _ in items], cache.fits
            )
            error, variances = (
                _block_error(dom, [(items[c][1], items[c][2]) for c in chosen], laplace)
                if chosen
                else (0.0, ())
            )
            got = cache.blocks[signature] = (chosen, error, variances)
        chosen, error, variances = got
        if chosen:
            out.append(BlockBound(dom, error, tuple(items[c][0] for c in chosen), variances))
    return tuple(out)


def _lifted_factors(dom: Domain, f: Factored) -> list[FloatArray]:
    """The batch's factors over the block's attributes (all ones on those it lacks)."""
    own = dict(zip(f.domain.names, f.factors, strict=True))
    return [
        own[name] if name in own else np.ones((f.rows, size))
        for name, size in zip(dom.names, dom.shape, strict=True)
    ]


@dataclass(slots=True)
class _Fit:
    """The state of :func:`_fitting` after some batches (to resume it on a longer P)."""

    attrs: list[FloatArray]
    cells: tuple[FloatArray, BoolArray] | None
    chosen: list[int]
    total: int


def _fitting(
    dom: Domain,
    items: Sequence[Factored],
    keys: Sequence[str] = (),
    fits: dict[tuple[object, ...], _Fit] | None = None,
) -> list[int]:
    """The batches a block keeps, as ``dp.marginals`` fits them: all when the reduced workload
    (rows x distinct touched columns) is within ``MAX_BLOCK_ENTRIES``, else in order those
    that keep it within. The distinct columns are bounded by the product of each attribute's
    distinct columns (each bin's column hashed as a random combination of its entries: equal
    columns hash alike, unequal ones differ with probability 1); when that bound does not fit
    and the marginal has at most :data:`HASHED_CELLS` cells, the cells' columns are hashed and
    counted exactly."""
    rows = [f.rows for f in items]
    if sum(rows) * dom.size <= MAX_BLOCK_ENTRIES:
        return list(range(len(items)))
    fits = {} if fits is None else fits
    start = 0
    state = _Fit([np.zeros(n) for n in dom.shape], None, [], 0)
    if keys:  # a longer P whose first batches were fitted already: resume from there
        for n in range(len(items), 0, -1):
            got = fits.get((dom, *keys[:n]))
            if got is not None:
                start = n
                state = _Fit(list(got.attrs), got.cells, list(got.chosen), got.total)
                break
    attrs, cells, chosen, total = state.attrs, state.cells, state.chosen, state.total
    for i in range(start, len(items)):
        f = items[i]
        coef = np.random.default_rng(1_000_003 + i).uniform(0.5, 1.5, size=f.rows)
        factors = _lifted_factors(dom, f)
        trial = [h + coef @ fi for h, fi in zip(attrs, factors, strict=True)]
        bound = math.prod(int(np.unique(h).shape[0]) for h in trial)
        ok = (total + rows[i]) * bound <= MAX_BLOCK_ENTRIES
        hashed = None
        if not ok and dom.size <= HASHED_CELLS:
            if cells is None:
                cells = _cells(dom, [items[j] for j in chosen], chosen)
            value, reach = _cells(dom, [f], [i])
            hashed = (cells[0] + value, cells[1] | reach)
            columns = int(np.unique(hashed[0][hashed[1]]).shape[0])
            ok = (total + rows[i]) * columns <= MAX_BLOCK_ENTRIES
        if ok:
            attrs = trial
            chosen.append(i)
            total += rows[i]
            if cells is not None:
                cells = hashed if hashed is not None else _add_cells(cells, dom, f, i)
    if keys:
        fits[(dom, *keys)] = _Fit(attrs, cells, list(chosen), total)
    return chosen


def _add_cells(
    cells: tuple[FloatArray, BoolArray], dom: Domain, f: Factored, seed: int
) -> tuple[FloatArray, BoolArray]:
    value, reach = _cells(dom, [f], [seed])
    return cells[0] + value, cells[1] | reach


def _cells(
    dom: Domain, items: Sequence[Factored], seeds: Sequence[int]
) -> tuple[FloatArray, BoolArray]:
    """The batches' rows' random combination over the block's cells, and the cells they
    touch (the batch of seed ``i`` combined with the coefficients :func:`_fitting` gives it)."""
    value = np.zeros(dom.size)
    reach = np.zeros(dom.size)
    for f, seed in zip(items, seeds, strict=True):
        coef = np.random.default_rng(1_000_003 + seed).uniform(0.5, 1.5, size=f.rows)
        factors = _lifted_factors(dom, f)
        prod = np.flatnonzero(f.product)
        value += _combined([fi[prod] for fi in factors], coef[prod])
        reach += _combined([np.abs(fi[prod]) for fi in factors], np.ones(prod.shape[0]))
        for r in np.flatnonzero(~f.product):
            row = f.matrix[[int(r)]].toarray().reshape(f.domain.shape)
            spread = _broadcast_row(row, f.domain, dom)
            value += coef[r] * spread
            reach += np.abs(spread)
    return value, reach > 0.0


def _combined(factors: Sequence[FloatArray], coef: FloatArray) -> FloatArray:
    """``sum_r coef_r (f_1r x f_2r x ...)`` flattened in C order."""
    t = coef[:, None] * factors[0]
    for f in factors[1:]:
        t = (t[:, :, None] * f[:, None, :]).reshape(t.shape[0], -1)
    return np.asarray(t.sum(axis=0), dtype=np.float64)


def _broadcast_row(row: FloatArray, own: Domain, dom: Domain) -> FloatArray:
    """A row over its marginal ``own`` spread over the block ``dom`` (constant along the
    attributes it lacks), flattened in the block's order."""
    names = list(own.names)
    order = [names.index(n) for n in dom.names if n in names]
    moved = np.transpose(row, order)
    shape = [s if n in names else 1 for n, s in zip(dom.names, dom.shape, strict=True)]
    return np.broadcast_to(moved.reshape(shape), dom.shape).reshape(-1)


def _block_error(
    dom: Domain, items: Sequence[tuple[Factored, float]], laplace: bool
) -> tuple[float, tuple[FloatArray, ...]]:
    """``e_g`` of a block's product strategy and each batch's rows' variances (module doc)."""
    k = len(dom.shape)
    lifted = [_lifted_factors(dom, f) for f, _ in items]
    weight = np.concatenate([np.full(f.rows, wt) for f, wt in items])
    stacked = [np.vstack([lf[i] for lf in lifted]) for i in range(k)]
    product = np.concatenate([f.product for f, _ in items])
    uniques: list[tuple[FloatArray, IntArray]] = []
    for s in stacked:
        u, inverse = np.unique(s, axis=0, return_inverse=True)
        uniques.append((u, np.asarray(inverse, dtype=np.intp).reshape(-1)))
    q = np.ones((weight.shape[0], k))
    grams: list[FloatArray] = [np.eye(n) for n in dom.shape]
    for _ in range(PASSES):
        for i in range(k):
            u, inverse = uniques[i]
            others = np.prod(np.delete(q, i, axis=1), axis=1) if k > 1 else np.ones_like(weight)
            mass = np.zeros(u.shape[0])
            np.add.at(mass, inverse, weight * others)
            grams[i] = _factor_gram(u, mass, laplace)
            per = np.einsum("ij,jk,ik->i", u, grams[i], u)
            q[:, i] = per[inverse]
    variance = np.prod(q, axis=1)
    if not product.all():
        variance = variance.copy()
        start = 0
        for f, _ in items:
            for r in np.flatnonzero(~f.product):
                variance[start + r] = _cells_variance(dom, f, int(r), grams)
            start += f.rows
    error = float(np.dot(weight, variance))
    out = []
    start = 0
    for f, _ in items:
        out.append(variance[start : start + f.rows])
        start += f.rows
    return error, tuple(out)


def _factor_gram(u: FloatArray, mass: FloatArray, laplace: bool) -> FloatArray:
    """``(A^T A)^+`` of the attribute's strategy for the factors ``u`` weighted by ``mass``,
    ``A`` at unit L2 (or L1) column norm."""
    keep = mass > 0.0
    rows = u[keep] * np.sqrt(mass[keep])[:, None]
    rows = rows[np.any(rows != 0.0, axis=1)]
    n = u.shape[1]
    if rows.shape[0] == 0:
        return np.zeros((n, n))
    s = optimize_strategy(rows, time_limit=FACTOR_SECONDS)
    a = np.asarray(s.matrix, dtype=np.float64)
    l2, l1 = sensitivities(a)
    a = a / (l1 if laplace else l2)
    return np.asarray(np.linalg.pinv(a.T @ a, hermitian=True), dtype=np.float64)


def _cells_variance(dom: Domain, f: Factored, r: int, grams: Sequence[FloatArray]) -> float:
    """A non-product row's variance under the product strategy: exactly over its cells (the
    block's attributes it lacks contribute ``1^T M 1``), or bounded by the largest eigenvalues
    when it has more than :data:`EXACT_CELLS` cells."""
    lo, hi = int(f.matrix.indptr[r]), int(f.matrix.indptr[r + 1])
    cells = f.matrix.indices[lo:hi]
    values = np.asarray(f.matrix.data[lo:hi], dtype=np.float64)
    own = f.domain.names
    position = {n: i for i, n in enumerate(dom.names)}
    outside = 1.0
    for name, size in zip(dom.names, dom.shape, strict=True):
        if name not in own:
            ones = np.ones(size)
            outside *= float(ones @ grams[position[name]] @ ones)
    if cells.shape[0] > EXACT_CELLS:
        top = math.prod(float(np.max(np.linalg.eigvalsh(grams[position[n]]))) for n in own)
        return outside * top * float(values @ values)
    coords = np.unravel_index(cells, f.domain.shape)
    g = np.ones((cells.shape[0], cells.shape[0]))
    for i, name in enumerate(own):
        c = coords[i]
        g *= grams[position[name]][np.ix_(c, c)]
    return outside * float(values @ g @ values)


__all__ = ["BlockBound", "FactorCache", "Factored", "bound_release", "factor"]
