"""The catalogue through the product proxy on the locked-down backend: what tools see is what
PostgreSQL shows the analyst's own role, minus the statistics.

psql (``\\d``, ``\\dt``, ``\\d+``, ``\\l``, ``\\dn``, ``\\du``, ``\\di``) is byte-identical to psql
connected directly as the analyst's backend role; ``\\dt+`` and ``\\l+`` (which read sizes, refused
by the database to that role) work and show every other column as the superuser sees it, with
empty sizes. pgjdbc's DatabaseMetaData (getSQLKeywords included), the SQLAlchemy Inspector and
DBD::Pg's ``table_info`` (which reads the system column ``pg_class.tableoid``) give the same
answers as directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import psycopg
import pytest
import sqlalchemy as sa
from epoch_helpers import ANALYST, Proxy, config_text, reset_ledger
from jdbc_helpers import jdbc_command

from proxy.config import parse_config


@pytest.fixture(scope="module")
def proxy(pg: Any) -> Any:
    """The product proxy; Adult gets an index (whose reltuples is Adult's row count: a route
    of its own, through pgjdbc's getIndexInfo), analysed so that the statistics exist."""
    reset_ledger(pg)
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute("CREATE INDEX IF NOT EXISTS lapras_parity_age ON public.adult (age)")
        admin.execute("ANALYZE public.adult")
    try:
        with Proxy(parse_config(config_text(pg), "parity.toml"), seed=1) as p:
            yield p
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            admin.execute("DROP INDEX IF EXISTS public.lapras_parity_age")


def _psql_binary() -> str:
    import importlib.util

    spec = importlib.util.find_spec("pgserver")
    assert spec is not None and spec.origin is not None
    wheel = Path(spec.origin).parent / "pginstall" / "bin" / "psql"
    return str(wheel) if wheel.exists() else (shutil.which("psql") or "psql")


def _psql(dsn: str, command: str, *, unaligned: bool = False) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    layout = ["-A", "-F", "\x1f", "-R", "\x1e"] if unaligned else []
    done = subprocess.run(
        [_psql_binary(), "-X", "-v", "ON_ERROR_STOP=1", *layout, dsn, "-c", command],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, (command, done.stderr)
    return done.stdout


@pytest.mark.parametrize(
    "command", [r"\d", r"\dt", r"\d+ adult", r"\d adult", r"\l", r"\dn", r"\du", r"\di", r"\dv"]
)
def test_psql_is_identical(proxy: Any, pg: Any, command: str) -> None:
    via = _psql(proxy.dsn, command)
    with pg.analyst_login(ANALYST[0]) as direct:
        # \du shows the analyst role's door, held open for this direct login only
        theirs = _psql(direct, command).replace("valid until infinity", "valid until -infinity")
    assert via == theirs


@pytest.mark.parametrize("command", [r"\dt+", r"\l+"])
def test_psql_sizes_are_empty_and_the_rest_as_postgres_shows_it(
    proxy: Any, pg: Any, command: str
) -> None:
    def table(text: str) -> tuple[list[str], list[list[str]]]:
        records = [r.split("\x1f") for r in text.split("\x1e") if "\x1f" in r]
        return records[0], records[1:]

    head, rows = table(_psql(proxy.dsn, command, unaligned=True))
    size = head.index("Size")
    assert rows and all(r[size] in ("", "No Access") for r in rows), rows
    theirs_head, theirs = table(_psql(pg.admin_dsn, command, unaligned=True))
    assert head == theirs_head
    keep = [i for i in range(len(head)) if i != size and head[i] != "Access privileges"]
    assert [[r[i] for i in keep] for r in rows] == [[r[i] for i in keep] for r in theirs]


_JAVA = r"""
import java.sql.*;
import java.util.*;

public class CatalogueProbe {
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    p.setProperty("user", a[1]);
    p.setProperty("password", a[2]);
    try (Connection c = DriverManager.getConnection(a[0], p)) {
      DatabaseMetaData md = c.getMetaData();
      System.out.println("keywords " + md.getSQLKeywords());
      try (ResultSet rs = md.getTables(null, null, "%", new String[] {"TABLE", "VIEW", "SYSTEM TABLE"})) {
        while (rs.next()) System.out.println("table " + rs.getString(2) + "." + rs.getString(3) + " " + rs.getString(4));
      }
      try (ResultSet rs = md.getColumns(null, "public", "adult", "%")) {
        while (rs.next()) System.out.println("column " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
      }
      try (ResultSet rs = md.getIndexInfo(null, "public", "adult", false, true)) {
        while (rs.next()) System.out.println("index " + rs.getString("INDEX_NAME") + " pages " + rs.getString("PAGES"));
      }
      try (ResultSet rs = md.getSchemas()) {
        while (rs.next()) System.out.println("schema " + rs.getString(1));
      }
    }
  }
}
"""


def test_pgjdbc_metadata_is_identical(proxy: Any, pg: Any, tmp_path: Path) -> None:
    java = jdbc_command(tmp_path, "CatalogueProbe", _JAVA)

    def run(dsn: str) -> list[str]:
        d = urlsplit(dsn)
        url = f"jdbc:postgresql://{d.hostname}:{d.port}{d.path}"
        args = [
            *java,
            url,
            unquote(d.username or ""),
            unquote(d.password or ""),
        ]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    # getIndexInfo reads pg_class.relpages and reltuples: the database refuses them to the
    # analyst's role, the proxy shows them NULL; everything else as the superuser sees it.
    via, direct = run(proxy.dsn), run(pg.admin_dsn)
    assert [v for v in via if not v.startswith("index ")] == [
        d for d in direct if not d.startswith("index ")
    ]
    assert [v.split(" pages ")[0] for v in via if v.startswith("index ")] == [
        d.split(" pages ")[0] for d in direct if d.startswith("index ")
    ]
    indexes = [v for v in via if v.startswith("index ")]
    assert indexes and all(v.endswith(" pages null") for v in indexes), indexes
    assert not any(d.endswith(" pages null") for d in direct if d.startswith("index "))
    assert via[0].startswith("keywords ") and "table public.adult TABLE" in via


def test_sqlalchemy_inspector_is_identical(proxy: Any, pg: Any) -> None:
    def inspect(dsn: str) -> dict[str, Any]:
        engine = sa.create_engine(dsn.replace("postgresql://", "postgresql+psycopg://"))
        try:
            i = sa.inspect(engine)
            return {
                "schemas": i.get_schema_names(),
                "tables": i.get_table_names(),
                "views": i.get_view_names(),
                "columns": [(c["name"], str(c["type"])) for c in i.get_columns("adult")],
                "pk": i.get_pk_constraint("adult"),
                "indexes": i.get_indexes("adult"),
                "comment": i.get_table_comment("adult"),
            }
        finally:
            engine.dispose()

    via = inspect(proxy.dsn)
    with pg.analyst_login(ANALYST[0]) as direct:
        assert via == inspect(direct)


#: What DBD::Pg 3.16 sends for ``$dbh->table_info(undef, "public", "%", "TABLE")`` (every Perl
#: tool that lists tables through DBI): it joins pg_description on ``c.tableoid``, a system
#: column, which the lockdown's column-level grant on pg_class must carry.
DBD_PG_TABLE_INFO = """SELECT * FROM (
                SELECT pg_catalog.quote_ident(pg_catalog.current_database()) AS "TABLE_CAT"
                     , pg_catalog.quote_ident(n.nspname) AS "TABLE_SCHEM"
                     , pg_catalog.quote_ident(c.relname) AS "TABLE_NAME"
                       -- any temp table or temp view is LOCAL TEMPORARY for us
                     , CASE WHEN pg_catalog.quote_ident(n.nspname) ~ '^pg_(toast_)?temp_' THEN
                                 'LOCAL TEMPORARY'
                            WHEN c.relkind ~ 'r|p' THEN
                                 CASE WHEN pg_catalog.quote_ident(n.nspname) ~ '^pg_' THEN
                                           'SYSTEM TABLE'
                                      ELSE 'TABLE'
                                  END
                            WHEN c.relkind = 'v' THEN
                                 CASE WHEN pg_catalog.quote_ident(n.nspname) ~ '^pg_' THEN
                                           'SYSTEM VIEW'
                                      ELSE 'VIEW'
                                  END
                            WHEN c.relkind = 'm' THEN
                                 CASE WHEN pg_catalog.quote_ident(n.nspname) ~ '^pg_' THEN
                                           'SYSTEM MATERIALIZED VIEW'
                                      ELSE 'MATERIALIZED VIEW'
                                  END
                            WHEN c.relkind = 'f' THEN
                                 CASE WHEN pg_catalog.quote_ident(n.nspname) ~ '^pg_' THEN
                                           'SYSTEM FOREIGN TABLE'
                                      ELSE 'FOREIGN TABLE'
                                  END
                            ELSE 'UNKNOWN'
                         END AS "TABLE_TYPE"
                     , d.description AS "REMARKS"
                     , pg_catalog.quote_ident(t.spcname) AS "pg_tablespace_name"
                     , pg_catalog.quote_ident(pg_catalog.pg_tablespace_location(t.oid)) AS "pg_tablespace_location" ,n.nspname AS pg_schema, c.relname AS pg_table
                  FROM pg_catalog.pg_class AS c
                  LEFT JOIN pg_catalog.pg_description AS d
                       ON (c.oid = d.objoid AND c.tableoid = d.classoid AND d.objsubid = 0)
                  LEFT JOIN pg_catalog.pg_namespace n ON (n.oid = c.relnamespace)
                  LEFT JOIN pg_catalog.pg_tablespace t ON (t.oid = c.reltablespace)
                 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
                     AND NOT (pg_catalog.quote_ident(n.nspname) ~ '^pg_(toast_)?temp_' AND NOT pg_catalog.has_schema_privilege(n.nspname, 'USAGE'))
                     AND n.nspname = 'public'
                     AND c.relname LIKE '%'
                 ORDER BY "TABLE_TYPE", "TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME"
                ) ti WHERE "TABLE_TYPE" IN ('TABLE')"""


def test_dbd_pg_table_info_is_identical(proxy: Any, pg: Any) -> None:
    def rows(dsn: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn) as conn:
            return conn.execute(DBD_PG_TABLE_INFO).fetchall()

    via = rows(proxy.dsn)
    assert via == rows(pg.admin_dsn)
    assert "adult" in [r[2] for r in via]


def test_system_columns_of_pg_class_through_its_rewrite(proxy: Any) -> None:
    """A statement that reads a statistic of pg_class is rewritten (the statistics NULL):
    the system columns it names come through the rewrite too."""
    with psycopg.connect(proxy.dsn) as conn:
        row = conn.execute(
            "SELECT c.relname, c.tableoid::regclass::text, c.xmin IS NOT NULL, c.reltuples"
            " FROM pg_catalog.pg_class AS c WHERE c.relname = 'adult'"
        ).fetchone()
    assert row == ("adult", "pg_class", True, None)
