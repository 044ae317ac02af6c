"""Private multiplicative weights over the histogram domain: MWEM and the selection-only variant.

Both keep a synthetic distribution ``p`` over the ``n`` cells (start: uniform) and, for ``T``
rounds, privately **select** the signed workload query whose synthetic answer is most wrong,
then move ``p`` towards the data in that direction by a multiplicative-weights update:

- ``variant="mwem"`` (Hardt, Ligett & McSherry 2012, "A Simple and Practical Algorithm for
  Differentially Private Data Release"): the selected query is also **measured** with Laplace
  noise and ``p`` is updated with the multiplicative-weights rule on the measured error, sweeping
  over all measurements so far (their "use all measurements" improvement). The answer is read
  from the **final** synthetic distribution (as in their experiments).
- ``variant="selection_only"`` (the private multiplicative weights of Hardt & Rothblum 2010 seen
  as a game: the data player plays Hedge, the query player is the exponential mechanism):
  nothing is measured; Hedge moves ``p`` by ``exp(eta * s * q / Delta)`` in the direction ``s``
  of the selected signed query ``s q``. The answer is read from the **average** of the played
  distributions ``p_1..p_T``, which is what the regret bound controls: Hedge with gains in
  ``[-1, 1]`` has regret at most ``ln n / eta + eta T / 2`` (Freund & Schapire 1997; Cesa-Bianchi
  & Lugosi 2006, Theorem 2.2, rescaled), so if every selection were exact, every workload
  query's error on the average would be at most ``Delta (ln n / (eta T) + eta / 2)`` (in
  fractions of the total; ``eta = sqrt(ln n / T)`` by default); the exponential mechanism adds
  its selection error.

Answers are synthetic counts: ``N_hat * (W @ p)`` with ``N_hat`` the total. The total is either
**public** (argument ``total``: the caller asserts it is public knowledge; it is used as a
constant, so its disclosure is outside the guarantee below) or **estimated privately**: a
fraction ``total_fraction`` of epsilon buys ``N_hat = max(1, N + Laplace(1 / eps_N))``
(sensitivity 1).

Privacy (neighbours: add or remove one row, i.e. ``+-1`` in one cell of ``x``).

- Selection. The candidates are the ``2m`` signed queries ``(i, s)``, ``s = +-1``, with score
  ``u(i, s) = s * (W_i x - N_hat W_i p)``. ``N_hat`` and ``p`` are functions of earlier outputs,
  so one row changes a score by at most ``Delta = max_ij |W_ij|`` (the largest absolute
  weight, i.e. the max column absolute weight). The exponential mechanism ``P(i, s) ~ exp(eps0
  u / (2 Delta))`` is ``eps0``-DP (McSherry & Talwar 2007; Dwork & Roth 2014, Theorem 3.10).
  It is sampled *exactly* by the Gumbel-max trick: ``argmax(eps0 u / (2 Delta) + G)`` with
  i.i.d. standard Gumbel ``G`` has exactly that distribution (Yellott 1977; used for private
  selection by Durfee & Rogers 2019). ``G = -log E`` with ``E ~ Exp(1)``, and ``E = |L|`` for ``L ~
  Laplace(1)``, so only the Sampler's Laplace draws are used. (Report-noisy-max with Laplace
  noise of scale ``2 Delta / eps0`` would also be ``eps0``-DP, Dwork & Roth Claim 3.9 with the
  factor 2 for non-monotone scores, but it is not the exponential mechanism and does not inherit
  the ``eps0^2/8`` zCDP bound used below.)
- Measurement (MWEM only). ``W_i x + Laplace(Delta_i / eps_m)`` with ``Delta_i = max_j
  |W_ij|``: ``eps_m``-DP (Dwork & Roth 2014, Theorem 3.6).
- Composition, ``delta = 0`` (pure): basic composition over the noisy total and the ``T``
  rounds (Dwork & Roth 2014, Theorem 3.16; it holds for adaptively chosen mechanisms): ``eps_N + T (eps0 + eps_m) <= epsilon``,
  checked in exact rational arithmetic. MWEM splits each round's share equally between selection
  and measurement (as Hardt, Ligett & McSherry do).
- Composition, ``delta > 0`` (approximate): the noisy total stays pure (``eps_N``) and the rounds
  get ``(epsilon - eps_N, delta)`` by the best of three valid rules, all functions of public
  parameters only: basic composition; advanced composition (Dwork, Rothblum & Vadhan 2010; Dwork
  & Roth 2014, Theorem 3.20: ``k`` mechanisms of ``eps0``-DP are ``(sqrt(2k ln(1/delta)) eps0 +
  k eps0 (e^eps0 - 1), delta)``-DP); or zCDP: the ``eps0``-DP exponential mechanism is
  ``eps0^2/8``-zCDP (Cesar & Rogers 2021, via its ``eps0``-bounded range, Durfee & Rogers 2019),
  the ``eps_m``-DP Laplace measurement is ``eps_m^2/2``-zCDP (Bun & Steinke 2016, Proposition
  1.4), zCDP adds up under adaptive composition (ibid., Lemma 1.7) and ``rho``-zCDP is ``(rho + 2
  sqrt(rho ln(1/delta)), delta)``-DP (ibid., Proposition 1.3; ``dp.calibration.zcdp_rho``).

Not implemented: the envelope construction of the pure-DP statistical-query-release paper ranges
over all datasets and is not computable beyond toy sizes. Instead, for tiny universes,
:func:`selection_only_transcript_probabilities` computes the *exact* distribution of the whole
selection-only transcript, and the tests check the ``e^epsilon`` ratio bound on it for every pair
of neighbouring histograms -- a direct check of the theory on the implemented update rule.

Floating point: the exponential mechanism is sampled in floating point (Gumbel-max over float
scores); like every float implementation of it, this is not exactly ``eps0``-DP in the sense of
Mironov 2012 / Ilvento 2020. The Laplace measurements use the Sampler, which is
floating-point-safe in production (``dp.noise.SecureSampler``).

>>> import numpy as np
>>> from dp.noise import SeededSampler
>>> x = np.array([30.0, 10.0, 0.0, 60.0])
>>> w = np.tril(np.ones((4, 4)))  # prefix ranges
>>> r = mwem(x, w, epsilon=1.0, rounds=4, sampler=SeededSampler(1), total=100.0)
>>> r.epsilon_spent <= 1.0, r.epsilon_per_round == r.epsilon_select + r.epsilon_measure
(True, True)
>>> r.answer(np.ones(4)).round(6).tolist()
[100.0]
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from dp.calibration import laplace_scale, zcdp_rho
from dp.domain import FloatArray
from dp.errors import PrivacyParameterError
from dp.noise import Sampler
from dp.params import as_query_matrix, check_delta, check_epsilon, is_number

Variant = Literal["mwem", "selection_only"]
Accounting = Literal["basic", "advanced", "zcdp"]

#: Largest number of rounds accepted.
MAX_ROUNDS = 100_000
#: Default share of epsilon spent on the noisy total when it is not public.
DEFAULT_TOTAL_FRACTION = 0.05


# -- validation ---------------------------------------------------------------------------------


def _check_rounds(rounds: int) -> None:
    if not (isinstance(rounds, int | np.integer) and not isinstance(rounds, bool)):
        raise PrivacyParameterError("rounds must be an integer")
    if not 1 <= rounds <= MAX_ROUNDS:
        raise PrivacyParameterError(f"rounds must be between 1 and {MAX_ROUNDS}")


def _check_variant(variant: str) -> None:
    if variant not in ("mwem", "selection_only"):
        raise PrivacyParameterError("variant must be 'mwem' or 'selection_only'")


# -- the exponential mechanism ------------------------------------------------------------------


def _check_selection(epsilon: float, sensitivity: float) -> None:
    check_epsilon(epsilon)
    if not (is_number(sensitivity) and math.isfinite(sensitivity) and sensitivity > 0):
        raise PrivacyParameterError("the score sensitivity must be a finite number greater than 0")


def selection_probabilities(scores: Any, *, epsilon: float, sensitivity: float) -> FloatArray:
    """Exact output distribution of the exponential mechanism: ``~ exp(eps u / (2 Delta))``."""
    _check_selection(epsilon, sensitivity)
    u = np.asarray(scores, dtype=np.float64).reshape(-1)
    z = epsilon * u / (2.0 * sensitivity)
    z -= np.max(z)
    w = np.exp(z)
    return np.asarray(w / np.sum(w), dtype=np.float64)


def exponential_mechanism(
    scores: Any, *, epsilon: float, sensitivity: float, sampler: Sampler
) -> int:
    """Index drawn with probability ``~ exp(epsilon * u / (2 sensitivity))``: ``epsilon``-DP.

    Claim: if each score changes by at most ``sensitivity`` between neighbouring databases, the
    output is ``epsilon``-DP (McSherry & Talwar 2007; Dwork & Roth 2014, Theorem 3.10) and
    ``epsilon^2/8``-zCDP (Cesar & Rogers 2021). Sampled exactly by Gumbel-max (Yellott 1977;
    Durfee & Rogers 2019) with ``Gumbel = -log |Laplace(1)|`` from the Sampler
    (``|Laplace(1)| ~ Exp(1)`` and ``-log Exp(1) ~ Gumbel(0, 1)``).
    """
    _check_selection(epsilon, sensitivity)
    u = np.asarray(scores, dtype=np.float64).reshape(-1)
    if u.shape[0] == 0 or not np.all(np.isfinite(u)):
        raise ValueError("the exponential mechanism needs at least one finite score")
    e = np.abs(np.asarray(sampler.laplace(1.0, int(u.shape[0])), dtype=np.float64))
    with np.errstate(divide="ignore"):
        gumbel = -np.log(e)  # e == 0 (probability ~0) gives +inf: that index wins, still valid
    return int(np.argmax(epsilon * u / (2.0 * sensitivity) + gumbel))


# -- per-round budgets --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundBudget:
    """Per-round epsilons of the selection and the measurement, and the rule that justifies them."""

    select: float
    measure: float
    accounting: Accounting


def _advanced_eps0(total: float, delta: float, k: int) -> float:
    """Largest ``eps0`` (bisection, rounded down) with ``sqrt(2k ln 1/d) e0 + k e0 (e^e0 - 1) <= total``."""

    def cost(e0: float) -> float:
        return math.sqrt(2.0 * k * math.log(1.0 / delta)) * e0 + k * e0 * math.expm1(e0)

    lo, hi = 0.0, total  # cost(total) >= total
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if cost(mid) <= total:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return lo


def _fits_basic(eps_total: float, parts: list[tuple[int, float]], budget: float) -> bool:
    spent = Fraction(eps_total) + sum((k * Fraction(e) for k, e in parts), Fraction(0))
    return spent <= Fraction(budget)


def round_budget(
    *, epsilon_rounds: float, delta: float, rounds: int, variant: Variant
) -> RoundBudget:
    """Per-round epsilons for ``rounds`` rounds sharing ``(epsilon_rounds, delta)``.

    ``delta == 0``: basic composition, ``rounds * (select + measure) <= epsilon_rounds``.
    ``delta > 0``: the largest per-round epsilon of basic, advanced and zCDP composition (see
    the module docstring). MWEM rounds have ``select == measure``; selection-only rounds have
    ``measure == 0``.
    """
    check_epsilon(epsilon_rounds)
    check_delta(delta)
    _check_rounds(rounds)
    _check_variant(variant)
    mechanisms = 2 if variant == "mwem" else 1
    basic = epsilon_rounds / (rounds * mechanisms)
    best = basic
    rule: Accounting = "basic"
    if delta > 0:
        adv = _advanced_eps0(epsilon_rounds, delta, rounds * mechanisms)
        rho = zcdp_rho(epsilon_rounds, delta)
        per_rho = 1.0 / 8.0 + (0.5 if variant == "mwem" else 0.0)  # zCDP of one round per eps0^2
        zc = math.sqrt(rho / (rounds * per_rho)) * (1.0 - 1e-12)
        candidates: tuple[tuple[float, Accounting], ...] = ((adv, "advanced"), (zc, "zcdp"))
        for value, name in candidates:
            if value > best:
                best, rule = value, name
    measure = best if variant == "mwem" else 0.0
    if rule == "basic":
        # Round down until the exact rational sum fits (float division may round up).
        while not _fits_basic(0.0, [(rounds, best), (rounds, measure)], epsilon_rounds):
            best = math.nextafter(best, 0.0)
            measure = best if variant == "mwem" else 0.0
    return RoundBudget(select=best, measure=measure, accounting=rule)


# -- the result ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PMWResult:
    """The released synthetic data and its privacy bookkeeping (all of it safe to publish).

    ``distribution`` is the synthetic probability vector (final for MWEM, average for
    selection-only), ``total`` the total used (public or noisy), ``selections`` the selected
    signed queries ``(index, sign)`` and ``measurements`` MWEM's noisy answers, in round order.
    """

    variant: Variant
    distribution: FloatArray
    total: float
    total_is_public: bool
    epsilon: float
    delta: float
    epsilon_total: float
    epsilon_select: float
    epsilon_measure: float
    rounds: int
    accounting: Accounting
    score_sensitivity: float
    learning_rate: float | None
    selections: tuple[tuple[int, int], ...]
    measurements: tuple[float, ...]

    @property
    def epsilon_per_round(self) -> float:
        return self.epsilon_select + self.epsilon_measure

    @property
    def round_epsilons(self) -> tuple[float, ...]:
        return (self.epsilon_per_round,) * self.rounds

    @property
    def epsilon_spent(self) -> float:
        """Sum of all epsilons (basic composition); ``<= epsilon`` exactly when ``delta == 0``."""
        return float(
            Fraction(self.epsilon_total)
            + self.rounds * (Fraction(self.epsilon_select) + Fraction(self.epsilon_measure))
        )

    @property
    def synthetic_histogram(self) -> FloatArray:
        return np.asarray(self.total * self.distribution, dtype=np.float64)

    def answer(self, matrix: Any) -> FloatArray:
        """Answers from the synthetic histogram: post-processing, no privacy cost."""
        w = as_query_matrix(matrix, int(self.distribution.shape[0]))
        return np.asarray(w @ self.synthetic_histogram, dtype=np.float64)


# -- the algorithm ------------------------------------------------------------------------------


def _softmax(logw: FloatArray) -> FloatArray:
    z = logw - np.max(logw)
    e = np.exp(z)
    return np.asarray(e / np.sum(e), dtype=np.float64)


def _row(w: sp.csr_array, i: int, n: int) -> FloatArray:
    out = np.zeros(n)
    lo, hi = int(w.indptr[i]), int(w.indptr[i + 1])
    out[w.indices[lo:hi]] = w.data[lo:hi]
    return out


def _signed_scores(exact: FloatArray, synthetic: FloatArray) -> FloatArray:
    """Scores of the ``2m`` signed queries: index ``i`` is ``(i, +1)``, ``m + i`` is ``(i, -1)``."""
    err = exact - synthetic
    return np.concatenate([err, -err])


def _hedge(logw: FloatArray, row: FloatArray, sign: int, eta: float, sens: float) -> FloatArray:
    return logw + eta * sign * row / sens


def _default_learning_rate(n: int, rounds: int) -> float:
    return min(1.0, math.sqrt(max(math.log(n), 1e-12) / rounds))


def mwem(
    histogram: Any,
    workload: Any,
    *,
    epsilon: float,
    rounds: int,
    sampler: Sampler,
    variant: Variant = "mwem",
    delta: float = 0.0,
    total: float | None = None,
    total_fraction: float = DEFAULT_TOTAL_FRACTION,
    learning_rate: float | None = None,
    mw_sweeps: int = 1,
) -> PMWResult:
    """Run MWEM or selection-only private multiplicative weights on a workload.

    ``histogram``: exact cell counts (``n``); ``workload``: ``m x n`` query matrix (QueryBatch,
    sparse or dense). ``total``: a public total (caller's assertion) or ``None`` to spend
    ``total_fraction * epsilon`` on a noisy total. ``learning_rate``: Hedge's ``eta``
    (selection-only; default ``min(1, sqrt(ln n / T))``). ``mw_sweeps``: passes over all
    measurements per MWEM round.

    Guarantee (add/remove-one-row neighbours; module docstring for the proofs): with
    ``delta == 0`` the whole output is ``epsilon``-DP by basic composition of the noisy total
    (``epsilon_total``), ``T`` exponential mechanisms (``epsilon_select`` each, score
    sensitivity ``max |W_ij|``) and, for MWEM, ``T`` Laplace measurements (``epsilon_measure``
    each); the sum is checked in exact arithmetic. With ``delta > 0`` it is ``(epsilon,
    delta)``-DP via the composition rule in ``accounting``. Every parameter is validated before
    the histogram is read.
    """
    check_epsilon(epsilon)
    check_delta(delta)
    _check_rounds(rounds)
    _check_variant(variant)
    if total is not None and not (is_number(total) and math.isfinite(total) and total > 0):
        raise PrivacyParameterError("a public total must be a finite number greater than 0")
    if total is None and not (is_number(total_fraction) and 0 < total_fraction < 1):
        raise PrivacyParameterError("total_fraction must be a number strictly between 0 and 1")
    if learning_rate is not None and not (
        is_number(learning_rate) and math.isfinite(learning_rate) and learning_rate > 0
    ):
        raise PrivacyParameterError("learning_rate must be a finite number greater than 0")
    if not (isinstance(mw_sweeps, int) and not isinstance(mw_sweeps, bool) and mw_sweeps >= 1):
        raise PrivacyParameterError("mw_sweeps must be an integer of at least 1")
    if np.ndim(histogram) != 1 or np.shape(histogram)[0] == 0:
        raise ValueError("the histogram must be a non-empty vector of cell counts")
    n = int(np.shape(histogram)[0])
    w = as_query_matrix(workload, n)
    m = int(w.shape[0])
    if m == 0 or w.nnz == 0 or not np.any(w.data != 0):
        raise ValueError("the workload must contain at least one non-zero query")
    sens = float(np.max(np.abs(w.data)))
    row_sens = np.zeros(m)
    np.maximum.at(row_sens, np.repeat(np.arange(m), np.diff(w.indptr)), np.abs(w.data))

    # Budget: all of it from public parameters.
    eps_total = 0.0 if total is not None else total_fraction * epsilon
    eps_rounds = epsilon - eps_total
    while Fraction(eps_total) + Fraction(eps_rounds) > Fraction(epsilon):
        eps_rounds = math.nextafter(eps_rounds, 0.0)  # the float difference may round up
    budget = round_budget(epsilon_rounds=eps_rounds, delta=delta, rounds=rounds, variant=variant)
    sel, meas = budget.select, budget.measure
    if delta == 0:
        while not _fits_basic(eps_total, [(rounds, sel), (rounds, meas)], epsilon):
            sel = math.nextafter(sel, 0.0)
            meas = sel if variant == "mwem" else 0.0
    eta = learning_rate if learning_rate is not None else _default_learning_rate(n, rounds)

    # Only now is the data read.
    x = np.asarray(histogram, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("the histogram must contain finite counts only")
    exact = np.asarray(w @ x, dtype=np.float64)
    if total is None:
        noise = float(np.asarray(sampler.laplace(laplace_scale(eps_total, 1.0), 1)).reshape(-1)[0])
        n_hat = max(1.0, float(np.sum(x)) + noise)
    else:
        n_hat = float(total)

    logw = np.zeros(n)
    p = _softmax(logw)
    p_sum = np.zeros(n)
    selections: list[tuple[int, int]] = []
    measured: list[tuple[int, float]] = []
    for _ in range(rounds):
        scores = _signed_scores(exact, n_hat * np.asarray(w @ p, dtype=np.float64))
        k = exponential_mechanism(scores, epsilon=sel, sensitivity=sens, sampler=sampler)
        i, sign = (k, 1) if k < m else (k - m, -1)
        selections.append((i, sign))
        if variant == "selection_only":
            p_sum += p
            logw = _hedge(logw, _row(w, i, n), sign, eta, sens)
            p = _softmax(logw)
            continue
        b = laplace_scale(meas, float(row_sens[i]))
        y = exact[i] + float(np.asarray(sampler.laplace(b, 1)).reshape(-1)[0])
        measured.append((i, y))
        for _sweep in range(mw_sweeps):
            for j, yj in measured:
                q = _row(w, j, n)
                err = yj - n_hat * float(q @ p)
                # Hardt, Ligett & McSherry's update, weights and error scaled to [-1, 1].
                logw = logw + (q / sens) * err / (2.0 * n_hat * sens)
                p = _softmax(logw)
    dist = p_sum / rounds if variant == "selection_only" else p
    dist = np.asarray(dist / np.sum(dist), dtype=np.float64)
    dist.flags.writeable = False
    return PMWResult(
        variant=variant,
        distribution=dist,
        total=n_hat,
        total_is_public=total is not None,
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_total=eps_total,
        epsilon_select=sel,
        epsilon_measure=meas,
        rounds=int(rounds),
        accounting=budget.accounting,
        score_sensitivity=sens,
        learning_rate=eta if variant == "selection_only" else None,
        selections=tuple(selections),
        measurements=tuple(y for _, y in measured),
    )


def selection_only_transcript_probabilities(
    histogram: Any,
    workload: Any,
    *,
    epsilon_select: float,
    rounds: int,
    total: float,
    learning_rate: float,
) -> dict[tuple[tuple[int, int], ...], float]:
    """Exact probability of every selection-only transcript, for tiny universes only.

    Enumerates all ``(2m)^T`` sequences of signed selections; with a public ``total`` the whole
    output of :func:`mwem` (``variant="selection_only"``) is a function of this transcript, so
    its privacy loss is the log-ratio of these probabilities between neighbouring histograms.
    Uses the same score and Hedge update as :func:`mwem`. Refuses more than 10^5 transcripts.
    """
    _check_rounds(rounds)
    x = np.asarray(histogram, dtype=np.float64).reshape(-1)
    n = int(x.shape[0])
    w = as_query_matrix(workload, n)
    m = int(w.shape[0])
    if (2 * m) ** rounds > 100_000:
        raise ValueError("too many transcripts to enumerate: this is for tiny universes only")
    sens = float(np.max(np.abs(w.data)))
    exact = np.asarray(w @ x, dtype=np.float64)
    out: dict[tuple[tuple[int, int], ...], float] = {}
    for seq in itertools.product(range(2 * m), repeat=rounds):
        logw = np.zeros(n)
        prob = 1.0
        transcript: list[tuple[int, int]] = []
        for k in seq:
            p = _softmax(logw)
            scores = _signed_scores(exact, total * np.asarray(w @ p, dtype=np.float64))
            prob *= float(
                selection_probabilities(scores, epsilon=epsilon_select, sensitivity=sens)[k]
            )
            i, sign = (k, 1) if k < m else (k - m, -1)
            transcript.append((i, sign))
            logw = _hedge(logw, _row(w, i, n), sign, learning_rate, sens)
        out[tuple(transcript)] = prob
    return out
