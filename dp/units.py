"""Privacy units: how much one unit (a person) may change an epoch's histogram, and the
sensitivities that follow from it.

Neighbouring relation. Without a privacy unit, neighbouring databases differ by one row, so the
histogram ``x`` of an epoch changes by one in one cell. With a privacy unit (``[tables.T]
privacy_unit``), neighbouring databases differ by *all the rows of one unit*. The pin keeps at
most ``rows`` rows of each unit, at most ``per_cell`` of them in any one cell of the epoch's
domain, chosen by a rule that reads only that unit's own rows (``rewriter.histogram``: the rows
of smallest keyed hash). Adding or removing a unit therefore changes the pinned histogram by a
vector ``d >= 0`` with ``sum(d) <= rows`` and ``d_j <= per_cell``: the other units' kept rows do
not change. Row-level privacy is ``Contribution()`` (``rows = per_cell = 1``).

Sensitivities. For linear queries ``M`` (``m x n``) whose column ``j`` aggregates cells on
which a unit may put at most ``cap_j`` rows (``cap_j = min(rows, per_cell * cells_j)``):

- ``L1(M) <= fill(column L1 norms)`` since ``||M d||_1 <= sum_j d_j ||M_j||_1``;
- ``Linf(M) <= max_i fill(|M_i|)`` (each answer separately);
- ``L2(M) <= min(fill(column L2 norms), sqrt(L1 * Linf))``, by the triangle inequality and by
  ``||v||_2^2 <= ||v||_1 ||v||_inf``;

where ``fill(v)`` is the maximum of ``sum_j d_j v_j`` over those ``d``: ``cap_j`` on the
largest entries of ``v`` until ``rows`` are spent (a linear programme over a box with one
budget, solved exactly by the greedy order). Each bound is an upper bound of the true
sensitivity, so noise calibrated to it is at least as private; for row level (``rows = 1``)
all of them are the largest column norm, exactly the row-level sensitivity. The bound is exact
for a total count (``rows``) and for a histogram (``sqrt(rows * per_cell)``).

>>> import numpy as np
>>> Contribution(rows=9).sensitivities(np.eye(4))
(9.0, 9.0)
>>> Contribution(rows=9, per_cell=1).sensitivities(np.eye(16))
(3.0, 9.0)
>>> Contribution(rows=9, per_cell=1).sensitivities(np.ones((1, 16)))
(9.0, 9.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.errors import PrivacyParameterError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Contribution:
    """The bound on one privacy unit's rows: ``rows`` in all, ``per_cell`` in one cell of the
    epoch's domain (0: no bound but ``rows``). Validated on construction."""

    rows: int = 1
    per_cell: int = 0

    def __post_init__(self) -> None:
        for name, v in (("rows", self.rows), ("per_cell", self.per_cell)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise PrivacyParameterError(f"the contribution bound {name} must be an integer")
        if self.rows < 1:
            raise PrivacyParameterError("a privacy unit must be allowed at least one row")
        object.__setattr__(self, "per_cell", min(self.per_cell or self.rows, self.rows))

    @property
    def row_level(self) -> bool:
        return self.rows == 1

    def caps(self, cells: npt.ArrayLike) -> FloatArray:
        """The most rows of one unit in a column that aggregates ``cells`` cells of the
        epoch's domain."""
        c = np.asarray(cells, dtype=np.float64)
        return np.minimum(float(self.rows), float(self.per_cell) * c)

    def sensitivities(self, matrix: Any, cells: npt.ArrayLike = 1.0) -> tuple[float, float]:
        """``(L2, L1)`` sensitivity bounds of ``matrix @ x`` (dense or sparse; see the module
        doc). ``cells``: the number of the domain's cells each column aggregates (a scalar or
        one per column)."""
        m = sp.csr_array(matrix, dtype=np.float64)
        m.sum_duplicates()
        n = int(m.shape[1])
        caps = np.broadcast_to(self.caps(cells), (n,))
        if m.nnz == 0:
            return 0.0, 0.0
        a = abs(m)
        col_l1 = np.asarray(a.sum(axis=0), dtype=np.float64).reshape(-1)
        col_l2 = np.sqrt(np.asarray(a.multiply(a).sum(axis=0), dtype=np.float64).reshape(-1))
        l1 = _fill(col_l1, caps, self.rows)
        tri = _fill(col_l2, caps, self.rows)
        linf = _row_fill(a, caps, self.rows)
        return min(tri, math.sqrt(l1 * linf)), l1


def _fill(values: FloatArray, caps: FloatArray, budget: int) -> float:
    """``max sum_j d_j values_j`` over ``0 <= d_j <= caps_j``, ``sum_j d_j <= budget``."""
    order = np.argsort(-values, kind="stable")
    c = caps[order]
    before = np.cumsum(c) - c
    take = np.clip(budget - before, 0.0, c)
    return float(np.dot(take, values[order]))


def _row_fill(a: sp.csr_array, caps: FloatArray, budget: int) -> float:
    """``max_i fill(a_i)`` over the rows of a non-negative sparse matrix, vectorised: the
    entries sorted by row, then by value descending."""
    a = sp.csr_array(a)
    a.sort_indices()
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    vals = np.asarray(a.data, dtype=np.float64)
    order = np.lexsort((-vals, rows))
    rows, vals = rows[order], vals[order]
    c = caps[a.indices[order]]
    cum = np.cumsum(c)
    start = np.concatenate(([0.0], cum))[a.indptr[:-1]][rows]  # caps before the row
    before = cum - c - start
    take = np.clip(budget - before, 0.0, c)
    per_row = np.bincount(rows, weights=take * vals, minlength=a.shape[0])
    return float(np.max(per_row))
