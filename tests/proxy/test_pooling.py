"""Pooled backend connections (proxy.wire.pool) against the embedded PostgreSQL.

Each test runs its own proxy with a small pool and tags its clients with an
``application_name`` of its own, so the backends it counts in ``pg_stat_activity`` are its own.
The leak tests use a pool of one connection: every client of the test gets the same backend
(checked by its pid), so state one client leaves behind would be seen by the next.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from jdbc_helpers import jdbc_command

from proxy.wire.pool import PoolMode, session_effect
from proxy.wire.server import BackgroundServer
from tests.proxy.conftest import PASSWORD, USER, TestRouter, make_config


@dataclass(frozen=True)
class Pooling:
    """A proxy of its own, and the ``application_name`` its clients are tagged with."""

    srv: BackgroundServer
    pg: Any
    app: str

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1",
            port=self.srv.port,
            user=USER,
            password=PASSWORD,
            dbname=self.pg.database,
            application_name=self.app,
            autocommit=True,
        )

    @contextmanager
    def pair(self) -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any]]]:
        with self.connect() as a, self.connect() as b:
            yield a, b

    def backends(self) -> int:
        """The backends in pg_stat_activity with this test's application_name."""
        with psycopg.connect(self.pg.admin_dsn, autocommit=True) as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (self.app,),
            ).fetchone()
        assert row is not None
        return int(row[0])


@contextmanager
def pooled_proxy(pg: Any, **overrides: object) -> Iterator[Pooling]:
    cfg = make_config(pg, upstream_database=pg.database, **overrides)
    with BackgroundServer(cfg, TestRouter({"adult"})) as srv:
        yield Pooling(srv, pg, f"pool-{uuid.uuid4().hex[:8]}")


def pid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def test_idle_clients_share_a_few_backends(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=4) as pool:
        conns = [pool.connect() for _ in range(40)]
        try:
            for i, c in enumerate(conns):
                assert one(c, f"SELECT {i} + 1") == i + 1
            assert 1 <= pool.backends() <= 4
            for c in conns:  # every client is still served
                assert one(c, "SELECT 'again'") == "again"
        finally:
            for c in conns:
                c.close()


def test_session_mode_keeps_one_backend_per_client_and_reuses_it(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=10, pool_mode=PoolMode.SESSION) as pool:
        conns = [pool.connect() for _ in range(3)]
        pids = {pid(c) for c in conns}
        assert len(pids) == 3 and pool.backends() == 3
        for c in conns:
            c.close()
        later = [pool.connect() for _ in range(3)]
        try:
            assert {pid(c) for c in later} == pids  # the same backends, reset
            assert pool.backends() == 3
        finally:
            for c in later:
                c.close()


def test_a_transaction_keeps_its_backend_and_others_wait_for_it(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=1) as pool:
        with pool.pair() as (a, b):
            a.execute("BEGIN")
            first = pid(a)
            got: list[Any] = []
            t = threading.Thread(target=lambda: got.append(one(b, "SELECT 'b ran'")))
            t.start()
            time.sleep(0.5)
            assert not got  # b waits: the only backend is in a's transaction
            assert pid(a) == first  # ... which keeps it from statement to statement
            a.execute("COMMIT")
            t.join(10)
            assert got == ["b ran"]


def test_a_client_waiting_past_pool_timeout_gets_53300_and_others_go_on(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=1, pool_timeout=0.5) as pool:
        with pool.pair() as (a, b):
            a.execute("BEGIN")
            with pytest.raises(psycopg.OperationalError) as e:
                b.execute("SELECT 1")
            assert e.value.sqlstate == "53300"
            assert "no backend connection became free within 0.5 s" in str(e.value)
            assert "raise [server] pool_size" in str(e.value)
            a.execute("COMMIT")
            assert one(a, "SELECT 'a goes on'") == "a goes on"


# ---------------------------------------------------------------- no state leaks


