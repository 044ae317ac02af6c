"""Statistics are hidden in relayed catalogue queries (docs/sql.md, "Statistics").

Two layers: the provisioned backend refuses every statistic to the passthrough role itself
(``lapras provision``), and the rewrite turns what tools ask into NULLs and empty relations so
they keep working. Both are checked here, as the passthrough role on the provisioned backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

import rewriter

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)


def _relay(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.Passthrough) and st.rewritten, st
    return conn.execute(st.sql.encode()).fetchall()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT reltuples FROM pg_class WHERE relname = 'adult'",
        "SELECT c FROM pg_class c WHERE relname = 'adult'",
        "SELECT n_live_tup FROM pg_stat_user_tables",
        "SELECT pg_table_size(c.oid) FROM pg_class c WHERE c.relname = 'adult'",
        "SELECT pg_database_size(current_database())",
    ],
)
def test_the_database_refuses_statistics_as_written(pg: Any, sql: str) -> None:
    with psycopg.connect(pg.passthrough_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql.encode())


def test_the_rewrite_shows_no_statistic_and_keeps_the_rest(pg: Any) -> None:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute("ANALYZE public.adult")  # statistics exist: hiding them is the point
    with psycopg.connect(pg.passthrough_dsn, autocommit=True) as conn:
        assert _relay(
            conn, "SELECT relname, reltuples, relpages FROM pg_class WHERE relname = 'adult'"
        ) == [("adult", None, None)]
        assert _relay(conn, "SELECT n_live_tup FROM pg_stat_user_tables") == []
        rows = _relay(
            conn, "SELECT c.relname, pg_table_size(c.oid) FROM pg_class c WHERE c.relname = 'adult'"
        )
        assert rows == [("adult", None)]
        [(whole,)] = _relay(conn, "SELECT row_to_json(c) FROM pg_class c WHERE relname = 'adult'")
        assert whole["relname"] == "adult" and whole["relkind"] == "r"
        assert whole["reltuples"] is None and whole["relpages"] is None
        # the same columns in the same order as pg_class itself
        [st] = rewriter.classify("SELECT * FROM pg_class LIMIT 0", ADULT)
        ours = [d.name for d in conn.execute(st.sql.encode()).description or ()]
        theirs = conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'pg_class'::regclass"
            " AND attnum > 0 ORDER BY attnum"
        ).fetchall()
        assert ours == [t[0] for t in theirs]


METABASE_PRIVILEGES = """
with table_privileges as (
 select
   NULL as role,
   t.schemaname as schema,
   t.objectname as table,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'update') as update,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'select') as select,
   pg_catalog.has_any_column_privilege(current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'insert') as insert,
   pg_catalog.has_table_privilege(     current_user, '"' || replace(t.schemaname, '"', '""') || '"' || '.' || '"' || replace(t.objectname, '"', '""') || '"',  'delete') as delete
 from (
   select schemaname, tablename as objectname from pg_catalog.pg_tables
   union
   select schemaname, viewname as objectname from pg_catalog.pg_views
   union
   select schemaname, matviewname as objectname from pg_catalog.pg_matviews
 ) t
 where t.schemaname !~ '^pg_'
   and t.schemaname <> 'information_schema'
   and pg_catalog.has_schema_privilege(current_user, t.schemaname, 'usage')
)
select t.*
from table_privileges t
"""


def test_metabase_sees_select_privilege_on_protected_tables(pg) -> None:  # type: ignore[no-untyped-def]
    """Metabase syncs only tables whose 'select' privilege is true: through the proxy the
    analyst may select aggregates, so the rewritten query says true for protected tables,
    and leaves every other privilege to PostgreSQL."""
    import psycopg

    from rewriter import Passthrough, classify

    schema = ADULT
    with psycopg.connect(pg.passthrough_dsn) as conn:
        raw = {r[2]: r for r in conn.execute(METABASE_PRIVILEGES).fetchall()}
        [st] = classify(METABASE_PRIVILEGES, schema)
        assert isinstance(st, Passthrough) and st.rewritten
        rewritten = {r[2]: r for r in conn.execute(st.sql).fetchall()}
    assert raw["adult"][4] is False  # PostgreSQL alone hides the table from Metabase
    assert rewritten["adult"][4] is True  # select
    assert (
        rewritten["adult"][3] is False and rewritten["adult"][6] is False
    )  # update, delete unchanged
