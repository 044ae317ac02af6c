"""The cost of a durable charge, and proof that stored answers never touch the write path.

    python -m bench.ledger                 # 200 fresh answers, 74 MM answers, 300 repeats
    python -m bench.ledger --quick         # fewer
    python -m bench.ledger --write-docs    # also replace the "Ledger" section of docs/benchmarks.md
    python -m bench.ledger --group-commit [--quick] [--rounds N] [--write-docs]
                                           # group commit before / after (bench/ledger/group.py)
    python -m bench.ledger --dp-off-loop [--quick] [--rounds N] [--before PATH] [--write-docs]
                                           # DP answers off the event loop: HEAD / working tree
                                           # through lapras serve (bench/ledger/offloop.py)
    python -m bench.ledger --default-mode [--rounds N] [--before PATH] [--write-docs]
                                           # fresh answers in the default mode, no P:
                                           # HEAD / working tree (bench/ledger/defaultmode.py)
    python -m bench.ledger --replay [--answers N] [--rounds N] [--write-docs]
                                           # an epoch's answers map as it grows, in memory:
                                           # before / after (bench/ledger/replay.py)

Starts the embedded PostgreSQL (``synchronous_commit = on``, checked) in a temporary folder with
Adult, and measures, inside one process:

1. the ledger alone: one durable charge = ``PgLedger.exclusive`` (session advisory lock on the
   epoch, status check, fold of nothing new) + append of one ``Charged`` event committed with
   ``synchronous_commit = on``; and the same commit with ``durable=False`` for comparison;
2. ``EpochService.answer`` per decision kind: FRESH (charge committed durably, noise drawn,
   release committed durably), MATRIX (answered from the Matrix Mechanism release; one
   asynchronous commit of the ``Answered`` event), REPEAT (the stored answer: no ledger access),
   for the default configuration (GLS reuse of stored releases) and with ``reuse = false``;
3. the ledger's row count and the backend's commit counter before and after the REPEAT phase;
4. end to end through the proxy (``lapras serve`` as its own process, one psycopg client).

``OPENBLAS_NUM_THREADS=1`` is set for this process and the proxy (see docs/admin.md: under
load, OpenBLAS's threads make each GLS update of the default configuration far slower).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import asyncio
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

import rewriter
import sql_fixtures.adult as adult
from dp import engine
from dp.accountant import NoiseKind
from dp.domain import Domain
from dp.noise import SeededSampler
from dp.pacing import Pool
from dp.pin import Pin
from proxy import provision
from proxy.app import engine_config
from proxy.config import parse_config
from proxy.embedded import EmbeddedPostgres, provision_adult
from proxy.epochs import EpochService
from proxy.ledger import PgLedger

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "lapras_bench_ledger"
HEADING = "## Ledger (`bench/ledger`)"
NOTE = """
Reading the table: a *durable charge* is one round of the ledger's write path (advisory lock,
epoch status check, fold of new events, one INSERT, COMMIT with `synchronous_commit = on`); the
synchronous commit's fsync is most of the difference to the asynchronous one. A FRESH answer
inside the proxy is two durable commits (the charge, then the release), the noise and the
engine's work (in the default mode, the GLS combination with the marginal's earlier releases:
one eigendecomposition of the 296 x 296 information matrix per fresh release; the gap
between the two FRESH rows). MATRIX answers commit one
event asynchronously; REPEAT answers are served from memory and never reach the ledger (row
count and write-path entries unchanged). End-to-end rows add the rewriter, the backend's
Describe of the statement, the query-log insert and the wire.
"""


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000.0


def cells() -> list[str]:
    return [
        f"SELECT count(*) FROM adult WHERE age = {a} AND sex = '{s}' AND income = '{i}'"
        for a in range(17, 91)
        for s in ("Female", "Male")
        for i in ("<=50K", ">50K")
    ]


def marginals() -> list[str]:
    return [f"SELECT count(*) FROM adult WHERE age = {a}" for a in range(17, 91)]


def config_text(pg: EmbeddedPostgres, reuse: bool) -> str:
    return (
        adult.DECLARATION.read_text()
        + f"""
[server]
listen = "127.0.0.1:0"
shutdown_grace = 1

