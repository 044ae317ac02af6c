"""The audited mechanisms, each run through the real code paths of ``dp.engine``.

A :class:`Case` builds a :class:`Prepared` mechanism: a pair of neighbouring pins ``(D, D')``,
the guarantee the engine claims for what is audited (read from its charges, converted with
``dp.calibration``), and ``trial(pin, sampler)``: one run of the mechanism on a pin, reduced to
one scalar statistic of its released measurements. No noise is drawn here: every draw is made
by the engine, through the sampler it is given.

The statistic. Every audited output is a vector of noisy measurements ``y = m(x) + Z`` with
independent noise of known (public) per-row variance ``v``: the Matrix Mechanism's blocks
(``MatrixReleased``) and the online releases (``Released.measurement``). Answers given to the
client are post-processing of these, so auditing the measurements audits the answers too. The
statistic is ``T = sum_i s_i y_i / v_i`` with ``s = m(x') - m(x)`` the mean shift between the
neighbours, taken from a noiseless run of the same engine code (:class:`ZeroSampler`): for
Gaussian noise this is the likelihood-ratio statistic, so a threshold on it is the most
powerful test (Neyman–Pearson), and ``T`` is Gaussian with mean shift
``mu_eff^2 = sum_i s_i^2 / v_i`` and standard deviation ``mu_eff``.

Neighbours are the worst case the claim covers: one added row in the cell whose shift
``mu_eff`` is the largest (row level), or one added privacy unit with the most rows its
``Contribution`` allows, placed to attain the sensitivity (unit level).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dp import engine
from dp.calibration import gdp_epsilon
from dp.domain import Domain, FloatArray, QueryBatch
from dp.noise import Sampler
from dp.pacing import Pool
from dp.pin import Pin
from dp.units import Contribution

#: The default delta of every epoch (and of the audit of its approximate-DP claims).
DELTA = 1e-5
#: The epoch's domain: three attributes, 24 cells.
DOMAIN = Domain.of(("a", 4), ("b", 2), ("c", 3))
#: The base histogram ``D`` (counts per cell, C order).
BASE = np.array(
    [5, 3, 2, 7, 1, 0, 4, 6, 2, 9, 3, 1, 8, 2, 5, 0, 3, 4, 6, 1, 2, 7, 3, 5], dtype=np.float64
)


class AuditError(RuntimeError):
    """The mechanism did not behave as the audit assumes (e.g. a data-dependent decision)."""


class ZeroSampler:
    """Draws zeros: the noiseless run of the engine's code, for the mean of each measurement."""

    def gaussian(self, scale: float, size: int) -> FloatArray:
        return np.zeros(int(size), dtype=np.float64)

    def laplace(self, scale: float, size: int) -> FloatArray:
        return np.zeros(int(size), dtype=np.float64)


class ScaledSampler:
    """Every draw of ``inner`` multiplied by ``factor``: with ``factor = 0.5`` the engine's
    noise is halved while its charges stay the same (the control: a broken mechanism)."""

    def __init__(self, inner: Sampler, factor: float) -> None:
        self.inner = inner
        self.factor = factor

    def gaussian(self, scale: float, size: int) -> FloatArray:
        return self.factor * np.asarray(self.inner.gaussian(scale, size), dtype=np.float64)

    def laplace(self, scale: float, size: int) -> FloatArray:
        return self.factor * np.asarray(self.inner.laplace(scale, size), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Claim:
    """The guarantee claimed for the audited output: ``(epsilon, delta)``-DP."""

    epsilon: float
    delta: float
    basis: str


@dataclass(frozen=True, slots=True, eq=False)
class Prepared:
    claim: Claim
    pins: tuple[Pin, Pin]
    trial: Callable[[Pin, Sampler], float]
    neighbours: str
    #: sqrt(sum s_i^2 / v_i): the statistic's mean shift in units of its standard deviation
    #: (for Gaussian noise, the mu of the neighbours actually chosen).
    mu_eff: float


@dataclass(frozen=True, slots=True)
class Case:
    """An audited mechanism. ``cost``: it runs ``trials // cost`` trials per dataset (it costs
    that many times more per trial). ``secure``: drawn with ``dp.noise.SecureSampler``.
    ``noise_factor`` != 1: every draw scaled (the control, expected to be caught)."""

    name: str
    title: str
    setting: str
    #: Builds the mechanism for an epoch delta (ignored by pure-DP cases).
    build: Callable[[float], Prepared]
    cost: int = 1
    secure: bool = False
    noise_factor: float = 1.0

    @property
    def control(self) -> bool:
        return self.noise_factor != 1.0


# ------------------------------------------------------------------------------------------
# claims


def _gaussian_claim(charges: Sequence[engine.Charged], delta: float) -> Claim:
    """GDP charges ``mu_i^2`` compose to ``mu = sqrt(sum mu_i^2)`` (one charge: itself);
    ``mu``-GDP is ``(gdp_epsilon(mu, delta), delta)``-DP."""
    total = math.fsum(c.amount for c in charges)
    mu = math.sqrt(total)
    c = charges[0]
    basis = (
        f"charge mu^2 = {total:.4g}, mu = {mu:.4g} (noise sigma = {c.scale:.4g} for "
        f"sensitivity {c.sensitivity:.4g})"
    )
    return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, basis=basis)


