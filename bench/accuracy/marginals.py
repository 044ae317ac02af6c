"""Multi-marginal accuracy on UCI Adult: LAPRAS beside online noise, offline MM and synthetic data.

    python -m bench.accuracy marginals                # 3 seeds, MST on the first (a few minutes)
    python -m bench.accuracy marginals --quick        # 1 seed, no MST unless --synth mst
    python -m bench.accuracy marginals --synth mst,aim --limit 600   # AIM too (slow)
    python -m bench.accuracy marginals --no-peers     # without the synthetic-data peer
    python -m bench.accuracy marginals --write-docs   # also replace its block of docs/benchmarks.md

Data: ``sql_fixtures/adult`` (32,561 rows), every row mapped to its cells exactly as
``rewriter.pin_sql`` maps it (``rewriter.histogram.cell_expr``: one cell per declared value or
bin), into one :class:`dp.pin.Pin` over the whole table's domain (``rewriter.pin_domain``), the
data of a whole-table epoch.

Workload, per seed (``numpy.random.default_rng(SEED + seed)``), all of it SQL sent through
``rewriter.classify`` (each statement's batch is over the marginal of the columns it uses, as
the proxy answers it):

- **P** (the predicted set, 40 statements): ``SELECT a, b, count(*) FROM adult GROUP BY a, b``
  over :data:`P_ATTRS` (10 attributes): every 1-way marginal, 20 random 2-way marginals (at most
  :data:`MAX_2WAY` cells) and 10 random 3-way marginals (at most :data:`MAX_3WAY` cells).
- **The stream**: P's 40 statements asked again, plus 25 unpredicted range counts (age,
  hours_per_week, capital_gain and education_num ranges, some with an equality filter, some
  grouped by income or sex) and 15 unpredicted group-bys over attribute sets that are not P's
  (pairs of P's attributes P does not have, and sets with native_country, hours_per_week,
  capital_loss or education_num), some with a WHERE filter; all 80 in a random order. Every
  statement of the stream is distinct (distinct batches).

Methods, all at (epsilon, delta) = (1, 1e-6) in total over the whole stream:

1. **LAPRAS**: ``dp.engine`` in its default configuration (default mode, matrix-heavy split,
   static pacing, GDP accountant, reuse of stored releases), S = the stream's length, P passed
   to ``engine.start`` (its Matrix Mechanism release, ``dp.marginals.plan_release``), then the
   stream answered in order with ``engine.answer``; refusals counted (and left out of the MAE).
2. **Online independent noise**: every statement of the stream answered once, on its own, with
   Gaussian noise; the budget split evenly over the K = S distinct statements under Gaussian DP
   (``mu = gdp_mu(1, 1e-6)``, statement ``i`` is ``mu / sqrt(K)``-GDP, ``sigma_i = Delta2(W_i)
   sqrt(K) / mu``; K mechanisms compose to ``mu``-GDP, the accounting of LAPRAS's own ``gdp``
   accountant). ``dp.baselines.online_independent_noise`` is the paper's version (basic
   composition of the AGM at ``epsilon / S``); over 80 statements it is strictly noisier, so the
   stronger GDP baseline is used.
3. **Offline MM**: the Matrix Mechanism knowing the whole stream up front:
   ``dp.marginals.plan_release`` over all 80 batches (blocks = their maximal marginals, a
   certified strategy per block, the error-minimising split between blocks), one Gaussian
   release at the whole budget (``sigma = Delta2(release) / mu``, the release's recomputed joint
   sensitivity), every statement answered from the block that covers it with the lowest
   variance.
4. **MST / AIM synthetic data** (``smartnoise-synth`` 1.0.8, its own venv under
   ``bench/out/peers/smartnoise-synth``, worker ``peer_synth.py``): ``Synthesizer.create("mst" |
   "aim", epsilon=1.0, delta=1e-6)`` fitted on the Adult rows over the stream's attributes, each
   a categorical column with the declaration's cells (the domain is public: the transformer is
   fitted on a frame of every declared cell, not on the data); 32,561 synthetic rows sampled;
   every statement answered exactly on them (``plan.batch.answer`` of the synthetic marginal).
   MST and AIM convert (epsilon, delta) to rho-zCDP themselves (``cdp_rho``).

Reported: the mean absolute error per answered value (one value per output row of a statement:
a group's count, a range's count), per statement kind (P, range, group-by) and over the whole
stream, mean over seeds (and its spread); the ratio LAPRAS / each other method; LAPRAS's
decisions (from the release, from stored releases, fresh) and refusals.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import rewriter
from bench.accuracy import peers
from dp import engine
from dp.calibration import agm_sigma, gaussian_sigma_for_mu, gdp_mu
from dp.domain import Domain, FloatArray, QueryBatch
from dp.errors import BudgetExhaustedError
from dp.marginals import SOLVER_SECONDS, BlockRelease, plan_release, release_sensitivity
from dp.noise import SeededSampler
from dp.pin import Pin
from dp.release import Release
from rewriter.schema import AttributeDecl, Kind
from sql_fixtures import adult

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = ROOT / "sql_fixtures" / "adult" / "lapras.toml"
DOCS = ROOT / "docs" / "benchmarks.md"
OUT = ROOT / "bench" / "out" / "accuracy_marginals.json"
SECTION_OUT = ROOT / "bench" / "out" / "accuracy_marginals.md"
TABLE = "adult"
EPSILON, DELTA = 1.0, 1e-6
SEED = 20261214
BEGIN, END = "<!-- marginals:begin -->", "<!-- marginals:end -->"
NEXT_HEADING = "## Strategy optimisation (`bench/strategy`)"

#: P's attributes (the 1-, 2- and 3-way marginals are over these).
P_ATTRS = (
    "age",
    "workclass",
    "education",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native_country",
    "income",
)
#: Attributes only the unpredicted group-bys use.
OTHER_ATTRS = ("hours_per_week", "education_num")
N_2WAY, N_3WAY, N_RANGE, N_GROUP = 20, 10, 25, 15
MAX_2WAY, MAX_3WAY = 500, 300
KINDS = ("P", "range", "group-by")
#: ``plan_release``'s solver budgets tried in turn by the offline MM (its eigensolver can fail
#: on some workloads; another budget takes another path).
SOLVER_RETRIES = (SOLVER_SECONDS, 3.0, 6.0)

# ------------------------------------------------------------------------------------------
# data


def _cell_of(attr: AttributeDecl) -> Any:
    """The raw CSV text -> cell index function of ``attr`` (``rewriter.histogram.cell_expr``'s
    mapping; -1 outside the domain)."""
    if attr.kind is Kind.CATEGORICAL:
        index = {v: i for i, v in enumerate(attr.values)}
        return lambda s: index.get(s, -1)
    if attr.kind is Kind.INTEGER:
        lows = [int(lo) for lo, _ in attr.bins]
        highs = [int(hi) for _, hi in attr.bins]

        def integer(s: str) -> int:
            v = int(s)
            i = bisect_right(lows, v) - 1
            return i if i >= 0 and v <= highs[i] else -1

        return integer
    raise ValueError(f"{attr.name}: kind {attr.kind} is not used by the Adult declaration")


def adult_cells(schema: rewriter.Schema) -> tuple[Domain, np.ndarray]:
    """The whole table's domain and the ``rows x attributes`` matrix of cell indices."""
    t = schema.tables[TABLE]
    domain = rewriter.pin_domain(schema, TABLE)
    columns = [c for c, _ in t.columns]
    rows = list(csv.reader(io.StringIO(adult.csv_text())))
    out = np.empty((len(rows), len(domain.attributes)), dtype=np.int64)
    for j, name in enumerate(domain.names):
        k = columns.index(name)
        f = _cell_of(t.attributes[name])
        out[:, j] = [f(r[k]) for r in rows]
    return domain, out


