"""The ledger contract: one set of checks, run against the in-memory and the PostgreSQL ledger.

Each implementation provides two *handles* on one store (two MemLedgers sharing a MemStore; two
PgLedgers on two connections to one database), as two proxy processes sharing one backend.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import psycopg
import pytest

from dp import engine, engine_codec
from dp.domain import Domain, QueryBatch
from dp.noise import SeededSampler
from dp.pin import Pin
from proxy.epoch_watch import WATCH_SPACE
from proxy.ledger import EpochConflictError, EpochLockedError, PgLedger, pin_from_bytes
from proxy.memledger import MemLedger

DOM = Domain.of(("a", 3), ("b", 2))
X = np.array([5.0, 7.0, 11.0, 13.0, 17.0, 19.0])
PRED = QueryBatch.from_dense(DOM, [[1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0]])
BAD = [QueryBatch.from_dense(DOM, [np.eye(6)[i]]) for i in range(6)]
CONFIG = engine.EngineConfig(epsilon=1.0, delta=1e-3, stream_length=20)


def _started() -> tuple[engine.EngineState, tuple[engine.Event, ...]]:
    return engine.start(CONFIG, DOM, PRED, X, SeededSampler(1))


def _answer(
    state: engine.EngineState, batch: QueryBatch, seed: int
) -> tuple[engine.EngineState, list[engine.Event]]:
    """One decide -> apply -> release -> apply step; the events to persist."""
    d = engine.decide(state, batch)
    for ev in d.events:
        state = engine.apply(state, ev)
    r = engine.release(state, d, X, SeededSampler(seed))
    for ev in r.events:
        state = engine.apply(state, ev)
    return state, [*d.events, *r.events]


async def _create(ledger: Any, table: str = "adult", events: Any = None) -> int:
    if events is None:
        events = _started()[1]
    return int(
        await ledger.create_epoch(
            table=table,
            view="v",
            config=CONFIG,
            pin=Pin.from_dense(DOM, X),
            events=events,
            actor="alice",
            reason="contract",
        )
    )


def test_a_dense_histogram_stored_by_an_older_proxy_is_read_as_a_pin() -> None:
    """Epochs pinned before whole-table epochs stored a dense float64 histogram of a view."""
    old = pin_from_bytes(DOM, X.astype("<f8").tobytes())
    assert old.marginal(DOM).tolist() == X.tolist()
    assert old.marginal(Domain.of(("b", 2))).tolist() == [5.0 + 11 + 17, 7.0 + 13 + 19]


def _encoded(events: Any) -> list[str]:
    return [json.dumps(engine_codec.encode_event(ev), sort_keys=True) for ev in events]


class LedgerContract:
    """The checks; subclasses provide the ``pair`` fixture (two handles on one store)."""

    async def test_one_active_epoch_per_table_and_explicit_restart(self, pair: Any) -> None:
        a, b = pair
        first = await _create(a)
        with pytest.raises(EpochConflictError):
            await _create(b)  # from another handle too: a budget is never reset silently
        other = await _create(b, table="census")
        row = await b.active_epoch("adult")
        assert row is not None and row.id == first and row.status == "active"
        assert row.started_by == "alice" and row.reason == "contract"
        closed = await b.close_epoch("adult", actor="bob", reason="new quarter")
        assert closed is not None and closed.id == first and closed.status == "closed"
        assert closed.closed_at is not None
        assert await a.active_epoch("adult") is None
        assert await a.close_epoch("adult", actor="bob", reason="again") is None
        second = await _create(a)  # after the close: an explicit new epoch
        assert second > max(first, other)
        assert [r.id for r in await a.epochs("adult")] == [first, second]
        assert [r.status for r in await b.epochs("adult")] == ["closed", "active"]
        assert {r.id for r in await a.epochs()} == {first, second, other}
        log = await b.admin_log(10)  # newest first; the close is logged with who and why
        assert [e.action for e in log] == [
            "epoch start",
            "epoch close",
            "epoch start",
            "epoch start",
        ]
        assert log[1].actor == "bob" and log[1].details == {
            "epoch": first,
            "table": "adult",
            "reason": "new quarter",
        }
        assert log[0].details["epoch"] == second

    async def test_append_only_numbering(self, pair: Any) -> None:
        a, _ = pair
        state, started = _started()
        epoch = await _create(a, events=started)
        got = await a.events(epoch)
        assert [s for s, _ in got] == [1, 2, 3]
        state, evs = _answer(state, BAD[0], 10)
        async with a.exclusive(epoch, 3) as tx:
            assert tx.new_events == []
            await tx.append(evs[:1])  # the charge, durably
            await tx.append(evs[1:], durable=False)
            await tx.append([])  # nothing: no row
            assert tx.seq == 5
        assert [s for s, _ in await a.events(epoch)] == [1, 2, 3, 4, 5]
        assert [s for s, _ in await a.events(epoch, after=3)] == [4, 5]
        assert await a.events(epoch, after=5) == []
        hist = await a.history(epoch, 2)
        assert [(h.seq, h.kind) for h in hist] == [(5, "Released"), (4, "Charged")]
        assert hist[0].at >= hist[1].at

    async def test_exclusive_yields_events_of_another_handle(self, pair: Any) -> None:
        a, b = pair
        state, started = _started()
        epoch = await _create(a, events=started)
        state, evs1 = _answer(state, BAD[0], 11)
        async with a.exclusive(epoch, 3) as tx:
            await tx.append(evs1)
        state, evs2 = _answer(state, BAD[1], 12)
        async with b.exclusive(epoch, 3) as tx:  # b last saw seq 3
            assert [s for s, _ in tx.new_events] == [4, 5]
            assert _encoded(ev for _, ev in tx.new_events) == _encoded(evs1)
            assert tx.seq == 5
            await tx.append(evs2)
        async with a.exclusive(epoch, 5) as tx:
            assert [s for s, _ in tx.new_events] == [6, 7]
        assert _encoded(ev for _, ev in await a.events(epoch)) == _encoded([*started, *evs1, *evs2])

    async def test_exclusive_serialises_handles(self, pair: Any) -> None:
        a, b = pair
        epoch = await _create(a)
        trace: list[str] = []

        async def hold(ledger: Any, name: str) -> None:
            async with ledger.exclusive(epoch, 3):
                trace.append(f"{name} in")
                await asyncio.sleep(0.2)
                trace.append(f"{name} out")

        first = asyncio.create_task(hold(a, "a"))
        while not trace:
            await asyncio.sleep(0.01)
        await asyncio.gather(first, hold(b, "b"))
        assert trace == ["a in", "a out", "b in", "b out"]

    async def test_pin_is_stored_exactly(self, pair: Any) -> None:
        a, b = pair
        counts = np.array([0.1, 5e-324, 1e308, 32561.0, 1 / 3], dtype=np.float64)
        cells = np.array([[0, 0], [2, 1], [0, 1], [1, 1], [2, 0]])
        pin = Pin.of(DOM, cells, counts)
        epoch = await a.create_epoch(
            table="adult",
            view="v",
            config=CONFIG,
            pin=pin,
            events=_started()[1],
            actor="alice",
            reason="",
        )
        got = await b.pinned(epoch, "v", DOM)
        assert got.to_bytes() == pin.to_bytes()
        for marginal in (DOM, Domain.of(("a", 3)), Domain.of(("b", 2)), Domain(())):
            assert got.marginal(marginal).tobytes() == pin.marginal(marginal).tobytes()
        with pytest.raises(LookupError):
            await b.pinned(epoch, "other view", DOM)

    async def test_public_rows_first_stored_wins(self, pair: Any) -> None:
        """The rows of a public table stored with an epoch: the first handle's, for both."""
        a, b = pair
        epoch = await _create(a)
        assert await a.public_rows(epoch, "public.regions") is None
        first = [["Mexico", "Latin America"], ["Cuba", None]]
        assert await a.keep_public_rows(epoch, "public.regions", first) == first
        other = [["Mexico", "North America"]]
        assert await b.keep_public_rows(epoch, "public.regions", other) == first
        assert await b.public_rows(epoch, "public.regions") == first
        assert await b.public_rows(epoch, "public.other") is None

    async def test_closed_epoch_refuses_exclusive(self, pair: Any) -> None:
        a, b = pair
        epoch = await _create(a)
        await b.close_epoch("adult", actor="bob", reason="")
        with pytest.raises(EpochLockedError):
            async with a.exclusive(epoch, 3):
                pass
        assert [s for s, _ in await a.events(epoch)] == [1, 2, 3]  # nothing appended

    async def test_close_waits_for_the_answer_in_flight(self, pair: Any) -> None:
        a, b = pair
        state, started = _started()
        epoch = await _create(a, events=started)
        state, evs = _answer(state, BAD[2], 13)
        entered = asyncio.Event()

        async def answer() -> None:
            async with a.exclusive(epoch, 3) as tx:
                entered.set()
                await asyncio.sleep(0.3)
                await tx.append(evs)

        task = asyncio.create_task(answer())
        await entered.wait()
        closed = await b.close_epoch("adult", actor="bob", reason="")
        assert task.done()  # the close waited for the charge and its release
        await task
        assert closed is not None
        assert [s for s, _ in await b.events(epoch)] == [1, 2, 3, 4, 5]

    async def test_a_close_reaches_every_watch_before_it_returns(self, pair: Any) -> None:
        a, b = pair
        epoch = await _create(a)
        other = await _create(a, table="census")
        watch, idle = a.watch(), b.watch()
        told: list[int] = []
        lost: list[bool] = []
        watch.subscribe(told.append, lambda: lost.append(True))
        idle.subscribe(told.append, lambda: lost.append(True))
        await watch.start()
        await idle.start()
        try:
            assert await watch.hold(epoch) and await watch.hold(other)
            closed = await b.close_epoch("adult", actor="bob", reason="", wait=5)
            assert closed is not None and closed.status == "closed"
            # One watch held the epoch; it was told (so was the other) before the close
            # returned, and released it: nobody failed to confirm.
            assert (closed.serving, closed.unconfirmed) == (1, 0)
            assert told == [epoch, epoch] and not lost
            again = await b.close_epoch("census", actor="bob", reason="", wait=5)
            assert again is not None and (again.serving, again.unconfirmed) == (1, 0)
            await watch.release(other)  # already released at the close: a no-op
        finally:
            await watch.close()
            await idle.close()

    async def test_events_round_trip_and_fold_to_the_same_state(self, pair: Any) -> None:
        a, b = pair
        state, started = _started()
        epoch = await _create(a, events=started)
        written = list(started)
        seq = 3
        queries = [
            PRED,
            *BAD[:4],
            QueryBatch.from_dense(DOM, [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]]),
        ]
        for i, q in enumerate(queries):
            state, evs = _answer(state, q, 100 + i)
            async with (a if i % 2 else b).exclusive(epoch, seq) as tx:
                seq = tx.seq
                await tx.append(evs)
                seq = tx.seq
            written += evs
        read = [ev for _, ev in await b.events(epoch)]
        assert _encoded(read) == _encoded(written)
        folded = engine.fold(read)  # type: ignore[arg-type]
        assert engine.status(folded) == engine.status(state)
        assert dict(folded.answers) == dict(state.answers)
        assert folded.matrix_blocks and len(folded.matrix_blocks) == len(state.matrix_blocks)
        for got, want in zip(folded.matrix_blocks, state.matrix_blocks, strict=True):
            assert got.release.y.tobytes() == want.release.y.tobytes()
        # A repeat after the fold is the stored answer, exactly.
        again = engine.decide(folded, BAD[0])
        assert again.kind is engine.DecisionKind.REPEAT
        assert again.answers == state.answers[BAD[0].key].answers


