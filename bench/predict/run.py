"""The prediction benchmark: real dashboard logs, three learning scenarios, four P's, the engine.

Workloads (``bench/predict/traces``, copied from ../shared; SOURCE.txt): the Crossfilter
Benchmark's real user traces -- flights (55 sessions, 11 users x tasks 0-4), movies (45, 9
users) and weather (60, 12 users) -- and IDEBench's 30 generated flights workflows (types 1n,
independent, mixed, n1, sequential; indices 0-4, mixed 0-9). Their data tables are not shipped:
each is **synthesised** (``bench/predict/datasets.py``: the traces' view attributes with the
traces' binning as public domains; seeded rows) and each session is replayed as the SQL the
dashboard sends (``bench/predict/replay.py``). ``cell_limit`` is the product's default
(1,000,000 cells): a statement whose columns span more (a histogram filtered by brushes on five
or more other views) is refused by the rewriter (SQLSTATE 54000) as the proxy would refuse it;
it is in the logs the predictor learns from, and left out of every test stream (counted).

The query log: every session on its own day (09:00 UTC, the trace's own times after that),
the user as the analyst (IDEBench: the workflow type), one record per statement sent.

Scenarios (``--scenario``), each a test session (the *window*) and the log before it:

* ``same-user`` -- *same user, earlier sessions*: learn from the user's sessions of the earlier
  tasks (one per day), test on the next task's session (IDEBench: the same workflow type's
  earlier indices);
* ``other-users`` -- *other users, same task*: learn from the other users' sessions of the task
  (one per day, before the test day), test on this user's (IDEBench: the same index's
  workflows of the other types);
* ``rolling`` -- *rolling windows*: all sessions in time order (user by user, tasks in order;
  IDEBench: type by type), one per day; learn on every day before a window, test on the
  window (one day), for every day but the first.

For each test window (its S distinct statements, in order; exact repeats are free) the real
engine (``dp.engine.start`` / ``answer``, the product's default mode: steady pacing over E
expected fresh answers; epsilon = 1, delta = 1e-6, ``SeededSampler`` noise) is run four times,
with the same noise seed and the same planned stream length S: the one the product predicted
from the log (``Prediction.stream_length``, the busiest window x 1.5, what ``lapras epoch start
--from-prediction`` configures; a deployment without prediction would estimate it from the same
log), else the window's own. The product's epoch expects the E its prediction stored
(``Prediction.expected_fresh``: less what P answers), the others the E the same estimate gives
an epoch without P (``CapDecision.online_expected_fresh``):

* **product**: P = ``rewriter.predict.predict`` on the log (``PredictConfig(epsilon, delta)``,
  the error-aware cap as ``lapras predict`` runs it), with the budget split the prediction
  chose (as ``lapras epoch start --from-prediction`` takes it; matrix-heavy when it chose
  none);
* **online**: P empty (everything answered online);
* **literal**: P = every distinct statement of the log, the most recently asked first, at most
  2S of them (the literal-repeat baseline);
* **oracle**: P = the window's own statements (overlap 1).

(The last three use the default split, matrix-heavy.) In every window the oracle P is also
run at each MM share of :data:`ORACLE_SHARES` (``rewriter.predict_cap.split_for``), and the
best of them whose refusals are at most online-only's is kept (``oracle_best``): what a perfect
prediction reaches with this engine, S and E at any split, so a bound on what any predictor
can reach there. The targets (issue 39, item 5; ``bench.predict.report``): where that oracle
gains at least 1.2x over online-only, the product reaches 80% of its gain; elsewhere its MAE
is within 3% of online-only's; and it never refuses more than online-only. Reported per run: MAE = mean |noisy - exact| over the rows (linear queries) of the
answered statements, and the statements refused for budget. Overlap rho = the share of the window's distinct statements (by the predictor's
identity, ``Resolved.ident``) that are in P.

Time. The online, oracle and literal runs do not depend on the predictor: they are cached on
disk (``bench/out/predict/engine-runs.json``), keyed by
the batches asked and predicted, the seed, S, E and a hash of ``dp/``; the replayed statements'
resolution through the rewriter is cached per session (``resolved/``, keyed by a hash of
``rewriter/`` and ``dp/`` but the predictor's modules, and the declaration). So a re-run after a change of
the predictor only predicts and runs the product again. Work is spread over ``--jobs`` processes (fork).

    python -m bench.predict --quick          # the cheapest window per dataset and scenario
    python -m bench.predict --sample 2       # two windows per dataset and scenario, short to long log
    python -m bench.predict --sample 1 --high-overlap 1   # and one whose literal overlap is >= 0.5
    python -m bench.predict                  # every session of every dataset
    python -m bench.predict --dataset movies --scenario rolling --write-docs
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import multiprocessing
import os
import pickle
import sys
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from bench.predict import datasets as D
from bench.predict import replay as R
from dp.domain import QueryBatch
from dp.engine import EngineConfig, answer, start
from dp.errors import BudgetExhaustedError
from dp.noise import SeededSampler
from dp.pin import Pin
from rewriter.predict import (
    DAY,
    LogRecord,
    PredictConfig,
    Prediction,
    Resolved,
    Resolver,
    predict,
)
from rewriter.predict_cap import split_for
from rewriter.schema import Schema

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "out" / "predict"
EPS, DELTA = 1.0, 1e-6
DEFAULT_SPLIT = "matrix-heavy"
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()
START_OF_DAY = 9 * 3600.0
SCENARIOS = ("same-user", "other-users", "rolling")
TITLES = {
    "same-user": "same user, earlier sessions",
    "other-users": "other users, same task",
    "rolling": "rolling windows",
}
IDE_TITLES = {
    "same-user": "same type, earlier workflows",
    "other-users": "same index, other types",
    "rolling": "rolling windows",
}
#: A product MAE above online-only by more than this factor counts as worse (beyond noise).
WORSE = 1.05
#: The MM shares the oracle P is tried at (the cap's own, ``rewriter.predict_cap.SHARES``):
#: the best is a bound on any predictor there.
ORACLE_SHARES = (0.0625, 0.125, 0.25, 0.5, 0.75, 0.9)


# --------------------------------------------------------------------------------------------
# the data of one dataset (built once in the parent; workers inherit it by fork)


@dataclass(slots=True)
class Data:
    name: str
    ds: D.Dataset
    schema: Schema
    pin: Pin
    sessions: list[R.Session]
    #: one Resolver per session, that resolved the session's statements (None: not yet)
    resolvers: dict[str, Resolver] = field(default_factory=dict)

    def resolver(self, s: R.Session) -> Resolver:
        r = self.resolvers.get(s.name)
        if r is None:  # not prepared by ``prepare`` (tests): resolved on demand
            r = self.resolvers[s.name] = Resolver(self.schema)
        return r


_DATA: dict[str, Data] = {}


def _source_hash(*parts: str, skip: Sequence[str] = ()) -> str:
    h = hashlib.sha256()
    for part in parts:
        path = ROOT / part
        for p in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            if p.relative_to(ROOT).as_posix() in skip:
                continue
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def dataset_data(name: str) -> Data:
    """A dataset's declaration, pin and replayed sessions (built once per process)."""
    if name not in _DATA:
        ds = D.dataset(name)
        schema = D.schema(ds)
        _DATA[name] = Data(name, ds, schema, D.pin(ds, schema), R.sessions(name))
    return _DATA[name]


