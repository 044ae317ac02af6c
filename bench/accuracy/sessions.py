"""Sessions of analyst statements at equal total budget (issue 39): the product beside Tumult
Analytics, SmartNoise SQL and the offline Matrix Mechanism knowing the whole session.

    python -m bench.accuracy sessions --quick          # short sessions, fewer systems' rounds
    python -m bench.accuracy sessions --write-docs     # the full run, docs/benchmarks.md updated

The sessions are ``sql_fixtures.sessions.sessions(seed)``: four sessions (about 500 statements)
of analysts and BI tools over Adult and the Gowalla check-ins, in the order they would send
them. Each session is one epoch: every system gets (epsilon, delta) = (1, 1e-6) *per table*
for the whole session (the product's epochs, the peers' sessions and budgets, the offline
Matrix Mechanism's release are all per table), and answers the session's statements in order:

- **the product** (:class:`InProcess`): the whole proxy (``proxy.app.running``: the wire, the
  router, the epoch service, the ledger on the embedded PostgreSQL) in this process with seeded
  noise, psycopg as the client; one epoch per table per session, started as ``lapras epoch
  start`` does with the [privacy] defaults (default mode, matrix-heavy split, Steady pacing, GDP
  filter, reuse of stored releases) and S = the session's number of statements over that
  table (the peers are told N too); a statement the product refuses counts as refused. For
  one session (``--serve``), also ``lapras serve`` as its own process with the production
  sampler, epochs started by ``lapras epoch start``: the same numbers, through the product as
  deployed;
- **Tumult Analytics** 0.21 (:mod:`bench.accuracy.tumult_sql` translates the SQL that
  translates mechanically; the rest is not accepted): zCDP, rho from (epsilon, delta) by the
  tightest conversion (Canonne, Kamath, Steinke 2020: :func:`zcdp_rho`), split evenly over the
  statements of the table it accepts (a statement's queries split its share evenly);
  ``AddOneRow`` on Adult, ``AddRowsWithID("user_id")`` with ``MaxRowsPerID(50)`` (the
  product's bound) after the statement's filter on the check-ins;
- **SmartNoise SQL** 1.0.10: the same SQL text on the same PostgreSQL, the declarations'
  bounds, ``censor_dims = False``, ``max_ids = 50`` per ``user_id`` on the check-ins, Laplace;
  each of the K mechanisms of the statements of a table it accepts gets the largest epsilon_0
  whose K-fold composition stays within (epsilon, delta): basic composition (epsilon / K, the
  issue's epsilon/N split when each statement has one mechanism) or the optimal homogeneous
  composition its own odometer implements (Kairouz, Oh, Viswanath 2015, Thm 3.4), whichever
  gives more (:func:`smartnoise_epsilon`);
- **the offline Matrix Mechanism** knowing the whole session (:func:`offline_mm`): every
  statement that the product's rewriter reduces to linear queries over one marginal of the
  table, all of them known before any noise is drawn, one Gaussian release at the whole
  (epsilon, delta) per table (``dp.marginals.plan_release``: a strategy per maximal
  marginal, the error-minimising split between them, the release's recomputed sensitivity
  under the table's privacy unit), each statement answered by least squares and the product's
  own post-processing. A bound, not a deployable system (it needs the session in advance).

Each answer is judged against PostgreSQL's exact answer over the whole table
(:mod:`bench.accuracy.judge`: the tolerance rule, the domain check). Reported per system:
statements answered, within tolerance, refused or not accepted, MAE of counts and sums, the
median relative error of statistics, answers outside their column's domain.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gzip
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

import rewriter
import sql_fixtures.adult as adult
import sql_fixtures.gowalla as gowalla
from bench.accuracy import judge, peers, tumult_sql
from dp.calibration import gaussian_sigma_for_mu, gdp_mu
from dp.domain import FloatArray, QueryBatch
from dp.marginals import BlockRelease, plan_release, release_sensitivity
from dp.noise import SeededSampler
from dp.pin import Pin
from dp.release import Release
from dp.units import Contribution
from sql_fixtures.corpus import REGIONS_DECLARATION, load_regions
from sql_fixtures.sessions import KINDS, Session, Step, sessions

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "benchmarks.md"
OUT = ROOT / "bench" / "out" / "accuracy_sessions.json"
EPSILON, DELTA = 1.0, 1e-6
SEED = 20260701
DATABASE = "lapras_test"
TABLES = ("adult", "checkins")
USER, PASSWORD = "analyst", "secret"
#: The check-ins' bound of rows per user (the declaration's max_rows_per_unit).
MAX_ROWS = 50
BEGIN, END = "<!-- sessions:begin -->", "<!-- sessions:end -->"


# ------------------------------------------------------------------------------------------
# the peers' accounting


def cks_delta(rho: float, epsilon: float) -> float:
    """delta of the (epsilon, delta)-DP that rho-zCDP implies, by Canonne, Kamath and Steinke
    (2020, Prop. 12): inf over a > 1 of exp((a-1)(a rho - epsilon)) / (a-1) * (1 - 1/a)^a."""

    def log_delta(t: float) -> float:
        a = 1.0 + math.exp(t)
        return (a - 1) * (a * rho - epsilon) - math.log(a - 1) + a * math.log1p(-1 / a)

    best = min(log_delta(t) for t in np.linspace(-12, 12, 241))
    r = minimize_scalar(log_delta, bounds=(-12, 12), method="bounded")
    return math.exp(min(best, float(r.fun)))


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest rho whose rho-zCDP implies (epsilon, delta)-DP by :func:`cks_delta`."""
    lo, hi = 0.0, epsilon
    for _ in range(100):
        mid = (lo + hi) / 2
        if cks_delta(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


def composed_epsilon(eps0: float, k: int, slack: float) -> float:
    """epsilon of k pure eps0-DP mechanisms composed (adaptively) with failure ``slack``: the
    smaller of basic composition and Kairouz, Oh and Viswanath's (2015) Thm 3.4 bounds."""
    if k <= 0:
        return 0.0
    lead = k * eps0 * math.expm1(eps0) / (math.exp(eps0) + 1)
    a = lead + eps0 * math.sqrt(2 * k * math.log(math.e + math.sqrt(k) * eps0 / slack))
    b = lead + eps0 * math.sqrt(2 * k * math.log(1 / slack))
    return min(k * eps0, a, b)


def smartnoise_epsilon(k: int, epsilon: float, delta: float) -> tuple[float, float, str]:
    """Per-mechanism (epsilon_0, delta_0) for k mechanisms within (epsilon, delta): half of
    delta is the composition's slack, the other half split over the mechanisms; and which
    composition gave it."""
    if k <= 0:
        return epsilon, delta, "basic"
    slack = delta / 2
    lo, hi = epsilon / k, epsilon
    for _ in range(100):
        mid = (lo + hi) / 2
        if composed_epsilon(mid, k, slack) <= epsilon:
            lo = mid
        else:
            hi = mid
    how = "basic" if lo <= epsilon / k * (1 + 1e-9) else "optimal"
    return lo, delta / (2 * k), how


# ------------------------------------------------------------------------------------------
# the backend and the exact answers


def declaration() -> str:
    """Adult, the check-ins (their lifetime caps left out: every session is a fresh epoch on a
    fresh ledger) and the public lookup table of the corpus."""
    checkins = re.sub(r"(?m)^lifetime_\w+ = .*$", "", gowalla.DECLARATION.read_text())
    return adult.DECLARATION.read_text() + "\n" + checkins + REGIONS_DECLARATION


class Backend:
    """The embedded PostgreSQL with both tables loaded and provisioned, and the lookup table."""

    def __init__(self, folder: Path) -> None:
        from proxy import provision
        from proxy.embedded import EmbeddedPostgres, provision_adult

        self.folder = folder
        self.pg = EmbeddedPostgres(folder / "pg").start()
        provision_adult(self.pg, DATABASE, (USER,))
        import psycopg

        with psycopg.connect(self.pg.dsn(database=DATABASE), autocommit=True) as conn:
            load_regions(conn)
            with conn.transaction():
                provision.grant_privileges(conn, DATABASE, ("public.adult", gowalla.TABLE))
        self.schema = rewriter.parse_schema(declaration(), "sessions.toml")

    @property
    def dsn(self) -> str:
        """The superuser on the data (the exact answers)."""
        return str(self.pg.dsn(database=DATABASE))

    def config_text(self, listen: str = "127.0.0.1:0", **privacy: Any) -> str:
        from proxy import provision as prov

        settings = {"epsilon": EPSILON, "delta": DELTA, "reveal_sources": True, **privacy}
        lines = "\n".join(f"{k} = {_toml(v)}" for k, v in settings.items())
        return (
            declaration()
            + f"""
[server]
listen = "{listen}"
shutdown_grace = 1

[backend]
aggregator_dsn = "{self.pg.dsn(prov.AGGREGATOR, DATABASE)}"
passthrough_dsn = "{self.pg.dsn(prov.PASSTHROUGH, DATABASE)}"
state_dsn = "{self.pg.dsn(prov.AGGREGATOR, prov.state_database(DATABASE))}"

[[users]]
name = "{USER}"
password = "{PASSWORD}"

[privacy]
{lines}
"""
        )

    def reset_ledger(self) -> None:
        import psycopg

        from proxy import provision as prov

        state = self.pg.dsn(database=prov.state_database(DATABASE))
        with psycopg.connect(state, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS lapras CASCADE")

    def stop(self) -> None:
        self.pg.stop()


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


Rows = list[tuple[Any, ...]]


def run_step(conn: Any, step: Step) -> Rows:
    for statement in step.setup:
        conn.execute(statement)
    rows: Rows = conn.execute(step.sql).fetchall()
    return rows


def exact(backend: Backend, steps: Sequence[Step]) -> dict[tuple[tuple[str, ...], str], Rows]:
    """PostgreSQL's own answers (the truth), by (setup, SQL)."""
    import psycopg

    truth: dict[tuple[tuple[str, ...], str], Rows] = {}
    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        for st in steps:
            key = (st.setup, st.sql)
            if key in truth:
                continue
            if st.setup:
                with psycopg.connect(backend.dsn, autocommit=True) as own:
                    truth[key] = run_step(own, st)
            else:
                truth[key] = run_step(conn, st)
    return truth


# ------------------------------------------------------------------------------------------
# one system's answers


@dataclass(slots=True)
class Outcome:
    """One step of one session answered (or not) by one system."""

    index: int
    rows: Rows | None = None
    error: str | None = None  # refused, not accepted, or failed
    seconds: float = 0.0
    how: str = ""  # the product: fresh, repeat, stored, composed (from its NOTICE)
    notice: str = ""


@dataclass(slots=True)
class Run:
    """One system over one session."""

    system: str
    session: str
    outcomes: list[Outcome]
    notes: dict[str, Any] = field(default_factory=dict)


def _how(message: str) -> str:
    if "fresh noise" in message:
        return "fresh"
    if "repeat of an earlier answer" in message:
        return "repeat"
    if "earlier releases" in message or "Matrix Mechanism" in message:
        return "stored"
    if "public values" in message:
        return "public"
    return "composed" if message else ""


class AppThread:
    """The whole proxy (``proxy.app.running``) on its own event loop in a thread, each draw
    of noise from its own seeded generator."""

    def __init__(self, config: Any, seed: int) -> None:
        self.config = config
        self.seed = seed
        self.loop = asyncio.new_event_loop()
        self.app: Any = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(
            target=self.loop.run_until_complete, args=(self._main(),), daemon=True
        )

    async def _main(self) -> None:
        from proxy.app import running

        self._stop = asyncio.Event()
        counter, seed = itertools.count(), self.seed
        async with running(
            self.config, sampler=lambda: SeededSampler(seed * 1000 + next(counter))
        ) as app:
            self.app = app
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> AppThread:
        self._thread.start()
        if not self._ready.wait(120):
            raise RuntimeError("the proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)

    @property
    def dsn(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.app.server.port}/{DATABASE}"


def ask_all(dsn: str, steps: Sequence[Step]) -> list[Outcome]:
    """Every step through the wire (psycopg, one connection; a step with setup statements on
    a connection of its own), with the NOTICE each answer came with."""
    import psycopg

    out = []
    notices: list[str] = []

    def connect() -> Any:
        conn = psycopg.connect(dsn, autocommit=True)
        conn.add_notice_handler(
            lambda d: notices.append(f"{d.message_primary or ''} | {d.message_detail or ''}")
        )
        return conn

    with connect() as conn:
        for i, step in enumerate(steps):
            notices.clear()
            t0 = time.perf_counter()
            try:
                if step.setup:
                    with connect() as own:
                        rows = run_step(own, step)
                else:
                    rows = run_step(conn, step)
            except psycopg.Error as e:
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                out.append(Outcome(i, error=f"{e.sqlstate}: {first}"))
                continue
            seconds = time.perf_counter() - t0
            notice = " || ".join(notices)
            out.append(Outcome(i, rows=rows, seconds=seconds, how=_how(notice), notice=notice))
    return out


def stream_lengths(session: Session) -> dict[str, int]:
    counts = collections.Counter(s.table for s in session.steps)
    return {t: counts[t] for t in TABLES if counts[t]}


class InProcess:
    """The product in this process (:class:`AppThread`), one epoch per table per session."""

    def __init__(self, backend: Backend, *, stream_length: int | None = None) -> None:
        self.backend = backend
        self.stream_length = stream_length  # None: the session's statements over the table

    def run(
        self, session: Session, seed: int, expected: Mapping[str, int] | None = None
    ) -> list[Outcome]:
        """The session in one epoch per table; ``expected``: E per table (the Steady
        pacing's expected fresh answers), None for the default (E = S: no query log)."""
        from proxy.app import admin_service, engine_config
        from proxy.config import parse_config

        self.backend.reset_ledger()
        config = parse_config(self.backend.config_text(), "sessions.toml")
        lengths = stream_lengths(session)

        async def start() -> None:
            async with admin_service(config, sampler=lambda: SeededSampler(seed)) as service:
                for table, n in lengths.items():
                    await service.start_epoch(
                        table=table,
                        config=engine_config(
                            config.privacy,
                            stream_length=self.stream_length or n,
                            expected_fresh=None if expected is None else max(1, expected[table]),
                        ),
                        actor="bench",
                        reason=f"session {session.name}",
                    )

        asyncio.run(start())
        with AppThread(config, seed) as app:
            return ask_all(app.dsn, session.steps)


class Serve:
    """The product as deployed: ``lapras serve`` in its own process (production sampler),
    epochs started by ``lapras epoch start``."""

    def __init__(self, backend: Backend, folder: Path) -> None:
        from proxy.embedded import _free_port

        self.backend = backend
        self.port = _free_port()
        self.config = folder / "serve.toml"
        self.config.write_text(backend.config_text(listen=f"127.0.0.1:{self.port}"))
        self.log_path = folder / "serve.log"

    def _cli(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "proxy.cli", *args, "--config", str(self.config)],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )

    def run(self, session: Session) -> list[Outcome]:
        from bench.serving import stop, wait_until_serving

        self.backend.reset_ledger()
        for table, n in stream_lengths(session).items():
            self._cli("epoch", "start", "--table", table, "--stream-length", str(n))
        with self.log_path.open("a") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "proxy.cli", "serve", "--config", str(self.config)],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            dsn = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"
            try:
                wait_until_serving(dsn)
                return ask_all(dsn, session.steps)
            finally:
                stop(server)


# ------------------------------------------------------------------------------------------
# the offline Matrix Mechanism


def _time_zone(step: Step) -> str:
    for s in step.setup:
        m = re.match(r"(?i)\s*SET\s+TimeZone\s*(=|TO)\s*'([^']+)'", s)
        if m:
            return m.group(2)
    return "UTC"


def single_marginal_plan(step: Step, schema: rewriter.Schema) -> rewriter.Plan | None:
    """The plan of a statement that is linear queries over one marginal of its table (no
    composition, no public table to read, no parameters), else None."""
    [st] = rewriter.classify(step.sql, schema, time_zone=_time_zone(step))
    if not isinstance(st, rewriter.DPStatement) or st.plan is None:
        return None
    if rewriter.pending(st.prepared):
        return None
    return st.plan


def offline_mm(
    batches: Sequence[QueryBatch],
    pin: Pin,
    contribution: Contribution,
    sampler: Any,
    *,
    epsilon: float = EPSILON,
    delta: float = DELTA,
) -> list[tuple[FloatArray, FloatArray] | None]:
    """The Matrix Mechanism over all ``batches`` at once (each over a marginal of ``pin``'s
    domain): one Gaussian release at the whole (epsilon, delta) (mu-GDP, the release's
    sensitivity recomputed under ``contribution``), each batch answered by least squares
    from the block of lowest total variance that answers all its rows: (answers, variances)
    per batch, None for a batch no block answers."""
    distinct = list({b.key: b for b in batches}.values())
    plans = plan_release(distinct, laplace=False)
    l2, _ = release_sensitivity(
        [(p.reduction, p.strategy) for p in plans], contribution, pin.domain
    )
    sigma = gaussian_sigma_for_mu(gdp_mu(epsilon, delta), l2)
    blocks = []
    for p in plans:
        x = p.reduction.reduce_data(pin.marginal(p.reduction.domain))
        y = p.strategy @ x + sampler.gaussian(sigma, p.strategy.shape[0])
        noise = np.full(p.strategy.shape[0], sigma**2)
        blocks.append(
            BlockRelease(p.reduction, Release(matrix=p.strategy, y=y, noise_variance=noise))
        )
    out: list[tuple[FloatArray, FloatArray] | None] = []
    for b in batches:
        best: tuple[FloatArray, FloatArray] | None = None
        for blk in blocks:
            if blk.domain.covers(b.domain):
                ans, var, ok = blk.solve(b)
                if np.all(ok) and (best is None or float(np.sum(var)) < float(np.sum(best[1]))):
                    best = (ans, var)
        out.append(best)
    return out


class OfflineMM:
    """:func:`offline_mm` per table of a session, over the table's pin."""

    def __init__(self, backend: Backend) -> None:
        import psycopg

        self.schema = backend.schema
        self.pins: dict[str, Pin] = {}
        with psycopg.connect(backend.dsn) as conn:
            for table in TABLES:
                # as the epoch service pins (proxy.epochs): a binary COPY of the pin statement
                sql = rewriter.pin_sql(self.schema, table, seed="bench-offline-mm")
                buf = bytearray()
                with conn.cursor().copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)") as copy:
                    for data in copy:
                        buf += data
                domain = rewriter.pin_domain(self.schema, table)
                self.pins[table] = rewriter.pin_from_copy(domain, buf)
        self.plans: dict[tuple[tuple[str, ...], str], rewriter.Plan | None] = {}

    def plan(self, step: Step) -> rewriter.Plan | None:
        key = (step.setup, step.sql)
        if key not in self.plans:
            self.plans[key] = single_marginal_plan(step, self.schema)
        return self.plans[key]

    def run(self, session: Session, seed: int) -> list[Outcome]:
        out = [
            Outcome(i, error="not linear queries over one marginal")
            for i in range(len(session.steps))
        ]
        for t_i, table in enumerate(TABLES):
            pin = self.pins[table]
            mine = []
            for i, step in enumerate(session.steps):
                plan = self.plan(step)
                if (
                    plan is not None
                    and plan.table.split(".")[-1] == table
                    and pin.domain.covers(plan.batch.domain)
                ):
                    mine.append((i, plan))
            if not mine:
                continue
            contribution = self.schema.tables[table].contribution
            t0 = time.perf_counter()
            answers = offline_mm(
                [p.batch for _, p in mine], pin, contribution, SeededSampler(seed * 10 + t_i)
            )
            seconds = (time.perf_counter() - t0) / len(mine)
            for (i, plan), got in zip(mine, answers, strict=True):
                if got is None:
                    out[i] = Outcome(i, error="no block answers it")
                    continue
                ans, var = got
                rows = rewriter.postprocess(plan, ans, np.sqrt(var))
                out[i] = Outcome(i, rows=rows, seconds=seconds)
        return out


