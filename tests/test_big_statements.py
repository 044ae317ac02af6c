"""Big statements through the whole proxy: refused by size before anything reads them, or
classified off the event loop while the other sessions keep being answered.

``[server] max_statement_size`` bounds the SQL text of a Query or a Parse (54000 beyond it,
the session goes on); a statement longer than the router's ``off_loop_chars`` (16 KiB) is
classified in a worker process of the heavy lane (proxy.dp_router, proxy.dp_workers).
"""

from __future__ import annotations

import threading
from typing import Any

import asyncpg
import psycopg
import pytest
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch
from psycopg.pq import DiagnosticField, ExecStatus

from proxy.config import Config, parse_config
from proxy.dp_router import OFF_LOOP_CHARS
from proxy.dp_workers import Lane
from rewriter.errors import ConfigError

LIMIT = 64 * 1024


def _config(pg: Any, limit: int | None = LIMIT) -> Config:
    text = config_text(pg)
    if limit is not None:
        text = text.replace("[server]\n", f"[server]\nmax_statement_size = {limit}\n", 1)
    return parse_config(text, "test.toml")


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = _config(pg)
    start_epoch(cfg, DASHBOARD)
    return cfg


def _in_list(size: int, select: str = "count(*)") -> str:
    """``SELECT <select> FROM adult WHERE age IN (...)`` of ``size`` bytes: every age of the
    domain, over and over (the same linear query as ``age BETWEEN 17 AND 90``)."""
    head = f"SELECT {select} FROM adult WHERE age IN ("
    items: list[str] = []
    n = len(head) + len("17)")
    for i in range(size):
        item = f"{17 + i % 74}, "
        if n + len(item) > size:
            break
        items.append(item)
        n += len(item)
    sql = head + "".join(items) + "17)"
    return sql + " " * (size - len(sql))


def test_the_limit_is_configured_within_bounds(pg: Any) -> None:
    assert _config(pg, None).server.max_statement_size == 1 << 20  # the default: 1 MiB
    assert _config(pg, 32768).server.max_statement_size == 32768
    for wrong in (0, 1000, 17 * 1024 * 1024):
        with pytest.raises(ConfigError) as info:
            _config(pg, wrong)
        assert "max_statement_size" in str(info.value)


def test_a_statement_over_the_limit_is_refused_and_the_session_goes_on(config: Config) -> None:
    big = "SELECT 1" + " " * LIMIT  # innocent, but longer than the limit
    with Proxy(config, seed=11) as proxy, client(proxy) as (conn, _):
        # simple protocol (a Query message)
        res = conn.pgconn.exec_(big.encode())
        assert res.status == ExecStatus.FATAL_ERROR
        assert res.error_field(DiagnosticField.SQLSTATE) == b"54000"
        message = (res.error_field(DiagnosticField.MESSAGE_PRIMARY) or b"").decode()
        hint = (res.error_field(DiagnosticField.MESSAGE_HINT) or b"").decode()
        assert f"{len(big)} bytes" in message and str(LIMIT) in message
        assert "max_statement_size" in hint
        assert conn.execute("SELECT 1").fetchone() == (1,)
        # extended protocol (Parse, Bind, Execute, Sync), unnamed and named statements
        for prepare in (False, True):
            with pytest.raises(psycopg.errors.ProgramLimitExceeded):
                conn.execute(big, prepare=prepare)
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # multi-byte text counts in bytes: 30,000 characters of 3 bytes each
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute("SELECT '" + "€" * 30_000 + "'")
        assert conn.execute("SELECT %s::text", ["€" * 10_000]).fetchone() == ("€" * 10_000,)
        # inside a transaction block the error fails the transaction, as any error does; in
        # a failed one it is still the size that is reported (as PostgreSQL reads a
        # statement before it looks at the transaction)
        conn.execute("BEGIN")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute(big)
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        for prepare in (False, True):
            with pytest.raises(psycopg.errors.ProgramLimitExceeded):
                conn.execute(big, prepare=prepare)
        assert conn.pgconn.exec_(big.encode()).error_field(DiagnosticField.SQLSTATE) == b"54000"
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall()


async def test_asyncpg_gets_the_size_error_and_goes_on(config: Config) -> None:
    big = "SELECT 1" + " " * LIMIT
    with Proxy(config, seed=12) as proxy:
        conn = await asyncpg.connect(proxy.dsn)
        try:
            with pytest.raises(asyncpg.exceptions.ProgramLimitExceededError):
                await conn.fetch(big)  # a named prepared statement
            with pytest.raises(asyncpg.exceptions.ProgramLimitExceededError):
                await conn.execute(big)  # a simple Query
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()


def test_statements_just_under_the_limit_are_classified_while_others_are_answered(
    config: Config,
) -> None:
    answered: list[tuple[int, ...] | None] = []
    stop = threading.Event()
    with Proxy(config, seed=13) as proxy:

        def other_session() -> None:
            with client(proxy) as (conn, _):
                while not stop.is_set():
                    answered.append(conn.execute("SELECT 1").fetchone())

        other = threading.Thread(target=other_session)
        other.start()
        try:
            with client(proxy) as (conn, notices):
                whole = conn.execute(
                    "SELECT count(*) FROM adult WHERE age BETWEEN 17 AND 90"
                ).fetchone()
                listed = _in_list(LIMIT - 1)
                assert OFF_LOOP_CHARS < len(listed.encode()) < LIMIT
                # every age listed: the same linear query as every age's cell, answered again
                # from the same stored release (no new noise, no budget)
                assert conn.execute(listed).fetchone() == whole
                assert "repeat" in notices[-1] or "earlier releases" in notices[-1]
                cur = conn.execute(listed.replace("count(*)", "sum(age)", 1), prepare=True)
                assert isinstance(cur.fetchone()[0], int)  # type: ignore[index]
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(_in_list(LIMIT - 1, select="age"))  # rows: refused
                deep = "SELECT count(*) FROM adult WHERE age = 1" + "+1" * (LIMIT // 2 - 30)
                with pytest.raises(psycopg.errors.FeatureNotSupported):
                    conn.execute(deep)
                assert conn.execute("SELECT 1").fetchone() == (1,)
        finally:
            stop.set()
            other.join(30)
        assert proxy.app is not None  # classified in the heavy lane's worker processes
        assert proxy.app.router.workers.finished[Lane.HEAVY] >= 4
    assert answered and all(a == (1,) for a in answered)