#: The predictor's own modules: what a resolved statement is does not depend on them.
PREDICTOR_MODULES = (
    "rewriter/predict.py",
    "rewriter/predict_cap.py",
    "rewriter/stream_length.py",
    "dp/release_bound.py",
)


def _cache_dir(data: Data) -> Path:
    """Where the resolved sessions of a dataset are cached: keyed by the rewriter (the
    predictor's module aside: what is cached is what ``rewriter.classify`` made of each
    statement; ``_usable`` checks a cached resolver against a fresh one), ``dp/`` and the
    declaration."""
    src = _source_hash("rewriter", "dp", skip=PREDICTOR_MODULES)
    h = hashlib.sha256((src + D.declaration(data.ds)).encode()).hexdigest()[:16]
    return OUT / "resolved" / f"{data.name}-{h}"


def _usable(data: Data, s: R.Session, r: Resolver) -> bool:
    """Whether a cached resolver gives what a fresh one gives (the predictor's module may have
    changed since it was stored)."""
    try:
        for rec in records(s, 0)[:3]:
            a, b = r.record(rec), Resolver(data.schema).record(rec)
            if (a is None) != (b is None) or (
                a is not None and b is not None and a.ident != b.ident
            ):
                return False
        return True
    except Exception:
        return False


def _resolve_session(args: tuple[str, int]) -> tuple[str, int, bytes]:
    name, i = args
    data = dataset_data(name)
    s = data.sessions[i]
    r = Resolver(data.schema)
    for _, q in s.queries:
        r.statement(q)
    return name, i, pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL)


