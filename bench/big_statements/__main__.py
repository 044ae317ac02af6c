"""Stored DP answers while another client sends big statements; the proxy's memory after them.

    python -m bench.big_statements                 # 3 big statements of each kind, 8 at once
    python -m bench.big_statements --quick         # 1 of each kind, 2 at once
    python -m bench.big_statements --write-docs    # also replace the docs section
    python -m bench.big_statements --worst         # another session's new DP statements while
                                                   # sessions send worst-case ones (worst.py)

Starts the embedded PostgreSQL in a temporary folder, provisions Adult, starts an epoch, and
runs ``lapras serve`` as its own process (the deployment shape; default ``[server]
max_statement_size`` of 1 MiB). Client B (asyncpg, one connection) repeats ``SELECT sex,
count(*) FROM adult GROUP BY sex`` (after the first ask a stored answer: the proxy answers it
from its read callback, no budget, no backend) back to back and times every answer:

- alone (idle);
- while client A sends, one after another, 2 MiB statements (``SELECT 1+1+...``): refused with
  54000 by size, before anything is split, routed or parsed;
- while A sends 1 MiB statements just under the limit over the protected table, each
  classified in the router's worker thread: an IN list of every age (answered: it is the same
  linear query as the whole table) and a deep ``age = 1+1+...`` (refused, 0A000).

Prints p50 / p99 / max of B's answers per load and how long A's statements took; then the
proxy's resident memory (VmRSS from /proc) before and after several sessions send a 1 MiB
statement at once, and after a 2 MiB one each (refused by size). With --write-docs, replaces
the body of the "Big statements" section of docs/benchmarks.md.
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
from pathlib import Path

import asyncpg

from bench.serving import lapras, percentile, serve, stop, wait_until_serving, write_config

ROOT = Path(__file__).resolve().parents[2]
STORED = "SELECT sex, count(*) FROM adult GROUP BY sex"
MIB = 1 << 20


def in_list(size: int) -> str:
    """``SELECT count(*) FROM adult WHERE age IN (17, 18, ...)`` of exactly ``size`` bytes."""
    head = "SELECT count(*) FROM adult WHERE age IN ("
    items: list[str] = []
    n = len(head) + len("17)")
    for i in range(size):
        item = f"{17 + i % 74}, "
        if n + len(item) > size:
            break
        items.append(item)
        n += len(item)
    sql = head + "".join(items) + "17)"
    return sql + " " * (size - len(sql))


def deep_sum(size: int) -> str:
    """``SELECT count(*) FROM adult WHERE age = 1+1+...`` of ``size`` bytes."""
    head = "SELECT count(*) FROM adult WHERE age = 1"
    return head + "+1" * ((size - len(head)) // 2)


def big_innocent(size: int) -> str:
    """``SELECT 1+1+...`` of ``size`` bytes (names nothing protected)."""
    return "SELECT 1" + "+1" * ((size - 8) // 2)


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process ``pid`` in MB: resident now, and its peak so far."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


async def send(conn: asyncpg.Connection, sql: str) -> tuple[float, str]:
    """Send ``sql`` once (a named Parse, as asyncpg prepares it); (seconds, outcome:
    'answered' or the SQLSTATE)."""
    t = time.perf_counter()
    try:
        await conn.fetch(sql)
        outcome = "answered"
    except asyncpg.PostgresError as e:
        outcome = e.sqlstate or "?"
    return time.perf_counter() - t, outcome


async def big_statement(dsn: str, sql: str) -> tuple[float, str]:
    """:func:`send` on a new connection."""
    conn = await asyncpg.connect(dsn)
    try:
        return await send(conn, sql)
    finally:
        await conn.close()


async def under_load(
    dsn: str, statements: list[str], n_idle: int
) -> tuple[list[float], list[tuple[float, str]]]:
    """B's answer latencies (s) while A sends ``statements`` one after another (or, with
    none, ``n_idle`` answers alone), and A's (seconds, outcome) per statement."""
    b = await asyncpg.connect(dsn)
    await b.fetch(STORED)  # the first ask: from the release; every later one is stored
    latencies: list[float] = []
    done = asyncio.Event()
    results: list[tuple[float, str]] = []

    async def client_a() -> None:
        await asyncio.sleep(0.2)  # B is answering before A starts
        for sql in statements:
            results.append(await big_statement(dsn, sql))
        done.set()

    task = asyncio.create_task(client_a()) if statements else None
    if task is None:
        done.set()
    while not done.is_set() or (task is None and len(latencies) < n_idle):
        t = time.perf_counter()
        await b.fetch(STORED)
        latencies.append(time.perf_counter() - t)
        if task is None and len(latencies) >= n_idle:
            break
    if task is not None:
        await task
    await b.close()
    return latencies, results


async def at_once(
    dsn: str, sql: str, sessions: int, pid: int
) -> tuple[list[tuple[float, str]], tuple[float, float]]:
    """``sessions`` connections send ``sql`` at once; their outcomes, and the proxy's memory
    (:func:`rss_mb`) a second later, the sessions still open and idle."""
    conns = [await asyncpg.connect(dsn) for _ in range(sessions)]
    try:
        results = list(await asyncio.gather(*(send(c, sql) for c in conns)))
        await asyncio.sleep(1)
        return results, rss_mb(pid)
    finally:
        for c in conns:
            await c.close()


