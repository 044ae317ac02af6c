"""The product end to end: the proxy in front of the embedded PostgreSQL, real clients, a
durable ledger in the backend, DP answers from the LAPRAS engine.

Each test gets its own database schema ``lapras`` (dropped first), so epochs never leak
between tests.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import psycopg
import pytest
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch

from proxy.config import Config, parse_config
from proxy.ledger import decode


def make_config(pg: Any, **privacy: Any) -> Config:
    return parse_config(config_text(pg, **privacy), "test.toml")


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    return make_config(pg)


def test_no_epoch_means_a_clear_refusal(config: Config) -> None:
    with Proxy(config, seed=1) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as info:
            conn.execute("SELECT count(*) FROM adult")
        assert "lapras epoch start" in (info.value.diag.message_hint or "")
        # The connection stays usable, catalogue queries keep working.
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_predicted_fresh_repeat_and_refused(config: Config, pg: Any) -> None:
    start_epoch(config, DASHBOARD)
    with psycopg.connect(pg.aggregator_dsn) as direct:
        true_female = direct.execute("SELECT count(*) FROM adult WHERE sex = 'Female'").fetchone()[
            0
        ]
    with Proxy(config, seed=2) as proxy, client(proxy) as (conn, notices):
        cur = conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex")
        rows = cur.fetchall()
        assert [r[0] for r in rows] == ["Female", "Male"]
        assert [d.type_code for d in cur.description] == [25, 20]  # text, int8: as PostgreSQL
        assert abs(rows[0][1] - true_female) < 300  # sigma ~ 26 here: 10+ sigma margin
        assert "Matrix Mechanism" in notices[-1] and "no budget spent" in notices[-1]

        fresh = conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 29").fetchone()
        assert "fresh noise" in notices[-1]
        again = conn.execute("select COUNT(*) from ADULT where AGE between 20 and 29").fetchone()
        assert again == fresh  # a repeat returns the stored answer: no new noise
        assert "repeat" in notices[-1]

        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT age FROM adult LIMIT 3")
        probe = conn.execute("SELECT * FROM adult WHERE 1 = 0")
        assert probe.fetchall() == [] and len(probe.description) == 15


def test_by_default_an_answer_does_not_tell_whether_it_was_predicted_or_a_repeat(
    pg: Any,
) -> None:
    """An analyst must not learn from a NOTICE that colleagues asked a statement before (in
    the log the prediction read, or earlier in the epoch): [privacy] reveal_sources is off
    unless set."""
    reset_ledger(pg)
    config = make_config(pg, reveal_sources=None)  # the product's default
    start_epoch(config, DASHBOARD)
    with Proxy(config, seed=2) as proxy, client(proxy) as (conn, notices):
        conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall()
        predicted = notices[-1]
        conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 29").fetchone()
        assert "fresh noise" in notices[-1]
        conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 29").fetchone()
        repeat = notices[-1]
    for notice in (predicted, repeat):
        assert notice.startswith("LAPRAS: answered from earlier releases (no budget spent);")
        assert "predicted" not in notice and "Matrix" not in notice and "repeat" not in notice


def test_budget_and_stream_length_are_enforced(config: Config) -> None:
    start_epoch(config, [], stream_length=3)
    with Proxy(config, seed=3) as proxy, client(proxy) as (conn, _):
        for low in (20, 30, 40):
            conn.execute(
                f"SELECT count(*) FROM adult WHERE age BETWEEN {low} AND {low + 5}"
            ).fetchone()
        with pytest.raises(psycopg.Error) as info:
            conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 60 AND 65")
        assert info.value.sqlstate == "42Q01"
        # Stored answers keep being served after the stream is exhausted.
        conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 25").fetchone()


def test_restart_rebuilds_the_same_state_from_the_ledger(config: Config) -> None:
    start_epoch(config, DASHBOARD)
    queries = [
        "SELECT sex, count(*) FROM adult GROUP BY sex",
        "SELECT avg(age) FROM adult WHERE sex = 'Male'",
    ]
    with Proxy(config, seed=4) as proxy, client(proxy) as (conn, _):
        before = [conn.execute(q).fetchall() for q in queries]
        status_before = asyncio.run_coroutine_threadsafe(
            proxy.app.service.status("adult"), proxy.loop
        ).result()  # type: ignore[union-attr]
    with Proxy(config, seed=5) as proxy, client(proxy) as (conn, notices):
        after = [conn.execute(q).fetchall() for q in queries]
        status_after = asyncio.run_coroutine_threadsafe(
            proxy.app.service.status("adult"), proxy.loop
        ).result()  # type: ignore[union-attr]
        assert all("repeat" in n for n in notices)
    assert after == before
    assert status_after is not None and status_before is not None
    assert status_after[1] == status_before[1]


def test_every_answer_has_a_committed_charge(config: Config, pg: Any) -> None:
    start_epoch(config, DASHBOARD)
    with Proxy(config, seed=6) as proxy, client(proxy) as (conn, _):
        for low in range(20, 60, 5):
            conn.execute(
                f"SELECT count(*) FROM adult WHERE age BETWEEN {low} AND {low + 3}"
            ).fetchone()
    with psycopg.connect(pg.state_dsn) as conn:
        rows = conn.execute(
            "SELECT seq, kind, payload::text FROM lapras.ledger ORDER BY seq"
        ).fetchall()
    events = [(seq, kind, decode(payload)) for seq, kind, payload in rows]
    charged = {ev.position for _, kind, ev in events if kind == "Charged" and ev.position > 0}
    released = [ev for _, kind, ev in events if kind == "Released"]
    assert len(released) == 8
    for ev in released:
        assert ev.position in charged
        seq_release = next(s for s, k, e in events if e is ev)
        seq_charge = next(s for s, k, e in events if k == "Charged" and e.position == ev.position)
        assert seq_charge < seq_release


def test_analysts_cannot_read_the_ledger(config: Config) -> None:
    start_epoch(config, [])
    with Proxy(config, seed=7) as proxy, client(proxy) as (conn, _):
        # The ledger lives in the state database: the analysts' database has no trace of it.
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM lapras.histograms")
        assert conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'lapras'"
        ).fetchone() == (0,)


async def test_asyncpg_prepared_dp_statement(config: Config) -> None:
    await asyncio.to_thread(start_epoch, config, DASHBOARD)
    proxy = Proxy(config, seed=8)
    with proxy:
        conn = await asyncpg.connect(proxy.dsn)
        try:
            stmt = await conn.prepare("SELECT count(*) FROM adult WHERE age > $1")
            assert [t.name for t in stmt.get_parameters()] == ["int4"]
            first = await stmt.fetchval(40)
            assert isinstance(first, int)
            assert await stmt.fetchval(40) == first  # same bound query: the stored answer
            other = await stmt.fetchval(50)
            assert other < first  # ~ 13,000 vs ~ 6,500 people; noise is ~ 20
        finally:
            await conn.close()


def test_the_ledger_reconnects_after_its_backend_connection_is_lost(
    config: Config, pg: Any
) -> None:
    start_epoch(config, [])
    with Proxy(config, seed=9) as proxy, client(proxy) as (conn, _):
        conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 22").fetchone()
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE usename = 'lapras_aggregator' AND pid <> pg_backend_pid()"
            )
        outcomes = []
        for low in (30, 40, 50):
            try:
                conn.execute(
                    f"SELECT count(*) FROM adult WHERE age BETWEEN {low} AND {low + 2}"
                ).fetchone()
                outcomes.append("answered")
            except psycopg.Error as exc:
                outcomes.append(exc.sqlstate or "")
        # At most the statement that found the connection broken fails; the next ones reconnect.
        assert outcomes[1:] == ["answered", "answered"], outcomes
