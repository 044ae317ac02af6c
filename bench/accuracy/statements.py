"""Statement-level accuracy (issue 14): one aggregate per statement or several, LAPRAS beside
SmartNoise SQL and Tumult Analytics.

    python -m bench.accuracy statements                 # the full run (about 4 minutes)
    python -m bench.accuracy statements --quick         # fewer rounds (about 1.5 minutes)
    python -m bench.accuracy statements --write-docs    # also replace its part of docs/benchmarks.md
    python -m bench.accuracy statements --no-peers      # LAPRAS only

The statement set is ``bench/accuracy/statements.toml``: COUNT, SUM and AVG over UCI Adult
as psql, Superset, Metabase and Tableau send them, some with one aggregate, some with several
("count and average" charts). Data: ``sql_fixtures/adult``, loaded into the embedded PostgreSQL
(a temporary folder); the exact answers are PostgreSQL's own for the same SQL.

One round = the whole statement set in a seeded random order, under one budget
(epsilon, delta) = (1, 1e-6) per round, for every system:

- **LAPRAS, in process**: exactly the proxy's mechanism without the wire: ``rewriter.classify``,
  the plan's batch over the marginal of its columns, in an epoch restricted to the view
  ``demographics`` (the setting of the earlier runs), then
  ``dp.engine`` (``start`` with no predicted set, so every statement is an online release
  paced by LAPRAS, then ``decide``/``apply``/``release``/``apply``) and
  ``rewriter.postprocess``. The product's default configuration (default mode, matrix-heavy,
  static pacing), S = the number of statements in the stream, seeded noise. Two arms in every
  round, at the same budget: *one statement* (the set as written) and *one aggregate at a time*
  (every statement with k >= 2 aggregates replaced, in place, by its k one-aggregate
  statements; the epoch's S is that stream's length, so the pacing gives each statement its
  share of the same epoch).
- **LAPRAS through the proxy**: ``lapras serve`` as its own process in front of the embedded
  PostgreSQL, a new epoch per round (``lapras epoch start``, same configuration), the
  statements sent by psycopg; latency end to end, and the errors as a check of the in-process
  numbers (its noise is not seeded).
- **SmartNoise SQL** (``peer_smartnoise.py``): the same SQL text on the same PostgreSQL,
  row-level privacy, the public bounds of ``lapras.toml``, ``censor_dims = False`` (the keys
  are public, as in LAPRAS); the round's epsilon and delta split evenly over the mechanisms of
  the statements it accepts (basic composition).
- **Tumult Analytics** (``peer_tumult.py``): no SQL interface, so each statement is translated
  by this benchmark (WHERE to a Spark SQL filter, GROUP BY to a KeySet of the public values,
  one query per aggregate); the round's budget split evenly over the aggregates, as rho-zCDP
  (discrete Gaussian; rho from (epsilon, delta) by Bun & Steinke 2016, Prop. 1.3) or as
  (epsilon, delta) with geometric noise, whichever gives a count the smaller standard error
  at that number of queries.

Reported: per system, the share of statements answered, the MAE of count, sum and avg (per
output cell, over rounds), the relative error, the latency per statement; for LAPRAS, per
statement with several aggregates, the MAE and the reported standard error of each kind in
both arms.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import sqlglot
from sqlglot import exp

import rewriter
from bench.accuracy import peers
from dp import engine
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler

ROOT = Path(__file__).resolve().parents[2]
STATEMENTS = Path(__file__).with_name("statements.toml")
DECLARATION = ROOT / "sql_fixtures" / "adult" / "lapras.toml"
DATA = ROOT / "sql_fixtures" / "adult" / "adult.data.gz"
DOCS = ROOT / "docs" / "benchmarks.md"
OUT = ROOT / "bench" / "out" / "accuracy_statements.json"
TABLE, VIEW = "adult", "demographics"
EPSILON, DELTA = 1.0, 1e-6
SEED = 20261201
BEGIN, END = "<!-- statements:begin -->", "<!-- statements:end -->"

# ------------------------------------------------------------------------------------------
# the statement set


@dataclass(frozen=True, slots=True)
class Agg:
    func: str  # count, sum, avg, count_distinct
    column: str | None
    position: int  # its output column


@dataclass(frozen=True, slots=True)
class Spec:
    """What a statement asks, independent of its spelling (for matching rows and for Tumult)."""

    group_by: tuple[str, ...]
    key_positions: tuple[int, ...]
    aggs: tuple[Agg, ...]
    where: str | None  # Spark SQL, columns unqualified


@dataclass(frozen=True, slots=True)
class Stmt:
    id: str
    source: str
    what: str
    sql: str
    spec: Spec
    parent: str | None = None  # the statement it was split from
    parts: tuple[Stmt, ...] = ()  # its one-aggregate statements (k >= 2)

    @property
    def k(self) -> int:
        return len(self.spec.aggs)


def _agg_of(node: exp.Expression) -> tuple[str, str | None] | None:
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Distinct):
            return "count_distinct", arg.expressions[0].name
        if arg is None or isinstance(arg, exp.Star):
            return "count", None
        if isinstance(arg, exp.Column):  # the table has no NULLs: COUNT(col) = COUNT(*)
            return "count", None
    if isinstance(node, exp.Sum):
        arg = node.this
        if isinstance(arg, exp.Literal) and not arg.is_string and arg.this == "1":
            return "count", None  # Tableau's number of records
        if isinstance(arg, exp.Column):
            return "sum", arg.name
    if isinstance(node, exp.Avg) and isinstance(node.this, exp.Column):
        return "avg", node.this.name
    return None


def _inner(p: exp.Expression) -> exp.Expression:
    return p.this if isinstance(p, exp.Alias) else p


def spec_of(sql: str) -> Spec:
    """The group keys, aggregates and filter of ``sql`` (ValueError if it is none of these)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Select):
        raise ValueError("not a SELECT")
    aggs: list[Agg] = []
    names: dict[int, str] = {}
    for i, p in enumerate(tree.expressions):
        node = _inner(p)
        agg = _agg_of(node)
        if agg is not None:
            aggs.append(Agg(agg[0], agg[1], i))
        elif isinstance(node, exp.Column):
            names[i] = node.name
        else:
            raise ValueError(f"output {i + 1} is neither a column nor COUNT/SUM/AVG")
    group = tree.args.get("group")
    group_by: list[str] = []
    positions: list[int] = []
    for g in group.expressions if group else []:
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.this) - 1
        else:
            pos = next(i for i, n in names.items() if n == g.name)
        group_by.append(names[pos])
        positions.append(pos)
    where = tree.args.get("where")
    cond = None
    if where is not None:
        c = where.this.copy()
        for col in list(c.find_all(exp.Column)):
            col.replace(exp.column(col.name))
        cond = c.sql(dialect="spark")
    return Spec(tuple(group_by), tuple(positions), tuple(aggs), cond)