# ------------------------------------------------------------------------------------------
# the peers


def smartnoise_metadata(schema: rewriter.Schema) -> dict[str, Any]:
    tables: dict[str, Any] = {}
    for name in TABLES:
        decl = schema.tables[name]
        meta: dict[str, Any] = {"censor_dims": False}
        if decl.unit is None:
            meta["row_privacy"] = True
        else:
            meta["row_privacy"] = False
            meta["max_ids"] = decl.unit.contribution.rows
            meta[decl.unit.column] = {"type": "int", "private_id": True}
        for a_name, a in decl.attributes.items():
            if a.kind is rewriter.schema.Kind.INTEGER:
                meta[a_name] = {
                    "type": "int",
                    "lower": int(a.bins[0][0]),
                    "upper": int(a.bins[-1][1]),
                }
            elif a.kind is rewriter.schema.Kind.NUMERIC:
                meta[a_name] = {
                    "type": "float",
                    "lower": float(a.bins[0][0]),
                    "upper": float(a.bins[-1][1]),
                }
            elif a.kind is rewriter.schema.Kind.DATE:
                meta[a_name] = {"type": "datetime"}
            else:
                meta[a_name] = {"type": "string"}
        tables[name] = meta
    return {"Database": {"public": tables}}


def tumult_hello(schema: rewriter.Schema, folder: Path) -> dict[str, Any]:
    """The worker's tables: Adult from its CSV, the check-ins written as one."""
    checkins = folder / "checkins.csv.gz"
    if not checkins.exists():
        with gzip.open(checkins, "wt", encoding="utf-8") as f:
            for r in gowalla.rows():
                f.write(f"{r[0]},{r[1]},{r[2]!r},{r[3]!r},{r[4].isoformat()},{r[5]}\n")
    out: dict[str, Any] = {}
    for name in TABLES:
        decl = schema.tables[name]
        domains: dict[str, list[Any]] = {}
        for a_name, a in decl.attributes.items():
            if a.kind is rewriter.schema.Kind.CATEGORICAL:
                domains[a_name] = list(a.values)
            elif a.kind is rewriter.schema.Kind.INTEGER and a.unit_bins:
                domains[a_name] = list(range(int(a.bins[0][0]), int(a.bins[-1][1]) + 1))
        kinds = dict(decl.columns)
        keep = [*decl.attributes] + ([decl.unit.column] if decl.unit is not None else [])
        out[name] = {
            "csv": str(adult.DATA if name == "adult" else checkins),
            "columns": [c for c, _ in decl.columns],
            "integers": [c for c, t in decl.columns if t in ("integer", "int4", "int8", "bigint")],
            "floats": [c for c in keep if kinds.get(c) == "double precision"],
            "dates": [c for c in keep if kinds.get(c) == "date"],
            "keep": keep,
            "domains": domains,
            "id_column": decl.unit.column if decl.unit is not None else None,
            "max_rows": decl.unit.contribution.rows if decl.unit is not None else None,
        }
    return {"tables": out}


