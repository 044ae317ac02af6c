"""What derives from a protected table, as the backend's catalogue shows it (proxy.lineage), on
the embedded PostgreSQL: provisioning gives the analysts' passthrough role no SELECT on it,
``lapras provision --check`` names it when an analyst can read it, and an epoch on a
protected relation that reads (or reaches its unit through) a protected table of another
budget group is refused.

Every object is created in a transaction that is rolled back, except where an epoch's start
(its own connections) must see it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from epoch_helpers import reset_ledger
from unit_helpers import GOWALLA, protect, start
from unit_helpers import config as make_config

from proxy import lineage, provision
from proxy.epochs import BaseTableBudgetError

PROTECTED = ("public.adult", "public.checkins")

#: Each way a relation reads, holds or receives rows of a protected table, and the words the
#: checker names it with.
DERIVED = {
    "lin_plain": (
        "CREATE VIEW public.lin_plain AS SELECT age FROM adult",
        "reads a protected table",
    ),
    "lin_through_plpgsql": (
        "CREATE FUNCTION public.lin_f() RETURNS SETOF integer LANGUAGE plpgsql AS"
        " $$ BEGIN RETURN QUERY SELECT hour FROM public.checkins; END $$;"
        " CREATE VIEW public.lin_through_plpgsql AS SELECT * FROM public.lin_f() AS h",
        "through function public.lin_f()",
    ),
    "lin_through_atomic": (
        "CREATE FUNCTION public.lin_g() RETURNS bigint LANGUAGE sql"
        " BEGIN ATOMIC SELECT count(*) FROM public.adult; END;"
        " CREATE VIEW public.lin_through_atomic AS SELECT public.lin_g() AS n",
        "through function public.lin_g()",
    ),
    "lin_through_two": (  # a function that calls one that reads the table
        "CREATE FUNCTION public.lin_f2() RETURNS SETOF integer LANGUAGE sql AS"
        " 'SELECT age FROM adult';"
        " CREATE FUNCTION public.lin_h() RETURNS SETOF integer LANGUAGE sql AS"
        " 'SELECT * FROM public.lin_f2()';"
        " CREATE MATERIALIZED VIEW public.lin_through_two AS SELECT * FROM public.lin_h() h",
        "through function public.lin_h()",
    ),
    "lin_copy": (
        "CREATE TABLE public.lin_copy AS SELECT * FROM public.checkins WHERE false",
        "may be a copy of protected table public.checkins",
    ),
    "lin_child": (
        "CREATE TABLE public.lin_child () INHERITS (public.checkins)",
        "partition or child table of public.checkins",
    ),
    "lin_sink": (
        "CREATE TABLE public.lin_sink (n integer);"
        " CREATE FUNCTION public.lin_t() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN INSERT INTO public.lin_sink VALUES (NEW.age); RETURN NEW; END $$;"
        " CREATE TRIGGER lin_t AFTER INSERT ON public.adult FOR EACH ROW"
        " EXECUTE FUNCTION public.lin_t()",
        "may receive rows of public.adult",
    ),
    "lin_over_copy": (
        "CREATE TABLE public.lin_copy2 AS SELECT * FROM public.adult WHERE false;"
        " CREATE VIEW public.lin_over_copy AS SELECT age FROM public.lin_copy2",
        "reads a protected table",
    ),
}
#: Relations that derive from nothing protected: untouched.
INNOCENT = (
    "CREATE TABLE public.lin_lookup (code integer, label text);"
    " CREATE VIEW public.lin_labels AS SELECT label FROM public.lin_lookup;"
    " CREATE FUNCTION public.lin_k() RETURNS bigint LANGUAGE sql AS"
    " 'SELECT count(*) FROM public.lin_lookup'"
)


@pytest.fixture
def created(pg: Any) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg.admin_dsn) as conn:
        for sql, _ in DERIVED.values():
            conn.execute(sql)
        conn.execute(INNOCENT)
        yield conn
        conn.rollback()
    protect(pg)


def test_provisioning_gives_no_select_on_what_derives_from_a_protected_table(
    pg: Any, created: Any
) -> None:
    conn = created
    known = lineage.load(conn)
    protected = [r.oid for t in PROTECTED if (r := known.find(t)) is not None]
    derived = {known.relations[o].name: why for o, why in known.derived(protected).items()}
    for name, (_, why) in DERIVED.items():
        assert why in derived.get(name, ""), (name, derived.get(name))
    assert "lin_lookup" not in derived and "lin_labels" not in derived

    provision.grant_privileges(conn, "lapras_test", PROTECTED)
    can = {
        name: conn.execute(
            "SELECT has_table_privilege('lapras_passthrough', %s, 'SELECT')", (f"public.{name}",)
        ).fetchone()[0]
        for name in (*DERIVED, "lin_lookup", "lin_labels")
    }
    assert [n for n in DERIVED if can[n]] == []
    assert can["lin_lookup"] and can["lin_labels"]


def test_the_checker_names_what_an_analyst_can_read_of_it(pg: Any, created: Any) -> None:
    conn = created
    role = provision.analyst_role("analyst")
    for name in DERIVED:
        conn.execute(f"GRANT SELECT ON public.{name} TO {role}")
    conn.execute(f"GRANT SELECT ON public.lin_lookup, public.lin_labels TO {role}")
    conn.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}")
    routes = [
        f.route
        for f in provision.check(
            conn,
            protected=PROTECTED,
            roles=[role],
            data_database="lapras_test",
            state_database="lapras_test_lapras",
        )
    ]
    for name, (_, why) in DERIVED.items():
        assert any(r.startswith(f"SELECT on public.{name}, which") and why in r for r in routes), (
            name,
            routes,
        )
    assert not any("lin_lookup" in r or "lin_labels" in r for r in routes)


# -- epochs: the budget group of what a protected relation reads --------------------------------

MAPPED = GOWALLA.replace(
    'privacy_unit = "user_id"',
    'privacy_unit = { column = "user_id", table = "public.lin_accounts", key = "id",'
    ' unit = "person" }',
)
ACCOUNTS = """
[tables.lin_accounts]
schema = "public"
privacy_unit = "person"
max_rows_per_unit = 4
{group}
[tables.lin_accounts.columns]
id = "integer"
person = "integer"
[tables.lin_accounts.attributes.id]
kind = "integer"
min = 0
max = 999
"""


def _drop(pg: Any) -> None:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        for name in ("lin_hours", "lin_accounts"):
            kind = conn.execute(
                "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (f"public.{name}",)
            ).fetchone()
            if kind is not None:
                what = "VIEW" if kind[0] == "v" else "TABLE"
                conn.execute(f"DROP {what} public.{name} CASCADE")
        conn.execute("DROP FUNCTION IF EXISTS public.lin_hours_of()")


@pytest.fixture
def objects(pg: Any) -> Iterator[Any]:
    def run(sql: str) -> None:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
            conn.execute(sql)

    _drop(pg)
    yield run
    _drop(pg)
    protect(pg)


def test_a_view_through_a_function_must_spend_its_base_tables_budget(pg: Any, objects: Any) -> None:
    objects(
        "CREATE FUNCTION public.lin_hours_of() RETURNS TABLE (hour integer) LANGUAGE plpgsql AS"
        " $$ BEGIN RETURN QUERY SELECT c.hour FROM public.checkins c; END $$;"
        " CREATE VIEW public.lin_hours AS SELECT hour FROM public.lin_hours_of();"
        " GRANT SELECT ON public.lin_hours TO lapras_aggregator"
    )
    view = """
