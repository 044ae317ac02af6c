"""Columns declared with clamping bounds (rewriter/clamp.py): SUM and AVG over clamped values.

A small table with a nullable ``numeric`` amount (range ``[0, 100]``) and a ``double
precision`` x (range ``[-10, 10]``), values below, inside, at the edges of and above their
ranges, is pinned on PostgreSQL and every answer diffed (noise off) against PostgreSQL's own
over ``least(greatest(amount, 0), 100)`` and ``least(greatest(x, -10), 10)``: the clamped
values. The same with a privacy unit (the pin read with each unit's rows, by binary COPY).
Also: the sensitivity of a clamped sum is its largest bound; a row is one count split between
its bin's ends; what is not a sum of values is refused. Adult's clamped columns (bounds
holding every value: PostgreSQL's answers exactly) are diffed in sql_fixtures/golden/clamped.sql
and through the proxy in the corpus (binned.*).
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pins import exact_answer, pin_table

import rewriter
import sql_fixtures.adult as adult
from dp.pin import Pin
from proxy import provision
from rewriter.schema import Schema

TOML = """
[tables.lapras_amounts]
[tables.lapras_amounts.columns]
id = "integer"
amount = "numeric"
k = "integer"
x = "double precision"
u = "integer"
[tables.lapras_amounts.attributes.amount]
kind = "numeric"
edges = [0, 10, 25.5, 100]
clamp = true
nullable = true
[tables.lapras_amounts.attributes.k]
kind = "integer"
min = 0
max = 3
[tables.lapras_amounts.attributes.x]
kind = "numeric"
edges = [-10, 0, 2.5, 10]
clamp = true
"""
UNITS = 'privacy_unit = "u"\nmax_rows_per_unit = 1000\n'
#: The same statements over the clamped values, as PostgreSQL computes them.
CLAMPED = (
    "(SELECT id, CASE WHEN amount IS NOT NULL THEN least(greatest(amount, 0), 100) END AS amount,"
    " k, least(greatest(x, -10), 10) AS x FROM lapras_amounts) AS c"
)


@pytest.fixture(scope="module")
def table(pg: Any) -> Any:
    rng = random.Random(3)
    rows = []
    for i in range(600):
        v = rng.choice(
            [None, Decimal(-5), Decimal(0), Decimal("9.99"), Decimal(10), Decimal("25.5"),
             Decimal("99.75"), Decimal(100), Decimal(250), Decimal(rng.randint(0, 10000)) / 100]
        )  # fmt: skip
        x = rng.choice([-20.0, -10.0, -0.5, 0.0, 2.5, 9.999, 10.0, 33.0, rng.uniform(-12, 12)])
        rows.append((i, v, rng.randint(0, 3), x, i % 37))
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lapras_amounts")
        conn.execute(
            "CREATE TABLE public.lapras_amounts (id integer, amount numeric, k integer,"
            " x double precision, u integer)"
        )
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO public.lapras_amounts VALUES (%s, %s, %s, %s, %s)", rows)
        conn.execute(f"GRANT SELECT ON public.lapras_amounts TO {provision.AGGREGATOR}")
    return pg


def _copy_pin(dsn: str, schema: Schema) -> Pin:
    """The pin as the proxy reads it: the pin statement by binary COPY."""
    sql = rewriter.pin_sql(schema, "lapras_amounts", seed="0123456789abcdef0123")
    buf = bytearray()
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)") as copy:
            for data in copy:
                buf += data
    return rewriter.pin_from_copy(rewriter.pin_domain(schema, "lapras_amounts"), buf)


@pytest.fixture(scope="module", params=["rows", "units"])
def pinned(request: Any, table: Any) -> tuple[Schema, Pin]:
    text = (
        TOML
        if request.param == "rows"
        else TOML.replace(
            "[tables.lapras_amounts.columns]", UNITS + "[tables.lapras_amounts.columns]"
        )
    )
    schema = rewriter.parse_schema(text, "amounts.toml")
    return schema, _copy_pin(table.aggregator_dsn, schema)


STATEMENTS = [
    "SELECT sum(amount), avg(amount), count(amount), count(*) FROM {t}",
    "SELECT k, sum(amount), avg(amount) FROM {t} GROUP BY k ORDER BY k",
    "SELECT sum(amount * 2 - 1), avg(amount / 4.0) FROM {t} WHERE amount >= 10",
    "SELECT k, sum(amount) FILTER (WHERE amount < 25.5), count(*) FROM {t} GROUP BY 1 ORDER BY 1",
    "SELECT avg(amount) FROM {t} WHERE amount IS NOT NULL AND k = 2",
    "SELECT sum(amount + k) FROM {t}",
    "SELECT sum(x), avg(x), sum(x * 3 + amount) FROM {t}",
    "SELECT k, avg(x - 1), sum(x) FILTER (WHERE x >= 0) FROM {t} GROUP BY 1 ORDER BY 1",
    "SELECT sum(CASE WHEN amount >= 10 THEN amount ELSE 0 END),"
    " avg(CASE WHEN k = 1 THEN amount END) FROM {t}",
    "SELECT k, sum(CASE WHEN x < 0 THEN -x WHEN x < 2.5 THEN 0 ELSE x * 2 END) FROM {t}"
    " GROUP BY 1 ORDER BY 1",
    "SELECT sum(coalesce(amount, 0)), avg(coalesce(amount * 2, -1)) FROM {t}",
    "SELECT sum(amount::float8), avg(x::numeric), sum(-amount) FROM {t}",
    # affine in each clamped value: the product of two columns' values is exact (the masses
    # of the ends' combinations are the products of the columns' shares)
    "SELECT sum(amount * x), avg((x + 1) * (amount - 2) * k) FROM {t}",
    "SELECT k, sum(x) / count(*), sum(amount) / count(amount) FROM {t} GROUP BY 1 ORDER BY 1",
]


def _close(ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]]) -> None:
    assert len(ours) == len(theirs), (ours, theirs)
    for a, b in zip(ours, theirs, strict=True):
        for x, y in zip(a, b, strict=True):
            if y is None or x is None:
                assert x == y, (a, b)
            else:
                assert type(x) is type(y), (a, b)
                assert abs(float(x) - float(y)) <= 1e-9 * max(1.0, abs(float(y))), (a, b)


@pytest.mark.parametrize("sql", STATEMENTS)
def test_clamped_sums_are_exact(table: Any, pinned: tuple[Schema, Pin], sql: str) -> None:
    schema, pin = pinned
    [st] = rewriter.classify(sql.format(t="lapras_amounts"), schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    with psycopg.connect(table.aggregator_dsn, autocommit=True) as conn:
        theirs = conn.execute(sql.format(t=CLAMPED)).fetchall()
    _close(exact_answer(st.plan, pin), theirs)


def test_the_sensitivity_of_a_clamped_sum_is_its_largest_bound(
    pinned: tuple[Schema, Pin],
) -> None:
    schema, _ = pinned
    for sql, bound in (("SELECT sum(amount) FROM lapras_amounts", 100.0),
                       ("SELECT sum(x) FROM lapras_amounts", 10.0)):  # fmt: skip
        [st] = rewriter.classify(sql, schema)
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None
        plan = st.plan
        j = next(i for i, m in enumerate(plan.measures) if m.kind.value == "sum")
        row = plan.batch.dense()[plan.layouts[j].offset]  # the sum's own row (beside its count's)
        assert abs(row).max() * plan.layouts[j].scale == pytest.approx(bound)


def test_a_row_is_one_count_split_between_its_bins_ends(pinned: tuple[Schema, Pin]) -> None:
    """Each row's masses on its bin's two ends sum to one: counts are unchanged."""
    schema, pin = pinned
    t = schema.tables["lapras_amounts"]
    assert pin.domain == t.domain
    assert pin.domain.names[-2:] == ("amount#value", "x#value")
    assert round(pin.total, 9) == 600
    by_bin = pin.marginal(pin.domain.marginal(["amount"]))
    by_end = pin.marginal(pin.domain.marginal(["amount#value"]))
    assert by_bin.sum() == pytest.approx(by_end.sum())
    # ends of bin i are cells 2i and 2i + 1; NULL is the last cell of both
    assert by_end[-1] == by_bin[-1]
    for i in range(3):
        assert by_end[2 * i] + by_end[2 * i + 1] == pytest.approx(by_bin[i])
    both = pin.marginal(pin.domain.marginal(["x", "amount#value", "x#value"]))
    assert both.sum() == pytest.approx(600)
    if pin.units is not None:  # each unit's rows split the same way
        assert pin.units.counts.sum() == pytest.approx(600)


@pytest.mark.parametrize(
    ("sql", "word"),
    [
        ("SELECT stddev(amount) FROM lapras_amounts", "STDDEV"),
        ("SELECT sum(floor(amount)) FROM lapras_amounts", "not affine"),
        ("SELECT sum(amount * amount) FROM lapras_amounts", "not affine"),
        ("SELECT sum(x / x) FROM lapras_amounts", "not affine"),
        ("SELECT sum(amount::numeric(5,1)) FROM lapras_amounts", "not affine"),
        ("SELECT sum(abs(x)) FROM lapras_amounts", "not affine"),
        ("SELECT sum(CASE WHEN amount > x THEN 1 END) FROM lapras_amounts", "cuts"),
    ],
)
def test_what_is_not_a_sum_of_values_is_refused(
    pinned: tuple[Schema, Pin], sql: str, word: str
) -> None:
    schema, _ = pinned
    [st] = rewriter.classify(sql, schema)
    assert isinstance(st, rewriter.Refused) and st.error.sqlstate == "0A000", st
    assert word in st.error.message


def test_without_clamp_a_binned_sum_is_refused_with_a_hint() -> None:
    schema = rewriter.parse_schema(TOML.replace("clamp = true\n", ""), "x.toml")
    for sql in ("SELECT avg(amount) FROM lapras_amounts", "SELECT sum(x) FROM lapras_amounts"):
        [st] = rewriter.classify(sql, schema)
        assert isinstance(st, rewriter.Refused) and st.error.sqlstate == "0A000"
        assert "clamp = true" in (st.error.hint or "")
    # a column's bins in a CASE condition are read as any condition's
    [st] = rewriter.classify(
        "SELECT sum(CASE WHEN x >= 0 THEN k ELSE 0 END) FROM lapras_amounts", schema
    )
    assert isinstance(st, rewriter.DPStatement), st
    for bad, why in (
        ('values = ["a"]\nclamp = true', "unknown key"),
        ("min = 0\nmax = 1\nclamp = 1", "true or false"),
    ):
        kind = "categorical" if "values" in bad else "integer"
        typ = "text" if "values" in bad else "integer"
        with pytest.raises(rewriter.ConfigError, match=why):
            rewriter.parse_schema(
                f'[tables.t.columns]\nc = "{typ}"\n[tables.t.attributes.c]\nkind = "{kind}"\n'
                f"{bad}\n",
                "x.toml",
            )


def test_bounds_that_hold_every_value_give_postgresql_s_answer_exactly(pg: Any) -> None:
    """Adult's capital_gain and capital_loss, clamped to ranges that hold all their values:
    sums are PostgreSQL's integers and averages its numeric quotients, digit for digit."""
    schema = rewriter.load_schema(adult.DECLARATION)
    pin = pin_table(pg.aggregator_dsn, schema, "adult")
    for sql in (
        "SELECT sum(capital_gain), avg(capital_gain), sum(capital_gain - capital_loss),"
        " avg(capital_loss) FROM adult",
        "SELECT sex, sum(capital_gain), avg(capital_gain + capital_loss) FROM adult GROUP BY 1"
        " ORDER BY 1",
    ):
        [st] = rewriter.classify(sql, schema)
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
        with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
            theirs = conn.execute(sql).fetchall()
        assert exact_answer(st.plan, pin) == theirs