class SmartNoise:
    def __init__(self, backend: Backend, worker: peers.Worker, steps: Sequence[Step]) -> None:
        self.worker = worker
        distinct = sorted({s.sql for s in steps})
        probe = worker.ask({"probe": [{"id": str(i), "sql": q} for i, q in enumerate(distinct)]})
        self.mechanisms = {distinct[int(i)]: round(k) for i, k in probe["mechanisms"].items()}
        self.refused = {distinct[int(i)]: why for i, why in probe["refused"].items()}

    def run(self, session: Session) -> tuple[list[Outcome], dict[str, Any]]:
        out = [Outcome(i) for i in range(len(session.steps))]
        k: collections.Counter[str] = collections.Counter()
        todo = []
        for i, step in enumerate(session.steps):
            if step.sql in self.refused or step.setup:
                out[i].error = self.refused.get(step.sql, "a session setting it cannot take")
                continue
            k[step.table] += self.mechanisms[step.sql]
            todo.append({"id": str(i), "sql": step.sql, "table": step.table})
        privacy = {t: smartnoise_epsilon(k[t], EPSILON, DELTA) for t in k}
        answer = self.worker.ask(
            {"statements": todo, "privacy": {t: [e, d] for t, (e, d, _) in privacy.items()}}
        )
        for r in answer["results"]:
            o = out[int(r["id"])]
            if "error" in r:
                o.error = r["error"]
            else:
                o.rows = [tuple(row) for row in r["rows"]]
                o.seconds = r["seconds"]
        notes = {
            "mechanisms": dict(k),
            "per_mechanism": {t: [e, d, how] for t, (e, d, how) in privacy.items()},
            "spent": answer["spent"],
        }
        return out, notes


