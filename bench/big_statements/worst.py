"""Another session's new DP statements while several sessions send worst-case statements.

    python -m bench.big_statements --worst                   # 60 s under attack
    python -m bench.big_statements --worst --quick           # 20 s
    python -m bench.big_statements --worst --before DIR      # also the tree in DIR, first
    python -m bench.big_statements --worst --write-docs      # replace the docs section

Starts the embedded PostgreSQL, provisions Adult, starts an epoch over the whole table and
runs ``lapras serve`` (default ``[server]`` limits) as its own process; with ``--before DIR``
the same is done first with the proxy of the tree in DIR (a checkout of an earlier commit).

Client B (asyncpg, one connection) sends *new* DP statements back to back, a new SQL text
each time, so that every one is classified anew: alternately one answered from a stored
release (``SELECT sex AS s<i>, count(*) FROM adult GROUP BY 1``: a new text, the same
question) and one answered with fresh noise (``SELECT count(*) FROM adult WHERE age > a AND
hours_per_week < b``, new bounds each time). Its latencies are timed alone (idle), then while
``--attackers`` sessions each send, one after another and each time with a new constant,
the worst statements of docs/benchmarks.md, "Big statements":

- the issue's ~120-byte statement whose expression spans four wide columns (4,923,072 values);
- a GROUP BY of four wide columns (4,923,072 groups);
- an expression over three wide columns (307,692 values: about 2 s of work, answered);
- a 1 MiB deep expression (``age = 1+1+...``);
- a 1 MiB IN list of every age (answered: the whole table's count).

Prints B's p50 / p99 / max per kind and load, and what the attackers' statements got (their
outcome, how many, the median time each took).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import asyncpg

from bench.serving import percentile, stop, wait_until_serving, write_config

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
SECTION = "## Worst-case statements beside new DP statements (`bench/big_statements --worst`)"


def attacks(only: str | None = None) -> list[tuple[str, object]]:
    """(kind, a function of a counter giving a new text of that kind each time); ``only``:
    the kinds whose name contains it."""
    from bench.big_statements.__main__ import deep_sum, in_list

    deep, listed = deep_sum(MIB - 16), in_list(MIB - 32).rstrip()
    kinds = [
        (
            "expression over 4 wide columns (120 bytes)",
            lambda k: (
                "SELECT count(*) FROM adult WHERE CASE WHEN age > "
                f"{20 + k % 60} THEN hours_per_week ELSE education_num END + "
                "length(native_country) > 10"
            ),
        ),
        (
            "GROUP BY 4 wide columns",
            lambda k: (
                "SELECT age, education, hours_per_week, native_country, count(*) "
                f"FROM adult WHERE age > {17 + k % 60} GROUP BY 1, 2, 3, 4"
            ),
        ),
        (
            "expression over 3 wide columns (307,692 values)",
            lambda k: (
                "SELECT count(*) FROM adult WHERE length(native_country) + age + "
                f"hours_per_week > {60 + k % 100}"
            ),
        ),
        ("1 MiB deep expression", lambda k: deep + f"+{k}"),
        ("1 MiB IN list", lambda k: listed + f" AND age <> {1000 + k}"),
    ]
    return [kd for kd in kinds if only is None or only in kd[0]]


async def client_b(dsn: str, stop_at: float, start: int) -> dict[str, list[float]]:
    """B's latencies (seconds) by kind, until ``stop_at`` (monotonic)."""
    conn = await asyncpg.connect(dsn)
    out: dict[str, list[float]] = defaultdict(list)
    i = start
    try:
        while time.monotonic() < stop_at:
            i += 1
            if i % 2:
                kind, sql = "stored", f"SELECT sex AS s{i}, count(*) FROM adult GROUP BY 1"
            else:
                a, b = 17 + i % 73, 2 + (i // 73) % 97
                kind = "fresh"
                sql = f"SELECT count(*) FROM adult WHERE age > {a} AND hours_per_week < {b}"
            t = time.perf_counter()
            await conn.fetch(sql)
            out[kind].append(time.perf_counter() - t)
    finally:
        await conn.close()
    return out


async def attacker(
    dsn: str,
    stop_at: float,
    offset: int,
    results: dict[str, list[tuple[float, str]]],
    only: str | None = None,
) -> None:
    kinds = attacks(only)
    k = offset
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        while time.monotonic() < stop_at:
            kind, make = kinds[k % len(kinds)]
            sql = make(k)  # type: ignore[operator]
            k += 1
            t = time.perf_counter()
            try:
                await conn.execute(sql)
                outcome = "answered"
            except asyncpg.PostgresError as e:
                outcome = e.sqlstate or "?"
            results[kind].append((time.perf_counter() - t, outcome))
    finally:
        conn.terminate()


async def settle(dsn: str, limit: float = 300.0) -> None:
    """Wait until a new statement is answered within 200 ms (the work of the phase before
    is over), at most ``limit`` seconds."""
    end = time.monotonic() + limit
    n = 0
    while time.monotonic() < end:
        n += 1
        conn = await asyncpg.connect(dsn)
        try:
            t = time.perf_counter()
            await conn.fetch(f"SELECT sex AS settle{n}, count(*) FROM adult GROUP BY 1")
            if time.perf_counter() - t < 0.2:
                return
        finally:
            await conn.close()
        await asyncio.sleep(1)


async def phase(
    dsn: str, seconds: float, attackers: int, start: int, only: str | None = None
) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, str]]]]:
    results: dict[str, list[tuple[float, str]]] = defaultdict(list)
    stop_at = time.monotonic() + seconds
    tasks = [
        asyncio.create_task(attacker(dsn, stop_at + 3600, i * 2, results, only))
        for i in range(attackers)
    ]
    if tasks:
        await asyncio.sleep(1.0)  # the attackers' statements are under way
    b = await client_b(dsn, time.monotonic() + seconds, start)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await settle(dsn)
    return b, results


