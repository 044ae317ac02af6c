"""Exactness: the IR applied to the exact histogram equals PostgreSQL's answer, to the last integer.

Random accepted queries (seeded) over the Adult declaration and over a small table with NULLs,
dates, booleans and numeric bins are run (a) on PostgreSQL as the aggregator role and (b) as
``postprocess(plan, plan.batch.answer(pin.marginal(plan.batch.domain)))``, the pin read with
``pin_sql`` on the same backend (noise off). Each statement uses a random set of attributes (1
to 4 of Adult's declared columns, any number of the small table's), and must be reduced over
the marginal of exactly that set. Statements over big marginals (millions of cells for four of
Adult's columns) are slower to reduce, so only a bounded number of them is drawn. GROUP BY
returns every public group (also empty ones) where PostgreSQL returns only non-empty groups;
the generator adds a trailing ``count(*)`` to grouped queries so empty groups can be dropped
before comparing.
"""

from __future__ import annotations

import math
import os
import queue
import random
import threading
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pins import exact_answer, pin_table
from rewriter_querygen import Generated, QueryGenerator

import rewriter
from dp.pin import Pin
from proxy import provision
from rewriter.canonical import project
from rewriter.reduce import marginal_name
from rewriter.schema import AttributeDecl, Schema, TableDecl

ROOT = Path(__file__).resolve().parents[2]
ADULT_TOML = ROOT / "sql_fixtures" / "adult" / "lapras.toml"

NULLS_TOML = """
[tables.lapras_nulls]
schema = "public"
[tables.lapras_nulls.columns]
id = "integer"
n = "integer"
c = "text"
b = "boolean"
d = "date"
x = "numeric"
w = "integer"
[tables.lapras_nulls.attributes.n]
kind = "integer"
min = 0
max = 9
nullable = true
[tables.lapras_nulls.attributes.c]
kind = "categorical"
values = ["a", "b", "c'q"]
nullable = true
[tables.lapras_nulls.attributes.b]
kind = "boolean"
nullable = true
[tables.lapras_nulls.attributes.d]
kind = "date"
min = "2020-01-01"
max = "2020-12-31"
unit = "month"
nullable = true
[tables.lapras_nulls.attributes.x]
kind = "numeric"
edges = [0, 0.5, 1, 10, 100]
nullable = true
[tables.lapras_nulls.attributes.w]
kind = "integer"
min = 0
max = 99
bin_width = 10
"""  # no views: every statement is answered over the marginal of the columns it uses

# a few thousand in all; LAPRAS_EXACTNESS_SCALE multiplies them for longer runs
SCALE = float(os.environ.get("LAPRAS_EXACTNESS_SCALE", "1"))
N_ADULT = int(600 * SCALE)
N_NULLS = int(1200 * SCALE)
#: A marginal of more cells than this is "big" (its statements take up to seconds to reduce):
#: at most N_BIG of the random Adult statements are over one (test_the_largest_marginals adds
#: a few over the largest, of 4,923,072 cells).
BIG_CELLS = 250_000
N_BIG = int(8 * SCALE)
ADULT_ROWS = 32561


def _norm(v: object) -> object:
    if isinstance(v, Decimal | float) and not isinstance(v, bool):
        return round(float(v), 6)
    return v


def _rows_equal(pg_rows: list[tuple[Any, ...]], ours: list[tuple[Any, ...]]) -> bool:
    if len(pg_rows) != len(ours):
        return False
    a = sorted((tuple(_norm(v) for v in r) for r in pg_rows), key=repr)
    b = sorted((tuple(_norm(v) for v in r) for r in ours), key=repr)
    for ra, rb in zip(a, b, strict=True):
        for va, vb in zip(ra, rb, strict=True):
            if isinstance(va, float) and isinstance(vb, float):
                if abs(va - vb) > 1e-6 * max(1.0, abs(va)):
                    return False
            elif va != vb:
                return False
    return True


def _attribute_sets(
    table: TableDecl, n: int, rng: random.Random, max_size: int, *, n_big: int
) -> list[tuple[AttributeDecl, ...]]:
    """``n`` random sets of 1 to ``max_size`` attributes (in declaration order); a set whose
    marginal has more than BIG_CELLS cells is kept only while fewer than ``n_big`` are."""
    attrs = list(table.attributes.values())
    out: list[tuple[AttributeDecl, ...]] = []
    big = 0
    while len(out) < n:
        chosen = set(rng.sample(attrs, rng.randint(1, min(max_size, len(attrs)))))
        combo = tuple(a for a in attrs if a in chosen)
        if math.prod(a.size for a in combo) > BIG_CELLS:
            if big >= n_big:
                continue
            big += 1
        out.append(combo)
    return out


