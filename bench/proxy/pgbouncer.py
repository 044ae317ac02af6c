"""LAPRAS beside PgBouncer and direct PostgreSQL, in one run (issue 18's measures).

    python -m bench.proxy.pgbouncer                 # 5 alternating rounds, pgbench -T 5 per run
    python -m bench.proxy.pgbouncer --quick         # 2 rounds of -T 2, 300 idle clients
    python -m bench.proxy.pgbouncer --write-docs    # and write the block in docs/benchmarks.md

Starts the embedded PostgreSQL in a temporary folder (``max_connections`` raised for the idle
clients), provisions the database ``bench`` as ``bench/proxy`` does, and runs in front of it:

- PgBouncer (Debian's package; installed with ``apt-get install -y pgbouncer`` when missing and
  this process is root; without it its column is skipped with a note), its own temporary
  configuration: ``pool_mode = transaction``, ``default_pool_size = 20``,
  ``max_client_conn = 1200``, SCRAM for clients (user ``bench``) and to the server (the
  passthrough role, as the proxy's passthrough connections use), a free loopback port;
- ``lapras serve`` as its own process (``bench.serving``), user ``bench``.

Then measures, in alternating rounds (each round runs direct, PgBouncer and the proxy back to
back, their order rotated from round to round), with ``pgbench`` (a custom script, ``-n``):

- 50 clients ``SELECT 1`` with ``-M simple``, ``-M extended``, ``-M prepared`` (tps, ``-j 2``);
- 1 client, the same three protocols (p50 latency from pgbench's per-transaction log);
- 50 clients, a new SQL text on every request: ``\\set r random(1, 1000000000)`` then
  ``SELECT :r`` with ``-M simple`` (pgbench writes the value into the text it sends);
- 1,000 idle clients (asyncpg, each runs one ``SELECT 1`` and then stays idle) through
  PgBouncer and through the proxy: the backends the proxy process holds (its TCP connections to
  PostgreSQL's port), the client backends PostgreSQL counts, the proxy's RSS (``VmRSS`` of its
  process tree) before, with the clients connected and after they close, and the memory
  PostgreSQL's processes add (sum of their ``Pss``).

PgBouncer 1.18 does not carry protocol-level prepared statements across the server
connections of a transaction pool (1.21 does, with ``max_prepared_statements``), so the
``-M prepared`` rows go through a second entry of the same PgBouncer, ``pool_mode = session``
with a pool as large as the clients: what a PgBouncer 1.18 user would configure.

Prints a table (median over the rounds; ratio = the median of the per-round ratios proxy ÷
PgBouncer) and, with --write-docs, replaces the block between ``<!-- pgbouncer:begin -->`` and
``<!-- pgbouncer:end -->`` in docs/benchmarks.md (adding the section the first time).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import psycopg

from bench.docs import write_block
from bench.serving import serve, stop, wait_until_serving, write_config

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "benchmarks.md"
BEGIN = "<!-- pgbouncer:begin -->"
END = "<!-- pgbouncer:end -->"
READING, READING_END = "<!-- reading:pgbouncer -->", "<!-- /reading -->"
HEADING = "## PgBouncer side by side (`bench/proxy/pgbouncer`)"
#: The section goes before this heading the first time (at the end when it is missing).
BEFORE = "## Ledger (`bench/ledger`)"

DIRECT, PGBOUNCER, LAPRAS = "direct", "PgBouncer", "lapras"
PROTOCOLS = ("simple", "extended", "prepared")
#: PgBouncer 1.18 runs -M prepared in a session pool (see the module's docstring).
SESSION = {"simple": "", "extended": "", "prepared": "; PgBouncer in session mode"}
USER, PASSWORD = "bench", "bench"


# -- PgBouncer ---------------------------------------------------------------------------------


def find_pgbouncer() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None
    )


def ensure_pgbouncer() -> tuple[str | None, str]:
    """(the pgbouncer executable or None, a note on how it was found or why it is missing).
    Installs Debian's package when it is missing, this process is root and apt-get exists."""
    found = find_pgbouncer()
    if found:
        return found, "already installed"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, "pgbouncer is not installed and this process cannot apt-get install it"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print("installing pgbouncer: apt-get install -y pgbouncer ...", flush=True)
    for attempt in (["apt-get", "install", "-y", "pgbouncer"], ["apt-get", "update"]):
        try:
            done = subprocess.run(
                attempt, env=env, capture_output=True, text=True, timeout=600, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"`{' '.join(attempt)}` failed: {e}"
        if attempt[1] == "install" and done.returncode == 0:
            break
        if attempt[1] == "update" and done.returncode == 0:
            retry = subprocess.run(
                ["apt-get", "install", "-y", "pgbouncer"],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if retry.returncode != 0:
                return None, f"apt-get install -y pgbouncer failed: {retry.stderr.strip()[-300:]}"
    found = find_pgbouncer()
    if found is None:
        return None, "apt-get install -y pgbouncer did not provide a pgbouncer executable"
    return found, "installed by this run (apt-get install -y pgbouncer)"


def pgbouncer_version(exe: str) -> str:
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"PgBouncer\s+(\S+)", out)
    return m.group(1) if m else out.strip().splitlines()[0] if out.strip() else "?"


def start_pgbouncer(
    exe: str, pg: Any, folder: Path, port: int, session_pool: int
) -> subprocess.Popen[bytes]:
    """PgBouncer on 127.0.0.1:port in front of ``pg``'s database ``bench``: entry ``bench`` a
    transaction pool of 20, entry ``bench_session`` a session pool of ``session_pool``. It
    refuses to run as root: as root it runs as the embedded server's system user."""
    from proxy import provision as prov
    from proxy.embedded import _run_as

    folder.mkdir(parents=True, exist_ok=True)
    run_as = _run_as()
    upstream = (
        f"host=127.0.0.1 port={pg.port} dbname=bench user={prov.PASSTHROUGH} "
        f"password={pg.password(prov.PASSTHROUGH)}"
    )
    (folder / "userlist.txt").write_text(f'"{USER}" "{PASSWORD}"\n')
    (folder / "pgbouncer.ini").write_text(
        f"""[databases]
bench = {upstream}
bench_session = {upstream} pool_mode=session pool_size={session_pool}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = {folder / "userlist.txt"}
pool_mode = transaction
max_client_conn = 1200
default_pool_size = 20
max_db_connections = 0
server_idle_timeout = 600
ignore_startup_parameters = extra_float_digits
logfile = {folder / "pgbouncer.log"}
log_connections = 0
log_disconnections = 0
stats_period = 600
"""
    )
    if run_as:
        for f in (folder, *folder.iterdir()):
            shutil.chown(f, "pgserver", "pgserver")
        from proxy.embedded import _open_for_traversal

        _open_for_traversal(folder)
    return subprocess.Popen(
        [exe, str(folder / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **run_as,
    )


# -- pgbench -------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    #: libpq connection strings: for the simple and extended protocols, and for -M prepared.
    conninfo: str
    prepared_conninfo: str


@dataclass
class Scenario:
    key: str
    label: str
    clients: int
    protocol: str
    script: str
    #: "tps" (higher is better) or "p50" (latency ms, lower is better)
    unit: str
    target: str
    samples: dict[str, list[float]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def pgbench(
    target: Target, scenario: Scenario, seconds: float, folder: Path
) -> tuple[float | None, str]:
    """One pgbench run: (tps, or p50 ms for one client; None when it failed, with the reason)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / f"{scenario.key}.sql"
    script.write_text(scenario.script)
    conninfo = target.prepared_conninfo if scenario.protocol == "prepared" else target.conninfo
    cmd = [
        "pgbench",
        "-n",
        "-f",
        str(script),
        "-M",
        scenario.protocol,
        "-c",
        str(scenario.clients),
        "-j",
        str(min(2, scenario.clients)),
        "-T",
        str(max(2, round(seconds))),
    ]
    logs = folder / "log"
    if scenario.unit == "p50":
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir()
        cmd += ["-l", "--log-prefix", str(logs / "tx")]
    cmd.append(conninfo)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, check=False)
    out = done.stdout + done.stderr
    tps = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", out)
    aborted = re.search(r"client \d+ aborted[^\n]*", out)
    if done.returncode != 0 or tps is None or aborted:
        lines = out.strip().splitlines() or ["?"]
        errors = [x for x in lines if re.search(r"error|aborted|FATAL", x)]
        return None, (errors or lines)[-1 if not errors else 0].strip()
    if scenario.unit == "tps":
        return float(tps.group(1)), ""
    latencies: list[float] = []
    for log in logs.iterdir():
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                latencies.append(int(parts[2]) / 1000.0)
    if not latencies:
        return None, "pgbench wrote no per-transaction log"
    return statistics.median(latencies), ""


def scenarios() -> list[Scenario]:
    out: list[Scenario] = []
    for protocol in PROTOCOLS:
        out.append(
            Scenario(
                f"c50-{protocol}",
                f"pgbench 50 clients `SELECT 1`, `-M {protocol}` (tps{SESSION[protocol]})",
                50,
                protocol,
                "SELECT 1\n",
                "tps",
                "≥ 1.0x",
            )
        )
    for protocol in PROTOCOLS:
        out.append(
            Scenario(
                f"c1-{protocol}",
                f"pgbench 1 client `SELECT 1`, `-M {protocol}` (p50 latency, ms{SESSION[protocol]})",
                1,
                protocol,
                "SELECT 1\n",
                "p50",
                "≤ 1.2x",
            )
        )
    out.append(
        Scenario(
            "c50-newtext",
            "pgbench 50 clients, a new SQL text on every request (`SELECT :r`, `-M simple`, tps)",
            50,
            "simple",
            "\\set r random(1, 1000000000)\nSELECT :r\n",
            "tps",
            "≥ 0.8x",
        )
    )
    return out


def run_rounds(
    targets: list[Target], plan: list[Scenario], rounds: int, seconds: float, folder: Path
) -> None:
    """Every scenario, ``rounds`` times; in each round the targets run back to back in an
    order rotated by the round, so a drift of the machine weighs on each alike."""
    for r in range(rounds):
        for sc in plan:
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            line = []
            for t in order:
                value, why = pgbench(t, sc, seconds, folder / t.name)
                if value is None:
                    sc.notes.append(f"{t.name}, round {r + 1}: {why}")
                    line.append(f"{t.name} failed")
                    continue
                sc.samples.setdefault(t.name, []).append(value)
                line.append(
                    f"{t.name} {value:,.3f}" if sc.unit == "p50" else f"{t.name} {value:,.0f}"
                )
            print(f"  round {r + 1}/{rounds} {sc.key:<12} " + ", ".join(line), flush=True)


# -- idle clients ------------------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kb(pid: int) -> int:
    """VmRSS of ``pid`` and its descendants, KB."""
    return sum(_status_kb(p, "VmRSS") for p in tree(pid))


def pss_kb(pid: int) -> int:
    """Proportional set size of ``pid`` and its descendants, KB (shared pages split)."""
    total = 0
    for p in tree(pid):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def _socket_inodes(pids: list[int]) -> set[int]:
    inodes: set[int] = set()
    for p in pids:
        try:
            fds = os.listdir(f"/proc/{p}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{p}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    return inodes


def upstream_connections(pid: int, pg_port: int) -> int:
    """Established TCP connections from ``pid``'s process tree to PostgreSQL's port: the
    backends that process holds."""
    inodes = _socket_inodes(tree(pid))
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            remote, state, inode = parts[2], parts[3], int(parts[9])
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == pg_port and inode in inodes:
                n += 1
    return n


def client_backends(superuser_dsn: str) -> int:
    with psycopg.connect(superuser_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


@dataclass
class Idle:
    name: str
    wanted: int
    connected: int = 0
    error: str = ""
    held_before: int = 0
    held_during: int = 0
    pg_backends_before: int = 0
    pg_backends_during: int = 0
    rss_before_kb: int = 0
    rss_during_kb: int = 0
    rss_after_kb: int = 0
    pg_pss_before_kb: int = 0
    pg_pss_during_kb: int = 0

    @property
    def per_client_kb(self) -> float:
        return (self.rss_during_kb - self.rss_before_kb) / max(1, self.connected)


async def _open_idle(dsn: str, n: int, concurrency: int = 10) -> tuple[list[Any], str]:
    conns: list[Any] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            try:
                conn = await asyncpg.connect(dsn, timeout=60, statement_cache_size=0)
                await conn.execute("SELECT 1")
                conns.append(conn)
            except (TimeoutError, OSError, asyncpg.PostgresError) as e:
                errors.append(f"{type(e).__name__}: {e}")

    await asyncio.gather(*(one(i) for i in range(n)))
    return conns, (f"{len(errors)} failed, first: {errors[0]}" if errors else "")


def idle_clients(name: str, dsn: str, pid: int, pg: Any, n: int) -> Idle:
    """Open ``n`` connections through the proxy ``pid`` (each runs one SELECT 1), keep them
    idle, measure, close them, measure again."""
    superuser = pg.dsn(database="postgres")
    postmaster = int((pg.pgdata / "postmaster.pid").read_text().split()[0])
    m = Idle(name, n)
    time.sleep(1)
    m.held_before = upstream_connections(pid, pg.port)
    m.pg_backends_before = client_backends(superuser)
    m.rss_before_kb = rss_kb(pid)
    m.pg_pss_before_kb = pss_kb(postmaster)

    async def session() -> None:
        conns, m.error = await _open_idle(dsn, n)
        m.connected = len(conns)
        await asyncio.sleep(2)
        m.held_during = upstream_connections(pid, pg.port)
        m.pg_backends_during = client_backends(superuser)
        m.rss_during_kb = rss_kb(pid)
        m.pg_pss_during_kb = pss_kb(postmaster)
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    asyncio.run(session())
    time.sleep(3)
    m.rss_after_kb = rss_kb(pid)
    print(
        f"  idle {name}: {m.connected}/{n} connected{' (' + m.error + ')' if m.error else ''}; "
        f"backends held {m.held_before} -> {m.held_during}; PostgreSQL client backends "
        f"{m.pg_backends_before} -> {m.pg_backends_during}; RSS {m.rss_before_kb / 1024:.1f} -> "
        f"{m.rss_during_kb / 1024:.1f} -> {m.rss_after_kb / 1024:.1f} MB after close "
        f"({m.per_client_kb:.1f} KB per client); PostgreSQL Pss "
        f"+{(m.pg_pss_during_kb - m.pg_pss_before_kb) / 1024:.0f} MB",
        flush=True,
    )
    return m


# -- the report ----------------------------------------------------------------------------


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def paired_ratio(sc: Scenario) -> float | None:
    """Median over rounds of lapras ÷ PgBouncer (rounds where both ran)."""
    a, b = sc.samples.get(LAPRAS, []), sc.samples.get(PGBOUNCER, [])
    pairs = [x / y for x, y in zip(a, b, strict=False) if y]
    if len(a) != len(b):  # a failed round: pair medians instead
        ma, mb = median(a), median(b)
        return ma / mb if ma is not None and mb else None
    return median(pairs)


def met(ratio: float | None, target: str) -> str:
    if ratio is None:
        return "—"
    bound = float(target.split()[1].rstrip("x"))
    ok = ratio >= bound if target.startswith("≥") else ratio <= bound
    return "yes" if ok else "no"


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if unit == "p50" else f"{v:,.0f}"


def table(plan: list[Scenario], idle: dict[str, Idle], have_bouncer: bool) -> str:
    rows = [
        f"| measure | {DIRECT} | {PGBOUNCER} | {LAPRAS} | {LAPRAS} ÷ {PGBOUNCER} | target | met |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for sc in plan:
        ratio = paired_ratio(sc) if have_bouncer else None
        rows.append(
            f"| {sc.label} | {fmt(median(sc.samples.get(DIRECT, [])), sc.unit)} | "
            f"{fmt(median(sc.samples.get(PGBOUNCER, [])), sc.unit) if have_bouncer else 'skipped'} | "
            f"{fmt(median(sc.samples.get(LAPRAS, [])), sc.unit)} | "
            f"{'—' if ratio is None else f'{ratio:.2f}x'} | {sc.target} | {met(ratio, sc.target)} |"
        )
    b, p = idle.get(PGBOUNCER), idle.get(LAPRAS)

    def cell(m: Idle | None, f: Callable[[Idle], str]) -> str:
        return "skipped" if m is None else f(m)

    n = p.wanted if p else b.wanted if b else 0

    def held_met(m: Idle | None) -> str:
        return "—" if m is None else "yes" if m.held_during <= 20 else "no"

    def kb_met(m: Idle | None) -> str:
        return "—" if m is None else "yes" if m.per_client_kb <= 5 else "no"

    rows += [
        f"| {n:,} idle clients: connected | — | {cell(b, lambda m: f'{m.connected:,}')} | "
        f"{cell(p, lambda m: f'{m.connected:,}')} | — | {n:,} | — |",
        f"| {n:,} idle clients: backends the proxy holds (before → with the clients) | — | "
        f"{cell(b, lambda m: f'{m.held_before} → {m.held_during:,}')} | "
        f"{cell(p, lambda m: f'{m.held_before} → {m.held_during:,}')} | — | ≤ 20 | "
        f"{held_met(p)} |",
        f"| {n:,} idle clients: PostgreSQL client backends (before → with the clients) | — | "
        f"{cell(b, lambda m: f'{m.pg_backends_before} → {m.pg_backends_during:,}')} | "
        f"{cell(p, lambda m: f'{m.pg_backends_before} → {m.pg_backends_during:,}')} | — | — | — |",
        f"| {n:,} idle clients: proxy RSS, MB (before → with the clients → after they close) | — | "
        f"{cell(b, _rss)} | {cell(p, _rss)} | — | — | — |",
        f"| {n:,} idle clients: proxy memory per client, KB | — | "
        f"{cell(b, lambda m: f'{m.per_client_kb:.1f}')} | "
        f"{cell(p, lambda m: f'{m.per_client_kb:.1f}')} | "
        f"{_ratio(p, b)} | ≤ 5 KB | {kb_met(p)} |",
        f"| {n:,} idle clients: memory PostgreSQL's processes add (Pss), MB | — | "
        f"{cell(b, _pss)} | {cell(p, _pss)} | — | — | — |",
    ]
    return "\n".join(rows)


def _rss(m: Idle) -> str:
    return (
        f"{m.rss_before_kb / 1024:.1f} → {m.rss_during_kb / 1024:.1f} → {m.rss_after_kb / 1024:.1f}"
    )


def _pss(m: Idle) -> str:
    return f"+{(m.pg_pss_during_kb - m.pg_pss_before_kb) / 1024:,.0f}"


def _ratio(p: Idle | None, b: Idle | None) -> str:
    if p is None or b is None or b.per_client_kb <= 0:
        return "—"
    return f"{p.per_client_kb / b.per_client_kb:.1f}x"


def per_round(plan: list[Scenario]) -> str:
    lines = []
    for sc in plan:
        parts = []
        for name in (DIRECT, PGBOUNCER, LAPRAS):
            xs = sc.samples.get(name)
            if xs:
                parts.append(f"{name} " + ", ".join(fmt(x, sc.unit) for x in xs))
        lines.append(
            f"- `{sc.key}` ({'p50 ms' if sc.unit == 'p50' else 'tps'}): " + "; ".join(parts)
        )
    return "\n".join(lines)


def load_note(start: tuple[float, float, float]) -> str:
    end = os.getloadavg()
    return f"load average (1 min) {start[0]:.1f} at the start, {end[0]:.1f} at the end"


def write_docs(block: str, docs: Path = DOCS) -> None:
    """Replace the block between BEGIN and END in ``docs`` by ``block`` (markers included, as
    :func:`main` builds it), keeping its hand-written ``<!-- reading:pgbouncer -->`` ...
    ``<!-- /reading -->`` part; the section goes before BEFORE the first time
    (:func:`bench.docs.write_block`)."""
    body = block.removeprefix(BEGIN).removesuffix(END)
    write_block(
        docs,
        body,
        begin=BEGIN,
        end=END,
        heading=HEADING,
        before=BEFORE,
        keep=(READING, READING_END),
    )


# -- main ----------------------------------------------------------------------------------


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="2 rounds of 2 s, 300 idle clients")
    ap.add_argument("--rounds", type=int, help="alternating rounds (default 5, --quick 2)")
    ap.add_argument(
        "--seconds", type=float, help="pgbench -T per run, s (default 5, --quick 2; at least 2)"
    )
    ap.add_argument("--idle", type=int, help="idle clients (default 1000, --quick 300)")
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    n_idle = args.idle or (300 if args.quick else 1000)
    began = time.perf_counter()
    load = os.getloadavg()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    raise_fd_limit()

    if shutil.which("pgbench") is None:
        sys.exit("pgbench is not installed (Debian: apt-get install postgresql-client)")
    bouncer_exe, bouncer_note = ensure_pgbouncer()
    version = pgbouncer_version(bouncer_exe) if bouncer_exe else ""
    print(f"pgbouncer: {bouncer_exe or 'missing'} {version} ({bouncer_note})", flush=True)

    from proxy import provision as prov
    from proxy.embedded import EmbeddedPostgres, _free_port, provision_adult

    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-pgbouncer-"))
    # Room for a proxy that would not pool: one backend per idle client.
    pg = EmbeddedPostgres(folder / "pg", settings={"max_connections": str(n_idle + 300)}).start()
    server: subprocess.Popen[bytes] | None = None
    bouncer: subprocess.Popen[bytes] | None = None
    plan = scenarios()
    idle: dict[str, Idle] = {}
    skipped: list[str] = []
    try:
        provision_adult(pg, "bench", (USER,))
        port = _free_port()
        config = write_config(pg, folder, port)
        text = config.read_text()
        config.write_text(
            text.replace("max_connections = 200", f"max_connections = {n_idle + 200}")
        )
        server = serve(config)
        lapras_dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/bench"
        direct_dsn = pg.dsn(prov.PASSTHROUGH, "bench")
        targets = [Target(DIRECT, direct_dsn, direct_dsn)]
        if bouncer_exe:
            bport = _free_port()
            bouncer = start_pgbouncer(bouncer_exe, pg, folder / "pgbouncer", bport, 60)
            bdsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{bport}/bench"
            wait_until_serving(bdsn)
            if bouncer.poll() is not None:
                skipped.append(f"PgBouncer exited at start (code {bouncer.returncode})")
                bouncer = None
            else:
                targets.append(Target(PGBOUNCER, bdsn, bdsn.rsplit("/", 1)[0] + "/bench_session"))
        else:
            skipped.append(f"PgBouncer column skipped: {bouncer_note}")
        for _ in range(3):
            wait_until_serving(lapras_dsn)
            if server.poll() is None:
                break
            print("lapras serve exited; retrying in 60 s", flush=True)
            time.sleep(60)
            server = serve(config)
        targets.append(Target(LAPRAS, lapras_dsn, lapras_dsn))

        # Idle clients first, on fresh pools (PgBouncer's then holds no server connection).
        if bouncer is not None:
            idle[PGBOUNCER] = idle_clients(PGBOUNCER, targets[1].conninfo, bouncer.pid, pg, n_idle)
        idle[LAPRAS] = idle_clients(LAPRAS, lapras_dsn, server.pid, pg, n_idle)
        run_rounds(targets, plan, rounds, seconds, folder / "pgbench")
    finally:
        if bouncer is not None:
            bouncer.terminate()
            try:
                bouncer.wait(10)
            except subprocess.TimeoutExpired:
                bouncer.kill()
        stop(server, timeout=30)
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)

    have_bouncer = PGBOUNCER in {t.name for t in targets}
    result = table(plan, idle, have_bouncer)
    elapsed = time.perf_counter() - began
    notes = [f"{sc.key} {n}" for sc in plan for n in sc.notes]
    print("\n" + result)
    for n in skipped + notes:
        print("note:", n)
    if not args.write_docs:
        return
    cmd = "python -m bench.proxy.pgbouncer" + (" --quick" if args.quick else "")
    for flag, value, default in (
        ("--rounds", args.rounds, None),
        ("--seconds", args.seconds, None),
        ("--idle", args.idle, None),
    ):
        if value is not default:
            cmd += f" {flag} {value}"
    cmd += " --write-docs"
    bouncer_text = (
        f"PgBouncer {version} (Debian's package, {bouncer_note})"
        if have_bouncer
        else "PgBouncer: skipped"
    )
    block = "\n".join(
        [
            BEGIN,
            f"Command: `{cmd}` ({stamp}, {elapsed:.0f} s; `nproc` = {os.cpu_count()}, "
            f"{platform.machine()}, Linux {platform.release()}). The machine has 2 cores, shared "
            "by pgbench, the proxy (PgBouncer or `lapras serve`, one process each) and "
            "PostgreSQL, and during this run with other work (test suites, another "
            f"benchmark; {load_note(load)}): numbers move between runs, which the alternating "
            "rounds and the medians are there to absorb.",
            "",
            f"Method: embedded PostgreSQL ({'max_connections'} = {n_idle + 300}); {bouncer_text} "
            "with its own temporary configuration (`pool_mode = transaction`, "
            "`default_pool_size = 20`, `max_client_conn = 1200`, SCRAM for clients and to "
            "the server, loopback); `lapras serve` as its own process with its defaults "
            '(`pool_mode = "transaction"`, `pool_size = 20`), the passthrough role '
            "as its backend user (PgBouncer and direct use the same role). pgbench 15 with a "
            f"custom script, `-n`, `-T {max(2, round(seconds))}` per run, `-j 2` for 50 "
            f"clients; {rounds} alternating rounds, each running direct, PgBouncer and the "
            "proxy back to back in an order rotated per round. Values are medians over the "
            "rounds; the ratio is the median of the per-round ratios lapras ÷ PgBouncer (for "
            "latency a lower ratio is better). 1-client latency: the median of every "
            "transaction's latency in pgbench's `-l` log. The `-M prepared` rows go through "
            "PgBouncer in `pool_mode = session` (a second database entry, pool 60): PgBouncer "
            "1.18 does not carry protocol-level prepared statements across the server "
            "connections of a transaction pool (1.21 does, with `max_prepared_statements`); "
            "the proxy serves them in transaction pooling, parsing a client's statements "
            "again on a connection another client used last. "
            f"Idle clients: {n_idle:,} asyncpg connections through each proxy (each runs one "
            "`SELECT 1`, then stays idle for 2 s), measured before the pgbench rounds on fresh "
            "pools; backends held = the proxy process's established TCP connections to "
            "PostgreSQL's port; RSS = `VmRSS` of its process tree; PostgreSQL's memory = the "
            "sum of its processes' `Pss`.",
            "",
            result,
            "",
            "Per round (in round order):",
            "",
            per_round(plan),
        ]
        + (["", "Notes:", ""] + [f"- {n}" for n in skipped + notes] if skipped or notes else [])
        + [END]
    )
    write_docs(block)
    print(f"wrote {DOCS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