class Tumult:
    def __init__(
        self, schema: rewriter.Schema, worker: peers.Worker, steps: Sequence[Step]
    ) -> None:
        self.worker = worker
        self.specs: dict[str, dict[str, Any]] = {}
        self.refused: dict[str, str] = {}
        for q in sorted({s.sql for s in steps}):
            try:
                self.specs[q] = tumult_sql.translate(q, schema)
            except tumult_sql.NotExpressible as e:
                self.refused[q] = f"not translated: {e}"
        names = sorted(self.specs)
        probe = worker.ask(
            {"probe": [{"id": str(i), "spec": self.specs[q]} for i, q in enumerate(names)]}
        )
        for i, why in probe["refused"].items():
            self.refused[names[int(i)]] = why
            del self.specs[names[int(i)]]
        self.rho = zcdp_rho(EPSILON, DELTA)

    def run(self, session: Session) -> tuple[list[Outcome], dict[str, Any]]:
        out = [Outcome(i) for i in range(len(session.steps))]
        n: collections.Counter[str] = collections.Counter()
        for i, step in enumerate(session.steps):
            if step.sql not in self.specs or step.setup:
                out[i].error = self.refused.get(step.sql, "a session setting it cannot take")
            else:
                n[self.specs[step.sql]["table"]] += 1
        shrink = 1 - 1e-9
        todo = [
            {
                "id": str(i),
                "spec": self.specs[step.sql],
                "budget": {
                    "kind": "rho",
                    "rho": self.rho / n[self.specs[step.sql]["table"]] * shrink,
                },
            }
            for i, step in enumerate(session.steps)
            if out[i].error is None
        ]
        answer = self.worker.ask(
            {"statements": todo, "budgets": {t: {"kind": "rho", "rho": self.rho} for t in n}}
        )
        for r in answer["results"]:
            o = out[int(r["id"])]
            if "error" in r:
                o.error = r["error"]
            else:
                spec = self.specs[session.steps[o.index].sql]
                o.rows = tumult_sql.rows(spec, r["rows"])
                o.seconds = r["seconds"]
        return out, {"statements": dict(n), "rho": self.rho, "remaining": answer["remaining"]}