def _laplace_claim(charge: engine.Charged) -> Claim:
    basis = (
        f"charge epsilon = {charge.amount:.4g} (Laplace b = {charge.scale:.4g} for L1 "
        f"sensitivity {charge.sensitivity:.4g})"
    )
    return Claim(epsilon=charge.amount, delta=0.0, basis=basis)


# ------------------------------------------------------------------------------------------
# running the engine


@dataclass(frozen=True, slots=True, eq=False)
class Run:
    """One run of an epoch: its charges, its noisy measurements and their variances, and the
    kinds of its decisions (to check that they do not depend on the data)."""

    charges: tuple[engine.Charged, ...]
    y: FloatArray
    var: FloatArray
    kinds: tuple[str, ...]


def run_epoch(
    config: engine.EngineConfig,
    predicted: Sequence[QueryBatch],
    queries: Sequence[QueryBatch],
    pin: Pin,
    sampler: Sampler,
    *,
    state: engine.EngineState | None = None,
) -> Run:
    """Start an epoch (or reuse ``state``, an epoch started without a predicted set: that start
    draws no noise and reads no data) and answer ``queries`` in order with ``engine.answer``."""
    events: list[engine.Event] = []
    if state is None:
        state, started = engine.start(config, DOMAIN, list(predicted), pin, sampler)
        events.extend(started)
    kinds = []
    for q in queries:
        state, decision, result = engine.answer(state, q, pin, sampler)
        kinds.append(str(decision.kind))
        events.extend(decision.events)
        events.extend(result.events)
    ys: list[FloatArray] = []
    vs: list[FloatArray] = []
    for ev in events:
        if isinstance(ev, engine.MatrixReleased):
            for block in ev.blocks:
                ys.append(np.asarray(block.release.y, dtype=np.float64))
                vs.append(np.asarray(block.release.noise_variance, dtype=np.float64))
        elif isinstance(ev, engine.Released):
            ys.append(np.asarray(ev.measurement, dtype=np.float64))
            vs.append(np.full(len(ev.measurement), ev.noise_variance))
    charges = tuple(ev for ev in events if isinstance(ev, engine.Charged))
    y = np.concatenate(ys) if ys else np.zeros(0)
    var = np.concatenate(vs) if vs else np.zeros(0)
    return Run(charges=charges, y=y, var=var, kinds=tuple(kinds))