def prepare(
    need: Iterable[tuple[str, int]],
    *,
    jobs: int = 1,
    cache: bool = True,
    log: Callable[[str], None] = print,
) -> None:
    """Resolve the statements of the sessions ``need`` (dataset, index) through the rewriter,
    one Resolver per session, in ``jobs`` processes; cached on disk per session, keyed by a
    hash of ``rewriter/``, ``dp/`` and the declaration."""
    t0 = time.perf_counter()
    todo: list[tuple[str, int]] = []
    cached = 0
    for name, i in sorted(set(need)):
        data = dataset_data(name)
        s = data.sessions[i]
        if s.name in data.resolvers:
            continue
        path = _cache_dir(data) / f"{s.name}.pkl"
        got: Resolver | None = None
        if cache and path.exists():
            try:
                with path.open("rb") as f:
                    got = pickle.load(f)
            except Exception:
                got = None
        if got is not None and _usable(data, s, got):
            data.resolvers[s.name] = got
            cached += 1
        else:
            todo.append((name, i))
    todo.sort(key=lambda t: -len(_DATA[t[0]].sessions[t[1]].queries))
    if jobs > 1 and len(todo) > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = list(pool.imap_unordered(_resolve_session, todo))
    else:
        results = [_resolve_session(t) for t in todo]
    for name, i, blob in results:
        data = _DATA[name]
        s = data.sessions[i]
        data.resolvers[s.name] = pickle.loads(blob)
        if cache:
            folder = _cache_dir(data)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{s.name}.pkl").write_bytes(blob)
    log(
        f"resolved the statements of {len(results)} sessions ({cached} cached) in "
        f"{time.perf_counter() - t0:.0f} s"
    )


# --------------------------------------------------------------------------------------------
# scenarios


@dataclass(frozen=True, slots=True)
class Unit:
    """One test window: the session ``test`` on day ``test_day`` after ``train`` (session
    index, day) sessions."""

    dataset: str
    scenario: str
    test: int
    test_day: int
    train: tuple[tuple[int, int], ...]


def timeline(sessions: Sequence[R.Session]) -> list[int]:
    """The sessions' order in time: analyst by analyst, tasks in order (one per day)."""
    return sorted(range(len(sessions)), key=lambda i: (sessions[i].analyst, sessions[i].task))


def units(data: Data, scenario: str, *, max_train: int = 0) -> list[Unit]:
    """Every test window of a scenario (``max_train``: keep only the latest N training
    sessions)."""
    ss = data.sessions
    order = timeline(ss)
    day = {i: d for d, i in enumerate(order)}
    out: list[Unit] = []
    for i, s in enumerate(ss):
        if scenario == "same-user":
            train = [
                (j, day[j]) for j in order if ss[j].analyst == s.analyst and ss[j].task < s.task
            ]
            test_day = day[i]
        elif scenario == "other-users":
            others = [j for j in order if ss[j].task == s.task and ss[j].analyst != s.analyst]
            train = [(j, d) for d, j in enumerate(others)]
            test_day = len(others)
        elif scenario == "rolling":
            train = [(j, day[j]) for j in order if day[j] < day[i]]
            test_day = day[i]
        else:
            raise ValueError(f"unknown scenario {scenario!r}")
        if max_train:
            train = train[-max_train:]
        if train:
            out.append(Unit(data.name, scenario, i, test_day, tuple(train)))
    return out


def records(s: R.Session, day: int) -> list[LogRecord]:
    """A session's statements as query-log records on ``day``."""
    base = T0 + day * DAY + START_OF_DAY
    return [
        LogRecord(time=base + t, analyst=s.analyst, session=f"{s.name}@{day}", sql=q)
        for t, q in s.queries
    ]


# --------------------------------------------------------------------------------------------
# one run of the engine


@dataclass(frozen=True, slots=True)
class Run:
    """One test window answered by the engine with one P."""

    mae: float  # mean |noisy - exact| over the rows of the answered statements (nan: none)
    refused: int  # statements refused for budget
    answered: int
    matrix: int  # answered from the Matrix Mechanism release
    rows: int  # rows of the answered statements
    seconds: float
    error: str = ""  # the engine raised (the window is reported, its MAE is nan)


@dataclass(slots=True)
class Stream:
    """A test window's distinct answerable statements, in order."""

    idents: list[tuple[str, str, str]] = field(default_factory=list)
    batches: list[QueryBatch] = field(default_factory=list)
    statements: int = 0  # SQL statements of the session (with repeats)
    unresolved: list[str] = field(default_factory=list)  # distinct SQL the rewriter refused


