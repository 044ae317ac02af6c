"""Noise calibration: the Analytic Gaussian Mechanism, Gaussian DP, zCDP and Laplace.

Neighbouring databases differ by adding or removing one row of the protected table. Every
function here maps a privacy target and a sensitivity to a noise scale (or back), and every
one of them rounds *in favour of privacy*: a returned noise scale is never smaller, and a
returned ``mu`` never larger, than the exact value (up to a documented relative slack of
:data:`SAFETY` that only ever adds noise).

The central object is the Gaussian tradeoff curve. A Gaussian mechanism with L2 sensitivity
``Delta`` and noise standard deviation ``sigma`` is ``mu``-GDP with ``mu = Delta / sigma``
(Dong, Roth & Su 2022, Theorem 2.7), and ``mu``-GDP is exactly ``(eps, delta(eps))``-DP for
every ``eps >= 0`` with (ibid., Corollary 2.13; Balle & Wang 2018, Theorem 8)::

    delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps * Phi(-eps/mu - mu/2).

``delta(eps; mu)`` increases in ``mu`` and decreases in ``eps``. The Analytic Gaussian
Mechanism's sigma for ``(eps, delta)`` is ``Delta / mu*`` where ``mu*`` is the largest ``mu``
with ``delta(eps; mu) <= delta``: the two are one computation, :func:`gdp_mu`.

Numerics. ``delta`` is evaluated in log space as ``log Phi(b) + eps + log expm1(D - eps)`` with
``b = -eps/mu - mu/2`` and ``D = log Phi(b + mu) - log Phi(b)``; ``D`` is the integral of
``phi/Phi`` (via ``scipy.special.erfcx``) by Gauss-Legendre quadrature when ``mu < 1``, so the
near-cancellation of the two terms of ``delta`` (tiny ``eps`` and ``delta`` together) costs no
precision: relative error ~1e-12 against mpmath down to ``delta = 1e-300``. The root is found by bisection on ``log mu`` with a
relative tolerance of :data:`REL_TOL` and at most :data:`MAX_ITER` steps, keeping the end of
the bracket that satisfies the target; so the search always terminates and its answer always
satisfies the target as evaluated. The final ``mu`` is shrunk by :data:`SAFETY` (relative) to
cover floating-point error in the evaluation of ``delta`` itself. Checked against mpmath at
50 digits and against ``dp_accounting`` in ``tests/dp/test_calibration.py``.

>>> round(agm_sigma(1.0, 1e-3), 4)
2.5747
>>> round(agm_sigma(0.01, 1e-5), 2)
243.79
>>> round(gdp_mu(1.0, 1e-3), 4)
0.3884
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import erfcx, log_ndtr

from dp.errors import PrivacyParameterError

#: Relative tolerance of the bisections (on ``mu`` or ``epsilon``).
REL_TOL = 1e-12
#: Hard cap on bisection steps (a bracket of 2^-1100..2^1100 needs ~ 60 steps at REL_TOL).
MAX_ITER = 400
#: Relative slack applied to every calibrated result, always in favour of privacy.
SAFETY = 1e-9

_MU_MIN = 2.0**-1000
_MU_MAX = 2.0**60


def _check_epsilon(epsilon: float) -> None:
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyParameterError("epsilon must be a finite number greater than 0")


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, int | float) and 0 < delta < 1):
        raise PrivacyParameterError("delta must be a number strictly between 0 and 1")


def _check_mu(mu: float) -> None:
    if not (isinstance(mu, int | float) and math.isfinite(mu) and mu > 0):
        raise PrivacyParameterError("mu must be a finite number greater than 0")


def _check_sensitivity(sensitivity: float) -> None:
    if not (isinstance(sensitivity, int | float) and math.isfinite(sensitivity)):
        raise PrivacyParameterError("sensitivity must be a finite number")
    if sensitivity < 0:
        raise PrivacyParameterError("sensitivity must not be negative")


# 24-point Gauss-Legendre rule on [-1, 1], for the integral of the log-CDF's derivative
_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _log_ndtr_diff(b: float, width: float) -> float:
    """``log Phi(b + width) - log Phi(b)`` for ``width > 0``, with full relative precision.

    For a short interval the difference of two ``log_ndtr`` values cancels, so it is computed
    as the integral of ``d/dx log Phi(x) = phi(x)/Phi(x) = sqrt(2/pi) / erfcx(-x/sqrt 2)``
    (smooth and analytic) by Gauss-Legendre quadrature.
    """
    if width >= 1.0:
        return float(log_ndtr(b + width)) - float(log_ndtr(b))
    half = width / 2.0  # the width is passed, not recomputed as (b + width) - b, which rounds
    mid = b + half
    xs = mid + half * _GL_X
    h = _SQRT_2_OVER_PI / erfcx(-xs / math.sqrt(2.0))
    return float(half * np.dot(_GL_W, h))


def gdp_log_delta(epsilon: float, mu: float) -> float:
    """``log delta(eps; mu)`` of the Gaussian tradeoff curve (``-inf`` when it is 0).

    ``epsilon >= 0`` and ``mu > 0``; no validation (this is the inner loop). Written as
    ``delta = Phi(b) e^eps expm1(D - eps)`` with ``b = -eps/mu - mu/2`` and
    ``D = log Phi(b + mu) - log Phi(b)`` computed without cancellation, so the relative error
    stays near machine precision even when ``delta`` is a tiny difference of two close terms.
    """
    b = -epsilon / mu - mu / 2.0
    lb = float(log_ndtr(b))
    z = float(log_ndtr(b + mu)) - lb - epsilon
    if z < 1e-4 * max(1.0, -lb):  # the direct difference would lose > 1e-12 relative: integrate
        z = _log_ndtr_diff(b, mu) - epsilon
    if not z > 0.0:
        return -math.inf
    log_expm1 = z + math.log1p(-math.exp(-z)) if z > 30.0 else math.log(math.expm1(z))
    return lb + epsilon + log_expm1


def gdp_delta(epsilon: float, mu: float) -> float:
    """The exact ``delta`` for which ``mu``-GDP implies ``(epsilon, delta)``-DP.

    ``delta(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Dong, Roth & Su
    2022, Corollary 2.13). ``epsilon >= 0``.
    """
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise PrivacyParameterError("epsilon must be a finite number not below 0")
    _check_mu(mu)
    return math.exp(gdp_log_delta(epsilon, mu))


def _bisect_log(pred: Callable[[float], bool], lo: float, hi: float) -> float:
    """Largest ``x`` in ``[lo, hi]`` (geometric bisection) with ``pred(x)`` true.

    ``pred`` must be monotone (true below some threshold, false above); ``pred(lo)`` must be
    true. Returns an ``x`` for which ``pred(x)`` was observed true.
    """
    if pred(hi):
        return hi
    return _narrow(pred, lo, hi)[0]


def _narrow(pred: Callable[[float], bool], lo: float, hi: float) -> tuple[float, float]:
    """Geometric bisection of ``[lo, hi]`` with ``pred(lo)`` true and ``pred(hi)`` false, to a
    relative width of ``REL_TOL`` (or until floating point stops it): the final bracket, whose
    ends keep those truth values."""
    for _ in range(MAX_ITER):
        if hi <= lo * (1.0 + REL_TOL):
            break
        mid = math.sqrt(lo) * math.sqrt(hi)
        if not (lo < mid < hi):
            break
        if pred(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest ``mu`` such that ``mu``-GDP implies ``(epsilon, delta)``-DP, rounded down.

    Exact inversion of :func:`gdp_delta` (Dong, Roth & Su 2022, Corollary 2.13), shrunk by the
    relative :data:`SAFETY` so that floating-point error can never round it up.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    target = math.log(delta)

    def ok(mu: float) -> bool:
        return gdp_log_delta(epsilon, mu) <= target

    lo = 1.0
    while not ok(lo):
        lo /= 2.0
        if lo < _MU_MIN:  # unreachable for valid inputs; refuse rather than return garbage
            raise PrivacyParameterError("privacy parameters are outside the supported range")
    hi = lo * 2.0
    while ok(hi):
        lo, hi = hi, hi * 2.0
        if hi > _MU_MAX:
            raise PrivacyParameterError("privacy parameters are outside the supported range")
    return _bisect_log(ok, lo, hi) * (1.0 - SAFETY)


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ``epsilon`` such that ``mu``-GDP implies ``(epsilon, delta)``-DP, rounded up."""
    _check_mu(mu)
    _check_delta(delta)
    target = math.log(delta)
    if gdp_log_delta(0.0, mu) <= target:
        return 0.0

    def too_small(eps: float) -> bool:  # true below the answer: delta(eps) > target
        return gdp_log_delta(eps, mu) > target

    lo = 2.0**-60
    if not too_small(lo):
        return lo
    hi = 1.0
    while too_small(hi):
        lo, hi = hi, hi * 2.0
        if hi > 2.0**40:
            raise PrivacyParameterError("privacy parameters are outside the supported range")
    # bisect for the smallest eps that is not too small
    _, hi = _narrow(too_small, lo, hi)
    return hi * (1.0 + SAFETY)


