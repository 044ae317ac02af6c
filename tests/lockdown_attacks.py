"""The lockdown battery: statements an analyst could send to learn an exact fact of Adult.

Each attack is a list of statements run in order on one connection (later ones may use what
earlier ones set up: PREPARE / EXECUTE, DECLARE / FETCH). :func:`run` runs an attack and returns
everything the client saw (rows, notices, error texts) as text; :func:`facts` computes, as the
administrator, the exact numbers an attack must never show (row counts, tuple counters,
sizes). tests/test_lockdown.py runs the battery through the proxy, directly as an analyst's
backend role (the database's own refusal), through ``lapras serve`` with two workers and through
``lapras demo``.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

A = "relname = 'adult'"

ATTACKS: dict[str, list[str]] = {
    # -- pg_class, whole rows and their many spellings
    "whole row": [f"SELECT c FROM pg_class c WHERE {A}"],
    "row as text": [f"SELECT c::text FROM pg_class c WHERE {A}"],
    "record_out": [f"SELECT record_out(c) FROM pg_class c WHERE {A}"],
    "row_to_json": [f"SELECT row_to_json(c) FROM pg_class c WHERE {A}"],
    "to_jsonb of the table name": [f"SELECT to_jsonb(pg_class) FROM pg_class WHERE {A}"],
    "json_agg": [f"SELECT json_agg(c) FROM pg_class c WHERE {A}"],
    "array of rows": [f"SELECT array(SELECT c FROM pg_class c WHERE {A})"],
    "field of a row": [f"SELECT (c).reltuples FROM pg_class c WHERE {A}"],
    "row expansion": [f"SELECT (c).* FROM pg_class c WHERE {A}"],
    "jsonb field": [f"SELECT to_jsonb(c)->>'reltuples' FROM pg_class c WHERE {A}"],
    "subquery alias": [f"SELECT (x).reltuples FROM (SELECT c AS x FROM pg_class c WHERE {A}) s"],
    "escaped column name": [f'SELECT U&"reltuple\\0073" FROM pg_class WHERE {A}'],
    "escaped relation name": [f'SELECT c FROM U&"pg\\005fclass" c WHERE {A}'],
    "statistics columns": [f"SELECT reltuples, relpages, relallvisible FROM pg_class WHERE {A}"],
    "qualified star": [f"SELECT c.* FROM pg_catalog.pg_class c WHERE {A}"],
    "star": [f"SELECT * FROM pg_class WHERE {A}"],
    "CTE column rename": [
        "WITH t(a, b) AS (SELECT relname, reltuples FROM pg_class) SELECT b FROM t WHERE a = 'adult'"
    ],
    "lateral": [f"SELECT x.r FROM pg_class c, LATERAL (SELECT c.reltuples) x(r) WHERE c.{A}"],
    "scalar subquery": [f"SELECT (SELECT reltuples FROM pg_class WHERE {A}) AS x"],
    "string building": [
        f"SELECT string_agg(relname || ':' || reltuples, ',') FROM pg_class WHERE {A}"
    ],
    "format of a row": [f"SELECT format('%s', c) FROM pg_class c WHERE {A}"],
    "row constructor": [f"SELECT row(c.*)::text FROM pg_class c WHERE {A}"],
    "json_each": [f"SELECT * FROM json_each(row_to_json((SELECT c FROM pg_class c WHERE {A})))"],
    "record from json": [
        "SELECT (json_populate_record(NULL::pg_class,"
        f" (SELECT row_to_json(c) FROM pg_class c WHERE {A}))).reltuples"
    ],
    "oracle in WHERE": [f"SELECT 'LEAK' FROM pg_class WHERE {A} AND reltuples > 30000"],
    "oracle in ORDER BY": [
        "SELECT relname FROM pg_class ORDER BY reltuples DESC NULLS LAST LIMIT 3"
    ],
    "oracle on pages": [f"SELECT 'LEAK' FROM pg_class WHERE {A} AND relpages > 0"],
    "union": [f"SELECT reltuples::text FROM pg_class WHERE {A} UNION ALL SELECT 'x'"],
    "window": [f"SELECT max(reltuples) OVER () FROM pg_class WHERE {A}"],
    # -- statements that carry statements
    "PREPARE / EXECUTE": [
        "PREPARE lapras_pw (text) AS SELECT c::text FROM pg_class c WHERE relname = $1",
        "EXECUTE lapras_pw('ad' || 'ult')",
        "DEALLOCATE lapras_pw",
    ],
    "cursor": [
        f"DECLARE lapras_cur CURSOR WITH HOLD FOR SELECT c FROM pg_class c WHERE {A}",
        "FETCH ALL FROM lapras_cur",
        "CLOSE lapras_cur",
    ],
    "COPY": [f"COPY (SELECT c FROM pg_class c WHERE {A}) TO STDOUT"],
    "EXPLAIN of the table": ["EXPLAIN SELECT * FROM adult"],
    "EXPLAIN of an aggregate": ["EXPLAIN SELECT count(*) FROM adult"],
    "query_to_xml": [
        "SELECT query_to_xml('select reltuples from pg_class where relname = ''adult''',"
        " true, true, '')"
    ],
    "query_to_xml, built": [
        "SELECT query_to_xml('select rel' || 'tuples from pg_' || 'class where relname = ''ad'"
        " || 'ult''', true, true, '')"
    ],
    "table_to_xml": ["SELECT table_to_xml('pg_catalog.pg_class', true, false, '')"],
    # -- code that runs SQL built at run time
    "DO with dynamic SQL": [
        "DO $$ DECLARE n bigint; BEGIN EXECUTE 'select pg_st' || 'at_get_live_tuples(oid) "
        "from pg_class where relname = ''adult''' INTO n; RAISE NOTICE '%', n; END $$"
    ],
    "DO reading pg_class": [
        "DO $$ BEGIN RAISE NOTICE '%', (SELECT reltuples FROM pg_class WHERE relname = 'adult');"
        " END $$"
    ],
    "a function": [
        f"CREATE FUNCTION lapras_f() RETURNS real LANGUAGE sql AS 'SELECT reltuples FROM pg_class WHERE {A}'"
    ],
    "a temporary view": ["CREATE TEMP VIEW lapras_v AS SELECT * FROM pg_class"],
    # -- statistics views and functions
    "pg_stat_user_tables": [
        f"SELECT n_live_tup, n_tup_ins, seq_tup_read, seq_scan FROM pg_stat_user_tables WHERE {A}"
    ],
    "pg_stat_all_tables": [f"SELECT * FROM pg_stat_all_tables WHERE {A}"],
    "pg_statio_user_tables": [f"SELECT * FROM pg_statio_user_tables WHERE {A}"],
    "pg_stat_xact": [f"SELECT * FROM pg_stat_xact_user_tables WHERE {A}"],
    "oracle on live tuples": [
        f"SELECT 'LEAK' FROM pg_stat_user_tables WHERE {A} AND n_live_tup > 0"
    ],
    "live tuples by regclass": ["SELECT pg_stat_get_live_tuples('adult'::regclass)"],
    "live tuples by oid": [f"SELECT pg_stat_get_live_tuples(oid) FROM pg_class WHERE {A}"],
    "quoted function name": [f'SELECT "pg_stat_get_live_tuples"(oid) FROM pg_class WHERE {A}'],
    "qualified function": [
        f"SELECT pg_catalog.pg_stat_get_tuples_inserted(c.oid) FROM pg_class c WHERE c.{A}"
    ],
    "function in FROM": [
        f"SELECT * FROM pg_stat_get_live_tuples((SELECT oid FROM pg_class WHERE {A})) AS n"
    ],
    "pg_stat_database": ["SELECT * FROM pg_stat_database WHERE datname = current_database()"],
    "database counters": [
        "SELECT pg_stat_get_db_tuples_returned(oid), pg_stat_get_db_tuples_inserted(oid)"
        " FROM pg_database WHERE datname = current_database()"
    ],
    "cluster counters": [
        "SELECT * FROM pg_stat_io",
        "SELECT * FROM pg_stat_wal",
        "SELECT * FROM pg_stat_bgwriter",
    ],
    "pg_stats": ["SELECT * FROM pg_stats WHERE tablename = 'adult'"],
    "pg_statistic": ["SELECT * FROM pg_statistic"],
    "pg_stats_ext": ["SELECT * FROM pg_stats_ext"],
    "pg_locks": ["SELECT * FROM pg_locks"],
    "progress views": [
        "SELECT * FROM pg_stat_progress_analyze",
        "SELECT * FROM pg_stat_progress_vacuum",
    ],
    "session list": ["SELECT * FROM pg_stat_get_activity(NULL) AS s"],
    "pg_stat_statements": ["SELECT query, rows, calls FROM pg_stat_statements"],
    # -- sizes
    "size by name": ["SELECT pg_relation_size('adult')"],
    "sizes by oid": [
        "SELECT pg_relation_size(oid), pg_total_relation_size(oid), pg_table_size(oid),"
        f" pg_indexes_size(oid) FROM pg_class WHERE {A}"
    ],
    "pretty size": [
        f"SELECT pg_size_pretty(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.{A}"
    ],
    "TOAST size": [f"SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE {A}"],
    "oracle on size": [f"SELECT 'LEAK' FROM pg_class c WHERE c.{A} AND pg_table_size(c.oid) > 0"],
    "database sizes": [
        "SELECT datname, pg_database_size(datname) FROM pg_database",
        "SELECT pg_size_pretty(pg_database_size(current_database()))",
    ],
    "tablespace size": ["SELECT pg_tablespace_size('pg_default')"],
    "WAL position": ["SELECT pg_current_wal_lsn(), pg_current_wal_insert_lsn()"],
    "control data": ["SELECT * FROM pg_control_checkpoint()"],
    "files": ["SELECT * FROM pg_stat_file('base')", "SELECT pg_ls_dir('base')"],
    # -- the proxy's own state
    "the ledger": ["SELECT count(*) FROM lapras.ledger", "SELECT * FROM lapras.histograms"],
    "the proxy's schema": ["SELECT nspname FROM pg_namespace WHERE nspname = 'lapras'"],
    # -- rows, for completeness: the database refuses them too
    "rows": ["SELECT * FROM adult LIMIT 1"],
    "rows through a CTE": ["WITH t AS (SELECT * FROM adult) SELECT count(*) FROM t"],
    "a row count through UPDATE": ["UPDATE adult SET age = age"],
    "a row count through DELETE": ["DELETE FROM adult WHERE false"],
}


def facts(admin_dsn: str) -> dict[str, int]:
    """The exact facts of Adult an attack must never show, as the administrator sees them
    (after ANALYZE, so that the statistics exist and a leak would have something to show)."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute("ANALYZE public.adult")
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(
            "SELECT (SELECT count(*) FROM public.adult), reltuples::bigint,"
            " pg_relation_size(c.oid), pg_table_size(c.oid), pg_total_relation_size(c.oid),"
            " pg_relation_size(reltoastrelid), pg_database_size(current_database()),"
            # the proxy's state database (its size grows with the query log and the ledger)
            " (SELECT pg_database_size(datname) FROM pg_database"
            "  WHERE datname = current_database() || '_lapras')"
            " FROM pg_class c WHERE c.oid = 'public.adult'::regclass"
        ).fetchone()
        assert row is not None
    names = (
        "rows",
        "reltuples",
        "size",
        "table size",
        "total size",
        "TOAST size",
        "database size",
        "state database size",
    )
    return {n: int(v) for n, v in zip(names, row, strict=True) if v is not None and int(v) >= 1000}


