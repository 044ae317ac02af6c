"""Statements that got an internal error (XX000) now get PostgreSQL's answer, or the SQLSTATE
PostgreSQL would give (issue 41, item 5): a SUM of NULL, a parameter inside an aggregate,
the number of groups an inner aggregate keeps under HAVING, a window function over a value
that is an error for a noisy zero, and a repeat while the ledger's connection is gone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import psycopg
import pytest
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch

import rewriter
from proxy.config import Config, parse_config

ROOT = Path(__file__).resolve().parent
SCHEMA = rewriter.load_schema(ROOT.parent / "sql_fixtures" / "adult" / "lapras.toml")


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg), "test.toml")
    start_epoch(cfg, DASHBOARD)
    return cfg


def _exact(pg: Any, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """PostgreSQL's own answer (the aggregator role reads the table)."""
    with psycopg.connect(pg.aggregator_dsn) as conn:
        return conn.execute(sql, params or None).fetchall()


def test_sum_of_null_is_null_as_postgresql_says(config: Config, pg: Any) -> None:
    sql = "SELECT sum(null::int) FROM adult"
    assert _exact(pg, sql) == [(None,)]
    with Proxy(config, seed=41) as proxy, client(proxy) as (conn, notices):
        cur = conn.execute(sql)
        assert cur.fetchall() == [(None,)]
        assert cur.description is not None and cur.description[0].type_code == 20  # bigint
        assert "; spent" not in notices[-1]  # known without the data: nothing to spend
        # the same over a group and beside other aggregates
        rows = conn.execute(
            "SELECT sex, sum(null::int), avg(null::numeric), count(*) > 0 FROM adult "
            "GROUP BY sex ORDER BY sex"
        ).fetchall()
        assert rows == [("Female", None, None, True), ("Male", None, None, True)]


async def test_a_parameter_inside_an_aggregate_is_bound(config: Config, pg: Any) -> None:
    sql = "SELECT sum($1::int) FROM adult"
    [(count,)] = _exact(pg, "SELECT count(*) FROM adult")
    assert _exact(pg, sql.replace("$1", "%s"), 3) == [(3 * count,)]
    with Proxy(config, seed=42) as proxy:
        conn = await asyncpg.connect(proxy.dsn)  # the extended protocol: Parse, Bind
        try:
            three = await conn.fetchval(sql, 3)
            assert isinstance(three, int) and abs(three - 3 * count) < 0.05 * 3 * count
            assert await conn.fetchval(sql, None) is None  # a sum of NULLs, exactly
            stmt = await conn.prepare("SELECT sex, count(*), sum($1::int) FROM adult GROUP BY sex")
            rows = await stmt.fetch(2)
            assert [r[0] for r in rows] == ["Female", "Male"]
            assert all(isinstance(r[2], int) for r in rows)
        finally:
            await conn.close()


def test_the_groups_an_inner_having_keeps_are_counted(config: Config, pg: Any) -> None:
    sql = (
        "SELECT count(*) FROM (SELECT sex, count(*) FROM adult GROUP BY sex HAVING count(*) > 10) t"
    )
    assert _exact(pg, sql) == [(2,)]
    with Proxy(config, seed=43) as proxy, client(proxy) as (conn, notices):
        assert conn.execute(sql).fetchall() == [(2,)]  # each group's ~10,000 rows: both kept
        assert "standard error" in notices[-1]
        again = conn.execute(
            "SELECT count(*) FROM (SELECT age FROM adult GROUP BY age "
            "HAVING avg(hours_per_week) > 0) t"
        ).fetchone()
        assert again is not None and 0 < again[0] <= 74


def test_a_window_over_a_value_in_error_is_null_as_the_select_list_is() -> None:
    zero = "(count(*) - count(*))"  # 0 for every answer: the same noisy count twice
    [st] = rewriter.classify(
        f"SELECT sex, 100 / {zero}, sum(100 / {zero}) OVER (), "
        f"rank() OVER (ORDER BY 100 / {zero}), count(*) OVER (PARTITION BY 100 / {zero}) "
        "FROM adult GROUP BY sex",
        SCHEMA,
    )
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    n = st.plan.batch.num_queries
    # 100 / 0 is NULL in the select list, and so in the window's argument (a sum over NULLs
    # is NULL), its ORDER BY and its PARTITION BY (one partition, ranks equal)
    for answers in (np.zeros(n), np.arange(1.0, n + 1) * 1000):
        rows = rewriter.postprocess(st.plan, answers, np.ones(n))
        assert rows == [("Female", None, None, 1, 2), ("Male", None, None, 1, 2)]
    # the statement: the window's argument at a noisy count of zero is what the select
    # list gives for it (rewriter.domaincheck: a count that divides and rounds to 0 divides
    # as 1), summed over the groups
    [st] = rewriter.classify(
        "SELECT sex, 100 / count(*), sum(100 / count(*)) OVER () FROM adult GROUP BY sex", SCHEMA
    )
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    rows = rewriter.postprocess(st.plan, np.zeros(2), np.ones(2))
    assert [r[2] for r in rows] == [sum(r[1] for r in rows)] * 2


def test_a_window_over_a_value_in_error_through_the_proxy(config: Config) -> None:
    with Proxy(config, seed=44) as proxy, client(proxy) as (conn, _):
        row = conn.execute(
            "SELECT 100 / (count(*) - count(*)), "
            "sum(100 / (count(*) - count(*))) OVER () FROM adult"
        ).fetchone()
        assert row == (None, None)


def test_a_repeat_while_the_ledger_connection_is_terminated(config: Config, pg: Any) -> None:
    sql = "SELECT income, count(*) FROM adult GROUP BY income"
    with Proxy(config, seed=45) as proxy, client(proxy) as (conn, notices):
        first = conn.execute(sql).fetchall()
        with psycopg.connect(pg.state_admin_dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'"
            ).fetchall()
        assert killed and all(k == (True,) for k in killed)
        # the watch session went with them: the epoch is dropped from memory, and the next
        # statement must load it again through the ledger's terminated connection
        assert proxy.app is not None
        service = proxy.app.service
        for _ in range(500):
            if service.loaded("adult") is None:
                break
            time.sleep(0.01)
        assert service.loaded("adult") is None
        # PostgreSQL's own SQLSTATE for a terminated connection, as an ERROR of the statement
        # (the session goes on), never an internal error
        with pytest.raises(psycopg.errors.AdminShutdown) as info:
            conn.execute(sql)
        assert "state database" in str(info.value) and info.value.diag.message_hint
        # the proxy reconnects: the stored answer again, no new noise
        assert conn.execute(sql).fetchall() == first
        assert "repeat" in notices[-1] or "earlier releases" in notices[-1]