def agm_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Noise standard deviation of the Analytic Gaussian Mechanism, rounded up.

    Mechanism: add i.i.d. ``N(0, sigma^2)`` to each answer of a batch with L2 sensitivity
    ``sensitivity`` (add/remove one row). Guarantee: ``(epsilon, delta)``-DP, with the smallest
    such sigma (Balle & Wang 2018, Theorem 8), up to the relative :data:`SAFETY` upward.
    Valid for every ``epsilon > 0`` (unlike the classical ``sqrt(2 ln(1.25/delta))/epsilon``).
    """
    _check_sensitivity(sensitivity)
    mu = gdp_mu(epsilon, delta)
    return sensitivity / mu * (1.0 + SAFETY)


def gaussian_sigma_for_mu(mu: float, sensitivity: float = 1.0) -> float:
    """Sigma of a Gaussian mechanism that is ``mu``-GDP for the given L2 sensitivity, rounded up.

    Mechanism: i.i.d. Gaussian noise; neighbours add/remove one row; guarantee ``mu``-GDP
    (Dong, Roth & Su 2022, Theorem 2.7: ``mu = sensitivity / sigma``).
    """
    _check_mu(mu)
    _check_sensitivity(sensitivity)
    return sensitivity / mu * (1.0 + SAFETY)


def zcdp_rho(epsilon: float, delta: float) -> float:
    """The ``rho`` of the standard zCDP -> DP conversion, for comparison only.

    ``rho``-zCDP implies ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP (Bun & Steinke 2016,
    Proposition 1.3); inverted: ``rho = (sqrt(eps + L) - sqrt(L))^2`` with ``L = ln(1/delta)``.
    Rounded down by :data:`SAFETY`. Not used by any accountant: kept to show what zCDP costs.
    """
    _check_epsilon(epsilon)
    _check_delta(delta)
    big_l = -math.log(delta)
    # (sqrt(eps + L) - sqrt(L))^2 written without cancellation
    root = epsilon / (math.sqrt(epsilon + big_l) + math.sqrt(big_l))
    return root * root * (1.0 - SAFETY)


def zcdp_sigma(rho: float, sensitivity: float = 1.0) -> float:
    """Sigma of a Gaussian mechanism that is ``rho``-zCDP (Bun & Steinke 2016, Prop. 1.6)."""
    if not (math.isfinite(rho) and rho > 0):
        raise PrivacyParameterError("rho must be a finite number greater than 0")
    _check_sensitivity(sensitivity)
    return sensitivity / math.sqrt(2.0 * rho) * (1.0 + SAFETY)


def laplace_scale(epsilon: float, sensitivity_l1: float = 1.0) -> float:
    """Scale ``b`` of the Laplace mechanism, rounded up.

    Mechanism: i.i.d. ``Laplace(b)`` noise on each answer of a batch with L1 sensitivity
    ``sensitivity_l1`` (add/remove one row). Guarantee: ``epsilon``-DP (pure) with
    ``b = sensitivity_l1 / epsilon`` (Dwork, McSherry, Nissim & Smith 2006; Dwork & Roth 2014,
    Theorem 3.6).
    """
    _check_epsilon(epsilon)
    _check_sensitivity(sensitivity_l1)
    return sensitivity_l1 / epsilon * (1.0 + SAFETY)
