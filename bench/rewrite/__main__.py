"""``python -m bench.rewrite``: median and p99 time to classify and reduce dashboard queries.

Each sample classifies the SQL text from scratch (split, parse, guard, normalise, reduce to a
QueryBatch): no caching. Prints a Markdown table (paste under "## Rewriter" in
docs/benchmarks.md). ``--exactness N --dsn DSN`` also runs N random accepted queries against a
PostgreSQL with Adult loaded (as the aggregator) and checks them exactly, as the test suite does.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import rewriter

ROOT = Path(__file__).resolve().parents[2]

QUERIES: list[tuple[str, str, list[object] | None]] = [
    ("COUNT, one-attribute range", "SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39", None),
    ("COUNT, Metabase quoting", 'SELECT COUNT(*) AS "count" FROM "public"."adult" WHERE "public"."adult"."sex" = \'Female\'', None),
    ("COUNT, $1 bound later (classify + bind)", "SELECT count(*) FROM adult WHERE age > $1", [30]),
    ("GROUP BY one attribute", 'SELECT "sex", COUNT(*) AS "count" FROM "public"."adult" GROUP BY "sex" ORDER BY "sex"', None),
    ("GROUP BY two attributes", "SELECT race, sex, count(*) FROM adult GROUP BY 1, 2", None),
    ("GROUP BY two attributes + WHERE, AVG", "SELECT race, income, count(*), avg(age) FROM adult WHERE sex = 'Male' GROUP BY 1, 2", None),
    ("GROUP BY age (74 groups), HAVING, ORDER BY", "SELECT age, count(*) AS n FROM adult GROUP BY age HAVING count(*) > 10 ORDER BY n DESC LIMIT 10", None),
    ("passthrough: psql \\d adult", "SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relname OPERATOR(pg_catalog.~) '^(adult)$' COLLATE pg_catalog.default AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3", None),
    ("refused: SELECT * FROM adult", "SELECT * FROM adult", None),
]  # fmt: skip


def _time(sql: str, params: list[object] | None, schema: rewriter.Schema, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        [st] = rewriter.classify(sql, schema)
        if isinstance(st, rewriter.DPStatement) and st.plan is None:
            rewriter.bind(st, params or [])
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


def _p99(xs: list[float]) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(0.99 * len(ys)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rewrite")
    ap.add_argument("-n", type=int, default=1000, help="samples per query (default 1000)")
    ap.add_argument("--exactness", type=int, default=0, help="also check N random queries exactly")
    ap.add_argument("--dsn", help="aggregator DSN of a PostgreSQL with Adult (for --exactness)")
    args = ap.parse_args(argv)
    schema = rewriter.load_schema(ROOT / "sql_fixtures" / "adult" / "lapras.toml")
    print(
        f"python {platform.python_version()}, {platform.machine()}, n={args.n} samples per query\n"
    )
    for _ in range(100):  # global warm-up (imports, caches, CPU frequency)
        for _, sql, _ in QUERIES:
            rewriter.classify(sql, schema)
    print("| query | kind | view (cells) | linear queries | median ms | p99 ms |")
    print("|---|---|---|---:|---:|---:|")
    for title, sql, params in QUERIES:
        [st] = rewriter.classify(sql, schema)
        for _ in range(20):  # warm-up
            rewriter.classify(sql, schema)
        samples = _time(sql, params, schema, args.n)
        kind, view, nq = type(st).__name__, "", ""
        if isinstance(st, rewriter.DPStatement):
            plan = st.plan or rewriter.bind(st, params or [])
            view, nq = f"{plan.view} ({plan.domain.size:,})", str(plan.batch.num_queries)
        print(
            f"| {title} | {kind} | {view} | {nq} | {statistics.median(samples):.3f} | {_p99(samples):.3f} |"
        )
    if args.exactness:
        if not args.dsn:
            ap.error("--exactness needs --dsn")
        sys.path.insert(0, str(ROOT / "tests" / "rewriter"))
        from test_exactness import _check  # type: ignore[import-not-found]

        t0 = time.perf_counter()
        _check(args.dsn, schema, "adult", args.exactness, seed=int(time.time()))
        print(
            f"\nexactness: {args.exactness} random queries exact in {time.perf_counter() - t0:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
