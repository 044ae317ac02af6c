"""The LAPRAS engine: a pure state machine over one epoch (ARCHITECTURE.md §5).

Guarantee. Neighbouring databases differ by adding or removing one row of the protected table.
Every noisy value the engine releases comes from one of: the Matrix Mechanism release of the
predicted set (Gaussian or Laplace noise on the strategy ``A``, calibrated to ``A``'s recomputed
sensitivity), or one online release per fresh statement (Gaussian or Laplace noise on the
statement's batch ``W``, calibrated to ``W``'s L2 / L1 sensitivity). Each of these is charged to
the epoch's accountant (``dp.accountant``) *before* its noise is drawn, and the accountant
admits a charge only if the composed total stays within ``(epsilon, delta)``. Everything else
(answers from the release, exact repeats, answers from stored releases) is post-processing.
So the epoch is ``(epsilon, delta)``-DP (``epsilon``-DP with the ``pure`` accountant), by the
composition theorem of the accountant in use. All decisions (good/bad/reuse, pacing, refusals)
depend only on public values: the queries, their positions in the stream, the configuration and
the noise scales -- never on the histogram. See ``docs/privacy.md``.

API (the proxy calls exactly these)::

    state, events = start(config, domain, predicted, pin, sampler, strategy=None)
    decision = decide(state, batch)            # may raise BudgetExhaustedError (no event then)
    for ev in decision.events:                 # persist, then apply, BEFORE releasing
        state = apply(state, ev)
    result = release(state, decision, pin, sampler)   # draws noise only for FRESH
    for ev in result.events:                   # persist, then apply
        state = apply(state, ev)
    result.answers, result.std_errors          # send to the client

    state = fold(events)                       # restart: the fold of the persisted events
    may_spend_nothing(state, batch)            # False: decide() is certainly FRESH or refuses

Several statements may be decided in turn, each against the state after the previous ones'
events, before any of them is released (group commit, ``proxy.epochs``): their charges are then
pending together (``EngineState.pending``, by stream position), and :func:`release` draws a
statement's noise only while its own charge is applied and not yet released, so every charge
is still made before its noise is drawn and is consumed by at most one release. A charge whose
release never came (a crash in between) stays spent.

Events are frozen values; ``dp.engine_codec.encode_event`` / ``decode_event`` turn them into
JSON-safe dicts and back (the ledger format). ``status(state)`` gives the public bookkeeping.

The epoch's ``domain`` is the product of all of its table's attributes (``dp.pin`` holds the
data, sparse); every batch is over a *marginal* of it (``Domain.covers``), and is answered on
that marginal of the pin -- or over a question about units (``dp.per_unit.UnitsDomain``: a
histogram over the table's units, from the pin's rows per unit, at the sensitivity of one unit
in it; answered online only, never from P's release or the stored-release inference). ``start`` charges the Matrix Mechanism budget, then measures P's
blocks (``dp.marginals``; its events are ``EpochStarted``, ``Charged`` and ``MatrixReleased``;
nothing has been shown to anyone until they are persisted). For each statement ``decide``
classifies the batch:

1. ``REPEAT``: the same batch (same ``QueryBatch.key``) was answered before: its stored answer,
   no event, no noise (no averaging attack).
2. ``MATRIX``: every row of the batch is in the predicted set ``P`` (a *good* query): answered
   from the Matrix Mechanism block whose marginal contains the batch's (paper mode), or from
   the lowest-variance source among those blocks, the GLS of all stored releases of one small
   marginal (:class:`StoredInference`) and the least squares over every release of the epoch
   (``dp.inference``: the Matrix Mechanism's blocks and every kept online release, over any
   marginals) (default mode; still post-processing). In default
   mode only while that source's total variance is not above a fresh answer's at the current
   pacing; otherwise the query is answered as a bad one (4.), so a weakly measured P costs
   online budget, not accuracy. Event ``Answered``; advances the stream position.
3. ``STORED`` (default mode only, ``reuse=True``; PRIVACY-NOTES §3 gap #10): the batch lies in
   the row space of a stored source covering its marginal (a block, or the releases of one
   marginal) whose variance (summed over its rows) is not above that of a fresh answer at the
   current pacing -- or no fresh answer can be made any more. Event ``Answered``; advances the
   position.
4. ``FRESH``: a *bad* query: one online release of the whole batch, whatever its number of rows.
   The pacer (``dp.pacing``) sets the charge; the event ``Charged`` (position, b, amount, noise
   scale, pacing after) must be persisted and applied before :func:`release` draws the noise;
   :func:`release` then returns ``Released`` (the noisy measurement and the answer given).
   In default mode the answer given is the GLS combination of the new measurement with all
   stored releases (post-processing).

Refusals (:class:`BudgetExhaustedError` subclasses, SQLSTATE ``42Q01``, no event): the S online
releases of the epoch are used (:class:`StreamLengthExhaustedError`, PRIVACY-NOTES §3 gap #7),
the reserve is below ``eps_min`` (:class:`ReserveExhaustedError`, gaps #4, #8), or the
accountant refuses the charge (:class:`PrivacyBudgetExhaustedError`; cannot happen with the
built-in pacing, kept as the filter's last word).

Stream position. Every statement answered as ``MATRIX``, ``STORED`` or ``FRESH`` occupies the
next stream position ``n``; exact repeats and refusals do not. ``b`` counts fresh online
releases only (the estimator estimates how many *fresh* releases the stream will need).

Modes. ``mode="paper"`` is Algorithm 1 as written: ``basic`` accountant (AGM at
``(eps_b, delta/(S+1))``), ``static_pacing="literal"``, ``warmup="log2"``, no reuse, no
reallocation, ``reserve_pacing="halving"``, ``allocation="static"``. ``mode="default"``:
``gdp`` accountant, ``allocation="steady"`` (no warm-up: the online budget spread over the
``expected_fresh`` answers E, the reserve paying for those beyond, so that the precision of
consecutive fresh answers changes by at most ``sqrt 2``: ``dp.pacing``; with
``allocation="static"``, ``static_pacing="even"`` and ``reserve_pacing="estimate"``), reuse of stored
releases with the variance check, GLS answers, and the leftovers of the pools join the reserve.
Every option can be set explicitly in either mode.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt

from dp.accountant import (
    AccountantKind,
    BasicAccountant,
    GdpAccountant,
    NoiseKind,
    PureAccountant,
    make_accountant,
    noise_variance,
)
from dp.accuracy import (
    AccuracyUnavailableError,
    fresh_variance_needed,
    least_charge,
    variance_at,
)
from dp.calibration import gdp_epsilon
from dp.domain import Domain, FloatArray, QueryBatch, lifted_matrix
from dp.errors import BudgetExhaustedError, InternalError, PrivacyParameterError
from dp.inference import Inference, Measurement
from dp.marginals import (
    ROW_LEVEL,
    BlockRelease,
    Reduction,
    joint_release,
    normalised_weights,
    plan_release,
    release_sensitivity,
)
from dp.noise import DrawnAhead, Sampler
from dp.pacing import (
    TAIL_MIN,
    Allocation,
    Pacing,
    Pool,
    ReservePacing,
    StaticPacing,
    Step,
    initial_pacing,
    next_charge,
    online_left,
    skip,
    spend,
    steady_charge,
    steady_horizon,
    steady_tail,
    warmup_length,
)
from dp.per_unit import UnitsDomain, within
from dp.persistent import PersistentMap
from dp.pin import Pin
from dp.release import ROW_SPACE_RTOL, Release
from dp.strategy import Strategy
from dp.units import Contribution

_K = TypeVar("_K")
_V = TypeVar("_V")

AnyAccountant = BasicAccountant | GdpAccountant | PureAccountant

#: Budget splits (fractions of the budget for MM / badInit / bad / reserve), PRIVACY-NOTES §2.
SPLITS: Mapping[str, tuple[float, float, float, float]] = MappingProxyType(
    {
        "equal": (1 / 4, 1 / 4, 1 / 4, 1 / 4),
        "matrix-heavy": (1 / 2, 1 / 6, 1 / 6, 1 / 6),
        "query-heavy": (1 / 6, 1 / 3, 1 / 3, 1 / 6),
        "reserve-heavy": (1 / 6, 1 / 6, 1 / 6, 1 / 2),
    }
)

#: Stored-release inference (default mode) is kept only for domains up to this many cells
#: (it keeps an n x n information matrix and one eigendecomposition per release).
REUSE_MAX_CELLS = 512
#: A fresh release's batch is kept in its event (and joins inference over every release,
#: ``dp.inference``) when its marginal is at most REUSE_MAX_CELLS cells or its matrix has at
#: most this many weights.
KEEP_NNZ = 1 << 14


class Mode(StrEnum):
    PAPER = "paper"
    DEFAULT = "default"


class StreamLengthExhaustedError(BudgetExhaustedError):
    """All S online releases of the epoch have been made."""


class ReserveExhaustedError(BudgetExhaustedError):
    """The reserve fell below eps_min: the epoch makes no further fresh release."""


class PrivacyBudgetExhaustedError(BudgetExhaustedError):
    """The accountant refused the charge: the epoch's (epsilon, delta) is spent."""


