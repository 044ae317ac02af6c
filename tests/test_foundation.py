"""The embedded backend: Adult is loaded and the two roles have the privileges they should."""

from __future__ import annotations

import psycopg
import pytest

import sql_fixtures.adult as adult


def test_adult_is_loaded_completely(pg) -> None:
    with psycopg.connect(pg.aggregator_dsn) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM adult").fetchone()
        (ages,) = conn.execute("SELECT count(DISTINCT age) FROM adult").fetchone()
        low, high = conn.execute("SELECT min(age), max(age) FROM adult").fetchone()
    assert rows == adult.ROWS
    assert (ages, low, high) == (73, 17, 90)


def test_loader_values_are_stripped(pg) -> None:
    with psycopg.connect(pg.aggregator_dsn) as conn:
        sexes = [r[0] for r in conn.execute("SELECT DISTINCT sex FROM adult ORDER BY 1")]
        (unknown,) = conn.execute(
            "SELECT count(*) FROM adult WHERE native_country = '?'"
        ).fetchone()
    assert sexes == ["Female", "Male"]
    assert unknown == 583  # adult.names: native-country unknown in 583 training rows


def test_passthrough_role_cannot_read_protected_rows(pg) -> None:
    with psycopg.connect(pg.passthrough_dsn) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as info:
            conn.execute("SELECT * FROM adult LIMIT 1")
    assert info.value.sqlstate == "42501"


def test_passthrough_role_reads_the_catalogue(pg) -> None:
    with psycopg.connect(pg.passthrough_dsn) as conn:
        (name,) = conn.execute(
            "SELECT c.relname FROM pg_class c WHERE c.relname = 'adult' AND c.relkind = 'r'"
        ).fetchone()
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'adult' ORDER BY ordinal_position"
        ).fetchall()
    assert name == "adult"
    assert [c[0] for c in columns][:3] == ["age", "workclass", "fnlwgt"]


def test_the_state_database_is_the_aggregators_alone(pg) -> None:
    with psycopg.connect(pg.state_dsn) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS lapras")
        conn.rollback()
    with pg.analyst_login("analyst") as analyst:
        for dsn in (pg.passthrough_dsn, analyst):
            with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
                psycopg.connect(dsn.rsplit("/", 1)[0] + "/" + pg.state_dsn.rsplit("/", 1)[1])


def test_passthrough_role_cannot_create_tables_or_temp_tables(pg) -> None:
    for statement in ("CREATE TABLE t (a int)", "CREATE TEMP TABLE t (a int)"):
        with psycopg.connect(pg.passthrough_dsn) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