LOG_RECORD = {
    "analyst": "ann",
    "table": "adult",
    "view": "(age)",
    "template": "SELECT count(*) FROM adult WHERE age > $1",
    "bindings": [40],
    "key": "k",
    "outcome": "fresh",
    "sql": None,
}


def test_identical_log_records_of_a_batch_are_one_row_with_their_calls() -> None:
    from proxy.dp_router import _counted

    a, b = LOG_RECORD, {**LOG_RECORD, "bindings": [41]}
    assert _counted([a, b, a, a, b]) == [{**a, "calls": 3}, {**b, "calls": 2}]
    assert _counted([]) == []
    # values that are equal in Python but not in the log's JSON stay apart, as do key orders
    # that are the same record
    kinds = [{**LOG_RECORD, "bindings": [v]} for v in (40, 40.0, "40", True, 1, None)]
    assert [r["calls"] for r in _counted(kinds + kinds)] == [2] * len(kinds)
    reordered = dict(reversed(list(a.items())))
    assert _counted([a, reordered]) == [{**a, "calls": 2}]


async def _check_retention(ledger: Any, count: Any) -> None:
    """The query log keeps at most ``max_rows`` rows (the newest) and none older than
    ``max_days``; ``count()`` reads how many rows the store holds."""
    await ledger.log_queries([{**LOG_RECORD, "bindings": [i]} for i in range(30)])
    assert await count() == 30
    assert await ledger.prune_log(max_days=1.0, max_rows=1000) == 0  # all recent, few
    assert await ledger.prune_log(max_days=1.0, max_rows=12) == 18
    assert await count() == 12
    await asyncio.sleep(0.05)
    assert await ledger.prune_log(max_days=0.02 / 86400, max_rows=1000) == 12  # all too old
    assert await count() == 0


