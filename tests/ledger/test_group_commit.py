"""Group commit (proxy/epochs.py): concurrent statements of one epoch share the ledger's
transactions.

- 20 concurrent fresh statements are charged in ONE durable transaction (one ``xmin`` for all
  their ``Charged`` rows, appended with ``durable=True``) and released in one more, after it;
- a refusal inside a group refuses its statement only: the others of the group are answered
  (fresh, from the Matrix Mechanism release, or as a repeat of a fresh one of the same group),
  and the ledger holds their events only;
- answers from stored releases are committed asynchronously (``durable=False``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ledger_helpers import cell_queries, write_config

import rewriter
from dp import engine
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler
from proxy.app import engine_config
from proxy.epochs import EpochService
from proxy.ledger import PgLedger, _PgTransaction, decode
from proxy.memledger import MemLedger

#: Answered from the Matrix Mechanism release (the predicted set).
PREDICTED = [
    "SELECT count(*) FROM adult WHERE age = 30",
    "SELECT count(*) FROM adult WHERE age = 40",
    "SELECT count(*) FROM adult WHERE age = 50",
]


class Spy:
    """Wraps a ledger; records every append of the exclusive section: (kinds, durable)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.appends: list[tuple[tuple[str, ...], bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def exclusive(self, epoch_id: int, after: int) -> Any:
        spy, section = self, self.inner.exclusive(epoch_id, after)

        class _Tx:
            def __init__(self, tx: Any) -> None:
                self.tx = tx

            @property
            def new_events(self) -> Any:
                return self.tx.new_events

            @property
            def seq(self) -> int:
                return int(self.tx.seq)

            async def append(self, events: Sequence[object], *, durable: bool = True) -> None:
                if events:
                    spy.appends.append((tuple(type(e).__name__ for e in events), durable))
                await self.tx.append(events, durable=durable)

        class _Section:
            async def __aenter__(self) -> _Tx:
                return _Tx(await section.__aenter__())

            async def __aexit__(self, *exc: Any) -> Any:
                return await section.__aexit__(*exc)

        return _Section()


@pytest.fixture(params=["mem", "pg"])
async def setup(request: Any, pg: Any, tmp_path: Path) -> AsyncIterator[tuple[Any, ...]]:
    """A service on a spied ledger (in memory or in PostgreSQL), with an active epoch."""
    _, config = write_config(tmp_path, pg, reuse=False, stream_length=8)
    if request.param == "mem":
        inner: Any = MemLedger()
    else:
        async with await psycopg.AsyncConnection.connect(
            pg.state_admin_dsn, autocommit=True
        ) as admin:
            await admin.execute("DROP SCHEMA IF EXISTS lapras CASCADE")
        inner = await PgLedger.connect(pg.state_dsn)
    ledger = Spy(inner)
    seeds = iter(range(1, 10**6))
    service = EpochService(
        schema=config.schema,
        ledger=ledger,  # type: ignore[arg-type]
        aggregator_dsn=pg.aggregator_dsn,
        sampler=lambda: SeededSampler(next(seeds)),
    )
    try:
        yield service, ledger, config, request.param
    finally:
        await inner.close()


def plan(config: Any, sql: str) -> rewriter.Plan:
    (st,) = rewriter.classify(sql, config.schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    return st.plan


async def start(service: EpochService, config: Any, **overrides: Any) -> int:
    return int(
        await service.start_epoch(
            table="adult",
            view="age_sex_income",
            config=engine_config(dict(config.privacy), **overrides),
            predicted=PREDICTED,
            actor="pytest",
            reason="group commit",
        )
    )


async def rows(pg: Any, epoch: int, after: int) -> list[tuple[int, str, str, Any]]:
    """(seq, kind, xmin, event) of the epoch's ledger rows after ``after``."""
    async with await psycopg.AsyncConnection.connect(pg.state_dsn) as conn:
        cur = await conn.execute(
            "SELECT seq, kind, xmin::text, payload::text FROM lapras.ledger"
            " WHERE epoch_id = %s AND seq > %s ORDER BY seq",
            (epoch, after),
        )
        return [(int(s), k, x, decode(p)) for s, k, x, p in await cur.fetchall()]


@pytest.mark.parametrize("setup", ["pg"], indirect=True)  # transactions are PostgreSQL's
async def test_concurrent_fresh_answers_share_one_durable_transaction(setup: Any, pg: Any) -> None:
    service, ledger, config, _ = setup
    epoch = await start(service, config, stream_length=40)
    await service.answer(plan(config, PREDICTED[0]))  # loads the epoch
    status = await service.status("adult")
    assert status is not None
    async with await psycopg.AsyncConnection.connect(pg.state_dsn) as conn:
        cur = await conn.execute("SELECT max(seq) FROM lapras.ledger WHERE epoch_id = %s", (epoch,))
        mark = (await cur.fetchone() or (0,))[0]
    ledger.appends.clear()

    plans = [plan(config, q) for q in cell_queries()[:20]]
    answers = await asyncio.gather(*(service.answer(p) for p in plans))
    assert [a.kind for a in answers] == [engine.DecisionKind.FRESH] * 20
    assert all(a.charge > 0 for a in answers)

    written = await rows(pg, epoch, mark)
    charged = [r for r in written if r[1] == "Charged"]
    released = [r for r in written if r[1] == "Released"]
    assert len(charged) == len(released) == 20 and len(written) == 40
    assert len({r[2] for r in charged}) == 1  # one transaction for all 20 charges
    assert len({r[2] for r in released}) == 1  # and one for all 20 releases
    assert max(r[0] for r in charged) < min(r[0] for r in released)  # charges first
    # the charges' transaction is durable (synchronous commit), and so is the releases'
    assert ledger.appends == [(("Charged",) * 20, True), (("Released",) * 20, True)]
    st = engine.fold([ev for _, ev in await service.ledger.events(epoch)])
    assert st.fresh == 20 and not st.pending


async def test_a_refusal_in_a_group_does_not_disturb_the_others(setup: Any, pg: Any) -> None:
    service, ledger, config, _ = setup
    epoch = await start(service, config, stream_length=5)
    cells = [plan(config, q) for q in cell_queries()[:8]]
    matrix = [plan(config, q) for q in PREDICTED]
    for p in cells[:2]:  # 2 of the 5 online releases are used first
        assert (await service.answer(p)).kind is engine.DecisionKind.FRESH
    before = await service.ledger.events(epoch)
    ledger.appends.clear()

    # one group: 3 fresh statements can still be admitted, the 4th and 5th are refused
    group = [cells[2], matrix[0], cells[3], cells[4], cells[5], cells[2], matrix[1], cells[6]]
    outcomes = await asyncio.gather(*(service.answer(p) for p in group), return_exceptions=True)
    kinds = [o if isinstance(o, BaseException) else o.kind for o in outcomes]
    fresh, mm = engine.DecisionKind.FRESH, engine.DecisionKind.MATRIX
    assert kinds[:4] == [fresh, mm, fresh, fresh]
    assert isinstance(kinds[4], BudgetExhaustedError) and kinds[4].sqlstate == "42Q01"
    assert isinstance(kinds[7], BudgetExhaustedError)
    assert kinds[5] is engine.DecisionKind.REPEAT and kinds[6] is engine.DecisionKind.MATRIX
    first, same = outcomes[0], outcomes[5]
    assert not isinstance(first, BaseException) and not isinstance(same, BaseException)
    assert same.answers == first.answers and same.charge == 0.0  # one release for both
    # only the answered statements wrote events: the MATRIX ones asynchronously, first; then
    # the three charges in one durable transaction; then their releases
    assert ledger.appends == [
        (("Answered", "Answered"), False),
        (("Charged",) * 3, True),
        (("Released",) * 3, True),
    ]
    events = [ev for _, ev in await service.ledger.events(epoch)][len(before) :]
    charges = [ev for ev in events if isinstance(ev, engine.Charged)]
    assert {c.key for c in charges} == {p.batch.key for p in cells[2:5]}
    assert [c.position for c in charges] == [5, 6, 7]  # after the two MATRIX answers (3, 4)
    st = engine.fold([ev for _, ev in await service.ledger.events(epoch)])
    assert (st.fresh, st.position, len(st.pending)) == (5, 7, 0)
    assert engine.status(st).spent <= engine.status(st).total * (1 + 1e-12)
    # afterwards: the answered statements are repeats with the same values, the rest refused
    for p, o in zip(group[:4], outcomes[:4], strict=True):
        again = await service.answer(p)
        assert not isinstance(o, BaseException) and again.answers == o.answers
        assert again.kind is engine.DecisionKind.REPEAT
    with pytest.raises(BudgetExhaustedError):
        await service.answer(cells[5])


@pytest.mark.parametrize("setup", ["pg"], indirect=True)
async def test_each_append_sets_the_durability_of_its_own_commit(setup: Any) -> None:
    """A ledger append is one statement that sets ``synchronous_commit`` for its own
    transaction: ``on`` when durable (whatever was set before it), ``off`` otherwise, and the
    connection's setting is untouched after it. Run inside a transaction that is rolled back,
    to read the setting the statement left for its transaction."""
    service, ledger, config, _ = setup
    epoch = await start(service, config)
    seq, event = (await service.ledger.events(epoch))[-1]
    inner = ledger.inner
    async with inner._locked():
        conn = inner._conn
        for durable, before, expected in [(False, "on", "off"), (True, "off", "on")]:
            async with conn.transaction(force_rollback=True):
                await conn.execute(f"SET LOCAL synchronous_commit = {before}")
                tx = _PgTransaction(conn, epoch, seq + 100, [])
                await tx.append([event], durable=durable)
                cur = await conn.execute("SELECT current_setting('synchronous_commit')")
                assert (await cur.fetchone()) == (expected,)
                cur = await conn.execute(
                    "SELECT count(*) FROM lapras.ledger WHERE epoch_id = %s AND seq = %s",
                    (epoch, seq + 101),
                )
                assert (await cur.fetchone()) == (1,)  # appended at the next position
        cur = await conn.execute("SHOW synchronous_commit")
        assert (await cur.fetchone()) == ("on",)
