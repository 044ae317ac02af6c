"""Statistics of protected tables are hidden in relayed catalogue queries (docs/sql.md §5).

Run as the passthrough role: without the rewrite PostgreSQL shows Adult's exact row count in
pg_stat_user_tables.n_live_tup and its size in pg_table_size, even without SELECT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

import rewriter

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)


def _relay(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.Passthrough) and st.rewritten, st
    return conn.execute(st.sql.encode()).fetchall()


def test_statistics_hidden_for_protected_tables(pg: Any) -> None:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute("ANALYZE public.adult")
    with psycopg.connect(pg.passthrough_dsn, autocommit=True) as conn:
        raw = conn.execute("SELECT reltuples FROM pg_class WHERE relname = 'adult'").fetchone()
        assert raw is not None and raw[0] > 0  # the leak the rewrite closes
        assert _relay(
            conn, "SELECT relname, reltuples, relpages FROM pg_class WHERE relname = 'adult'"
        ) == [("adult", None, None)]
        assert (
            _relay(conn, "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'adult'") == []
        )
        rows = _relay(
            conn, "SELECT c.relname, pg_table_size(c.oid) FROM pg_class c WHERE c.relname = 'adult'"
        )
        assert rows == [("adult", None)]
        rows = _relay(conn, "SELECT relname, reltuples FROM pg_class WHERE relname = 'pg_class'")
        assert rows[0][1] is not None  # other tables keep their statistics
