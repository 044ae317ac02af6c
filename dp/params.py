"""Validation of privacy parameters and query matrices shared by the mechanisms.

Every check runs before any data is touched and raises PrivacyParameterError (22023) or
ValueError with a message that names the parameter, never a data-dependent value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from dp.domain import QueryBatch
from dp.errors import PrivacyParameterError


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_epsilon(epsilon: float) -> None:
    if not (is_number(epsilon) and math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyParameterError("epsilon must be a finite number greater than 0")


def check_delta(delta: float) -> None:
    """``0 <= delta < 1`` (delta = 0: pure differential privacy)."""
    if not (is_number(delta) and 0 <= delta < 1):
        raise PrivacyParameterError("delta must be a number with 0 <= delta < 1")


def as_query_matrix(matrix: Any, n: int | None = None) -> sp.csr_array:
    """A query matrix (QueryBatch, scipy sparse, dense 2-D or a single 1-D query) as a fresh,
    canonical CSR array (duplicate entries summed); ``n``: the required number of columns."""
    if isinstance(matrix, QueryBatch):
        out = sp.csr_array(matrix.matrix, dtype=np.float64)
    elif sp.issparse(matrix):
        out = sp.csr_array(matrix, dtype=np.float64)
    else:
        dense = np.asarray(matrix, dtype=np.float64)
        if dense.ndim == 1:
            dense = dense.reshape(1, -1)
        if dense.ndim != 2:
            raise ValueError("a query matrix must be two-dimensional (one row per query)")
        out = sp.csr_array(dense)
    if n is not None and out.shape[1] != n:
        raise ValueError("the query matrix must have one column per cell of the histogram")
    out = out.copy()  # canonicalised below: never touch the caller's arrays
    out.sum_duplicates()  # duplicate entries must add up before norms or weights are read
    if out.nnz and not np.all(np.isfinite(out.data)):
        raise ValueError("query weights must be finite numbers")
    return out