def stream_of(data: Data, s: R.Session, day: int) -> Stream:
    out = Stream()
    seen: set[tuple[str, str, str]] = set()
    bad: set[str] = set()
    resolver = data.resolver(s)
    for rec in records(s, day):
        out.statements += 1
        r = resolver.record(rec)
        if r is None or r.ident is None or r.plan is None:
            assert rec.sql is not None
            if rec.sql not in bad:
                bad.add(rec.sql)
                out.unresolved.append(rec.sql)
            continue
        if r.ident in seen:
            continue
        seen.add(r.ident)
        out.idents.append(r.ident)
        out.batches.append(r.plan.batch)
    return out


def engine_run(
    pin: Pin,
    stream: Sequence[QueryBatch],
    predicted: Sequence[QueryBatch],
    seed: int,
    split: str | tuple[float, float, float, float] = DEFAULT_SPLIT,
    *,
    stream_length: int | None = None,
    expected_fresh: int | None = None,
    weights: Sequence[float] | None = None,
) -> Run:
    """Answer ``stream`` in an epoch started with ``predicted`` (default mode; S =
    ``stream_length``, default the stream's length; ``weights``: the predicted batches'
    probabilities, as ``lapras epoch start --from-prediction`` passes them). A statement the
    engine refuses for budget (``BudgetExhaustedError``) is counted in ``refused`` and left
    out of the MAE."""
    t0 = time.perf_counter()
    s_len = max(1, len(stream) if stream_length is None else stream_length)
    # the default mode, as an epoch started from the prediction runs: the steady pacing over
    # E fresh answers
    cfg = EngineConfig(
        epsilon=EPS,
        delta=DELTA,
        stream_length=s_len,
        split=split,
        expected_fresh=min(expected_fresh, s_len) if expected_fresh else None,
    )
    sampler = SeededSampler(seed)
    err = 0.0
    rows = refused = answered = matrix = 0
    try:
        state, _ = start(cfg, pin.domain, list(predicted) or None, pin, sampler, weights=weights)
        for batch in stream:
            try:
                state, decision, result = answer(state, batch, pin, sampler)
            except BudgetExhaustedError:
                refused += 1
                continue
            answered += 1
            matrix += decision.kind.value == "matrix"
            exact = batch.answer(pin.marginal(batch.domain))
            err += float(np.sum(np.abs(np.asarray(result.answers) - exact)))
            rows += batch.num_queries
    except Exception as e:  # the engine failed: report it, do not stop the benchmark
        msg = f"{type(e).__name__}: {e}"
        return Run(math.nan, refused, answered, matrix, rows, time.perf_counter() - t0, msg)
    mae = err / rows if rows else math.nan
    return Run(mae, refused, answered, matrix, rows, time.perf_counter() - t0)


