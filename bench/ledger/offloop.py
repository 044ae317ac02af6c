"""DP answers off the event loop, before and after, side by side
(``python -m bench.ledger --dp-off-loop``).

*before* is a copy of the code at ``HEAD`` (``git clone -q`` of this repository into a
temporary folder, or ``--before PATH``: any tree of this project), *after* the working tree;
both serve with this interpreter. Each round of each variant (rounds alternate: ABBA) drops
the proxy's state, starts a new epoch on Adult with that variant's CLI (``lapras epoch start``,
P = every cell of age x sex x income, every age, every (age, sex): 518 statements), runs that
variant's ``lapras serve`` as its own process and measures over loopback:

- *idle*: another client's passthrough ``SELECT 1`` (one asyncpg connection, in a process of
  its own, one statement every :data:`PACE` seconds), alone;
- then for 10 and 50 asyncpg clients (one connection each), distinct fresh DP counts (each a
  fresh release with its durable charge, ``reuse = false``), sent as one prepared statement
  with new parameters (asyncpg's ``fetch(sql, *args)``: a bind per execution) and then as a
  new SQL text each: fresh DP answers/s (answers / elapsed), their p50 / p99, and the same
  passthrough client's ``SELECT 1`` p50 / p99 while that load runs;
- 50 clients asking P's 518 statements (3 prepared statements): answers from the Matrix
  Mechanism release, which spend nothing;
- a restart: ``lapras serve`` stopped and started again; the seconds until it announces its
  port (the epoch's ledger, every event of the phases above, is replayed before), then one new
  client's first fresh answer and first repeat.

Answers/s are pooled over the rounds (answers / elapsed), latencies over all samples.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: Seconds between two statements of the passthrough client.
PACE = 0.002
#: Seconds the passthrough client runs alone (idle).
IDLE = 3.0
#: Distinct fresh statements per phase by number of clients: (full, quick).
SIZES = {10: (300, 150), 50: (800, 400)}
KINDS = ("prepared", "text")
#: Clients of the phase answered from the Matrix Mechanism release.
MATRIX_CLIENTS = 50


@dataclass
class Sample:
    answers: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    probe: list[float] = field(default_factory=list)


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


class Probe:
    """The other client: ``python -m bench.ledger.offloop probe DSN``, a process of its own
    (the bench's 50 clients share this process's event loop, which would delay it)."""

    def __init__(self, dsn: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.ledger.offloop", "probe", dsn],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self) -> list[float]:
        out, _ = self.proc.communicate("stop\n", timeout=60)
        return [float(x) for x in json.loads(out)]


async def _probe_main(dsn: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    for _ in range(200):
        await conn.fetchval("SELECT 1")
    loop = asyncio.get_running_loop()
    stopped = loop.run_in_executor(None, sys.stdin.readline)
    print("ready", flush=True)
    latencies: list[float] = []
    while not stopped.done():
        t = time.perf_counter()
        assert await conn.fetchval("SELECT 1") == 1
        took = time.perf_counter() - t
        latencies.append(took)
        await asyncio.sleep(max(0.0, PACE - took))
    await conn.close()
    print(json.dumps(latencies), flush=True)


def _cli(tree: Path, *args: str, config: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args, "--config", str(config)],
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )


def _round(
    tree: Path, config: Path, database: str, work: dict[str, list[Any]], quick: bool
) -> dict[tuple[str, int], Sample]:
    """One variant's round: a new epoch, its own ``lapras serve``, every phase."""
    import asyncpg

    from bench.ledger import group

    predicted = config.parent / "predicted.sql"
    predicted.write_text(";\n".join(group.predicted_sql()) + ";\n")
    _cli(tree, "epoch", "start", "--table", "adult", "--predicted", str(predicted), config=config)
    proc, dsn = _serve(tree, config, database)
    out: dict[tuple[str, int], Sample] = {}
    try:

        async def warm() -> None:
            conn = await asyncpg.connect(dsn)
            # loads the epoch (a fresh statement that no phase asks)
            await conn.fetch("SELECT count(*) FROM adult WHERE age BETWEEN 17 AND 90")
            await conn.close()

        asyncio.run(warm())
        probe = Probe(dsn)
        time.sleep(IDLE)
        out["idle", 0] = Sample(probe=probe.stop())
        sources = {kind: iter(work[kind]) for kind in KINDS}
        for kind in KINDS:
            for clients, sizes in SIZES.items():
                todo = [next(sources[kind]) for _ in range(sizes[quick])]
                probe = Probe(dsn)
                sample = asyncio.run(_load(dsn, todo, clients))
                sample.probe = probe.stop()
                out[kind, clients] = sample
        probe = Probe(dsn)
        sample = asyncio.run(_load(dsn, group.predicted_params(), MATRIX_CLIENTS))
        sample.probe = probe.stop()
        out["matrix", MATRIX_CLIENTS] = sample
        # a restart: the epoch's ledger (every event of the phases above) is replayed before
        # the port is announced; then one client's first statements
        proc.terminate()
        proc.wait(30)
        began = time.perf_counter()
        proc, dsn = _serve(tree, config, database)
        ready = time.perf_counter() - began
        out["restart", 1] = asyncio.run(_first(dsn, next(sources["prepared"]), ready))
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def _serve(tree: Path, config: Path, database: str) -> tuple[subprocess.Popen[str], str]:
    """``lapras serve`` of ``tree`` as its own process, once its port is announced."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)],
        cwd=tree,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline().rsplit(":", 1)[1].split()[0])
    return proc, f"postgresql://analyst:bench@127.0.0.1:{port}/{database}"


async def _first(dsn: str, fresh: tuple[str, tuple[Any, ...]], ready: float) -> Sample:
    """A new client's first DP answers after a restart: a fresh statement, then a repeat of
    one answered before the restart (latencies: the connection excluded)."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    sample = Sample(elapsed=ready)
    for sql, args in (fresh, ("SELECT count(*) FROM adult WHERE age = 41", ())):
        t = time.perf_counter()
        await conn.fetch(sql, *args)
        sample.latencies.append(time.perf_counter() - t)
    await conn.close()
    sample.answers = len(sample.latencies)
    return sample