@pytest.mark.parametrize(
    ("make", "probe", "clean"),
    [
        ("SET work_mem = '1234kB'", "SHOW work_mem", "4MB"),
        (
            "SELECT set_config('statement_timeout', '4321', false)",
            "SHOW statement_timeout",
            "0",
        ),
        ("SET application_name = 'changed'", "SHOW application_name", "APP"),
        ("PREPARE leak_p AS SELECT 1", "SELECT count(*) FROM pg_prepared_statements", 0),
        ("LISTEN leak_channel", "SELECT count(*) FROM pg_listening_channels()", 0),
        (
            "DECLARE leak_c CURSOR WITH HOLD FOR SELECT 1",
            "SELECT count(*) FROM pg_cursors",
            0,
        ),
        (  # taken twice: the maker's probe releases one
            "SELECT pg_advisory_lock(4242), pg_advisory_lock(4242)",
            "SELECT pg_advisory_unlock(4242)",
            False,
        ),
    ],
    ids=["set", "set_config", "reported-parameter", "prepare", "listen", "hold-cursor", "lock"],
)
def test_session_state_does_not_pass_to_the_next_client(
    pg: Any, make: str, probe: str, clean: Any
) -> None:
    """A client makes state (``make``) and leaves; the next client, on the same backend,
    sees ``clean`` from ``probe`` (``APP``: its own application_name)."""
    with pooled_proxy(pg, pool_size=1) as pool:
        clean = pool.app if clean == "APP" else clean
        with pool.connect() as a:
            a.execute(make)
            first = pid(a)
            assert one(a, probe) != clean  # the state is there for its maker
        with pool.connect() as b:
            assert pid(b) == first  # the same backend...
            assert one(b, probe) == clean  # ... without the state


def test_protocol_prepared_statements_stay_with_their_client(pg: Any) -> None:
    """Protocol-level prepared statements: another client on the same backend does not see
    them (reset), and their client can still execute them after the backend has served
    another client: each is parsed again when it is next used, not all at once (as
    PgBouncer's max_prepared_statements)."""
    with pooled_proxy(pg, pool_size=1) as pool:
        with pool.pair() as (a, b):
            texts = [f"SELECT %s::int * {k}" for k in range(1, 6)]
            for k, sql in enumerate(texts, 1):
                assert a.execute(sql, (21,), prepare=True).fetchone() == (21 * k,)
            prepared = "SELECT count(*) FROM pg_prepared_statements"
            assert one(a, prepared) == 5
            assert pid(b) == pid(a)  # b has the backend between a's transactions
            assert one(b, prepared) == 0
            assert a.execute(texts[1], (50,), prepare=True).fetchone() == (100,)
            assert one(a, prepared) == 1  # only the one used since
            assert a.execute(texts[4], (2,), prepare=True).fetchone() == (10,)
            assert one(a, prepared) == 2
            cur = a.cursor()
            cur.execute(texts[2], (7,), prepare=True)  # described and executed
            assert cur.fetchone() == (21,)
            assert one(a, prepared) == 3


def test_a_set_sent_by_the_extended_protocol_follows_its_client(pg: Any) -> None:
    """pgjdbc, Npgsql and asyncpg's ``fetch`` send a SET as Parse/Bind/Execute/Sync (here
    psycopg's ``prepare=True``: a named statement, so its later executions are
    Bind/Execute/Sync only). Outside a transaction block and alone in its batch it is tracked
    as a simple SET is, not pinned: the other client gets the one connection between the
    first's statements and sees its own setting, and the first's setting is there again on
    each of its statements, through a RESET and a new SET of the same statement."""
    set_sql = "SET work_mem = '2345kB'"
    with pooled_proxy(pg, pool_size=1, pool_timeout=5) as pool, pool.pair() as (a, b):
        for _ in range(3):
            a.execute(set_sql, prepare=True)
            first = pid(a)
            assert one(b, "SHOW work_mem") == "4MB" and pid(b) == first  # not pinned
            assert one(a, "SHOW work_mem") == "2345kB"
            a.execute("RESET work_mem", prepare=True)
            assert one(b, "SELECT 1") == 1
            assert one(a, "SHOW work_mem") == "4MB"


@pytest.mark.parametrize("how", ["in-a-block", "failed-batch"])
def test_an_extended_set_whose_outcome_is_not_plain_pins_its_client(pg: Any, how: str) -> None:
    """An extended-protocol SET in a transaction block, or in a batch that then fails (its
    implicit transaction rolls the SET back), is not replayed: the session keeps its
    connection (the other client of a one-connection pool waits past ``pool_timeout``), and
    the setting is what the backend has."""
    set_sql = "SET work_mem = '2345kB'"
    with pooled_proxy(pg, pool_size=1, pool_timeout=0.5) as pool, pool.pair() as (a, b):
        if how == "in-a-block":
            a.execute("BEGIN")
            a.execute(set_sql, prepare=True)
            a.execute("COMMIT")
            expected = "2345kB"
        else:
            with pytest.raises(psycopg.errors.DivisionByZero), a.pipeline():
                a.execute(set_sql, prepare=True)
                a.execute("SELECT 1 / 0", prepare=True)
            expected = "4MB"
        with pytest.raises(psycopg.OperationalError) as e:
            b.execute("SELECT 1")
        assert e.value.sqlstate == "53300"
        assert one(a, "SHOW work_mem") == expected


