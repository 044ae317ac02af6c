"""Proxy latency and throughput over loopback (issue 5).

    python -m bench.proxy            # Adult + a 10-million-row synthetic table
    python -m bench.proxy --quick    # Adult + a 1-million-row synthetic table, fewer requests
    python -m bench.proxy.pgbouncer  # beside PgBouncer and direct PostgreSQL (pgbench; issue 18)

Starts the embedded PostgreSQL in a temporary folder, provisions Adult and a synthetic protected
table ``synth`` (``a`` in 0..99, ``b`` in 0..9), runs ``lapras serve`` as its own process (the
real deployment shape) with an epoch per table, and measures with asyncpg clients (1 and 50
concurrent connections, each its own connection):

- passthrough ``SELECT 1`` through the proxy vs directly on PostgreSQL (asyncpg's cached
  prepared statement, and one psycopg/libpq connection with the simple and the extended
  protocol), and through a bare byte pipe (``bench/proxy/pipe.py``: the cost of one more hop
  on this machine, the floor of any proxy); these three are measured in alternating rounds
  and their samples pooled, so that a drift of the machine's speed weighs on all alike;
- a DP COUNT answered from the Matrix Mechanism release (first ask of a predicted query), from a
  stored answer (a repeat), and online with fresh noise (a durable charge per answer);
- the exact COUNT run directly on PostgreSQL, for scale.

Prints a table (p50 / p99 latency in ms, throughput in requests/s) and, with --write-docs,
replaces the body of the "Proxy latency and throughput" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import psycopg

from bench.serving import lapras, percentile, serve, stop, wait_until_serving, write_config

ROOT = Path(__file__).resolve().parents[2]
#: Alternating rounds of the passthrough measurements (see ``interleaved``).
ROUNDS = 5

SYNTH_DECLARATION = """
[tables.synth.columns]
a = "integer"
b = "integer"

[tables.synth.attributes.a]
kind = "integer"
min = 0
max = 99

[tables.synth.attributes.b]
kind = "integer"
min = 0
max = 9

[tables.synth.views]
ab = ["a", "b"]
"""


def _event_loop() -> str:
    """The loop `lapras serve` runs on here: uvloop when installed (the `fast` extra)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


async def sample(dsn: str, queries: list[str], clients: int) -> tuple[list[float], float]:
    """Run ``queries`` round-robin over ``clients`` connections; (latencies in s, elapsed s)."""
    conns = [await asyncpg.connect(dsn) for _ in range(clients)]
    latencies: list[float] = []
    chunks = [queries[i::clients] for i in range(clients)]

    async def worker(conn: asyncpg.Connection, qs: list[str]) -> None:
        for q in qs:
            t = time.perf_counter()
            await conn.fetch(q)
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(worker(c, qs) for c, qs in zip(conns, chunks, strict=True)))
    elapsed = time.perf_counter() - start
    for c in conns:
        await c.close()
    return latencies, elapsed


def summary(latencies: list[float], elapsed: float) -> tuple[float, float, float]:
    """(p50 ms, p99 ms, requests/s)."""
    return (
        1000 * percentile(latencies, 0.5),
        1000 * percentile(latencies, 0.99),
        len(latencies) / elapsed,
    )


async def measure(dsn: str, queries: list[str], clients: int) -> tuple[float, float, float]:
    """Run ``queries`` round-robin over ``clients`` connections; (p50 ms, p99 ms, req/s)."""
    return summary(*await sample(dsn, queries, clients))


def sample_libpq(dsn: str, n: int, protocol: str) -> tuple[list[float], float]:
    """One psycopg (libpq) connection running ``SELECT 1`` n times: ``simple`` is a Query
    message per call (PQexec, as psql and many BI drivers send), ``extended`` an unnamed
    Parse/Bind/Describe/Execute/Sync per call (psycopg without preparing)."""
    latencies: list[float] = []
    with psycopg.connect(dsn, autocommit=True) as conn:

        def once() -> None:
            if protocol == "simple":
                conn.pgconn.exec_(b"SELECT 1")
            else:
                conn.execute("SELECT 1", prepare=False).fetchall()

        for _ in range(100):
            once()
        start = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            once()
            latencies.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - start
    return latencies, elapsed


