"""Template prediction on real dashboard traces: overlap, false positives, and the MAE it buys.

Workload: the Crossfilter Benchmark's flights user traces (55 sessions, 11 users, tasks 0-4;
../shared/data/workloads/crossfilter). The crossfilter UI has 6 linked COUNT histograms over the
attributes of the crossfilter flights table; the vega flights data we ship
(sql_fixtures/flights) has three of them:

    DISTANCE  -> distance (miles)          DEP_DELAY -> delay (minutes)      DEP_TIME -> hour
    ARR_TIME, ARR_DELAY, AIR_TIME: no counterpart -> their brushes are dropped

Replay as SQL (what the dashboard sends). The state is one brush per view; every interaction
sets the brush of its view (a zero-width brush clears it), rounded *outwards* to the declared
bins (``rewriter.predict.round_binding``). After each interaction every *other* view is
refreshed: its histogram filtered by the brushes of all views but itself:

* hour (unit bins):  ``SELECT hour, count(*) FROM flights WHERE <brushes> GROUP BY hour``
* delay / distance (declared in bins wider than one value, which the rewriter cannot GROUP BY):
  one ``SELECT count(*) FROM flights WHERE <bin range> AND <brushes>`` per bin of the view's
  axis (delay: the 11 bins of -20..60 minutes the UI shows; distance: all 15 bins), as one
  multi-statement Query string. Each SQL statement goes through the rewriter and is one
  statement for the engine (one online release when unpredicted), as the proxy would do.

Every statement is planned by the rewriter on a schema restricted to the ``crossfilter`` view
(delay x distance x hour, 6,120 cells) so that one epoch covers the stream. Exact repeats
(the same rounded brushes) are answered from stored answers at no cost, as by the engine.
Rounding the brushes makes the streams much more repetitive than the raw mouse events.

Learning (two scenarios):

* ``other users``: for each session (user u, task k), the predictor learns from the sessions of
  task k by the other users (each at its own day, each statement counted once per session, so
  ``probability`` = the fraction of past sessions that asked it) and predicts u's session;
* ``first half``: it learns from the first half (by time) of the session itself and predicts
  the second half.

Each test stream (its distinct statements, in order; S = their number) is then answered by the
real engine (``dp.engine`` start/decide/release, default mode, matrix-heavy split, static
allocation, epsilon = 1, delta = 1e-6, seeded noise) three times: (a) P empty (everything
online), (b) P = the prediction, (c) P = the stream's own statements (the paper's oracle,
rho = 1). MAE = mean |noisy - exact| over the rows of the answered statements; exact
histograms are computed in Python from sql_fixtures/flights.

    python -m bench.predict --quick          # 1 session of task 0, both scenarios (~30 s)
    python -m bench.predict --per-task 2     # 2 sessions per task (~20 min)
    python -m bench.predict                  # all 38 sessions with data (hours)

The tables are printed (copy them into docs/benchmarks.md, section "Template prediction").
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import sql_fixtures.flights as flights
from dp.domain import QueryBatch
from dp.engine import EngineConfig, answer, start
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler
from dp.strategy import optimize_strategy
from rewriter import parse_schema
from rewriter.predict import (
    DAY,
    LogRecord,
    PredictConfig,
    Prediction,
    Resolved,
    Resolver,
    evaluate,
    predict,
    round_binding,
)
from rewriter.schema import AttributeDecl, Schema

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "data" / "workloads" / "crossfilter" / "flights"
HEADING = "## Template prediction (`bench/predict`)"

EPS, DELTA = 1.0, 1e-6
MAPPING = {"DISTANCE": "distance", "DEP_DELAY": "delay", "DEP_TIME": "hour"}
AXIS = {"delay": (-20, 60), "distance": (0, 5000)}  # the range the UI shows per binned view
_SEL = re.compile(r"^(\w+) >= (-?[\d.e+-]+) AND \1 < (-?[\d.e+-]+)$")


def bench_schema() -> Schema:
    """The fixture's declaration with only the crossfilter view."""
    text = flights.DECLARATION.read_text()
    head, _, views = text.partition("[tables.flights.views]")
    keep = [line for line in views.splitlines() if line.startswith("crossfilter")]
    return parse_schema(head + "[tables.flights.views]\n" + "\n".join(keep) + "\n", "bench")


# --------------------------------------------------------------------------------------------
# traces -> SQL


@dataclass(frozen=True, slots=True)
class Session:
    user: str
    task: int
    # one entry per refresh of a view: (time in ms, the SQL statements of that histogram)
    refreshes: tuple[tuple[float, tuple[str, ...]], ...]


