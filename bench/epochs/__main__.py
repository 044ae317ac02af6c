"""Whole-table epochs at scale: the pin, ``lapras epoch start``, fresh answers on a big marginal.

    python -m bench.epochs                  # 10,000,000 rows (the docs run)
    python -m bench.epochs --rows 2000000   # fewer rows
    python -m bench.epochs --quick          # 1,000,000 rows, fewer rounds and answers
    python -m bench.epochs --write-docs     # also replace the docs section

Starts the embedded PostgreSQL in a temporary folder, generates ``public.events``
(``bench/epochs/workload.py``: nine declared attributes of every kind, a nullable one, values
outside the declared domains) with ``generate_series`` and ``random()``, provisions it
(``proxy.provision``) and writes a ``lapras.toml`` declaring it. Then, in one run:

1. **Pinning** the whole table against PostgreSQL's own ``GROUP BY``, in rounds of rotating
   order: ``EpochService.pin("events", None)`` end to end (``rewriter.pin_sql``, binary COPY,
   parse into a ``dp.pin.Pin``) and ``SELECT <9 columns>, count(*) FROM events GROUP BY <9
   columns>`` fetched fully with psycopg (the user's alternative), both as the aggregator role;
   and, as a diagnosis, the same pin from a statement with no ``WHERE`` on the cells
   (:func:`unfiltered_sql`). Medians, ratios, one more pin split into statement + COPY and
   parse, the plans (EXPLAIN), the pin's entries and ``Pin.nbytes``, and the resident memory a
   fresh process (``--probe-memory``, a child) gains by holding the pin (``VmRSS`` before and
   after, and its peak ``VmHWM`` while pinning).
2. **``lapras epoch start``** (the real CLI, a process of its own) with P = 100 statements over
   10 marginals (``--predicted p.sql``), ``lapras epoch close`` between rounds; then the same
   steps in-process, each timed (``start_in_process``): classify P, pin, ``dp.engine.start``
   (the Matrix Mechanism), ``PgLedger.create_epoch``.
3. **Fresh answers on a 100,000-cell marginal** (``age x region x dept x flag``): an engine
   state started in-process (``dp.engine.start`` over P, ``stream_length`` 1,000), then >= 200
   distinct COUNT / SUM statements with WHERE filters on those four columns (classified by the
   rewriter beforehand, untimed), each one ``dp.engine.answer`` = decide + apply + release +
   apply with the marginal already cached, the production sampler (``SecureSampler``); and the
   first-time computation of that marginal from the pin (cache cleared before each).

Raw results go to ``bench/out/epochs/epochs-<rows>.json``; the markdown section to
``bench/out/epochs/section-<rows>.md``. With ``--write-docs``, the section "Whole-table epochs"
of docs/benchmarks.md is replaced (or inserted before "Template prediction").
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "out" / "epochs"
DATABASE = "lapras_bench_epochs"
HEADING = "## Whole-table epochs (`bench/epochs`)"
BEFORE = "## Template prediction (`bench/predict`)"
TARGETS = {"pin_ratio": 1.5, "epoch_start_s": 5.0, "fresh_answer_ms": 5.0}
USAGE = """\
    python -m bench.epochs                  # 10,000,000 rows (the docs run; 7-9 minutes here)
    python -m bench.epochs --rows 2000000   # fewer rows
    python -m bench.epochs --quick          # 1,000,000 rows, 200 fresh answers"""
MEASURED = """\
**What is measured**, in one run against the embedded PostgreSQL (`bench/epochs/workload.py`
generates the table with `generate_series` and `random()`: nine declared attributes -- integers,
categorical text, a numeric column in bins, a boolean, a nullable integer, an integer in uneven
bins, a date by month -- with some values outside their declared domains; rows drawn from 20,000
random profiles, so the number of distinct value combinations stays near 1.15 million):

1. *Pinning* the whole table: `EpochService.pin` end to end (`rewriter.pin_sql`, binary COPY,
   `rewriter.pin_from_copy` into a `dp.pin.Pin`) against the user's alternative, PostgreSQL's
   own `SELECT <9 columns>, count(*) FROM events GROUP BY <9 columns>` fetched fully with
   psycopg; 3 rounds each in rotating order, both as the aggregator role. A third contender is
   the bench's own copy of the statement with no `WHERE` on the cells (a cell outside its
   domain comes back as -1 and the row is dropped in numpy after the COPY): a diagnosis while
   `pin_sql` filtered in SQL, a check now that it does not. Memory: a fresh child process's
   `VmRSS` before and after pinning (and its `VmHWM`).
2. *`lapras epoch start`*, the real CLI in its own process, with `--predicted p.sql`: 100
   statements over 10 marginals of 1-3 attributes (none inside another: 10 blocks), `lapras
   epoch close` between the 3 rounds; then the same steps in-process, each timed.
3. *Fresh answers* on the 100,000-cell marginal `age x region x dept x flag`: an engine state
   started in-process over P (`stream_length` 1,000), then 300 distinct `count(*)` / `sum(...)`
   statements with WHERE filters on those four columns, each timed over `dp.engine.answer`
   (decide + apply + release + apply, the production `SecureSampler`) with the marginal already
   cached; and that marginal's first computation from the pin (cache cleared, 10 times)."""