[backend]
aggregator_dsn = "{pg.dsn(provision.AGGREGATOR, DATABASE)}"
passthrough_dsn = "{pg.dsn(provision.PASSTHROUGH, DATABASE)}"
state_dsn = "{state_dsn(pg)}"

[[users]]
name = "analyst"
password = "bench"

[privacy]
epsilon = 1.0
delta = 1e-3
stream_length = 2000
view = "age_sex_income"
reuse = {"true" if reuse else "false"}
"""
    )


@contextmanager
def adult_pg(prefix: str) -> Iterator[tuple[EmbeddedPostgres, Path]]:
    """The embedded PostgreSQL in a new temporary folder, Adult provisioned in
    :data:`DATABASE` for the user ``analyst``; stopped and removed afterwards. Yields the
    server and the folder (free for the benchmark's own files)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    pg = EmbeddedPostgres(folder / "pg").start()
    try:
        provision_adult(pg, DATABASE, ("analyst",))
        yield pg, folder
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)


def state_dsn(pg: EmbeddedPostgres) -> str:
    """The proxy's state database (schema lapras), the aggregator's alone."""
    return pg.dsn(provision.AGGREGATOR, provision.state_database(DATABASE))


async def drop_state(pg: EmbeddedPostgres) -> None:
    state = pg.dsn(database=provision.state_database(DATABASE))
    async with await psycopg.AsyncConnection.connect(state, autocommit=True) as admin:
        await admin.execute("SET lock_timeout = '10s'")
        await admin.execute("DROP SCHEMA IF EXISTS lapras CASCADE")