class TestMemLedger(LedgerContract):
    async def test_query_log_retention(self) -> None:
        ledger = MemLedger()

        async def count() -> int:
            return len(ledger.store.queries)

        await _check_retention(ledger, count)

    @pytest.fixture
    def pair(self) -> tuple[MemLedger, MemLedger]:
        a = MemLedger()
        return a, MemLedger(a.store)


class TestPgLedger(LedgerContract):
    @pytest.fixture
    async def pair(self, pg: Any) -> AsyncIterator[tuple[PgLedger, PgLedger]]:
        async with await psycopg.AsyncConnection.connect(
            pg.state_admin_dsn, autocommit=True
        ) as admin:
            await admin.execute("DROP SCHEMA IF EXISTS lapras CASCADE")
        a, b = await asyncio.gather(PgLedger.connect(pg.state_dsn), PgLedger.connect(pg.state_dsn))
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()

    async def test_query_log_retention_on_its_own_connection(self, pair: Any, pg: Any) -> None:
        a, _ = pair

        async def count() -> int:
            async with await psycopg.AsyncConnection.connect(pg.state_dsn) as conn:
                cur = await conn.execute("SELECT count(*) FROM lapras.query_log")
                row = await cur.fetchone()
                return int(row[0]) if row else -1

        await _check_retention(a, count)
        # the log's writes did not take the ledger's connection
        assert a._log_conn is not None and a._log_conn is not a._conn

    async def test_close_waits_for_a_statement_in_flight(self, pair: Any, pg: Any) -> None:
        """A group commit's last step can still run after its statements were answered, when
        a shutdown (or a test) closes the ledger. Closed under the statement, the connection
        would leave its socket registered with the event loop, and the next connection given
        the same file descriptor would fail to connect: close() waits for the statement."""
        a, _ = pair

        async def in_flight() -> None:
            async with a._locked():
                await a._conn.execute("SELECT pg_sleep(0.3)")

        task = asyncio.create_task(in_flight())
        await asyncio.sleep(0.05)
        await a.close()
        assert task.done() and task.exception() is None  # it ended before the close
        for _ in range(5):  # new connections, on the lowest free descriptors
            async with await psycopg.AsyncConnection.connect(pg.state_dsn) as conn:
                await conn.execute("SELECT 1")

    async def test_charges_commit_synchronously_whatever_the_role_default(self, pg: Any) -> None:
        async with await psycopg.AsyncConnection.connect(pg.admin_dsn, autocommit=True) as admin:
            role = pg.aggregator_dsn.split("//", 1)[1].split(":", 1)[0]
            await admin.execute(f'ALTER ROLE "{role}" SET synchronous_commit = off')
            try:
                ledger = await PgLedger.connect(pg.state_dsn)
                try:
                    cur = await ledger._conn.execute("SHOW synchronous_commit")
                    assert await cur.fetchone() == ("on",)
                finally:
                    await ledger.close()
            finally:
                await admin.execute(f'ALTER ROLE "{role}" RESET synchronous_commit')

    async def test_close_reports_a_holder_that_does_not_confirm(self, pair: Any, pg: Any) -> None:
        a, b = pair
        epoch = await _create(a)
        # A session that holds the epoch's watch lock and never listens: a stuck proxy.
        async with await psycopg.AsyncConnection.connect(pg.state_dsn, autocommit=True) as stuck:
            await stuck.execute("SELECT pg_advisory_lock_shared(%s, %s)", (WATCH_SPACE, epoch))
            began = time.monotonic()
            closed = await b.close_epoch("adult", actor="bob", reason="", wait=0.5)
            waited = time.monotonic() - began
        assert closed is not None and closed.status == "closed"  # closed all the same
        assert (closed.serving, closed.unconfirmed) == (1, 1)
        assert 0.4 < waited < 5
        assert await a.active_epoch("adult") is None

    async def test_query_log_is_written(self, pair: Any, pg: Any) -> None:
        a, _ = pair
        record = {
            "analyst": "ann",
            "table": "adult",
            "view": "v",
            "template": "SELECT count(*) FROM adult WHERE age > $1",
            "bindings": [40],
            "key": "k",
            "outcome": "fresh",
            "sql": None,
        }
        other = {**record, "bindings": ["Male", 1.5], "sql": "SELECT 1", "view": None}
        await a.log_queries([record, other, {**record, "calls": 3}])
        async with await psycopg.AsyncConnection.connect(pg.state_dsn) as conn:
            cur = await conn.execute(
                "SELECT analyst, template, bindings::text, outcome, sql, view_name, calls"
                " FROM lapras.query_log ORDER BY id"
            )
            row = ("ann", record["template"], "[40]", "fresh", None, "v")
            assert await cur.fetchall() == [
                (*row, 1),
                ("ann", record["template"], '["Male", 1.5]', "fresh", "SELECT 1", None, 1),
                (*row, 3),
            ]
