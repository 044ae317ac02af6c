"""Real clients through the proxy: psql, psycopg 3, psycopg2 + SQLAlchemy, asyncpg, pg8000.

Catalogue answers are compared with the same client connected directly to PostgreSQL as the
passthrough role; ``SELECT count(*) FROM adult WHERE age > n`` is answered locally by the test
router (``1000 + n``), standing in for the DP answers plugged in through the same seam.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import assert_cancels
from jdbc_helpers import jdbc_command

PSQL_COMMANDS = [r"\d", r"\dt", r"\l", r"\d adult", r"\dn", r"\du"]


def _psql_binaries() -> list[str]:
    found = []
    if shutil.which("psql"):
        found.append(shutil.which("psql") or "psql")
    try:
        import importlib.util

        spec = importlib.util.find_spec("pgserver")
        if spec and spec.origin:
            p = Path(spec.origin).parent / "pginstall" / "bin" / "psql"
            if p.exists():
                found.append(str(p))
    except ImportError:
        pass
    return found


def _psql(binary: str, dsn: str, *commands: str) -> subprocess.CompletedProcess[str]:
    args = [binary, "-X", "-v", "ON_ERROR_STOP=1", dsn]
    for c in commands:
        args += ["-c", c]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PGCONNECT_TIMEOUT"] = "10"
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("binary", _psql_binaries())
def test_psql_catalogue_identical(binary: str, proxy, pg) -> None:  # type: ignore[no-untyped-def]
    for cmd in PSQL_COMMANDS:
        via = _psql(binary, proxy.dsn, cmd)
        direct = _psql(binary, pg.passthrough_dsn, cmd)
        assert via.returncode == 0, via.stderr
        assert via.stdout == direct.stdout, cmd
        assert via.stdout.strip()


def test_psql_refusal_and_local_answer(proxy) -> None:  # type: ignore[no-untyped-def]
    binary = _psql_binaries()[0]
    r = _psql(binary, proxy.dsn, "SELECT * FROM adult")
    assert r.returncode == 1
    assert "ERROR:  permission denied for table adult" in r.stderr
    r = _psql(binary, proxy.dsn, "SELECT count(*) FROM adult WHERE age > 30")
    assert r.returncode == 0, r.stderr
    assert "1030" in r.stdout and "count" in r.stdout


# -- psycopg 3 ---------------------------------------------------------------------------------


def test_psycopg3_basics(proxy, pg) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(pg.passthrough_dsn) as d, psycopg.connect(proxy.dsn) as c:
        assert c.info.server_version == d.info.server_version
        assert c.info.parameter_status("server_version") == d.info.parameter_status(
            "server_version"
        )
        row = c.execute(
            "SELECT %s::int + 1, %s::text, %s::date, %s::numeric",
            (41, "x", dt.date(2026, 11, 29), Decimal("1.25")),
        ).fetchone()
        assert row == (42, "x", dt.date(2026, 11, 29), Decimal("1.25"))
        cur = c.cursor(binary=True)
        cur.execute("SELECT 10::int8, 1.5::numeric, 'x'::text, '2026-11-29'::date, true")
        assert cur.fetchone() == (10, Decimal("1.5"), "x", dt.date(2026, 11, 29), True)
        # Local answer, text and binary, parameters sent binary (int) by psycopg.
        assert c.execute("SELECT count(*) FROM adult WHERE age > %s", (30,)).fetchone() == (1030,)
        cur = c.cursor(binary=True)
        cur.execute("SELECT count(*) FROM adult WHERE age > %s", (31,))
        assert cur.fetchone() == (1031,)
        assert cur.description is not None and cur.description[0].type_code == 20


def test_psycopg3_auto_prepare(proxy) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(proxy.dsn, prepare_threshold=2) as c:
        for i in range(7):
            q = "SELECT count(*) FROM adult WHERE age > %s"
            assert c.execute(q, (i,)).fetchone() == (1000 + i,)
            assert c.execute("SELECT %s::int * 2", (i,)).fetchone() == (2 * i,)
        c.commit()


def test_psycopg3_pipeline(proxy) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(proxy.dsn, autocommit=True) as c, c.pipeline():
        c1 = c.execute("SELECT relname FROM pg_class WHERE relname = %s", ("adult",))
        c2 = c.execute("SELECT count(*) FROM adult WHERE age > %s", (3,))
        c3 = c.execute("SELECT %s::text", ("after",))
        c.execute("SELECT count(*) FROM adult WHERE age > %s", (4,))
        assert c1.fetchone() == ("adult",)
        assert c2.fetchone() == (1003,)
        assert c3.fetchone() == ("after",)


def test_psycopg3_error_rollback_deallocate(proxy) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(proxy.dsn, prepare_threshold=0) as c:
        assert c.execute("SELECT count(*) FROM adult WHERE age > %s", (1,)).fetchone() == (1001,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT age FROM adult")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        c.execute("DEALLOCATE ALL")
        assert c.execute("SELECT count(*) FROM adult WHERE age > %s", (2,)).fetchone() == (1002,)
        assert c.execute("SELECT %s::int", (5,)).fetchone() == (5,)


@pytest.mark.parametrize(
    "sql", ["SELECT pg_sleep(30)", "SELECT count(*) FROM adult WHERE age > 999"]
)
def test_psycopg3_cancel(proxy, sql: str) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(proxy.dsn, autocommit=True) as c:
        assert_cancels(c, sql, c.cancel_safe)


# -- psycopg2 + SQLAlchemy 2 (Superset itself runs on SQLAlchemy 1.4: tests/tools) ------------


def test_sqlalchemy_inspector_identical(proxy, pg) -> None:  # type: ignore[no-untyped-def]
    import sqlalchemy as sa

    def snapshot(dsn: str) -> dict[str, object]:
        eng = sa.create_engine(dsn.replace("postgresql://", "postgresql+psycopg2://"))
        try:
            insp = sa.inspect(eng)
            return {
                "schemas": insp.get_schema_names(),
                "tables": insp.get_table_names(),
                "views": insp.get_view_names(),
                "columns": [
                    (c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns("adult")
                ],
                "pk": insp.get_pk_constraint("adult"),
                "fks": insp.get_foreign_keys("adult"),
                "indexes": insp.get_indexes("adult"),
                "comment": insp.get_table_comment("adult"),
            }
        finally:
            eng.dispose()

    via = snapshot(proxy.dsn)
    assert via == snapshot(pg.passthrough_dsn)
    assert "adult" in via["tables"]  # type: ignore[operator]


def test_sqlalchemy_local_answer_and_refusal(proxy) -> None:  # type: ignore[no-untyped-def]
    import sqlalchemy as sa

    eng = sa.create_engine(proxy.dsn.replace("postgresql://", "postgresql+psycopg2://"))
    try:
        with eng.connect() as conn:
            q = sa.text("SELECT count(*) FROM adult WHERE age > :a")
            assert conn.execute(q, {"a": 40}).scalar() == 1040
            assert conn.execute(sa.text("SELECT pg_backend_pid()")).scalar() > 0
            with pytest.raises(sa.exc.ProgrammingError) as ei:
                conn.execute(sa.text("SELECT * FROM adult LIMIT 100"))
            assert ei.value.orig.pgcode == "42501"  # type: ignore[union-attr]
    finally:
        eng.dispose()


# -- asyncpg -----------------------------------------------------------------------------------


async def test_asyncpg(proxy, pg) -> None:  # type: ignore[no-untyped-def]
    import asyncpg

    d = await asyncpg.connect(pg.passthrough_dsn)
    c = await asyncpg.connect(proxy.dsn)
    try:
        assert c.get_server_version() == d.get_server_version()
        assert await c.fetchval("SELECT 1") == 1
        # Describe+Flush type inference, binary parameters and results, Execute max_rows=1.
        assert await c.fetchval("SELECT $1::int + $2", 40, 2) == 42
        row = await c.fetchrow("SELECT 1.5::numeric AS n, '2026-11-29'::date AS d, 'x' AS t")
        assert tuple(row) == (Decimal("1.5"), dt.date(2026, 11, 29), "x")
        assert await c.fetchval("SELECT $1::int[]", [1, 2]) == [1, 2]  # type introspection
        assert await c.fetchval("SELECT count(*) FROM adult WHERE age > $1", 30) == 1030
        stmt = await c.prepare("SELECT count(*) FROM adult WHERE age > $1")
        assert [a.type.name for a in stmt.get_attributes()] == ["int8"]
        for i in range(10):
            assert await stmt.fetchval(i) == 1000 + i
        async with c.transaction():
            assert await c.fetchval("SELECT count(*) FROM adult WHERE age > $1", 5) == 1005
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with c.transaction():
                await c.fetch("SELECT * FROM adult")
        assert await c.fetchval("SELECT 2") == 2
        # Timeout: asyncpg sends a CancelRequest after SSLRequest.
        with pytest.raises(TimeoutError):
            await c.fetchval("SELECT pg_sleep(30)", timeout=0.5)
        with pytest.raises(TimeoutError):
            await c.fetchval("SELECT count(*) FROM adult WHERE age > 999", timeout=0.5)
        assert await c.fetchval("SELECT 3") == 3
        await c.execute("SELECT 1; SELECT 2")
    finally:
        await c.close()
        await d.close()


async def test_asyncpg_pool_reset(proxy) -> None:  # type: ignore[no-untyped-def]
    import asyncpg

    pool = await asyncpg.create_pool(proxy.dsn, min_size=1, max_size=2)
    try:
        for i in range(3):
            async with pool.acquire() as c:
                await c.execute("SET application_name = 'pooled'")
                assert await c.fetchval("SELECT count(*) FROM adult WHERE age > $1", i) == 1000 + i
    finally:
        await pool.close()


# -- pg8000 ------------------------------------------------------------------------------------


def test_pg8000(proxy) -> None:  # type: ignore[no-untyped-def]
    import pg8000.native

    c = pg8000.native.Connection(**proxy.kw())  # SCRAM-SHA-256
    try:
        assert c.run("SELECT count(*) FROM adult WHERE age > :a", a=30) == [[1030]]
        assert c.run("SELECT relname FROM pg_class WHERE relname = :n", n="adult") == [["adult"]]
        c.run("begin transaction")
        with pytest.raises(pg8000.native.DatabaseError) as ei:
            c.run("SELECT * FROM adult")
        assert ei.value.args[0]["C"] == "42501"
        c.run("rollback")
        assert c.run("SELECT 1") == [[1]]
    finally:
        c.close()


# -- COPY passthrough --------------------------------------------------------------------------


@pytest.fixture
def scratch_table(pg):  # type: ignore[no-untyped-def]
    import psycopg

    from proxy import provision

    with psycopg.connect(pg.admin_dsn, autocommit=True) as a:
        a.execute("CREATE SCHEMA IF NOT EXISTS wire_scratch")
        a.execute("CREATE TABLE wire_scratch.copy_in (x int, s text)")
        a.execute(f"GRANT USAGE ON SCHEMA wire_scratch TO {provision.PASSTHROUGH}")
        a.execute(f"GRANT SELECT, INSERT ON wire_scratch.copy_in TO {provision.PASSTHROUGH}")
    try:
        yield "wire_scratch.copy_in"
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as a:
            a.execute("DROP SCHEMA wire_scratch CASCADE")


def test_copy_in_and_out(proxy, scratch_table: str) -> None:  # type: ignore[no-untyped-def]
    import psycopg

    with psycopg.connect(proxy.dsn, autocommit=True) as c:
        cur = c.cursor()
        with cur.copy(f"COPY {scratch_table} FROM STDIN") as cp:
            for i in range(3):
                cp.write_row((i, f"row{i}"))
        assert cur.rowcount == 3
        with (
            pytest.raises(psycopg.errors.QueryCanceled),
            cur.copy(f"COPY {scratch_table} FROM STDIN") as cp,
        ):
            cp.write_row((9, "x"))
            raise psycopg.errors.QueryCanceled("client aborts the copy")  # -> CopyFail
        assert c.execute(f"SELECT count(*) FROM {scratch_table}").fetchone() == (3,)
        with cur.copy(f"COPY (SELECT x FROM {scratch_table} ORDER BY x) TO STDOUT") as cp:
            assert [bytes(b) for b in cp] == [b"0\n", b"1\n", b"2\n"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with cur.copy("COPY adult TO STDOUT") as cp:
                list(cp)
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_large_result_and_upstream_down(proxy, pg) -> None:  # type: ignore[no-untyped-def]
    import psycopg
    from conftest import PASSWORD, USER, TestRouter, make_config

    from proxy.wire.server import BackgroundServer
    from proxy.wire.upstream import UpstreamConfig

    with psycopg.connect(proxy.dsn, autocommit=True) as c:
        rows = c.execute("SELECT g, repeat('x', 50) FROM generate_series(1, 100000) g").fetchall()
        assert len(rows) == 100000 and rows[-1][0] == 100000
    cfg = make_config(pg)
    dead = UpstreamConfig(host="127.0.0.1", port=1, user="x", database="x", connect_timeout=2)
    cfg = type(cfg)(**{**{f: getattr(cfg, f) for f in cfg.__slots__}, "upstream": dead})
    with BackgroundServer(cfg, TestRouter({"adult"})) as srv:
        dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{pg.database}"
        with pytest.raises(psycopg.OperationalError, match="could not connect to the upstream"):
            psycopg.connect(dsn)


# -- node-postgres (optional: needs node and the `pg` package) ------------------------------

_NODE_SCRIPT = r"""
const { Client } = require('pg');
(async () => {
  const c = new Client(JSON.parse(process.argv[1]));
  await c.connect();
  const out = {};
  out.simple = (await c.query('SELECT 1 AS x')).rows;
  out.params = (await c.query('SELECT $1::int + 1 AS y, $2::text AS s', [41, 'flu'])).rows;
  out.local = (await c.query('SELECT count(*) FROM adult WHERE age > $1', [30])).rows;
  out.named = [];
  for (const n of [1, 2]) {
    out.named.push((await c.query({ name: 'q1', text: 'SELECT count(*) FROM adult WHERE age > $1',
                                    values: [n], rowMode: 'array' })).rows);
  }
  try { await c.query('SELECT * FROM adult'); } catch (e) { out.code = e.code; }
  out.after = (await c.query('SELECT 2 AS z')).rows;
  await c.end();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def test_node_postgres(proxy) -> None:  # type: ignore[no-untyped-def]
    import json

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    env = dict(os.environ)
    if os.environ.get("LAPRAS_NODE_PATH"):
        env["NODE_PATH"] = os.environ["LAPRAS_NODE_PATH"]
    probe = subprocess.run([node, "-e", "require('pg')"], env=env, capture_output=True)
    if probe.returncode != 0:
        pytest.skip("node-postgres not installed (npm install pg; set LAPRAS_NODE_PATH)")
    cfg = json.dumps({k: v for k, v in proxy.kw().items()})
    r = subprocess.run(
        [node, "-e", _NODE_SCRIPT, cfg], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["simple"] == [{"x": 1}]
    assert out["params"] == [{"y": 42, "s": "flu"}]
    assert out["local"] == [{"count": "1030"}]  # node returns int8 as a string
    assert out["named"] == [[["1001"]], [["1002"]]]
    assert out["code"] == "42501"
    assert out["after"] == [{"z": 2}]


# -- pgjdbc (optional: needs a JDK and Debian's libpostgresql-jdbc-java) ---------------------

_JAVA = r"""
import java.sql.*;
import java.util.*;

public class JdbcProbe {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.setProperty("user", a[1]);
    p.setProperty("password", a[2]);
    List<String> out = new ArrayList<>();
    try (Connection c = DriverManager.getConnection(a[0], p)) {
      DatabaseMetaData md = c.getMetaData();
      out.add("version " + md.getDatabaseProductVersion());
      try (ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"})) {
        while (rs.next()) out.add("table " + rs.getString("TABLE_NAME"));
      }
      try (ResultSet rs = md.getColumns(null, "public", "adult", "%")) {
        while (rs.next()) out.add("column " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
      }
      try (ResultSet rs = md.getPrimaryKeys(null, "public", "adult")) {
        while (rs.next()) out.add("pk " + rs.getString("COLUMN_NAME"));
      }
      if (a.length > 3) {
        try (PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM adult WHERE age > ?")) {
          for (int i = 0; i < 7; i++) {
            ps.setInt(1, i);
            try (ResultSet rs = ps.executeQuery()) { rs.next(); out.add("local " + rs.getLong(1)); }
          }
        }
        c.setTransactionIsolation(Connection.TRANSACTION_READ_UNCOMMITTED);
        c.setReadOnly(true);
        c.setAutoCommit(false);
        try (Statement st = c.createStatement()) {
          st.setFetchSize(10);
          int n = 0;
          try (ResultSet rs = st.executeQuery("SELECT generate_series(1, 25)")) { while (rs.next()) n++; }
          out.add("fetched " + n);
          try (ResultSet rs = st.executeQuery("show timezone")) { rs.next(); out.add("tz " + (rs.getString(1) != null)); }
          st.execute("SET SESSION TIMEZONE TO 'UTC'");
        }
        c.commit();
        c.setAutoCommit(true);
        try (Statement st = c.createStatement()) {
          st.executeQuery("SELECT * FROM adult");
        } catch (SQLException e) {
          out.add("sqlstate " + e.getSQLState());
        }
      }
    }
    for (String s : out) System.out.println(s);
  }
}
"""


def test_pgjdbc(proxy, pg, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from urllib.parse import urlsplit

    java = jdbc_command(tmp_path, "JdbcProbe", _JAVA)

    def run(host: str, port: int, db: str, user: str, pw: str, full: bool) -> list[str]:
        url = f"jdbc:postgresql://{host}:{port}/{db}"
        args = [*java, url, user, pw] + (["full"] if full else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.splitlines()

    d = urlsplit(pg.passthrough_dsn)
    from urllib.parse import unquote

    direct = run(
        d.hostname or "", d.port or 5432, pg.database, unquote(d.username or ""),
        unquote(d.password or ""), False,
    )  # fmt: skip
    via = run(proxy.host, proxy.port, proxy.database, proxy.user, proxy.password, True)
    assert via[: len(direct)] == direct
    assert "table adult" in direct
    rest = via[len(direct) :]
    assert rest == [f"local {1000 + i}" for i in range(7)] + [
        "fetched 25",
        "tz true",
        "sqlstate 42501",
    ]
