"""The error-aware cap of the predicted set P, judged by a held-out backtest (pure).

A predicted set costs budget: the Matrix Mechanism's share of the epoch is spent on P whether or
not the epoch asks P's statements. On exploratory logs the model the cap used before (each
candidate's probability of recurring, learned from the log) kept Ps that made the epoch worse
than answering everything online, while the backtest printed beside it said so. The cap now
*is* a backtest, on windows of the log it did not learn from:

1. **Origins.** The last :data:`ORIGINS` windows of the log (of the epoch's length, aligned to
   end at "now") that ask the table and have history before them. At each, the predictor is
   run on the log before the window only (its ranking, its S and E), and every candidate P
   below is priced against the statements the window really asked.
2. **Candidates** (*policies*, rules that turn a log into a P and a split): the literal log,
   every earlier statement, the most recently asked first, cut at 1 and 2 times the typical
   window's distinct statements D (:mod:`rewriter.stream_length`); the predictor's ranking cut
   at 1/2, 1 and 2 times D; each at a Matrix Mechanism share of :data:`SHARES` (the configured
   split's only, when one is configured). "Every earlier statement" is always among them, so
   a P kept covers less than it only where the backtest says that is better.
3. **Pricing** (:func:`window_error`). Each candidate's release is planned as the engine plans
   it and priced by ``dp.release_bound`` (the blocks, the batches each keeps, and each row's
   variance under a product strategy: an upper bound of the engine's strategy error, milliseconds
   where the engine's planner takes minutes). The window's distinct statements are then answered
   in order as the engine answers them: a statement of P from the release while the release is
   at least as accurate as the next fresh answer, else fresh, at the pacing of the epoch
   (``dp.pacing``'s steady rule over E fresh answers in the default mode; the paper's static
   warm-up and reserve otherwise), at its own sensitivity, refused after S fresh answers. The
   window's MAE is the mean over the answered rows of ``sqrt(2/pi)`` times each row's noise sd.
4. **The decision.** A candidate's gain at an origin is ``1 - MAE(P) / MAE(online)``. A P is
   kept only when its mean gain over the origins exceeds the model's own error: the standard
   error of that mean (its spread over the origins; :data:`ONE_ORIGIN_SPREAD` with a single
   origin) plus :data:`MODEL_ERROR`, how far the model's error may sit from the engine's. Of the
   candidates that pass, and never refuse more statements than online at an origin, the one of
   largest ``mean gain - error`` is kept; else P is empty ("no prediction kept: the backtest
   says answering online is as good"). A log with no such origin (one window of the epoch's
   length, or a source without times) cannot be backtested: P is empty then too.

The chosen policy is applied to the whole log; E is the typical window's statements less the
share the backtest found answered from P, S the log's high quantile (``rewriter.stream_length``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from dp.calibration import agm_sigma, gdp_mu
from dp.domain import QueryBatch
from dp.marginals import block_shares, budget_shares
from dp.pacing import steady_horizon, steady_tail, warmup_length
from dp.release_bound import BlockBound, FactorCache, bound_release

from .stream_length import StreamEstimate, estimate

Ident = tuple[str, str, str]
Split = tuple[float, float, float, float]

#: The Matrix Mechanism shares the cap tries when no split is configured; the warm-up and the
#: reserve keep 1/6 of the budget each (less above a share of 1/2), the paced answers the rest.
SHARES = (0.0625, 0.125, 0.25, 0.5, 0.75, 0.9)
#: The literal log's and the ranking's cuts, in typical windows' distinct statements D.
LITERAL_SIZES = (1.0, 2.0)
RANKED_SIZES = (0.5, 1.0, 2.0)
#: The most origins the backtest is made at (the latest windows of the log).
ORIGINS = 4
#: The levels of the log's windows E may be taken at (``StreamEstimate.level``: None is the
#: mean); the backtest keeps the one that answers its windows best online.
E_LEVELS: tuple[float | None, ...] = (None, 0.75, 0.9, 1.0)
#: How far the model's MAE may sit from the engine's, relatively: a P must gain more.
MODEL_ERROR = 0.03
#: The standard error a gain measured at a single origin is given.
ONE_ORIGIN_SPREAD = 0.1
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
NO_GAIN = "no prediction kept: the backtest says answering online is as good"
NO_ORIGIN = (
    "no prediction kept: the log has no earlier window of the epoch's length to backtest a "
    "prediction on"
)


def split_for(mm: float) -> Split:
    """The split (MM, warm-up, paced online, reserve) with a Matrix Mechanism share ``mm``."""
    side = min(1.0 / 6.0, (1.0 - mm) / 3.0)
    return (mm, side, 1.0 - mm - 2.0 * side, side)


# --------------------------------------------------------------------------------------------
# the epoch's error model


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochModel:
    """The next epoch's budget and how it spends it (public parameters)."""

    epsilon: float
    delta: float
    accounting: str = "gdp"
    allocation: Literal["steady", "static"] = "steady"

    def sd(self, fraction: float, stream_length: int) -> float:
        """The noise sd, at sensitivity 1, of one release of ``fraction`` of the budget."""
        if fraction <= 0:
            return math.inf
        if self.accounting == "pure":  # Laplace b = 1 / (epsilon f); sd = b sqrt 2
            return math.sqrt(2.0) / (self.epsilon * fraction)
        if self.accounting == "basic":
            return _agm(self.epsilon * fraction, self.delta / (stream_length + 1))
        return 1.0 / (_mu(self.epsilon, self.delta) * math.sqrt(fraction))

    def online(self, split: Split, with_p: bool, expected: int, stream_length: int) -> _Pacing:
        f_mm, f_init, f_bad, f_res = split
        if not with_p:  # the engine gives the release's share to the online pool
            f_bad, f_mm = f_bad + f_mm, 0.0
        return _Pacing(
            model=self,
            init=f_init,
            bad=f_bad,
            reserve=f_res,
            expected=max(1, expected),
            stream_length=max(1, stream_length),
        )