def interleaved(
    targets: list[tuple[str, Callable[[int], tuple[list[float], float]]]], n: int
) -> list[tuple[str, float, float, float]]:
    """Measure the targets in ROUNDS alternating rounds of n // ROUNDS requests each and pool
    each target's samples: a drift of the machine's speed during the run (the 2 cores are
    shared) then weighs on every target alike. (name, p50 ms, p99 ms, requests/s)."""
    pooled: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name, _ in targets}
    for _ in range(ROUNDS):
        for name, run in targets:
            lat, elapsed = run(n // ROUNDS)
            pooled[name][0].extend(lat)
            pooled[name][1].append(elapsed)
    return [(name, *summary(lat, sum(el))) for name, (lat, el) in pooled.items()]


def provision(pg: Any, rows: int) -> None:
    from proxy.embedded import provision_adult

    provision_adult(pg, "bench", ("bench",))
    with psycopg.connect(pg.dsn(database="bench"), autocommit=True) as conn:
        have = conn.execute("SELECT to_regclass('public.synth') IS NOT NULL").fetchone()
        if not (have and have[0]):
            print(f"loading synth: {rows:,} rows ...", flush=True)
            conn.execute("CREATE TABLE synth (a integer NOT NULL, b integer NOT NULL)")
            conn.execute(
                "INSERT INTO synth SELECT (random() * 99)::int, (random() * 9)::int FROM generate_series(1, %s)",
                (rows,),
            )
            conn.execute("ANALYZE synth")
    from proxy import provision as prov

    with psycopg.connect(pg.dsn(database=prov.state_database("bench")), autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS lapras CASCADE")
    with psycopg.connect(pg.dsn(database="bench")) as conn:
        prov.grant_privileges(conn, "bench", ["public.adult", "public.synth"])
        conn.commit()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--workers", type=int, default=1, help="proxy processes ([server] workers)")
    args = ap.parse_args()
    rows = 1_000_000 if args.quick else 10_000_000
    n_req = 2_000 if args.quick else 10_000

    from proxy.embedded import EmbeddedPostgres, _free_port

    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-proxy-"))
    pg = EmbeddedPostgres(folder / "pg").start()
    server: subprocess.Popen[bytes] | None = None
    pipe: subprocess.Popen[bytes] | None = None
    results: list[tuple[str, int, float, float, float]] = []
    try:
        provision(pg, rows)
        port = _free_port()
        config = write_config(pg, folder, port, workers=args.workers, tables=SYNTH_DECLARATION)
        predicted_adult = [
            f"SELECT count(*) FROM adult WHERE age BETWEEN {a} AND {a + k}"
            for a in range(17, 80)
            for k in (0, 4, 9)
        ]
        predicted_synth = [
            f"SELECT count(*) FROM synth WHERE a BETWEEN {a} AND {a + 9}" for a in range(0, 90)
        ]
        for table, view, predicted in (
            ("adult", "age_sex_income", predicted_adult),
            ("synth", "ab", predicted_synth),
        ):
            pfile = folder / f"{table}.sql"
            pfile.write_text(";\n".join(predicted) + ";\n")
            t = time.perf_counter()
            lapras(
                "epoch",
                "start",
                "--config",
                str(config),
                "--table",
                table,
                "--view",
                view,
                "--predicted",
                str(pfile),
            )
            print(
                f"  epoch start on {table} ({len(predicted)} predicted): {time.perf_counter() - t:.1f} s",
                flush=True,
            )
        server = serve(config)
        proxy_dsn = f"postgresql://bench:bench@127.0.0.1:{port}/bench"
        direct_dsn = pg.dsn(database="bench")
        # The floor of any proxy here: a bare byte pipe on the same event loop.
        pipe_port = _free_port()
        pipe = subprocess.Popen(
            [sys.executable, "-m", "bench.proxy.pipe", str(pipe_port), str(pg.port)], cwd=ROOT
        )
        pipe_dsn = direct_dsn.replace(f":{pg.port}/", f":{pipe_port}/")
        wait_until_serving(proxy_dsn)
        wait_until_serving(pipe_dsn)

        def report(label: str, clients: int, p50: float, p99: float, rps: float) -> None:
            results.append((label, clients, p50, p99, rps))
            print(
                f"  {label:<46} {clients:>3} clients  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  {rps:8.0f}/s",
                flush=True,
            )

        def run(name: str, dsn: str, queries: list[str], clients: int) -> None:
            report(name, clients, *asyncio.run(measure(dsn, queries, clients)))

        hops = [
            ("direct", direct_dsn),
            ("bare byte pipe", pipe_dsn),
            ("through the proxy (passthrough)", proxy_dsn),
        ]
        for clients in (1, 50):
            for name, p50, p99, rps in interleaved(
                [
                    (name, lambda k, d=dsn, c=clients: asyncio.run(sample(d, ["SELECT 1"] * k, c)))
                    for name, dsn in hops
                ],
                n_req,
            ):
                report(f"SELECT 1 via asyncpg, {name}", clients, p50, p99, rps)
        for protocol in ("simple", "extended"):
            for name, p50, p99, rps in interleaved(
                [(name, lambda k, d=dsn, p=protocol: sample_libpq(d, k, p)) for name, dsn in hops],
                n_req,
            ):
                report(f"SELECT 1 via psycopg, {protocol} protocol, {name}", 1, p50, p99, rps)
        for table, predicted in (("adult", predicted_adult), ("synth", predicted_synth)):
            run(f"{table}: DP COUNT from the MM release (first ask)", proxy_dsn, predicted, 1)
            run(
                f"{table}: DP COUNT, stored answer (repeat)",
                proxy_dsn,
                predicted * (n_req // len(predicted)),
                50,
            )
            run(
                f"{table}: DP COUNT, stored answer (repeat)", proxy_dsn, predicted[: n_req // 10], 1
            )
            col = "age" if table == "adult" else "a"
            lo = 17 if table == "adult" else 0
            # Distinct linear queries (a repeat would be answered from storage): ranges of
            # widths 2..7 for one client, 11..16 for fifty.
            fresh = [
                f"SELECT count(*) FROM {table} WHERE {col} BETWEEN {lo + i % 50} AND {lo + i % 50 + 1 + i // 50}"
                for i in range(300)
            ]
            run(f"{table}: DP COUNT online (fresh noise, durable charge)", proxy_dsn, fresh, 1)
            fresh = [
                f"SELECT count(*) FROM {table} WHERE {col} BETWEEN {lo + i % 50} AND {lo + i % 50 + 10 + i // 50}"
                for i in range(300)
            ]
            run(f"{table}: DP COUNT online (fresh noise, durable charge)", proxy_dsn, fresh, 50)
            exact = [f"SELECT count(*) FROM {table} WHERE {col} BETWEEN {lo + 3} AND {lo + 12}"] * (
                50 if table == "synth" else 500
            )
            agg = pg.dsn("lapras_aggregator", "bench")
            run(f"{table}: exact COUNT, direct on PostgreSQL", agg, exact, 1)
    finally:
        if pipe is not None:
            pipe.kill()
        stop(server, timeout=30)
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)

    table = ["| scenario | clients | p50 ms | p99 ms | requests/s |", "|---|---|---|---|---|"]
    table += [
        f"| {n} | {c} | {p50:.2f} | {p99:.2f} | {rps:,.0f} |" for n, c, p50, p99, rps in results
    ]
    text = "\n".join(table)
    print("\n" + text)
    if args.write_docs:
        docs = ROOT / "docs" / "benchmarks.md"
        body = docs.read_text()
        head = "## Proxy latency and throughput (`bench/proxy`)"
        start = body.index(head)
        nxt = body.find("\n## ", start + len(head))
        cmd = (
            "python -m bench.proxy"
            + (" --quick" if args.quick else "")
            + (f" --workers {args.workers}" if args.workers > 1 else "")
            + " --write-docs"
        )
        shape = (
            "proxy as its own process"
            if args.workers == 1
            else f"proxy as {args.workers} worker processes on one port"
        )
        section = (
            f"{head}\n\nCommand: `{cmd}` ({rows:,}-row synthetic table; {shape}, "
            f"clients asyncpg (and one psycopg connection) over loopback, {os.cpu_count()} cores shared by PostgreSQL, the proxy and the clients; "
            f"event loop: {_event_loop()}).\n\n{text}\n"
        )
        docs.write_text(body[:start] + section + (body[nxt:] if nxt != -1 else ""))


if __name__ == "__main__":
    main()