def pin_of(domain: Domain, cells: np.ndarray) -> Pin:
    uniq, counts = np.unique(cells, axis=0, return_counts=True)
    return Pin.of(domain, uniq, counts.astype(np.float64))


# ------------------------------------------------------------------------------------------
# the workload


@dataclass(frozen=True, slots=True)
class Stmt:
    kind: str  # "P", "range" or "group-by"
    sql: str
    plan: Any  # rewriter Plan

    @property
    def batch(self) -> QueryBatch:
        b: QueryBatch = self.plan.batch
        return b


def classify(sql: str, schema: rewriter.Schema, kind: str) -> Stmt:
    [c] = rewriter.classify(sql, schema)
    if not isinstance(c, rewriter.DPStatement) or c.plan is None:
        msg = c.error.message if isinstance(c, rewriter.Refused) else type(c).__name__
        raise ValueError(f"the rewriter does not answer {sql!r}: {msg}")
    return Stmt(kind, sql, c.plan)


def _group_sql(cols: Sequence[str], where: str = "") -> str:
    c = ", ".join(cols)
    w = f" WHERE {where}" if where else ""
    return f"SELECT {c}, count(*) FROM adult{w} GROUP BY {c}"


def _size(domain: Domain, cols: Sequence[str]) -> int:
    return math.prod(domain.shape[domain.axis(c)] for c in cols)


def _quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class Workload:
    predicted: list[Stmt]
    stream: list[Stmt]


