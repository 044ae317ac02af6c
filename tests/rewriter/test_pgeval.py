"""The rewriter's own evaluation of SQL expressions, diffed against PostgreSQL.

A small protected table holds every combination of its declared values once (integers with
NULL, text with case, accents and a quote, dates with NULL), so each expression over it takes
every value the rewriter evaluates over the domain. For each expression,

- as a **group key**: ``SELECT <expr>, count(*) ... GROUP BY 1`` on PostgreSQL must equal the
  rewriter's groups (the expression evaluated over the declared values) with their exact
  counts, value for value and type for type;
- as a **condition** and **inside aggregates**: counts and sums must equal PostgreSQL's;
- **post-processing** of aggregates (``round``, casts with a type modifier, numeric division,
  window functions) must equal PostgreSQL's to the last digit.

The answers come from ``postprocess(plan, W @ x)`` on the exact histogram (no noise): the
marginal the plan is over, of one pin of the table.
"""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pins import exact_answer, pin_table

import rewriter
from dp.pin import Pin
from proxy import provision
from rewriter.schema import Schema

TOML = """
[tables.lapras_eval]
schema = "public"
[tables.lapras_eval.columns]
n = "integer"
c = "text"
d = "date"
[tables.lapras_eval.attributes.n]
kind = "integer"
min = -6
max = 6
nullable = true
[tables.lapras_eval.attributes.c]
kind = "categorical"
values = ["Alpha", "beta", "GAMMA", "d'elta", "épsilon", "a_b%c", ""]
nullable = true
[tables.lapras_eval.attributes.d]
kind = "date"
min = "2020-02-25"
max = "2020-03-05"
nullable = true
"""  # no views: each statement is answered over the marginal of the columns it uses

N_VALUES = [*range(-6, 7), None]
C_VALUES = ["Alpha", "beta", "GAMMA", "d'elta", "épsilon", "a_b%c", "", None]
D_VALUES = [
    *(dt.date(2020, 2, 25) + dt.timedelta(days=k) for k in range(10)),
    None,
]

