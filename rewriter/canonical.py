"""One question, one form: a plan's queries over the smallest marginal they depend on.

A statement is reduced over the marginal of the columns it *names*; its linear queries may
not depend on all of them. ``WHERE sex IN ('Male', 'Female')`` (every declared value),
``age BETWEEN 17 AND 90`` (the whole declared range) or ``race IS NOT NULL`` (a column
without NULLs) is true in every cell, and the statement asks exactly what the statement
without the condition asks. Two statements whose batches are the same linear queries over the
same marginal are one question: the second must be answered as a repeat (the stored answer,
no new noise, no cost), and the epoch must see one release, not two.

So the form of a plan follows its weights, not its text: every attribute along which every
query's weights are constant is summed out. A query ``sum_c w(c) x(c)`` whose weight does not
change along attribute ``a`` equals ``sum_c' w(c') x'(c')`` over the marginal ``x'`` without
``a`` (``x'`` sums ``x`` along ``a``), exactly, for every histogram: the same linear query, so
the same sensitivity and the same answer. Only the batch and its domain change; the groups,
the measures' layouts and the post-processing are the statement's own. The projection reads
only the weights (public: the statement and the declared domains), never the data.

>>> import numpy as np, scipy.sparse as sp
>>> from dp.domain import Domain, QueryBatch
>>> d = Domain.of(("sex", 2), ("income", 2))
>>> b = QueryBatch(d, sp.csr_array(np.array([[1.0, 0.0, 1.0, 0.0]])))  # income = first
>>> p = project(b)
>>> p.domain.names, p.matrix.toarray().tolist()
(('income',), [[1.0, 0.0]])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.domain import QueryBatch

from .plan import Plan


def project(batch: QueryBatch) -> QueryBatch:
    """``batch`` over the smallest marginal of its domain its queries depend on (itself when
    every attribute matters)."""
    current = batch
    axis = 0
    while axis < len(current.domain.attributes):
        summed = _summed_out(current, axis)
        if summed is None:
            axis += 1
        else:
            current = summed
    return current


def canonical(plan: Plan, name: Callable[[Sequence[str]], str]) -> Plan:
    """``plan`` with its batch over the smallest marginal (:func:`project`), its domain with
    it and its marginal named by ``name`` (``rewriter.reduce.marginal_name``)."""
    batch = project(plan.batch)
    if batch is plan.batch:
        return plan
    return dataclasses.replace(
        plan, batch=batch, domain=batch.domain, view=name(batch.domain.names)
    )


def _summed_out(batch: QueryBatch, axis: int) -> QueryBatch | None:
    """The batch without attribute ``axis`` when every row's weights are constant along it
    (each cell's weight the same for every value of the attribute); None otherwise."""
    domain = batch.domain
    shape = domain.shape
    n = shape[axis]
    m = batch.matrix
    rest_shape = shape[:axis] + shape[axis + 1 :]
    rest_size = int(np.prod(rest_shape, dtype=np.int64))
    if n == 1:
        return _rebuilt(batch, axis, m.indptr, m.indices, m.data)
    if np.any(np.diff(m.indptr) % n):
        return None  # a row constant along the attribute has n entries per other cell
    coords = np.unravel_index(m.indices.astype(np.int64), shape)
    rest = (
        np.ravel_multi_index(coords[:axis] + coords[axis + 1 :], rest_shape)
        if rest_shape
        else np.zeros(m.nnz, dtype=np.int64)
    )
    rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    key = rows * rest_size + rest
    order = np.argsort(key, kind="stable")
    key, data = key[order], m.data[order]
    blocks = key.reshape(-1, n)
    values = data.reshape(-1, n)
    if not (np.all(blocks == blocks[:, :1]) and np.all(values == values[:, :1])):
        return None
    if blocks.shape[0] > 1 and np.any(blocks[1:, 0] == blocks[:-1, 0]):
        return None  # more than n entries in one block
    kept_rows, kept_cols = blocks[:, 0] // rest_size, blocks[:, 0] % rest_size
    indptr = np.zeros(m.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(kept_rows, minlength=m.shape[0]), out=indptr[1:])
    return _rebuilt(batch, axis, indptr, kept_cols, values[:, 0])


def _rebuilt(
    batch: QueryBatch,
    axis: int,
    indptr: npt.NDArray[np.int64] | npt.NDArray[np.int32],
    indices: npt.NDArray[np.int64] | npt.NDArray[np.int32],
    data: npt.NDArray[np.float64],
) -> QueryBatch:
    domain = batch.domain.without(axis)  # a question about units stays one (dp.per_unit)
    matrix = sp.csr_array(
        (np.asarray(data, dtype=np.float64), np.asarray(indices), np.asarray(indptr)),
        shape=(batch.matrix.shape[0], domain.size),
    )
    return QueryBatch(domain, matrix)


__all__ = ["canonical", "project"]