def main() -> None:
    if "--worst" in sys.argv[1:]:
        from bench.big_statements import worst

        worst.main(sys.argv[1:])
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    repeat = 1 if args.quick else 3
    sessions = 2 if args.quick else 8
    n_idle = 500 if args.quick else 2000

    from proxy.embedded import EmbeddedPostgres, _free_port, provision_adult

    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-big-"))
    pg = EmbeddedPostgres(folder / "pg").start()
    server: subprocess.Popen[bytes] | None = None
    rows: list[tuple[str, int, float, float, float, str]] = []
    memory: list[tuple[str, float, float]] = []
    try:
        provision_adult(pg, "bench", ("bench",))
        port = _free_port()
        config = write_config(pg, folder, port, stream_length=1000)
        pfile = folder / "predicted.sql"
        pfile.write_text(STORED + ";\n")
        lapras("epoch", "start", "--config", str(config), "--table", "adult",
               "--view", "age_sex_income", "--predicted", str(pfile))  # fmt: skip
        server = serve(config)
        dsn = f"postgresql://bench:bench@127.0.0.1:{port}/bench"
        wait_until_serving(dsn)
        asyncio.run(under_load(dsn, [], 200))  # warm-up
        memory.append(("after start-up and a warm-up", *rss_mb(server.pid)))

        loads = [
            ("idle", []),
            ("2 MiB `SELECT 1+1+...`, refused by size (54000)", [big_innocent(2 * MIB)] * 10 * repeat),
            ("1 MiB IN list of every age over adult, classified in the worker thread",
             [in_list(MIB - 1)] * repeat),
            ("1 MiB `age = 1+1+...` over adult, classified in the worker thread",
             [deep_sum(MIB - 1)] * repeat),
        ]  # fmt: skip
        for label, statements in loads:
            lat, results = asyncio.run(under_load(dsn, statements, n_idle))
            took = (
                f"{percentile([r[0] for r in results], 0.5):.2f} s ("
                + ", ".join(sorted({r[1] for r in results}))
                + ")"
                if results
                else ""
            )
            p50, p99, mx = (1000 * percentile(lat, q) for q in (0.5, 0.99, 1.0))
            rows.append((label, len(lat), p50, p99, mx, took))
            print(f"  {label:<72} {len(lat):>6} answers  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms"
                  f"  max {mx:8.2f} ms  {took}", flush=True)  # fmt: skip
        alone = asyncio.run(at_once(dsn, in_list(MIB - 1), 1, server.pid))[0][0]
        rows.append(("(the IN list alone, nothing else on the proxy)", 0, 0, 0, 0,
                     f"{alone[0]:.2f} s ({alone[1]})"))  # fmt: skip
        memory.append(("after the loads above", *rss_mb(server.pid)))
        for what, sql in (
            ("a 1 MiB IN list", in_list(MIB - 1)),
            ("a 2 MiB statement", big_innocent(2 * MIB)),
        ):
            t = time.perf_counter()
            outcomes, mem = asyncio.run(at_once(dsn, sql, sessions, server.pid))
            took = time.perf_counter() - t - 1
            kinds = ", ".join(sorted({o[1] for o in outcomes}))
            memory.append((f"{sessions} sessions sent {what} at once ({kinds} within {took:.0f} s)"
                           ", still open", *mem))  # fmt: skip
            time.sleep(2)
            memory.append(("the sessions closed, 2 s later", *rss_mb(server.pid)))
    finally:
        stop(server)
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)

    cmd = "python -m bench.big_statements" + (" --quick" if args.quick else "")
    table = [
        f"| load (`{cmd}`) | timed answers | p50 ms | p99 ms | max ms | each big statement took |",
        "|---|---|---|---|---|---|",
    ]
    for label, n, p50, p99, mx, took in rows:
        if n:
            table.append(f"| {label} | {n:,} | {p50:.2f} | {p99:.2f} | {mx:.2f} | {took} |")
        else:
            table.append(f"| {label} | | | | | {took} |")
    mem = ["| proxy process | RSS MB | peak RSS so far MB |", "|---|---|---|"]
    mem += [f"| {label} | {now:.0f} | {peak:.0f} |" for label, now, peak in memory]
    text = "\n".join(table) + "\n\n" + "\n".join(mem)
    print("\n" + text)
    if args.write_docs:
        docs = ROOT / "docs" / "benchmarks.md"
        body = docs.read_text()
        head = "## Big statements (`bench/big_statements`)"
        start = body.find(head)
        section = (
            f"{head}\n\nCommand: `{cmd} --write-docs` (the proxy as its own process, "
            f"{os.cpu_count()} cores shared by PostgreSQL, the proxy and the clients).\n\n"
            f"{text}\n"
        )
        if start == -1:
            docs.write_text(body.rstrip("\n") + "\n\n" + section)
        else:
            nxt = body.find("\n## ", start + len(head))
            reading = body.find("<!-- reading:big -->", start)
            keep = body[reading:nxt] if reading != -1 and (nxt == -1 or reading < nxt) else ""
            rest = body[nxt:] if nxt != -1 else ""
            docs.write_text(body[:start] + section + ("\n" + keep if keep else "") + rest)


if __name__ == "__main__":
    main()
