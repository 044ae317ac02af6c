"""dp.domain: batch and row keys stay what earlier ledgers hold."""

from __future__ import annotations

import hashlib

import numpy as np

from dp.domain import Domain, QueryBatch


def test_batch_and_row_keys_are_the_ones_earlier_ledgers_hold() -> None:
    """A ledger's events name their batches by key (the codec recomputes and checks each), so
    the key of a batch must not change from release to release: sha256 of ``repr((domain,
    shape))``, then indptr, indices (int64) and data; a row key is the domain's repr, its
    cells and its weights."""
    domain = Domain.of(("age", 74), ("sex", 2), ("income", 2))
    rows = np.zeros((2, domain.size))
    rows[0, [3, 7, 11]] = 1.0
    rows[1, [5]] = -0.0  # a zero weight is dropped; -0.0 and 0.0 alike
    rows[1, [8, 9]] = 2.5
    batch = QueryBatch.from_dense(domain, rows)
    m = batch.matrix
    h = hashlib.sha256(repr((domain, m.shape)).encode())
    for arr in (m.indptr.astype(np.int64), m.indices.astype(np.int64), m.data):
        h.update(np.ascontiguousarray(arr).tobytes())
    assert batch.key == h.hexdigest()
    head = repr(domain).encode()
    assert batch.row_keys() == [
        head
        + b"|"
        + np.array(cells, dtype=np.int64).tobytes()
        + b"|"
        + np.array(weights, dtype=np.float64).tobytes()
        for cells, weights in (([3, 7, 11], [1.0, 1.0, 1.0]), ([8, 9], [2.5, 2.5]))
    ]
    # and the same batch made again (a domain equal but not the same object) has the same key
    again = QueryBatch.from_dense(Domain.of(("age", 74), ("sex", 2), ("income", 2)), rows)
    assert again.key == batch.key and again == batch