_JDBC_SET = r"""
import java.sql.*;
import java.util.*;

public class JdbcSet {
  static String show(Statement st) throws SQLException {
    try (ResultSet rs = st.executeQuery("SHOW work_mem")) { rs.next(); return rs.getString(1); }
  }
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.setProperty("user", a[1]);
    p.setProperty("password", a[2]);
    try (Connection c1 = DriverManager.getConnection(a[0], p); Statement s1 = c1.createStatement()) {
      s1.execute("SET work_mem = '2345kB'");
      try (Connection c2 = DriverManager.getConnection(a[0], p); Statement s2 = c2.createStatement()) {
        System.out.println("other " + show(s2));
      }
      System.out.println("own " + show(s1));
    }
  }
}
"""


def test_a_jdbc_clients_sets_keep_it_pooled(pg: Any, tmp_path: Any) -> None:
    """pgjdbc (autocommit) sends its own ``SET extra_float_digits`` and ``SET
    application_name`` as it connects, and the client's ``SET``, all by the extended
    protocol: none pins. Two JDBC connections (one pool: the same start-up parameters) share
    the pool's one backend, each with its own setting."""
    import subprocess

    java = jdbc_command(tmp_path, "JdbcSet", _JDBC_SET)
    with pooled_proxy(pg, pool_size=1, pool_timeout=5) as pool:
        url = f"jdbc:postgresql://127.0.0.1:{pool.srv.port}/{pg.database}"
        r = subprocess.run(
            [*java, url, USER, PASSWORD],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr  # (pinned: the second login waits, then 53300)
        assert r.stdout.splitlines() == ["other 4MB", "own 2345kB"]


def test_a_clients_settings_follow_it_from_connection_to_connection(pg: Any) -> None:
    """A SET alone outside a transaction block is tracked, not pinned: the session gives its
    connection back, and the next one it gets (another client used it meanwhile) has the
    setting again; the other client never sees it."""
    with pooled_proxy(pg, pool_size=1) as pool, pool.pair() as (a, b):
        a.execute("SET work_mem = '2345kB'")
        a.execute('set search_path = "public"')
        a.execute("SET TIME ZONE 'Asia/Tokyo'")
        for _ in range(3):
            assert pid(b) == pid(a)  # one connection, handed back and forth
            assert one(b, "SHOW work_mem") == "4MB"
            assert one(a, "SHOW work_mem") == "2345kB"
            assert one(a, "SHOW search_path") == "public"
            assert one(a, "SHOW TimeZone") == "Asia/Tokyo"
            assert one(b, "SHOW TimeZone") != "Asia/Tokyo"
        a.execute("RESET work_mem")
        assert one(b, "SELECT 1") == 1
        assert one(a, "SHOW work_mem") == "4MB"
        with pytest.raises(psycopg.errors.UndefinedObject):
            a.execute("SET no_such_setting = 1")  # refused: not replayed
        assert one(b, "SELECT 1") == 1
        assert one(a, "SHOW search_path") == "public"
        # several in one message (psqlODBC's start-up), as one transaction: all or none
        a.execute("SET DateStyle = 'SQL, DMY'; SET extra_float_digits = 2; SHOW DateStyle")
        with pytest.raises(psycopg.errors.UndefinedObject):
            a.execute("SET extra_float_digits = 1; SET no_such_setting = 1")
        assert one(b, "SELECT 1") == 1
        assert one(a, "SHOW DateStyle") == "SQL, DMY"
        assert one(a, "SHOW extra_float_digits") == "2"
        assert pid(a) == pid(b)  # never pinned


def test_a_set_in_a_transaction_block_counts_when_the_block_commits(pg: Any) -> None:
    """psycopg2 and SQLAlchemy run their SETs in the transaction they open: tracked when it
    commits, forgotten when it rolls back (as PostgreSQL keeps or undoes them)."""
    with pooled_proxy(pg, pool_size=1) as pool, pool.pair() as (a, b):
        for sql, end in (
            ("SET work_mem = '2345kB'", "COMMIT"),
            ("SET work_mem = '999kB'", "ROLLBACK"),
        ):
            a.execute("BEGIN")
            a.execute(sql)
            a.execute(end)
            assert one(b, "SELECT 1") == 1  # b takes the connection between a's transactions
            assert one(a, "SHOW work_mem") == "2345kB"
        a.execute("BEGIN")
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("SELECT 1 / 0")
        a.execute("COMMIT")  # of a failed block: a rollback
        assert one(b, "SELECT 1") == 1
        assert one(a, "SHOW work_mem") == "2345kB"
        assert one(b, "SHOW work_mem") == "4MB"


def test_a_savepoint_in_a_block_with_a_set_pins_the_session(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=2) as pool, pool.pair() as (a, b):
        a.execute("BEGIN")
        a.execute("SET work_mem = '2345kB'")
        a.execute("SAVEPOINT s")
        a.execute("SET work_mem = '999kB'")
        a.execute("ROLLBACK TO SAVEPOINT s")  # PostgreSQL undoes the second SET only
        a.execute("COMMIT")
        first = pid(a)
        for _ in range(3):
            assert one(b, "SELECT 1") == 1
            assert one(a, "SHOW work_mem") == "2345kB"
            assert pid(a) == first  # pinned: it kept its connection
        assert pid(b) != first


@pytest.mark.parametrize(
    ("sql", "effect"),
    [
        ("SET search_path = x", "set search_path"),
        ("set  session work_mem = '1MB'", "set work_mem"),
        ("SET TIME ZONE 'UTC'", "set timezone"),
        ("SET DateStyle TO ISO", "set datestyle"),
        ("/* c */ RESET ALL", "reset"),
        ("RESET work_mem", "reset work_mem"),
        ("DISCARD ALL", "reset"),
        ("SET ROLE someone", "pin"),
        ("SET SESSION AUTHORIZATION someone", "pin"),
        ("LISTEN ch", "pin"),
        ("PREPARE p AS SELECT 1", "pin"),
        ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", "pin"),
        ("CREATE TEMP TABLE t (a int)", "pin"),
        ("SELECT 1 INTO TEMP t", "pin"),
        ("SELECT pg_try_advisory_lock(1)", "pin"),
        ("SELECT set_config('a.b', '1', false)", "pin"),
        ("SELECT setseed(0.5)", "pin"),
        ("SET LOCAL work_mem = '1MB'", None),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", None),
        ("SET CONSTRAINTS ALL DEFERRED", None),
        ("PREPARE TRANSACTION 'x'", None),
        ("DECLARE c CURSOR FOR SELECT 1", None),
        ("SELECT pg_advisory_xact_lock(1)", None),
        ("SELECT settings FROM t", None),
    ],
)
def test_what_statements_leave_in_the_session(sql: str, effect: str | None) -> None:
    e = session_effect(sql)
    assert (None if e is None else " ".join(filter(None, (e.kind, e.name)))) == effect


def test_a_pooled_connection_terminated_while_idle_is_replaced(pg: Any) -> None:
    """The backend of an idle pooled connection is terminated (an administrator, a restart):
    the pool drops it, and the session that used it is served by a new one."""
    with pooled_proxy(pg, pool_size=2) as pool, pool.connect() as a:
        first = pid(a)
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first,))
        deadline = time.monotonic() + 10
        while pool.backends() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert one(a, "SELECT 'still here'") == "still here"
        assert pid(a) != first