# ------------------------------------------------------------------------------------------
# judging and the report


@dataclass(slots=True)
class Scored:
    """One step judged for one system."""

    step: Step
    session: str
    outcome: Outcome
    judgement: judge.Judgement | None
    out_of_domain: int = 0

    @property
    def answered(self) -> bool:
        return self.outcome.error is None and self.judgement is not None

    @property
    def within(self) -> bool:
        return self.answered and self.judgement is not None and self.judgement.within


def score(
    run: Run,
    session: Session,
    truth: Mapping[tuple[tuple[str, ...], str], Rows],
    schema: rewriter.Schema,
) -> list[Scored]:
    out = []
    for o in run.outcomes:
        step = session.steps[o.index]
        if o.error is not None or o.rows is None:
            out.append(Scored(step, session.name, o, None))
            continue
        outs = judge.outputs(step.sql)
        j = judge.judge(outs, truth[(step.setup, step.sql)], o.rows)
        attrs = judge.attributes(schema, step.table)
        out.append(Scored(step, session.name, o, j, judge.domain_violations(j, attrs)))
    return out


def _cells(scored: Sequence[Scored]) -> list[judge.Cell]:
    return [c for s in scored if s.answered and s.judgement for c in s.judgement.cells]


def _kind_of(c: judge.Cell) -> str:
    if c.role == "count":
        return "sum" if c.agg == "sum" and c.column else "count"
    return "statistic"


def summary(scored: Sequence[Scored]) -> dict[str, Any]:
    cells = _cells(scored)
    errs: dict[str, list[float]] = {"count": [], "sum": [], "statistic": []}
    for c in cells:
        e = c.error
        if e is None:
            continue
        k = _kind_of(c)
        if k == "statistic":
            t = judge.number(c.exact)
            if t:
                errs[k].append(e / abs(t))
        else:
            errs[k].append(e)
    n = len(scored)
    answered = sum(s.answered for s in scored)
    return {
        "statements": n,
        "answered": answered,
        "within": sum(s.within for s in scored),
        "refused": n - answered,
        "count_mae": float(np.mean(errs["count"])) if errs["count"] else None,
        "sum_mae": float(np.mean(errs["sum"])) if errs["sum"] else None,
        "stat_rel": float(np.median(errs["statistic"])) if errs["statistic"] else None,
        "out_of_domain": sum(s.out_of_domain for s in scored),
    }


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


ORACLE_E = "LAPRAS, E = its fresh answers (diagnostic)"
DEFAULT_S = "LAPRAS, S = 1000, the [privacy] default (diagnostic)"
SYSTEMS = (
    "LAPRAS (in process)",
    "LAPRAS (lapras serve)",
    ORACLE_E,
    DEFAULT_S,
    "Tumult Analytics",
    "SmartNoise SQL",
    "Offline MM (whole session known)",
)


#: The systems of the breakdowns (not the serve check nor the diagnostics).
MAIN = (
    "LAPRAS (in process)",
    "Tumult Analytics",
    "SmartNoise SQL",
    "Offline MM (whole session known)",
)