def _param(ok: bool, message: str) -> None:
    if not ok:
        raise PrivacyParameterError(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    """One epoch's privacy configuration; validated on construction (PrivacyParameterError).

    ``split``: a name of :data:`SPLITS` or four non-negative fractions (MM, badInit, bad,
    reserve) summing to 1. ``warmup``: ``"log2"``, ``"log2_squared"`` or an integer, clamped to
    ``T >= 3``. ``eps_min``: in epsilon (default ``1e-3 * epsilon``); the engine uses the same
    *fraction* of the budget in the accountant's unit. Options left ``None`` take the mode's
    value (see the module doc); the resolved values are the ``init=False`` fields.
    """

    epsilon: float
    delta: float
    stream_length: int
    split: str | tuple[float, float, float, float] = "matrix-heavy"
    allocation: Literal["static", "smooth", "steady"] | None = None
    mode: Literal["paper", "default"] = "default"
    accountant: Literal["basic", "gdp", "pure"] | None = None
    warmup: Literal["log2", "log2_squared"] | int = "log2"
    static_pacing: Literal["literal", "even"] | None = None
    eps_min: float | None = None
    reuse: bool | None = None
    reallocate: bool | None = None
    reserve_pacing: Literal["halving", "estimate"] | None = None
    #: The privacy unit's bound (``dp.units``): row-level unless the table declares a unit.
    contribution: Contribution = ROW_LEVEL
    #: E: the fresh answers the epoch expects (the Steady pacing spreads the online budget
    #: over them, ``dp.pacing``); None: S. Public (configured, or from the query log).
    expected_fresh: int | None = None

    fractions: tuple[float, float, float, float] = field(init=False)
    accountant_kind: AccountantKind = field(init=False)
    allocation_kind: Allocation = field(init=False)
    pacing_kind: StaticPacing = field(init=False)
    min_fraction: float = field(init=False)
    reuse_releases: bool = field(init=False)
    reallocate_leftovers: bool = field(init=False)
    reserve_kind: ReservePacing = field(init=False)
    t: int = field(init=False)
    #: E as the Steady pacing uses it: ``expected_fresh`` (or S), at most S.
    expected: int = field(init=False)

    def __post_init__(self) -> None:
        _param(self.mode in ("paper", "default"), "mode must be 'paper' or 'default'")
        paper = self.mode == "paper"
        eps = self.epsilon
        _param(
            isinstance(eps, int | float) and math.isfinite(eps) and eps > 0,
            "epsilon must be a finite number greater than 0",
        )
        s = self.stream_length
        _param(
            isinstance(s, int) and not isinstance(s, bool) and s >= 1,
            "the stream length must be an integer of at least 1",
        )
        acct = self.accountant or ("basic" if paper else "gdp")
        _param(acct in ("basic", "gdp", "pure"), "accountant must be one of: basic, gdp, pure")
        if acct == "pure":
            _param(self.delta == 0, "the pure accountant requires delta = 0")
        else:
            _param(
                isinstance(self.delta, int | float) and 0 < self.delta < 1,
                "delta must be a number strictly between 0 and 1",
            )
        if isinstance(self.split, str):
            _param(
                self.split in SPLITS,
                "split must be equal, matrix-heavy, query-heavy, reserve-heavy or four fractions",
            )
            fr = SPLITS[self.split]
        else:
            raw = tuple(self.split)
            _param(
                len(raw) == 4
                and all(isinstance(f, int | float) and math.isfinite(f) and f >= 0 for f in raw)
                and abs(math.fsum(raw) - 1.0) <= 1e-9,
                "split fractions must be four non-negative numbers summing to 1",
            )
            tot = math.fsum(raw)
            fr = (raw[0] / tot, raw[1] / tot, raw[2] / tot, raw[3] / tot)
        allocation = self.allocation or ("static" if paper else "steady")
        _param(
            allocation in ("static", "smooth", "steady"),
            "allocation must be static, smooth or steady",
        )
        e = self.expected_fresh
        _param(
            e is None or (isinstance(e, int) and not isinstance(e, bool) and e >= 1),
            "expected_fresh must be an integer of at least 1",
        )
        pacing = self.static_pacing or ("literal" if paper else "even")
        _param(pacing in ("literal", "even"), "static_pacing must be literal or even")
        reserve = self.reserve_pacing or ("halving" if paper else "estimate")
        _param(reserve in ("halving", "estimate"), "reserve_pacing must be halving or estimate")
        w = self.warmup
        _param(
            w in ("log2", "log2_squared")
            or (isinstance(w, int) and not isinstance(w, bool) and w >= 1),
            "warmup must be 'log2', 'log2_squared' or a positive integer",
        )
        eps_min = 1e-3 * eps if self.eps_min is None else self.eps_min
        _param(
            isinstance(eps_min, int | float) and math.isfinite(eps_min) and 0 < eps_min <= eps,
            "eps_min must be a number greater than 0 and at most epsilon",
        )
        _param(isinstance(self.contribution, Contribution), "contribution must be a bound")
        for flag in (self.reuse, self.reallocate):
            _param(
                flag is None or isinstance(flag, bool), "reuse and reallocate must be true or false"
            )
        for name, value in (
            ("fractions", fr),
            ("accountant_kind", AccountantKind(acct)),
            ("allocation_kind", Allocation(allocation)),
            ("pacing_kind", StaticPacing(pacing)),
            ("min_fraction", eps_min / eps),
            ("reuse_releases", (not paper) if self.reuse is None else self.reuse),
            ("reallocate_leftovers", (not paper) if self.reallocate is None else self.reallocate),
            ("reserve_kind", ReservePacing(reserve)),
            ("t", warmup_length(w, s)),
            ("expected", min(s, e or s)),
        ):
            object.__setattr__(self, name, value)


# ------------------------------------------------------------------------------------------
# inference over all stored releases (default mode)


class StoredInference:
    """Generalised least squares over every stored release, in information form.

    ``info = sum_i A_i^T A_i / v_i`` and ``h = sum_i A_i^T y_i / v_i`` over the releases
    ``y_i = A_i x + noise`` (independent noise of variance ``v_i`` per row). A query ``q`` in
    the range of ``info`` is answered ``q info^+ h`` (unbiased, the best linear unbiased
    estimate) with variance ``q info^+ q^T``; queries outside it are not answerable. Pure
    post-processing of released values. Eigenvalues below ``1e-12`` of the largest are treated
    as zero (a direction that weakly measured is refused, never answered with a bias).

    A value: :meth:`add` returns a new one. The eigendecomposition behind ``basis``, ``coef``
    and ``x_hat`` is made at the first question asked of a value, not when it is made (a
    ledger's replay adds every release of a marginal and asks nothing until the end; an
    ``eigh`` of 296 cells costs about 10 ms), and kept: computed alike by whichever thread
    asks first.
    """

    __slots__ = ("_added", "_solved", "h", "info")

    def __init__(self, info: FloatArray, h: FloatArray) -> None:
        self.info = info
        self.h = h
        self._solved: tuple[FloatArray, FloatArray, FloatArray] | None = None
        # the last release added to this value and the value it made, until the same release
        # is added again: a release's answer is estimated from the value its release makes,
        # and its event then adds the same release to the state's value, which gets that
        # value (decomposed already) and drops the link (so no chain of values is kept)
        self._added: tuple[bytes, StoredInference] | None = None

    def _solve(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        solved = self._solved
        if solved is None:
            lam, vec = np.linalg.eigh((self.info + self.info.T) / 2.0)
            keep = lam > max(float(lam[-1]), 0.0) * 1e-12 if lam.size else np.zeros(0, bool)
            basis = np.ascontiguousarray(vec[:, keep])
            coef = basis / np.sqrt(lam[keep])
            solved = self._solved = (basis, coef, coef @ (coef.T @ self.h))
        return solved

    @property
    def basis(self) -> FloatArray:
        return self._solve()[0]

    @property
    def coef(self) -> FloatArray:
        return self._solve()[1]

    @property
    def x_hat(self) -> FloatArray:
        return self._solve()[2]

    @staticmethod
    def of(a: FloatArray, y: FloatArray, var: FloatArray) -> StoredInference:
        return _empty_inference(int(a.shape[1])).add(a, y, var)

    def add(self, a: FloatArray, y: FloatArray, var: FloatArray) -> StoredInference:
        """This value with the release ``y = a x + noise`` (variances ``var``) added."""
        a, y, var = (np.ascontiguousarray(v, dtype=np.float64) for v in (a, y, var))
        key = repr(a.shape).encode() + a.tobytes() + y.tobytes() + var.tobytes()
        added = self._added
        if added is not None and added[0] == key:
            self._added = None
            return added[1]
        aw = a / var[:, None]
        out = StoredInference(self.info + aw.T @ a, self.h + aw.T @ y)
        self._added = (key, out)
        return out

    def can_answer(self, matrix: Any) -> npt.NDArray[np.bool_]:
        q = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
        resid = q - (q @ self.basis) @ self.basis.T
        return np.asarray(
            np.einsum("ij,ij->i", resid, resid) <= ROW_SPACE_RTOL**2 * np.einsum("ij,ij->i", q, q),
            dtype=np.bool_,
        )

    def variance(self, matrix: Any) -> FloatArray:
        q = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
        t = q @ self.coef
        return np.where(self.can_answer(q), np.einsum("ij,ij->i", t, t), np.inf)

    def estimate(self, matrix: Any) -> tuple[FloatArray, FloatArray]:
        q = np.atleast_2d(np.asarray(matrix, dtype=np.float64))
        if not np.all(self.can_answer(q)):
            raise InternalError("a query outside the stored releases' row space was estimated")
        t = q @ self.coef
        return q @ self.x_hat, np.einsum("ij,ij->i", t, t)


# ------------------------------------------------------------------------------------------
# events


class Source(StrEnum):
    MATRIX = "matrix"
    STORED = "stored"


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochStarted:
    """The epoch's configuration, its public domain (the product of all of the table's
    attributes) and its predicted set: batches over marginals of the domain (may be empty)."""

    config: EngineConfig
    domain: Domain
    predicted: tuple[QueryBatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Charged:
    """A charge admitted by the accountant, made before any noise is drawn.

    ``pool`` MATRIX is the Matrix Mechanism (``position = b = 0``); otherwise the charge is for
    the b-th fresh release at stream position ``position`` for batch ``key``. ``scale`` is the
    noise scale (sigma, or Laplace b) for ``sensitivity``; ``pacing`` is the pacing state after.
    """

    position: int
    b: int
    key: str
    pool: Pool
    amount: float
    noise: NoiseKind
    scale: float
    sensitivity: float
    pacing: Pacing


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MatrixReleased:
    """The Matrix Mechanism release, one block per predicted marginal (``dp.marginals``):
    block ``g`` is ``y_g = A_g x_g + noise`` over its reduction's columns."""

    blocks: tuple[BlockRelease, ...]
    #: A release recorded before epochs covered whole tables: one strategy over the epoch's
    #: (then a view's) domain, read from an older ledger.
    legacy: Release | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Released:
    """A fresh online release: the noisy measurement of ``batch`` and the answer given.

    ``measurement`` is ``W x + noise`` with per-row noise variance ``noise_variance``;
    ``answers``/``std_errors`` are what the client received (equal to the measurement in paper
    mode; its GLS combination with the stored releases in default mode). ``batch`` is kept
    when its marginal is at most :data:`REUSE_MAX_CELLS` cells or its matrix has at most
    :data:`KEEP_NNZ` weights (it then joins inference over every release, ``dp.inference``);
    otherwise it is None and ``key`` alone identifies it (a batch over a marginal of millions
    of cells would otherwise be megabytes of ledger per answer). Older ledgers kept it up to
    REUSE_MAX_CELLS cells only: their other releases are not used for inference.
    """

    position: int
    key: str
    batch: QueryBatch | None
    measurement: tuple[float, ...]
    noise_variance: float
    answers: tuple[float, ...]
    std_errors: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """A statement answered by post-processing of stored releases (no noise, no charge).

    For a *bad* query (not in P) answered from stored releases, ``b`` is its bad index and
    ``pacing`` the pacing state after it (the estimate may freeze; no pool changes).
    """

    position: int
    key: str
    source: Source
    answers: tuple[float, ...]
    std_errors: tuple[float, ...]
    b: int | None = None
    pacing: Pacing | None = None


Event = EpochStarted | Charged | MatrixReleased | Released | Answered


# ------------------------------------------------------------------------------------------
# state


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredAnswer:
    answers: tuple[float, ...]
    std_errors: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class EngineState:
    """The epoch's state: a fold of its events (never build it by hand; use :func:`fold`)."""

    config: EngineConfig
    domain: Domain
    accountant: AnyAccountant
    pacing: Pacing
    min_charge: float
    position: int = 0
    bad: int = 0
    fresh: int = 0
    predicted_rows: frozenset[bytes] = frozenset()
    #: The predicted set's batches (what the Matrix Mechanism blocks remember answers of).
    predicted: tuple[QueryBatch, ...] = ()
    mm_pending: bool = False
    matrix_blocks: tuple[BlockRelease, ...] = ()
    #: All blocks as one release over the union of their attributes, when small enough
    #: (``dp.marginals.joint_release``): least squares over every block at once.
    matrix_joint: BlockRelease | None = None
    #: Default mode: GLS over every stored release, per marginal of at most REUSE_MAX_CELLS.
    stored: Mapping[Domain, StoredInference] = field(default_factory=dict)
    #: The marginals of ``stored`` that hold one Matrix Mechanism block's release and nothing
    #: else: their GLS is that block's own least squares, so the block answers for them.
    stored_by_block: frozenset[Domain] = frozenset()
    #: Answered statements by batch key (a persistent map: a version per event, sharing entries).
    answers: Mapping[str, StoredAnswer] = field(default_factory=PersistentMap)
    #: Charges applied and not yet released, by stream position (0: the Matrix Mechanism's).
    #: Several may be pending at once (the proxy commits the charges of concurrent statements
    #: together, then draws their noise); each is consumed by exactly one release. A charge
    #: whose release was lost in a crash stays here, spent and never released.
    pending: Mapping[int, Charged] = field(default_factory=dict)
    #: The Steady pacing's tail weight ``f`` (``dp.pacing.steady_tail``, from the pools).
    tail: float = TAIL_MIN
    #: Default mode: every release kept for inference over all of them (``dp.inference``):
    #: the Matrix Mechanism's blocks and the fresh releases whose matrix was kept.
    inference: Inference = field(default_factory=Inference)

    @property
    def t(self) -> int:
        return self.config.t


class DecisionKind(StrEnum):
    REPEAT = "repeat"
    MATRIX = "matrix"
    STORED = "stored"
    FRESH = "fresh"


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do with a statement. ``events`` must be persisted and applied before
    :func:`release` is called (for FRESH: the charge, before the noise is drawn).
    ``answers``/``std_errors`` are already known for every kind except FRESH."""

    kind: DecisionKind
    batch: QueryBatch
    events: tuple[Event, ...] = ()
    answers: tuple[float, ...] | None = None
    std_errors: tuple[float, ...] | None = None
    charge: Charged | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseResult:
    answers: tuple[float, ...]
    std_errors: tuple[float, ...]
    events: tuple[Event, ...] = ()


# ------------------------------------------------------------------------------------------
# fold


def _initial(ev: EpochStarted) -> EngineState:
    cfg = ev.config
    acct = make_accountant(
        cfg.accountant_kind,
        epsilon=cfg.epsilon,
        delta=cfg.delta,
        max_releases=cfg.stream_length + 1,
    )
    total = acct.total
    f_mm, f_init, f_bad, f_res = cfg.fractions
    has_p = any(b.num_queries > 0 for b in ev.predicted) and f_mm > 0
    if not has_p:  # no prediction: the Matrix Mechanism's share goes to the bad pool
        f_bad, f_mm = f_bad + f_mm, 0.0
    pacing = initial_pacing(
        warmup=f_init * total,
        bad=f_bad * total,
        reserve=f_res * total,
        allocation=cfg.allocation_kind,
    )
    if not all(ev.domain.covers(b.domain) for b in ev.predicted):
        raise ValueError("the predicted set must be over marginals of the epoch's domain")
    rows = frozenset(k for b in ev.predicted for k in b.row_keys())
    return EngineState(
        config=cfg,
        domain=ev.domain,
        accountant=acct,
        pacing=pacing,
        tail=steady_tail(f_init, f_bad, f_res),
        min_charge=cfg.min_fraction * total,
        predicted_rows=rows,
        predicted=tuple(ev.predicted) if has_p else (),
        mm_pending=has_p,
        answers=PersistentMap(),
        stored=MappingProxyType({}),
        pending=MappingProxyType({}),
    )


def _copied(m: Mapping[_K, _V]) -> dict[_K, _V]:
    """A new dict of ``m``'s items: the state's small maps are read-only views of dicts, copied
    by the dict's own copy (an order of magnitude faster than item by item)."""
    return m.copy() if isinstance(m, dict | MappingProxyType) else dict(m)


def _with_answer(state: EngineState, key: str, ans: StoredAnswer) -> Mapping[str, StoredAnswer]:
    """``state.answers`` with ``key`` answered: a new version of the persistent map (one
    entry per answered statement, so not copied whole at every event: ``dp.persistent``)."""
    answers = state.answers
    if not isinstance(answers, PersistentMap):
        answers = PersistentMap(answers)
    return answers.set(key, ans)


def _with_pending(
    state: EngineState, position: int, charge: Charged | None
) -> Mapping[int, Charged]:
    """``state.pending`` with ``charge`` pending at ``position`` (None: released)."""
    d = _copied(state.pending)
    if charge is None:
        d.pop(position, None)
    else:
        d[position] = charge
    return MappingProxyType(d)


def _infers(state: EngineState, domain: Domain) -> bool:
    """Whether releases over ``domain`` join stored-release inference (default mode, small
    marginals only)."""
    return state.config.reuse_releases and domain.size <= REUSE_MAX_CELLS and not domain.derived


def _add_stored(
    stored: Mapping[Domain, StoredInference],
    domain: Domain,
    a: FloatArray,
    y: FloatArray,
    var: FloatArray,
) -> Mapping[Domain, StoredInference]:
    """``stored`` with a release over ``domain`` added."""
    d = _copied(stored)
    prior = d.get(domain)
    d[domain] = StoredInference.of(a, y, var) if prior is None else prior.add(a, y, var)
    return MappingProxyType(d)


def apply(state: EngineState | None, event: Event) -> EngineState:
    """The state after ``event``. ``state`` is None only for the first event, EpochStarted."""
    if isinstance(event, EpochStarted):
        if state is not None:
            raise InternalError("an epoch can only be started once")
        return _initial(event)
    if state is None:
        raise InternalError("the first event of an epoch must be EpochStarted")
    if isinstance(event, Charged):
        if event.position in state.pending:
            raise InternalError("a stream position can only be charged once")
        acct = state.accountant.compose(event.amount)  # the filter's last word
        pending = _with_pending(state, event.position, event)
        if event.pool is Pool.MATRIX:
            return replace(state, accountant=acct, pending=pending)
        if event.position <= state.position:
            raise InternalError("a charge must be for a later stream position")
        return replace(
            state,
            accountant=acct,
            pacing=event.pacing,
            position=event.position,
            bad=event.b,
            fresh=state.fresh + 1,
            pending=pending,
        )
    if isinstance(event, MatrixReleased):
        mm = state.pending.get(0)
        if mm is None or mm.pool is not Pool.MATRIX:
            raise InternalError("a release must follow its charge")
        stored = state.stored
        blocks = event.blocks
        if event.legacy is not None:
            blocks = (BlockRelease(Reduction.identity(state.domain), event.legacy),)
        added: list[Domain] = []
        for block in blocks:
            if not state.domain.covers(block.domain):
                raise InternalError("a released block is outside the epoch's domain")
            rel = block.release
            if _infers(state, block.domain):
                full = block.full_strategy()
                stored = _add_stored(stored, block.domain, full, rel.y, rel.noise_variance)
                added.append(block.domain)
        inference = state.inference
        if state.config.reuse_releases:
            for block in blocks:
                if block.domain.derived:
                    continue  # (a question about units: no marginal of the histogram)
                rel = block.release
                inference = inference.add(
                    Measurement.of_columns(
                        len(inference),
                        block.domain,
                        block.reduction.groups,
                        rel.matrix,
                        rel.y,
                        rel.noise_variance,
                    )
                )
        return replace(
            state,
            inference=inference,
            matrix_blocks=blocks,
            matrix_joint=joint_release(blocks),
            stored=stored,
            stored_by_block=frozenset(d for d in added if added.count(d) == 1),
            mm_pending=False,
            pending=_with_pending(state, 0, None),
        )
    if isinstance(event, Released):
        p = state.pending.get(event.position)
        if p is None or p.pool is Pool.MATRIX or p.key != event.key:
            raise InternalError("a release must follow its charge")
        stored, by_block = state.stored, state.stored_by_block
        if event.batch is not None and _infers(state, event.batch.domain):
            stored = _add_stored(
                stored,
                event.batch.domain,
                event.batch.dense(),
                np.asarray(event.measurement, dtype=np.float64),
                np.full(event.batch.num_queries, event.noise_variance),
            )
            by_block = by_block - {event.batch.domain}
        inference = state.inference
        if (
            event.batch is not None
            and state.config.reuse_releases
            and not event.batch.domain.derived
        ):
            inference = inference.add(
                Measurement.of_batch(
                    len(inference),
                    event.batch,
                    np.asarray(event.measurement, dtype=np.float64),
                    event.noise_variance,
                )
            )
        return replace(
            state,
            inference=inference,
            stored=stored,
            stored_by_block=by_block,
            answers=_with_answer(
                state, event.key, StoredAnswer(answers=event.answers, std_errors=event.std_errors)
            ),
            pending=_with_pending(state, event.position, None),
        )
    if isinstance(event, Answered):
        if event.b is not None and event.pacing is not None:
            state = replace(state, bad=event.b, pacing=event.pacing)
        return replace(
            state,
            position=event.position,
            answers=_with_answer(
                state, event.key, StoredAnswer(answers=event.answers, std_errors=event.std_errors)
            ),
        )
    raise InternalError("unknown engine event")


def fold(events: Iterable[Event]) -> EngineState:
    """Rebuild the state from the persisted events (in order)."""
    state: EngineState | None = None
    for ev in events:
        state = apply(state, ev)
    if state is None:
        raise InternalError("an epoch's ledger must start with EpochStarted")
    return state


def warm(state: EngineState) -> EngineState:
    """``state``, with what its first decisions would compute once done now: every Matrix
    Mechanism block remembers the answers of the predicted set's rows
    (``BlockRelease.remember``). A cache of public values (the releases and the queries);
    nothing is decided, charged or drawn. For a process loading an epoch before it serves."""
    for block in _matrix_sources(state):
        block.remember(state.predicted)
    return state


def _matrix_sources(state: EngineState) -> tuple[BlockRelease, ...]:
    """The Matrix Mechanism release's blocks, and their joint release if there is one."""
    joint = () if state.matrix_joint is None else (state.matrix_joint,)
    return (*state.matrix_blocks, *joint)


# ------------------------------------------------------------------------------------------
# start


def as_pin(domain: Domain, data: Pin | FloatArray) -> Pin:
    """The epoch's data as a :class:`~dp.pin.Pin` (a dense histogram over ``domain`` is
    accepted too: small domains, tests and simulations)."""
    if isinstance(data, Pin):
        if data.domain != domain:
            raise ValueError("the pinned data is not over the epoch's domain")
        return data
    return Pin.from_dense(domain, data)


def start(
    config: EngineConfig,
    domain: Domain,
    predicted: QueryBatch | Sequence[QueryBatch] | None,
    data: Pin | FloatArray,
    sampler: Sampler,
    *,
    strategy: Strategy | None = None,
    weights: Sequence[float] | None = None,
) -> tuple[EngineState, tuple[Event, ...]]:
    """Start an epoch: charge the Matrix Mechanism's share, then measure P's blocks.

    ``predicted``: batches over marginals of ``domain``. The release is planned by
    ``dp.marginals.plan_release`` (one block per maximal predicted marginal, a certified-gap
    strategy per block, the budget split between blocks to minimise P's total expected error),
    unless ``strategy`` is given (one block only: that strategy over the block's cells). In
    the default mode, ``weights`` (one per batch of ``predicted``: the probability that each
    is asked, public) weigh that error (``dp.marginals.normalised_weights``), so that the
    likely statements get the more accurate answers; paper mode optimises P's rows alike, as
    Algorithm 1 does. Weights change which strategy measures the data, never what is
    answered from it nor the guarantee below.
    Guarantee of the measurement: every block ``g`` is measured as ``y_g = A_g x_g + Z_g``
    with i.i.d. noise of one scale, calibrated to the sensitivity of the *whole* release,
    recomputed from the block matrices (``dp.marginals.release_sensitivity``; add/remove-one-row
    neighbours change one cell of every block's marginal by one): ``mu``-GDP with
    ``mu = Delta2 / sigma`` (Gaussian) or ``epsilon``-DP with ``epsilon = Delta1 / b``
    (Laplace). Returns the state and the events to persist; the proxy persists them together
    (one transaction) before answering anything.
    """
    batches: tuple[QueryBatch, ...]
    if predicted is None:
        batches = ()
    elif isinstance(predicted, QueryBatch):
        batches = (predicted,)
    else:
        batches = tuple(predicted)
    if weights is not None and len(weights) != len(batches):
        raise ValueError("one weight per predicted batch")
    if weights is None or config.mode == "paper":
        weights = [1.0] * len(batches)
    kept_weights = [w for b, w in zip(batches, weights, strict=True) if b.num_queries > 0]
    batches = tuple(b for b in batches if b.num_queries > 0)
    if not all(domain.covers(b.domain) for b in batches):
        raise ValueError("the predicted set must be over marginals of the epoch's domain")
    plans: list[tuple[Reduction, FloatArray]] = []
    if batches and config.fractions[0] > 0:
        if strategy is not None:
            blocks = {b.domain for b in batches}
            if len(blocks) != 1 or strategy.matrix.shape[1] != next(iter(blocks)).size:
                raise ValueError("the strategy does not match the domain")
            plans = [(Reduction.identity(next(iter(blocks))), strategy.matrix)]
        else:
            laplace = config.accountant_kind is AccountantKind.PURE
            planned = plan_release(
                batches, laplace=laplace, weights=normalised_weights(kept_weights).tolist()
            )
            # P is what the release answers: a batch left out of every block (too large for
            # one, dp.marginals.MAX_BLOCK_ENTRIES) is answered online like any other
            kept = {b.key for plan in planned for b in plan.batches}
            batches = tuple(b for b in batches if b.key in kept)
            plans = [(plan.reduction, plan.strategy) for plan in planned]
    started = EpochStarted(config=config, domain=domain, predicted=batches)
    state = apply(None, started)
    events: list[Event] = [started]
    if not state.mm_pending:  # no P, or a split with no MM share
        return state, tuple(events)
    pin = as_pin(domain, data)
    acct = state.accountant
    l2, l1 = release_sensitivity(plans, config.contribution, domain)
    sens = acct.sensitivity_of(l2, l1)
    amount = min(config.fractions[0] * acct.total, acct.remaining())
    scale = acct.noise_scale(amount, sens)
    charge = Charged(
        position=0,
        b=0,
        key="",
        pool=Pool.MATRIX,
        amount=amount,
        noise=acct.noise,
        scale=scale,
        sensitivity=sens,
        pacing=state.pacing,
    )
    state = apply(state, charge)  # charged before the noise is drawn
    events.append(charge)
    released = []
    for red, a in plans:
        x_r = red.reduce_data(pin.marginal(red.domain))
        k = a.shape[0]
        if acct.noise is NoiseKind.GAUSSIAN:
            noise = np.asarray(sampler.gaussian(scale, k), dtype=np.float64).reshape(-1)
        else:
            noise = np.asarray(sampler.laplace(scale, k), dtype=np.float64).reshape(-1)
        var = np.full(k, noise_variance(acct.noise, scale))
        released.append(BlockRelease(red, Release(matrix=a, y=a @ x_r + noise, noise_variance=var)))
    mm = MatrixReleased(blocks=tuple(released))
    state = apply(state, mm)
    events.append(mm)
    return state, tuple(events)


# ------------------------------------------------------------------------------------------
# decide / release


@functools.lru_cache(maxsize=64)
def _empty_inference(n: int) -> StoredInference:
    """The value with no release over ``n`` cells (one per size, so that the first release
    of a marginal added here and in an event's application gives one value)."""
    return StoredInference(np.zeros((n, n)), np.zeros(n))


def _tuple(a: FloatArray) -> tuple[float, ...]:
    return tuple(float(v) for v in np.asarray(a, dtype=np.float64).reshape(-1))


def _best(
    state: EngineState, batch: QueryBatch, *, stored: bool
) -> tuple[FloatArray, FloatArray] | None:
    """The lowest-variance answer to every row of ``batch`` from one stored source covering
    its marginal -- a Matrix Mechanism block, or (``stored``) the GLS over the releases of one
    small marginal -- as ``(answers, variances)``; None when no source answers all rows.
    Post-processing of released values only."""
    best: tuple[FloatArray, FloatArray] | None = None
    keys: list[bytes] | None = None
    for block in _matrix_sources(state):
        if block.domain.covers(batch.domain):
            block.remember(state.predicted)  # once per block: P's rows, solved together
            if keys is None and block.known:
                keys = batch.row_keys()
            ans, var, ok = block.solve(batch, keys)
            if np.all(ok) and (best is None or np.sum(var) < np.sum(best[1])):
                best = (ans, var)
    if stored:
        found = state.inference.estimate(batch)  # every release of the epoch (dp.inference)
        if found is not None and (best is None or np.sum(found[1]) < np.sum(best[1])):
            best = found
        for dom, inf in state.stored.items():
            if dom in state.stored_by_block:
                continue  # the block's own release only: answered above, the same estimate
            if dom.covers(batch.domain):
                q = lifted_matrix(batch, dom).toarray()
                if np.all(inf.can_answer(q)):
                    ans, var = inf.estimate(q)
                    if best is None or np.sum(var) < np.sum(best[1]):
                        best = (ans, var)
    return best


def _answered(
    state: EngineState,
    batch: QueryBatch,
    found: tuple[FloatArray, FloatArray],
    source: Source,
    *,
    b: int | None = None,
    pacing: Pacing | None = None,
) -> Decision:
    ans, var = found
    std = _tuple(np.sqrt(np.maximum(var, 0.0)))
    ev = Answered(
        position=state.position + 1,
        key=batch.key,
        source=source,
        answers=_tuple(ans),
        std_errors=std,
        b=b,
        pacing=pacing,
    )
    kind = DecisionKind.MATRIX if source is Source.MATRIX else DecisionKind.STORED
    return Decision(kind=kind, batch=batch, events=(ev,), answers=ev.answers, std_errors=std)


def _is_good(state: EngineState, batch: QueryBatch) -> bool:
    return bool(state.predicted_rows) and all(k in state.predicted_rows for k in batch.row_keys())


def may_spend_nothing(state: EngineState, batch: QueryBatch) -> bool:
    """False when :func:`decide` would certainly answer ``batch`` FRESH or refuse it: it is
    no repeat, it is not all in P, and stored releases are not reused. True otherwise (its
    decision may then be anything). Pure and cheap: lets a caller that decides several
    statements in turn order those that spend nothing first without deciding twice."""
    if batch.key in state.answers or batch.num_queries == 0 or batch.matrix.nnz == 0:
        return True
    return state.config.reuse_releases or _is_good(state, batch)


def decide(state: EngineState, batch: QueryBatch, *, max_error: float | None = None) -> Decision:
    """Classify ``batch`` and, for a fresh release, plan its charge (pure; see the module doc).

    ``max_error``: the largest standard error accepted for each row of the batch (a request,
    ``dp.accuracy``; None: none). In the default mode the batch is then answered from earlier
    releases when their stated error meets it, else by a fresh release at the least charge
    that meets it; in paper mode the decision is Algorithm 1's, refused when its error does not
    meet the request. A repeat whose stored answer does not meet it is refused (it is never
    measured again). All of this reads only public values.

    Raises a :class:`BudgetExhaustedError` subclass (saying which limit) when the batch needs
    fresh noise and none can be admitted (:class:`AccuracyUnavailableError` when a request
    cannot be met); ``ValueError`` for a batch over a marginal that is not one of the epoch's
    domain.
    """
    if not within(state.domain, batch.domain):
        raise ValueError("the query is not over the epoch's domain")
    if state.mm_pending:
        raise InternalError("the epoch's Matrix Mechanism release is missing")
    if max_error is not None and not (math.isfinite(max_error) and max_error > 0):
        raise PrivacyParameterError("a requested standard error must be a number above 0")
    prior = state.answers.get(batch.key)
    if prior is not None:
        if max_error is not None and not _meets(prior.std_errors, max_error):
            raise AccuracyUnavailableError(
                f"the standard error asked (lapras.max_error = {max_error:.4g}) is below that "
                f"of this statement's earlier answer ({max(prior.std_errors):.4g})",
                hint="a statement answered before is answered again with its stored answer, "
                "never measured anew; ask with a larger lapras.max_error, or without one",
            )
        return Decision(
            kind=DecisionKind.REPEAT,
            batch=batch,
            answers=prior.answers,
            std_errors=prior.std_errors,
        )
    if batch.num_queries == 0 or batch.matrix.nnz == 0:
        # data-independent answer: all zeros, exactly
        zeros = tuple(0.0 for _ in range(batch.num_queries))
        ev = Answered(
            position=state.position + 1,
            key=batch.key,
            source=Source.STORED,
            answers=zeros,
            std_errors=zeros,
        )
        return Decision(
            kind=DecisionKind.STORED, batch=batch, events=(ev,), answers=zeros, std_errors=zeros
        )
    if max_error is None:
        return _decided(state, batch)
    if not state.config.reuse_releases:  # paper mode: Algorithm 1's decision, or a refusal
        d = _decided(state, batch)
        if not _meets(_expected_errors(state, d), max_error):
            raise AccuracyUnavailableError(
                f"the standard error asked (lapras.max_error = {max_error:.4g}) is below what "
                f"this epoch gives the statement ({max(_expected_errors(state, d)):.4g})",
                hint="an epoch in paper mode spends as Algorithm 1 does, whatever is asked; "
                "ask with a larger lapras.max_error, or without one",
            )
        return d
    return _requested(state, batch, max_error)


def _meets(std_errors: Sequence[float], max_error: float) -> bool:
    """Whether every row's standard error is within ``max_error`` (to rounding)."""
    return all(e <= max_error * (1 + 1e-9) for e in std_errors)


def _decided(state: EngineState, batch: QueryBatch) -> Decision:
    """:func:`decide` without a request, for a batch that is no repeat and reads a cell."""
    cfg = state.config
    reuse = cfg.reuse_releases
    good = _is_good(state, batch)
    if good and not reuse:  # paper mode: a predicted query is answered from its block
        found = _best(state, batch, stored=False)
        if found is not None:
            return _answered(state, batch, found, Source.MATRIX)

    # default mode: the best stored source (for a predicted query, its block among them) is
    # compared with a fresh answer at the current pacing; a predicted query it answers stays
    # a good one (no b, no pacing step)
    known = _best(state, batch, stored=True) if reuse else None
    from_known = _from_known(state, batch, good)
    try:
        charge = _plan_charge(state, batch)
    except BudgetExhaustedError:
        if known is not None:  # no fresh answer possible: serve what is known
            return from_known(known)
        raise
    if known is not None:
        fresh_var = noise_variance(charge.noise, charge.scale) * batch.num_queries
        if float(np.sum(known[1])) <= fresh_var:
            return from_known(known)
    return Decision(kind=DecisionKind.FRESH, batch=batch, events=(charge,), charge=charge)


def _skipped(state: EngineState) -> Pacing:
    """The pacing after the next bad statement is answered without the pacing's charge."""
    cfg = state.config
    return skip(
        state.pacing,
        b=state.bad + 1,
        n=state.position + 1,
        stream_length=cfg.stream_length,
        t=cfg.t,
        allocation=cfg.allocation_kind,
    )


def _from_known(
    state: EngineState, batch: QueryBatch, good: bool
) -> Callable[[tuple[FloatArray, FloatArray]], Decision]:
    """The decision that answers ``batch`` from a stored source's ``(answers, variances)``:
    a predicted batch stays a good one (no b, no pacing step); a bad one advances b."""

    def answered(found: tuple[FloatArray, FloatArray]) -> Decision:
        if good:
            return _answered(state, batch, found, Source.MATRIX)
        return _answered(
            state, batch, found, Source.STORED, b=state.bad + 1, pacing=_skipped(state)
        )

    return answered


def _expected_errors(state: EngineState, d: Decision) -> tuple[float, ...]:
    """The standard errors a decision's answers have (FRESH: the noise's, before any
    combination with earlier releases)."""
    if d.charge is None:
        return d.std_errors or ()
    sd = math.sqrt(noise_variance(d.charge.noise, d.charge.scale))
    return tuple(sd for _ in range(d.batch.num_queries))


def _prior_variances(state: EngineState, batch: QueryBatch) -> FloatArray:
    """Each row's stated variance from the releases a fresh answer of ``batch`` is combined
    with (its marginal's stored releases, :func:`release`); ``inf`` where they say nothing."""
    inf = state.stored.get(batch.domain) if _infers(state, batch.domain) else None
    if inf is None:
        return np.full(batch.num_queries, np.inf)
    return np.asarray(inf.variance(batch.dense()), dtype=np.float64)


def _combined_variances(state: EngineState, batch: QueryBatch, fresh: float) -> FloatArray:
    """Each row's variance once a fresh release of ``batch`` at noise variance ``fresh`` is
    combined with its marginal's stored releases (exactly as :func:`release` answers it;
    from the matrices and noise scales only)."""
    inf = state.stored.get(batch.domain) if _infers(state, batch.domain) else None
    a = batch.dense()
    if inf is None:
        return np.full(batch.num_queries, fresh)
    both = StoredInference(inf.info + (a / fresh).T @ a, np.zeros(a.shape[1]))
    return np.asarray(both.variance(a), dtype=np.float64)


def _hypothetical(state: EngineState, batch: QueryBatch, fresh: float) -> FloatArray | None:
    """Each row's variance from every release (``dp.inference``) once a fresh release of
    ``batch`` at noise variance ``fresh`` joins them (None: not answered so). Computed on a
    copy with a cache of its own (its measurement's values are zeros: only variances are
    read), with the key the release will have, so that :func:`release` finds the same
    system."""
    if not (state.config.reuse_releases and _kept(batch) and len(state.inference)):
        return None
    zeros = np.zeros(batch.num_queries)
    m = Measurement.of_batch(len(state.inference), batch, zeros, fresh)
    est = Inference((*state.inference.measurements, m)).estimate(batch)
    return None if est is None else est[1]


def _pick(
    candidates: Sequence[tuple[FloatArray, FloatArray] | None],
) -> tuple[FloatArray, FloatArray]:
    """The candidate ``(answers, variances)`` with the smallest largest variance (the first
    of equals); the first is always given."""
    best = candidates[0]
    assert best is not None
    for c in candidates[1:]:
        if c is not None and float(np.max(c[1])) < float(np.max(best[1])):
            best = c
    return best


def _fresh_variances(state: EngineState, batch: QueryBatch, fresh: float) -> FloatArray:
    """Each row's variance in the answer :func:`release` gives a fresh release of ``batch``
    at noise variance ``fresh``: the better (:func:`_pick`) of its combination with its
    marginal's stored releases and the least squares over every release with it. From the
    matrices and noise scales only."""
    comb = _combined_variances(state, batch, fresh)
    hypo = _hypothetical(state, batch, fresh)
    zeros = np.zeros(batch.num_queries)
    return _pick([(zeros, comb), None if hypo is None else (zeros, hypo)])[1]


def _needed_fresh(
    state: EngineState, batch: QueryBatch, max_error: float, known: FloatArray | None
) -> float:
    """The largest noise variance of a fresh release of ``batch`` whose answer meets
    ``max_error`` in every row (to 1%): at least what the combination with its marginal's
    stored releases needs, at most what a full combination with the best earlier source
    (``known``, each row's variance) would; bisected between."""
    safe = fresh_variance_needed(max_error, _prior_variances(state, batch).tolist())
    top = safe if known is None else fresh_variance_needed(max_error, known.tolist())

    def meets(v: float) -> bool:
        return _meets(_tuple(np.sqrt(_fresh_variances(state, batch, v))), max_error)

    if top <= safe or not meets(safe):
        return safe if meets(safe) else max_error * max_error
    if meets(top):
        return top
    lo, hi = safe, top  # lo meets, hi does not
    while hi > lo * 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo


def _requested(state: EngineState, batch: QueryBatch, max_error: float) -> Decision:
    """Default mode, with a request: free from earlier releases when their stated error
    meets it, else a fresh release at the least charge that meets it (``dp.accuracy``)."""
    cfg, acct = state.config, state.accountant
    good = _is_good(state, batch)
    known = _best(state, batch, stored=True)
    if known is not None and _meets(_tuple(np.sqrt(np.maximum(known[1], 0.0))), max_error):
        return _from_known(state, batch, good)(known)
    known_error = math.inf if known is None else float(np.sqrt(np.max(known[1])))
    asked = f"the standard error asked (lapras.max_error = {max_error:.4g})"
    earlier = (
        "no earlier release answers it"
        if known is None
        else f"earlier releases answer it with a standard error of {known_error:.4g}"
    )
    if state.fresh >= cfg.stream_length:
        raise AccuracyUnavailableError(
            f"{asked} cannot be met: {earlier}, and this epoch's stream length is used up",
            hint="ask with a larger lapras.max_error; start a new epoch for new queries",
        )
    sens = acct.sensitivity_of(*batch_sensitivity(batch, cfg.contribution, state.domain))
    limit = min(online_left(state.pacing), acct.remaining())
    needed = _needed_fresh(state, batch, max_error, None if known is None else known[1])
    charge = least_charge(acct, variance=needed, sensitivity=sens, limit=limit)
    if charge is None or not acct.check(charge):
        best = known_error
        if limit > 0.0:
            at_limit = variance_at(acct, limit, sens)
            best = min(best, float(np.sqrt(np.max(_fresh_variances(state, batch, at_limit)))))
        can = (
            f"the budget left gives it a standard error of {best:.4g} at best"
            if math.isfinite(best)
            else "no budget is left for it"
        )
        raise AccuracyUnavailableError(
            f"{asked} cannot be met: {can}",
            detail=f"Online budget left: {limit:.4g} {_unit(acct)}; {earlier}.",
            hint="ask with a larger lapras.max_error (the NOTICE of an answer, and EXPLAIN of "
            "a statement, say what it gets without one)",
        )
    after = spend(_skipped(state), charge)
    ev = Charged(
        position=state.position + 1,
        b=state.bad + 1,
        key=batch.key,
        pool=Pool.BAD,
        amount=charge,
        noise=acct.noise,
        scale=acct.noise_scale(charge, sens),
        sensitivity=sens,
        pacing=after,
    )
    return Decision(kind=DecisionKind.FRESH, batch=batch, events=(ev,), charge=ev)


def _unit(acct: AnyAccountant) -> str:
    return "mu^2" if acct.kind is AccountantKind.GDP else "epsilon"


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    """What :func:`decide` would do with a statement, without doing it (a cost preview):
    how it would be answered (None: refused, with ``refusal``), the charge, and the standard
    error each row would have. Public: computed from the state's public values only."""

    kind: DecisionKind | None
    charge: float
    std_errors: tuple[float, ...]
    refusal: BudgetExhaustedError | None = None
    status: BudgetStatus | None = None


def preview(state: EngineState, batch: QueryBatch, *, max_error: float | None = None) -> Preview:
    """The cost preview of ``batch``: :func:`decide`'s decision, its charge and the standard
    errors its answers would have (a fresh answer's as :func:`release` would combine it with
    the marginal's stored releases), with no event made: nothing is charged, drawn or stored,
    and the stream position does not move. Reads no data; the answers stored releases would
    give are not part of it."""
    st = status(state)
    try:
        d = decide(state, batch, max_error=max_error)
    except BudgetExhaustedError as e:
        return Preview(kind=None, charge=0.0, std_errors=(), refusal=e, status=st)
    if d.charge is None:
        return Preview(kind=d.kind, charge=0.0, std_errors=d.std_errors or (), status=st)
    fresh = noise_variance(d.charge.noise, d.charge.scale)
    var = _fresh_variances(state, batch, fresh) if state.config.reuse_releases else None
    errors = _expected_errors(state, d) if var is None else _tuple(np.sqrt(var))
    return Preview(kind=d.kind, charge=d.charge.amount, std_errors=errors, status=st)


def _plan_charge(state: EngineState, batch: QueryBatch) -> Charged:
    cfg = state.config
    if state.fresh >= cfg.stream_length:
        raise StreamLengthExhaustedError(
            "this epoch's stream length is used up: all of its online releases have been made",
            hint="repeats and queries answerable from stored releases are still served; "
            "start a new epoch for new queries",
        )
    b, n = state.bad + 1, state.position + 1
    step = _next_step(state)
    if step is None:
        raise ReserveExhaustedError(
            "this epoch's reserve budget is used up (below eps_min): no further fresh answers",
            hint="repeats and queries answerable from stored releases are still served; "
            "start a new epoch for new queries",
        )
    acct = state.accountant
    amount = min(step.amount, acct.remaining())
    if not (amount > 0.0 and acct.check(amount)):
        raise PrivacyBudgetExhaustedError(
            "this epoch's privacy budget is used up: no further fresh answers",
            hint="repeats and queries answerable from stored releases are still served; "
            "start a new epoch for new queries",
        )
    sens = acct.sensitivity_of(*batch_sensitivity(batch, cfg.contribution, state.domain))
    return Charged(
        position=n,
        b=b,
        key=batch.key,
        pool=step.pool,
        amount=amount,
        noise=acct.noise,
        scale=acct.noise_scale(amount, sens),
        sensitivity=sens,
        pacing=step.after,
    )


def _next_step(state: EngineState) -> Step | None:
    """The pacing's charge for the next fresh answer (None: the reserve is spent). Public:
    a function of the stream positions, the counts of answers and the configuration."""
    cfg = state.config
    if cfg.allocation_kind is Allocation.STEADY:
        k = state.fresh + 1
        return steady_charge(state.pacing, k=k, expected=cfg.expected, tail=state.tail)
    return next_charge(
        state.pacing,
        b=state.bad + 1,
        n=state.position + 1,
        stream_length=cfg.stream_length,
        t=cfg.t,
        allocation=cfg.allocation_kind,
        static_pacing=cfg.pacing_kind,
        reallocate=cfg.reallocate_leftovers,
        min_charge=state.min_charge,
        reserve_pacing=cfg.reserve_kind,
    )


def batch_sensitivity(
    batch: QueryBatch, contribution: Contribution, domain: Domain
) -> tuple[float, float]:
    """The (L2, L1) sensitivity of ``batch`` (over a marginal of the epoch's ``domain``) for
    the epoch's neighbours: the batch's largest column norms for row-level privacy, else the
    bounds of ``dp.units`` with each marginal cell aggregating ``|domain| / |marginal|`` cells.
    A question about units (``dp.per_unit``) has its own bound: a row per unit and group."""
    if isinstance(batch.domain, UnitsDomain):
        return batch.domain.sensitivities(batch.matrix)
    if contribution.row_level:
        return batch.sensitivity_l2, batch.sensitivity_l1
    return contribution.sensitivities(batch.matrix, domain.size // batch.domain.size)


def release(
    state: EngineState, decision: Decision, data: Pin | FloatArray, sampler: Sampler
) -> ReleaseResult:
    """The answers for a decision whose events have been applied to ``state``.

    For FRESH this is the online release. Mechanism: ``W x + Z`` with ``Z`` i.i.d. Gaussian of
    standard deviation ``sigma`` (or Laplace of scale ``b``) calibrated by the accountant to the
    batch's L2 (L1) sensitivity for the admitted charge; add/remove-one-row neighbours; the
    guarantee is the charge's (``(eps_b, delta_i)``-DP by the AGM, Balle & Wang 2018 Thm 8;
    ``mu_b``-GDP, Dong et al. 2022 Thm 2.7; or ``eps_b``-DP, Laplace). In the default mode the
    answers are the GLS over the measurement and the marginal's stored releases (post-
    processing). Returns the ``Released`` event to persist and apply.
    """
    if decision.kind is not DecisionKind.FRESH:
        if decision.answers is None or decision.std_errors is None:
            raise InternalError("a stored answer is missing")
        return ReleaseResult(answers=decision.answers, std_errors=decision.std_errors)
    y, var = _measured(state, decision, data, sampler)
    batch = decision.batch
    prior = state.stored.get(batch.domain) if state.config.reuse_releases else None
    comb = None if prior is None else prior.add(batch.dense(), y, np.full(len(y), var))
    return _released(decision, y, var, comb, _with_every_release(state, [(batch, y, var)], 0))


def _with_every_release(
    state: EngineState, fresh: Sequence[tuple[QueryBatch, FloatArray, float]], i: int
) -> list[tuple[FloatArray, FloatArray] | None]:
    """Estimates of ``fresh[i]``'s batch from every release (``dp.inference``): with only
    that fresh release joining the earlier ones (as :func:`decide` promised it), and with the
    whole group's (default mode, kept batches only)."""
    if not state.config.reuse_releases or not len(state.inference):
        return []
    base = state.inference
    batch, y, var = fresh[i]
    out: list[tuple[FloatArray, FloatArray] | None] = []
    if _kept(batch):
        m = Measurement.of_batch(len(base), batch, y, var)
        # alone, it is the release the ledger will hold: the epoch's cache is kept (its key
        # is its own); within a group, another release will hold that key: a cache of its own
        own = base.add(m) if len(fresh) == 1 else Inference((*base.measurements, m))
        out.append(own.estimate(batch))
    group = base
    for b, yy, v in fresh:
        if _kept(b):
            group = group.add(Measurement.of_batch(len(group), b, yy, v))
    if len(fresh) > 1 and len(group) > len(base):
        out.append(group.estimate(batch))
    return out


def _measured(
    state: EngineState, decision: Decision, data: Pin | FloatArray, sampler: Sampler
) -> tuple[FloatArray, float]:
    """A FRESH decision's measurement ``W x + Z`` and its noise variance (the mechanism of
    :func:`release`); its charge must be applied to ``state``."""
    c = decision.charge
    if c is None or state.pending.get(c.position) != c:
        raise InternalError("the charge must be applied before the noise is drawn")
    batch = decision.batch
    x = as_pin(state.domain, data).marginal(batch.domain)
    k = batch.num_queries
    if c.noise is NoiseKind.GAUSSIAN:
        noise = np.asarray(sampler.gaussian(c.scale, k), dtype=np.float64)
    else:
        noise = np.asarray(sampler.laplace(c.scale, k), dtype=np.float64)
    return batch.answer(x) + noise.reshape(-1), noise_variance(c.noise, c.scale)


def _released(
    decision: Decision,
    y: FloatArray,
    var: float,
    comb: StoredInference | None,
    every: Sequence[tuple[FloatArray, FloatArray] | None] = (),
) -> ReleaseResult:
    """The ``Released`` event of a FRESH decision's measurement ``y``: its answers are ``y``,
    or the GLS estimate from ``comb`` (stored releases that include this one), or one from
    every release (``every``, :func:`_with_every_release`), whichever has the smallest
    largest variance (:func:`_pick`)."""
    c, batch = decision.charge, decision.batch
    assert c is not None
    found = (y, np.full(len(y), var))
    if comb is not None:
        found = comb.estimate(batch.dense())
    ans, v = _pick([found, *every])
    answers, std = _tuple(ans), _tuple(np.sqrt(np.maximum(v, 0.0)))
    ev = Released(
        position=c.position,
        key=batch.key,
        batch=batch if _kept(batch) else None,
        measurement=_tuple(y),
        noise_variance=var,
        answers=answers,
        std_errors=std,
    )
    return ReleaseResult(answers=answers, std_errors=std, events=(ev,))


def _kept(batch: QueryBatch) -> bool:
    """Whether a fresh release's batch is kept in its event (for inference over every
    release): over a small marginal, or with few weights (the ledger's size per answer is
    bounded either way)."""
    if batch.domain.derived:  # a question about units: no marginal of the histogram
        return False
    return batch.domain.size <= REUSE_MAX_CELLS or batch.matrix.nnz <= KEEP_NNZ


def release_all(
    state: EngineState, decisions: Sequence[Decision], data: Pin | FloatArray, sampler: Sampler
) -> tuple[list[ReleaseResult], EngineState]:
    """:func:`release` for each decision of a group whose charges have all been applied, in
    turn (each one's events applied before the next); the results and the state after them.

    Each release has the guarantee :func:`release` states. Their noise is drawn from
    ``sampler`` in one call per (distribution, scale) for the whole group
    (:class:`dp.noise.DrawnAhead`: disjoint slices of one i.i.d. draw, each used once), which
    is the same distribution as a draw per release; it is drawn here, after every charge of
    the group is applied (each is checked first). In the default mode, the answers of the
    group's releases over one marginal are the GLS over all of them and the marginal's
    stored releases (post-processing of values released together, before any is sent): one
    least-squares system per marginal and group, not one per release."""
    fresh = [d for d in decisions if d.kind is DecisionKind.FRESH]
    requests = []
    for d in fresh:  # every charge applied before any noise is drawn
        c = d.charge
        if c is None or state.pending.get(c.position) != c:
            raise InternalError("the charge must be applied before the noise is drawn")
        kind = "gaussian" if c.noise is NoiseKind.GAUSSIAN else "laplace"
        requests.append((kind, c.scale, d.batch.num_queries))
    ahead = DrawnAhead(sampler, requests)
    measured = {id(d): _measured(state, d, data, ahead) for d in fresh}
    state0 = state  # (before any of the group's releases: what the group's estimates start from)
    # default mode: the group's releases over each marginal, added in order to its value
    combined: dict[Domain, StoredInference] = {}
    if state.config.reuse_releases:
        counts = Counter(d.batch.domain for d in fresh if _infers(state, d.batch.domain))
        for d in fresh:
            dom = d.batch.domain
            prior = combined.get(dom, state.stored.get(dom))
            if counts.get(dom, 0) < 2 and prior is None:
                continue  # a marginal's first release, alone: answered as measured
            y, var = measured[id(d)]
            a, v = d.batch.dense(), np.full(len(y), var)
            combined[dom] = StoredInference.of(a, y, v) if prior is None else prior.add(a, y, v)
    group = [(d.batch, *measured[id(d)]) for d in fresh]
    results = []
    for d in decisions:
        if d.kind is DecisionKind.FRESH:
            y, var = measured[id(d)]
            every = _with_every_release(state0, group, fresh.index(d))
            result = _released(d, y, var, combined.get(d.batch.domain), every)
        else:
            result = release(state, d, data, ahead)
        for ev in result.events:
            state = apply(state, ev)
        results.append(result)
    return results, state


def answer(
    state: EngineState,
    batch: QueryBatch,
    data: Pin | FloatArray,
    sampler: Sampler,
    *,
    max_error: float | None = None,
) -> tuple[EngineState, Decision, ReleaseResult]:
    """decide -> apply -> release -> apply, in memory (benchmarks, tests, simulations).

    The same order as the proxy's, without persistence: the decision's events (for a fresh
    answer, the charge) are applied before the noise is drawn. Raises what :func:`decide`
    raises; the events of both steps are in ``decision.events`` and ``result.events``.
    """
    decision = decide(state, batch, max_error=max_error)
    for ev in decision.events:
        state = apply(state, ev)
    result = release(state, decision, data, sampler)
    for ev in result.events:
        state = apply(state, ev)
    return state, decision, result


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetStatus:
    """Public bookkeeping of an epoch (safe to show: it depends on no data)."""

    unit: str
    total: float
    spent: float
    #: ``spent`` as epsilon at the epoch's delta (the same value for the basic and pure
    #: accountants; from mu-GDP for gdp, Dong et al. 2022 Cor. 2.13).
    spent_epsilon: float
    online_releases: int
    stream_length: int
    position: int
    b_est: float | None
    reserve: float
    #: The Steady pacing's expected number of fresh answers E (None for the paper's pacings).
    expected_fresh: int | None = None
    #: The standard error of a count (over the whole table) answered with the next fresh
    #: answer at the pacing (None when no fresh answer can be made): what the next statement
    #: that needs fresh noise gets, unless it asks for an accuracy (``lapras.max_error``).
    next_std_error: float | None = None


def next_count_error(state: EngineState) -> float | None:
    """The standard error a count (sensitivity: one privacy unit's rows) would have if it
    were the next fresh answer, at the pacing's next charge; None when no fresh answer can
    be made (the stream length, the reserve or the budget is used up). Public."""
    cfg = state.config
    acct = state.accountant
    if state.fresh >= cfg.stream_length or state.mm_pending:
        return None
    step = _next_step(state)
    if step is None:
        return None
    amount = min(step.amount, acct.remaining())
    if not (amount > 0.0 and acct.check(amount)):
        return None
    rows = float(cfg.contribution.rows)
    scale = acct.noise_scale(amount, acct.sensitivity_of(rows, rows))
    return math.sqrt(noise_variance(acct.noise, scale))


def status(state: EngineState) -> BudgetStatus:
    acct = state.accountant
    steady = state.config.allocation_kind is Allocation.STEADY
    reserve = state.pacing.reserve
    if steady:
        # the part of the pool the rule keeps for the answers beyond E
        cfg, k = state.config, state.fresh + 1
        kept = state.tail * max(cfg.expected, k)
        reserve = state.pacing.bad_pool * kept / steady_horizon(k, cfg.expected, state.tail)
    return BudgetStatus(
        unit="mu^2" if acct.kind is AccountantKind.GDP else "epsilon",
        total=acct.total,
        spent=acct.spent,
        spent_epsilon=(
            gdp_epsilon(math.sqrt(acct.spent), state.config.delta)
            if acct.kind is AccountantKind.GDP and acct.spent > 0
            else acct.spent
        ),
        online_releases=state.fresh,
        stream_length=state.config.stream_length,
        position=state.position,
        b_est=state.pacing.b_est,
        reserve=reserve,
        expected_fresh=state.config.expected if steady else None,
        next_std_error=next_count_error(state),
    )
