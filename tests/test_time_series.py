"""Time series over the check-ins through the wire: Superset's and Grafana's charts by day,
week, month, day of week and hour, as they send them (issue 40), answered by the proxy.

The check-ins are declared as in sql_fixtures/gowalla/lapras.toml (one cell per day of the
published span), once with a bound of 2,000 rows per user (the busiest has 1,624: the bounded
data is the table itself) and no noise, so every answer must be PostgreSQL's: the same
columns and type OIDs (``timestamp with time zone`` for ``date_trunc`` of a date, ``numeric``
for Grafana's epoch arithmetic), the same rows, in a session in UTC and in one in New York
(``SET TimeZone``: the proxy answers in the session's zone, which PostgreSQL reports). Then
once as declared (50 rows per user) with noise: each chart is answered, one group per public
value.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, config_text, reset_ledger, start_epoch
from psycopg.types.string import TextLoader
from unit_helpers import protect

import sql_fixtures.gowalla as gowalla
from proxy.config import parse_config

FILTER = "checkin_date BETWEEN '2010-03-01T00:00:00Z' AND '2010-05-31T23:59:59Z'"
SUPERSET = (
    "SELECT DATE_TRUNC('{grain}', checkin_date) AS __timestamp, COUNT(*) AS count "
    "FROM public.checkins WHERE checkin_date >= TO_DATE('2010-03-01', 'YYYY-MM-DD') "
    "AND checkin_date < TO_DATE('2010-06-01', 'YYYY-MM-DD') "
    "GROUP BY DATE_TRUNC('{grain}', checkin_date) LIMIT 50000"
)
CHARTS = {
    # Superset's time-series charts (time grains P1D, P1W, P1M; PT1H over the date and hour)
    "superset day": SUPERSET.format(grain="day"),
    "superset week": SUPERSET.format(grain="week"),
    "superset month": SUPERSET.format(grain="month"),
    "superset hour": (
        "SELECT DATE_TRUNC('hour', checkin_date + hour * INTERVAL '1 hour') AS __timestamp, "
        "COUNT(*) AS count FROM public.checkins WHERE checkin_date >= TO_DATE('2010-05-01', "
        "'YYYY-MM-DD') AND checkin_date < TO_DATE('2010-05-08', 'YYYY-MM-DD') "
        "GROUP BY DATE_TRUNC('hour', checkin_date + hour * INTERVAL '1 hour') LIMIT 50000"
    ),
    "superset day of week": (
        "SELECT EXTRACT(DOW FROM checkin_date) AS dow, COUNT(*) AS count FROM public.checkins "
        "GROUP BY EXTRACT(DOW FROM checkin_date) ORDER BY count DESC LIMIT 10000"
    ),
    # Grafana's $__timeGroupAlias(col, 1d / 1w / 1h) and $__timeFilter, and its builder's
    # date_trunc for months and day names for a bar chart of weekdays
    "grafana day": (
        'SELECT floor(extract(epoch from checkin_date)/86400)*86400 AS "time", count(*) AS '
        f'"checkins" FROM checkins WHERE {FILTER} GROUP BY 1 ORDER BY 1'
    ),
    "grafana week": (
        'SELECT floor(extract(epoch from checkin_date)/604800)*604800 AS "time", count(*) AS '
        f'"checkins" FROM checkins WHERE {FILTER} GROUP BY 1 ORDER BY 1'
    ),
    "grafana month": (
        'SELECT date_trunc(\'month\', "checkin_date") AS "time", count(*) AS "checkins" '
        f"FROM checkins WHERE {FILTER} GROUP BY 1 ORDER BY 1"
    ),
    "grafana hour": (
        "SELECT floor(extract(epoch from checkin_date + hour * interval '1 hour')/3600)*3600 "
        'AS "time", count(*) AS "checkins" FROM checkins WHERE checkin_date BETWEEN '
        "'2010-05-01T00:00:00Z' AND '2010-05-07T23:59:59Z' GROUP BY 1 ORDER BY 1"
    ),
    "grafana day of week": (
        "SELECT to_char(checkin_date, 'Dy') AS \"metric\", extract(isodow from checkin_date) "
        'AS "isodow", count(*) AS "value" FROM checkins GROUP BY 1, 2 ORDER BY 2'
    ),
    # Tableau's YEAR() as a bigint, grouped (the garbage answer, 0 for 2009)
    "tableau year": (
        'SELECT CAST(EXTRACT(YEAR FROM "checkins"."checkin_date") AS BIGINT) AS '
        '"yr:checkin_date:ok", COUNT(1) AS "cnt:checkins:ok" FROM "public"."checkins" '
        '"checkins" GROUP BY 1'
    ),
    "grafana hour of day": (
        'SELECT hour AS "metric", count(*) AS "value" FROM checkins '
        f"WHERE {FILTER} GROUP BY 1 ORDER BY 1"
    ),
}
ZONES = ["UTC", "America/New_York"]


def _declaration(bound: int) -> str:
    text = gowalla.DECLARATION.read_text()
    text = re.sub(r"(?m)^max_rows_per_unit = .*$", f"max_rows_per_unit = {bound}", text)
    return re.sub(r"(?m)^lifetime_\w+ = .*$", "", text)


@pytest.fixture(scope="module")
def exact_proxy(pg: Any) -> Iterator[Proxy]:
    protect(pg)
    reset_ledger(pg)
    text = config_text(pg, declaration=_declaration(2000), stream_length=200, delta=1e-5)
    config = parse_config(text, "time-series.toml")
    start_epoch(config, [], table="checkins", epsilon=1e4)
    with Proxy(config, sampler=ZeroSampler) as proxy:
        yield proxy
    reset_ledger(pg)


def _run(dsn: str, sql: str, zone: str) -> tuple[list[tuple[str, int]], list[tuple[Any, ...]]]:
    """Columns and rows, timestamps as the text the server sent (their offset included)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in ("timestamp", "timestamptz"):
            conn.adapters.register_loader(name, TextLoader)
        conn.execute(f"SET TimeZone = '{zone}'")
        cur = conn.execute(sql)
        assert cur.description is not None
        return [(d.name, d.type_code) for d in cur.description], cur.fetchall()


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("chart", list(CHARTS))
def test_time_series_are_answered_as_postgresql_answers(
    chart: str, zone: str, exact_proxy: Proxy, pg: Any
) -> None:
    sql = CHARTS[chart]
    columns, theirs = _run(pg.admin_dsn, sql, zone)
    ours_columns, ours = _run(exact_proxy.dsn, sql, zone)
    assert ours_columns == columns
    # every public group is returned; PostgreSQL omits the days nobody checked in
    ours = [r for r in ours if r[-1] != 0]
    assert sorted(ours, key=repr) == sorted(theirs, key=repr)
    if "ORDER BY 1" in sql:
        assert ours == sorted(ours, key=lambda r: r[0])


