"""The rewriter's work of each DP execution runs off the event loop (proxy.dp_router,
proxy.dp_workers): a prepared statement's parameters are bound on the event loop when that is
predicted cheaper than a trip to a worker process, in a worker otherwise; the rows of a big
answer are made in a worker; an exact repeat of a prepared statement is answered from the
stored answer without binding it again."""

from __future__ import annotations

import asyncio
import threading
from decimal import Decimal
from typing import Any

import asyncpg
import pytest
from epoch_helpers import DASHBOARD, Proxy, config_text, reset_ledger, start_epoch

import rewriter
from proxy import dp_router
from proxy.config import Config, parse_config


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    return parse_config(config_text(pg), "test.toml")


async def test_binds_and_big_answers_run_in_the_worker_processes(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.to_thread(start_epoch, config, DASHBOARD)
    inline: list[str] = []
    bind = rewriter.bind

    def recording_bind(st: Any, params: Any, public: Any = None) -> Any:
        inline.append(threading.current_thread().name)
        return bind(st, params, public)

    monkeypatch.setattr(rewriter, "bind", recording_bind)  # the serving process's only
    with Proxy(config, seed=21) as proxy:
        assert proxy.app is not None
        workers = proxy.app.router.workers
        notices: list[str] = []
        conn = await asyncpg.connect(proxy.dsn)
        conn.add_log_listener(lambda _c, m: notices.append(m.message))

        def done() -> int:
            return sum(workers.finished.values())

        try:
            # a small binding: on the event loop (less than a trip to a worker and back)
            count = await conn.prepare("SELECT count(*) FROM adult WHERE age > $1")
            before = done()
            first = await count.fetchval(40)
            assert await count.fetchval(40) == first  # the stored answer
            assert "earlier releases" in notices[-1] or "repeat" in notices[-1]
            assert len(inline) == 1  # found by its parameters: not bound again
            other = await count.fetchval(50)
            assert other < first
            assert len(inline) == 2 and done() == before
            assert set(inline) == {proxy._thread.name}
            # a binding predicted bigger (74 groups), and the rows of its answer: in workers
            ages = await conn.fetch(
                "SELECT age, count(*) FROM adult WHERE sex = $1 GROUP BY age ORDER BY age",
                "Female",
            )
            assert len(ages) == 74 and [r[0] for r in ages] == list(range(17, 91))
            # tried on the loop, handed over before the groups' work (rewriter.cost), then
            # classified, bound and its rows made in worker processes
            assert len(inline) == 3 and done() >= before + 3
            mark = done()
            again = await conn.fetch(
                "SELECT age, count(*) FROM adult WHERE sex = $1 GROUP BY age ORDER BY age",
                "Female",
            )
            assert again == ages  # a big repeat: the stored answer, its rows made in a worker
            assert done() == mark + 1
            small = await conn.fetch("SELECT sex, count(*) FROM adult GROUP BY sex")
            mark = done()
            assert await conn.fetch("SELECT sex, count(*) FROM adult GROUP BY sex") == small
            assert done() == mark  # a small repeat: answered at once, from the event loop
        finally:
            await conn.close()


def test_a_kept_plan_is_keyed_by_type_and_exact_value() -> None:
    [st] = rewriter.classify(
        "SELECT count(*) FROM adult WHERE age > $1",
        rewriter.load_schema(__file__.rsplit("/tests/", 1)[0] + "/sql_fixtures/adult/lapras.toml"),
    )
    assert isinstance(st, rewriter.DPStatement)
    values: list[object] = [
        1,
        True,
        1.0,
        Decimal("1.0"),
        Decimal("1.00"),
        "1",
        b"1",
        None,
        -0.0,
        0.0,
    ]
    keys = {dp_router._plan_key(st, (v,)) for v in values}
    assert None not in keys and len(keys) == len(values)
    assert dp_router._plan_key(st, ([1, 2],)) is None  # not a listed type: never kept
    assert dp_router._plan_key(st, (object(),)) is None