KEYS = [
    # arithmetic and PostgreSQL's integer semantics
    "n + 1", "n - 10", "n * 3", "n / 4", "n % 4", "-n", "mod(n, 3)", "n * 1.5", "n / 4.0",
    "n::numeric / 3", "(n + 0.5) * 2", "n::float8 / 3", "2 * n - n * n",
    # binning functions and their result types
    "floor(n / 4)", "floor(n / 4.0)", "ceil(n::numeric / 4)", "round(n / 4.0)",
    "round(n / 4.0, 1)", "round(n::float8 / 4)", "trunc(n / 4.0)", "abs(n)", "sign(n)",
    "width_bucket(n, -6, 7, 4)", "width_bucket(n, 10, 0, 3)", "floor(n / 3) * 3",
    # width_bucket in double precision for integers, in numeric for numerics (they differ)
    "width_bucket(n, -20, 2, 22)", "width_bucket(n::numeric, -20, 2, 22)",
    "width_bucket(n / 7.0, -1, 1, 7)", "width_bucket(n::float8 / 7, 1, -1, 9)",
    "(n::float8 / 3)::numeric", "(n::float8 * 1e15 / 7)::numeric",
    # NULL handling, CASE, COALESCE, NULLIF, GREATEST/LEAST
    "coalesce(n, 0)", "coalesce(n, 0.5)", "nullif(n, 0)", "greatest(n, 0)", "least(n, 2, 1.5)",
    "CASE WHEN n < 0 THEN 'neg' WHEN n = 0 THEN 'zero' ELSE 'pos' END",
    "CASE n WHEN 1 THEN 'one' WHEN 2 THEN 'two' END", "CASE WHEN n > 2 THEN n ELSE 0.5 END",
    "n IS NULL", "n IS DISTINCT FROM 3", "n IN (1, 2, NULL)", "n NOT IN (1, 2)",
    "n BETWEEN -1 AND 2", "n > 2 OR n IS NULL", "NOT (n > 0)",
    # text
    "lower(c)", "upper(c)", "length(c)", "substr(c, 2, 3)", "substring(c from 2)",
    "c || '!'", "concat(c, n)", "btrim(c)", "btrim(c, 'Aa')", "ltrim(c, 'dA')", "rtrim(c, 'an')",
    "ltrim(concat(' ', c, ' '))", "trim(leading 'a' FROM c)", "trim(trailing FROM concat(c, ' '))",
    "trim(both 'a' FROM c)", "c LIKE 'a%'", "c ILIKE 'a%'", "c LIKE '%\\_%'",
    "c LIKE '_e%'", "c NOT LIKE '%a%'", "c ILIKE '%A%'", "coalesce(c, 'none')", "c = 'beta'",
    "n::text", "c || n::text", "left(c, 2)", "left(c, -1)", "right(c, 3)", "right(c, -2)",
    "replace(c, 'a', 'xy')", "replace(c, '', 'z')", "concat(c, n > 0)",
    "concat_ws('-', c, n, d)", "concat_ws(c, 'x', NULL, n > 0)", "concat_ws(',', n::float8 / 4)",
    "initcap(c)", "initcap(concat(c, ' wORD-x', n, 'ab'))", "split_part(c, 'a', 1)",
    "split_part(c, 'a', 2)", "split_part(c, 'l', -1)", "split_part(c, '', 1)",
    "split_part(c, 'e', n % 3 - 3)", "split_part(c, '', -2)", "strpos(c, 'a')", "strpos(c, '')",
    "position('l' IN c)", "starts_with(c, 'a')", "starts_with(c, '')", "lpad(c, 4)",
    "lpad(c, n, 'xy')", "rpad(c, n + 3, '')", "rpad(c, 7, 'ab')", "reverse(c)", "md5(c)",
    "repeat(c, n)", "ascii(c)", "chr(n + 72)", "chr(n + 233)",
    # mathematics: double precision for integers, numeric sqrt at PostgreSQL's scale
    "power(n, 2)", "pow(n, 3)", "n ^ 2", "2 ^ n", "power(n + 6, 0.5::float8)", "sqrt(n + 6)",
    "|/ (n + 6)", "sqrt((n + 6)::numeric)", "sqrt((n + 6) / 7.0)", "sqrt(n * n * 1000000007.5)",
    "sqrt(n * n / 1000000.0)", "cbrt(n)", "cbrt(n::numeric / 3)", "exp(n)", "exp(n::float8 / 4)",
    "ln(n + 7)", "log(n + 7)", "log10(n + 7)", "div(n, 4)", "div(n * 2.5, 2)", "div(n, -4)",
    "pi() * n", "degrees(n)", "radians(n)", "sin(n)", "cos(n)",
    # dates
    "d + 3", "d - 1", "d - DATE '2020-02-28'", "extract(day FROM d)", "extract(month FROM d)",
    "extract(dow FROM d)", "date_trunc('month', d)::date", "d > DATE '2020-03-01'",
    # casts
    "(n / 4.0)::numeric(4, 1)", "(n * 1.25)::int", "(n / 4.0)::float8", "n::bool",
    "(n > 0)::int",
]  # fmt: skip

CONDITIONS = [
    "n + 1 > 2", "lower(c) = 'alpha'", "c LIKE '%a%' AND n % 2 = 0", "abs(n) <= 2",
    "CASE WHEN n > 0 THEN true END", "coalesce(n, 99) > 5", "d - 1 >= DATE '2020-03-01'",
    "n IS DISTINCT FROM NULL", "extract(day FROM d) IN (1, 29)", "sqrt(n + 6) > 2",
    "starts_with(c, 'a') OR strpos(c, 'l') > 0", "ln(n + 7) < 1", "n ^ 2 >= 9",
]  # fmt: skip

AGGREGATES = [
    "count(CASE WHEN n > 0 THEN 1 END)", "sum(n * 2)", "sum(CASE WHEN n > 0 THEN n ELSE 0 END)",
    "avg(n + 0.5)", "sum(abs(n))", "count(lower(c))", "count(*) FILTER (WHERE c LIKE '%a%')",
    "sum(n) FILTER (WHERE d > DATE '2020-03-01')", "min(n)", "max(d)", "min(c)",
    "count(DISTINCT n % 3)", "percentile_disc(0.5) WITHIN GROUP (ORDER BY n)",
    "percentile_cont(0.25) WITHIN GROUP (ORDER BY n)", "round(avg(n), 3)",
    "avg(n)::numeric(6, 2)", "sum(n) * 1.5", "count(*) / 7", "count(*) * 100.0 / 7",
    "round(stddev(n), 8)", "stddev(n)", "var_pop(n)", "variance(n * 2)", "coalesce(sum(n), 0)",
    "log(count(*))", "ln(count(*))", "sqrt(variance(n))", "sqrt(count(*))", "sqrt(avg(n + 6))",
    "power(count(*), 2)", "exp(count(*)::float8 / 100)", "div(sum(n), 4)", "cbrt(sum(n))",
    "degrees(avg(n))", "sum(round(sqrt(n + 6)::numeric, 3))", "sum(power(n, 2)::int)", "sum(length(repeat(c, 2)))",
    "lpad(count(*)::text, 5, '0')", "concat_ws('/', count(*), sum(n))",
]  # fmt: skip