async def _load(dsn: str, todo: list[tuple[str, tuple[Any, ...]]], clients: int) -> Sample:
    import asyncpg

    conns = [await asyncpg.connect(dsn) for _ in range(clients)]
    work = iter(todo)
    sample = Sample()

    async def client(conn: Any) -> None:
        for sql, args in work:
            t = time.perf_counter()
            await conn.fetch(sql, *args)
            sample.latencies.append(time.perf_counter() - t)

    began = time.perf_counter()
    await asyncio.gather(*(client(c) for c in conns))
    sample.elapsed = time.perf_counter() - began
    sample.answers = len(sample.latencies)
    for c in conns:
        await c.close()
    return sample


def setup(config_text: str, before: Path | None, folder: Path) -> tuple[Path, str, Path, str]:
    """What a before/after run of ``lapras serve`` needs, in ``folder``: the *before* tree
    (``before``, or a clone of this repository's ``HEAD``), its short commit, the
    configuration file (``stream_length`` 4000) and the proxy's database name."""
    if before is None:
        before = folder / "head"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(before)], check=True)
    head = subprocess.run(
        ["git", "-C", str(before), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    config = folder / "lapras.toml"
    config.write_text(config_text.replace("stream_length = 2000", "stream_length = 4000"))
    database = config_text.split("aggregator_dsn = ", 1)[1].split("\n", 1)[0].strip('"')
    return before, head, config, database.rsplit("/", 1)[1]


def run(
    pg: Any, config_text: str, drop_state: Any, rounds: int, quick: bool, before: Path | None
) -> str:
    """Measure; return the body (markdown) of the docs block."""
    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-offloop-"))
    try:
        return _run(pg, config_text, drop_state, rounds, quick, before, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(
    pg: Any,
    config_text: str,
    drop_state: Any,
    rounds: int,
    quick: bool,
    before: Path | None,
    folder: Path,
) -> str:
    from bench.ledger import group

    given = before is not None
    before, head, config, database = setup(config_text, before, folder)
    fresh_sql, fresh_params = group.fresh_sql(), group.fresh_params()
    half = len(fresh_sql) // 2
    work: dict[str, list[Any]] = {
        "prepared": fresh_params[:half],  # the two halves ask different linear queries
        "text": [(q, ()) for q in fresh_sql[half:]],
    }
    trees = {"before": before, "after": ROOT}
    got: dict[tuple[str, str, int], list[Sample]] = defaultdict(list)
    began = time.monotonic()
    for r in range(rounds):
        for variant in ("before", "after") if r % 2 == 0 else ("after", "before"):
            asyncio.run(drop_state(pg))
            for (kind, clients), s in _round(trees[variant], config, database, work, quick).items():
                got[variant, kind, clients].append(s)
            print(f"round {r + 1}/{rounds} {variant}: done", flush=True)
    took = time.monotonic() - began
    return _table(got, rounds, quick, head, took, given)


def _table(
    got: dict[tuple[str, str, int], list[Sample]],
    rounds: int,
    quick: bool,
    head: str,
    took: float,
    given: bool,
) -> str:
    def rate(ss: list[Sample]) -> float:
        return sum(s.answers for s in ss) / sum(s.elapsed for s in ss)

    def lat(ss: list[Sample], attr: str) -> list[float]:
        return [x for s in ss for x in getattr(s, attr)]

    lines = [
        "| load | clients | before: answers/s | after | ratio | DP p50 / p99 ms, before "
        "| after | passthrough `SELECT 1` p50 / p99 ms, before | after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    idle = {v: lat(got[v, "idle", 0], "probe") for v in ("before", "after")}
    lines.append(
        "| idle (no DP load) | 0 | | | | | | "
        + " | ".join(
            f"{1000 * _pct(idle[v], 0.5):.2f} / {1000 * _pct(idle[v], 0.99):.2f}"
            for v in ("before", "after")
        )
        + " |"
    )
    how = {"prepared": "one prepared statement, new parameters", "text": "a new SQL text each"}
    phases = [(f"fresh DP counts, {how[k]}", k, c) for k in KINDS for c in SIZES]
    phases.append(
        (
            "answers from the Matrix Mechanism release (3 prepared statements)",
            "matrix",
            MATRIX_CLIENTS,
        )
    )
    for label, kind, clients in phases:
        b, a = got["before", kind, clients], got["after", kind, clients]
        cells = [
            f"{rate(b):,.0f}",
            f"{rate(a):,.0f}",
            f"{rate(a) / rate(b):.2f}x",
            *(
                f"{1000 * _pct(lat(s, 'latencies'), 0.5):.1f} / "
                f"{1000 * _pct(lat(s, 'latencies'), 0.99):.1f}"
                for s in (b, a)
            ),
            *(
                f"{1000 * _pct(lat(s, 'probe'), 0.5):.2f} / "
                f"{1000 * _pct(lat(s, 'probe'), 0.99):.2f}"
                for s in (b, a)
            ),
        ]
        lines.append(f"| {label} | {clients} | " + " | ".join(cells) + " |")
    restart = []
    for v in ("before", "after"):
        ss = got[v, "restart", 1]
        ready = sorted(s.elapsed for s in ss)
        fresh = [s.latencies[0] for s in ss]
        repeat = [s.latencies[1] for s in ss]
        restart.append(
            f"{v}: port announced {min(ready):.2f}–{max(ready):.2f} s after the start; the first"
            f" fresh answer {1000 * _pct(fresh, 0.5):.1f} ms (median of the rounds), the first"
            f" repeat {1000 * _pct(repeat, 0.5):.1f} ms"
        )
    per_round = []
    for _, kind, clients in phases:
        for v in ("before", "after"):
            rs = ", ".join(f"{s.answers / s.elapsed:,.0f}" for s in got[v, kind, clients])
            per_round.append(f"{kind} x{clients} {v}: {rs}")
    p99s = []
    for v in ("before", "after"):
        ratio = [_pct(lat(got[v, k, c], "probe"), 0.99) / _pct(idle[v], 0.99) for _, k, c in phases]
        p99s.append(f"{v} {', '.join(f'{x:.1f}x' for x in ratio)}")
    flags = (
        (" --quick" if quick else "") + f" --rounds {rounds}" + (" --before DIR" if given else "")
    )
    which = f"`--before DIR`, a tree at {head}" if given else f"a clone of `HEAD` ({head})"
    return (
        f"Command: `python -m bench.ledger --dp-off-loop{flags} --write-docs` ({took:.0f} s; "
        f"*before* = {which}, *after* = the working tree; both `lapras serve` "
        "as their own process (event loop: uvloop when installed), embedded PostgreSQL with "
        "`synchronous_commit = on`, Adult, epoch over `age_sex_income`, reuse = false, "
        f"stream_length 4000, a new epoch per round and variant, {rounds} rounds alternating "
        "before/after; clients asyncpg over loopback, one connection each; the passthrough "
        f"client a process of its own, one `SELECT 1` every {1000 * PACE:.0f} ms; "
        f"`OPENBLAS_NUM_THREADS=1`; {os.cpu_count()} cores shared by PostgreSQL, the proxy, "
        "the clients and other work).\n\n"
        + "\n".join(lines)
        + "\n\nPer round (answers/s): "
        + "; ".join(per_round)
        + ".\n\nPassthrough p99 under load / idle p99 (prepared x10, x50, text x10, x50, matrix"
        " x50): "
        + "; ".join(p99s)
        + ".\n\nAfter a restart (the round's ledger replayed before the port is announced; a new"
        " client, its connection not counted): " + "; ".join(restart) + "."
    )


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    asyncio.run(_probe_main(sys.argv[2]))