[tables.lin_hours]
schema = "public"
privacy_unit = "hour"
max_rows_per_unit = 1
{group}
[tables.lin_hours.columns]
hour = "integer"
[tables.lin_hours.attributes.hour]
kind = "integer"
min = 0
max = 23
"""
    reset_ledger(pg)
    with pytest.raises(BaseTableBudgetError) as info:
        asyncio.run(start(make_config(pg, GOWALLA + view.format(group="")), "lin_hours", 0.5))
    assert info.value.sqlstate == "55000"
    assert "reads protected table checkins" in info.value.message
    admitted = view.format(group='budget_group = "checkins"')
    asyncio.run(start(make_config(pg, GOWALLA + admitted), "lin_hours", 0.5))


@pytest.mark.parametrize("shape", ["protected table", "view"])
def test_the_mapping_table_is_read_under_the_budget_group_check(
    pg: Any, objects: Any, shape: str
) -> None:
    if shape == "protected table":
        objects(
            "CREATE TABLE public.lin_accounts AS SELECT i AS id, i / 4 AS person"
            " FROM generate_series(0, 999) i; GRANT SELECT ON public.lin_accounts"
            " TO lapras_aggregator"
        )
        other = ACCOUNTS.format(group="")
        same = ACCOUNTS.format(group='budget_group = "mapped"')
        words = "reaches its privacy unit through protected table lin_accounts"
    else:  # a mapping view over a protected table of another group
        objects(
            "CREATE VIEW public.lin_accounts AS SELECT DISTINCT user_id AS id, user_id / 4 AS"
            " person FROM public.checkins; GRANT SELECT ON public.lin_accounts"
            " TO lapras_aggregator"
        )
        other = ""
        same = None
        words = "through public.lin_accounts, which reads protected table checkins"
    decl = MAPPED.replace("[tables.checkins", "[tables.lin_mapped").replace(
        'schema = "public"', 'schema = "public"\nbudget_group = "mapped"', 1
    )
    reset_ledger(pg)
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lin_mapped")
        conn.execute("CREATE TABLE public.lin_mapped AS SELECT * FROM public.checkins")
        conn.execute("GRANT SELECT ON public.lin_mapped TO lapras_aggregator")
    try:
        with pytest.raises(BaseTableBudgetError) as info:
            asyncio.run(start(make_config(pg, GOWALLA + decl + other), "lin_mapped", 0.5))
        assert words in info.value.message, info.value.message
        if same is not None:  # the mapping table in the table's own group: admitted
            asyncio.run(start(make_config(pg, GOWALLA + decl + same), "lin_mapped", 0.5))
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS public.lin_mapped")


def test_a_units_mapping_table_is_provisioned_as_protected(pg: Any) -> None:
    config = make_config(pg, MAPPED)
    assert config.protected_tables == ("public.checkins", "public.lin_accounts")
    with psycopg.connect(pg.admin_dsn) as conn:
        conn.execute("CREATE TABLE public.lin_accounts (id integer, person integer)")
        conn.execute("GRANT SELECT ON public.lin_accounts TO PUBLIC")
        provision.grant_privileges(conn, "lapras_test", config.protected_tables)
        can = conn.execute(
            "SELECT has_table_privilege(r, 'public.lin_accounts', 'SELECT')"
            " FROM unnest(ARRAY['lapras_passthrough', 'lapras_aggregator']) r"
        ).fetchall()
        conn.rollback()
    assert [c for (c,) in can] == [False, True]
    protect(pg)
