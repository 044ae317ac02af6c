"""Joins with public relations through the wire (rewriter/lookups.py, proxy/public_relations.py).

The whole proxy, noise off (every draw zero), answers a ``VALUES`` lookup and joins with a
table declared public (``[public_tables.country_region]``, Adult's countries and their regions),
over the simple and the extended protocol, exactly as PostgreSQL does. The public table's rows
are read once in the epoch, as the passthrough role, and stored with the epoch: a change to the
table during the epoch changes no answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, config_text, reset_ledger, start_epoch

from proxy import provision
from proxy.config import parse_config
from sql_fixtures.corpus import REGIONS_DECLARATION, REGIONS_TABLE, load_regions


@pytest.fixture(scope="module")
def lookup_proxy(pg: Any) -> Iterator[Proxy]:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        load_regions(conn)
        conn.execute(f"GRANT SELECT ON {REGIONS_TABLE} TO {provision.PASSTHROUGH}")
    reset_ledger(pg)
    import sql_fixtures.adult as adult

    declaration = adult.DECLARATION.read_text() + REGIONS_DECLARATION
    config = parse_config(
        config_text(pg, declaration=declaration, stream_length=200, delta=1e-5), "lookups.toml"
    )
    start_epoch(config, [], epsilon=1e4)
    with Proxy(config, sampler=ZeroSampler) as proxy:
        yield proxy
    reset_ledger(pg)


def _rows(dsn: str, sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def _same(ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]]) -> bool:
    def norm(r: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(round(float(v), 9) if isinstance(v, Decimal | float) else v for v in r)

    return sorted(map(norm, ours), key=repr) == sorted(map(norm, theirs), key=repr)


STATEMENTS = [
    # a VALUES lookup
    "SELECT r.region, count(*) AS n FROM adult a JOIN (VALUES ('United-States', 'North America'), "
    "('Mexico', 'Latin America'), ('Germany', 'Europe')) AS r(country, region) "
    "ON a.native_country = r.country GROUP BY r.region ORDER BY n DESC",
    # Metabase: LEFT JOIN of the public dimension table, quoted names
    'SELECT "Country Region"."region" AS "Country Region__region", COUNT(*) AS "count" FROM '
    '"public"."adult" LEFT JOIN "public"."country_region" AS "Country Region" ON '
    '"public"."adult"."native_country" = "Country Region"."country" GROUP BY '
    '"Country Region"."region" ORDER BY "Country Region"."region" ASC',
    # an inner join, grouped by a protected column too
    "SELECT cr.region, a.sex, count(*), avg(a.age) FROM adult a JOIN country_region cr "
    "ON cr.country = a.native_country GROUP BY cr.region, a.sex ORDER BY 1, 2",
    # Tableau: a filter through the dimension table
    'SELECT "adult"."income" AS "income", SUM(1) AS "sum:Number of Records:ok" FROM '
    '"public"."adult" "adult" INNER JOIN "public"."country_region" "country_region" ON '
    '("adult"."native_country" = "country_region"."country") WHERE '
    '("country_region"."region" = \'Europe\') GROUP BY 1',
    # Superset: a virtual dataset joined to the dimension table
    'SELECT region AS region, AVG(age) AS "AVG(age)" FROM (SELECT a.age, cr.region FROM '
    "public.adult a JOIN public.country_region cr ON a.native_country = cr.country) AS "
    'virtual_table GROUP BY region ORDER BY "AVG(age)" DESC LIMIT 10000',
    # EXISTS against the public table
    "SELECT count(*) FROM adult a WHERE EXISTS (SELECT 1 FROM country_region cr WHERE "
    "cr.country = a.native_country AND cr.region = 'Asia')",
    # a CTE selecting the public table's rows (its WHERE filters them), renamed columns
    "WITH eu AS (SELECT country AS c, region FROM public.country_region WHERE region = 'Europe' "
    "OR country = 'Canada') SELECT eu.region, a.native_country, count(*) FROM adult a "
    "JOIN eu ON eu.c = a.native_country GROUP BY 1, 2 ORDER BY 3 DESC, 2",
    # the same as a LEFT JOIN of a derived table, a column list renaming it
    "SELECT coalesce(x.r, 'none') AS r, count(*) FROM adult a LEFT JOIN (SELECT cr.country, "
    "cr.region FROM country_region cr WHERE cr.region <> 'Asia') AS x(k, r) ON x.k = "
    "a.native_country GROUP BY 1 ORDER BY 1",
    # IN and NOT IN of a CTE of the public table's rows
    "WITH asia AS (SELECT * FROM country_region WHERE region = 'Asia') SELECT sex, count(*) "
    "FROM adult WHERE native_country IN (SELECT country FROM asia) GROUP BY sex ORDER BY sex",
    "WITH asia AS (SELECT * FROM country_region WHERE region = 'Asia') SELECT count(*) "
    "FROM adult WHERE native_country NOT IN (SELECT country FROM asia)",
    # IN and NOT IN of a bare VALUES list
    "SELECT education, count(*) FROM adult WHERE education IN (VALUES ('Bachelors'), "
    "('Masters'), ('Masters')) AND age > 30 GROUP BY education ORDER BY education",
    "SELECT count(*) FROM adult WHERE race NOT IN (VALUES ('White'), ('Black'))",
    # a derived table's own CTEs: the public table's rows, a CTE of VALUES (dbt's wrappers)
    "SELECT count(*) FROM (WITH eu AS (SELECT country FROM country_region WHERE region = "
    "'Europe') SELECT a.age FROM adult a JOIN eu ON eu.country = a.native_country) t",
    "select count(*) as failures, count(*) != 0 as should_warn from (with lk(c) as (values "
    "('Mexico'), ('Cuba')) select native_country from adult a where native_country not in "
    "(select c from lk)) dbt_internal_test",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_lookups_are_answered_as_postgresql_does(lookup_proxy: Proxy, pg: Any, sql: str) -> None:
    assert _same(_rows(lookup_proxy.dsn, sql), _rows(pg.admin_dsn, sql)), sql


def test_a_parameter_over_the_extended_protocol(lookup_proxy: Proxy, pg: Any) -> None:
    sql = (
        "SELECT a.sex, count(*) FROM adult a JOIN country_region cr "
        "ON cr.country = a.native_country WHERE cr.region = %s GROUP BY 1"
    )
    for region in ("Europe", "Asia"):
        ours = _rows(lookup_proxy.dsn, sql, (region,))
        assert _same(ours, _rows(pg.admin_dsn, sql, (region,))), region


def test_the_public_table_is_read_once_per_epoch(lookup_proxy: Proxy, pg: Any) -> None:
    """The rows are stored with the epoch: the table changed meanwhile changes no answer."""
    sql = (
        "SELECT cr.region, count(*) FROM adult a JOIN country_region cr "
        "ON cr.country = a.native_country GROUP BY 1"
    )
    before = _rows(lookup_proxy.dsn, sql)
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {REGIONS_TABLE} SET region = 'Elsewhere'")
    try:
        again = _rows(lookup_proxy.dsn, sql + " ORDER BY 1")
        assert _same(again, before)
        with psycopg.connect(pg.state_admin_dsn, autocommit=True) as conn:
            stored = conn.execute(
                "SELECT name, json_array_length(rows) FROM lapras.public_rows"
            ).fetchall()
        assert stored == [("public.country_region", 40)]
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
            load_regions(conn)