def systems_table(results: Mapping[str, list[Scored]], dp: Mapping[str, str]) -> str:
    lines = [
        "| system | DP, per table and session | statements | answered | within tolerance "
        "| refused or not accepted | count MAE | sum MAE | statistics: median relative error "
        "| answers outside the domain |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in SYSTEMS:
        if name not in results:
            continue
        s = summary(results[name])
        lines.append(
            f"| {name} | {dp.get(name, '')} | {s['statements']} | {s['answered']} "
            f"| **{s['within']}** | {s['refused']} | {_fmt(s['count_mae'])} | {_fmt(s['sum_mae'])} "
            f"| {_pct(s['stat_rel'])} | {s['out_of_domain']} |"
        )
    return "\n".join(lines)


def breakdown_table(
    results: Mapping[str, list[Scored]],
    key: Callable[[Scored], str],
    keys: Sequence[str],
    label: str,
) -> str:
    names = [n for n in MAIN if n in results]
    lines = [
        f"| {label} | statements | " + " | ".join(names) + " |",
        "|---|---:|" + "---:|" * len(names),
    ]
    base = results[names[0]]
    for k in keys:
        total = sum(1 for s in base if key(s) == k)
        if not total:
            continue
        cells = [str(sum(s.within for s in results[n] if key(s) == k)) for n in names]
        lines.append(f"| {k} | {total} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def common_table(results: Mapping[str, list[Scored]]) -> tuple[str, int]:
    """MAE on the steps every system (but the serve check) answered."""
    names = [n for n in MAIN if n in results]
    ids = None
    for n in names:
        got = {(s.session, s.outcome.index) for s in results[n] if s.answered}
        ids = got if ids is None else ids & got
    ids = ids or set()
    lines = [
        "| system | within tolerance | count MAE | sum MAE | statistics: median relative error |",
        "|---|---:|---:|---:|---:|",
    ]
    for n in names:
        sub = [s for s in results[n] if (s.session, s.outcome.index) in ids]
        su = summary(sub)
        lines.append(
            f"| {n} | {su['within']} of {len(sub)} | {_fmt(su['count_mae'])} "
            f"| {_fmt(su['sum_mae'])} | {_pct(su['stat_rel'])} |"
        )
    return "\n".join(lines), len(ids)


def count_table(results: Mapping[str, list[Scored]]) -> str:
    """Per system: the errors of its count cells (COUNT, or Tableau's SUM(1)) per table; on
    the check-ins, how the answers compare with the exact counts of all rows (the bound of
    rows per user leaves most of them out)."""
    lines = [
        "| system | Adult: count cells | median absolute error | MAE | check-ins: count cells "
        "| median of answer / exact |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in SYSTEMS:
        if name not in results:
            continue
        row = [name]
        for table in TABLES:
            errs, ratios = [], []
            for s in results[name]:
                if s.step.table != table or not s.answered or s.judgement is None:
                    continue
                for c in s.judgement.cells:
                    a, t = judge.number(c.answer), judge.number(c.exact)
                    if _kind_of(c) != "count" or a is None or t is None or c.missing:
                        continue
                    errs.append(abs(a - t))
                    if t >= 1000:
                        ratios.append(a / t)
            if table == "adult":
                row += [
                    str(len(errs)),
                    _fmt(float(np.median(errs)) if errs else None),
                    _fmt(float(np.mean(errs)) if errs else None),
                ]
            else:
                row += [str(len(errs)), f"{np.median(ratios):.2f}" if ratios else "–"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def diagnosis(results: Mapping[str, list[Scored]], notes: Mapping[str, Any]) -> str:
    """Why the product's statements miss: refusals by SQLSTATE, how answers were made,
    which cells fail."""
    mine = results.get("LAPRAS (in process)", [])
    if not mine:
        return ""
    refusals = collections.Counter(
        (s.outcome.error or "")[:5] for s in mine if s.outcome.error is not None
    )
    failing: collections.Counter[str] = collections.Counter()
    for s in mine:
        if s.answered and not s.within and s.judgement is not None:
            kinds = {_kind_of(c) for c in s.judgement.cells if not c.ok}
            if any(not c.ok for c in s.judgement.extra):
                kinds.add("a group PostgreSQL lacks")
            if any(c.missing for c in s.judgement.cells):
                kinds = {"a group missing"}
            failing[" and ".join(sorted(kinds))] += 1
    lines = [
        "- refused, by SQLSTATE: "
        + (", ".join(f"{k} {v}" for k, v in refusals.most_common()) or "none"),
    ]
    for table in TABLES:
        how = collections.Counter(
            s.outcome.how or "?" for s in mine if s.answered and s.step.table == table
        )
        within = collections.Counter(
            s.outcome.how or "?" for s in mine if s.within and s.step.table == table
        )
        lines.append(
            f"- answered on {table}, by how (within tolerance / answered): "
            + ", ".join(f"{k} {within[k]}/{v}" for k, v in how.most_common())
        )
    lines.append(
        "- answered but not within tolerance, by the cells that miss: "
        + (", ".join(f"{k} {v}" for k, v in failing.most_common()) or "none")
    )
    spent = notes.get("spent")
    if spent:
        lines.append(f"- budget spent at the end of each session (share of the epoch's): {spent}")
    se = notes.get("fresh_se")
    if se:
        lines.append(
            f"- standard error of a count stated with fresh answers, median (min–max): {se}"
        )
    return "\n".join(lines)


def product_notes(results: list[Scored]) -> dict[str, Any]:
    spent: dict[str, list[str]] = collections.defaultdict(list)
    last: dict[tuple[str, str], str] = {}
    ses: list[float] = []
    for s in results:
        m = re.search(r"Budget spent ([\d.e+-]+) of ([\d.e+-]+)", s.outcome.notice)
        if m:
            last[(s.session, s.step.table)] = f"{100 * float(m.group(1)) / float(m.group(2)):.0f}%"
        if s.outcome.how == "fresh":
            m2 = re.search(r"standard error [^;|]*?count[^0-9]*(\d+(?:\.\d+)?)", s.outcome.notice)
            if m2:
                ses.append(float(m2.group(1)))
    for (session, table), v in sorted(last.items()):
        spent[session].append(f"{table} {v}")
    out: dict[str, Any] = {
        "spent": "; ".join(f"{k}: {', '.join(v)}" for k, v in spent.items()),
    }
    if ses:
        out["fresh_se"] = f"{np.median(ses):.3g} ({min(ses):.3g}–{max(ses):.3g})"
    return out


# ------------------------------------------------------------------------------------------
# the run


def dump(path: Path, results: Mapping[str, list[Scored]], extra: Mapping[str, Any]) -> None:
    data: dict[str, Any] = {"extra": extra, "systems": {}}
    for name, scored in results.items():
        data["systems"][name] = [
            {
                "session": s.session,
                "index": s.outcome.index,
                "kind": s.step.kind,
                "table": s.step.table,
                "sql": s.step.sql,
                "error": s.outcome.error,
                "within": s.within,
                "how": s.outcome.how,
                "out_of_domain": s.out_of_domain,
                "cells": [
                    [c.role, str(c.exact), str(c.answer), c.ok]
                    for c in (s.judgement.cells if s.judgement else [])
                ][:50],
            }
            for s in scored
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.accuracy sessions", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--quick", action="store_true", help="short sessions (scale 0.25)")
    ap.add_argument("--scale", type=float, default=None, help="session length factor")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--only", default="", help="comma-separated session names")
    ap.add_argument("--no-peers", action="store_true", help="the product and the offline MM only")
    ap.add_argument("--no-install", action="store_true", help="never install a peer")
    ap.add_argument("--serve", type=int, default=1, help="sessions also run through lapras serve")
    ap.add_argument(
        "--diagnose",
        action="store_true",
        help="also the product with E = its own number of fresh answers, and with S = 1000",
    )
    ap.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args(argv)
    scale = args.scale if args.scale is not None else (0.25 if args.quick else 1.0)
    t_start = time.perf_counter()
    chosen = sessions(args.seed, scale=scale)
    if args.only:
        keep = set(args.only.split(","))
        chosen = [s for s in chosen if s.name in keep]
    all_steps = [st for s in chosen for st in s.steps]
    print(
        f"{len(chosen)} sessions, {len(all_steps)} statements "
        f"({len({st.sql for st in all_steps})} distinct)",
        file=sys.stderr,
    )
    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-sessions-"))
    backend = Backend(folder)
    workers: dict[str, peers.Worker] = {}
    runs: dict[str, list[Run]] = collections.defaultdict(list)
    extra: dict[str, Any] = {"seed": args.seed, "scale": scale, "sessions": {}}
    dp = {
        "LAPRAS (in process)": "GDP filter (1, 1e-6)",
        "LAPRAS (lapras serve)": "GDP filter (1, 1e-6)",
        ORACLE_E: "GDP filter (1, 1e-6)",
        DEFAULT_S: "GDP filter (1, 1e-6)",
        "Offline MM (whole session known)": "GDP (1, 1e-6), one release",
    }
    try:
        truth = exact(backend, all_steps)
        print(f"exact answers ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr)
        product = InProcess(backend)
        mm = OfflineMM(backend)
        sn = tm = None
        if not args.no_peers:
            for peer, hello in (
                (
                    peers.SMARTNOISE,
                    {"dsn": backend.dsn, "metadata": smartnoise_metadata(backend.schema)},
                ),
                (peers.TUMULT, tumult_hello(backend.schema, peers.PEERS)),
            ):
                try:
                    workers[peer.name] = peers.start(peer, hello, install=not args.no_install)
                except peers.PeerError as e:
                    print(f"{peer.label}: {e}", file=sys.stderr)
            if "smartnoise" in workers:
                sn = SmartNoise(backend, workers["smartnoise"], all_steps)
                dp["SmartNoise SQL"] = (
                    f"Laplace, (1, 1e-6) over its mechanisms (smartnoise-sql "
                    f"{workers['smartnoise'].hello['version']})"
                )
            if "tumult" in workers:
                tm = Tumult(backend.schema, workers["tumult"], all_steps)
                dp["Tumult Analytics"] = (
                    f"rho-zCDP, rho = {tm.rho:.4g} (tmlt.analytics {workers['tumult'].hello['version']})"
                )
        for k, session in enumerate(chosen):
            seed = args.seed + 7919 * k
            t0 = time.perf_counter()
            runs["LAPRAS (in process)"].append(
                Run("LAPRAS (in process)", session.name, product.run(session, seed))
            )
            print(f"{session.name}: product {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            if args.diagnose:
                fresh = collections.Counter(
                    session.steps[o.index].table
                    for o in runs["LAPRAS (in process)"][-1].outcomes
                    if o.how == "fresh"
                )
                expected = {t: fresh[t] for t in stream_lengths(session)}
                runs[ORACLE_E].append(
                    Run(ORACLE_E, session.name, product.run(session, seed, expected))
                )
                runs[DEFAULT_S].append(
                    Run(
                        DEFAULT_S,
                        session.name,
                        InProcess(backend, stream_length=1000).run(session, seed),
                    )
                )
            if k < args.serve:
                t0 = time.perf_counter()
                serve = Serve(backend, folder)
                runs["LAPRAS (lapras serve)"].append(Run("serve", session.name, serve.run(session)))
                print(f"{session.name}: serve {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            t0 = time.perf_counter()
            runs["Offline MM (whole session known)"].append(
                Run("mm", session.name, mm.run(session, seed))
            )
            print(f"{session.name}: offline MM {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            for name, peer in (("SmartNoise SQL", sn), ("Tumult Analytics", tm)):
                if peer is None:
                    continue
                t0 = time.perf_counter()
                try:
                    outcomes, notes = peer.run(session)
                except Exception as e:  # one system failing never stops the others
                    traceback.print_exc()
                    outcomes, notes = (
                        [Outcome(i, error=f"failed: {e}") for i in range(len(session.steps))],
                        {},
                    )
                runs[name].append(Run(name, session.name, outcomes, notes))
                extra["sessions"].setdefault(session.name, {})[name] = notes
                print(f"{session.name}: {name} {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    finally:
        for w in workers.values():
            w.close()
        backend.stop()
        shutil.rmtree(folder, ignore_errors=True)

    by_name = {s.name: s for s in chosen}
    results: dict[str, list[Scored]] = {}
    for name, rs in runs.items():
        results[name] = [
            sc for r in rs for sc in score(r, by_name[r.session], truth, backend.schema)
        ]
    seconds = time.perf_counter() - t_start
    report = render(chosen, results, dp, extra, seconds, args, scale)
    print(report)
    dump(OUT, results, extra)
    print(f"per statement: {OUT.relative_to(ROOT)}; {seconds:.0f} s", file=sys.stderr)
    if args.write_docs:
        write_docs(report)
    return 0


def render(
    chosen: Sequence[Session],
    results: Mapping[str, list[Scored]],
    dp: Mapping[str, str],
    extra: Mapping[str, Any],
    seconds: float,
    args: argparse.Namespace,
    scale: float,
) -> str:
    n = sum(len(s.steps) for s in chosen)
    sessions_text = "\n".join(
        f"- `{s.name}` ({len(s.steps)} statements, {len({st.sql for st in s.steps})} distinct; "
        f"{', '.join(f'{t} {c}' for t, c in stream_lengths(s).items())}): {s.who}"
        for s in chosen
    )
    t_sys = systems_table(results, dp)
    t_kind = breakdown_table(results, lambda s: s.step.kind, KINDS, "kind of statement")
    t_session = breakdown_table(results, lambda s: s.session, [s.name for s in chosen], "session")
    t_table = breakdown_table(results, lambda s: s.step.table, TABLES, "table")
    t_common, n_common = common_table(results)
    t_counts = count_table(results)
    adult_n = sum(1 for s in results.get("LAPRAS (in process)", []) if s.step.table == "adult")
    other_within = sum(
        s.within for s in results.get("LAPRAS (in process)", []) if s.step.table != "adult"
    )
    notes = product_notes(results.get("LAPRAS (in process)", []))
    diag = diagnosis(results, notes)
    peers_within = [
        summary(results[p])["within"]
        for p in ("Tumult Analytics", "SmartNoise SQL")
        if p in results
    ]
    mine = (
        summary(results["LAPRAS (in process)"])["within"] if "LAPRAS (in process)" in results else 0
    )
    best = max(peers_within) if peers_within else 0
    ratio = f"{mine / best:.2f}x" if best else "–"
    accounting = accounting_text(extra)
    cmd = "python -m bench.accuracy sessions" + (" --quick" if args.quick else "")
    return f"""### Sessions at equal total budget (issue 39)

Command: `{cmd} --write-docs` ({seconds:.0f} s; `bench/accuracy/sessions.py`, per statement
in `bench/out/accuracy_sessions.json`; seed {args.seed}, scale {scale:g}).

{n} statements in {len(chosen)} sessions (`sql_fixtures/sessions`, built from the corpus of
`sql_fixtures/corpus` and scripts of an analyst's exploration: overview counts, drill-downs by
group, filters narrowing, dashboards loaded and reloaded with filters clicked, questions
re-asked verbatim and near-repeats with a changed constant, tool SQL of Metabase, Superset,
Tableau, Looker, Power BI, Grafana, ibis, pandas):

{sessions_text}

Every system gets (epsilon, delta) = (1, 1e-6) **per table for the whole session** and answers
the statements in order; see the module docstring of `bench/accuracy/sessions.py` for each
system's settings. In short: the product in its default configuration (default mode,
matrix-heavy split, Steady pacing, GDP filter, reuse of stored releases, no predicted set) with
S = the session's number of statements over the table; Tumult Analytics with zCDP (rho by the
Canonne-Kamath-Steinke conversion, the tightest of the standard ones) split evenly over the
statements it accepts (translated mechanically from the SQL by `bench/accuracy/tumult_sql.py`);
SmartNoise SQL on the same SQL text, each mechanism at the largest epsilon_0 whose composition
over the table's mechanisms stays within budget; the offline Matrix Mechanism knowing every statement of
the session that is linear queries over one marginal, one release at the whole budget. The
check-ins are user-level for every system: at most 50 check-ins of each user counted (the
declaration's bound; the product bounds each user's rows over the whole table, the peers after
the statement's filter), while the exact answer is PostgreSQL's over all 157,251 rows.

What the peers' budgets came to, per session and table:

{accounting}

**Within tolerance**: a count or a sum within 10% or 150 of the exact answer, any other aggregate
(averages, ratios, percentiles, MIN/MAX, COUNT(DISTINCT), standard deviations, window functions
of counts) within 10%; a statement is within tolerance when it is answered and every cell of the
exact answer is (rows matched by their group keys; a group missing fails; a group the exact
answer does not have must have counts within 150 of 0). `bench/accuracy/judge.py` states the
rule and the domain check (a count below 0, an average, percentile, MIN or MAX outside the
column's declared range, a sum of a non-negative column below 0, a COUNT(DISTINCT) above the
number of declared values).

{t_sys}

**The product has {mine} statements within tolerance, the best peer {best}: {ratio}** (target:
at least 2x). Were every one of its {adult_n} statements over Adult within tolerance (and its
check-ins as they are), it would have {adult_n + other_within}: {_ratio(adult_n + other_within, best)} the best peer.

Counts, by table (cells of COUNT or SUM(1); on the check-ins, cells whose exact count is at
least 1,000):

{t_counts}

Within tolerance by kind of statement (a repeat is an exact re-ask; dashboards' reloads are
repeats too):

{t_kind}

By session:

{t_session}

By table:

{t_table}

On the {n_common} statements every system above answered:

{t_common}

Where the product's statements miss (in process, all sessions):

{diag}

<!-- reading:sessions -->
(Reading of this run: to be written by hand; kept by `--write-docs`.)
<!-- /reading -->
"""


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}x" if b else "–"


def accounting_text(extra: Mapping[str, Any]) -> str:
    """Per session: SmartNoise's epsilon per mechanism and Tumult's rho per statement."""
    lines = []
    for name, notes in extra["sessions"].items():
        parts = []
        sn = notes.get("SmartNoise SQL") or {}
        for table, (eps0, _, how) in sorted((sn.get("per_mechanism") or {}).items()):
            k = sn["mechanisms"][table]
            parts.append(
                f"SmartNoise {table}: epsilon_0 = {eps0:.3g} for each of {k} mechanisms "
                f"({how} composition; epsilon/K = {EPSILON / k:.3g})"
            )
        tm = notes.get("Tumult Analytics") or {}
        for table, n in sorted((tm.get("statements") or {}).items()):
            parts.append(f"Tumult {table}: rho {tm['rho']:.4g} / {n} statements")
        if parts:
            lines.append(f"- `{name}`: " + "; ".join(parts))
    return "\n".join(lines) or "(peers not run)"


READING = re.compile(r"<!-- reading:(\w+) -->.*?<!-- /reading -->", re.DOTALL)


def write_docs(section: str) -> None:
    """Replace this benchmark's block of the Accuracy section of docs/benchmarks.md (or add it
    at the end of that section); hand-written readings are kept."""
    from bench.accuracy.statements import wrap

    text = DOCS.read_text()
    block = f"{BEGIN}\n{wrap(section.strip())}\n{END}"
    i, j = text.find(BEGIN), text.find(END)
    if i >= 0 and j >= 0:
        old = text[i : j + len(END)]
        kept = {m.group(1): m.group(0) for m in READING.finditer(old)}
        block = READING.sub(lambda m: kept.get(m.group(1), m.group(0)), block)
        text = text.replace(old, block)
    else:
        head = "## Accuracy (`bench/accuracy`)"
        start_i = text.index(head) + len(head)
        nxt = text.find("\n## ", start_i)
        end_i = len(text) if nxt < 0 else nxt + 1
        text = text[:end_i].rstrip() + "\n\n" + block + "\n\n" + text[end_i:]
    DOCS.write_text(text)


if __name__ == "__main__":
    raise SystemExit(main())
