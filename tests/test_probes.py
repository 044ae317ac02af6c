"""Probes tools send, through the wire (rewriter/probes.py): Django's and peewee's ``.exists()``,
SQLAlchemy's ``exists()``, Superset's row count of a limited subquery and psqlODBC's zero-row
probe inside a cursor (``UseDeclareFetch=1``), answered noise off exactly as PostgreSQL does;
and, at the rewriter, the existence test's threshold on a noisy count."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, config_text, reset_ledger, start_epoch

import rewriter
from proxy.config import parse_config

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[1] / "sql_fixtures" / "adult" / "lapras.toml"
)


@pytest.fixture(scope="module")
def probe_proxy(pg: Any) -> Iterator[Proxy]:
    reset_ledger(pg)
    config = parse_config(config_text(pg, stream_length=200, delta=1e-5), "probes.toml")
    start_epoch(config, [], epsilon=1e4)
    with Proxy(config, sampler=ZeroSampler) as proxy:
        yield proxy
    reset_ledger(pg)


PROBES = [
    'SELECT 1 AS "a" FROM "adult" WHERE "adult"."age" > 80 LIMIT 1',  # Django, a row
    'SELECT (1) AS "a" FROM "adult" WHERE "adult"."age" > 89 AND "adult"."race" = \'Other\' LIMIT 1',
    'SELECT 1 FROM "adult" AS "t1" WHERE ("t1"."sex" = \'Female\') LIMIT 1',  # peewee
    "SELECT EXISTS (SELECT * FROM adult WHERE adult.native_country = 'Holand-Netherlands') AS anon_1",
    "SELECT EXISTS (SELECT 1 FROM adult WHERE age > 90)",
    "SELECT NOT EXISTS (SELECT 1 FROM adult WHERE age = 90) AS none_at_90",
    "SELECT COUNT(*) AS rowcount FROM (SELECT age AS age, sex AS sex FROM public.adult LIMIT 10000) "
    "AS rowcount_qry",  # Superset, raw records
    "SELECT COUNT(*) AS rowcount FROM (SELECT age AS age FROM public.adult WHERE education = "
    "'Doctorate' LIMIT 1000) AS rowcount_qry",
    "SELECT 1 FROM adult WHERE age > 30 FETCH FIRST 1 ROWS ONLY",
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM adult WHERE age > 80) THEN 1 ELSE 0 END",
    "SELECT 1 AS found WHERE EXISTS (SELECT 1 FROM adult WHERE age > 80)",
    "SELECT 1 AS found WHERE EXISTS (SELECT 1 FROM adult WHERE age > 90)",
]


def _run(dsn: str, sql: str) -> tuple[list[tuple[str, int]], list[tuple[Any, ...]]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql)
        assert cur.description is not None
        return [(d.name, d.type_code) for d in cur.description], cur.fetchall()


@pytest.mark.parametrize("sql", PROBES)
def test_probes_are_answered_as_postgresql_does(probe_proxy: Proxy, pg: Any, sql: str) -> None:
    assert _run(probe_proxy.dsn, sql) == _run(pg.admin_dsn, sql)


def test_psqlodbc_zero_row_probe_in_a_cursor(probe_proxy: Proxy, pg: Any) -> None:
    """psqlODBC with UseDeclareFetch=1 (Excel, MS Query): the probe inside a cursor that
    outlives its transaction, fetched: the table's columns, no row, as from PostgreSQL."""
    name = '"SQL_CUR0x55d0c8"'

    def fetched(dsn: str) -> tuple[list[tuple[str, int]], list[tuple[Any, ...]]]:
        with psycopg.connect(dsn) as conn:
            cur = conn.cursor()
            cur.execute(
                f'declare {name} cursor with hold for SELECT * FROM "public"."adult" WHERE 1=0'
            )
            conn.commit()
            cur.execute(f"fetch 100 in {name}")
            assert cur.description is not None
            out = [(d.name, d.type_code) for d in cur.description], cur.fetchall()
            cur.execute(f"close {name}")
            conn.commit()
            return out

    ours = fetched(probe_proxy.dsn)
    assert ours == fetched(pg.admin_dsn)
    assert ours[1] == [] and len(ours[0]) == 15


def _plan(sql: str) -> rewriter.Plan:
    [st] = rewriter.classify(sql, ADULT)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    return st.plan


@pytest.mark.parametrize(
    ("noisy", "se", "exists"),
    [
        (0.4, 0.0, False),
        (1.0, 0.0, True),
        (0.49, 30.0, False),
        (0.5, 30.0, True),
        (-5.0, 2.0, False),
    ],
)
def test_existence_is_a_noisy_count_over_its_threshold(
    noisy: float, se: float, exists: bool
) -> None:
    """True when the noisy count rounds to at least 1 (what count(*) of the same rows shows):
    with exact answers, whether a row exists."""
    plan = _plan("SELECT EXISTS (SELECT 1 FROM adult WHERE age > 85) AS e")
    assert rewriter.postprocess(plan, [noisy], [se]) == [(exists,)]
    limited = _plan("SELECT 1 AS a FROM adult WHERE age > 85 LIMIT 1")
    assert rewriter.postprocess(limited, [noisy], [se]) == ([(1,)] if exists else [])


def test_a_limited_count_never_exceeds_its_limit() -> None:
    plan = _plan("SELECT count(*) AS n FROM (SELECT age FROM adult WHERE sex = 'Male' LIMIT 100) q")
    assert rewriter.postprocess(plan, [250.4], [30.0]) == [(100,)]
    assert rewriter.postprocess(plan, [42.4], [30.0]) == [(42,)]
    assert rewriter.postprocess(plan, [-7.0], [30.0]) == [(0,)]
