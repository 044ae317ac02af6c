"""Fresh DP answers in the default mode through ``lapras serve``, before and after, side by side
(``python -m bench.ledger --default-mode [--rounds N] [--before PATH] [--write-docs]``).

As ``bench/ledger --dp-off-loop`` (``offloop.py``: *before* a clone of ``HEAD`` or
``--before PATH``, *after* the working tree, rounds alternating, a new epoch per round and
variant, ``lapras serve`` as its own process, asyncpg clients over loopback), but the epoch is
the default mode's (``reuse = true``). Two phases, each on an epoch of its own:

* *fresh*: no predicted set, so that the statements are the first ones of their marginal: 50
  clients ask :data:`N` distinct counts over ``age x sex x income`` (296 cells) as one
  prepared statement. Each is answered fresh, or from the GLS over the marginal's releases so
  far when that is at least as precise;
* *matrix*: the epoch started with ``bench.ledger.group``'s predicted set (518 counts over the
  same marginal and two of its sub-marginals), and the 50 clients ask exactly those (three
  prepared statements), each answered from the Matrix Mechanism release.

The ledger's counts of fresh releases and of answers from stored releases are reported per
variant and phase.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.ledger import group, offloop

N = 1500
CLIENTS = 50
BEGIN, END = "<!-- default-mode:begin -->", "<!-- default-mode:end -->"
HEADING = "## Ledger: fresh answers in the default mode (`bench/ledger --default-mode`)"


async def _ledger_counts(dsn: str, epoch_of: str) -> dict[str, int]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "SELECT kind, count(*) FROM lapras.ledger l JOIN lapras.epochs e ON e.id = l.epoch_id"
            " WHERE e.table_name = %s GROUP BY kind",
            (epoch_of,),
        )
        return {k: int(n) for k, n in await cur.fetchall()}


def _phase(
    pg: Any,
    drop_state: Any,
    state_dsn: str,
    tree: Path,
    config: Path,
    database: str,
    predicted: Path | None,
    todo: list[tuple[str, tuple[Any, ...]]],
) -> tuple[offloop.Sample, dict[str, int]]:
    """One variant's phase: a new epoch (with ``predicted``, if given), its own ``lapras
    serve``, ``todo`` asked by :data:`CLIENTS` clients; the sample and the ledger's counts."""
    asyncio.run(drop_state(pg))
    extra = ("--predicted", str(predicted)) if predicted is not None else ()
    offloop._cli(tree, "epoch", "start", "--table", "adult", *extra, config=config)
    proc, dsn = offloop._serve(tree, config, database)
    try:
        sample = asyncio.run(offloop._load(dsn, todo, CLIENTS))
    finally:
        proc.terminate()
        proc.wait(30)
    return sample, asyncio.run(_ledger_counts(state_dsn, "adult"))


def run(
    pg: Any, config_text: str, drop_state: Any, state_dsn: str, rounds: int, before: Path | None
) -> str:
    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-default-"))
    given = before is not None
    try:
        before, head, config, database = offloop.setup(config_text, before, folder)
        predicted = folder / "predicted.sql"
        predicted.write_text(";\n".join(group.predicted_sql()) + ";\n")
        phases: dict[str, tuple[Path | None, list[tuple[str, tuple[Any, ...]]]]] = {
            "fresh": (None, group.fresh_params()[:N]),
            "matrix": (predicted, group.predicted_params()),
        }
        trees = {"before": before, "after": offloop.ROOT}
        got: dict[tuple[str, str], list[offloop.Sample]] = defaultdict(list)
        counts: dict[tuple[str, str], list[dict[str, int]]] = defaultdict(list)
        began = time.monotonic()
        for r in range(rounds):
            for variant in ("before", "after") if r % 2 == 0 else ("after", "before"):
                for phase, (p, todo) in phases.items():
                    sample, c = _phase(
                        pg, drop_state, state_dsn, trees[variant], config, database, p, todo
                    )
                    got[variant, phase].append(sample)
                    counts[variant, phase].append(c)
                print(f"round {r + 1}/{rounds} {variant}: done", flush=True)
        took = time.monotonic() - began
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    lines = [
        f"Command: `python -m bench.ledger --default-mode --rounds {rounds}"
        + (" --before DIR" if given else "")
        + f" --write-docs` ({took:.0f} s; *before* = a tree at {head}, *after* = the working "
        "tree; `lapras serve` as its own process; embedded PostgreSQL with "
        "`synchronous_commit = on`; Adult, epoch over `age_sex_income` in the default mode "
        f"(`reuse = true`), a new epoch per phase; {CLIENTS} asyncpg clients; *fresh*: no "
        f"predicted set, {N} distinct counts "
        "`age BETWEEN $1 AND $2 AND sex = $3 AND income = $4` as one prepared statement; "
        f"*matrix*: the {len(group.predicted_params())} predicted counts (3 prepared "
        f"statements) of an epoch started with them; {rounds} rounds alternating; 2 cores "
        "shared by PostgreSQL, the proxy and the clients).",
        "",
        "| phase | variant | answers/s, median (per round) | p50 / p99 ms | fresh releases / "
        "answers from stored releases, per round |",
        "|---|---|---:|---:|---|",
    ]
    for phase in phases:
        for variant in ("before", "after"):
            rates = [s.answers / s.elapsed for s in got[variant, phase]]
            lat = [x for s in got[variant, phase] for x in s.latencies]
            split = ", ".join(
                f"{c.get('Released', 0)} / {c.get('Answered', 0)}" for c in counts[variant, phase]
            )
            lines.append(
                f"| {phase} | {variant} | {statistics.median(rates):,.0f}"
                f" ({', '.join(f'{x:,.0f}' for x in rates)})"
                f" | {1000 * offloop._pct(lat, 0.5):.1f} / {1000 * offloop._pct(lat, 0.99):.1f}"
                f" | {split} |"
            )
    return "\n".join(lines)