def _bins(attr: AttributeDecl) -> list[tuple[int, int]]:
    """Half-open [lo, hi) integer bins of a binned attribute inside the UI axis."""
    lo_ax, hi_ax = AXIS[attr.name]
    out = []
    for lo, hi in attr.bins:
        a, b = int(lo), int(hi) + 1
        if a >= lo_ax and b <= hi_ax:
            out.append((a, b))
    return out


def _where(parts: Sequence[str]) -> str:
    return (" WHERE " + " AND ".join(parts)) if parts else ""


def histogram_sql(
    view: str, brushes: dict[str, tuple[object, object]], schema: Schema
) -> tuple[str, ...]:
    attrs = schema.tables["flights"].attributes
    filters = [
        f"{a} >= {lo} AND {a} < {hi}" for a, (lo, hi) in sorted(brushes.items()) if a != view
    ]
    if view == "hour":
        return (f"SELECT hour, count(*) FROM flights{_where(filters)} GROUP BY hour",)
    return tuple(
        f"SELECT count(*) FROM flights{_where([f'{view} >= {a} AND {view} < {b}', *filters])}"
        for a, b in _bins(attrs[view])
    )


def load_sessions(schema: Schema) -> list[Session]:
    attrs = schema.tables["flights"].attributes
    out = []
    for path in sorted(TRACES.glob("*_flights_*_workflow.json.gz")):
        user, _, task, _ = path.name.split("_")
        with gzip.open(path, "rt") as f:
            trace = json.load(f)
        brushes: dict[str, tuple[object, object]] = {}
        refreshes: list[tuple[float, tuple[str, ...]]] = []
        for it in trace["interactions"]:
            view = MAPPING.get(it["name"])
            if view is None:
                continue
            m = _SEL.match(it.get("selection", ""))
            if m is None:
                continue
            lo, hi = float(m.group(2)), float(m.group(3))
            if hi <= lo:
                brushes.pop(view, None)
            else:
                a = round_binding(attrs[view], ">=", lo)
                b = round_binding(attrs[view], "<", hi)
                if a is None or b is None or a == b:
                    brushes.pop(view, None)
                else:
                    brushes[view] = (a, b)
            for other in ("delay", "distance", "hour"):
                if other != view:
                    refreshes.append((float(it["time"]), histogram_sql(other, brushes, schema)))
        out.append(Session(user=user, task=int(task), refreshes=tuple(refreshes)))
    return out


# --------------------------------------------------------------------------------------------
# exact answers


def exact_histogram(schema: Schema) -> np.ndarray:
    """The crossfilter view's histogram of sql_fixtures/flights, computed in Python."""
    view = schema.tables["flights"].views[0]
    shape = view.domain.shape
    hist = np.zeros(shape)
    cols = {"delay": 2, "distance": 3, "hour": 1}
    for row in flights.rows():
        idx = []
        for attr in view.attributes:
            v = row[cols[attr.name]]
            cell = next((i for i, (lo, hi) in enumerate(attr.bins) if lo <= v <= hi), None)
            if cell is None:
                break
            idx.append(cell)
        else:
            hist[tuple(idx)] += 1
    return hist.reshape(-1)


# --------------------------------------------------------------------------------------------
# one test stream through the engine


@dataclass(slots=True)
class Stream:
    """The distinct statements of a test window, in order (exact repeats are free)."""

    batches: list[QueryBatch] = field(default_factory=list)
    sqls: list[str] = field(default_factory=list)


def stream_of(refreshes: Sequence[tuple[float, tuple[str, ...]]], resolver: Resolver) -> Stream:
    s = Stream()
    seen: set[str] = set()
    for _, sqls in refreshes:
        for q in sqls:
            got = resolver.statement(q)
            if got is None or got[2] is None:
                raise RuntimeError("the rewriter refused a replayed statement")
            batch = got[2].batch
            if batch.key in seen:
                continue
            seen.add(batch.key)
            s.batches.append(batch)
            s.sqls.append(q)
    return s


@dataclass(frozen=True, slots=True)
class Run:
    mae: float
    refused: int
    good: int
    seconds: float


def run_engine(
    stream: Stream, predicted: QueryBatch | None, x: np.ndarray, seed: int, tl: float
) -> Run:
    t0 = time.perf_counter()
    domain = stream.batches[0].domain
    cfg = EngineConfig(epsilon=EPS, delta=DELTA, stream_length=len(stream.batches))
    strategy = None
    if predicted is not None and predicted.num_queries:
        strategy = optimize_strategy(predicted.dense(), time_limit=tl)
    sampler = SeededSampler(seed)
    state, _events = start(cfg, domain, predicted, x, sampler, strategy=strategy)
    errs: list[float] = []
    refused = good = 0
    for batch in stream.batches:
        try:
            state, d, r = answer(state, batch, x, sampler)
        except BudgetExhaustedError:
            refused += 1
            continue
        good += d.kind.value == "matrix"
        errs.extend(np.abs(np.asarray(r.answers) - batch.answer(x)).tolist())
    return Run(
        mae=float(np.mean(errs)) if errs else math.nan,
        refused=refused,
        good=good,
        seconds=time.perf_counter() - t0,
    )