class RunCache:
    """Engine runs by content: the batches asked and predicted, seed, split, S, ``dp/``."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.runs: dict[str, dict[str, object]] = {}
        self.new: dict[str, dict[str, object]] = {}
        if path is not None and path.exists():
            try:
                self.runs = json.loads(path.read_text())
            except (OSError, ValueError):
                self.runs = {}
        self.salt = _source_hash("dp", "bench/predict/datasets.py")

    def key(
        self,
        dataset: str,
        stream: Sequence[QueryBatch],
        predicted: Sequence[QueryBatch],
        seed: int,
        split: object,
        stream_length: int,
        expected_fresh: int | None = None,
    ) -> str:
        h = hashlib.sha256(
            f"{self.salt}|{dataset}|{seed}|{split}|{stream_length}|{expected_fresh}|steady|"
            f"{EPS}|{DELTA}".encode()
        )
        for b in stream:
            h.update(b"s" + b.key.encode())
        for b in predicted:
            h.update(b"p" + b.key.encode())
        return h.hexdigest()

    def get(self, key: str) -> Run | None:
        got = self.runs.get(key) or self.new.get(key)
        return Run(**got) if got is not None else None  # type: ignore[arg-type]

    def put(self, key: str, run: Run) -> None:
        if not run.error:
            self.new[key] = asdict(run)

    def merge(self, new: dict[str, dict[str, object]]) -> None:
        self.runs.update(new)

    def save(self) -> None:
        if self.path is None:
            return
        self.runs.update(self.new)
        self.new = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.runs))
        tmp.replace(self.path)


_CACHE = RunCache(None)


def cached_run(
    data: Data,
    stream: Sequence[QueryBatch],
    predicted: Sequence[QueryBatch],
    seed: int,
    split: str | tuple[float, float, float, float] = DEFAULT_SPLIT,
    *,
    stream_length: int,
    expected_fresh: int | None = None,
) -> Run:
    key = _CACHE.key(data.name, stream, predicted, seed, split, stream_length, expected_fresh)
    got = _CACHE.get(key)
    if got is None:
        got = engine_run(
            data.pin,
            stream,
            predicted,
            seed,
            split,
            stream_length=stream_length,
            expected_fresh=expected_fresh,
        )
        _CACHE.put(key, got)
    return got


def session_seed(seed: int, s: R.Session) -> int:
    return seed * 1_000_003 + zlib.crc32(s.name.encode())


# --------------------------------------------------------------------------------------------
# one test window


@dataclass(slots=True)
class Row:
    dataset: str
    scenario: str
    session: str  # analyst/task
    index: int  # the session's index in ``Data.sessions``
    train_sessions: int
    train_records: int
    statements: int  # SQL statements the window sent (with repeats)
    unresolved: int  # distinct statements of the window the rewriter refused (cell_limit)
    s: int  # distinct answerable statements of the window
    p_product: int
    p_literal: int
    rho_product: float
    rho_literal: float
    s_predicted: int | None
    split: tuple[float, float, float, float] | None
    expected_mae: float | None
    expected_online: float | None
    predict_seconds: float
    product: Run
    literal: Run
    online: Run | None = None
    oracle: Run | None = None
    #: the overlap of the predictor's ranking (before the error-aware cap) cut at the literal
    #: baseline's size: how well it finds the repeats, whatever the cap then keeps
    rho_ranked: float | None = None
    #: the oracle P at the best of ORACLE_SHARES whose refusals are at most online-only's,
    #: and that share
    oracle_best: Run | None = None
    oracle_best_share: float | None = None
    #: the E the product's epoch expected, and the cap's decision in words
    e_predicted: int | None = None
    decision: str = ""


def literal_baseline(train: Sequence[Resolved], cap: int) -> list[Resolved]:
    """Every distinct statement of the log, the most recently asked first, at most ``cap``."""
    latest: dict[tuple[str, str, str], Resolved] = {}
    for r in train:
        if r.ident is not None and r.plan is not None:
            old = latest.get(r.ident)
            if old is None or r.time >= old.time:
                latest[r.ident] = r
    ranked = sorted(latest.values(), key=lambda r: -r.time)
    return ranked[:cap]


def product_config() -> PredictConfig:
    """The predictor as ``lapras predict`` runs it: the error-aware cap at the epoch's budget."""
    return PredictConfig(epsilon=EPS, delta=DELTA)


@dataclass(slots=True)
class Window:
    """Everything one test window needs, before the engine runs (exposed for the tests)."""

    unit: Unit
    train: list[Resolved]
    stream: Stream
    prediction: Prediction
    literal: list[Resolved]
    predict_seconds: float


def _train(unit: Unit) -> list[Resolved]:
    """The resolved records of a window's log."""
    data = _DATA[unit.dataset]
    train: list[Resolved] = []
    for j, day in unit.train:
        resolver = data.resolver(data.sessions[j])
        for rec in records(data.sessions[j], day):
            r = resolver.record(rec)
            if r is not None:
                train.append(r)
    return train


def literal_overlap(unit: Unit) -> float:
    """The literal-repeat baseline's overlap with a window (no predictor, no engine)."""
    data = _DATA[unit.dataset]
    stream = stream_of(data, data.sessions[unit.test], unit.test_day)
    lit = literal_baseline(_train(unit), 2 * len(stream.idents))
    return overlap(stream, (r.ident for r in lit if r.ident is not None))


def window(unit: Unit, config: PredictConfig | None = None) -> Window:
    data = _DATA[unit.dataset]
    train = _train(unit)
    test = data.sessions[unit.test]
    stream = stream_of(data, test, unit.test_day)
    now = T0 + unit.test_day * DAY + START_OF_DAY
    t0 = time.perf_counter()
    pred = predict((), data.schema, now=now, config=config or product_config(), resolved=train)
    secs = time.perf_counter() - t0
    lit = literal_baseline(train, 2 * len(stream.idents))
    return Window(unit, train, stream, pred, lit, secs)


def overlap(stream: Stream, p: Iterable[tuple[str, str, str]]) -> float:
    keys = set(p)
    return sum(k in keys for k in stream.idents) / len(stream.idents) if stream.idents else 0.0