@functools.lru_cache(maxsize=64)
def _mu(epsilon: float, delta: float) -> float:
    return gdp_mu(epsilon, delta)


@functools.lru_cache(maxsize=4096)
def _agm(epsilon: float, delta: float) -> float:
    return agm_sigma(epsilon, delta)


@dataclass(slots=True, kw_only=True)
class _Pacing:
    """The fresh answers' charges, one after the other (``dp.pacing``)."""

    model: EpochModel
    init: float
    bad: float
    reserve: float
    expected: int
    stream_length: int
    made: int = 0
    pool: float = field(init=False)
    tail: float = field(init=False)

    def __post_init__(self) -> None:
        self.pool = self.init + self.bad + self.reserve
        self.tail = steady_tail(self.init, self.bad, self.reserve)

    def next_fraction(self) -> float | None:
        """The next fresh answer's share of the budget (None: S fresh answers made)."""
        k = self.made + 1
        if k > self.stream_length:
            return None
        if self.model.allocation == "steady":
            return self.pool / steady_horizon(k, float(self.expected), self.tail)
        # the paper's static allocation, in expectation: the warm-up over its T answers, the
        # bad pool over the rest of E, then the reserve halving
        t = warmup_length("log2", self.stream_length)
        if k <= t:
            return self.init / t
        if k <= max(self.expected, t + 1):
            return self.bad / max(1.0, self.expected - t)
        return self.reserve / 2.0 ** (k - max(self.expected, t + 1))

    def take(self, fraction: float) -> None:
        self.made += 1
        self.pool -= fraction