@pytest.fixture(scope="module")
def schema(pg: Any) -> Schema:
    rows = list(itertools.product(N_VALUES, C_VALUES, D_VALUES))
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lapras_eval")
        conn.execute("CREATE TABLE public.lapras_eval (n integer, c text, d date)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO public.lapras_eval VALUES (%s, %s, %s)", rows)
        conn.execute(f"GRANT SELECT ON public.lapras_eval TO {provision.AGGREGATOR}")
    return rewriter.parse_schema(TOML, "test-eval.toml")


@pytest.fixture(scope="module")
def pin(pg: Any, schema: Schema) -> Pin:
    """The table's pin (its exact data over every declared attribute)."""
    return pin_table(pg.aggregator_dsn, schema, "lapras_eval")


def _ours(sql: str, schema: Schema, pin: Pin) -> tuple[list[tuple[Any, ...]], list[int]]:
    [st] = rewriter.classify(sql, schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, (sql, st)
    plan = st.plan
    return exact_answer(plan, pin), [c.type_oid for c in plan.columns]


def _theirs(pg: Any, sql: str) -> tuple[list[tuple[Any, ...]], list[int]]:
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        cur = conn.execute(sql)
        assert cur.description is not None
        return cur.fetchall(), [d.type_code for d in cur.description]


def _same(ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]]) -> bool:
    """The same rows, value for value and type for type (a float's -0 is its 0: they are one
    group, and which one PostgreSQL shows is its hash table's choice)."""

    def key(r: tuple[Any, ...]) -> str:
        return repr(tuple((type(v).__name__, v + 0.0 if isinstance(v, float) else v) for v in r))

    return sorted(map(key, ours)) == sorted(map(key, theirs))


@pytest.mark.parametrize("expr", KEYS)
def test_expression_as_a_group_key(expr: str, pg: Any, schema: Schema, pin: Pin) -> None:
    sql = f"SELECT {expr} AS k, count(*) FROM lapras_eval GROUP BY 1"
    ours, our_types = _ours(sql, schema, pin)
    theirs, types = _theirs(pg, sql)
    assert our_types == types
    ours = [r for r in ours if r[-1] != 0]  # groups the data does not reach
    assert _same(ours, theirs), (sorted(ours, key=repr), sorted(theirs, key=repr))


@pytest.mark.parametrize("cond", CONDITIONS)
def test_expression_as_a_condition(cond: str, pg: Any, schema: Schema, pin: Pin) -> None:
    sql = f"SELECT count(*), sum(n) FROM lapras_eval WHERE {cond}"
    ours, _ = _ours(sql, schema, pin)
    assert ours == _theirs(pg, sql)[0]


@pytest.mark.parametrize("agg", AGGREGATES)
def test_aggregates_and_their_post_processing(agg: str, pg: Any, schema: Schema, pin: Pin) -> None:
    sql = f"SELECT c, {agg} AS v FROM lapras_eval GROUP BY c"
    ours, our_types = _ours(sql, schema, pin)
    theirs, types = _theirs(pg, sql)
    assert our_types == types
    assert _same(ours, theirs), (sorted(ours, key=repr), sorted(theirs, key=repr))


def test_window_functions_over_the_grouped_result(pg: Any, schema: Schema, pin: Pin) -> None:
    sql = (
        "SELECT n % 3 AS r, count(*) AS k, sum(count(*)) OVER () AS total, "
        "count(*) * 100.0 / sum(count(*)) OVER () AS pct, rank() OVER (ORDER BY n % 3 DESC), "
        "avg(count(*)) OVER (), sum(sum(n)) OVER (ORDER BY n % 3) "
        "FROM lapras_eval GROUP BY 1 ORDER BY 1"
    )
    ours, our_types = _ours(sql, schema, pin)
    theirs, types = _theirs(pg, sql)
    assert our_types == types
    assert ours == theirs