def split(sql: str, spec: Spec) -> list[str]:
    """One statement per aggregate of ``sql``: its group keys and that aggregate, in the
    original order; ordinals of GROUP BY renumbered; ORDER BY items kept only when they name
    what is left (a key, or the kept aggregate or its alias)."""
    tree = sqlglot.parse_one(sql, read="postgres")
    out = []
    for agg in spec.aggs:
        t = tree.copy()
        keep = sorted([*spec.key_positions, agg.position])
        old = t.expressions
        dropped = {old[i].alias for i in range(len(old)) if i not in keep and old[i].alias}
        kept_agg = _inner(old[agg.position])
        t.set("expressions", [old[i].copy() for i in keep])
        group = t.args.get("group")
        if group is not None:
            for g in group.expressions:
                if isinstance(g, exp.Literal) and not g.is_string:
                    g.replace(exp.Literal.number(keep.index(int(g.this) - 1) + 1))
        order = t.args.get("order")
        if order is not None:
            items = []
            for o in order.expressions:
                node = o.this
                names = {c.name for c in node.find_all(exp.Column)}
                refers_dropped = bool(names & dropped) and not names & set(spec.group_by)
                other_agg = node.find(exp.AggFunc) is not None and node != kept_agg
                if not (refers_dropped or other_agg):
                    items.append(o)
            if items:
                order.set("expressions", items)
            else:
                t.set("order", None)
        out.append(t.sql(dialect="postgres"))
    return out


def load_statements(path: Path = STATEMENTS) -> list[Stmt]:
    raw = tomllib.loads(path.read_text())["statement"]
    out = []
    for s in raw:
        sql = s["sql"].strip()
        spec = spec_of(sql)
        parts: tuple[Stmt, ...] = ()
        if len(spec.aggs) >= 2:
            parts = tuple(
                Stmt(f"{s['id']}.{j + 1}", s["source"], s["what"], q, spec_of(q), s["id"])
                for j, q in enumerate(split(sql, spec))
            )
        out.append(Stmt(s["id"], s["source"], s["what"], sql, spec, None, parts))
    return out


def expand(stream: Sequence[Stmt]) -> list[Stmt]:
    """The one-aggregate-at-a-time stream: each k >= 2 statement replaced by its parts."""
    return [p for st in stream for p in (st.parts or (st,))]


# ------------------------------------------------------------------------------------------
# answers, exact values and errors

Key = tuple[str, ...]
Table = dict[Key, tuple[float | None, ...]]


def _num(v: object) -> float | None:
    if v is None:
        return None
    if isinstance(v, Decimal | int | float):
        f = float(v)
        return None if math.isnan(f) else f
    return float(str(v))


def canon(spec: Spec, rows: Iterable[Sequence[Any]], *, keys_first: bool = False) -> Table:
    """Rows as {group key: aggregate values}; ``keys_first``: rows are keys then aggregates
    (Tumult's worker), otherwise in the statement's output order."""
    out: Table = {}
    nk = len(spec.group_by)
    for row in rows:
        if keys_first:
            key = tuple(str(v) for v in row[:nk])
            vals = tuple(_num(v) for v in row[nk:])
        else:
            key = tuple(str(row[i]) for i in spec.key_positions)
            vals = tuple(_num(row[a.position]) for a in spec.aggs)
        out[key] = vals
    return out


@dataclass(frozen=True, slots=True)
class Cell:
    func: str
    noisy: float | None  # None: NULL, or the group was not returned
    true: float


def cells(spec: Spec, answer: Table, truth: Table) -> list[Cell]:
    """One cell per (group, aggregate) of the truth or of the answer. A group PostgreSQL does not
    return has count 0 and sum 0 (its avg is undefined, and left out)."""
    out = []
    for key in sorted(set(truth) | set(answer)):
        t, a = truth.get(key), answer.get(key)
        for j, agg in enumerate(spec.aggs):
            tv = t[j] if t is not None else (None if agg.func == "avg" else 0.0)
            if tv is None:
                continue
            out.append(Cell(agg.func, a[j] if a is not None else None, tv))
    return out


@dataclass(slots=True)
class Outcome:
    """One statement in one round of one system."""

    id: str
    error: str | None = None
    seconds: float = 0.0
    cells: list[Cell] = field(default_factory=list)
    charge: float = 0.0  # LAPRAS: the accountant's amount (mu^2) charged
    std_errors: dict[str, list[float]] = field(default_factory=dict)  # LAPRAS: per kind

    @property
    def answered(self) -> bool:
        return self.error is None


# ------------------------------------------------------------------------------------------
# LAPRAS in process