def status_kb() -> dict[str, int]:
    """VmRSS and VmHWM of this process, in KiB (/proc/self/status)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


# -- setup ---------------------------------------------------------------------------------------


def setup(pg: Any, rows: int, profiles: int) -> float:
    """Create the database and ``events`` (superuser), then provision it; seconds taken to
    generate the table."""
    from bench.epochs import workload
    from proxy import provision

    passwords = {}
    for role in (provision.AGGREGATOR, provision.PASSTHROUGH):
        passwords[role] = secrets.token_urlsafe(24)
        pg.set_password(role, passwords[role])
    with psycopg.connect(pg.dsn(), autocommit=True) as admin:
        provision.ensure_database(admin, DATABASE)
    t = time.perf_counter()
    with psycopg.connect(pg.dsn(database=DATABASE), autocommit=True) as conn:
        for sql in workload.generate_sql(rows, profiles):
            conn.execute(sql)
    took = time.perf_counter() - t
    plan = provision.Plan(
        database=DATABASE,
        protected=(f"public.{workload.TABLE}",),
        aggregator_password=passwords[provision.AGGREGATOR],
        passthrough_password=passwords[provision.PASSTHROUGH],
        analysts=(("bench", provision.analyst_role("bench")),),
    )
    left = provision.provision(pg.dsn(), plan)
    if left:
        raise RuntimeError(f"the catalogue lockdown is incomplete: {', '.join(left)}")
    return took


def write_config(pg: Any, folder: Path) -> Path:
    from bench.epochs import workload
    from proxy import provision

    text = (
        workload.DECLARATION
        + f"""
[server]
listen = "127.0.0.1:0"

[backend]
aggregator_dsn = "{pg.dsn(provision.AGGREGATOR, DATABASE)}"
passthrough_dsn = "{pg.dsn(provision.PASSTHROUGH, DATABASE)}"
state_dsn = "{pg.dsn(provision.AGGREGATOR, provision.state_database(DATABASE))}"

[[users]]
name = "bench"
password = "bench"

[privacy]
epsilon = 10.0
delta = 1e-6
stream_length = 1000
"""
    )
    path = folder / "lapras.toml"
    path.write_text(text)
    return path


# -- 1. pinning ----------------------------------------------------------------------------------


async def time_pin(service: Any) -> tuple[float, Any]:
    from bench.epochs import workload

    t = time.perf_counter()
    pin = await service.pin(workload.TABLE, None)
    return time.perf_counter() - t, pin


def time_group_by(dsn: str) -> tuple[float, int]:
    from bench.epochs import workload

    t = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(workload.group_by_sql()).fetchall()
    took = time.perf_counter() - t
    n = len(rows)
    del rows
    return took, n


def unfiltered_sql(config: Any) -> str:
    """Diagnosis (not the shipped statement): ``rewriter.pin_sql``'s shape with no ``WHERE``
    on the cells -- a value outside its domain becomes cell -1 (``coalesce``) and such rows
    are dropped after the COPY, in numpy (:func:`parse_unfiltered`). PostgreSQL then cannot
    push the cell tests down into the scan below the inner GROUP BY."""
    from bench.epochs import workload
    from rewriter.histogram import cell_expr

    attrs = tuple(config.schema.tables[workload.TABLE].attributes.values())
    cols = ", ".join(f'"{a.name}"' for a in attrs)
    cells = ", ".join(f"({cell_expr(a)}) AS c{i}" for i, a in enumerate(attrs))
    outer = ", ".join(f"coalesce(c{i}, -1)::int4" for i in range(len(attrs)))
    groups = ", ".join(str(i + 1) for i in range(len(attrs)))
    inner = f"SELECT {cols}, count(*) AS n FROM public.{workload.TABLE} GROUP BY {cols}"
    return (
        f"SELECT {outer}, sum(n)::int8 FROM (SELECT {cells}, n FROM ({inner}) AS g) AS cells "
        f"GROUP BY {groups}"
    )


def parse_unfiltered(domain: Any, data: bytes) -> Any:
    """The pin from :func:`unfiltered_sql`'s binary COPY: rows with a cell -1 dropped."""
    import numpy as np

    from dp.pin import Pin

    k = len(domain.attributes)
    ext = int.from_bytes(data[15:19], "big")
    fields = [("nf", ">i2")]
    for j in range(k):
        fields += [(f"l{j}", ">i4"), (f"c{j}", ">i4")]
    fields += [("ln", ">i4"), ("n", ">i8")]
    rows = np.frombuffer(memoryview(data)[19 + ext : -2], dtype=np.dtype(fields))
    keep = np.ones(rows.size, dtype=bool)
    for j in range(k):
        keep &= rows[f"c{j}"] >= 0
    cols = tuple(rows[f"c{j}"][keep].astype(np.int32) for j in range(k))
    return Pin(domain, cols, rows["n"][keep].astype(np.float64))