Result = tuple[list[str], list[int], list[tuple[Any, ...]]]


def _run_all(dsn: str, sqls: list[str], out: queue.Queue[Result | BaseException]) -> None:
    """PostgreSQL's answers (column names, type OIDs, rows), in order, into ``out``."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET jit = off")
            for sql in sqls:
                cur = conn.execute(sql)
                rows = cur.fetchall()
                assert cur.description is not None
                out.put(
                    (
                        [d.name for d in cur.description],
                        [d.type_code for d in cur.description],
                        rows,
                    )
                )
    except BaseException as e:  # the test thread re-raises it
        out.put(e)


def _answers(dsn: str, sqls: list[str]) -> Iterator[Result]:
    """PostgreSQL's answers, computed in a worker thread while the caller consumes them (the
    rewriter works in this thread meanwhile)."""
    results: queue.Queue[Result | BaseException] = queue.Queue()
    worker = threading.Thread(target=_run_all, args=(dsn, sqls, results), daemon=True)
    worker.start()
    for _ in sqls:
        r = results.get()
        if isinstance(r, BaseException):
            raise r
        yield r
    worker.join()


def _check(
    dsn: str, schema: Schema, table: str, pin: Pin, n: int, seed: int, *, max_size: int, n_big: int
) -> Counter[str]:
    """Diff ``n`` random statements against PostgreSQL; returns counts of what was checked.
    Each statement is classified, answered and compared in turn (its plan then dropped)."""
    t = schema.tables[table]
    gen = QueryGenerator(t, seed)
    r = random.Random(seed)
    sets = _attribute_sets(t, n, r, max_size, n_big=n_big)
    queries: list[Generated] = [gen.query(attrs) for attrs in sets]
    failures: list[str] = []
    stats: Counter[str] = Counter()
    pg_results = _answers(dsn, [q.sql for q in queries])
    for q, attrs, (names, oids, pg_rows) in zip(queries, sets, pg_results, strict=True):
        failure = _check_one(q, attrs, schema, pin, names, oids, pg_rows, stats)
        if failure:
            failures.append(failure)
    assert not failures, f"{len(failures)} of {n} differ:\n" + "\n".join(failures[:10])
    return stats


def _check_one(
    q: Generated,
    attrs: tuple[AttributeDecl, ...],
    schema: Schema,
    pin: Pin,
    names: list[str],
    oids: list[int],
    pg_rows: list[tuple[Any, ...]],
    stats: Counter[str],
) -> str | None:
    """One statement diffed against PostgreSQL's answer: None, or what differs."""
    [st] = rewriter.classify(q.sql, schema)
    if not isinstance(st, rewriter.DPStatement) or st.plan is None:
        return f"not accepted: {q.sql} -> {st}"
    plan = st.plan
    if plan.row_width * plan.num_groups != plan.batch.num_queries:
        return f"row width differs: {q.sql}"
    # the statement uses exactly the drawn attributes; its marginal is the smallest one of
    # theirs its queries depend on (rewriter.canonical), in their order
    drawn = [a.name for a in attrs]
    names_ = plan.batch.domain.names
    if q.attributes != set(drawn) or list(names_) != [n for n in drawn if n in names_]:
        return f"marginal differs: {q.sql}: {plan.view}, drawn {marginal_name(drawn)}"
    if plan.view != marginal_name(list(names_)) or plan.domain != plan.batch.domain:
        return f"domain differs: {q.sql}: {plan.view} {plan.batch.domain}"
    if project(plan.batch) is not plan.batch:
        return f"not the smallest marginal: {q.sql}: {plan.view}"
    if names != [c.name for c in plan.columns] or oids != [c.type_oid for c in plan.columns]:
        return (
            f"columns differ: {q.sql}: pg {list(zip(names, oids, strict=True))} ours {plan.columns}"
        )
    ours = exact_answer(plan, pin)
    if q.grouped:
        ours = [row for row in ours if row[-1] != 0]
    if not _rows_equal(pg_rows, ours):
        return f"answers differ: {q.sql}\n pg   {sorted(pg_rows, key=repr)[:6]}\n ours {sorted(ours, key=repr)[:6]}"
    stats["statements"] += 1
    stats[f"{len(attrs)} attributes"] += 1
    if len(names_) < len(attrs):
        stats["attributes summed out"] += 1
    stats["grouped" if q.grouped else "ungrouped"] += 1
    stats["filtered" if " WHERE " in q.sql else "unfiltered"] += 1
    stats["rows"] += len(pg_rows)
    for a in attrs:
        stats[f"uses {a.name}"] += 1
    if plan.batch.domain.size > BIG_CELLS:
        stats["big marginals"] += 1
    lowered = q.sql.lower()
    for agg in ("count(", "sum(", "avg(", "min(", "max(", "filter ("):
        if agg in lowered:
            stats[agg.rstrip("( ")] += 1
    return None