def test_errors_over_the_declared_domain_are_refused(schema: Schema) -> None:
    """PostgreSQL raises 22012 only when a row reaches the zero; the rewriter evaluates over
    every declared value and refuses whatever the data (the domain is public)."""
    [st] = rewriter.classify("SELECT count(*) FROM lapras_eval WHERE 10 / n > 1", schema)
    assert isinstance(st, rewriter.Refused) and st.error.sqlstate == "22012"
    assert "declared domain" in st.error.message
    [st] = rewriter.classify(
        "SELECT round(n::float8 / 2, 1), count(*) FROM lapras_eval GROUP BY 1", schema
    )
    assert isinstance(st, rewriter.Refused) and st.error.sqlstate == "42883"
    for expr, sqlstate in [
        ("sqrt(n)", "2201F"), ("ln(n + 6)", "2201E"), ("log(n)", "2201E"),
        ("power(n, -1)", "2201F"), ("power(n, 0.5::float8)", "2201F"), ("div(10, n)", "22012"),
        ("chr(n)", "22023"), ("chr(n + 6)", "54000"), ("split_part(c, 'a', n)", "22023"),
        ("exp(n * 200)", "22003"), ("exp(n * -200)", "22003"), ("repeat(c, n * 1000000)", "54000"),
    ]:  # fmt: skip
        [st] = rewriter.classify(f"SELECT {expr}, count(*) FROM lapras_eval GROUP BY 1", schema)
        assert isinstance(st, rewriter.Refused), expr
        assert st.error.sqlstate == sqlstate and "declared domain" in st.error.message, expr


@pytest.mark.parametrize(
    "expr", ["exp(n::numeric)", "ln(n / 2.0)", "power(n, 0.5)", "n ^ 1.5", "log(2, n + 7)"]
)
def test_numeric_variants_not_evaluated_are_refused_with_a_cast(expr: str, schema: Schema) -> None:
    """PostgreSQL computes exp, ln, log and power of a numeric at result scales of its own:
    refused (0A000), the hint saying to cast to double precision (which PostgreSQL computes
    as the proxy does)."""
    [st] = rewriter.classify(f"SELECT {expr}, count(*) FROM lapras_eval GROUP BY 1", schema)
    assert isinstance(st, rewriter.Refused) and st.error.sqlstate == "0A000", st
    assert "float8" in (st.error.hint or ""), st.error.hint


def test_errors_in_post_processing_give_null(pg: Any, schema: Schema, pin: Pin) -> None:
    """PostgreSQL raises for ln(0) and sqrt of a negative; over noisy answers the proxy gives
    NULL (docs/sql.md §2.5), where the exact answer would make PostgreSQL raise."""
    sql = "SELECT ln(count(*) - count(*)), sqrt(-count(*)), count(*) FROM lapras_eval"
    ours, _ = _ours(sql, schema, pin)
    assert ours == [(None, None, len(N_VALUES) * len(C_VALUES) * len(D_VALUES))]
    with pytest.raises(psycopg.errors.InvalidArgumentForLogarithm):
        _theirs(pg, sql)


def test_numeric_display_scale_of_division_is_postgresql_s() -> None:
    from rewriter.pgeval import numeric_div

    assert str(numeric_div(Decimal(1), Decimal(3))) == "0.33333333333333333333"
    assert str(numeric_div(Decimal(10), Decimal(3))) == "3.3333333333333333"
    assert str(numeric_div(Decimal("100.0"), Decimal(3))) == "33.3333333333333333"
    assert str(numeric_div(Decimal(1256257), Decimal(32561))) == "38.5816467553207825"


def test_column_names_of_the_functions_are_postgresql_s(pg: Any, schema: Schema) -> None:
    """sqlglot parses several spellings into one node (power and pow, strpos and position,
    TRIM(LEADING ...) and ltrim): each column keeps the name PostgreSQL gives it."""
    items = [
        "trim(leading 'x' FROM c)", "trim(c)", "rtrim(c)", "power(n, 2)", "pow(n, 2)", "n ^ 2",
        "log10(n + 7)", "log(n + 7)", "strpos(c, 'a')", "position('a' IN c)", "div(n, 2)",
        "lpad(c, 2)", "rpad(c, 2)", "concat_ws(',', n)", "sqrt(n + 6)", "pi()", "initcap(c)",
    ]  # fmt: skip
    sql = f"SELECT {', '.join(items)}, count(*) FROM lapras_eval GROUP BY {', '.join(str(i + 1) for i in range(len(items)))}"
    [st] = rewriter.classify(sql, schema)
    assert isinstance(st, rewriter.DPStatement) and st.plan is not None, st
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        cur = conn.execute(sql)
        assert cur.description is not None
        assert [c.name for c in st.plan.columns] == [d.name for d in cur.description]
