"""Public relations in the rewriter: declarations, binding a declared table's rows, and the
sensitivity of a join (rewriter/lookups.py, rewriter/public_tables.py). Exactness against
PostgreSQL: sql_fixtures/golden/lookups.sql (VALUES, CTEs) and tests/test_lookups.py (a declared
table, through the wire)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import rewriter
from rewriter.errors import ConfigError

ADULT_TOML = (
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
).read_text()
PUBLIC = """
[public_tables.country_region]
columns = { country = "text", region = "text" }
max_rows = 100
"""
SCHEMA = rewriter.parse_schema(ADULT_TOML + PUBLIC, "test.toml")


def test_a_declared_public_table() -> None:
    decl = SCHEMA.public["country_region"]
    assert decl.qualified == "public.country_region"
    assert decl.columns == (("country", "text"), ("region", "text"))
    assert decl.max_rows == 100


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[public_tables.adult]\ncolumns = { a = "text" }', "declared protected too"),
        ("[public_tables.t]\nschema = 'public'", "must list the columns"),
        ('[public_tables.t]\ncolumns = { a = "blob" }', "unknown type"),
        ('[public_tables.t]\ncolumns = { a = "text" }\nmax_rows = 0', "at least 1"),
        ('[public_tables.t]\ncolumns = { a = "text" }\nrows = 3', "unknown key"),
    ],
)
def test_declaration_errors(text: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        rewriter.parse_schema(ADULT_TOML + text, "test.toml")


def test_a_declared_table_is_bound_to_the_epochs_rows() -> None:
    sql = (
        "SELECT cr.region, count(*) FROM adult a JOIN country_region cr "
        "ON cr.country = a.native_country GROUP BY 1"
    )
    [st] = rewriter.classify(sql, SCHEMA)
    assert isinstance(st, rewriter.DPStatement)
    assert st.plan is None and rewriter.public_tables_of(st) == ("public.country_region",)
    rows = {"public.country_region": (("Mexico", "LA"), ("Cuba", "LA"), ("Canada", "NA"))}
    plan = rewriter.bind(st, [], public=rows)
    assert plan.view == "(native_country)"
    assert plan.group_keys == (("LA",), ("NA",))
    other = rewriter.bind(st, [], public={"public.country_region": (("Mexico", "LA"),)})
    assert other.group_keys == (("LA",),)
    assert other.batch.key != plan.batch.key  # another epoch's content is another question


def test_the_sensitivity_follows_the_largest_multiplicity() -> None:
    """A row meeting k rows of the relation weighs k: a many-match costs more noise. (A
    measure's rows are divided by its largest weight, its scale, which the answer is multiplied
    back by: the noise on the answer is the batch's sensitivity times the scale.)"""
    once = "SELECT count(*) FROM adult a JOIN (VALUES ('Mexico'), ('Cuba')) AS d(c) ON a.native_country = d.c"
    twice = "SELECT count(*) FROM adult a JOIN (VALUES ('Mexico'), ('Mexico'), ('Cuba')) AS d(c) ON a.native_country = d.c"
    grouped = (
        "SELECT grp, count(*) FROM adult a JOIN (VALUES ('Mexico', 'latin'), ('Mexico', 'north'), "
        "('Cuba', 'latin')) AS m(country, grp) ON a.native_country = m.country GROUP BY grp"
    )
    sens = {}
    for name, sql in (("once", once), ("twice", twice), ("grouped", grouped)):
        [st] = rewriter.classify(sql, SCHEMA)
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None
        sens[name] = st.plan.batch.sensitivity_l2 * st.plan.layouts[0].scale
        assert st.plan.batch.domain.names == ("native_country",)
    assert sens["once"] == 1.0
    assert sens["twice"] == 2.0
    assert math.isclose(sens["grouped"], math.sqrt(2.0))


def test_a_left_join_keeps_each_row_once() -> None:
    """Unmatched rows on the NULL row, matched ones on theirs: every row weighs one."""
    sql = (
        "SELECT r.region, count(*) FROM adult a LEFT JOIN (VALUES ('Mexico', 'LA')) AS "
        "r(country, region) ON a.native_country = r.country GROUP BY 1"
    )
    [st] = rewriter.classify(sql, SCHEMA)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None
    matrix = st.plan.batch.dense()
    assert st.plan.group_keys == (("LA",), (None,))
    assert (matrix.sum(axis=0) == 1.0).all()


def test_a_public_table_inside_a_composed_part_is_refused_by_name() -> None:
    """A declared table's rows are bound when the statement runs; a part of a composed
    statement is planned before: refused naming the table and what is answered instead."""
    sql = (
        "WITH r AS (SELECT cr.region, count(*) AS n FROM adult a JOIN country_region cr "
        "ON cr.country = a.native_country GROUP BY cr.region) "
        "SELECT region, n * 100.0 / sum(n) OVER () FROM r"
    )
    [st] = rewriter.classify(sql, SCHEMA)
    assert isinstance(st, rewriter.Refused)
    assert st.error.sqlstate == "0A000"
    assert "a join with public table country_region inside a part" in str(st.error)
    assert "VALUES" in (st.error.hint or "")


def test_a_select_of_the_public_table_is_the_table_filtered() -> None:
    """A CTE selecting a public table's rows (renamed, filtered) is that table joined with its
    WHERE added to the condition: the same statement as the join written out."""
    cte = (
        "WITH eu AS (SELECT country AS c, region FROM country_region WHERE region = 'EU') "
        "SELECT eu.region, count(*) FROM adult a JOIN eu ON eu.c = a.native_country GROUP BY 1"
    )
    plain = (
        "SELECT cr.region, count(*) FROM adult a JOIN country_region cr "
        "ON cr.country = a.native_country AND cr.region = 'EU' GROUP BY 1"
    )
    rows = {"public.country_region": (("Mexico", "LA"), ("Italy", "EU"), ("Spain", "EU"))}
    plans = []
    for sql in (cte, plain):
        [st] = rewriter.classify(sql, SCHEMA)
        assert isinstance(st, rewriter.DPStatement)
        plans.append(rewriter.bind(st, [], public=rows))
    assert plans[0].group_keys == plans[1].group_keys == (("EU",),)
    assert (plans[0].batch.dense() == plans[1].batch.dense()).all()
