"""Group commit, before and after, side by side (``python -m bench.ledger --group-commit``).

In one process, on the embedded PostgreSQL (``synchronous_commit = on``), through
``EpochService.answer`` (in process: no wire, no rewriter, clients are asyncio tasks), in
alternating rounds (ABBA): *before* is :class:`SerialEpochService`, the answering path as it
was before group commit (one statement at a time per epoch under the handle's lock, each with
its own ``PgLedger.exclusive``, its decision's commit and, for a fresh answer, its release's
commit), *after* is :class:`proxy.epochs.EpochService` (group commit). Every round of each
variant starts a new epoch (same configuration, same predicted set), then measures, for 1, 10
and 50 concurrent clients: distinct fresh statements (reuse = false: each is a fresh release
with its charge), then distinct statements answered from the Matrix Mechanism release. For each
phase: answers/s (answers / elapsed), p50 / p99 latency, and the ledger transactions per answer
(distinct ``xmin`` of the ledger rows the phase wrote) and entries into ``PgLedger.exclusive``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import rewriter
from dp import engine
from dp.domain import QueryBatch
from dp.noise import SeededSampler
from proxy.app import engine_config
from proxy.config import parse_config
from proxy.embedded import EmbeddedPostgres
from proxy.epochs import Answer, EpochHandle, EpochService
from proxy.ledger import PgLedger

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = (1, 10, 50)
#: Distinct statements per phase (fresh, matrix) by number of clients: (full, quick).
FRESH = {1: (60, 30), 10: (300, 100), 50: (1000, 300)}
MATRIX = {1: (40, 20), 10: (120, 60), 50: (300, 150)}


def _applied(state: engine.EngineState, events: Sequence[Any]) -> engine.EngineState:
    for ev in events:
        state = engine.apply(state, ev)
    return state


class SerialEpochService(EpochService):
    """The answering path before group commit (the same code, kept here to measure it)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._locks: dict[int, asyncio.Lock] = {}

    async def _grouped(self, handle: EpochHandle, batch: QueryBatch) -> Answer:
        lock = self._locks.setdefault(id(handle), asyncio.Lock())
        async with lock:
            repeat = self._repeat(handle, batch)
            if repeat is not None:
                return repeat
            async with self.ledger.exclusive(handle.row.id, handle.seq) as tx:
                if tx.new_events:
                    handle.state = await asyncio.to_thread(
                        _applied, handle.state, [ev for _, ev in tx.new_events]
                    )
                    handle.seq = tx.new_events[-1][0]
                decision = await asyncio.to_thread(engine.decide, handle.state, batch)
                state = _applied(handle.state, decision.events)
                fresh = decision.kind is engine.DecisionKind.FRESH
                await tx.append(decision.events, durable=fresh)
                handle.state, handle.seq = state, tx.seq
                result = await asyncio.to_thread(
                    engine.release, state, decision, handle.pin, self._sampler()
                )
                state = _applied(state, result.events)
                await tx.append(result.events)
                handle.state, handle.seq = state, tx.seq
            charge = decision.charge.amount if decision.charge is not None else 0.0
            return Answer(
                answers=result.answers,
                std_errors=result.std_errors,
                kind=decision.kind,
                charge=charge,
                status=handle.status(),
            )


