"""Accuracy on request: the least charge that meets a requested standard error (pure).

An analyst (``SET lapras.max_error``) or an administrator (a table's default) may state the
largest standard error they accept for each value a statement measures, in the units of a
count: a count's standard error, and a sum's divided by its public scale (each measure's rows
are divided by their largest absolute weight, ``rewriter.reduce``, so every row of a batch is
"count-like"). The engine then answers from earlier releases when their *stated* error meets it
(free: post-processing), else spends the least budget whose fresh release meets it, else
refuses (:class:`AccuracyUnavailableError`, 42Q01). This module computes that least charge.

Privacy. The request is public (the analyst's own statement, or the configuration). The
charge is a public function of the request, of the batch's sensitivity and of the stated
variances of earlier releases (functions of their matrices and noise scales: never of the
data), so it is chosen like any other charge -- before its release, from public values --
and the accountant's filter still admits it only if the total stays within the budget
(``docs/privacy.md`` §7).

The noise scale of a charge is the accountant's (``noise_scale``), rounded up; the least charge
is found by bisection on it, so that its noise variance is *at most* the one needed, whatever
the accountant (``gdp``: ``(Delta / sigma)^2``; ``pure``: ``Delta sqrt(2 / v)``; ``basic``: the
Analytic Gaussian Mechanism's epsilon, which has no closed form).

>>> from dp.accountant import make_accountant
>>> acct = make_accountant("gdp", epsilon=1.0, delta=1e-3, max_releases=101)
>>> c = least_charge(acct, variance=25.0**2, sensitivity=1.0, limit=acct.total)
>>> round(c, 8), acct.noise_scale(c, 1.0) <= 25.0
(0.0016, True)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dp.accountant import NoiseKind, noise_variance
from dp.errors import BudgetExhaustedError, PrivacyParameterError

#: Bisection steps on the charge (log scale): the least charge to a relative 2^-50.
_STEPS = 60


class AccuracyUnavailableError(BudgetExhaustedError):
    """42Q01: the requested standard error cannot be met: not by earlier releases, and not
    by a fresh release the budget (or the stream length) can still pay for."""


@dataclass(frozen=True, slots=True)
class MaxError:
    """A requested standard error: ``value`` in the units of a count, or (``relative``) a
    fraction of the table's declared public size (``public_rows``)."""

    value: float
    relative: bool = False

    def resolve(self, public_rows: int | None) -> float | None:
        """The standard error in the units of a count; None when relative and the table
        declares no public size."""
        if not self.relative:
            return self.value
        return None if public_rows is None else self.value * public_rows

    def __str__(self) -> str:
        return f"'{self.value * 100:g}%'" if self.relative else f"{self.value:g}"


_NUMBER = re.compile(r"^[+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
#: The values that state no request (and override a table's default).
_OFF = frozenset({"off", "none", "any"})


def parse_max_error(raw: object, *, name: str = "lapras.max_error") -> MaxError | None:
    """A ``lapras.max_error`` value: a number above 0 (a standard error in the units of a
    count), a percentage above 0 and at most 100 (``'5%'``: of the table's ``public_rows``),
    or ``off`` (no request: None). Raises :class:`~dp.errors.PrivacyParameterError` (22023)
    for anything else. Public: the request is the analyst's or the administrator's own."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _invalid(name, repr(raw))
    text = str(raw).strip()
    if text.lower() in _OFF:
        return None
    relative = text.endswith("%")
    number = text[:-1].strip() if relative else text
    if not _NUMBER.match(number):
        raise _invalid(name, text)
    value = float(number)
    if relative:
        if not 0.0 < value <= 100.0:
            raise _invalid(name, text)
        return MaxError(value / 100.0, relative=True)
    if not (math.isfinite(value) and value > 0.0):
        raise _invalid(name, text)
    return MaxError(value)


def _invalid(name: str, text: str) -> PrivacyParameterError:
    return PrivacyParameterError(
        f'invalid value for parameter "{name}": "{text}"',
        hint="a standard error in the units of a count (a number above 0, e.g. 50), a "
        "percentage of the table's declared public_rows (e.g. '5%'), or 'off'",
    )


class _Calibrates(Protocol):
    @property
    def noise(self) -> NoiseKind: ...

    def noise_scale(self, charge: float, sensitivity: float) -> float: ...


def variance_at(acct: _Calibrates, charge: float, sensitivity: float) -> float:
    """The noise variance of one row of a release that costs ``charge``."""
    return noise_variance(acct.noise, acct.noise_scale(charge, sensitivity))


def least_charge(
    acct: _Calibrates, *, variance: float, sensitivity: float, limit: float
) -> float | None:
    """The least charge (in the accountant's unit) at most ``limit`` whose noise variance per
    row, for a release of ``sensitivity``, is at most ``variance``; None when even ``limit``
    does not reach it. Never below what is needed: the returned charge always meets it."""
    if not (variance > 0.0 and limit > 0.0 and sensitivity > 0.0):
        return None
    if variance_at(acct, limit, sensitivity) > variance:
        return None
    hi = limit
    lo = limit
    while variance_at(acct, lo, sensitivity) <= variance:  # find a charge that does not meet it
        hi = lo
        lo /= 16.0
        if lo < limit * 1e-30:
            return hi
    for _ in range(_STEPS):
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
            break
        if variance_at(acct, mid, sensitivity) <= variance:
            hi = mid
        else:
            lo = mid
    return hi


def fresh_variance_needed(max_error: float, prior: Sequence[float]) -> float:
    """The largest noise variance per row of a fresh release that meets ``max_error`` for
    every row, when its answer is combined with earlier releases whose stated variance for
    each row is ``prior`` (``inf``: none). The combined (least-squares) variance of a row is at
    most ``1 / (1 / prior + 1 / fresh)`` -- the inverse-variance mean of two independent
    unbiased estimates, which the generalised least squares over both never does worse than --
    so ``fresh <= 1 / (1 / max_error^2 - 1 / prior)`` for each row whose prior does not meet it
    alone."""
    target = max_error * max_error
    need = math.inf
    for v in prior:
        if v > target:
            need = min(need, 1.0 / (1.0 / target - 1.0 / v))
    return target if math.isinf(need) else need


def combined_error(prior: float, fresh: float) -> float:
    """The standard error :func:`fresh_variance_needed` promises for a row with a stated
    ``prior`` variance and a fresh measurement of variance ``fresh``."""
    return math.sqrt(1.0 / (1.0 / prior + 1.0 / fresh))
