"""LAPRAS budget pacing for unpredicted ("bad") queries: pure arithmetic, no privacy claims.

Everything here is in the accountant's additive unit (epsilon for ``basic``/``pure``, mu^2 for
``gdp``). Pacing decides *how much* of the budget the b-th fresh online release gets; whether
that fits is the accountant's job, and the engine always charges ``min(amount, remaining)``.
The privacy guarantee therefore never depends on this module; its correctness only affects
accuracy. Pacing depends only on the public sequence of stream positions (never on data).

The estimator (paper §4). The b-th bad query arrives at stream position ``n_b`` (1-based) of a
stream of planned length ``S`` in uniformly random order:

- ``B_hat(1) = S - n_1 + 1`` (an upper bound, kept as in the paper: PRIVACY-NOTES §3 gap #5);
- ``B_hat(b) = S (b - 1) / (n_b - 1)`` for ``b >= 2``;
- at ``b = T`` it freezes ``B_est = S (T - 1) / (n_T - 1)``, unbiased for ``B`` (Theorem 4.2),
  with ``Var < S(T-1)/((S-1)(T-2)) B(B-1) - B^2`` (Theorem 4.3, needs ``T >= 3``).

Static (``allocation="static"``): the first ``T`` bad queries draw from the warm-up pool
(``eps_badInit``), then every bad query with ``b <= B_est`` from the bad pool, with
``k = max(1, B_est - T)`` (never a division by zero). ``static_pacing="literal"`` is Algorithm 1
as written: ``amount = pool / k`` and ``pool -= amount`` with ``k`` fixed (``k = T`` in the
warm-up), a geometric sequence that spends only ~63% of a pool; the warm-up's leftover joins
the bad pool when ``B_est`` freezes. ``static_pacing="even"`` spends the pools evenly: the
warm-up gives ``pool / (T - b + 1)`` and the bad phase ``pool / max(1, B_est - b + 1)``, which
is the fixed ``bad_pool / k`` when every bad query is charged.

Smooth (``allocation="smooth"``): one pool (warm-up and bad merged); ``amount = pool /
(max(1, B_hat(b) - b) + 1)`` and ``pool -= amount`` (Lemma 4.5: never overspends).

Reserve (both): once ``B_est`` is frozen, a bad query with ``b > B_est`` draws from the reserve.
``reserve_pacing="halving"`` is Algorithm 1: it gets ``reserve / 2`` and the reserve halves, so
an underestimate of ``B`` by more than ~log2(reserve / min_charge) refuses the rest of the
stream. ``reserve_pacing="estimate"`` (default mode) spreads the reserve the way Smooth spreads
its pool, over the bad queries still expected by the running estimate and never more than the
stream positions left: ``amount = reserve / (min(max(1, B_hat(b) - b), max(1, S - n)) + 1)``
(never the whole reserve, so it never overspends; Lemma 4.5's argument). The estimate assumes
bad queries arrive in random order, which a predicted workload breaks (its statements are
often asked first, so ``B_est`` undershoots): the running estimate recovers as the stream
goes on where halving would run out. If the amount is below ``min_charge`` (``eps_min`` in
the unit), the reserve is exhausted: no further fresh answer (:func:`next_charge` returns
``None``). With ``reallocate=True`` (default mode's reading of the undefined ``Reallocate`` of Algorithm 1,
line 29; PRIVACY-NOTES §3 gap #3) the leftovers of the warm-up and bad pools join the reserve
when the reserve phase starts; paper mode does nothing (``reallocate=False``).

Steady (``allocation="steady"``, the default mode's): no warm-up and no frozen estimate, so no
step in precision at the T-th answer nor at ``B_est``. The whole online budget (warm-up, bad
pool and reserve) is one pool ``R``, spread over the fresh answers still expected. With ``E``
the expected number of fresh answers of the epoch (public: configured, or read from the query
log by ``lapras epoch start``) and ``f`` the reserve's weight (:func:`steady_tail`: the
reserve's share ``r`` of the online budget gives ``f = r / (1 - r)``, clamped to
``[1/4, 2]``), the k-th fresh answer (``k = 1, 2, ...``, answers from stored releases do not
count) is charged ``R_k / H_k`` with the horizon

    H_k = max(E - k + 1, 0) + f * max(E, k),   at least 2 + f            (:func:`steady_horizon`)

Up to ``E`` every answer gets the same charge ``R_0 (1 - r) / E`` (the pool less the reserve,
spread evenly), and ``r R_0`` is left at ``k = E``. Beyond it the estimate is revised as the
stream goes: having made k answers, the rule expects ``f k`` more (a smooth estimator, the
reserve paying for it), so the charge falls as ``k^-(1 + 1/f)`` and the standard error of an
answer grows as ``(k / E)^((1 + 1/f) / 2)`` under Gaussian noise: by 2.8x at ``k = 2E`` for
the default split (``f = 1/2``). ``H`` falls by at most 1 and rises by at most ``f`` from one
answer to the next and is at least ``2 + f``, so consecutive charges differ by a factor of at
most 2 (``(H_k - 1) / H_{k+1} >= (1 + f) / (2 + 2f)``): the standard error of consecutive
fresh answers by at most ``sqrt 2`` (Gaussian) or 2 (Laplace), and it never decreases. The
pool is never overspent (``H >= 2``), and the rule never refuses by itself: the stream length
S, the accountant and a requested accuracy (``lapras.max_error``) do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum


class Allocation(StrEnum):
    STATIC = "static"
    SMOOTH = "smooth"
    STEADY = "steady"


class StaticPacing(StrEnum):
    LITERAL = "literal"
    EVEN = "even"


class ReservePacing(StrEnum):
    HALVING = "halving"
    ESTIMATE = "estimate"


class Pool(StrEnum):
    """Which pool a charge came from."""

    MATRIX = "matrix"
    WARMUP = "warmup"
    BAD = "bad"
    RESERVE = "reserve"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pacing:
    """The pools (in the accountant's unit) and the frozen estimate.

    ``warmup_pool`` is 0 under Smooth (merged into ``bad_pool``). ``b_est`` is ``None`` until
    the T-th bad query. ``per_query`` is the fixed charge of the even Static bad phase and
    ``k`` the fixed divisor of the literal one (both set when ``b_est`` freezes).
    """

    warmup_pool: float
    bad_pool: float
    reserve: float
    b_est: float | None = None
    k: float | None = None
    per_query: float | None = None
    in_reserve: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """The pacing decision for one fresh release: ``amount`` from ``pool``; the pools after."""

    amount: float
    pool: Pool
    after: Pacing


def warmup_length(spec: str | int, stream_length: int) -> int:
    """T from the ``warmup`` option, clamped to ``T >= 3`` (PRIVACY-NOTES §3 gaps #1, #6).

    ``"log2"``: ``ceil(log2 S)`` (Algorithm 1); ``"log2_squared"``: ``ceil(log2 S)^2`` (the
    abstract's Theta(log^2 S)); an integer: that value. ``T >= 3`` keeps Theorem 4.3 valid and
    every division defined (S = 1 would give T = 0, T = 1 a 0/0).
    """
    s = max(int(stream_length), 1)
    if isinstance(spec, bool):
        raise ValueError("warmup must be 'log2', 'log2_squared' or an integer")
    if isinstance(spec, int):
        t = spec
    elif spec == "log2":
        t = math.ceil(math.log2(s)) if s > 1 else 0
    elif spec == "log2_squared":
        t = math.ceil(math.log2(s)) ** 2 if s > 1 else 0
    else:
        raise ValueError("warmup must be 'log2', 'log2_squared' or an integer")
    return max(3, t)


def b_hat(b: int, n: int, stream_length: int) -> float:
    """The running estimate of the number of bad queries at the b-th bad query (position n)."""
    if b <= 1:
        return float(stream_length - n + 1)
    return stream_length * (b - 1) / (n - 1)


def b_est(t: int, n_t: int, stream_length: int) -> float:
    """The frozen estimate at ``b = T`` (Theorem 4.2); ``n_T >= T >= 3`` so never 0/0."""
    return stream_length * (t - 1) / (n_t - 1)


def initial_pacing(*, warmup: float, bad: float, reserve: float, allocation: Allocation) -> Pacing:
    if allocation is Allocation.STEADY:
        return Pacing(warmup_pool=0.0, bad_pool=warmup + bad + reserve, reserve=0.0)
    if allocation is Allocation.SMOOTH:
        return Pacing(warmup_pool=0.0, bad_pool=warmup + bad, reserve=reserve)
    return Pacing(warmup_pool=warmup, bad_pool=bad, reserve=reserve)


def _freeze(p: Pacing, *, t: int, n: int, stream_length: int, allocation: Allocation) -> Pacing:
    """Freeze ``B_est`` at the T-th bad query; Static also sets ``k`` and moves the warm-up's
    leftover into the bad pool."""
    est = b_est(t, n, stream_length)
    if allocation is Allocation.SMOOTH:
        return replace(p, b_est=est)
    k = max(1.0, est - t)
    pool = p.bad_pool + p.warmup_pool
    return replace(p, warmup_pool=0.0, bad_pool=pool, b_est=est, k=k, per_query=pool / k)


def skip(
    p: Pacing, *, b: int, n: int, stream_length: int, t: int, allocation: Allocation
) -> Pacing:
    """The pacing after the b-th bad query was answered *without* a charge (default mode's
    answers from stored releases): no pool changes, so its planned share stays available to
    later bad queries; the estimate still freezes at ``b = T`` (Steady has none)."""
    if allocation is Allocation.STEADY:
        return p
    if b == t and p.b_est is None:
        return _freeze(p, t=t, n=n, stream_length=stream_length, allocation=allocation)
    return p


def next_charge(
    p: Pacing,
    *,
    b: int,
    n: int,
    stream_length: int,
    t: int,
    allocation: Allocation,
    static_pacing: StaticPacing,
    reallocate: bool,
    min_charge: float,
    reserve_pacing: ReservePacing = ReservePacing.HALVING,
) -> Step | None:
    """The charge for the b-th bad query at stream position ``n``; ``None`` = reserve spent.

    Pure: the returned ``Step.after`` is the pacing state once the charge is made.
    """
    s = stream_length
    if p.b_est is not None and b > p.b_est:
        if reserve_pacing is ReservePacing.HALVING:
            divisor = 2.0
        else:
            divisor = min(max(1.0, b_hat(b, n, s) - b), max(1.0, float(s - n))) + 1.0
        return _reserve(p, divisor=divisor, reallocate=reallocate, min_charge=min_charge)

    if allocation is Allocation.SMOOTH:
        est = b_hat(b, n, s)
        amount = p.bad_pool / (max(1.0, est - b) + 1.0)
        after = replace(p, bad_pool=p.bad_pool - amount)
        if b == t:
            after = _freeze(after, t=t, n=n, stream_length=s, allocation=allocation)
        return Step(amount=amount, pool=Pool.BAD, after=after)

    if b <= t:  # Static warm-up
        if static_pacing is StaticPacing.LITERAL:
            amount = p.warmup_pool / t
        else:
            amount = p.warmup_pool / (t - b + 1)
        after = replace(p, warmup_pool=p.warmup_pool - amount)
        if b == t:
            after = _freeze(after, t=t, n=n, stream_length=s, allocation=allocation)
        return Step(amount=amount, pool=Pool.WARMUP, after=after)

    # Static bad phase, T < b <= B_est
    if p.k is None or p.b_est is None:  # unreachable: b > t implies the freeze happened
        raise ValueError("the static bad phase needs a frozen estimate")
    if static_pacing is StaticPacing.LITERAL:
        amount = p.bad_pool / p.k
    else:
        # the pool spread evenly over the bad queries still expected (= pool / k when every
        # bad query is charged; the share of a bad query answered without charge carries over)
        amount = p.bad_pool / max(1.0, p.b_est - b + 1.0)
    return Step(amount=amount, pool=Pool.BAD, after=replace(p, bad_pool=p.bad_pool - amount))


def _reserve(p: Pacing, *, divisor: float, reallocate: bool, min_charge: float) -> Step | None:
    if reallocate and not p.in_reserve:
        p = replace(
            p, reserve=p.reserve + p.warmup_pool + p.bad_pool, warmup_pool=0.0, bad_pool=0.0
        )
    amount = p.reserve / divisor
    if not amount >= min_charge or amount <= 0.0:
        return None
    return Step(
        amount=amount,
        pool=Pool.RESERVE,
        after=replace(p, reserve=p.reserve - amount, in_reserve=True),
    )


#: The bounds of the Steady tail weight ``f`` (:func:`steady_tail`).
TAIL_MIN, TAIL_MAX = 0.25, 2.0


def steady_tail(warmup: float, bad: float, reserve: float) -> float:
    """``f`` of the Steady rule from the split's online fractions: ``r / (1 - r)`` with ``r``
    the reserve's share of the online budget, clamped to ``[TAIL_MIN, TAIL_MAX]`` (a tail
    weight above 2 would let consecutive charges differ by more than 2x; below 1/4 the
    answers beyond ``E`` would lose precision too fast to be of use)."""
    online = warmup + bad + reserve
    if not online > 0.0:
        return TAIL_MIN
    r = reserve / online
    return min(TAIL_MAX, max(TAIL_MIN, r / (1.0 - r) if r < 1.0 else TAIL_MAX))


def steady_horizon(k: int, expected: float, tail: float) -> float:
    """``H_k``: the number of answers the pool is spread over at the k-th fresh answer
    (see the module doc)."""
    h = max(expected - k + 1.0, 0.0) + tail * max(expected, float(k))
    return max(h, 2.0 + tail)


def steady_charge(p: Pacing, *, k: int, expected: float, tail: float) -> Step:
    """The Steady charge of the k-th fresh answer: ``pool / H_k`` (never the whole pool)."""
    amount = p.bad_pool / steady_horizon(k, expected, tail)
    return Step(amount=amount, pool=Pool.BAD, after=replace(p, bad_pool=p.bad_pool - amount))


def spend(p: Pacing, amount: float) -> Pacing:
    """The pacing after ``amount`` was charged outside the pacing rule (an answer at a
    requested accuracy): taken from the warm-up pool, then the bad pool, then the reserve
    (the caller checks that they hold it)."""
    warm = min(p.warmup_pool, amount)
    bad = min(p.bad_pool, amount - warm)
    res = max(0.0, min(p.reserve, amount - warm - bad))
    return replace(
        p, warmup_pool=p.warmup_pool - warm, bad_pool=p.bad_pool - bad, reserve=p.reserve - res
    )


def online_left(p: Pacing) -> float:
    """What the online pools hold in all."""
    return p.warmup_pool + p.bad_pool + p.reserve