@functools.lru_cache(maxsize=1 << 16)
def noise_sensitivity(batch: QueryBatch, accounting: str) -> float:
    """The sensitivity an online answer of ``batch`` is calibrated to, as the engine
    calibrates it: L1 under ``pure`` (Laplace), L2 otherwise (Gaussian)."""
    return batch.sensitivity_l1 if accounting == "pure" else batch.sensitivity_l2


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One window answered by the model: its MAE over the answered rows, the rows, the
    statements answered from the release, answered fresh and refused."""

    mae: float
    rows: int
    released: int
    fresh: int
    refused: int


def release_variances(
    blocks: Sequence[BlockBound],
    idents: Mapping[int, Ident],
    model: EpochModel,
    share: float,
    stream_length: int,
) -> dict[Ident, np.ndarray]:
    """Each statement of P the release answers, with its rows' variances: ``sigma^2 q / c_g^2``
    (``sigma`` the sd of the release's share of the budget, ``c_g`` the block's share of the
    release: ``dp.marginals.block_shares``). ``idents``: ``id`` of batch -> statement."""
    laplace = model.accounting == "pure"
    shares, _ = block_shares([b.error for b in blocks], laplace=laplace)
    sigma2 = model.sd(share, stream_length) ** 2
    out: dict[Ident, np.ndarray] = {}
    for b, c in zip(blocks, shares, strict=True):
        for batch, q in zip(b.batches, b.row_variances, strict=True):
            out[idents[id(batch)]] = sigma2 * q / (c * c)
    return out


def window_error(
    model: EpochModel,
    stream: Sequence[tuple[Ident, QueryBatch]],
    release: Mapping[Ident, np.ndarray],
    split: Split,
    *,
    stream_length: int,
    expected: int,
) -> Outcome:
    """The window's distinct statements answered in order, as the engine answers them (module
    doc, step 3); ``release``: the rows' variances of the statements P's release answers."""
    pacing = model.online(split, bool(release), expected, stream_length)
    total = 0.0
    rows = released = fresh = refused = 0
    for ident, batch in stream:
        n = batch.num_queries
        fraction = pacing.next_fraction()
        sd = (
            noise_sensitivity(batch, model.accounting) * model.sd(fraction, stream_length)
            if fraction is not None
            else math.inf
        )
        known = release.get(ident)
        if known is not None and float(np.sum(known)) <= n * sd * sd:
            total += float(np.sum(np.sqrt(known)))
            released += 1
        elif fraction is not None:
            pacing.take(fraction)
            total += n * sd
            fresh += 1
        else:
            refused += 1
            continue
        rows += n
    mae = _SQRT_2_OVER_PI * total / rows if rows else math.nan
    return Outcome(mae=mae, rows=rows, released=released, fresh=fresh, refused=refused)


# --------------------------------------------------------------------------------------------
# candidates


@dataclass(frozen=True, slots=True)
class Policy:
    """A rule that makes P from a log: ``source`` (``literal``: every earlier statement, the
    most recent first; ``ranked``: the predictor's ranking) cut at ``size`` typical windows'
    statements, released with a Matrix Mechanism share ``share``."""

    source: Literal["literal", "ranked"]
    size: float
    share: float

    def describe(self) -> str:
        what = "every earlier statement" if self.source == "literal" else "the ranking"
        return f"{what}, the first {self.size:g} x D, at an MM share of {self.share:g}"

    def cut(self, typical: float) -> int:
        return max(1, round(self.size * typical))


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """A statement of a candidate P: its identity, batch, probability and template."""

    ident: Ident
    batch: QueryBatch
    probability: float
    template: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OriginResult:
    """The backtest at one origin: the window asked (its distinct statements, in order), the
    estimate the log before it gave, the online-only outcome, and each policy's."""

    start: float
    stream: tuple[tuple[Ident, QueryBatch], ...] = field(repr=False)
    estimate: StreamEstimate
    online: Outcome
    outcomes: Mapping[Policy, Outcome] = field(repr=False)
    #: each (source, size)'s P there, and its release (for the per-template values)
    sets: Mapping[tuple[str, float], tuple[Entry, ...]] = field(repr=False)
    expected: Mapping[Policy, int] = field(repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    """A policy's gains over the origins and the error they are judged against."""

    policy: Policy
    gains: tuple[float, ...]
    mean: float
    error: float
    refuses_more: bool

    @property
    def score(self) -> float:
        return self.mean - self.error


@dataclass(frozen=True, slots=True, kw_only=True)
class CapDecision:
    """What the cap chose for one table, and why (``lapras predict`` prints it)."""

    table: str
    policy: Policy | None
    reason: str  # "kept", "no-gain" or "no-origin"
    best: Judged | None
    origins: tuple[OriginResult, ...] = field(repr=False)
    estimate: StreamEstimate | None
    stream_length: int
    #: E with the P kept, and with P empty; the level of the log's windows it is taken at
    expected_fresh: int
    online_expected_fresh: int
    level: float | None
    split: Split
    k: int = 0
    #: the mean over the origins of the window's MAE with the policy's P and online only
    mae: float | None = None
    online_only_mae: float | None = None
    #: the release of the P kept, as priced (for each template's share of the budget)
    blocks: tuple[BlockBound, ...] = field(default=(), repr=False)
    entries: tuple[Entry, ...] = field(default=(), repr=False)
    judged: tuple[Judged, ...] = field(default=(), repr=False)

    @property
    def text(self) -> str:
        """The decision in words."""
        if self.reason == "no-origin":
            return NO_ORIGIN
        b = self.best
        if self.policy is None or b is None:
            if b is None:
                return NO_GAIN
            return (
                f"{NO_GAIN} (its best candidate, {b.policy.describe()}, gains "
                f"{b.mean:+.1%} over {len(b.gains)} held-out window(s), against an error of "
                f"{b.error:.1%})"
            )
        return (
            f"P kept: {b.policy.describe()} (D = {self.estimate.typical if self.estimate else 0:.1f}"
            f" statements): it gains {b.mean:+.1%} over answering online in {len(b.gains)} "
            f"held-out window(s), against an error of {b.error:.1%}"
        )


def _judge(policy: Policy, origins: Sequence[OriginResult]) -> Judged | None:
    gains = []
    more = False
    for o in origins:
        got = o.outcomes.get(policy)
        if got is None or math.isnan(got.mae) or math.isnan(o.online.mae) or o.online.mae == 0:
            continue
        gains.append(1.0 - got.mae / o.online.mae)
        more |= got.refused > o.online.refused
    if not gains:
        return None
    n = len(gains)
    mean = float(np.mean(gains))
    spread = float(np.std(gains, ddof=1)) / math.sqrt(n) if n > 1 else ONE_ORIGIN_SPREAD
    return Judged(
        policy=policy, gains=tuple(gains), mean=mean, error=MODEL_ERROR + spread, refuses_more=more
    )


# --------------------------------------------------------------------------------------------
# the backtest


@dataclass(frozen=True, slots=True, kw_only=True)
class Log:
    """What the cap needs of a log before some time, for one table: the predictor's ranking,
    every candidate by identity, and the earlier statements most recent first."""

    ranked: tuple[Entry, ...]
    candidates: Mapping[Ident, Entry]
    literal: tuple[Entry, ...]


def _policies(split: Split | None) -> list[Policy]:
    shares = (split[0],) if split is not None else SHARES
    out = [Policy("literal", s, m) for s in LITERAL_SIZES for m in shares]
    out += [Policy("ranked", s, m) for s in RANKED_SIZES for m in shares]
    return out


def _set(policy: Policy | tuple[str, float], log: Log, typical: float) -> tuple[Entry, ...]:
    source, size = (policy.source, policy.size) if isinstance(policy, Policy) else policy
    items = log.literal if source == "literal" else log.ranked
    return items[: max(1, round(size * typical))]


def _released(
    entries: Sequence[Entry], model: EpochModel, weighted: bool, cache: FactorCache
) -> tuple[tuple[BlockBound, ...], dict[int, Ident]]:
    if not entries:
        return (), {}
    blocks = bound_release(
        [e.batch for e in entries],
        laplace=model.accounting == "pure",
        weights=[max(e.probability, 1e-9) for e in entries] if weighted else None,
        cache=cache,
    )
    return blocks, {id(e.batch): e.ident for e in entries}


def _hit_rate(origins: Sequence[OriginResult], policy: Policy) -> float | None:
    """The share of a window's statements the policy's P answered from the release, over the
    origins already made (None before the first)."""
    rates = [
        o.outcomes[policy].released / len(o.stream)
        for o in origins
        if policy in o.outcomes and o.stream
    ]
    return float(np.mean(rates)) if rates else None


def _origin(
    start: float,
    window: Sequence[tuple[Ident, QueryBatch]],
    log: Log,
    est: StreamEstimate,
    policies: Sequence[Policy],
    split: Split | None,
    model: EpochModel,
    weighted: bool,
    cache: FactorCache,
    before: Sequence[OriginResult],
    level: float | None,
) -> OriginResult:
    s_len = est.stream_length
    base = split if split is not None else split_for(SHARES[3])
    online = window_error(
        model, window, {}, base, stream_length=s_len, expected=est.expected_fresh(0.0, level)
    )
    outcomes: dict[Policy, Outcome] = {}
    sets: dict[tuple[str, float], tuple[Entry, ...]] = {}
    expected: dict[Policy, int] = {}
    planned: dict[tuple[Ident, ...], tuple[tuple[BlockBound, ...], dict[int, Ident]]] = {}
    for key in sorted({(p.source, p.size) for p in policies}):
        entries = _set(key, log, est.typical)
        if not entries:
            continue
        sets[key] = entries
        signature = tuple(e.ident for e in entries)
        if signature not in planned:  # a larger cut the log cannot fill is the same P
            planned[signature] = _released(entries, model, weighted, cache)
        blocks, idents = planned[signature]
        for p in policies:
            if (p.source, p.size) != key:
                continue
            rate = _hit_rate(before, p)
            if rate is None:
                rate = min(sum(e.probability for e in entries) / max(est.typical, 1.0), 1.0)
            e = est.expected_fresh(rate, level)
            sp = split if split is not None else split_for(p.share)
            release = release_variances(blocks, idents, model, sp[0], s_len)
            outcomes[p] = window_error(model, window, release, sp, stream_length=s_len, expected=e)
            expected[p] = e
    return OriginResult(
        start=start,
        stream=tuple(window),
        estimate=est,
        online=online,
        outcomes=outcomes,
        sets=sets,
        expected=expected,
    )


def decide(
    table: str,
    *,
    now: float,
    window: float,
    records: Sequence[tuple[float, Ident, QueryBatch, str]],
    log_at: Callable[[float], Log],
    model: EpochModel,
    split: Split | None,
    weighted: bool,
    stream_length: int | None = None,
    origins: int = ORIGINS,
    cache: FactorCache | None = None,
) -> CapDecision:
    """The cap for ``table`` (module doc). ``records``: the table's resolved statements before
    ``now`` as ``(time, identity, batch, key)``; ``log_at(t)``: the predictor's view of the log
    before ``t`` (its ranking and candidates, for this table); ``split``: the configured split
    (None: the cap chooses the MM share); ``stream_length``: S when the administrator sets it."""
    cache = cache or FactorCache()
    resolved = [_KeyRecord(t, key) for t, _, _, key in records]
    est_now = estimate(resolved, window=window, now=now)
    if est_now is not None and stream_length is not None:
        est_now = _with_s(est_now, stream_length)
    base = split if split is not None else split_for(SHARES[3])
    s_now = est_now.stream_length if est_now is not None else stream_length or 1

    # the origins: the latest windows that ask the table and have history before them
    by_window: dict[int, list[tuple[float, Ident, QueryBatch, str]]] = {}
    for rec in records:
        if rec[0] < now:
            by_window.setdefault(math.floor((rec[0] - now) / window), []).append(rec)
    windows: list[tuple[float, StreamEstimate, list[tuple[Ident, QueryBatch]]]] = []
    for w in sorted(by_window)[1:][-origins:]:
        start = now + w * window
        est = estimate([r for r in resolved if r.time < start], window=window, now=start)
        if est is None:
            continue
        if stream_length is not None:
            est = _with_s(est, stream_length)
        seen: set[Ident] = set()
        stream: list[tuple[Ident, QueryBatch]] = []
        for _, ident, batch, _ in sorted(by_window[w], key=lambda r: r[0]):
            if ident not in seen:
                seen.add(ident)
                stream.append((ident, batch))
        windows.append((start, est, stream))
    level = _level(windows, model, base)
    e_online = est_now.expected_fresh(0.0, level) if est_now is not None else s_now
    policies = _policies(split)
    made: list[OriginResult] = []
    for start, est, stream in windows:
        made.append(
            _origin(
                start,
                stream,
                log_at(start),
                est,
                policies,
                split,
                model,
                weighted,
                cache,
                made,
                level,
            )
        )
    judged = [j for p in policies if (j := _judge(p, made)) is not None]
    fit = [j for j in judged if not j.refuses_more]
    best = max(fit, key=lambda j: j.score, default=None)
    online = _mean([o.online.mae for o in made])
    decision = CapDecision(
        table=table,
        policy=None,
        reason="no-origin" if not made else "no-gain",
        best=best,
        origins=tuple(made),
        estimate=est_now,
        stream_length=s_now,
        expected_fresh=e_online,
        online_expected_fresh=e_online,
        level=level,
        split=base,
        mae=online,
        online_only_mae=online,
        judged=tuple(judged),
    )
    if best is None or best.score <= 0 or est_now is None:
        return decision
    policy = best.policy
    entries = _set(policy, log_at(now), est_now.typical)
    blocks, _ = _released(entries, model, weighted, cache)
    return replace(
        decision,
        policy=policy,
        reason="kept",
        expected_fresh=est_now.expected_fresh(_hit_rate(made, policy) or 0.0, level),
        split=split if split is not None else split_for(policy.share),
        k=len(entries),
        mae=_mean([o.outcomes[policy].mae for o in made if policy in o.outcomes]),
        blocks=blocks,
        entries=entries,
    )


def _level(
    windows: Sequence[tuple[float, StreamEstimate, Sequence[tuple[Ident, QueryBatch]]]],
    model: EpochModel,
    split: Split,
) -> float | None:
    """The level of the log's windows E is taken at (:data:`E_LEVELS`): the one whose online
    answers of the backtest's windows have the least mean MAE (the first of equals)."""
    best: tuple[float, float | None] | None = None
    for level in E_LEVELS:
        maes = [
            window_error(
                model,
                stream,
                {},
                split,
                stream_length=est.stream_length,
                expected=est.expected_fresh(0.0, level),
            ).mae
            for _, est, stream in windows
        ]
        got = _mean(maes)
        if got is not None and (best is None or got < best[0] * (1 - 1e-9)):
            best = (got, level)
    return best[1] if best is not None else None


@dataclass(frozen=True, slots=True)
class _KeyRecord:
    time: float
    key: str


def _with_s(est: StreamEstimate, s: int) -> StreamEstimate:
    return replace(est, stream_length=s)


def _mean(values: Sequence[float]) -> float | None:
    ok = [v for v in values if not math.isnan(v)]
    return float(np.mean(ok)) if ok else None


# --------------------------------------------------------------------------------------------
# what each template of P is worth


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateWorth:
    """One template of the P kept: its share of the budget (the release's share times the
    share of each block it is answered from, split among a block's statements by their weight
    in the block's workload), and the mean MAE of the held-out windows with the policy's P and
    with P less the template's statements (its blocks priced again)."""

    template: str
    budget_share: float
    mae_with: float
    mae_without: float


def template_worth(
    d: CapDecision, model: EpochModel, weighted: bool, *, limit: int = 8
) -> list[TemplateWorth]:
    """The ``limit`` templates of the kept P expected most (by the sum of their statements'
    probabilities), each with what it is worth (:class:`TemplateWorth`)."""
    if d.policy is None or not d.entries:
        return []
    laplace = model.accounting == "pure"
    weights = {id(e.batch): (e.probability if weighted else 1.0) for e in d.entries}
    shares = budget_shares(
        block_shares([b.error for b in d.blocks], laplace=laplace)[0], laplace=laplace
    )
    share_of: dict[int, float] = {}
    for share, b in zip(shares, d.blocks, strict=True):
        mass = sum(weights[id(x)] * x.num_queries for x in b.batches) or 1.0
        for x in b.batches:
            share_of[id(x)] = d.split[0] * share * weights[id(x)] * x.num_queries / mass
    groups: dict[str, list[Entry]] = {}
    for e in d.entries:
        groups.setdefault(e.template, []).append(e)
    ranked = sorted(groups.items(), key=lambda kv: -sum(e.probability for e in kv[1]))
    cache = FactorCache()
    out = []
    for template, members in ranked[:limit]:
        without = []
        for o in d.origins:
            got = o.outcomes.get(d.policy)
            if got is None:
                continue
            rest = tuple(
                e
                for e in o.sets.get((d.policy.source, d.policy.size), ())
                if e.template != template
            )
            blocks, idents = _released(rest, model, weighted, cache)
            release = release_variances(blocks, idents, model, d.split[0], o.estimate.stream_length)
            without.append(
                window_error(
                    model,
                    o.stream,
                    release,
                    d.split,
                    stream_length=o.estimate.stream_length,
                    expected=o.expected[d.policy],
                ).mae
            )
        out.append(
            TemplateWorth(
                template=template,
                budget_share=sum(share_of.get(id(e.batch), 0.0) for e in members),
                mae_with=d.mae if d.mae is not None else math.nan,
                mae_without=_mean(without) or math.nan,
            )
        )
    return out


__all__ = [
    "NO_GAIN",
    "NO_ORIGIN",
    "SHARES",
    "CapDecision",
    "Entry",
    "EpochModel",
    "Judged",
    "Log",
    "Outcome",
    "Policy",
    "TemplateWorth",
    "decide",
    "noise_sensitivity",
    "release_variances",
    "split_for",
    "template_worth",
    "window_error",
]
