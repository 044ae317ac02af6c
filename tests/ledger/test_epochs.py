"""Two epoch services ("two proxies") sharing one ledger, in memory and in PostgreSQL: stored
answers cross between them, a close is seen at once, and a new epoch is picked up without a
restart. The histogram comes from the real backend (the ``pg`` fixture) in both cases."""

from __future__ import annotations

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
from proxy.epochs import EpochService, NoActiveEpochError
from proxy.ledger import EpochConflictError, PgLedger
from proxy.memledger import MemLedger


@pytest.fixture(params=["mem", "pg"])
async def services(
    request: Any, pg: Any, tmp_path: Path
) -> AsyncIterator[tuple[EpochService, EpochService, Any]]:
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

    def make(ledger: Any) -> EpochService:
        return EpochService(
            schema=config.schema,
            ledger=ledger,
            aggregator_dsn=pg.aggregator_dsn,
            sampler=lambda: SeededSampler(next(seeds)),
        )

    try:
        yield make(a_ledger), make(b_ledger), config
    finally:
        await a_ledger.close()
        await b_ledger.close()


def plan(config: Any, sql: str) -> rewriter.Plan:
    (st,) = rewriter.classify(sql, config.schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    return st.plan


async def test_two_services_share_epochs_and_pick_up_a_new_one(services: Any) -> None:
    a, b, config = services

    async def start(reason: str) -> int:
        return int(
            await a.start_epoch(
                table="adult",
                view="age_sex_income",
                config=engine_config(dict(config.privacy)),
                actor="pytest",
                reason=reason,
            )
        )

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
