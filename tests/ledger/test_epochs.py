"""Two epoch services ("two proxies") sharing one ledger, in memory and in PostgreSQL: stored
answers cross between them, a close is seen at once (repeats included: each service has its
watch, proxy/epoch_watch.py), a lost watch session drops the epochs, and a new epoch is picked
up without a restart. The histogram comes from the real backend (the ``pg`` fixture) in both
cases."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ledger_helpers import cell_queries, write_config

import rewriter
from dp import engine
from dp.noise import SeededSampler
from proxy.app import engine_config
from proxy.epoch_watch import Watch
from proxy.epochs import EpochService, NoActiveEpochError
from proxy.ledger import EpochConflictError, PgLedger
from proxy.memledger import MemLedger, MemWatch


@pytest.fixture(params=["mem", "pg"])
async def services(
    request: Any, pg: Any, tmp_path: Path
) -> AsyncIterator[tuple[EpochService, EpochService, Any, tuple[Watch, Watch]]]:
    """Two services ("proxy processes") on one store, each with its own started watch."""
    _, config = write_config(tmp_path, pg, reuse=False)
    if request.param == "mem":
        a_ledger: Any = MemLedger()
        b_ledger: Any = MemLedger(a_ledger.store)
    else:
        async with await psycopg.AsyncConnection.connect(
            pg.state_admin_dsn, autocommit=True
        ) as admin:
            await admin.execute("DROP SCHEMA IF EXISTS lapras CASCADE")
        a_ledger = await PgLedger.connect(pg.state_dsn)
        b_ledger = await PgLedger.connect(pg.state_dsn)
    seeds = iter(range(1, 10**6))
    watches = (a_ledger.watch(), b_ledger.watch())

    def make(ledger: Any, watch: Watch) -> EpochService:
        return EpochService(
            schema=config.schema,
            ledger=ledger,
            aggregator_dsn=pg.aggregator_dsn,
            sampler=lambda: SeededSampler(next(seeds)),
            watch=watch,
        )

    try:
        for watch in watches:
            await watch.start()
        yield make(a_ledger, watches[0]), make(b_ledger, watches[1]), config, watches
    finally:
        for watch in watches:
            await watch.close()
        await a_ledger.close()
        await b_ledger.close()


def plan(config: Any, sql: str) -> rewriter.Plan:
    (st,) = rewriter.classify(sql, config.schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    return st.plan


async def begin(service: EpochService, config: Any, reason: str, **overrides: Any) -> int:
    return int(
        await service.start_epoch(
            table="adult",
            view="age_sex_income",
            config=engine_config(dict(config.privacy), **overrides),
            actor="pytest",
            reason=reason,
        )
    )


async def test_two_services_share_epochs_and_pick_up_a_new_one(services: Any) -> None:
    a, b, config, _ = services

    async def start(reason: str) -> int:
        return await begin(a, config, reason)

    q = [plan(config, sql) for sql in cell_queries()[:4]]
    first = await start("one")
    with pytest.raises(EpochConflictError):
        await start("again")

    one = await b.answer(q[0])
    assert one.kind is engine.DecisionKind.FRESH and one.charge > 0
    seen_by_a = await a.answer(q[0])  # a loads the epoch: the stored answer, no noise
    assert seen_by_a.kind is engine.DecisionKind.REPEAT and seen_by_a.answers == one.answers
    two = await a.answer(q[1])
    again = await b.answer(q[1])  # b folds a's events under the lock: the same answer
    assert again.kind is engine.DecisionKind.REPEAT and again.answers == two.answers
    assert again.status.online_releases == 2 and again.status.position == 2

    await a.close_epoch("adult", actor="pytest", reason="next")
    second = await start("two")
    assert second > first
    three = await b.answer(q[2])  # b held the closed epoch: answered in the new one
    assert three.kind is engine.DecisionKind.FRESH
    assert three.status.position == 1 and three.status.online_releases == 1
    status = await a.status("adult")
    assert status is not None and status[0].id == second

    await a.close_epoch("adult", actor="pytest", reason="end")
    with pytest.raises(NoActiveEpochError) as info:
        await b.answer(q[3])  # b still held the closed epoch
    assert info.value.sqlstate == "55000"
    with pytest.raises(NoActiveEpochError):
        await a.answer(q[3])


async def test_a_close_drops_repeats_from_every_service_before_it_returns(services: Any) -> None:
    a, b, config, _ = services
    q = plan(config, cell_queries()[0])
    await begin(a, config, "one")
    one = await a.answer(q)
    assert one.kind is engine.DecisionKind.FRESH
    assert (await b.answer(q)).answers == one.answers  # b loads the epoch
    for service in (a, b):  # both answer the repeat from memory, without the ledger
        now = service.answer_now(q)
        assert now is not None and now.kind is engine.DecisionKind.REPEAT

    closed = await a.close_epoch("adult", actor="pytest", reason="next", wait=5)
    assert closed is not None and (closed.serving, closed.unconfirmed) == (2, 0)
    for service in (a, b):  # at once: no sleep, no other statement in between
        assert service.answer_now(q) is None
        with pytest.raises(NoActiveEpochError) as info:
            await service.answer(q)
        assert info.value.sqlstate == "55000"

    await begin(a, config, "two", stream_length=30)
    fresh = await b.answer(q)  # the same statement, answered in the new epoch
    assert fresh.kind is engine.DecisionKind.FRESH and fresh.charge > 0
    assert (fresh.status.stream_length, fresh.status.online_releases) == (30, 1)
    again = await a.answer(q)
    assert again.kind is engine.DecisionKind.REPEAT and again.answers == fresh.answers
    assert again.status.stream_length == 30


async def test_a_lost_watch_session_drops_the_epochs_and_they_reload(
    services: Any, pg: Any
) -> None:
    a, b, config, (_, b_watch) = services
    q = plan(config, cell_queries()[1])
    await begin(a, config, "one")
    one = await b.answer(q)
    assert b.answer_now(q) is not None
    if isinstance(b_watch, MemWatch):
        b_watch.lose()
    else:
        pid = b_watch.backend_pid
        async with await psycopg.AsyncConnection.connect(
            pg.state_admin_dsn, autocommit=True
        ) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while b_watch.backend_pid in (None, pid):  # the loss is seen, then a new session opens
            assert time.monotonic() < deadline, "the watch did not reconnect"
            await asyncio.sleep(0.01)
    assert b.answer_now(q) is None  # dropped with the session
    again = await b.answer(q)  # reloaded from the ledger, under the new session
    assert again.kind is engine.DecisionKind.REPEAT and again.answers == one.answers

    closed = await a.close_epoch("adult", actor="pytest", reason="end", wait=5)
    assert closed is not None and (closed.serving, closed.unconfirmed) == (1, 0)
    assert b.answer_now(q) is None
    with pytest.raises(NoActiveEpochError):
        await b.answer(q)