async def copy_bytes(dsn: str, sql: str) -> bytes:
    buf = bytearray()
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.cursor().copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)") as copy:
            async for data in copy:
                buf += data
    return bytes(buf)


def explain(dsn: str, sql: str) -> list[str]:
    """The plan's node lines (EXPLAIN, not run)."""
    with psycopg.connect(dsn) as conn:
        lines = [str(r[0]) for r in conn.execute("EXPLAIN " + sql).fetchall()]
    return [ln.split("  (cost")[0] for ln in lines if "(cost" in ln]


def pin_rounds(config: Any, rounds: int) -> tuple[dict[str, Any], Any]:
    import rewriter
    from bench.epochs import workload
    from proxy.app import admin_service

    dsn = config.backend.aggregator_dsn
    domain = rewriter.pin_domain(config.schema, workload.TABLE)
    variant = unfiltered_sql(config)
    times: dict[str, list[float]] = {"pin": [], "group": [], "unfiltered": []}
    result: dict[str, Any] = {}

    async def go() -> Any:
        pin = None
        async with admin_service(config) as service:
            with psycopg.connect(dsn) as conn:  # warm the OS cache: one full scan
                conn.execute(f"SELECT count(*) FROM public.{workload.TABLE}").fetchone()
            for r in range(rounds):
                order = ["pin", "group", "unfiltered"]
                order = order[r % 3 :] + order[: r % 3]
                for what in order:
                    pin = None
                    gc.collect()
                    if what == "pin":
                        took, pin = await time_pin(service)
                        label = "pin (EpochService.pin)"
                    elif what == "group":
                        took, n = await asyncio.to_thread(time_group_by, dsn)
                        result["group_by_rows"] = n
                        label = f"GROUP BY ({n:,} rows)"
                    else:
                        t = time.perf_counter()
                        data = await copy_bytes(dsn, variant)
                        other = await asyncio.to_thread(parse_unfiltered, domain, data)
                        took = time.perf_counter() - t
                        result["unfiltered_total"] = other.total
                        del data, other
                        label = "pin, statement without the cell filter (diagnosis)"
                    times[what].append(took)
                    print(f"  round {r + 1}: {label} {took:.2f} s", flush=True)
            # Where the shipped pin's time goes: the statement and its COPY, then the parse.
            sql = rewriter.pin_sql(config.schema, workload.TABLE)
            t = time.perf_counter()
            data = await copy_bytes(dsn, sql)
            t1 = time.perf_counter()
            pin = rewriter.pin_from_copy(domain, data)
            t2 = time.perf_counter()
            result.update(split_copy_s=t1 - t, split_parse_s=t2 - t1, copy_mib=len(data) / 2**20)
            print(
                f"  pin split: statement + COPY {t1 - t:.2f} s, parse {t2 - t1:.2f} s", flush=True
            )
            del data
        return pin

    pin = asyncio.run(go())
    result.update(
        pin_s=times["pin"],
        group_by_s=times["group"],
        unfiltered_s=times["unfiltered"],
        pin_median_s=statistics.median(times["pin"]),
        group_by_median_s=statistics.median(times["group"]),
        unfiltered_median_s=statistics.median(times["unfiltered"]),
        pin_entries=int(pin.counts.shape[0]),
        pin_nonempty=int((pin.counts > 0).sum()),
        pin_total=pin.total,
        pin_nbytes=pin.nbytes,
        plan_pin=explain(dsn, rewriter.pin_sql(config.schema, workload.TABLE)),
        plan_group_by=explain(dsn, workload.group_by_sql()),
        plan_unfiltered=explain(dsn, variant),
        pin_sql=rewriter.pin_sql(config.schema, workload.TABLE),
        unfiltered_sql=variant,
    )
    result["ratio"] = result["pin_median_s"] / result["group_by_median_s"]
    result["unfiltered_ratio"] = result["unfiltered_median_s"] / result["group_by_median_s"]
    return result, pin


