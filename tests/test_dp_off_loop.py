"""The rewriter's work of each DP execution runs off the event loop (proxy.dp_router): a
prepared statement's parameters are bound in the answering worker thread, the rows of a big
answer are made there, and an exact repeat of a prepared statement is answered from the
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


async def test_binds_and_big_answers_run_in_the_worker(
    config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.to_thread(start_epoch, config, DASHBOARD)
    binds: list[str] = []
    renders: list[tuple[str, int]] = []
    bind, rendered = rewriter.bind, dp_router._rendered

    def recording_bind(st: Any, params: Any) -> Any:
        binds.append(threading.current_thread().name)
        return bind(st, params)

    def recording_rendered(plan: Any, answer: Any, reveal: bool) -> Any:
        renders.append((threading.current_thread().name, plan.batch.num_queries))
        return rendered(plan, answer, reveal)

    monkeypatch.setattr(rewriter, "bind", recording_bind)
    monkeypatch.setattr(dp_router, "_rendered", recording_rendered)
    with Proxy(config, seed=21) as proxy:
        loop_thread = proxy._thread.name
        notices: list[str] = []
        conn = await asyncpg.connect(proxy.dsn)
        conn.add_log_listener(lambda _c, m: notices.append(m.message))
        try:
            count = await conn.prepare("SELECT count(*) FROM adult WHERE age > $1")
            first = await count.fetchval(40)
            assert await count.fetchval(40) == first  # the stored answer
            assert "earlier releases" in notices[-1] or "repeat" in notices[-1]
            assert len(binds) == 1  # found by its parameters: not bound again
            other = await count.fetchval(50)
            assert other < first
            ages = await conn.fetch(
                "SELECT age, count(*) FROM adult WHERE sex = $1 GROUP BY age ORDER BY age",
                "Female",
            )
            assert len(ages) == 74 and [r[0] for r in ages] == list(range(17, 91))
            again = await conn.fetch(
                "SELECT age, count(*) FROM adult WHERE sex = $1 GROUP BY age ORDER BY age",
                "Female",
            )
            assert again == ages  # a big repeat: the stored answer, rendered in the worker
        finally:
            await conn.close()
    assert len(binds) == 3 and all(n.startswith("lapras-answer") for n in binds), binds
    assert loop_thread not in binds
    for name, queries in renders:
        on_loop = queries <= dp_router.LOOP_QUERIES
        assert name.startswith("lapras-answer") != on_loop, renders
    assert {q for _, q in renders} >= {1, 74}


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