def test_a_session_mode_pool_at_its_size_makes_the_next_login_wait(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=1, pool_mode=PoolMode.SESSION, pool_timeout=0.5) as pool:
        with pool.connect() as a:
            with pytest.raises(psycopg.OperationalError) as e:
                pool.connect()  # (psycopg gives no SQLSTATE for a failed login)
            assert "no backend connection became free within 0.5 s" in str(e.value)
            assert one(a, "SELECT 1") == 1
        with pool.connect() as b:  # a's connection, reset, serves the next login
            assert one(b, "SELECT 2") == 2


def test_clients_that_prepare_everything_share_a_small_pool(pg: Any) -> None:
    """asyncpg prepares every statement under a name of its own and reuses it; eight such
    clients on two connections hand them back and forth constantly, each transaction on a
    connection another client may have used last (reset, statements parsed again)."""
    import asyncio

    asyncpg = pytest.importorskip("asyncpg")

    async def client(port: int, k: int) -> int:
        conn = await asyncpg.connect(
            host="127.0.0.1",
            port=port,
            user=USER,
            password=PASSWORD,
            database=pg.database,
            server_settings={"application_name": pool.app},
        )
        try:
            done = 0
            for i in range(30):
                a = await conn.fetchval("SELECT $1::int + $2::int", k, i)
                b = await conn.fetchval("SELECT $1::text || '-' || $2::text", str(k), str(i))
                async with conn.transaction():
                    c = await conn.fetchval("SELECT $1::int * 2", i)
                    d = await conn.fetchval("SELECT count(*) FROM pg_prepared_statements")
                assert (a, b, c) == (k + i, f"{k}-{i}", 2 * i)
                assert d >= 1  # its own statements, parsed again where needed
                done += 1
            return done
        finally:
            await conn.close()

    async def run(port: int) -> list[int]:
        return await asyncio.gather(*(client(port, k) for k in range(8)))

    with pooled_proxy(pg, pool_size=2) as pool:
        assert asyncio.run(run(pool.srv.port)) == [30] * 8
        assert pool.backends() <= 2