@pytest.fixture(scope="module")
def adult_schema() -> Schema:
    return rewriter.load_schema(ADULT_TOML)


@pytest.fixture(scope="module")
def nulls_schema(pg: Any) -> Schema:
    rng = random.Random(7)
    rows = []
    for i in range(2000):

        def maybe(v: object) -> object:
            return None if rng.random() < 0.15 else v

        rows.append(
            (
                i,
                maybe(rng.randint(0, 9)),
                maybe(rng.choice(["a", "b", "c'q"])),
                maybe(rng.random() < 0.5),
                maybe(f"2020-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"),
                maybe(Decimal(rng.choice(["0", "0.25", "0.5", "0.75", "1", "3.5", "10", "99.99"]))),
                rng.randint(0, 99),
            )
        )
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lapras_nulls")
        conn.execute(
            "CREATE TABLE public.lapras_nulls (id integer, n integer, c text, b boolean, d date, x numeric, w integer)"
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO public.lapras_nulls VALUES (%s, %s, %s, %s, %s, %s, %s)", rows
            )
        conn.execute(f"GRANT SELECT ON public.lapras_nulls TO {provision.AGGREGATOR}")
    return rewriter.parse_schema(NULLS_TOML, "test-nulls.toml")


@pytest.fixture(scope="module")
def adult_pin(pg: Any, adult_schema: Schema) -> Pin:
    return pin_table(pg.aggregator_dsn, adult_schema, "adult")


@pytest.fixture(scope="module")
def nulls_pin(pg: Any, nulls_schema: Schema) -> Pin:
    return pin_table(pg.aggregator_dsn, nulls_schema, "lapras_nulls")