def test_timestamps_in_binary_are_postgresql_s(exact_proxy: Proxy, pg: Any) -> None:
    """A timestamptz in binary (asyncpg, JDBC): microseconds since 2000-01-01 UTC."""
    sql = CHARTS["superset month"]
    with psycopg.connect(exact_proxy.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        ours = conn.cursor(binary=True).execute(sql).fetchall()
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'Asia/Tokyo'")
        theirs = conn.cursor(binary=True).execute(sql).fetchall()
    assert sorted(ours) == sorted(theirs)
    assert ours[0][0].utcoffset() == dt.timedelta(hours=9)


def test_time_series_with_noise_as_declared(pg: Any) -> None:
    """The declaration as shipped (50 check-ins per user), with noise: each chart is
    answered with one row per public group its filter reaches."""
    protect(pg)
    reset_ledger(pg)
    text = config_text(pg, declaration=_declaration(50), stream_length=200, delta=1e-5)
    config = parse_config(text, "time-series.toml")
    start_epoch(config, [], table="checkins", epsilon=1.0)
    groups = {"superset day": 92, "superset week": 14, "superset month": 3, "grafana hour": 168}
    try:
        with Proxy(config, seed=7) as proxy, psycopg.connect(proxy.dsn, autocommit=True) as conn:
            notices: list[str] = []
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            for chart, n in groups.items():
                rows = conn.execute(CHARTS[chart]).fetchall()
                assert len(rows) == n, chart
                assert all(isinstance(r[-1], int) and r[-1] >= 0 for r in rows)
                assert "standard error" in notices[-1]
    finally:
        reset_ledger(pg)
