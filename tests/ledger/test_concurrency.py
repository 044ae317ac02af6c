"""Concurrency test: two proxy processes (``lapras serve``) on one backend share one epoch with
the last few units of its budget, and 50 clients hammer it at once with distinct fresh queries.

The epoch's stream admits ``S`` online releases; ``SPENT_BEFORE`` are used first, so exactly
``S - SPENT_BEFORE`` of the 50 fresh queries can be admitted. Checked:

- exactly that many clients got an answer, and every other one got SQLSTATE 42Q01;
- answers == Released events == online (non-MATRIX) Charged events, one per stream position,
  with no position or key twice (the two processes serialised on the epoch);
- the total spent (fold of the ledger, and the sum of the charges) never exceeds the budget;
- both processes answered some (the load was really shared) -- not asserted, it is timing.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ledger_helpers import (
    cell_queries,
    cli_start_epoch,
    dsn,
    ledger_rows,
    reset_ledger,
    serve,
    write_config,
)

from dp import engine

CLIENTS = 50
STREAM = 8
SPENT_BEFORE = 3

pytestmark = pytest.mark.timeout(180)


def test_two_proxies_and_50_clients_never_overspend(pg: Any, tmp_path: Path) -> None:
    reset_ledger(pg)
    path, _ = write_config(tmp_path, pg, stream_length=STREAM, reuse=False)
    epoch = cli_start_epoch(path, [])
    queries = cell_queries()
    warmup, hammer = queries[:SPENT_BEFORE], queries[SPENT_BEFORE : SPENT_BEFORE + CLIENTS]
    with serve(path) as (_, port_a), serve(path) as (_, port_b):
        with psycopg.connect(dsn(port_a), autocommit=True) as conn:
            for q in warmup:
                conn.execute(q).fetchone()
        # 50 clients, connected first, then released at once
        results: list[tuple[int, str, Any]] = []
        lock = threading.Lock()
        barrier = threading.Barrier(CLIENTS, timeout=60)

        def client(i: int) -> None:
            port = port_a if i % 2 else port_b
            try:
                with psycopg.connect(dsn(port), autocommit=True, connect_timeout=30) as c:
                    barrier.wait()
                    try:
                        row = c.execute(hammer[i]).fetchone()
                        outcome: tuple[int, str, Any] = (port, "answer", row)
                    except psycopg.Error as err:
                        outcome = (port, "error", err.sqlstate)
            except Exception as exc:
                outcome = (port, "client failure", repr(exc))
            with lock:
                results.append(outcome)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)

    assert len(results) == CLIENTS
    answers = [r for r in results if r[1] == "answer"]
    errors = [r for r in results if r[1] == "error"]
    assert len(answers) + len(errors) == CLIENTS, [r for r in results if r[1] == "client failure"]
    assert {r[2] for r in errors} == {"42Q01"}  # budget exhausted, nothing else
    admitted = STREAM - SPENT_BEFORE
    assert len(answers) == admitted

    rows = ledger_rows(pg, epoch)
    events = [ev for _, _, ev in rows]
    online = [ev for ev in events if isinstance(ev, engine.Charged) and ev.pool.value != "matrix"]
    released = [ev for ev in events if isinstance(ev, engine.Released)]
    assert len(released) == len(online) == SPENT_BEFORE + len(answers) == STREAM
    assert sorted(c.position for c in online) == list(range(1, STREAM + 1))
    assert len({c.key for c in online}) == STREAM
    state = engine.fold(events)  # type: ignore[arg-type]
    st = engine.status(state)
    assert st.online_releases == STREAM
    assert st.spent <= st.total * (1 + 1e-12)
    assert math.fsum(c.amount for c in online) <= st.total * (1 + 1e-12)
    by_port = {p: sum(1 for r in answers if r[0] == p) for p in (port_a, port_b)}
    print(
        f"\nconcurrency: {len(answers)} answers {by_port}, {len(errors)} refusals 42Q01, "
        f"spent {st.spent:.4g} of {st.total:.4g} {st.unit}"
    )