def test_adult_exact(pg: Any, adult_schema: Schema, adult_pin: Pin) -> None:
    stats = _check(
        pg.aggregator_dsn,
        adult_schema,
        "adult",
        adult_pin,
        N_ADULT,
        seed=20260501,
        max_size=4,
        n_big=N_BIG,
    )
    assert stats["statements"] == N_ADULT, stats
    # every size of attribute set, groups and filters, every kind of aggregate, big marginals
    assert all(stats[f"{k} attributes"] >= N_ADULT // 10 for k in (1, 2, 3, 4)), stats
    assert min(stats["grouped"], stats["ungrouped"], stats["filtered"]) >= N_ADULT // 10, stats
    assert all(stats[agg] > 0 for agg in ("count", "sum", "avg", "min", "max", "filter")), stats
    assert 0 < stats["big marginals"] <= N_BIG, stats
    assert stats["attributes summed out"] > 0, stats  # and the same answers as PostgreSQL
    # every attribute, also in sets of four
    assert all(stats[f"uses {a}"] >= 20 for a in adult_schema.tables["adult"].attributes), stats


def test_adult_every_attribute_alone(pg: Any, adult_schema: Schema, adult_pin: Pin) -> None:
    """Each declared attribute of Adult on its own (fnlwgt has no domain): counted, and
    grouped by when it has unit bins."""
    attrs = list(adult_schema.tables["adult"].attributes.values())
    assert [a.name for a in attrs] == [
        "age", "workclass", "education", "education_num", "marital_status", "occupation",
        "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
        "native_country", "income",
    ]  # fmt: skip
    sqls = [(a, f"SELECT count({a.name}), count(*) FROM adult") for a in attrs]
    sqls += [(a, f"SELECT {a.name}, count(*) FROM adult GROUP BY 1") for a in attrs if a.unit_bins]
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        for a, sql in sqls:
            [st] = rewriter.classify(sql, adult_schema)
            assert isinstance(st, rewriter.DPStatement) and st.plan is not None, (sql, st)
            # count(col) is count(*) over a column declared without NULLs: one question,
            # over no column (rewriter.canonical)
            counted = a.null_cell is not None or "GROUP BY" in sql
            assert st.plan.view == (f"({a.name})" if counted else "()"), sql
            ours = [r for r in exact_answer(st.plan, adult_pin) if r[-1] != 0]
            theirs = conn.execute(sql).fetchall()
            assert _rows_equal(theirs, ours), (sql, theirs[:5], ours[:5])


def test_the_largest_marginals(pg: Any, adult_schema: Schema, adult_pin: Pin) -> None:
    """Four columns spanning 4,923,072 cells (just under the cell limit), filtered and
    grouped; the rewriter reduces them over the whole marginal."""
    sqls = [
        "SELECT count(*), avg(age), sum(hours_per_week) FROM adult WHERE age >= 30 "
        "AND education IN ('Bachelors', 'Masters') AND hours_per_week < 45 "
        "AND native_country <> 'United-States'",
        "SELECT education, avg(hours_per_week), count(*) FROM adult WHERE (age < 25 OR "
        "hours_per_week > 50) AND native_country IN ('Mexico', 'Canada', 'India') GROUP BY 1",
        "SELECT education_num, max(age), count(*) FROM adult WHERE hours_per_week BETWEEN 35 "
        "AND 45 AND native_country NOT IN ('Mexico') GROUP BY education_num ORDER BY 1",
    ]
    for sql, (_, _, theirs) in zip(sqls, _answers(pg.aggregator_dsn, sqls), strict=True):
        [st] = rewriter.classify(sql, adult_schema)
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None, (sql, st)
        assert st.plan.batch.domain.size == 4_923_072, st.plan.view
        ours = exact_answer(st.plan, adult_pin)
        if "GROUP BY" in sql:
            ours = [r for r in ours if r[-1] != 0]
        assert _rows_equal(theirs, ours), (sql, theirs[:5], ours[:5])


def test_no_column_is_the_row_count(pg: Any, adult_schema: Schema, adult_pin: Pin) -> None:
    """A statement that uses no column is over the empty marginal: the count of all rows."""
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        [(total,)] = conn.execute("SELECT count(*) FROM adult").fetchall()
    assert total == ADULT_ROWS
    for sql in (
        "SELECT count(*) FROM adult",
        'SELECT COUNT(*) AS "count" FROM "public"."adult"',
        "SELECT count(1), sum(1) FROM adult WHERE 1 = 1",
        "SELECT count(*) FROM (SELECT * FROM adult) AS t",
    ):
        [st] = rewriter.classify(sql, adult_schema)
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None
        assert st.plan.view == "()" and st.plan.batch.domain.size == 1
        ours = exact_answer(st.plan, adult_pin)
        assert ours[0][0] == total and all(v == total for v in ours[0]), (sql, ours)
    assert adult_pin.marginal(adult_pin.domain.marginal([])).tolist() == [float(total)]


def test_pin_total_is_row_count(pg: Any, adult_schema: Schema, adult_pin: Pin) -> None:
    """Every Adult row is inside the declared domains: the pin holds all of them, and each
    attribute's marginal sums to the row count (the value attributes of the clamped columns,
    whose masses split each row between its bin's ends, too: to rounding)."""
    assert adult_pin.domain == adult_schema.tables["adult"].domain
    assert round(adult_pin.total, 6) == ADULT_ROWS
    for name in adult_pin.domain.names:
        total = adult_pin.marginal(adult_pin.domain.marginal([name])).sum()
        assert abs(total - ADULT_ROWS) < 1e-6, name


def test_nulls_dates_numeric_exact(pg: Any, nulls_schema: Schema, nulls_pin: Pin) -> None:
    n_attrs = len(nulls_schema.tables["lapras_nulls"].attributes)
    stats = _check(
        pg.aggregator_dsn,
        nulls_schema,
        "lapras_nulls",
        nulls_pin,
        N_NULLS,
        seed=11,
        max_size=n_attrs,
        n_big=0,
    )
    assert stats["statements"] == N_NULLS, stats
    assert all(stats[f"{k} attributes"] > 0 for k in range(1, n_attrs + 1)), stats


def test_pin_sql_over_a_column_named_n(pg: Any, nulls_schema: Schema, nulls_pin: Pin) -> None:
    """``lapras_nulls`` has a declared attribute named ``n``: the pin statement must not
    confuse it with its own count column."""
    assert "n" in nulls_pin.domain.names
    assert nulls_pin.total == 2000