def test_an_open_extended_batch_keeps_its_backend_until_its_sync(pg: Any) -> None:
    """Parse/Bind/Execute and a Flush, no Sync yet: the backend's implicit transaction is
    open, so the connection stays with the session; another client waits for the Sync."""
    import asyncio

    from proxy.wire.messages import (
        Bind,
        CommandComplete,
        DataRow,
        Execute,
        Flush,
        Parse,
        ReadyForQuery,
        Sync,
    )
    from tests.proxy.wireclient import RawClient

    async def scenario(port: int) -> None:
        params = (("application_name", pool.app),)
        raw = await RawClient.login("127.0.0.1", port, USER, PASSWORD, pg.database, params)
        other = await RawClient.login("127.0.0.1", port, USER, PASSWORD, pg.database, params)
        try:
            await raw.send_together(
                Parse(name="", sql="SELECT pg_backend_pid()"),
                Bind(portal="", statement=""),
                Execute(portal=""),
                Flush(),
            )
            got = await raw.read_n(4)  # ParseComplete, BindComplete, DataRow, CommandComplete
            assert isinstance(got[2], DataRow) and isinstance(got[3], CommandComplete)
            await other.send_together(
                Parse(name="", sql="SELECT 1"),
                Bind(portal="", statement=""),
                Execute(portal=""),
                Sync(),
            )
            with pytest.raises(TimeoutError):
                await other.read(timeout=0.5)  # waits: the only backend is in raw's batch
            await raw.send(Sync())
            ready = (await raw.until_ready())[-1]
            assert isinstance(ready, ReadyForQuery) and ready.status == "I"
            replies = await other.until_ready()
            assert any(isinstance(m, DataRow) and m.values == (b"1",) for m in replies)
        finally:
            await raw.close()
            await other.close()

    with pooled_proxy(pg, pool_size=1) as pool:
        asyncio.run(scenario(pool.srv.port))


def test_a_listening_session_keeps_its_backend_and_gets_its_notifications(pg: Any) -> None:
    with pooled_proxy(pg, pool_size=2) as pool:
        with pool.pair() as (listener, talker):
            listener.execute("LISTEN pool_news")
            first = pid(listener)
            for i in range(3):
                talker.execute(f"NOTIFY pool_news, 'n{i}'")
                assert one(talker, "SELECT 1") == 1
            assert pid(listener) == first
            got = [n.payload for n in listener.notifies(timeout=2, stop_after=3)]
            assert got == ["n0", "n1", "n2"]


def test_copy_out_through_a_pooled_connection(pg: Any) -> None:
    with (
        pooled_proxy(pg, pool_size=1) as pool,
        pool.connect() as a,
        pool.connect() as b,
    ):
        with a.cursor().copy("COPY (SELECT g FROM generate_series(1, 3) g) TO STDOUT") as cp:
            rows = [bytes(r) for r in cp]
        assert b"".join(rows) == b"1\n2\n3\n"
        assert one(b, "SELECT 'b after the copy'") == "b after the copy"
        assert one(a, "SELECT 'a again'") == "a again"


def test_a_prepared_statement_that_no_longer_parses_gets_the_backends_error(pg: Any) -> None:
    """Parsed again on another connection after its table was dropped: the client gets the
    backend's own error for it (42P01), and its session goes on."""
    import psycopg.errors

    table = f"pool_tmp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE public.{table} (a int)")
        admin.execute(f"GRANT SELECT ON public.{table} TO lapras_passthrough")
        try:
            with pooled_proxy(pg, pool_size=1) as pool, pool.pair() as (a, b):
                sql = f"SELECT count(*) FROM {table} WHERE a > %s"
                assert a.execute(sql, (0,), prepare=True).fetchone() == (0,)
                assert one(b, "SELECT 1") == 1  # the connection was b's meanwhile
                admin.execute(f"DROP TABLE public.{table}")
                with pytest.raises(psycopg.errors.UndefinedTable):
                    a.execute(sql, (0,), prepare=True)
                assert one(a, "SELECT 'a goes on'") == "a goes on"
        finally:
            admin.execute(f"DROP TABLE IF EXISTS public.{table}")