# --------------------------------------------------------------------------------------------
# the experiment


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    user: str
    task: int
    statements: int  # SQL statements of the test window (with repeats)
    distinct: int  # distinct histogram statements (S)
    p_size: int  # |P| in SQL statements
    rho: float  # SQL statements of the test window whose batch is in P (with repeats)
    rho_distinct: float  # distinct statements of the test window in P (what S counts)
    false_pos: int
    expected_mae: float | None
    expected_online: float | None
    none: Run
    lapras: Run
    oracle: Run


def _records(
    refreshes: Sequence[tuple[float, tuple[str, ...]]], t: float, *, once: bool
) -> list[LogRecord]:
    out: list[LogRecord] = []
    seen: set[str] = set()
    for ms, sqls in refreshes:
        for q in sqls:
            if once and q in seen:
                continue
            seen.add(q)
            out.append(LogRecord(time=t + (ms / 1000.0 if not once else 0.0), sql=q))
    return out


def _resolved(records: Sequence[LogRecord], resolver: Resolver) -> list[Resolved]:
    out = []
    for r in records:
        got = resolver.record(r)
        if got is not None:
            out.append(got)
    return out


def experiment(
    scenario: str,
    test: Session,
    train: list[LogRecord],
    test_refreshes: Sequence[tuple[float, tuple[str, ...]]],
    now: float,
    cfg: PredictConfig,
    resolver: Resolver,
    schema: Schema,
    x: np.ndarray,
    seed: int,
    tl: float,
) -> Row:
    train_res = _resolved(train, resolver)
    pred: Prediction = predict((), schema, now=now, config=cfg, resolved=train_res)
    later = _resolved(_records(test_refreshes, now + 1.0, once=False), resolver)
    report = evaluate(pred, later, epsilon=EPS, delta=DELTA, strategy_time_limit=tl)
    stream = stream_of(test_refreshes, resolver)
    p_batch = pred.views[0].batch if pred.views else None
    oracle = QueryBatch.stack(stream.batches)
    return Row(
        scenario=scenario,
        user=test.user,
        task=test.task,
        statements=report.test,
        distinct=len(stream.batches),
        p_size=report.predicted,
        rho=report.rho,
        rho_distinct=report.rho_distinct,
        false_pos=report.false_positives,
        expected_mae=report.mae,
        expected_online=report.online_only_mae,
        none=run_engine(stream, None, x, seed, tl),
        lapras=run_engine(stream, p_batch, x, seed, tl),
        oracle=run_engine(stream, oracle, x, seed, tl),
    )


def _median(v: Sequence[float]) -> float:
    w = [a for a in v if not math.isnan(a)]
    return float(np.median(w)) if w else math.nan