def run_unit(unit: Unit, seed: int) -> Row:
    data = _DATA[unit.dataset]
    w = window(unit)
    test = data.sessions[unit.test]
    sd = session_seed(seed, test)
    pred = w.prediction
    split = pred.split if pred.split is not None else DEFAULT_SPLIT
    # P as the epoch takes it: one batch per statement, weighted by its probability
    p_batches = [q.batch for q in pred.queries]
    weights = [q.probability for q in pred.queries] if pred.config.weighted else None
    # every run plans the S the deployment would configure from the log (the prediction's);
    # the product its E, the others the E the prediction gives an epoch without P
    s_len = pred.stream_length or len(w.stream.batches)
    e_len = pred.expected_fresh
    e_none = next((d.online_expected_fresh for d in pred.caps.values()), e_len)
    stream = w.stream.batches
    product = engine_run(
        data.pin,
        stream,
        p_batches,
        sd,
        split,
        stream_length=s_len,
        expected_fresh=e_len,
        weights=weights,
    )
    lit = [r.plan.batch for r in w.literal if r.plan]
    literal = cached_run(data, stream, lit, sd, stream_length=s_len, expected_fresh=e_none)
    online = cached_run(data, stream, [], sd, stream_length=s_len, expected_fresh=e_none)
    oracle = cached_run(data, stream, stream, sd, stream_length=s_len, expected_fresh=e_none)
    rho_literal = overlap(w.stream, (r.ident for r in w.literal if r.ident is not None))
    # the oracle P at its best split, in every window (where it gains 1.2x over online-only,
    # the target asks the product for 80% of its gain); the MM share 1/2 is matrix-heavy
    runs = [(oracle, 0.5)] + [
        (
            cached_run(
                data,
                stream,
                stream,
                sd,
                split_for(m),
                stream_length=s_len,
                expected_fresh=e_none,
            ),
            m,
        )
        for m in ORACLE_SHARES
        if m != 0.5
    ]
    best = best_fitting(runs, online)
    decision = next(iter(pred.caps.values()), None)
    return Row(
        dataset=unit.dataset,
        scenario=unit.scenario,
        session=test.label,
        index=unit.test,
        train_sessions=len(unit.train),
        train_records=len(w.train),
        statements=w.stream.statements,
        unresolved=len(w.stream.unresolved),
        s=len(w.stream.idents),
        p_product=len(pred.queries),
        p_literal=len(w.literal),
        rho_product=overlap(w.stream, pred.keys),
        rho_literal=rho_literal,
        s_predicted=pred.stream_length,
        e_predicted=e_len,
        decision=decision.text if decision is not None else "",
        split=pred.split,
        expected_mae=pred.expected_mae,
        expected_online=pred.online_only_mae,
        predict_seconds=w.predict_seconds,
        product=product,
        literal=literal,
        online=online,
        oracle=oracle,
        rho_ranked=overlap(w.stream, pred.ranked[: len(w.literal)]),
        oracle_best=best[0] if best else None,
        oracle_best_share=best[1] if best else None,
    )


def best_fitting(runs: Sequence[tuple[Run, float]], online: Run) -> tuple[Run, float] | None:
    """Of ``(run, MM share)`` pairs, the run of least MAE among those that refused at most as
    many statements as ``online`` (a lower MAE bought with refusals does not count); None if
    none did."""
    fits = [(r, m) for r, m in runs if not math.isnan(r.mae) and r.refused <= online.refused]
    return min(fits, key=lambda rm: rm[0].mae, default=None)


def _task(args: tuple[str, object, int]) -> tuple[str, object, dict[str, dict[str, object]], str]:
    kind, what, seed = args
    try:
        assert kind == "unit" and isinstance(what, Unit)
        out: object = run_unit(what, seed)
        err = ""
    except Exception:
        out, err = what, traceback.format_exc()
    new, _CACHE.new = _CACHE.new, {}
    return kind, out, new, err


def _cost(data: Data, u: Unit | None, i: int) -> float:
    """A rough cost estimate (for the order of the work: longest first)."""
    test = len(data.sessions[i].queries)
    if u is None:
        return float(test)
    return test * 2.0 + sum(len(data.sessions[j].queries) for j, _ in u.train) * 0.5


# --------------------------------------------------------------------------------------------
# main


def select_quick(data: Data, us: list[Unit]) -> list[Unit]:
    """The cheapest window of a scenario: the smallest log, then the smallest session."""
    if not us:
        return []

    def size(u: Unit) -> tuple[int, int, int]:
        log = sum(len(data.sessions[j].queries) for j, _ in u.train)
        return (
            log + len(data.sessions[u.test].queries),
            len(data.sessions[u.test].queries),
            u.test,
        )

    return [min(us, key=size)]