def workload(schema: rewriter.Schema, domain: Domain, seed: int) -> Workload:
    """P and the stream for one seed (see the module doc)."""
    rng = np.random.default_rng(SEED + seed)
    attrs = schema.tables[TABLE].attributes

    def pick(cands: Sequence[tuple[str, ...]], n: int) -> list[tuple[str, ...]]:
        idx = rng.choice(len(cands), size=min(n, len(cands)), replace=False)
        return [cands[int(i)] for i in sorted(idx)]

    pairs = [c for c in itertools.combinations(P_ATTRS, 2) if _size(domain, c) <= MAX_2WAY]
    triples = [c for c in itertools.combinations(P_ATTRS, 3) if _size(domain, c) <= MAX_3WAY]
    ones: list[tuple[str, ...]] = [(a,) for a in P_ATTRS]
    p_sets = ones + pick(pairs, N_2WAY) + pick(triples, N_3WAY)
    predicted = [classify(_group_sql(c), schema, "P") for c in p_sets]

    def value(name: str) -> str:
        vals = attrs[name].values
        return _quote(vals[int(rng.integers(len(vals)))])

    def interval(lo: int, hi: int, min_width: int = 1) -> tuple[int, int]:
        a = int(rng.integers(lo, hi - min_width + 1))
        b = int(rng.integers(a + min_width - 1, hi + 1))
        return a, b

    ranges: list[str] = []
    templates = [
        lambda: "SELECT count(*) FROM adult WHERE age BETWEEN {} AND {}".format(
            *interval(17, 90, 3)
        ),
        lambda: "SELECT count(*) FROM adult WHERE age BETWEEN {} AND {} AND sex = {}".format(
            *interval(17, 90, 3), value("sex")
        ),
        lambda: "SELECT count(*) FROM adult WHERE hours_per_week BETWEEN {} AND {}".format(
            *interval(1, 99, 3)
        ),
        lambda: (
            "SELECT count(*) FROM adult WHERE hours_per_week BETWEEN {} AND {} "
            "AND income = {}".format(*interval(1, 99, 3), value("income"))
        ),
        lambda: (
            "SELECT count(*) FROM adult WHERE age BETWEEN {} AND {} "
            "AND hours_per_week >= {}".format(*interval(17, 90, 3), int(rng.integers(20, 61)))
        ),
        lambda: (
            "SELECT income, count(*) FROM adult WHERE age BETWEEN {} AND {} GROUP BY income".format(
                *interval(17, 90, 3)
            )
        ),
        lambda: (
            "SELECT sex, count(*) FROM adult WHERE hours_per_week BETWEEN {} AND {} "
            "GROUP BY sex".format(*interval(1, 99, 3))
        ),
        lambda: (
            f"SELECT count(*) FROM adult WHERE capital_gain >= {int(rng.choice([1, 1000, 2000, 5000, 10000]))} AND age <= {int(rng.integers(30, 70))}"
        ),
        lambda: "SELECT count(*) FROM adult WHERE education_num BETWEEN {} AND {}".format(
            *interval(1, 16, 2)
        ),
    ]
    seen = {s.batch.key for s in predicted}
    while len(ranges) < N_RANGE:
        sql = templates[int(rng.integers(len(templates)))]()
        st = classify(sql, schema, "range")
        if st.batch.key not in seen:
            seen.add(st.batch.key)
            ranges.append(sql)
    p_set = {frozenset(c) for c in p_sets}
    other_pairs = [c for c in itertools.combinations(P_ATTRS, 2) if frozenset(c) not in p_set] + [
        (a, b) for a in OTHER_ATTRS for b in P_ATTRS if a != b
    ]
    other_pairs = [c for c in other_pairs if _size(domain, c) <= MAX_2WAY]
    groups: list[str] = []
    filters = [("sex", "race"), ("income", "sex"), ("race", "income")]
    while len(groups) < N_GROUP:
        cols = other_pairs[int(rng.integers(len(other_pairs)))]
        where = ""
        if rng.random() < 0.4:
            name = next((f for f in filters[int(rng.integers(len(filters)))] if f not in cols), "")
            if name:
                where = f"{name} = {value(name)}"
        st = classify(_group_sql(cols, where), schema, "group-by")
        if st.batch.key not in seen:
            seen.add(st.batch.key)
            groups.append(st.sql)
    stream = (
        list(predicted)
        + [classify(s, schema, "range") for s in ranges]
        + [classify(s, schema, "group-by") for s in groups]
    )
    order = rng.permutation(len(stream))
    return Workload(predicted, [stream[int(i)] for i in order])


# ------------------------------------------------------------------------------------------
# the methods


@dataclass(slots=True)
class Result:
    """One method on one seed: absolute errors per kind; refusals; seconds; notes."""

    errors: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    refused: int = 0
    seconds: float = 0.0
    decisions: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    spent: float = float("nan")  # LAPRAS: the share of the epoch's budget spent
    seed: int = -1
    charges: list[float] = field(default_factory=list)  # LAPRAS: fresh charges / (total / S)
    stored: dict[str, float] | None = None

    def add(self, st: Stmt, answers: FloatArray, truth: FloatArray) -> None:
        self.errors[st.kind].extend(np.abs(np.asarray(answers) - truth).tolist())

    def mae(self, kind: str | None = None) -> float:
        if self.stored is not None:  # loaded from the JSON of a run
            return float(self.stored["all" if kind is None else kind])
        vals = [v for k in KINDS for v in self.errors[k]] if kind is None else self.errors[kind]
        return float(np.mean(vals)) if vals else float("nan")


def truth_of(st: Stmt, pin: Pin) -> FloatArray:
    return st.batch.answer(pin.marginal(st.batch.domain))


def run_lapras(wl: Workload, domain: Domain, pin: Pin, seed: int) -> Result:
    t0 = time.perf_counter()
    res = Result()
    cfg = engine.EngineConfig(epsilon=EPSILON, delta=DELTA, stream_length=len(wl.stream))
    state, _ = engine.start(cfg, domain, [s.batch for s in wl.predicted], pin, SeededSampler(seed))
    sampler = SeededSampler(seed + 1)
    for st in wl.stream:
        try:
            state, decision, result = engine.answer(state, st.batch, pin, sampler)
        except BudgetExhaustedError:
            res.refused += 1
            res.decisions["refused"] = res.decisions.get("refused", 0) + 1
            continue
        if decision.charge is not None:
            share = engine.status(state).total / len(wl.stream)
            res.charges.append(decision.charge.amount / share)
        kind = f"{st.kind}:{decision.kind.value}"
        res.decisions[kind] = res.decisions.get(kind, 0) + 1
        res.add(st, np.asarray(result.answers), truth_of(st, pin))
    bs = engine.status(state)
    res.spent = bs.spent / bs.total
    res.seconds = time.perf_counter() - t0
    return res