#: The proxy's notice on a DP answer, with the standard error of its noise.
_DP_NOTICE = re.compile(r"^NOTICE LAPRAS: .*standard error [a-z_ ]*\d*\.?\d*[1-9]")


def run(
    conn: psycopg.Connection[Any], statements: list[str], *, prepare: bool, mask_dp: bool = False
) -> str:
    """Everything the client sees of ``statements``, as text (rows, notices, errors).

    ``mask_dp``: the rows of a statement the proxy answered with DP noise (its notice gives a
    standard error above 0) are left out. Only for a proxy drawing secure noise: such a count
    rounds to the true one now and then (about 5% of the time at a standard error of 7.5),
    which is not an exact fact. With a seeded sampler every row is kept."""
    seen: list[str] = []
    conn.add_notice_handler(lambda d: seen.append(f"NOTICE {d.message_primary} {d.message_detail}"))
    for sql in statements:
        try:
            if sql.startswith("COPY"):
                with conn.cursor().copy(sql) as copy:
                    seen.extend(bytes(chunk).decode() for chunk in copy)
                continue
            before = len(seen)
            cur = conn.execute(sql.encode(), prepare=prepare and not sql.startswith("DO"))
            if cur.description is not None:
                rows = cur.fetchall()
                if mask_dp and any(_DP_NOTICE.match(n) for n in seen[before:]):
                    seen.append(f"({len(rows)} rows of a DP answer)")
                else:
                    seen.extend(repr(r) for r in rows)
        except psycopg.Error as e:
            d = e.diag
            seen.append(
                f"ERROR {e.sqlstate} {d.message_primary} {d.message_detail} {d.message_hint}"
            )
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR:
                conn.rollback()
    return "\n".join(seen)


def leaks(output: str, known: dict[str, int]) -> list[str]:
    """The facts that appear in ``output`` (as whole numbers, multiples of the row count too:
    tuple counters grow by it with every scan) and the LEAK marker of the oracles."""
    found = [name for name, v in known.items() if re.search(rf"(?<!\d){v}(?!\d)", output)]
    rows = known["rows"]
    numbers = {int(n) for n in re.findall(r"(?<![\d.])\d{5,12}(?![\d])", output)}
    found += [f"{n // rows} x rows" for n in numbers if n % rows == 0 and n // rows <= 1000]
    if "LEAK" in output:
        found.append("an oracle answered")
    return found