def select_sample(us: list[Unit], n: int) -> list[Unit]:
    """``n`` windows of a scenario spread evenly over its windows (by test session), the
    first and the last included: short logs and long ones."""
    if n <= 0 or len(us) <= n:
        return us
    ordered = sorted(us, key=lambda u: (len(u.train), u.test))
    if n == 1:
        return [ordered[len(ordered) // 2]]
    return [ordered[round(i * (len(ordered) - 1) / (n - 1))] for i in range(n)]


def plan(
    names: Sequence[str],
    scenarios: Sequence[str],
    *,
    quick: bool = False,
    max_train: int = 0,
    sample: int = 0,
) -> list[Unit]:
    """The test windows of a run (``quick``: the cheapest window per dataset and scenario,
    learning from the latest session only; ``sample``: that many per dataset and scenario,
    from the shortest log to the longest)."""
    out: list[Unit] = []
    for name in names:
        data = dataset_data(name)
        for sc in scenarios:
            us = units(data, sc, max_train=max_train or (1 if quick else 0))
            out += select_quick(data, us) if quick else select_sample(us, sample)
    return out


#: The literal overlap of the windows ``--high-overlap`` adds (where repeats, hence an
#: oracle's gain, are likely; an even sample has few of them).
HIGH_OVERLAP = 0.5


def high_overlap_windows(
    names: Sequence[str],
    scenarios: Sequence[str],
    n: int,
    chosen: Sequence[Unit],
    *,
    max_train: int = 0,
    jobs: int = 1,
    cache: bool = True,
    log: Callable[[str], None] = print,
) -> list[Unit]:
    """``n`` more windows per dataset and scenario among those whose literal overlap is at
    least :data:`HIGH_OVERLAP` (where a P is likely to gain; an even sample of windows has
    few of them), shortest log to longest, none of ``chosen``."""
    taken = {(u.dataset, u.scenario, u.test) for u in chosen}
    out: list[Unit] = []
    for name in names:
        data = dataset_data(name)
        prepare(((name, i) for i in range(len(data.sessions))), jobs=jobs, cache=cache, log=log)
        for sc in scenarios:
            us = [
                u
                for u in units(data, sc, max_train=max_train)
                if (u.dataset, u.scenario, u.test) not in taken
                and literal_overlap(u) >= HIGH_OVERLAP
            ]
            out += select_sample(us, n)
    return out


def run(
    names: Sequence[str],
    scenarios: Sequence[str],
    *,
    seed: int = 1,
    quick: bool = False,
    max_train: int = 0,
    sample: int = 0,
    high_overlap: int = 0,
    jobs: int = 1,
    cache: bool = True,
    log: Callable[[str], None] = print,
) -> tuple[list[Row], float]:
    """Run the benchmark; the rows (with their online and oracle runs) and the seconds
    (``high_overlap``: that many windows more per dataset and scenario, of literal overlap
    at least :data:`HIGH_OVERLAP`)."""
    global _CACHE
    t0 = time.perf_counter()
    _CACHE = RunCache(OUT / "engine-runs.json" if cache else None)
    us = plan(names, scenarios, quick=quick, max_train=max_train, sample=sample)
    if high_overlap:
        us += high_overlap_windows(
            names, scenarios, high_overlap, us, max_train=max_train, jobs=jobs, cache=cache, log=log
        )
    need = {(u.dataset, u.test) for u in us} | {(u.dataset, j) for u in us for j, _ in u.train}
    prepare(need, jobs=jobs, cache=cache, log=log)
    tasks: list[tuple[float, tuple[str, object, int]]] = []
    # a window that is the same in two scenarios (same session, day and log) is run once
    first: dict[tuple[str, int, int, tuple[tuple[int, int], ...]], Unit] = {}
    copies: list[tuple[Unit, Unit]] = []
    for u in us:
        sig = (u.dataset, u.test, u.test_day, u.train)
        if sig in first:
            copies.append((u, first[sig]))
            continue
        first[sig] = u
        tasks.append((_cost(_DATA[u.dataset], u, u.test), ("unit", u, seed)))
    tasks.sort(key=lambda t: -t[0])
    rows: list[Row] = []
    failures: list[str] = []
    done = 0

    def take(res: tuple[str, object, dict[str, dict[str, object]], str]) -> None:
        nonlocal done
        _, out, new, err = res
        _CACHE.merge(new)
        done += 1
        el = time.perf_counter() - t0
        if err:
            failures.append(err)
            log(f"[{el:6.0f} s] {done}/{len(tasks)} FAILED {out}\n{err}")
            return
        if isinstance(out, Row):
            rows.append(out)
            log(
                f"[{el:6.0f} s] {done}/{len(tasks)} {out.dataset:8s} {out.scenario:11s} "
                f"{out.session:14s} S={out.s:4d} |P|={out.p_product:4d}/{out.p_literal:4d} "
                f"rho={out.rho_product:.2f}/{out.rho_literal:.2f} MAE product "
                f"{out.product.mae:6.1f} ({out.product.refused}) literal {out.literal.mae:6.1f} "
                f"({out.literal.refused}) predict {out.predict_seconds:.0f} s"
            )
        if done % 20 == 0:
            _CACHE.save()

    payload = [t for _, t in tasks]
    if jobs > 1 and len(payload) > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for res in pool.imap_unordered(_task, payload):
                take(res)
    else:
        for p in payload:
            take(_task(p))
    _CACHE.save()
    by_unit = {(r.dataset, r.scenario, r.index): r for r in rows}
    for u, orig in copies:
        got = by_unit.get((orig.dataset, orig.scenario, orig.test))
        if got is not None:
            rows.append(replace(got, scenario=u.scenario))
    rows.sort(key=lambda r: (names.index(r.dataset), scenarios.index(r.scenario), r.session))
    if failures:
        log(f"{len(failures)} task(s) failed")
    return rows, time.perf_counter() - t0


def rows_from_json(items: Iterable[dict[str, object]]) -> list[Row]:
    """Rows stored by :func:`main` (``results.json``), rebuilt."""
    out = []
    for d in items:
        d = dict(d)
        for k in ("product", "literal", "online", "oracle", "oracle_best"):
            v = d.get(k)
            d[k] = Run(**v) if isinstance(v, dict) else None
        if isinstance(d.get("split"), list):
            d["split"] = tuple(d["split"])  # type: ignore[arg-type]
        out.append(Row(**d))  # type: ignore[arg-type]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from bench.predict import report

    ap = argparse.ArgumentParser(prog="python -m bench.predict", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small window per dataset/scenario")
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="N windows per dataset and scenario, shortest log to longest (default: all)",
    )
    ap.add_argument(
        "--high-overlap",
        type=int,
        default=0,
        help=f"N more windows per dataset and scenario of literal overlap >= {HIGH_OVERLAP}",
    )
    ap.add_argument("--dataset", default=",".join(D.DATASETS), help="comma-separated datasets")
    ap.add_argument("--scenario", default=",".join(SCENARIOS), help="comma-separated scenarios")
    ap.add_argument("--seed", type=int, default=1, help="noise seed (default 1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument(
        "--max-train", type=int, default=0, help="learn from the latest N sessions only (0: all)"
    )
    ap.add_argument("--no-cache", action="store_true", help="recompute every cached result")
    ap.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    ap.add_argument(
        "--render",
        action="store_true",
        help="no run: the tables from the last run's bench/out/predict/results.json "
        "(quick.json with --quick)",
    )
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.dataset.split(",") if n.strip()]
    scenarios = [s.strip() for s in args.scenario.split(",") if s.strip()]
    for n in names:
        if n not in D.DATASETS:
            ap.error(f"unknown dataset {n!r} (of: {', '.join(D.DATASETS)})")
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s!r} (of: {', '.join(SCENARIOS)})")
    flags = [
        a
        for a in (sys.argv[1:] if argv is None else list(argv))
        if a not in ("--write-docs", "--render")
    ]
    command = " ".join(["python -m bench.predict", *flags])
    stem = "quick" if args.quick else f"sample{args.sample}" if args.sample else "results"
    if args.high_overlap:
        stem += f"-high{args.high_overlap}"
    path = OUT / f"{stem}.json"
    if args.render:
        stored = json.loads(path.read_text())
        rows = rows_from_json(stored["rows"])
        command, seconds = stored["command"], float(stored["seconds"])
        jobs, date = int(stored.get("jobs", args.jobs)), str(stored.get("date", ""))
    else:
        jobs, date = max(1, args.jobs), dt.date.today().isoformat()
        rows, seconds = run(
            names,
            scenarios,
            seed=args.seed,
            quick=args.quick,
            max_train=args.max_train,
            sample=args.sample,
            high_overlap=args.high_overlap,
            jobs=jobs,
            cache=not args.no_cache,
            log=lambda m: print(m, flush=True),
        )
        OUT.mkdir(parents=True, exist_ok=True)
        payload = {
            "command": command,
            "seconds": seconds,
            "jobs": jobs,
            "date": date,
            "rows": [asdict(r) for r in rows],
        }
        path.write_text(json.dumps(payload))
    text = report.section(rows, command=command, seconds=seconds, jobs=jobs, date=date)
    print(text)
    if args.write_docs:
        report.write_docs(text)
        print(f"wrote {report.DOCS.relative_to(ROOT)}")
    return 0