def run_online(wl: Workload, pin: Pin, seed: int) -> Result:
    t0 = time.perf_counter()
    res = Result()
    k = len({s.batch.key for s in wl.stream})
    mu_each = gdp_mu(EPSILON, DELTA) / math.sqrt(k)
    sampler = SeededSampler(seed + 2)
    for st in wl.stream:
        sigma = gaussian_sigma_for_mu(mu_each, st.batch.sensitivity_l2)
        truth = truth_of(st, pin)
        res.add(st, truth + sampler.gaussian(sigma, truth.shape[0]), truth)
    res.seconds = time.perf_counter() - t0
    return res


def run_offline_mm(wl: Workload, pin: Pin, seed: int) -> Result:
    t0 = time.perf_counter()
    res = Result()
    batches = [s.batch for s in wl.stream]
    plans = None
    for seconds in SOLVER_RETRIES:
        try:
            plans = plan_release(batches, laplace=False, solver_seconds=seconds)
            break
        except np.linalg.LinAlgError as e:  # LAPACK dsyevr's "Internal Error" in the solver
            res.notes.append(f"plan_release(solver_seconds={seconds:g}) failed: {e}")
    if plans is None:
        raise np.linalg.LinAlgError("; ".join(res.notes))
    l2, _ = release_sensitivity([(p.reduction, p.strategy) for p in plans])
    sigma = gaussian_sigma_for_mu(gdp_mu(EPSILON, DELTA), l2)
    sampler = SeededSampler(seed + 3)
    blocks = []
    for p in plans:
        x_r = p.reduction.reduce_data(pin.marginal(p.reduction.domain))
        a = p.strategy
        y = a @ x_r + sampler.gaussian(sigma, a.shape[0])
        blocks.append(
            BlockRelease(
                p.reduction, Release(matrix=a, y=y, noise_variance=np.full(a.shape[0], sigma**2))
            )
        )
    for st in wl.stream:
        best: tuple[FloatArray, float] | None = None
        for b in blocks:
            if b.domain.covers(st.batch.domain):
                ans, var, ok = b.solve(st.batch)
                if np.all(ok) and (best is None or float(np.sum(var)) < best[1]):
                    best = (ans, float(np.sum(var)))
        if best is None:
            res.refused += 1
            continue
        res.add(st, best[0], truth_of(st, pin))
    res.seconds = time.perf_counter() - t0
    return res


# ------------------------------------------------------------------------------------------
# the synthetic-data peer

SYNTH_STEPS = (
    ("--no-deps", "smartnoise-synth==1.0.8"),
    (
        "mbi>=1.1,<2",
        "disjoint-set>=0.9,<0.10",
        "smartnoise-sql==1.0.10",
        "Faker>=17",
        "networkx",
        "pandas",
    ),
)
SYNTH = peers.Peer(
    "smartnoise-synth",
    "SmartNoise Synth",
    tuple(r for step in SYNTH_STEPS for r in step),
    Path(__file__).resolve().with_name("peer_synth.py"),
)