def table(rows: Sequence[Row]) -> str:
    lines = [
        "| scenario | sessions | SQL stmts (median) | S = distinct statements | P (SQL stmts) | rho | rho (distinct) | false pos. | MAE none | MAE LAPRAS | MAE oracle | model MAE LAPRAS / online | refused none / LAPRAS / oracle |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in sorted({r.scenario for r in rows}):
        rs = [r for r in rows if r.scenario == sc]
        exp_l = _median([r.expected_mae if r.expected_mae is not None else math.nan for r in rs])
        exp_o = _median(
            [r.expected_online if r.expected_online is not None else math.nan for r in rs]
        )
        lines.append(
            f"| {sc} | {len(rs)} | {_median([r.statements for r in rs]):.0f} "
            f"| {_median([r.distinct for r in rs]):.0f} | {_median([r.p_size for r in rs]):.0f} "
            f"| {_median([r.rho for r in rs]):.2f} | {_median([r.rho_distinct for r in rs]):.2f} "
            f"| {_median([r.false_pos for r in rs]):.0f} "
            f"| {_median([r.none.mae for r in rs]):.1f} | {_median([r.lapras.mae for r in rs]):.1f} "
            f"| {_median([r.oracle.mae for r in rs]):.1f} | {exp_l:.1f} / {exp_o:.1f} "
            f"| {sum(r.none.refused for r in rs)} / {sum(r.lapras.refused for r in rs)} / "
            f"{sum(r.oracle.refused for r in rs)} |"
        )
    return "\n".join(lines)


def per_task(rows: Sequence[Row]) -> str:
    lines = [
        "| scenario | task | sessions | rho | rho (distinct) | MAE none | MAE LAPRAS | MAE oracle |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sc in sorted({r.scenario for r in rows}):
        for task in sorted({r.task for r in rows}):
            rs = [r for r in rows if r.scenario == sc and r.task == task]
            if not rs:
                continue
            lines.append(
                f"| {sc} | {task} | {len(rs)} | {_median([r.rho for r in rs]):.2f} "
                f"| {_median([r.rho_distinct for r in rs]):.2f} | {_median([r.none.mae for r in rs]):.1f} "
                f"| {_median([r.lapras.mae for r in rs]):.1f} | {_median([r.oracle.mae for r in rs]):.1f} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.predict", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one session of task 0 (~1.5 min)")
    ap.add_argument("--per-task", type=int, default=0, help="test sessions per task (0: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=1.0, help="strategy time limit (s)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    schema = bench_schema()
    x = exact_histogram(schema)
    sessions = load_sessions(schema)
    resolver = Resolver(schema)
    tasks = [0] if args.quick else sorted({s.task for s in sessions})
    per_task_n = 1 if args.quick else args.per_task
    rows: list[Row] = []
    base = 1_000 * DAY
    for task in tasks:
        # sessions of this task with at least one refresh of a mapped view, by size
        group = sorted(
            (s for s in sessions if s.task == task and s.refreshes), key=lambda s: s.user
        )
        chosen = group
        if per_task_n and len(group) > per_task_n:
            # spread over the sizes: every k-th session by number of refreshes
            by_size = sorted(group, key=lambda s: len(s.refreshes))
            step = len(by_size) / per_task_n
            chosen = [by_size[int(j * step + step / 2)] for j in range(per_task_n)]
        for i, test in enumerate(chosen):
            others = [s for s in group if s is not test]
            train: list[LogRecord] = []
            for day, s in enumerate(others):
                train += _records(s.refreshes, base + day * DAY, once=True)
            cfg = PredictConfig(
                period=DAY,
                half_life=30 * DAY,
                min_occurrences=2,
                epsilon=EPS,
                delta=DELTA,
                strategy_time_limit=args.time_limit,
            )
            now = base + len(others) * DAY
            row = experiment("other users", test, train, test.refreshes, now, cfg, resolver,
                             schema, x, args.seed + i, args.time_limit)  # fmt: skip
            rows.append(row)
            _progress(row, t0)
            half = len(test.refreshes) // 2
            first, second = test.refreshes[:half], test.refreshes[half:]
            if not first or not second:
                continue
            span = max(first[-1][0] / 1000.0, 1.0)
            cfg2 = PredictConfig(
                period=None,
                half_life=span,
                min_occurrences=2,
                epsilon=EPS,
                delta=DELTA,
                strategy_time_limit=args.time_limit,
            )
            now2 = base + second[0][0] / 1000.0
            train2 = _records(first, base, once=False)
            row = experiment("first half", test, train2, second, now2, cfg2, resolver, schema,
                             x, args.seed + 100 + i, args.time_limit)  # fmt: skip
            rows.append(row)
            _progress(row, t0)
    elapsed = time.perf_counter() - t0
    cmd = "python -m bench.predict" + (" --quick" if args.quick else "")
    if args.per_task and not args.quick:
        cmd += f" --per-task {args.per_task}"
    if args.time_limit != 1.0:
        cmd += f" --time-limit {args.time_limit:g}"
    text = (
        f"{HEADING}\n\n"
        f"Command: `{cmd}` ({elapsed:.0f} s). Method, mapping and scenarios: the "
        "docstring of `bench/predict/run.py`.\n\n"
        "Crossfilter flights traces replayed as SQL over `sql_fixtures/flights` (crossfilter "
        "view, 6,120 cells); epsilon = 1, delta = 1e-6, engine default mode, matrix-heavy "
        "split, static allocation; S = the test window's distinct statements (exact repeats "
        "are free). Medians over the test sessions. MAE = mean absolute error over the rows of "
        "the answered statements (refused statements are counted in the last column, summed). "
        "rho = fraction of the window's statements (with repeats) whose batch is in P; "
        "rho (distinct) = the same over distinct statements; false pos. = statements of P never "
        "asked in the window. *model* = the predictor's own backtest estimate "
        "(`rewriter.predict.expected_epoch_error`) for LAPRAS / everything online.\n\n"
        + table(rows)
        + "\n\n"
        + per_task(rows)
        + "\n"
    )
    print(text)
    return 0


def _progress(row: Row, t0: float) -> None:
    print(
        f"[{time.perf_counter() - t0:5.0f} s] {row.scenario:11s} task {row.task} "
        f"user {row.user[:8]}: S={row.distinct} |P|={row.p_size} rho={row.rho:.2f} "
        f"MAE none {row.none.mae:.1f} ({row.none.refused}) lapras {row.lapras.mae:.1f} "
        f"({row.lapras.refused}) oracle {row.oracle.mae:.1f} ({row.oracle.refused})",
        flush=True,
    )