def _prepare(
    config: engine.EngineConfig,
    predicted: Sequence[QueryBatch],
    queries: Sequence[QueryBatch],
    shifts: Sequence[tuple[str, FloatArray]],
    claim_of: Callable[[Run], Claim],
) -> Prepared:
    """The neighbours ``(BASE, BASE + d)`` for the shift ``d`` among ``shifts`` (name, vector
    of added rows per cell) with the largest ``mu_eff``, and the trial running the epoch."""
    base = Pin.from_dense(DOMAIN, BASE)
    state: engine.EngineState | None = None
    if not any(b.num_queries for b in predicted):
        state, started = engine.start(config, DOMAIN, None, base, ZeroSampler())
        if len(started) != 1:
            raise AuditError("an epoch without a predicted set released something at its start")
    ref = run_epoch(config, predicted, queries, base, ZeroSampler(), state=state)
    if ref.y.size == 0:
        raise AuditError("the mechanism released no measurement")
    best: tuple[float, str, Pin, FloatArray] | None = None
    for name, d in shifts:
        pin = Pin.from_dense(DOMAIN, BASE + d)
        other = run_epoch(config, predicted, queries, pin, ZeroSampler(), state=state)
        if other.kinds != ref.kinds or other.charges != ref.charges:
            raise AuditError("the engine's decisions depend on the data")
        s = other.y - ref.y
        mu = math.sqrt(float(np.sum(s * s / ref.var)))
        if best is None or mu > best[0]:
            best = (mu, name, pin, s / ref.var)
    if best is None:
        raise AuditError("no neighbouring dataset given")
    mu_eff, name, neighbour, weights = best

    def trial(pin: Pin, sampler: Sampler) -> float:
        run = run_epoch(config, predicted, queries, pin, sampler, state=state)
        if run.kinds != ref.kinds or run.charges != ref.charges:
            raise AuditError("the engine's decisions depend on the data or the noise")
        return float(weights @ run.y)

    return Prepared(
        claim=claim_of(ref),
        pins=(base, neighbour),
        trial=trial,
        neighbours=name,
        mu_eff=mu_eff,
    )


def _cell(index: int, rows: float = 1.0) -> FloatArray:
    d = np.zeros(DOMAIN.size)
    d[index] = rows
    return d


def _one_row_shifts() -> list[tuple[str, FloatArray]]:
    """Every row-level neighbour by addition: one row in any one cell."""
    return [(f"one row added in cell {j}", _cell(j)) for j in range(DOMAIN.size)]


# ------------------------------------------------------------------------------------------
# the cases

#: A count over ``a = 0`` (a marginal of the domain).
COUNT = QueryBatch.from_dense(DOMAIN.marginal(["a"]), [[1.0, 0.0, 0.0, 0.0]])
#: All of the budget in the warm-up pool, one statement: its charge is a third of the budget
#: (the warm-up is T = 3 statements long).
ONLINE_SPLIT = (0.0, 1.0, 0.0, 0.0)


def _online_gaussian(delta: float) -> Prepared:
    config = engine.EngineConfig(epsilon=4.0, delta=delta, stream_length=1, split=ONLINE_SPLIT)
    return _prepare(
        config, (), (COUNT,), _one_row_shifts(), lambda r: _gaussian_claim(r.charges, delta)
    )


def _online_laplace(delta: float) -> Prepared:
    config = engine.EngineConfig(
        epsilon=3.0, delta=0.0, stream_length=1, split=ONLINE_SPLIT, accountant="pure"
    )
    return _prepare(config, (), (COUNT,), _one_row_shifts(), lambda r: _laplace_claim(r.charges[0]))


def _ranges(n: int) -> FloatArray:
    return np.array(
        [[1.0 if i <= k <= j else 0.0 for k in range(n)] for i in range(n) for j in range(i, n)]
    )


#: The predicted set: every range over ``a`` and every count of ``(b, c)``: two blocks.
PREDICTED = (
    QueryBatch.from_dense(DOMAIN.marginal(["a"]), _ranges(4)),
    QueryBatch.from_dense(DOMAIN.marginal(["b", "c"]), np.eye(6)),
)


def _matrix(delta: float) -> Prepared:
    config = engine.EngineConfig(epsilon=3.0, delta=delta, stream_length=1)

    def claim(run: Run) -> Claim:
        mm = [c for c in run.charges if c.pool is Pool.MATRIX]
        return _gaussian_claim(mm, delta)

    return _prepare(config, PREDICTED, (), _one_row_shifts(), claim)


#: Four statements over ``(a, b)``, none answerable from the release or from each other,
#: all counting cell ``(0, 0)``.
EPOCH_QUERIES = tuple(
    QueryBatch.from_dense(DOMAIN.marginal(["a", "b"]), [row])
    for row in (
        [1, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0, 0, 0],
        [1, 0, 0, 0, 1, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0, 1],
    )
)