class CountingLedger(PgLedger):
    """The PostgreSQL ledger, counting entries into its write path (``exclusive``)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        super().__init__(conn)
        self.exclusive_calls = 0

    def exclusive(self, epoch_id: int, after: int) -> Any:
        self.exclusive_calls += 1
        return super().exclusive(epoch_id, after)


async def ledger_rows(
    conn: psycopg.AsyncConnection[Any], ledger: CountingLedger
) -> tuple[int, int]:
    """(rows in lapras.ledger, entries into the ledger's write path so far)."""
    cur = await conn.execute("SELECT count(*) FROM lapras.ledger")
    rows = await cur.fetchone()
    assert rows is not None
    return int(rows[0]), ledger.exclusive_calls


async def bench_ledger_only(pg: EmbeddedPostgres, n: int) -> dict[str, list[float]]:
    """A durable charge on a scratch epoch (lock + fold + append + commit), sync vs async."""
    ledger = await PgLedger.connect(state_dsn(pg))
    cfg = engine.EngineConfig(epsilon=1.0, delta=1e-3, stream_length=10 * n)
    domain = Domain.of(("cell", 4))
    started = engine.EpochStarted(config=cfg, domain=domain, predicted=())
    state = engine.apply(None, started)
    epoch = await ledger.create_epoch(
        table="bench_scratch",
        view="cells",
        config=cfg,
        pin=Pin.from_dense(domain, np.zeros(4)),
        events=[started],
        actor="bench",
        reason="bench.ledger scratch epoch",
    )
    out: dict[str, list[float]] = defaultdict(list)
    seq = 1
    for i in range(2 * n):
        durable = i % 2 == 0
        ev = engine.Charged(
            position=i + 1,
            b=i + 1,
            key=f"bench-{i}",
            pool=Pool.BAD,
            amount=1e-9,
            noise=NoiseKind.GAUSSIAN,
            scale=1.0,
            sensitivity=1.0,
            pacing=state.pacing,
        )
        t = time.perf_counter()
        async with ledger.exclusive(epoch, seq) as tx:
            await tx.append([ev], durable=durable)
            seq = tx.seq
        out["durable" if durable else "async"].append(time.perf_counter() - t)
    await ledger.close_epoch("bench_scratch", actor="bench", reason="done")
    await ledger.close()
    return out


async def bench_service(
    pg: EmbeddedPostgres, reuse: bool, n_fresh: int, n_repeat: int
) -> tuple[dict[str, list[float]], tuple[int, int], tuple[int, int]]:
    config = parse_config(config_text(pg, reuse), "bench.toml")
    dsn = pg.dsn(provision.AGGREGATOR, DATABASE)
    await drop_state(pg)
    base = await PgLedger.connect(state_dsn(pg))
    ledger = CountingLedger(base._conn)
    seeds = itertools.count(1)
    service = EpochService(
        schema=config.schema,
        ledger=ledger,
        aggregator_dsn=dsn,
        sampler=lambda: SeededSampler(next(seeds)),
    )
    async with await psycopg.AsyncConnection.connect(state_dsn(pg), autocommit=True) as conn:
        cur = await conn.execute("SHOW synchronous_commit")
        row = await cur.fetchone()
        assert row is not None and row[0] == "on", "the benchmark needs synchronous_commit = on"
        await service.start_epoch(
            table="adult",
            view="age_sex_income",
            config=engine_config(dict(config.privacy)),
            predicted=marginals(),
            actor="bench",
            reason="bench.ledger",
        )

        def plan(sql: str) -> rewriter.Plan:
            (st,) = rewriter.classify(sql, config.schema)
            assert isinstance(st, rewriter.DPStatement) and st.plan is not None
            return st.plan

        fresh_plans = [plan(q) for q in cells()[:n_fresh]]
        matrix_plans = [plan(q) for q in marginals()]
        times: dict[str, list[float]] = defaultdict(list)
        await service.answer(matrix_plans[0])  # warm: load the epoch's state
        for p in [*matrix_plans[1:], *fresh_plans]:
            t = time.perf_counter()
            ans = await service.answer(p)
            times[ans.kind.value].append(time.perf_counter() - t)
        before = await ledger_rows(conn, ledger)
        answered = [*matrix_plans, *fresh_plans]
        for i in range(n_repeat):
            t = time.perf_counter()
            ans = await service.answer(answered[i % len(answered)])
            times[ans.kind.value].append(time.perf_counter() - t)
            assert ans.kind is engine.DecisionKind.REPEAT
        after = await ledger_rows(conn, ledger)
    await ledger.close()
    return times, before, after


def end_to_end(pg: EmbeddedPostgres, folder: Path, n: int) -> dict[str, list[float]]:
    """Through ``lapras serve`` (its own process), one psycopg client, default configuration."""
    path = folder / "lapras.toml"
    path.write_text(config_text(pg, True))
    asyncio.run(drop_state(pg))
    subprocess.run(
        [
            *(sys.executable, "-m", "proxy.cli", "epoch", "start", "--config", str(path)),
            *("--table", "adult", "--predicted", str(_predicted(folder))),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        port = int(line.rsplit(":", 1)[1])
        times: dict[str, list[float]] = defaultdict(list)
        notices: list[str] = []
        with psycopg.connect(
            f"postgresql://analyst:bench@127.0.0.1:{port}/{DATABASE}", autocommit=True
        ) as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            conn.execute(marginals()[0]).fetchone()  # warm
            queries = [*marginals()[1:], *cells()[:n], *marginals()[1:], *cells()[:n]]
            for q in queries:
                t = time.perf_counter()
                conn.execute(q).fetchone()
                dt = time.perf_counter() - t
                note = notices[-1]
                kind = next(
                    k
                    for k, word in (
                        ("repeat", "repeat"),
                        ("matrix", "Matrix Mechanism"),
                        ("stored", "earlier releases"),
                        ("fresh", "fresh noise"),
                    )
                    if word in note
                )
                times[kind].append(dt)
        return times
    finally:
        proc.terminate()
        proc.wait(30)


def _predicted(folder: Path) -> Path:
    p = folder / "predicted.sql"
    p.write_text(";\n".join(marginals()) + ";\n")
    return p


def table(rows: list[tuple[str, str, list[float]]]) -> str:
    lines = ["| measured | path | n | p50 ms | p99 ms |", "|---|---|---:|---:|---:|"]
    for what, path, xs in rows:
        if xs:
            lines.append(
                f"| {what} | {path} | {len(xs)} | {pct(xs, 0.5):.2f} | {pct(xs, 0.99):.2f} |"
            )
    return "\n".join(lines)


def write_docs(body: str) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text()
    if HEADING in text:
        head, rest = text.split(HEADING, 1)
        nxt = rest.find("\n## ")
        tail = rest[nxt:] if nxt >= 0 else "\n"
        text = head + HEADING + "\n\n" + body.strip() + "\n" + tail
    else:
        text = text.rstrip("\n") + "\n\n" + HEADING + "\n\n" + body.strip() + "\n"
    doc.write_text(text)


GROUP_HEADING = "## Ledger: group commit (`bench/ledger --group-commit`)"
GROUP_BEGIN = "<!-- group-commit:begin -->"
GROUP_END = "<!-- group-commit:end -->"
GROUP_NOTE = """
Reading the table: *before* is the answering path as it was (one statement at a time per
epoch: its own advisory lock and catch-up, its decision's commit -- synchronous for a charge --
and its release's synchronous commit); *after* is group commit (docs/admin.md, "Group
commit"): the statements queued while a group is written form the next group, with one
advisory lock, one transaction for all of its charges (synchronous) and one for all of its
releases (synchronous), after one asynchronous transaction for what spends nothing. Ledger
transactions per answer are the distinct `xmin` of the ledger rows a phase wrote.
"""


def group_commit(args: argparse.Namespace) -> None:
    """``--group-commit``: fresh and MATRIX answers/s of one epoch with 1, 10 and 50 clients,
    before and after group commit, in alternating rounds (bench/ledger/group.py)."""
    from bench.ledger import group

    with adult_pg("lapras-bench-group-") as (pg, folder):
        began = time.monotonic()
        asyncio.run(drop_state(pg))
        text = config_text(pg, False)
        body, _ = group.run(
            pg,
            text,
            state_dsn(pg),
            pg.dsn(provision.AGGREGATOR, DATABASE),
            args.rounds,
            args.quick,
        )
        asyncio.run(drop_state(pg))
        e2e = group.end_to_end(folder, text, args.quick)
    flags = (" --quick" if args.quick else "") + f" --rounds {args.rounds}"
    body = (
        f"Command: `python -m bench.ledger --group-commit{flags} --write-docs` "
        f"({time.monotonic() - began:.0f} s; embedded PostgreSQL, `synchronous_commit = on`, data "
        "on the local disk; `EpochService.answer` in one process, the clients asyncio tasks; "
        "Adult, epoch over `age_sex_income` (296 cells), reuse = false, a new epoch per round "
        "and variant, rounds alternating before/after; `OPENBLAS_NUM_THREADS=1`; 2 cores "
        "shared with other work).\n\n"
        + body
        + "\n\nThe same phases through `lapras serve` (its own process; asyncpg clients, one "
        "connection each, over loopback; the epoch started by the CLI), after only:\n\n"
        + e2e
        + "\n"
        + GROUP_NOTE
    )
    print(body)
    if args.write_docs:
        doc = ROOT / "docs" / "benchmarks.md"
        text = doc.read_text()  # read just before the edit: others edit other blocks
        if GROUP_BEGIN in text and GROUP_END in text:
            head, rest = text.split(GROUP_BEGIN, 1)
            _, tail = rest.split(GROUP_END, 1)
            text = head + GROUP_BEGIN + "\n" + body.strip() + "\n" + GROUP_END + tail
        elif HEADING in text:  # a section of its own, after the Ledger section (which
            # `--write-docs` without `--group-commit` rewrites up to the next section)
            head, rest = text.split(HEADING, 1)
            nxt = rest.find("\n## ")
            at = nxt + 1 if nxt >= 0 else len(rest)
            block = f"{GROUP_HEADING}\n\n{GROUP_BEGIN}\n{body.strip()}\n{GROUP_END}\n\n"
            text = head + HEADING + rest[:at] + block + rest[at:]
        else:
            raise SystemExit("docs/benchmarks.md has no Ledger section")
        doc.write_text(text)


OFF_BEGIN = "<!-- dp-off-loop:begin -->"
OFF_END = "<!-- dp-off-loop:end -->"
OFF_NOTE = """
Reading the table: *before* is b256771; *after* answers from the Matrix Mechanism release
without solving the statement's rows: each block of the release remembers the answers and
variances of the predicted set's rows, solved together once per block (stacked per marginal)
when a proxy loads the epoch (`dp.engine.warm`, `BlockRelease.remember`), and an answer whose
rows are all remembered looks them up (a row's least squares is the same whatever rows are
asked with it; post-processing of the release, decided as before). So the Matrix phase goes
from about 900 to about 1,230 answers/s (1.36x here, 1.50x in a run of the same command just
before: 860 to 1,289; 518 predicted statements of 3 prepared statements, each asked once). The first answer from the release after a start costs what it
cost (7 ms in side runs, before and after): the one-time solve (10-20 ms for these 518
statements) is part of loading the epoch, before the port is announced. The fresh rows are unchanged (this
change touches answers from the release only); they are faster than in this block's previous
run (the same tree, b256771's, gave 748 fresh answers/s with 50 clients there and 1,080 here):
the machine was quieter, so compare within one run. In the default mode (`reuse = true`, not in
this table) answers from the release also consulted the GLS over the marginal's stored
releases, which is not remembered (it changes with every fresh release); a marginal whose
stored releases are only its block's own is now answered by the block alone (that GLS is the
block's least squares: the same estimate), so the GLS is computed only once an online release
over the marginal is stored. The same phase in the default mode is the *matrix* phase of
`bench/ledger --default-mode` (below): 667 to 1,081 answers/s against b256771 (side runs of the
remembered rows alone gave 789-845 there). The
passthrough client's latency under load is what another session of the same proxy sees while
the DP load runs (its own process, paced, so that its own load stays small); the Matrix phase
opens its 50 connections while it is measured (a SCRAM login costs the loop a few
milliseconds, and each connection's first Parse of a statement opens a pooled backend to
describe it), which its p99 shows in both columns.

Where the rest goes (py-spy `--gil`, 50 clients, the samples in which a thread holds the
interpreter lock; this run's machine, *after*; connection warm-up excluded). Fresh answers,
one prepared statement: about 0.86 ms of the lock per answer, the event loop 0.59 ms of it
(the group writer's ledger calls 0.2 ms, a third of that the JSON encoding of the events), the
engine's worker 0.19 ms (decisions and releases; OpenDP's draws run without the lock) and the
answering worker 0.07 ms (`rewriter.bind`; the reading before this one, on a busier machine,
counted 0.55, 0.2 and 0.5 ms). Answers from the release: about 0.8 ms of the lock per answer,
0.6 ms of it the event loop (the group writer's ledger calls about a fifth of that, the
wire's Bind/Execute a fifth, the rendering of rows and NOTICE a tenth), the engine's worker
now about 5% of the samples (it was 30%). The issue's 2,000 fresh answers/s per epoch
need about 0.5 ms per answer in all, its 10,000 answers/s from releases 0.1 ms. One client
waits 7–9 ms per fresh answer: two synchronous commits (1.2–1.5 ms each on this disk), five
ledger round trips and two thread hops. With `[server] workers = 2` (separate runs of the same
load, four alternating rounds of each, 2026-12-03: 845–908 against 676–876 answers/s) the two
processes take turns on the epoch's lock, each group holding it through both commits: about
1.15x one worker (the Matrix phase, side runs of this tree, two rounds each: 1,337-1,473
against 1,196-1,291 answers/s, 1.13x). Shortening the interpreter's switch interval to 0.2 ms for the whole process
(tried, not kept) cut the passthrough client's p99 under the text load from 14–20 ms to 5–6 ms,
but halved the text load's answers/s (new texts are classified in pure Python, which then
yields the lock five times as often).
"""


def _publish(args: argparse.Namespace, body: str, bench: Any, *, before: str) -> None:
    """Print ``body``; with ``--write-docs``, put it in the block of ``bench`` (a module with
    ``BEGIN``, ``END`` and ``HEADING``) in docs/benchmarks.md, a new section going before the
    ``before`` heading."""
    from bench.docs import write_block

    print(body)
    if args.write_docs:
        write_block(
            ROOT / "docs" / "benchmarks.md",
            body,
            begin=bench.BEGIN,
            end=bench.END,
            heading=bench.HEADING,
            before=before,
        )


def default_mode(args: argparse.Namespace) -> None:
    """``--default-mode``: fresh answers end to end in the default mode with no predicted set,
    HEAD (a clone) against the working tree (bench/ledger/defaultmode.py)."""
    from bench.ledger import defaultmode, replay

    with adult_pg("lapras-bench-default-pg-") as (pg, _):
        body = defaultmode.run(
            pg,
            config_text(pg, True),
            drop_state,
            state_dsn(pg),
            args.rounds,
            Path(args.before) if args.before else None,
        )
    _publish(args, body, defaultmode, before=replay.HEADING)


def dp_off_loop(args: argparse.Namespace) -> None:
    """``--dp-off-loop``: fresh DP answers/s end to end and another client's passthrough
    latency, HEAD (a clone) against the working tree, in alternating rounds."""
    from bench.ledger import offloop

    with adult_pg("lapras-bench-offloop-pg-") as (pg, _):
        body = offloop.run(
            pg,
            config_text(pg, False),
            drop_state,
            args.rounds,
            args.quick,
            Path(args.before) if args.before else None,
        )
    body = body + "\n" + OFF_NOTE
    print(body)
    if args.write_docs:
        doc = ROOT / "docs" / "benchmarks.md"
        text = doc.read_text()  # read just before the edit: others edit other blocks
        if OFF_BEGIN not in text or OFF_END not in text:
            raise SystemExit(f"docs/benchmarks.md has no {OFF_BEGIN} ... {OFF_END} block")
        head, rest = text.split(OFF_BEGIN, 1)
        _, tail = rest.split(OFF_END, 1)
        doc.write_text(head + OFF_BEGIN + "\n" + body.strip() + "\n" + OFF_END + tail)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--group-commit", action="store_true")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dp-off-loop", action="store_true")
    parser.add_argument("--before", help="--dp-off-loop: the tree to compare with (default: HEAD)")
    parser.add_argument("--default-mode", action="store_true")
    parser.add_argument("--replay", action="store_true")
    parser.add_argument("--answers", type=int, default=40_000, help="--replay: answers per round")
    args = parser.parse_args()
    if args.replay:
        from bench.ledger import replay

        body = replay.run(args.answers, args.rounds)
        _publish(args, body, replay, before="## Whole-table epochs (`bench/epochs`)")
        return
    if args.default_mode:
        default_mode(args)
        return
    if args.dp_off_loop:
        dp_off_loop(args)
        return
    if args.group_commit:
        group_commit(args)
        return
    n_fresh, n_repeat, n_raw, n_e2e = (60, 100, 100, 30) if args.quick else (200, 300, 300, 100)
    with adult_pg("lapras-bench-ledger-") as (pg, folder):
        raw = asyncio.run(bench_ledger_only(pg, n_raw))
        default, before_d, after_d = asyncio.run(bench_service(pg, True, n_fresh, n_repeat))
        noreuse, before_n, after_n = asyncio.run(bench_service(pg, False, n_fresh, n_repeat))
        e2e = end_to_end(pg, folder, n_e2e)
    rows = [
        ("durable charge: lock + fold + append + commit (sync)", "PgLedger", raw["durable"]),
        ("same, asynchronous commit", "PgLedger", raw["async"]),
    ]
    for label, t in (("default (GLS reuse)", default), ("reuse = false", noreuse)):
        for kind in ("fresh", "stored", "matrix", "repeat"):
            rows.append((f"{kind.upper()} answer, {label}", "EpochService.answer", t.get(kind, [])))
    for kind in ("fresh", "stored", "matrix", "repeat"):
        rows.append((f"{kind.upper()} answer, default", "end to end (psycopg)", e2e.get(kind, [])))
    repeat_note = (
        f"REPEAT phase ({n_repeat} answers): ledger rows {before_d[0]} -> {after_d[0]}, "
        f"entries into `PgLedger.exclusive` {before_d[1]} -> {after_d[1]} (default); "
        f"rows {before_n[0]} -> {after_n[0]}, entries {before_n[1]} -> {after_n[1]} (reuse = false): "
        "answers from stored releases never touch the ledger's write path."
    )
    body = (
        f"Command: `python -m bench.ledger{' --quick' if args.quick else ''} --write-docs` "
        "(embedded PostgreSQL, `synchronous_commit = on`, data on the local disk; one process; "
        "`OPENBLAS_NUM_THREADS=1`; 2 cores shared with other work).\n\n"
        + table(rows)
        + "\n\n"
        + repeat_note
        + "\n"
        + NOTE
    )
    print(body)
    assert before_d == after_d and before_n == after_n, "a REPEAT touched the ledger's write path"
    if args.write_docs:
        write_docs(body)


if __name__ == "__main__":
    main()