def probe_memory(config_path: str) -> None:
    """(Child process) the RSS this process gains by pinning, as JSON on stdout."""
    from bench.epochs import workload
    from proxy.app import admin_service
    from proxy.config import load_config

    config = load_config(Path(config_path))

    async def go() -> dict[str, Any]:
        async with admin_service(config) as service:
            gc.collect()
            before = status_kb()
            pin = await service.pin(workload.TABLE, None)
            gc.collect()
            after = status_kb()
            return {
                "rss_before_kb": before["VmRSS"],
                "rss_after_kb": after["VmRSS"],
                "hwm_after_kb": after["VmHWM"],
                "hwm_before_kb": before["VmHWM"],
                "pin_nbytes": pin.nbytes,
            }

    print(json.dumps(asyncio.run(go())))


def memory(config_path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.epochs", "--probe-memory", str(config_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    m: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    m["held_mb"] = (m["rss_after_kb"] - m["rss_before_kb"]) / 1024
    m["peak_extra_mb"] = (m["hwm_after_kb"] - m["rss_before_kb"]) / 1024
    return m


# -- 2. lapras epoch start -----------------------------------------------------------------------


def cli(*args: str) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - t
    if out.returncode != 0:
        raise RuntimeError(f"lapras {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return took, out.stdout


def epoch_start_rounds(config_path: Path, pfile: Path, rounds: int) -> dict[str, Any]:
    from bench.epochs import workload

    common = ("--config", str(config_path), "--table", workload.TABLE)
    starts: list[float] = []
    last = ""
    for r in range(rounds):
        took, last = cli("epoch", "start", *common, "--predicted", str(pfile), "--reason", "bench")
        starts.append(took)
        print(f"  round {r + 1}: lapras epoch start {took:.2f} s", flush=True)
        cli("epoch", "close", *common, "--reason", "bench")
    t_help, _ = cli("--help")
    return {
        "epoch_start_s": starts,
        "epoch_start_median_s": statistics.median(starts),
        "cli_output": last.strip().splitlines()[-1] if last.strip() else "",
        "cli_help_s": t_help,
    }


def batches_of(config: Any, statements: list[str]) -> list[Any]:
    import rewriter

    out = []
    for sql in statements:
        (st,) = rewriter.classify(sql, config.schema)
        assert isinstance(st, rewriter.DPStatement) and st.plan is not None, sql
        out.append(st.plan.batch)
    return out


def start_in_process(config: Any, rounds: int) -> dict[str, Any]:
    """``EpochService.start_epoch``'s steps, each timed, in this process: classify P, pin,
    ``dp.engine.start`` (the Matrix Mechanism, in a worker thread as the service runs it), and
    the ledger write (``PgLedger.create_epoch``: the epoch, its events, the pin's stored
    bytes); the epoch is closed after each round."""
    import rewriter
    from bench.epochs import workload
    from dp import engine
    from dp.noise import SecureSampler
    from proxy.app import admin_service, engine_config

    cfg = engine_config(config.privacy)
    steps: dict[str, list[float]] = {"classify": [], "pin": [], "mm": [], "persist": []}
    info: dict[str, Any] = {}

    async def go() -> None:
        async with admin_service(config, sampler=SecureSampler) as service:
            for r in range(rounds):
                t0 = time.perf_counter()
                domain = rewriter.pin_domain(config.schema, workload.TABLE)
                batches, _ = service.predicted_batches(workload.TABLE, domain, workload.predicted())
                t1 = time.perf_counter()
                pin = await service.pin(workload.TABLE, None)
                t2 = time.perf_counter()
                _, events = await asyncio.to_thread(
                    engine.start, cfg, domain, batches, pin, SecureSampler()
                )
                t3 = time.perf_counter()
                await service.ledger.create_epoch(
                    table=workload.TABLE,
                    view="*",
                    config=cfg,
                    pin=pin,
                    events=events,
                    actor="bench",
                    reason="bench.epochs in-process start",
                )
                t4 = time.perf_counter()
                await service.close_epoch(workload.TABLE, actor="bench", reason="bench", wait=0)
                for key, took in zip(steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                    steps[key].append(took)
                print(f"  in-process round {r + 1}: classify {t1 - t0:.2f} s, pin {t2 - t1:.2f}"
                      f" s, engine.start {t3 - t2:.2f} s, create_epoch {t4 - t3:.2f} s",
                      flush=True)  # fmt: skip
                info.update(
                    predicted_batches=len(batches),
                    predicted_marginals=len({b.domain for b in batches}),
                    stored_pin_bytes=len(pin.to_bytes()),
                )
                del pin

    asyncio.run(go())
    out: dict[str, Any] = dict(info)
    for key, xs in steps.items():
        out[f"{key}_s"] = xs
        out[f"{key}_median_s"] = statistics.median(xs)
    out["in_process_median_s"] = statistics.median(
        sum(xs[i] for xs in steps.values()) for i in range(rounds)
    )
    return out


# -- 3. fresh answers ----------------------------------------------------------------------------


def fresh_answers(config: Any, pin: Any, n: int) -> dict[str, Any]:
    import rewriter
    from bench.epochs import workload
    from dp import engine
    from dp.domain import Domain
    from dp.noise import SecureSampler
    from proxy.app import engine_config

    domain = rewriter.pin_domain(config.schema, workload.TABLE)
    cfg = engine_config(config.privacy, stream_length=max(1000, 2 * n))
    state, _ = engine.start(cfg, domain, batches_of(config, workload.predicted()), pin,
                            SecureSampler())  # fmt: skip
    t = time.perf_counter()
    batches = batches_of(config, workload.fresh_statements(n))
    classify_s = time.perf_counter() - t
    marginal = batches[0].domain
    assert all(b.domain == marginal for b in batches)
    assert marginal.names == workload.BIG_MARGINAL
    first: list[float] = []
    for _ in range(10):
        pin._cache.clear()
        t = time.perf_counter()
        pin.marginal(Domain(marginal.attributes))
        first.append(time.perf_counter() - t)
    pin.marginal(marginal)  # cached from here on
    times: list[float] = []
    kinds: dict[str, int] = {}
    for b in batches:
        t = time.perf_counter()
        state, decision, _ = engine.answer(state, b, pin, SecureSampler())
        times.append(time.perf_counter() - t)
        kinds[decision.kind.value] = kinds.get(decision.kind.value, 0) + 1
    fresh = kinds.get("fresh", 0)
    print(f"  {len(times)} answers ({kinds}): median {1000 * statistics.median(times):.2f} ms, "
          f"p95 {1000 * pct(times, 0.95):.2f} ms", flush=True)  # fmt: skip
    return {
        "marginal": list(marginal.names),
        "marginal_cells": marginal.size,
        "answers": len(times),
        "kinds": kinds,
        "fresh": fresh,
        "answer_ms": [1000 * x for x in times],
        "answer_median_ms": 1000 * statistics.median(times),
        "answer_p95_ms": 1000 * pct(times, 0.95),
        "answer_max_ms": 1000 * max(times),
        "first_marginal_ms": [1000 * x for x in first],
        "first_marginal_median_ms": 1000 * statistics.median(first),
        "classify_ms_each": 1000 * classify_s / len(batches),
        "queries_per_statement": statistics.mean(b.num_queries for b in batches),
    }


# -- report --------------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Linux {platform.release()}"


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def markdown(res: dict[str, Any], cmd: str) -> str:
    p, e, f, m = res["pin"], res["epoch"], res["fresh"], res["memory"]
    rows = res["rows"]
    ratio_ok = p["ratio"] <= TARGETS["pin_ratio"]
    start_ok = e["epoch_start_median_s"] <= TARGETS["epoch_start_s"]
    fresh_ok = f["answer_median_ms"] <= TARGETS["fresh_answer_ms"]
    filtered = " WHERE " in p["pin_sql"]
    diag = (
        "diagnosis: the same pin from a statement with no `WHERE` on the cells (cell -1, "
        "row dropped in numpy after the COPY)"
        if filtered
        else "check: the bench's own copy of that statement (no `WHERE` on the cells, as "
        "`pin_sql` now), COPY + numpy parse"
    )
    lines = [
        USAGE,
        "",
        MEASURED,
        "",
        f"Command: `{cmd}` (embedded PostgreSQL {res['pg_version']}, server defaults; "
        f"{res['machine']}; PostgreSQL, the proxy's process and the benchmark share the cores). "
        f"Table `events`: {rows:,} rows generated in {res['generate_s']:.0f} s "
        f"(`bench/epochs/workload.py`), 9 declared attributes "
        f"({res['domain_cells']:,} cells), {p['group_by_rows']:,} distinct value combinations.",
        "",
        "| measured | runs | median | target | |",
        "|---|---:|---:|---:|---|",
        f"| `EpochService.pin` end to end (statement + binary COPY + parse into a `Pin`) "
        f"| {len(p['pin_s'])} | {p['pin_median_s']:.2f} s | | |",
        f"| `SELECT <9 columns>, count(*) ... GROUP BY <9 columns>`, fetched with psycopg "
        f"| {len(p['group_by_s'])} | {p['group_by_median_s']:.2f} s | | |",
        f"| pin / GROUP BY | | {p['ratio']:.2f}x | <= {TARGETS['pin_ratio']}x "
        f"| {verdict(ratio_ok)} |",
        f"| - of the pin: the statement and its binary COPY ({p['copy_mib']:.0f} MiB) / the parse "
        f"into a `Pin` (one more run) | 1 | {p['split_copy_s']:.2f} s / {p['split_parse_s']:.2f} s "
        f"| | |",
        f"| {diag} | {len(p['unfiltered_s'])} | {p['unfiltered_median_s']:.2f} s "
        f"({p['unfiltered_ratio']:.2f}x) | | |",
        f"| `lapras epoch start --predicted p.sql` (P: {e['predicted_batches']} statements, "
        f"{e['predicted_marginals']} marginals), the whole CLI command "
        f"| {len(e['epoch_start_s'])} | {e['epoch_start_median_s']:.2f} s "
        f"| <= {TARGETS['epoch_start_s']:.0f} s | {verdict(start_ok)} |",
        f"| in-process, the same steps (`EpochService.start_epoch`'s), timed one by one "
        f"| {len(e['pin_s'])} | {e['in_process_median_s']:.2f} s | | |",
        f"| - classify P (the rewriter) | | {e['classify_median_s']:.2f} s | | |",
        f"| - pin the table | | {e['pin_median_s']:.2f} s | | |",
        f"| - `dp.engine.start`: the Matrix Mechanism over P's 10 marginals "
        f"| | {e['mm_median_s']:.2f} s | | |",
        f"| - `PgLedger.create_epoch` (epoch, events, {e['stored_pin_bytes'] / 2**20:.0f} MiB "
        f"stored pin) | | {e['persist_median_s']:.2f} s | | |",
        f"| - starting the CLI's interpreter and imports (`lapras --help`) | 1 "
        f"| {e['cli_help_s']:.2f} s | | |",
        f"| fresh answer on the {f['marginal_cells']:,}-cell marginal "
        f"({' x '.join(f['marginal'])}): `dp.engine.answer` (decide + apply + release + apply), "
        f"marginal cached | {f['answers']} | {f['answer_median_ms']:.2f} ms "
        f"(p95 {f['answer_p95_ms']:.2f} ms) | <= {TARGETS['fresh_answer_ms']:.0f} ms "
        f"| {verdict(fresh_ok)} |",
        f"| that marginal computed the first time from the pin | {len(f['first_marginal_ms'])} "
        f"| {f['first_marginal_median_ms']:.1f} ms | | |",
        "",
        "| the pin of the whole table | |",
        "|---|---:|",
        f"| distinct value combinations (rows of the plain GROUP BY) | {p['group_by_rows']:,} |",
        f"| pin entries (padded to a power of two) / non-empty | {p['pin_entries']:,} / "
        f"{p['pin_nonempty']:,} |",
        f"| rows in the pin (values inside every declared domain) | {p['pin_total']:,.0f} |",
        f"| `Pin.nbytes` | {p['pin_nbytes'] / 2**20:.1f} MiB |",
        f"| proxy memory for the pinned {rows / 1e6:g}M-row table: RSS gained by a fresh process "
        f"holding the pin | {m['held_mb']:.0f} MB |",
        f"| peak RSS above the start while pinning (COPY buffer, parse) | "
        f"{m['peak_extra_mb']:.0f} MB |",
        "",
        f"Rounds (rotating order): pin {', '.join(f'{x:.2f}' for x in p['pin_s'])} s; GROUP BY "
        f"{', '.join(f'{x:.2f}' for x in p['group_by_s'])} s; no-filter pin "
        f"{', '.join(f'{x:.2f}' for x in p['unfiltered_s'])} s; `lapras epoch start` "
        f"{', '.join(f'{x:.2f}' for x in e['epoch_start_s'])} s; in-process `dp.engine.start` "
        f"{', '.join(f'{x:.2f}' for x in e['mm_s'])} s. Load average (1 min) "
        f"{res['loadavg_start'][0]:.1f} at the start, {res['loadavg_end'][0]:.1f} at the end. "
        "Fresh answers: "
        f"{f['fresh']} of {f['answers']} fresh releases, max {f['answer_max_ms']:.2f} ms; "
        "classifying each statement (the "
        f"rewriter, not timed above) took {f['classify_ms_each']:.1f} ms.",
    ]
    return "\n".join(lines)


def write_docs(section: str) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text()
    block = HEADING + "\n\n" + section.strip("\n") + "\n\n"
    if HEADING in text:
        start = text.index(HEADING)
        nxt = text.find("\n## ", start + len(HEADING))
        end = nxt + 1 if nxt != -1 else len(text)
        reading = text.find("<!-- reading:epochs -->", start)
        keep = text[reading:end] if reading != -1 and reading < end else ""
        text = text[:start] + block + keep + text[end:]
    elif BEFORE in text:
        text = text.replace(BEFORE, block + BEFORE, 1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    doc.write_text(text)


def main() -> None:
    # One BLAS thread, as the `lapras` command sets for itself (proxy/cli.py, docs/admin.md):
    # the in-process steps then run as inside `lapras epoch start`. Before numpy is imported.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    ap = argparse.ArgumentParser(
        prog="python -m bench.epochs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--rows", type=int, default=None, help="rows of the table (default 10M)")
    ap.add_argument("--profiles", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--probe-memory", metavar="CONFIG", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe_memory:
        probe_memory(args.probe_memory)
        return
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    rounds = 3
    n_fresh = 200 if args.quick else 300

    from bench.epochs import workload
    from proxy.config import load_config
    from proxy.embedded import EmbeddedPostgres

    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-epochs-"))
    pg = EmbeddedPostgres(folder / "pg").start()
    res: dict[str, Any] = {"rows": rows, "profiles": args.profiles, "machine": machine()}
    res["loadavg_start"] = os.getloadavg()
    try:
        print(f"generating {rows:,} rows ...", flush=True)
        res["generate_s"] = setup(pg, rows, args.profiles)
        with psycopg.connect(pg.dsn()) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            res["pg_version"] = row[0].split()[0] if row else "?"
        config_path = write_config(pg, folder)
        config = load_config(config_path)
        import rewriter

        res["domain_cells"] = rewriter.pin_domain(config.schema, workload.TABLE).size
        print("1. pinning vs GROUP BY", flush=True)
        res["pin"], pin = pin_rounds(config, rounds)
        res["memory"] = memory(config_path)
        print(f"  memory: {res['memory']}", flush=True)
        print("2. lapras epoch start", flush=True)
        pfile = folder / "p.sql"
        pfile.write_text(";\n".join(workload.predicted()) + ";\n")
        res["epoch"] = epoch_start_rounds(config_path, pfile, 3)
        res["epoch"].update(start_in_process(config, 3))
        print("3. fresh answers", flush=True)
        res["fresh"] = fresh_answers(config, pin, n_fresh)
    finally:
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)
    res["loadavg_end"] = os.getloadavg()

    cmd = "python -m bench.epochs" + (
        " --quick" if args.quick else f" --rows {rows}" if args.rows else ""
    )
    section = markdown(res, cmd)
    print("\n" + section)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"epochs-{rows}.json").write_text(json.dumps(res, indent=1) + "\n")
    (OUT / f"section-{rows}.md").write_text(section + "\n")
    if args.write_docs:
        write_docs(section)


if __name__ == "__main__":
    main()