def _epoch(delta: float) -> Prepared:
    # no reserve: the four statements spend the whole budget (T = 3 warm-up, then B_est = 4)
    config = engine.EngineConfig(
        epsilon=2.0, delta=delta, stream_length=4, split=(0.5, 0.25, 0.25, 0.0)
    )

    def claim(run: Run) -> Claim:
        spent = math.fsum(c.amount for c in run.charges)
        kinds = ", ".join(run.kinds)
        basis = (
            f"the epoch's (epsilon, delta); {len(run.charges)} charges spend mu^2 = "
            f"{spent:.4g} (statements: {kinds})"
        )
        return Claim(epsilon=config.epsilon, delta=config.delta, basis=basis)

    return _prepare(config, PREDICTED, EPOCH_QUERIES, _one_row_shifts(), claim)


UNIT_COUNT = Contribution(rows=5)
UNIT_HISTOGRAM = Contribution(rows=6, per_cell=2)
#: The histogram of every cell of the domain.
HISTOGRAM = QueryBatch.from_dense(DOMAIN, np.eye(DOMAIN.size))


def _unit_config(contribution: Contribution, delta: float) -> engine.EngineConfig:
    return engine.EngineConfig(
        epsilon=4.0,
        delta=delta,
        stream_length=1,
        split=ONLINE_SPLIT,
        contribution=contribution,
    )


def _unit_count(delta: float) -> Prepared:
    k = UNIT_COUNT.rows
    shifts = [(f"one unit of {k} rows added in cell {j}", _cell(j, k)) for j in range(DOMAIN.size)]
    return _prepare(
        _unit_config(UNIT_COUNT, delta),
        (),
        (COUNT,),
        shifts,
        lambda r: _gaussian_claim(r.charges, delta),
    )


def _unit_histogram(delta: float) -> Prepared:
    k, c = UNIT_HISTOGRAM.rows, UNIT_HISTOGRAM.per_cell
    spread = np.zeros(DOMAIN.size)
    spread[: k // c] = c
    spread[k // c] = k % c
    shifts = [
        (f"one unit of {k} rows added, {c} in each of cells 0..{k // c - 1}", spread),
        (f"one unit of {c} rows added in cell 0", _cell(0, c)),
    ]
    return _prepare(
        _unit_config(UNIT_HISTOGRAM, delta),
        (),
        (HISTOGRAM,),
        shifts,
        lambda r: _gaussian_claim(r.charges, delta),
    )


_ONLINE_SETTING = (
    "default mode (gdp accountant), epsilon = 4, S = 1, split (0, 1, 0, 0), no predicted set; "
    "one count"
)

CASES: tuple[Case, ...] = (
    Case(
        "gaussian",
        "online Gaussian answer",
        _ONLINE_SETTING,
        _online_gaussian,
    ),
    Case(
        "gaussian-secure",
        "online Gaussian answer, SecureSampler",
        _ONLINE_SETTING + "; noise from dp.noise.SecureSampler (OpenDP)",
        _online_gaussian,
        cost=4,
        secure=True,
    ),
    Case(
        "laplace",
        "online Laplace answer",
        "pure accountant, epsilon = 3, delta = 0, S = 1, split (0, 1, 0, 0); one count",
        _online_laplace,
    ),
    Case(
        "matrix",
        "Matrix Mechanism release",
        "default mode, epsilon = 3, split matrix-heavy; P = the 10 ranges over a "
        "and the 6 counts of (b, c): two blocks",
        _matrix,
        cost=4,
    ),
    Case(
        "epoch",
        "whole epoch (release + 4 answers)",
        "default mode, epsilon = 2, S = 4, split (1/2, 1/4, 1/4, 0); the same P, "
        "then 4 counts over (a, b) answered fresh",
        _epoch,
        cost=8,
    ),
    Case(
        "unit-count",
        "user level: count, Contribution(rows=5)",
        "as the online Gaussian answer, with contribution = Contribution(rows=5)",
        _unit_count,
    ),
    Case(
        "unit-histogram",
        "user level: histogram, Contribution(rows=6, per_cell=2)",
        "as the online Gaussian answer, contribution = Contribution(rows=6, per_cell=2); "
        "the histogram of all 24 cells",
        _unit_histogram,
    ),
    Case(
        "control",
        "CONTROL: online Gaussian answer at half noise",
        "the online Gaussian answer with every draw scaled by 0.5 (dp.noise sampler wrapper); "
        "the charge, hence the claim, unchanged",
        _online_gaussian,
        noise_factor=0.5,
    ),
)

BY_NAME = {c.name: c for c in CASES}