class InProcess:
    """The proxy's mechanism for one epoch over ``VIEW``, without the wire or the ledger."""

    def __init__(self, schema: rewriter.Schema, pin: Any) -> None:
        self.schema = schema
        self.domain = pin.domain
        self.x = pin

    def stream(self, stream: Sequence[Stmt], truth: dict[str, Table], seed: int) -> list[Outcome]:
        cfg = engine.EngineConfig(epsilon=EPSILON, delta=DELTA, stream_length=len(stream))
        state, _ = engine.start(cfg, self.domain, None, self.x, SeededSampler(seed))
        sampler = SeededSampler(seed + 1)
        out = []
        for st in stream:
            t0 = time.perf_counter()
            [c] = rewriter.classify(st.sql, self.schema)
            if not isinstance(c, rewriter.DPStatement) or c.plan is None:
                msg = c.error.message if isinstance(c, rewriter.Refused) else type(c).__name__
                out.append(Outcome(st.id, error=msg))
                continue
            plan = c.plan
            try:
                state, decision, result = engine.answer(state, plan.batch, self.x, sampler)
            except (BudgetExhaustedError, ValueError) as e:
                out.append(Outcome(st.id, error=str(e)))
                continue
            rows = rewriter.postprocess(plan, np.asarray(result.answers))
            seconds = time.perf_counter() - t0
            # the standard errors of the rows of a count the statement outputs (COUNT, or
            # Tableau's SUM(1)); an avg's or a sum's own count is left out, and so are sums
            # (their rows may be scaled)
            m = len(plan.measures)
            counted = {
                o.value
                for o in plan.post.outputs
                if getattr(o, "func", "") in ("count", "sum")
                and plan.measures[o.value].kind.value.startswith("count")
            }
            std = {"count": [se for i, se in enumerate(result.std_errors) if i % m in counted]}
            charge = decision.charge.amount if decision.charge is not None else 0.0
            out.append(
                Outcome(
                    st.id,
                    seconds=seconds,
                    cells=cells(st.spec, canon(st.spec, rows), truth[st.sql]),
                    charge=charge,
                    std_errors=std,
                )
            )
        return out

    def total_budget(self, n: int) -> float:
        cfg = engine.EngineConfig(epsilon=EPSILON, delta=DELTA, stream_length=n)
        state, _ = engine.start(cfg, self.domain, None, self.x, SeededSampler(0))
        return float(engine.status(state).total)

    def batch_key(self, sql: str) -> str | None:
        [c] = rewriter.classify(sql, self.schema)
        if not isinstance(c, rewriter.DPStatement) or c.plan is None:
            return None
        return c.plan.batch.key if self.domain.covers(c.plan.batch.domain) else None


# ------------------------------------------------------------------------------------------
# PostgreSQL (exact) and the proxy


def exact(dsn: str, statements: Sequence[Stmt]) -> tuple[dict[str, Table], dict[str, float]]:
    """PostgreSQL's own answers (the truth) and its latency per statement (median of 5)."""
    import psycopg

    truth: dict[str, Table] = {}
    latency: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for st in statements:
            times = []
            rows: list[Any] = []
            for _ in range(5):
                t0 = time.perf_counter()
                rows = conn.execute(st.sql).fetchall()  # type: ignore[arg-type]
                times.append(time.perf_counter() - t0)
            truth[st.sql] = canon(st.spec, rows)
            latency[st.id] = statistics.median(times)
    return truth, latency


class Proxy:
    """``lapras serve`` in front of the embedded PostgreSQL; one epoch per round."""

    def __init__(self, pg: Any, folder: Path, n: int) -> None:
        from bench.serving import wait_until_serving, write_config
        from proxy.embedded import _free_port

        self.port = _free_port()
        self.config = write_config(pg, folder, self.port, stream_length=n)
        self.n = n
        self.log = (folder / "serve.log").open("w")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "serve", "--config", str(self.config)],
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.dsn = f"postgresql://bench:bench@127.0.0.1:{self.port}/bench"
        wait_until_serving(self.dsn)

    def _cli(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "-m", "proxy.cli", *args, "--config", str(self.config)],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )

    def round(self, stream: Sequence[Stmt], truth: dict[str, Table]) -> list[Outcome]:
        import psycopg

        self._cli(
            "epoch", "start", "--table", TABLE, "--view", VIEW,
            "--epsilon", str(EPSILON), "--delta", str(DELTA), "--stream-length", str(self.n),
        )  # fmt: skip
        out = []
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute("SELECT 1").fetchall()
                for st in stream:
                    t0 = time.perf_counter()
                    try:
                        rows = conn.execute(st.sql).fetchall()  # type: ignore[arg-type]
                    except psycopg.Error as e:
                        out.append(Outcome(st.id, error=f"{e.sqlstate}: {e}".splitlines()[0]))
                        continue
                    seconds = time.perf_counter() - t0
                    c = cells(st.spec, canon(st.spec, rows), truth[st.sql])
                    out.append(Outcome(st.id, seconds=seconds, cells=c))
        finally:
            self._cli("epoch", "close", "--table", TABLE, "--reason", "bench round done")
        return out

    def stop(self) -> None:
        from bench.serving import stop

        stop(self.server)
        self.log.close()


# ------------------------------------------------------------------------------------------
# the peers


def smartnoise_metadata(schema: rewriter.Schema) -> dict[str, Any]:
    decl = schema.tables[TABLE]
    view = next(v for v in decl.views if v.name == VIEW)
    table: dict[str, Any] = {"row_privacy": True, "censor_dims": False}
    for a in view.attributes:
        if a.kind is rewriter.schema.Kind.INTEGER:
            lo, hi = _bounds(a)
            table[a.name] = {"type": "int", "lower": lo, "upper": hi}
        else:
            table[a.name] = {"type": "string"}
    return {"Database": {"public": {TABLE: table}}}


