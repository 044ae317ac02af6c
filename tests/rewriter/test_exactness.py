"""Exactness: the IR applied to the exact histogram equals PostgreSQL's answer, to the last integer.

Random accepted queries (seeded) over the Adult declaration and over a small table with NULLs,
dates, booleans and numeric bins are run (a) on PostgreSQL as the aggregator role and (b) as
``postprocess(plan, plan.batch.answer(histogram))`` with the histogram computed by
``histogram_sql`` on the same backend. GROUP BY returns every public group (also empty ones)
where PostgreSQL returns only non-empty groups; the generator adds a trailing ``count(*)`` to
grouped queries so empty groups can be dropped before comparing.
"""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from rewriter_querygen import QueryGenerator

import rewriter
from proxy import provision
from rewriter.schema import Schema

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
[tables.lapras_nulls.views]
all = ["n", "c", "b", "d", "x", "w"]
small = ["n", "c", "b"]
"""

# a few thousand in all; LAPRAS_EXACTNESS_SCALE multiplies them for longer runs
SCALE = float(os.environ.get("LAPRAS_EXACTNESS_SCALE", "1"))
N_ADULT = int(600 * SCALE)
N_NULLS = int(1200 * SCALE)


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


def _histograms(conn: psycopg.Connection[Any], schema: Schema, table: str) -> dict[str, np.ndarray]:
    out = {}
    for view in schema.tables[table].views:
        rows = conn.execute(rewriter.histogram_sql(schema, table, view.name)).fetchall()
        out[view.name] = rewriter.histogram_from_rows(schema, table, view.name, rows)
    return out


def _run_all(dsn: str, sqls: list[str]) -> list[tuple[list[str], list[int], list[tuple[Any, ...]]]]:
    out = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET jit = off")
        for sql in sqls:
            cur = conn.execute(sql)
            rows = cur.fetchall()
            assert cur.description is not None
            out.append(
                ([d.name for d in cur.description], [d.type_code for d in cur.description], rows)
            )
    return out


def _check(dsn: str, schema: Schema, table: str, n: int, seed: int) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        hists = _histograms(conn, schema, table)
    gen = QueryGenerator(schema.tables[table], seed)
    r = random.Random(seed)
    views = schema.tables[table].views
    queries = [gen.query(r.choice(views)) for _ in range(n)]
    # PostgreSQL answers in a worker thread while the rewriter works in this one
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(_run_all, dsn, [q.sql for q in queries])
        statements = [rewriter.classify(q.sql, schema) for q in queries]
        pg_results = future.result()
    failures: list[str] = []
    for q, sts, (names, oids, pg_rows) in zip(queries, statements, pg_results, strict=True):
        [st] = sts
        if not isinstance(st, rewriter.DPStatement) or st.plan is None:
            failures.append(f"not accepted: {q.sql} -> {st}")
            continue
        plan = st.plan
        ours = rewriter.postprocess(plan, plan.batch.answer(hists[plan.view]))
        if names != [c.name for c in plan.columns] or oids != [c.type_oid for c in plan.columns]:
            failures.append(
                f"columns differ: {q.sql}: pg {list(zip(names, oids, strict=True))} ours {plan.columns}"
            )
            continue
        if q.grouped:
            ours = [row for row in ours if row[-1] != 0]
        if not _rows_equal(pg_rows, ours):
            failures.append(
                f"answers differ: {q.sql}\n pg   {sorted(pg_rows, key=repr)[:6]}\n ours {sorted(ours, key=repr)[:6]}"
            )
    assert not failures, f"{len(failures)} of {n} differ:\n" + "\n".join(failures[:10])
    return n


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


def test_adult_exact(pg: Any, adult_schema: Schema) -> None:
    assert _check(pg.aggregator_dsn, adult_schema, "adult", N_ADULT, seed=20260501) == N_ADULT


def test_nulls_dates_numeric_exact(pg: Any, nulls_schema: Schema) -> None:
    assert _check(pg.aggregator_dsn, nulls_schema, "lapras_nulls", N_NULLS, seed=11) == N_NULLS


def test_histogram_total_is_row_count(pg: Any, adult_schema: Schema) -> None:
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as conn:
        hists = _histograms(conn, adult_schema, "adult")
    for view, h in hists.items():
        assert h.sum() == 32561, view