def run_tree(root: Path, args: argparse.Namespace, label: str) -> list[str]:
    """Both phases against the proxy of the tree ``root``; the table rows."""
    from proxy.embedded import EmbeddedPostgres, _free_port, provision_adult

    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-worst-"))
    pg = EmbeddedPostgres(folder / "pg").start()
    server: subprocess.Popen[bytes] | None = None
    rows: list[str] = []
    try:
        provision_adult(pg, "bench", ("bench",))
        port = _free_port()
        config = write_config(pg, folder, port, stream_length=100_000)
        pfile = folder / "predicted.sql"
        pfile.write_text("SELECT sex, count(*) FROM adult GROUP BY sex;\n")
        subprocess.run(
            [sys.executable, "-m", "proxy.cli", "epoch", "start", "--config", str(config),
             "--table", "adult", "--predicted", str(pfile)],
            check=True, cwd=root,
        )  # fmt: skip
        server = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)], cwd=root
        )
        dsn = f"postgresql://bench:bench@127.0.0.1:{port}/bench"
        wait_until_serving(dsn)
        asyncio.run(phase(dsn, 3, 0, 10_000_000))  # warm-up
        for name, attackers, seconds in (
            ("alone", 0, min(args.seconds, 20)),
            (f"{args.attackers} sessions sending the worst statements", args.attackers,
             args.seconds),
        ):  # fmt: skip
            b, results = asyncio.run(
                phase(dsn, seconds, attackers, 20_000_000 * len(rows), args.only)
            )
            cells = []
            for kind in ("stored", "fresh"):
                lat = b[kind]
                if not lat:
                    cells.append("0 | -")
                    continue
                p50, p99, mx = (1000 * percentile(lat, q) for q in (0.5, 0.99, 1.0))
                cells.append(f"{len(lat):,} | {p50:,.1f} / {p99:,.1f} / {mx:,.1f}")
            attacks_text = "; ".join(
                f"{kind}: "
                + ", ".join(
                    f"{sum(1 for _, o in rs if o == outcome)} {outcome}"
                    for outcome in sorted({o for _, o in rs})
                )
                + f" in {statistics.median(t for t, _ in rs):.2f} s"
                for kind, rs in results.items()
            )
            row = f"| {label} | {name} | {cells[0]} | {cells[1]} | {attacks_text or '-'} |"
            print(row, flush=True)
            rows.append(row)
    finally:
        stop(server)
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worst", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--attackers", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, help="a tree to measure first")
    ap.add_argument("--only", default=None, help="only the attacks whose name contains this")
    args = ap.parse_args(argv)
    args.seconds = 20.0 if args.quick else 60.0
    rows: list[str] = []
    if args.before is not None:
        rows += run_tree(args.before.resolve(), args, "before")
    rows += run_tree(ROOT, args, "after" if args.before is not None else "this tree")
    cmd = "python -m bench.big_statements --worst" + (" --quick" if args.quick else "")
    if args.before is not None:
        cmd += " --before DIR"
    table = "\n".join(
        [
            "| tree | load | B: new texts answered from a stored release | p50 / p99 / max ms "
            "| B: new texts answered with fresh noise | p50 / p99 / max ms | the attackers' "
            "statements: outcome, number, median time |",
            "|---|---|---:|---:|---:|---:|---|",
            *rows,
        ]
    )
    print("\n" + table)
    if args.write_docs:
        docs = ROOT / "docs" / "benchmarks.md"
        body = docs.read_text()
        section = (
            f"{SECTION}\n\nCommand: `{cmd} --write-docs` (the proxy as its own process, default "
            f"`[server]` limits; {os.cpu_count()} cores shared by PostgreSQL, the proxy, its "
            f"worker processes and the clients).\n\n{table}\n"
        )
        start = body.find(SECTION)
        if start == -1:
            docs.write_text(body.rstrip("\n") + "\n\n" + section)
        else:
            nxt = body.find("\n## ", start + len(SECTION))
            reading = body.find("<!-- reading:worst -->", start)
            keep = body[reading:nxt] if reading != -1 and (nxt == -1 or reading < nxt) else ""
            rest = body[nxt:] if nxt != -1 else ""
            docs.write_text(body[:start] + section + ("\n" + keep if keep else "") + rest)