def _bounds(a: Any) -> tuple[int, int]:
    return int(a.bins[0][0]), int(a.bins[-1][1])


def tumult_hello(schema: rewriter.Schema) -> dict[str, Any]:
    decl = schema.tables[TABLE]
    view = next(v for v in decl.views if v.name == VIEW)
    domains: dict[str, list[Any]] = {}
    for a in view.attributes:
        if a.kind is rewriter.schema.Kind.CATEGORICAL:
            domains[a.name] = list(a.values)
        else:
            lo, hi = _bounds(a)
            domains[a.name] = list(range(lo, hi + 1))
    integers = [c for c, t in decl.columns if t in ("integer", "int4", "int8", "bigint")]
    return {
        "csv": str(DATA),
        "columns": [c for c, _ in decl.columns],
        "integers": integers,
        "keep": [a.name for a in view.attributes],
        "domains": domains,
    }


def tumult_spec(schema: rewriter.Schema, spec: Spec) -> dict[str, Any]:
    attrs = schema.tables[TABLE].attributes
    aggs = []
    for a in spec.aggs:
        d: dict[str, Any] = {"func": a.func, "column": a.column}
        if a.func in ("sum", "avg"):
            d["bounds"] = list(_bounds(attrs[a.column or ""]))
        aggs.append(d)
    return {"where": spec.where, "group_by": list(spec.group_by), "aggs": aggs}