def ensure_synth(*, install: bool = True) -> Path:
    """The Python of the synth peer's venv, installing it if needed (``peers.PeerError`` if not).

    Like ``peers.ensure``, in two pip steps: smartnoise-synth without its dependencies (they
    include opacus and PyTorch, for the GAN synthesizers only), then what MST and AIM import.
    """
    folder = peers.PEERS / SYNTH.name
    python = folder / "bin" / "python"
    marker = folder / "installed.txt"
    wanted = "\n".join(SYNTH.requirements)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    if not install:
        raise peers.PeerError("not installed (run without --no-install to install it)")
    peers.PEERS.mkdir(parents=True, exist_ok=True)
    log = peers.PEERS / f"{SYNTH.name}-install.log"
    print(f"installing {SYNTH.label} into {folder.relative_to(ROOT)} ...", file=sys.stderr)
    t0 = time.perf_counter()
    import subprocess

    with log.open("w") as f:
        steps = [[sys.executable, "-m", "venv", "--clear", str(folder)]] + [
            [str(python), "-m", "pip", "install", "--quiet", *step] for step in SYNTH_STEPS
        ]
        for cmd in steps:
            if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False).returncode:
                raise peers.PeerError(
                    f"installation failed ({' '.join(cmd[:5])}...): {peers._tail(log)}"
                )
    marker.write_text(wanted)
    print(f"  done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return python


class SynthPeer:
    """The worker, with a time limit per fit (the worker is killed when it is exceeded)."""

    def __init__(self, columns: Sequence[tuple[str, int]], *, install: bool) -> None:
        python = ensure_synth(install=install)
        try:
            self.worker = peers.Worker(SYNTH, python, {"columns": [list(c) for c in columns]})
        except (OSError, ValueError) as e:
            raise peers.PeerError(f"the worker did not start: {e}") from None
        self.version = str(self.worker.hello.get("version", "?"))
        self.dead: str | None = None

    def fit(
        self, synth: str, cells: np.ndarray, seed: int, limit: float, options: dict[str, Any]
    ) -> tuple[np.ndarray, float]:
        if self.dead:
            raise peers.PeerError(self.dead)
        with tempfile.TemporaryDirectory(dir=peers.PEERS) as tmp:
            data, out = Path(tmp) / "data.npy", Path(tmp) / "synth.npy"
            np.save(data, cells)
            req = {
                "synth": synth,
                "epsilon": EPSILON,
                "delta": DELTA,
                "seed": seed,
                "data": str(data),
                "out": str(out),
                "options": options,
            }
            timer = threading.Timer(limit, self.worker.proc.kill)
            timer.start()
            try:
                ans = self.worker.ask(req)
            except peers.PeerError as e:
                self.dead = (
                    f"{synth} did not finish within {limit:.0f} s (worker stopped)"
                    if not timer.is_alive()
                    else str(e)
                )
                raise peers.PeerError(self.dead) from None
            finally:
                timer.cancel()
            if "error" in ans:
                raise peers.PeerError(str(ans["error"]))
            return np.load(out), float(ans["seconds"])

    def close(self) -> None:
        if self.worker.proc.poll() is None:
            self.worker.close()
        elif not self.worker._log_file.closed:
            self.worker._log_file.close()


def run_synth(
    wl: Workload, pin: Pin, names: Sequence[str], synth_cells: np.ndarray, seconds: float
) -> Result:
    """Every statement answered exactly on the synthetic rows (columns ``names``)."""
    res = Result(seconds=seconds)
    sub = Domain(tuple(a for a in pin.domain.attributes if a.name in names))
    cols = [list(names).index(n) for n in sub.names]
    spin = pin_of(sub, synth_cells[:, cols])
    for st in wl.stream:
        ans = st.batch.answer(spin.marginal(st.batch.domain))
        res.add(st, ans, truth_of(st, pin))
    return res


def stream_attributes(wl: Workload, domain: Domain) -> list[str]:
    """The attributes the stream uses, in the domain's order (the synthesizers' columns)."""
    used = {n for s in wl.stream for n in s.batch.domain.names}
    return [n for n in domain.names if n in used]


# ------------------------------------------------------------------------------------------
# the run

METHODS = (
    "LAPRAS (default)",
    "Online independent noise (GDP)",
    "Offline MM (whole stream)",
    "MST synthetic data",
    "AIM synthetic data",
)
SEES = {
    METHODS[0]: "P, then online",
    METHODS[1]: "online",
    METHODS[2]: "whole stream",
    METHODS[3]: "data only",
    METHODS[4]: "data only",
}
#: AIM's options (smartnoise-synth's defaults otherwise): far fewer rounds than its 16 per
#: column and a smaller model, so that one fit can finish in minutes on two cores (with 40
#: rounds and a 40 MB model one fit did not finish in 14 minutes here).
AIM_OPTIONS: dict[str, Any] = {"rounds": 12, "max_model_size": 10}


@dataclass(slots=True)
class Run:
    seeds: list[int]
    results: dict[str, list[Result]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    columns: list[str] = field(default_factory=list)
    revision: str = ""

    def add(self, method: str, res: Result) -> None:
        self.results.setdefault(method, []).append(res)


def _mean(vals: list[float]) -> float:
    ok = [v for v in vals if not math.isnan(v)]
    return float(np.mean(ok)) if ok else float("nan")


def execute(
    *,
    seeds: Sequence[int],
    synths: Sequence[str],
    install: bool,
    limit: float,
    aim_options: dict[str, Any],
    synth_seeds: int,
) -> Run:
    t_start = time.perf_counter()
    schema = rewriter.load_schema(str(DECLARATION))
    domain, cells = adult_cells(schema)
    pin = pin_of(domain, cells)
    run = Run(list(seeds))
    peer: SynthPeer | None = None
    names = stream_attributes(workload(schema, domain, seeds[0]), domain)
    run.columns = names
    if synths:
        try:
            peer = SynthPeer([(n, domain.shape[domain.axis(n)]) for n in names], install=install)
            run.versions["smartnoise-synth"] = peer.version
        except peers.PeerError as e:
            for s in synths:
                run.unavailable[f"{s.upper()} synthetic data"] = str(e)
    for seed in seeds:
        wl = workload(schema, domain, seed)
        sizes = {
            "|P|": len(wl.predicted),
            "S": len(wl.stream),
            **{
                f"values {k}": sum(s.batch.num_queries for s in wl.stream if s.kind == k)
                for k in KINDS
            },
            **{f"statements {k}": sum(1 for s in wl.stream if s.kind == k) for k in KINDS},
        }
        for k, v in sizes.items():
            run.sizes[k] = run.sizes.get(k, 0.0) + v / len(seeds)
        for method in METHODS[:3]:
            try:
                if method == METHODS[0]:
                    res = run_lapras(wl, domain, pin, seed)
                elif method == METHODS[1]:
                    res = run_online(wl, pin, seed)
                else:
                    res = run_offline_mm(wl, pin, seed)
            except Exception as e:  # reported beside the numbers; the run goes on
                res = Result(error=f"{type(e).__name__}: {e}")
            res.seed = seed
            run.add(method, res)
        if peer is not None and seed in seeds[:synth_seeds]:
            if stream_attributes(wl, domain) != names:
                raise RuntimeError("the stream's attributes changed between seeds")
            sub = cells[:, [domain.axis(n) for n in names]]
            for s in synths:
                label = f"{s.upper()} synthetic data"
                if label in run.unavailable:
                    continue
                opts = aim_options if s == "aim" else {}
                try:
                    syn, sec = peer.fit(s, sub, seed, limit, opts)
                except peers.PeerError as e:
                    run.unavailable[label] = str(e)
                    print(f"{label}: unavailable ({e})", file=sys.stderr)
                    if peer.dead:  # the worker was stopped: start a new one for the others
                        peer.close()
                        try:
                            peer = SynthPeer(
                                [(n, domain.shape[domain.axis(n)]) for n in names],
                                install=install,
                            )
                        except peers.PeerError as e2:
                            for s2 in synths:
                                run.unavailable.setdefault(f"{s2.upper()} synthetic data", str(e2))
                            peer = None
                            break
                    continue
                res = run_synth(wl, pin, names, syn, sec)
                res.seed = seed
                run.add(label, res)
        done = {m: f"{r[-1].mae():.1f}" for m, r in run.results.items()}
        print(f"seed {seed}: {done} ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr)
    if peer is not None:
        peer.close()
    run.seconds = time.perf_counter() - t_start
    return run


def _fmt(v: float) -> str:
    return "n/a" if math.isnan(v) else (f"{v:.1f}" if v < 100 else f"{v:.0f}")


def _sec(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.1f} s"


def mae_cell(results: list[Result], kind: str | None) -> str:
    vals = [r.mae(kind) for r in results if r.error is None]
    if not vals:
        return "n/a"
    m = _mean(vals)
    if len(vals) == 1:
        return _fmt(m)
    return f"{_fmt(m)} ({_fmt(min(vals))}-{_fmt(max(vals))})"


def results_table(run: Run) -> str:
    head = (
        "| method | sees | seeds | P | range | group-by | whole stream | refused | time per seed |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in METHODS:
        rs = [r for r in run.results.get(m, []) if r.error is None]
        if not rs:
            why = run.unavailable.get(m) or "; ".join(r.error or "" for r in run.results.get(m, []))
            lines.append(f"| {m} | {SEES[m]} | 0 | unavailable: {why or 'not run'} ||||||")
            continue
        cells = [mae_cell(rs, k) for k in (*KINDS, None)]
        refused = _mean([float(r.refused) for r in rs])
        sec = _mean([r.seconds for r in rs])
        lines.append(
            f"| {m} | {SEES[m]} | {len(rs)} | "
            + " | ".join(cells)
            + f" | {refused:g} | {_sec(sec)} |"
        )
    return "\n".join(lines)


def ratio_table(run: Run) -> str:
    lap = [r for r in run.results.get(METHODS[0], []) if r.error is None]
    lines = [
        "| LAPRAS / method | seeds | P | range | group-by | whole stream |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for m in METHODS[1:]:
        rs = [r for r in run.results.get(m, []) if r.error is None]
        seeds = {r.seed for r in rs}
        mine = [r for r in lap if r.seed in seeds]  # the same seeds (the same workloads)
        if not rs or not mine:
            continue
        cells = []
        for k in (*KINDS, None):
            x, y = _mean([r.mae(k) for r in mine]), _mean([r.mae(k) for r in rs])
            cells.append("n/a" if math.isnan(x) or math.isnan(y) or y == 0 else f"{x / y:.2f}")
        lines.append(f"| {m} | {len(mine)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def decisions_text(run: Run) -> str:
    lap = [r for r in run.results.get(METHODS[0], []) if r.error is None]
    if not lap:
        return ""
    keys = sorted({k for r in lap for k in r.decisions})
    parts = [f"{k} {_mean([float(r.decisions.get(k, 0)) for r in lap]):.1f}" for k in keys]
    ch = [c for r in lap for c in r.charges]
    charges = (
        f" Each fresh release's charge, as a multiple of the online baseline's equal share "
        f"(mu^2 / S): min {min(ch):.2f}, median {float(np.median(ch)):.2f}, "
        f"max {max(ch):.2f}."
        if ch
        else ""
    )
    spent = _mean([r.spent for r in lap])
    return (
        f"LAPRAS spent {spent:.0%} of the epoch's budget (mu^2) by the end of the stream. "
        "LAPRAS's decisions per stream (mean over seeds; statement kind:decision): "
        + ", ".join(parts)
        + "."
        + charges
    )


def dump(run: Run, command: str, path: Path = OUT) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "command": command,
        "revision": run.revision or _revision(),
        "columns": run.columns,
        "epsilon": EPSILON,
        "delta": DELTA,
        "seeds": run.seeds,
        "sizes": run.sizes,
        "versions": run.versions,
        "unavailable": run.unavailable,
        "seconds": run.seconds,
        "methods": {
            m: [
                {
                    "mae": {k: r.mae(k) for k in KINDS} | {"all": r.mae()},
                    "values": {k: len(r.errors[k]) for k in KINDS},
                    "refused": r.refused,
                    "seconds": r.seconds,
                    "decisions": r.decisions,
                    "error": r.error,
                    "spent": r.spent,
                    "charges": r.charges,
                    "notes": r.notes,
                    "seed": r.seed,
                }
                for r in rs
            ]
            for m, rs in run.results.items()
        },
    }
    path.write_text(json.dumps(data, indent=1))


def load(path: Path = OUT) -> tuple[Run, str | None]:
    """A run back from its JSON (to re-render the tables and the section without re-running)."""
    data = json.loads(path.read_text())
    run = Run(
        list(data["seeds"]),
        unavailable=dict(data["unavailable"]),
        versions=dict(data["versions"]),
        sizes={k: float(v) for k, v in data["sizes"].items()},
        seconds=float(data["seconds"]),
        columns=list(data.get("columns", [])),
        revision=str(data.get("revision", "")),
    )
    for m, rs in data["methods"].items():
        for i, r in enumerate(rs):
            res = Result(
                refused=int(r["refused"]),
                seconds=float(r["seconds"]),
                decisions=dict(r["decisions"]),
                error=r["error"],
                notes=list(r["notes"]),
                spent=float(r.get("spent", float("nan"))),
                seed=int(r.get("seed", run.seeds[i])),
                charges=list(r.get("charges", [])),
                stored={k: float(v) for k, v in r["mae"].items()},
            )
            run.add(m, res)
    return run, data.get("command")


def section_text(run: Run, command: str) -> str:
    sz = run.sizes
    notes = [n for rs in run.results.values() for r in rs for n in r.notes]
    unavailable = "".join(f"- {m}: unavailable ({why}).\n" for m, why in run.unavailable.items())
    versions = ", ".join(f"{k} {v}" for k, v in run.versions.items()) or "no peer"
    s_len = round(sz.get("S", 80))
    return f"""### Multi-marginal workload: LAPRAS beside offline MM and MST / AIM synthetic data

`bench/accuracy/marginals.py`: a whole-table epoch over UCI Adult (all 14 declared attributes,
one `dp.pin.Pin` of the 32,561 rows, cells as `rewriter.pin_sql` maps them), at (epsilon, delta)
= (1, 1e-6) in total for every method. Everything is SQL through `rewriter.classify`, so each
statement is the batch the proxy would answer, over the marginal of the columns it uses.

Workload, per seed (seeded, `numpy.random.default_rng`): **P** = {sz.get("|P|", 0):g} COUNT
GROUP BY statements over 10 attributes (age, workclass, education, marital_status, occupation,
relationship, race, sex, native_country, income): all ten 1-way marginals, 20 random 2-way (at
most {MAX_2WAY} cells) and 10 random 3-way (at most {MAX_3WAY} cells). **The stream** (S =
{sz.get("S", 0):g} distinct statements, shuffled): P's statements asked again, plus
{sz.get("statements range", 0):g} unpredicted range counts (age, hours_per_week, education_num
and capital_gain ranges, some with an equality filter, some grouped by income or sex) and
{sz.get("statements group-by", 0):g} unpredicted group-bys over attribute sets P does not have
(pairs of P's attributes outside P, and pairs with hours_per_week or education_num, some with a
WHERE filter). Per stream that is {sz.get("values P", 0):.0f} answered values (output rows) for
P's statements, {sz.get("values range", 0):.0f} for the ranges and
{sz.get("values group-by", 0):.0f} for the group-bys.

Methods, each calibrated to the whole (1, 1e-6):

- **LAPRAS (default)**: `dp.engine` in the product's default configuration (default mode,
  matrix-heavy split, static pacing, `gdp` accountant, reuse of stored releases), S = the
  stream's length, P given to `engine.start` (one Matrix Mechanism release over P's maximal
  marginals, `dp.marginals.plan_release`, at half the budget in mu^2), then the stream answered
  in order by `engine.answer` (P's statements from the release; the others fresh, paced, or
  from stored releases when that is no noisier). Refusals are counted, and left out of the MAE.
- **Online independent noise (GDP)**: each of the K = S distinct statements answered once with
  Gaussian noise, `sigma_i = Delta2(W_i) sqrt(K) / mu`, `mu = gdp_mu(1, 1e-6)`: K mechanisms of
  `mu/sqrt(K)`-GDP compose to `mu`-GDP, the accounting of LAPRAS's own `gdp` accountant.
  (`dp.baselines.online_independent_noise`, the paper's basic composition of the AGM at
  epsilon / S, is noisier at this S: sigma {agm_sigma(EPSILON / s_len, DELTA / (s_len + 1)):.0f}
  per unit of sensitivity against {gaussian_sigma_for_mu(gdp_mu(EPSILON, DELTA) / math.sqrt(s_len)):.1f}, so the
  stronger baseline is used.)
- **Offline MM (whole stream)**: `dp.marginals.plan_release` over all S batches as if they were
  P (blocks = their maximal marginals, a certified strategy per block, the error-minimising
  split between blocks), one Gaussian release at the whole `mu` with the release's recomputed
  joint sensitivity; every statement answered from the covering block of lowest variance. It
  knows every query before any noise is drawn, which LAPRAS does not.
- **MST / AIM synthetic data** (`smartnoise-synth`, its own venv under
  `bench/out/peers/smartnoise-synth`, worker `bench/accuracy/peer_synth.py`):
  `Synthesizer.create("mst" | "aim", epsilon=1.0, delta=1e-6)` (each converts (epsilon, delta)
  to rho-zCDP itself) fitted on the {len(run.columns)} attributes the stream uses, each a
  categorical column with the declaration's cells (the transformer is fitted on a public frame
  of every declared cell, so no budget goes to the domain and nothing about it is learnt from
  the data); AIM with {", ".join(f"`{k}={v}`" for k, v in AIM_OPTIONS.items())} (its default is 16 rounds per column,
  {16 * len(run.columns)} here, too slow for this benchmark); 32,561 synthetic rows; every
  statement answered exactly on them. A fit takes minutes, so by default only the first seed's
  workload is answered by them (`--synth-seeds N` for more; the column *seeds* says how many),
  and the ratios below compare LAPRAS on the same seeds. Their noise comes from OpenDP and is
  not seeded.

Reported: mean absolute error per answered value (a group's count, a range's count) by
statement kind and over the whole stream, mean over {len(run.seeds)} seed(s) (min-max over
seeds in brackets), and the ratio of LAPRAS's MAE to each other method's (below 1: LAPRAS is
more accurate). Time per seed is wall time of the whole method on a 2-core machine (LAPRAS and
offline MM: strategy optimisation included; synthetic data: the fit and sampling).

Command: `{command}` ({run.seconds:.0f} s in all; revision {run.revision or _revision()}; {versions}).

{results_table(run)}

{ratio_table(run)}

{decisions_text(run)}
{unavailable}{"".join(f"- note: {n}" + chr(10) for n in sorted(set(notes)))}
<!-- reading:marginals -->
(Reading to be written by hand after a run; ``--write-docs`` keeps it.)
<!-- /reading -->
"""


def reflow(text: str, width: int = 100) -> str:
    """``statements.wrap`` (plain paragraphs), then every item of a bullet list re-wrapped."""
    import textwrap

    from bench.accuracy.statements import wrap

    out = []
    for para in wrap(text, width).split("\n\n"):
        lines = para.splitlines()
        if lines and lines[0].startswith("- ") and all(ln.startswith(("- ", "  ")) for ln in lines):
            items: list[list[str]] = []
            for ln in lines:
                if ln.startswith("- "):
                    items.append([ln[2:].strip()])
                else:
                    items[-1].append(ln.strip())
            para = "\n".join(
                textwrap.fill(
                    " ".join(it),
                    width,
                    initial_indent="- ",
                    subsequent_indent="  ",
                    break_on_hyphens=False,
                    break_long_words=False,
                )
                for it in items
            )
        out.append(para)
    return "\n\n".join(out)


def _revision() -> str:
    from bench.accuracy.statements import revision

    return revision()


def write_docs(section: str) -> None:
    """Replace this benchmark's block of docs/benchmarks.md (or insert it before the strategy
    section); the hand-written reading is kept. The file is re-read right before writing."""
    import re

    reading = re.compile(r"<!-- reading:(\w+) -->.*?<!-- /reading -->", re.DOTALL)
    text = DOCS.read_text()
    block = f"{BEGIN}\n{section.strip()}\n{END}"
    i, j = text.find(BEGIN), text.find(END)
    if i >= 0 and j > i:
        old = text[i : j + len(END)]
        kept = {m.group(1): m.group(0) for m in reading.finditer(old)}
        block = reading.sub(lambda m: kept.get(m.group(1), m.group(0)), block)
        text = text[:i] + block + text[j + len(END) :]
    else:
        k = text.index(NEXT_HEADING)
        text = text[:k] + block + "\n\n" + text[k:]
    DOCS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick", action="store_true", help="1 seed, no synthetic data unless --synth is given"
    )
    ap.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    ap.add_argument("--no-peers", action="store_true", help="without the synthetic-data peer")
    ap.add_argument("--no-install", action="store_true", help="never install the peer")
    ap.add_argument("--synth", default=None, help="comma-separated, of mst and aim (default: mst)")
    ap.add_argument("--limit", type=float, default=420.0, help="seconds per synthesizer fit")
    ap.add_argument(
        "--synth-seeds",
        type=int,
        default=1,
        help="fit the synthesizers on the first N seeds only (default 1: a fit takes minutes)",
    )
    ap.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    ap.add_argument(
        "--render",
        action="store_true",
        help=f"no run: the tables and the section from {OUT.relative_to(ROOT)}",
    )
    args = ap.parse_args(argv)
    seeds = list(range(1 if args.quick else args.seeds))
    flags = [a for a in (argv if argv is not None else sys.argv[2:]) if a != "--write-docs"]
    command = " ".join(["python -m bench.accuracy marginals", *flags])
    if args.render:
        run, stored_command = load()
        command = stored_command or command.replace(" --render", "")
        if not run.columns:
            schema = rewriter.load_schema(str(DECLARATION))
            domain = rewriter.pin_domain(schema, TABLE)
            run.columns = stream_attributes(workload(schema, domain, run.seeds[0]), domain)
    else:
        synths: list[str] = []
        if not args.no_peers and not (args.quick and args.synth is None):
            synths = (args.synth or "mst").split(",")
        run = execute(
            seeds=seeds,
            synths=synths,
            install=not args.no_install,
            limit=args.limit,
            aim_options=AIM_OPTIONS,
            synth_seeds=args.synth_seeds,
        )
        dump(run, command)
    print(results_table(run))
    print()
    print(ratio_table(run))
    print()
    print(decisions_text(run))
    for m, why in run.unavailable.items():
        print(f"{m}: unavailable ({why})")
    section = reflow(section_text(run, command))
    SECTION_OUT.write_text(section)
    print(
        f"section: {SECTION_OUT.relative_to(ROOT)}; data: {OUT.relative_to(ROOT)}", file=sys.stderr
    )
    if args.write_docs:
        write_docs(section)
        print(f"updated {DOCS.relative_to(ROOT)}", file=sys.stderr)
    return 0