class CountingLedger(PgLedger):
    """The PostgreSQL ledger, counting entries into ``exclusive``."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], dsn: str) -> None:
        super().__init__(conn, dsn)
        self.exclusive_calls = 0

    def exclusive(self, epoch_id: int, after: int) -> Any:
        self.exclusive_calls += 1
        return super().exclusive(epoch_id, after)


def fresh_sql() -> list[str]:
    """Distinct age ranges within one (sex, income): none is in P, so with reuse = false each
    is a fresh release."""
    return [
        f"SELECT count(*) FROM adult WHERE age BETWEEN {lo} AND {hi}"
        f" AND sex = '{s}' AND income = '{i}'"
        for lo in range(17, 91)
        for hi in range(lo + 1, 91)
        for s in ("Female", "Male")
        for i in ("<=50K", ">50K")
    ]


def fresh_params() -> list[tuple[str, tuple[Any, ...]]]:
    """:func:`fresh_sql` as one prepared statement and its parameters (in the same order)."""
    sql = "SELECT count(*) FROM adult WHERE age BETWEEN $1 AND $2 AND sex = $3 AND income = $4"
    return [
        (sql, (lo, hi, s, i))
        for lo in range(17, 91)
        for hi in range(lo + 1, 91)
        for s in ("Female", "Male")
        for i in ("<=50K", ">50K")
    ]


def predicted_params() -> list[tuple[str, tuple[Any, ...]]]:
    """:func:`predicted_sql` as three prepared statements and their parameters (same order)."""
    cells = "SELECT count(*) FROM adult WHERE age = $1 AND sex = $2 AND income = $3"
    pairs = "SELECT count(*) FROM adult WHERE age = $1 AND sex = $2"
    return [
        *(
            (cells, (a, s, i))
            for a in range(17, 91)
            for s in ("Female", "Male")
            for i in ("<=50K", ">50K")
        ),
        *(("SELECT count(*) FROM adult WHERE age = $1", (a,)) for a in range(17, 91)),
        *((pairs, (a, s)) for a in range(17, 91) for s in ("Female", "Male")),
    ]


def predicted_sql() -> list[str]:
    """P: every cell of age x sex x income, every age, every (age, sex): answered from the
    Matrix Mechanism release."""
    cells = [
        f"SELECT count(*) FROM adult WHERE age = {a} AND sex = '{s}' AND income = '{i}'"
        for a in range(17, 91)
        for s in ("Female", "Male")
        for i in ("<=50K", ">50K")
    ]
    ages = [f"SELECT count(*) FROM adult WHERE age = {a}" for a in range(17, 91)]
    pairs = [
        f"SELECT count(*) FROM adult WHERE age = {a} AND sex = '{s}'"
        for a in range(17, 91)
        for s in ("Female", "Male")
    ]
    return [*cells, *ages, *pairs]


@dataclass
class Phase:
    answers: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    transactions: int = 0
    exclusive: int = 0
    kinds: set[str] = field(default_factory=set)


class Breakdown:
    """Where a group's time goes (after only): wall time in the engine's two worker-thread
    steps, in the ledger's appends (each a transaction; the charges' and the releases' with a
    synchronous commit), and in the whole group (``EpochService._commit_group``)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = defaultdict(float)
        self.groups = 0
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, owner: Any, name: str, label: str, is_async: bool) -> None:
        f = getattr(owner, name)
        times = self.times

        if is_async:

            async def timed_async(*a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                try:
                    return await f(*a, **k)
                finally:
                    times[label] += time.perf_counter() - t

            setattr(owner, name, timed_async)
        else:

            def timed(*a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    times[label] += time.perf_counter() - t

            setattr(owner, name, timed)
        self._saved.append((owner, name, f))

    def __enter__(self) -> Breakdown:
        import dp.engine as engine
        import proxy.epochs as epochs
        import proxy.ledger as ledger

        self._wrap(epochs, "_decided_group", "decide (worker thread)", False)
        self._wrap(engine, "release_all", "noise + release (worker thread)", False)
        self._wrap(ledger._PgTransaction, "append", "ledger appends (transactions)", True)
        self._wrap(epochs.EpochService, "_commit_group", "group", True)
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, f in reversed(self._saved):
            setattr(owner, name, f)

    def line(self, answers: int) -> str:
        total = self.times["group"]
        parts = [
            f"{k} {1000 * v / answers:.3f} ms ({100 * v / total:.0f}%)"
            for k, v in self.times.items()
            if k != "group"
        ]
        rest = total - sum(v for k, v in self.times.items() if k != "group")
        parts.append(
            f"the rest (lock, catch-up, thread hops, loop) {1000 * rest / answers:.3f} ms "
            f"({100 * rest / total:.0f}%)"
        )
        return f"{1000 * total / answers:.3f} ms of group per answer: " + "; ".join(parts)


async def _ledger_mark(conn: psycopg.AsyncConnection[Any], epoch: int) -> int:
    cur = await conn.execute(
        "SELECT coalesce(max(seq), 0) FROM lapras.ledger WHERE epoch_id = %s", (epoch,)
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _transactions(conn: psycopg.AsyncConnection[Any], epoch: int, after: int) -> int:
    cur = await conn.execute(
        "SELECT count(DISTINCT xmin::text) FROM lapras.ledger WHERE epoch_id = %s AND seq > %s",
        (epoch, after),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _phase(
    service: EpochService,
    ledger: CountingLedger,
    conn: psycopg.AsyncConnection[Any],
    epoch: int,
    plans: Sequence[rewriter.Plan],
    clients: int,
) -> Phase:
    out = Phase()
    work = iter(plans)
    mark, entries = await _ledger_mark(conn, epoch), ledger.exclusive_calls

    async def client() -> None:
        for p in work:
            t = time.perf_counter()
            ans = await service.answer(p)
            out.latencies.append(time.perf_counter() - t)
            out.kinds.add(ans.kind.value)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    out.elapsed = time.perf_counter() - began
    out.answers = len(out.latencies)
    out.transactions = await _transactions(conn, epoch, mark)
    out.exclusive = ledger.exclusive_calls - entries
    return out


async def _round(
    pg: EmbeddedPostgres,
    config_text: str,
    state_dsn: str,
    aggregator_dsn: str,
    variant: str,
    fresh: Sequence[str],
    matrix: Sequence[str],
    quick: bool,
    breakdowns: list[str],
) -> dict[tuple[str, int], Phase]:
    config = parse_config(config_text, "bench.toml")
    base = await PgLedger.connect(state_dsn)
    ledger = CountingLedger(base._conn, state_dsn)
    seeds = itertools.count(1)
    kind = SerialEpochService if variant == "before" else EpochService
    service = kind(
        schema=config.schema,
        ledger=ledger,
        aggregator_dsn=aggregator_dsn,
        sampler=lambda: SeededSampler(next(seeds)),
    )
    out: dict[tuple[str, int], Phase] = {}
    try:
        await service.close_epoch("adult", actor="bench", reason="next round", wait=0.0)
        epoch = await service.start_epoch(
            table="adult",
            view="age_sex_income",
            config=engine_config(dict(config.privacy)),
            predicted=predicted_sql(),
            actor="bench",
            reason=f"bench.ledger --group-commit ({variant})",
        )

        def plan(sql: str) -> rewriter.Plan:
            (st,) = rewriter.classify(sql, config.schema)
            assert isinstance(st, rewriter.DPStatement) and st.plan is not None
            return st.plan

        fresh_plans = iter([plan(q) for q in fresh])
        matrix_plans = iter([plan(q) for q in matrix])
        await service.answer(next(matrix_plans))  # loads the epoch
        async with await psycopg.AsyncConnection.connect(state_dsn, autocommit=True) as conn:
            for clients in CLIENTS:
                n = FRESH[clients][quick]
                todo = list(itertools.islice(fresh_plans, n))
                if variant == "after" and clients == 50:
                    with Breakdown() as bd:
                        out["fresh", clients] = await _phase(
                            service, ledger, conn, epoch, todo, clients
                        )
                    breakdowns.append(bd.line(n))
                else:
                    out["fresh", clients] = await _phase(
                        service, ledger, conn, epoch, todo, clients
                    )
                n = MATRIX[clients][quick]
                out["matrix", clients] = await _phase(
                    service, ledger, conn, epoch, list(itertools.islice(matrix_plans, n)), clients
                )
    finally:
        await ledger.close()
    for (what, clients), ph in out.items():
        assert ph.kinds == {what}, f"{variant} {what} x{clients} answered as {ph.kinds}"
    return out


def run(
    pg: EmbeddedPostgres,
    config_text: str,
    state_dsn: str,
    aggregator_dsn: str,
    rounds: int,
    quick: bool,
) -> tuple[str, dict[tuple[str, str, int], list[Phase]]]:
    """Measure; return the table (markdown) and the phases by (variant, kind, clients)."""
    fresh = fresh_sql()
    matrix = predicted_sql()
    phases: dict[tuple[str, str, int], list[Phase]] = defaultdict(list)
    breakdowns: list[str] = []
    for r in range(rounds):
        order = ("before", "after") if r % 2 == 0 else ("after", "before")
        for variant in order:
            got = asyncio.run(
                _round(
                    pg,
                    config_text,
                    state_dsn,
                    aggregator_dsn,
                    variant,
                    fresh,
                    matrix,
                    quick,
                    breakdowns,
                )
            )
            for (what, clients), ph in got.items():
                phases[variant, what, clients].append(ph)
            print(f"round {r + 1}/{rounds} {variant}: done", flush=True)
    where = "\n".join(f"- round {i + 1}: {b}" for i, b in enumerate(breakdowns))
    return (
        table(phases)
        + "\n\nWhere the time of a group goes (after, FRESH, 50 clients; wall time per "
        "answer):\n\n" + where,
        phases,
    )


def _rate(phs: list[Phase]) -> float:
    return sum(p.answers for p in phs) / sum(p.elapsed for p in phs)


def _pct(phs: list[Phase], q: float) -> float:
    xs = sorted(x for p in phs for x in p.latencies)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000.0


def table(phases: dict[tuple[str, str, int], list[Phase]]) -> str:
    lines = [
        "| answers | clients | before: answers/s | after: answers/s | after / before "
        "| before p50 / p99 ms | after p50 / p99 ms | ledger transactions per answer, "
        "before / after | `exclusive` per answer, before / after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for what in ("fresh", "matrix"):
        for clients in CLIENTS:
            b, a = phases["before", what, clients], phases["after", what, clients]
            per = [
                (
                    sum(p.transactions for p in x) / sum(p.answers for p in x),
                    sum(p.exclusive for p in x) / sum(p.answers for p in x),
                )
                for x in (b, a)
            ]
            lines.append(
                f"| {'FRESH' if what == 'fresh' else 'MATRIX'} | {clients} "
                f"| {_rate(b):,.0f} | {_rate(a):,.0f} | {_rate(a) / _rate(b):.1f}x "
                f"| {_pct(b, 0.5):.1f} / {_pct(b, 0.99):.1f} "
                f"| {_pct(a, 0.5):.1f} / {_pct(a, 0.99):.1f} "
                f"| {per[0][0]:.2f} / {per[1][0]:.2f} | {per[0][1]:.2f} / {per[1][1]:.2f} |"
            )
    rounds = {len(v) for v in phases.values()}
    spread = []
    for what, clients in (("fresh", 50), ("matrix", 50)):
        for variant in ("before", "after"):
            rates = [p.answers / p.elapsed for p in phases[variant, what, clients]]
            spread.append(
                f"{what} x50 {variant}: {', '.join(f'{x:,.0f}' for x in rates)}"
                if rates and not any(math.isnan(x) for x in rates)
                else ""
            )
    return (
        "\n".join(lines)
        + f"\n\nPer round (answers/s, {max(rounds)} rounds each): "
        + "; ".join(s for s in spread if s)
        + "."
    )


def end_to_end(folder: Path, config_text: str, quick: bool) -> str:
    """After only: the same phases through ``lapras serve`` (its own process), asyncpg clients
    (one connection each) over loopback; the epoch started by the CLI. Returns a table."""
    import asyncpg

    path = folder / "lapras.toml"
    path.write_text(config_text)
    predicted = folder / "predicted.sql"
    predicted.write_text(";\n".join(predicted_sql()) + ";\n")
    subprocess.run(
        [
            *(sys.executable, "-m", "proxy.cli", "epoch", "start", "--config", str(path)),
            *("--table", "adult", "--predicted", str(predicted)),
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
    database = parse_config(config_text, str(path)).backend.aggregator_dsn.rsplit("/", 1)[1]

    async def measure() -> list[tuple[str, int, Phase]]:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        dsn = f"postgresql://analyst:bench@127.0.0.1:{port}/{database}"
        # the statements as a new SQL text each (first halves of the lists), then as prepared
        # statements with new parameters (second halves: not answered yet)
        fresh_all, matrix_all = fresh_sql(), predicted_sql()
        half_f, half_m = len(fresh_all) // 2, len(matrix_all) // 2
        sources = {
            ("fresh", "text"): iter([(q, ()) for q in fresh_all[:half_f]]),
            ("fresh", "prepared"): iter(fresh_params()[half_f:]),
            ("matrix", "text"): iter([(q, ()) for q in matrix_all[:half_m]]),
            ("matrix", "prepared"): iter(predicted_params()[half_m:]),
        }
        warm = await asyncpg.connect(dsn)
        await warm.fetch(next(sources["matrix", "text"])[0])  # loads the epoch
        await warm.close()
        out = []
        for how in ("text", "prepared"):
            for clients in CLIENTS:
                for what, sizes in (("fresh", FRESH), ("matrix", MATRIX)):
                    size = sizes[clients][quick] // 2  # two halves: text, prepared
                    work = iter(list(itertools.islice(sources[what, how], size)))
                    conns = [await asyncpg.connect(dsn) for _ in range(clients)]
                    ph = Phase()

                    async def client(
                        conn: asyncpg.Connection, ph: Phase = ph, work: Any = work
                    ) -> None:
                        for q, args in work:
                            t = time.perf_counter()
                            await conn.fetch(q, *args)
                            ph.latencies.append(time.perf_counter() - t)

                    began = time.perf_counter()
                    await asyncio.gather(*(client(c) for c in conns))
                    ph.elapsed = time.perf_counter() - began
                    ph.answers = len(ph.latencies)
                    for c in conns:
                        await c.close()
                    out.append((f"{what}, {how}", clients, ph))
        return out

    try:
        got = asyncio.run(measure())
    finally:
        proc.terminate()
        proc.wait(30)
    lines = [
        "| answers (after, end to end), statements sent as | clients | n | answers/s "
        "| p50 / p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for what in ("fresh, text", "fresh, prepared", "matrix, text", "matrix, prepared"):
        for w, clients, ph in got:
            if w == what:
                kind, how = what.split(", ")
                how = "a new SQL text each" if how == "text" else "one prepared statement"
                lines.append(
                    f"| {kind.upper()}, {how} | {clients} | {ph.answers} | {_rate([ph]):,.0f} "
                    f"| {_pct([ph], 0.5):.1f} / {_pct([ph], 0.99):.1f} |"
                )
    return "\n".join(lines)