def tumult_budget(m: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The round's budget and the per-query budget for ``m`` aggregate queries: zCDP or
    (epsilon, delta), whichever gives a count the smaller standard error."""
    big_l = math.log(1 / DELTA)
    rho = (math.sqrt(EPSILON + big_l) - math.sqrt(big_l)) ** 2  # rho-zCDP => (eps, delta)
    sd_gauss = math.sqrt(m / (2 * rho))
    sd_laplace = math.sqrt(2) * m / EPSILON
    shrink = 1 - 1e-9  # the per-query budgets must add up to no more than the total
    if sd_gauss <= sd_laplace:
        return (
            {"kind": "rho", "rho": rho},
            {"kind": "rho", "rho": rho / m * shrink},
            f"rho-zCDP, rho = {rho:.4g} (discrete Gaussian)",
        )
    return (
        {"kind": "approx", "epsilon": EPSILON, "delta": DELTA},
        {"kind": "approx", "epsilon": EPSILON / m * shrink, "delta": DELTA / m * shrink},
        "(epsilon, delta), geometric noise",
    )


def peer_outcomes(
    answer: dict[str, Any], by_id: dict[str, Stmt], truth: dict[str, Table], *, keys_first: bool
) -> list[Outcome]:
    out = []
    for r in answer["results"]:
        st = by_id[r["id"]]
        if "error" in r:
            out.append(Outcome(st.id, error=r["error"]))
            continue
        table = canon(st.spec, r["rows"], keys_first=keys_first)
        out.append(Outcome(st.id, seconds=r["seconds"], cells=cells(st.spec, table, truth[st.sql])))
    return out


# ------------------------------------------------------------------------------------------
# the report


def _mae(cs: list[Cell]) -> float | None:
    errs = [abs(c.noisy - c.true) for c in cs if c.noisy is not None]
    return float(np.mean(errs)) if errs else None


def _rel(cs: list[Cell]) -> list[float]:
    return [abs(c.noisy - c.true) / abs(c.true) for c in cs if c.noisy is not None and c.true]


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def _pct(v: float) -> str:
    return f"{100 * v:.2g}%" if v < 0.1 else f"{100 * v:.0f}%"


def _ms(s: float) -> str:
    return f"{s * 1000:.2g} ms" if s < 0.01 else (f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s")


@dataclass(slots=True)
class System:
    name: str
    dp: str
    note: str = ""
    rounds: list[list[Outcome]] = field(default_factory=list)
    unavailable: str | None = None
    spent: list[str] = field(default_factory=list)  # a peer's own account of each round

    def by_id(self) -> dict[str, list[Outcome]]:
        d: dict[str, list[Outcome]] = {}
        for rnd in self.rounds:
            for o in rnd:
                d.setdefault(o.id, []).append(o)
        return d

    def answered_ids(self) -> set[str]:
        return {i for i, os_ in self.by_id().items() if os_ and all(o.answered for o in os_)}

    def cells(self, ids: set[str] | None = None, func: str | None = None) -> list[Cell]:
        return [
            c
            for rnd in self.rounds
            for o in rnd
            if o.answered and (ids is None or o.id in ids)
            for c in o.cells
            if func is None or c.func == func
        ]


FUNCS = ("count", "sum", "avg", "count_distinct")


def systems_table(systems: list[System], statements: list[Stmt], pg_latency: float) -> str:
    head = (
        "| system | DP | rounds | statements answered | count MAE | sum MAE | avg MAE "
        "| count distinct MAE | relative error, median (p90) | NULL or missing cells "
        "| latency per statement, p50 (p90) |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|"]
    n = len(statements)
    lines.append(
        f"| PostgreSQL, exact (no privacy) | – | 5 | {n} of {n} | 0 | 0 | 0 | 0 | 0 | 0 "
        f"| {_ms(pg_latency)} |"
    )
    for s in systems:
        if s.unavailable is not None:
            lines.append(f"| {s.name} | {s.dp} | – | not run: {s.unavailable} |" + " |" * 7)
            continue
        ids = s.answered_ids()
        cs = s.cells(ids)
        rel = _rel(cs)
        maes = [_fmt(_mae([c for c in cs if c.func == f])) for f in FUNCS]
        missing = sum(1 for c in cs if c.noisy is None)
        lat = [o.seconds for rnd in s.rounds for o in rnd if o.answered]
        rel_txt = f"{_pct(float(np.median(rel)))} ({_pct(float(np.quantile(rel, 0.9)))})"
        lat_txt = f"{_ms(float(np.median(lat)))} ({_ms(float(np.quantile(lat, 0.9)))})"
        lines.append(
            f"| {s.name} | {s.dp} | {len(s.rounds)} | {len(ids)} of {n} ({len(ids) / n:.0%}) | "
            + " | ".join(maes)
            + f" | {rel_txt} | {missing:,} of {len(cs):,} | {lat_txt} |"
        )
    return "\n".join(lines)


def common_table(systems: list[System]) -> tuple[str, list[str]]:
    ran = [s for s in systems if s.unavailable is None and s.rounds]
    common = set.intersection(*(s.answered_ids() for s in ran)) if ran else set()
    lines = [
        "| system | count MAE | sum MAE | avg MAE | relative error, median (p90) |",
        "|---|---|---|---|---|",
    ]
    for s in ran:
        cs = s.cells(common)
        rel = _rel(cs)
        maes = [_fmt(_mae([c for c in cs if c.func == f])) for f in ("count", "sum", "avg")]
        rel_txt = (
            f"{_pct(float(np.median(rel)))} ({_pct(float(np.quantile(rel, 0.9)))})" if rel else "–"
        )
        lines.append(f"| {s.name} | " + " | ".join(maes) + f" | {rel_txt} |")
    return "\n".join(lines), sorted(common)


def _short(text: str, n: int = 70) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 1] + "…"


def acceptance_table(statements: list[Stmt], systems: list[System]) -> str:
    ran = [s for s in systems if s.unavailable is None and s.rounds]
    head = "| statement | source | what | k | " + " | ".join(s.name for s in ran) + " |"
    lines = [head, "|---|---|---|---|" + "---|" * len(ran)]
    for st in statements:
        marks = []
        for s in ran:
            os_ = s.by_id().get(st.id, [])
            bad = next((o for o in os_ if not o.answered), None)
            marks.append(
                "yes" if os_ and bad is None else f"no: {_short(bad.error or '')}" if bad else "–"
            )
        lines.append(f"| {st.id} | {st.source} | {st.what} | {st.k} | " + " | ".join(marks) + " |")
    return "\n".join(lines)


def arms_table(statements: list[Stmt], one: System, split_: System) -> str:
    """Per statement with k >= 2: MAE and reported standard error per kind, both arms."""
    lines = [
        "| statement | aggregates | count MAE: one statement / one at a time | sum MAE | avg MAE "
        "| count std. error reported |",
        "|---|---|---|---|---|---|",
    ]
    one_by, split_by = one.by_id(), split_.by_id()

    def group(rows: dict[str, list[Outcome]], ids: list[str]) -> list[Outcome]:
        return [o for i in ids for o in rows.get(i, []) if o.answered]

    def mae(os_: list[Outcome], func: str) -> float | None:
        return _mae([c for o in os_ for c in o.cells if c.func == func])

    def se(os_: list[Outcome], kind: str) -> float | None:
        vals = [v for o in os_ for v in o.std_errors.get(kind, [])]
        return float(np.median(vals)) if vals else None

    def pair(a: float | None, b: float | None) -> str:
        return f"{_fmt(a)} / {_fmt(b)}"

    for st in statements:
        if st.k < 2:
            continue
        a = group(one_by, [st.id])
        b = group(split_by, [p.id for p in st.parts])
        funcs = ", ".join(x.func for x in st.spec.aggs)
        lines.append(
            f"| {st.id} ({st.source}) | {funcs} | {pair(mae(a, 'count'), mae(b, 'count'))} "
            f"| {pair(mae(a, 'sum'), mae(b, 'sum'))} | {pair(mae(a, 'avg'), mae(b, 'avg'))} "
            f"| {pair(se(a, 'count'), se(b, 'count'))} |"
        )
    singles = [st.id for st in statements if st.k == 1]
    a, b = group(one_by, singles), group(split_by, singles)
    lines.append(
        f"| the {len(singles)} statements with k = 1 (the same in both arms) | – "
        f"| {pair(mae(a, 'count'), mae(b, 'count'))} | {pair(mae(a, 'sum'), mae(b, 'sum'))} "
        f"| {pair(mae(a, 'avg'), mae(b, 'avg'))} | {pair(se(a, 'count'), se(b, 'count'))} |"
    )
    return "\n".join(lines)


def charges_text(one: System, split_: System, total_one: float, total_split: float) -> str:
    def mean_share(s: System, total: float) -> tuple[float, float, int]:
        per_round = [[o.charge for o in rnd if o.charge > 0] for rnd in s.rounds]
        charged = [c for r in per_round for c in r]
        spent = float(np.mean([sum(r) for r in per_round])) / total
        return float(np.mean(charged)) / total, spent, len(per_round[0]) if per_round else 0

    a, b = mean_share(one, total_one), mean_share(split_, total_split)
    return (
        f"one statement: {a[2]} fresh releases per round, {_pct(a[0])} of the epoch's budget each "
        f"on average, {_pct(a[1])} of it spent per round; one aggregate at a time: {b[2]} fresh "
        f"releases, {_pct(b[0])} each, {_pct(b[1])} spent"
    )


# ------------------------------------------------------------------------------------------
# the run


def dump(path: Path, systems: list[System]) -> None:
    """Per system and statement: answered or why not, MAE and NULL cells per kind, latency."""
    out: dict[str, Any] = {}
    for s in systems:
        if s.unavailable is not None:
            out[s.name] = {"not run": s.unavailable}
            continue
        rows: dict[str, Any] = {}
        for sid, os_ in s.by_id().items():
            bad = next((o for o in os_ if not o.answered), None)
            if bad is not None:
                rows[sid] = {"refused": bad.error}
                continue
            cs = [c for o in os_ for c in o.cells]
            rows[sid] = {
                "rounds": len(os_),
                "mae": {
                    f: _mae([c for c in cs if c.func == f])
                    for f in FUNCS
                    if any(c.func == f for c in cs)
                },
                "null_cells": sum(1 for c in cs if c.noisy is None),
                "cells": len(cs),
                "seconds_median": float(np.median([o.seconds for o in os_])),
            }
        out[s.name] = rows
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))


def _order(n: int, r: int) -> list[int]:
    return [int(i) for i in np.random.default_rng(SEED + r).permutation(n)]


def check_distinct(inproc: InProcess, statements: list[Stmt]) -> list[str]:
    """Statements of either arm that reduce to the same linear queries as an earlier one (a
    repeat: answered from the stored answer). Warns unless both are parts of one statement."""
    notes = []
    for arm in (statements, expand(statements)):
        seen: dict[str, Stmt] = {}
        for st in arm:
            key = inproc.batch_key(st.sql)
            if key is None:
                continue
            first = seen.get(key)
            if first is not None:
                same = first.parent is not None and first.parent == st.parent
                if not same:
                    print(f"warning: {st.id} repeats {first.id}", file=sys.stderr)
                notes.append(f"{st.id} is the same linear queries as {first.id}")
            seen[key] = st
    return notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.accuracy statements",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    ap.add_argument("--quick", action="store_true", help="fewer rounds (about 1.5 minutes)")
    ap.add_argument("--rounds", type=int, default=None, help="LAPRAS in-process rounds")
    ap.add_argument("--no-peers", action="store_true", help="LAPRAS only")
    ap.add_argument("--no-proxy", action="store_true", help="skip the lapras serve path")
    ap.add_argument("--no-install", action="store_true", help="never install a peer")
    ap.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args(argv)
    quick = args.quick
    r_lapras = args.rounds or (10 if quick else 30)
    r_sn = 4 if quick else 10
    r_tm = 1 if quick else 2
    r_proxy = 1 if quick else 2
    t_start = time.perf_counter()

    from proxy.embedded import EmbeddedPostgres, provision_adult

    statements = load_statements()
    by_id = {st.id: st for st in statements}
    by_id.update({p.id: p for st in statements for p in st.parts})
    schema = rewriter.load_schema(DECLARATION)
    folder = Path(tempfile.mkdtemp(prefix="lapras-bench-statements-"))
    pg = EmbeddedPostgres(folder / "pg").start()
    proxy: Proxy | None = None
    workers: dict[str, peers.Worker] = {}
    one = System("LAPRAS, one statement (in process)", "GDP (1, 1e-6)")
    split_ = System("LAPRAS, one aggregate at a time (in process)", "GDP (1, 1e-6)")
    via_proxy = System("LAPRAS through lapras serve", "GDP (1, 1e-6)")
    sn = System("SmartNoise SQL", "(1, 1e-6), Laplace")
    tm = System("Tumult Analytics", "")
    try:
        provision_adult(pg, "bench", ("bench",))
        dsn = pg.dsn(database="bench")
        truth, pg_lat = exact(dsn, [*statements, *expand(statements)])
        import psycopg

        with psycopg.connect(dsn) as conn:
            names = next(v.names for v in schema.tables[TABLE].views if v.name == VIEW)
            rows = conn.execute(rewriter.pin_sql(schema, TABLE, names)).fetchall()
        pin = rewriter.pin_from_rows(rewriter.pin_domain(schema, TABLE, names), rows)
        inproc = InProcess(schema, pin)
        repeats = check_distinct(inproc, statements)
        if not args.no_proxy:
            proxy = Proxy(pg, folder, len(statements))
        if args.no_peers:
            sn.unavailable = tm.unavailable = "--no-peers"
        else:
            for peer, system, hello in (
                (peers.SMARTNOISE, sn, {"dsn": dsn, "metadata": smartnoise_metadata(schema)}),
                (peers.TUMULT, tm, tumult_hello(schema)),
            ):
                try:
                    workers[peer.name] = w = peers.start(peer, hello, install=not args.no_install)
                    system.name = f"{peer.label} {w.hello['version']}"
                except peers.PeerError as e:
                    system.unavailable = str(e)
                    print(f"{peer.label}: {e}", file=sys.stderr)
        tm_specs = {}
        for st in statements:
            with contextlib.suppress(KeyError, ValueError):  # not expressible: refused
                tm_specs[st.id] = tumult_spec(schema, st.spec)
        m_tm = sum(len(tm_specs[i]["aggs"]) for i in tm_specs)
        tm_budget, tm_query, tm_kind = tumult_budget(m_tm)
        tm.dp = f"(1, 1e-6) as {tm_kind}"

        def sn_round(stream: list[Stmt]) -> list[Outcome]:
            answer = workers["smartnoise"].ask(
                {
                    "statements": [{"id": st.id, "sql": st.sql} for st in stream],
                    "epsilon": EPSILON,
                    "delta": DELTA,
                }
            )
            eps, dlt = answer["spent"]
            sn.spent.append(f"({eps:.3g}, {dlt:.2g})")
            return peer_outcomes(answer, by_id, truth, keys_first=False)

        def tm_round(stream: list[Stmt]) -> list[Outcome]:
            answer = workers["tumult"].ask(
                {
                    "statements": [
                        {"id": st.id, "spec": tm_specs[st.id]} for st in stream if st.id in tm_specs
                    ],
                    "budget": tm_budget,
                    "per_query": tm_query,
                }
            )
            short = re.sub(
                r"\d+\.\d+(e-?\d+)?", lambda m: f"{float(m.group()):.2g}", answer["remaining"]
            )
            tm.spent.append(short)
            refused = [
                Outcome(st.id, error="not expressible as Tumult queries")
                for st in stream
                if st.id not in tm_specs
            ]
            return peer_outcomes(answer, by_id, truth, keys_first=True) + refused

        t_rounds = time.perf_counter()
        for r in range(max(r_lapras, r_sn, r_tm, r_proxy)):
            stream = [statements[i] for i in _order(len(statements), r)]
            jobs: list[tuple[System, Any]] = []
            if r < r_lapras:
                jobs.append((one, lambda s=stream, r=r: inproc.stream(s, truth, 7919 * r + 1)))
                jobs.append(
                    (split_, lambda s=stream, r=r: inproc.stream(expand(s), truth, 7919 * r + 2))
                )
            if r < r_proxy and proxy is not None:
                jobs.append((via_proxy, lambda s=stream, p=proxy: p.round(s, truth)))
            if r < r_sn and "smartnoise" in workers:
                jobs.append((sn, lambda s=stream: sn_round(s)))
            if r < r_tm and "tumult" in workers:
                jobs.append((tm, lambda s=stream: tm_round(s)))
            k = r % len(jobs)
            for system, job in jobs[k:] + jobs[:k]:  # alternate who goes first
                if system.unavailable is not None:
                    continue
                try:
                    system.rounds.append(job())
                except Exception as e:  # one system failing never stops the others
                    why = str(e)
                    if isinstance(e, subprocess.CalledProcessError) and e.stderr:
                        why += ": " + " ".join(e.stderr.decode(errors="replace").split())[-300:]
                    system.unavailable = f"failed in round {r + 1}: {why}"
                    traceback.print_exc()
            print(f"round {r + 1} done ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr)
        rounds_seconds = time.perf_counter() - t_rounds
        total_one = inproc.total_budget(len(statements))
        total_split = inproc.total_budget(len(expand(statements)))
    finally:
        for w in workers.values():
            w.close()
        if proxy is not None:
            proxy.stop()
        pg.stop()
        shutil.rmtree(folder, ignore_errors=True)

    systems = [one, via_proxy, sn, tm]
    if args.no_proxy:
        systems.remove(via_proxy)
    pg_latency = float(np.median([pg_lat[st.id] for st in statements]))
    t_sys = systems_table(systems, statements, pg_latency)
    t_common, common = common_table(systems)
    t_accept = acceptance_table(statements, systems)
    t_arms = arms_table(statements, one, split_)
    charges = charges_text(one, split_, total_one, total_split)
    seconds = time.perf_counter() - t_start
    print(t_arms, charges, t_sys, t_common, f"common statements: {', '.join(common)}", t_accept,
          sep="\n\n")  # fmt: skip
    print(f"total {seconds:.0f} s (rounds {rounds_seconds:.0f} s)", file=sys.stderr)
    dump(OUT, [*systems, split_])
    print(f"per statement: {OUT.relative_to(ROOT)}", file=sys.stderr)
    if args.write_docs:
        cmd = "python -m bench.accuracy statements" + (" --quick" if quick else "")
        write_docs(
            section_text(
                cmd=cmd,
                seconds=seconds,
                statements=statements,
                rounds=(r_lapras, r_proxy, r_sn, r_tm),
                arms=t_arms,
                charges=charges,
                systems=t_sys,
                common=t_common,
                common_ids=common,
                accept=t_accept,
                sn_note=sn.unavailable,
                tm_note=tm.unavailable,
                sn_spent=sn.spent,
                tm_spent=tm.spent,
                tm_kind=tm_kind,
                m_tm=m_tm,
                repeats=repeats,
                revision=revision(),
            )
        )
    return 0


# ------------------------------------------------------------------------------------------
# docs


READING = re.compile(r"<!-- reading:(\w+) -->.*?<!-- /reading -->", re.DOTALL)


def block_of(text: str) -> str:
    """This benchmark's block in ``text`` (markers included), or ''."""
    i = text.find(BEGIN)
    j = text.find(END, i)
    return text[i : j + len(END)] if i >= 0 and j >= 0 else ""


def wrap(text: str, width: int = 100) -> str:
    """Re-wrap the plain paragraphs of ``text`` (not tables, lists, headings or markers)."""
    out = []
    for para in text.split("\n\n"):
        lines = para.splitlines()
        plain = lines and not any(ln.lstrip().startswith(("|", "- ", "<!--", "#")) for ln in lines)
        out.append(textwrap.fill(" ".join(lines), width, break_on_hyphens=False) if plain else para)
    return "\n\n".join(out)


def write_docs(section: str) -> None:
    """Replace this benchmark's block of the Accuracy section of docs/benchmarks.md (or add it
    at the end of that section); hand-written readings are kept, as in ``bench.accuracy.run``."""
    text = DOCS.read_text()
    block = f"{BEGIN}\n{wrap(section.strip())}\n{END}"
    old = block_of(text)
    if old:
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


def section_text(
    *,
    cmd: str,
    seconds: float,
    statements: list[Stmt],
    rounds: tuple[int, int, int, int],
    arms: str,
    charges: str,
    systems: str,
    common: str,
    common_ids: list[str],
    accept: str,
    sn_note: str | None,
    tm_note: str | None,
    sn_spent: list[str],
    tm_spent: list[str],
    tm_kind: str,
    m_tm: int,
    repeats: list[str],
    revision: str,
) -> str:
    r_lapras, r_proxy, r_sn, r_tm = rounds
    n = len(statements)
    n_split = len(expand(statements))
    multi = sum(1 for st in statements if st.k >= 2)
    return f"""### Statements with one aggregate and with several (issue 14)

Command: `{cmd} --write-docs` ({seconds:.0f} s in all, one run; `bench/accuracy/statements.py`;
code at {revision}).

The statement set is `bench/accuracy/statements.toml`: {n} statements over UCI Adult
(`sql_fixtures/adult`, 32,561 rows) as psql, Superset, Metabase and Tableau send them: counts by a
column, filtered counts, sums, averages, and {multi} with several aggregates ("count and average"
charts, the issue's `SELECT sex, count(*), sum(age), avg(age) FROM adult WHERE age < 60 GROUP BY
sex`). The data is loaded into the embedded PostgreSQL; the exact answers are PostgreSQL's own.

A round is the whole set in a seeded random order under one budget (epsilon, delta) = (1, 1e-6)
for every system; rounds alternate between the systems (the first to go rotates). LAPRAS'
error is measured **in process**: `rewriter.classify`, the plan's batch over its marginal in an
epoch restricted to the view `demographics` (as these runs were made before epochs covered
whole tables), `dp.engine` (`start` with no predicted set, so every
statement is a fresh online release paced by LAPRAS; then `decide` / `apply` / `release` /
`apply`) and `rewriter.postprocess`: the proxy's mechanism without the wire and the ledger, with
seeded noise. The configuration is the product default (default mode, matrix-heavy split, static
pacing), S = the stream's length. `LAPRAS through lapras serve` is the real path (its own
process, psycopg, a new epoch per round by `lapras epoch start`, same configuration, unseeded
noise): its latency, and its errors as a check. Rounds: LAPRAS in process {r_lapras}, through
the proxy {r_proxy}, SmartNoise {r_sn}, Tumult {r_tm} (its Spark queries take about a second
each).

**One statement with k aggregates against k statements with one.** In every round LAPRAS also
answers the *one aggregate at a time* stream: each statement with k >= 2 aggregates replaced, in
place, by its k one-aggregate statements (the same SELECT with the group keys and one aggregate),
{n_split} statements in all, in one epoch of the same (epsilon, delta) with S = {n_split}. Both
arms spend the same budget on the same aggregates; the pacing decides each statement's share
({charges}).{_repeats(repeats)} Each cell: one statement / one at a time; MAE over the output cells of all
rounds; the count's standard error is the one LAPRAS reports with the answer (median over the
output counts' rows).

{arms}

<!-- reading:arms -->
(Reading of this run: to be written by hand; kept by `--write-docs`.)
<!-- /reading -->

**Beside SmartNoise SQL and Tumult Analytics**, on the statements each accepts, at the same
budget per round. SmartNoise SQL: the same SQL on the same PostgreSQL (psycopg2), row-level
privacy, the public bounds of `lapras.toml`, `censor_dims = False` (the group keys are public, as
in LAPRAS), the budget split evenly over the mechanisms of the statements it accepts (one per
COUNT or SUM, two per AVG; basic composition, Laplace noise, its default and its best here).
Tumult Analytics has no SQL interface: the benchmark translates each statement (WHERE to a Spark
SQL filter, GROUP BY to a KeySet of the declared values, one query per aggregate, bounds from
`lapras.toml`, `AddOneRow`), {m_tm} queries per round, the budget split evenly over them as
{tm_kind}: of the two budgets Tumult offers for (epsilon, delta), zCDP (rho from (epsilon, delta)
by Bun & Steinke 2016, Prop. 1.3) and (epsilon, delta) with geometric noise, the one whose count
has the smaller standard error at {m_tm} queries. Both
peers split the budget over the statements they accept only, which favours them when they
refuse some. Each runs in a virtual environment of its own under `bench/out/peers/` (made by the
first run: smartnoise-sql pins opendp < 0.15, tmlt.analytics numpy < 2 and pyspark 3.5), as a
worker process.{_peer_notes(sn_note, tm_note, sn_spent, tm_spent)} Errors are per output cell (group x aggregate),
over all rounds; relative error = |noisy - exact| / |exact|; a NULL where PostgreSQL has a value
(an avg whose noisy count is not positive) or a group not returned is counted apart. Latency: the
statement's wall time as its caller sees it (LAPRAS in process: classify, engine,
post-processing; through the proxy: psycopg round trip including the ledger's durable commit;
SmartNoise: `execute`, its rewriting and PostgreSQL; Tumult: every query of the statement,
`evaluate` and `toPandas`), on the loaded 2-core machine.

{systems}

On the statements every system answered ({", ".join(common_ids) or "none"}):

{common}

Which statements each system answered (a refusal's message, shortened):

{accept}

<!-- reading:peers -->
(Reading of this run: to be written by hand; kept by `--write-docs`.)
<!-- /reading -->
"""


def _repeats(repeats: list[str]) -> str:
    if not repeats:
        return ""
    return (
        " Answered from a stored answer, without noise or charge: "
        + "; ".join(repeats)
        + " (a SUM carries its count, to answer NULL over no row, so it and an AVG of the same"
        " column and groups are the same linear queries)."
    )


def revision() -> str:
    """The code measured: ``git describe --always --dirty``, or $LAPRAS_REVISION, or unknown."""
    if (ROOT / ".git").exists():
        r = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode == 0 and r.stdout.strip():
            return f"`{r.stdout.strip()}`"
    return f"`{os.environ.get('LAPRAS_REVISION', 'unknown')}`"


def _peer_notes(
    sn_note: str | None, tm_note: str | None, sn_spent: list[str], tm_spent: list[str]
) -> str:
    notes = []
    if sn_spent:
        notes.append(
            " SmartNoise's own odometer (optimal composition) counted "
            + ", ".join(sorted(set(sn_spent)))
            + " spent per round."
        )
    if tm_spent:
        notes.append(
            f" Tumult's session had {', '.join(sorted(set(tm_spent)))} left after each round."
        )
    if sn_note:
        notes.append(f" SmartNoise SQL was not run: {sn_note}.")
    if tm_note:
        notes.append(f" Tumult Analytics was not run: {tm_note}.")
    return "".join(notes)


if __name__ == "__main__":
    raise SystemExit(main())
