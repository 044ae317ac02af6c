"""Privacy accountants as *filters*: a charge is admitted only if the total stays in budget.

Neighbouring databases differ by adding or removing one row of the protected table. An
accountant guards one epoch's budget ``(epsilon, delta)``. It works in its own *additive unit*:

- ``basic`` (the paper's): unit = epsilon. Each release is a Gaussian mechanism calibrated by
  the Analytic Gaussian Mechanism at ``(epsilon_i, delta_i)`` with ``delta_i = delta /
  max_releases`` (``max_releases = S + 1``: one Matrix Mechanism release and at most ``S``
  online releases). Basic composition (Dwork & Roth 2014, Theorem 3.16; valid for adaptively
  chosen ``epsilon_i`` as a filter: Rogers, Roth, Ullman & Vadhan 2016, "Privacy odometers and
  filters") gives ``(sum epsilon_i, sum delta_i)``-DP, so ``sum epsilon_i <= epsilon`` and at
  most ``max_releases`` releases give ``(epsilon, delta)``-DP.
- ``gdp``: unit = mu^2. Each release is a Gaussian mechanism with L2 sensitivity ``Delta`` and
  standard deviation ``sigma``, i.e. ``mu_i``-GDP with ``mu_i = Delta / sigma`` (Dong, Roth &
  Su 2022, Theorem 2.7). Fully adaptive composition of GDP (Smith & Thakurta 2022, arXiv
  2210.17520): if ``sum mu_i^2 <= mu^2`` the whole interaction is ``mu``-GDP, even when each
  ``mu_i`` is chosen from earlier answers. With ``mu = gdp_mu(epsilon, delta)`` this is exactly
  ``(epsilon, delta)``-DP (Dong, Roth & Su 2022, Corollary 2.13). No limit on the number of
  releases.
- ``pure``: unit = epsilon, ``delta = 0``. Each release is a Laplace mechanism with scale
  ``b = Delta_1 / epsilon_i`` (L1 sensitivity); basic composition of pure DP (also valid as a
  filter) gives ``epsilon``-DP when ``sum epsilon_i <= epsilon``.

Every accountant is an immutable value: :meth:`Accountant.check` says whether a charge fits,
:meth:`Accountant.compose` returns the accountant after the charge and **raises**
:class:`~dp.errors.BudgetExhaustedError` if it does not fit (so nothing can be released on a
refused charge). Spent budget is summed *exactly* (``fractions.Fraction`` of the float
charges), the cap ``mu^2`` is the exact square of a ``mu`` already rounded down, and
:meth:`Accountant.noise_scale` rounds noise up (relative ``dp.calibration.SAFETY``), so every
rounding is in favour of privacy. :meth:`Accountant.remaining` is rounded down, so a pacer that
charges ``min(planned, remaining())`` is never refused for rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from typing import Protocol, Self, runtime_checkable

from dp.calibration import SAFETY, agm_sigma, gaussian_sigma_for_mu, gdp_mu, laplace_scale
from dp.errors import BudgetExhaustedError, PrivacyParameterError


class AccountantKind(StrEnum):
    BASIC = "basic"
    GDP = "gdp"
    PURE = "pure"


class NoiseKind(StrEnum):
    GAUSSIAN = "gaussian"
    LAPLACE = "laplace"


@runtime_checkable
class Accountant(Protocol):
    """A privacy filter over one epoch's budget, in an additive unit (see the module doc)."""

    @property
    def kind(self) -> AccountantKind: ...

    @property
    def noise(self) -> NoiseKind: ...

    @property
    def total(self) -> float:
        """The budget in this accountant's unit (epsilon, or mu^2)."""
        ...

    @property
    def spent(self) -> float:
        """Budget spent so far (rounded to nearest; exact value kept internally)."""
        ...

    @property
    def releases(self) -> int:
        """Number of charges composed so far."""
        ...

    def remaining(self) -> float:
        """Budget still available, rounded *down* to a float."""
        ...

    def check(self, charge: float) -> bool:
        """Whether ``charge`` (in the unit) can be composed without exceeding the budget."""
        ...

    def compose(self, charge: float) -> Self:
        """The accountant after ``charge``; raises BudgetExhaustedError if it does not fit."""
        ...

    def noise_scale(self, charge: float, sensitivity: float) -> float:
        """Noise scale (sigma, or Laplace b) for a release that costs ``charge``.

        ``sensitivity`` is the release's L2 sensitivity for Gaussian noise, its L1 sensitivity
        for Laplace noise (add/remove one row). Rounded up.
        """
        ...

    def sensitivity_of(self, l2: float, l1: float) -> float:
        """Pick the sensitivity this accountant's noise is calibrated to."""
        ...


def _float_down(x: Fraction) -> float:
    """The largest float not above ``x``."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return max(f, 0.0)


def _valid_charge(charge: float) -> bool:
    return isinstance(charge, int | float) and math.isfinite(charge) and charge > 0


def _exhausted() -> BudgetExhaustedError:
    return BudgetExhaustedError(
        "the privacy budget of this epoch cannot admit another fresh answer",
        hint="stored answers are still served; start a new epoch to answer new queries",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Additive:
    """Shared exact bookkeeping: ``cap`` and ``spent_exact`` are exact rationals."""

    cap: Fraction
    spent_exact: Fraction = Fraction(0)
    count: int = 0
    max_releases: int | None = None

    @property
    def total(self) -> float:
        return _float_down(self.cap)

    @property
    def spent(self) -> float:
        return float(self.spent_exact)

    @property
    def releases(self) -> int:
        return self.count

    def remaining(self) -> float:
        if self.max_releases is not None and self.count >= self.max_releases:
            return 0.0
        return _float_down(self.cap - self.spent_exact)

    def check(self, charge: float) -> bool:
        if not _valid_charge(charge):
            return False
        if self.max_releases is not None and self.count + 1 > self.max_releases:
            return False
        return self.spent_exact + Fraction(charge) <= self.cap

    def compose(self, charge: float) -> Self:
        if not _valid_charge(charge):
            raise PrivacyParameterError("a privacy charge must be a finite number greater than 0")
        if not self.check(charge):
            raise _exhausted()
        return replace(self, spent_exact=self.spent_exact + Fraction(charge), count=self.count + 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class BasicAccountant(_Additive):
    """The paper's accountant: basic composition of AGM releases at ``(eps_i, delta/(S+1))``.

    Guarantee: ``(epsilon, delta)``-DP under add/remove-one-row neighbours, by basic
    composition of at most ``max_releases`` releases each ``(eps_i, delta_i)``-DP with
    ``sum eps_i <= epsilon`` and ``delta_i * max_releases <= delta``.
    """

    epsilon: float
    delta: float
    delta_i: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "delta_i", self.delta / float(self.max_releases or 1))

    @staticmethod
    def create(epsilon: float, delta: float, max_releases: int) -> BasicAccountant:
        _validate_eps_delta(epsilon, delta)
        if not (isinstance(max_releases, int) and max_releases >= 1):
            raise PrivacyParameterError("the number of releases must be an integer of at least 1")
        return BasicAccountant(
            cap=Fraction(epsilon), epsilon=epsilon, delta=delta, max_releases=max_releases
        )

    @property
    def kind(self) -> AccountantKind:
        return AccountantKind.BASIC

    @property
    def noise(self) -> NoiseKind:
        return NoiseKind.GAUSSIAN

    def noise_scale(self, charge: float, sensitivity: float) -> float:
        if not _valid_charge(charge):
            raise PrivacyParameterError("a privacy charge must be a finite number greater than 0")
        # delta_i = delta / max_releases is rounded to nearest; shrink it so the sum stays <= delta
        return agm_sigma(charge, self.delta_i * (1.0 - SAFETY), sensitivity)

    def sensitivity_of(self, l2: float, l1: float) -> float:
        return l2


@dataclass(frozen=True, slots=True, kw_only=True)
class GdpAccountant(_Additive):
    """Gaussian DP filter: admits charges ``mu_i^2`` while ``sum mu_i^2 <= mu^2``.

    Guarantee: ``mu``-GDP under add/remove-one-row neighbours by fully adaptive composition
    (Smith & Thakurta 2022), hence exactly ``(epsilon, delta)``-DP with ``mu = gdp_mu(epsilon,
    delta)`` (Dong, Roth & Su 2022, Corollary 2.13).
    """

    epsilon: float
    delta: float
    mu: float

    @staticmethod
    def create(epsilon: float, delta: float) -> GdpAccountant:
        _validate_eps_delta(epsilon, delta)
        mu = gdp_mu(epsilon, delta)
        return GdpAccountant(cap=Fraction(mu) ** 2, epsilon=epsilon, delta=delta, mu=mu)

    @property
    def kind(self) -> AccountantKind:
        return AccountantKind.GDP

    @property
    def noise(self) -> NoiseKind:
        return NoiseKind.GAUSSIAN

    def noise_scale(self, charge: float, sensitivity: float) -> float:
        if not _valid_charge(charge):
            raise PrivacyParameterError("a privacy charge must be a finite number greater than 0")
        return gaussian_sigma_for_mu(math.sqrt(charge), sensitivity)

    def sensitivity_of(self, l2: float, l1: float) -> float:
        return l2


@dataclass(frozen=True, slots=True, kw_only=True)
class PureAccountant(_Additive):
    """Pure DP filter: Laplace releases, admits ``eps_i`` while ``sum eps_i <= epsilon``.

    Guarantee: ``epsilon``-DP (``delta = 0``) under add/remove-one-row neighbours by basic
    composition (Dwork & Roth 2014, Theorem 3.16), each release Laplace with ``b = Delta_1/eps_i``.
    """

    epsilon: float

    @staticmethod
    def create(epsilon: float) -> PureAccountant:
        if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
            raise PrivacyParameterError("epsilon must be a finite number greater than 0")
        return PureAccountant(cap=Fraction(epsilon), epsilon=epsilon)

    @property
    def kind(self) -> AccountantKind:
        return AccountantKind.PURE

    @property
    def noise(self) -> NoiseKind:
        return NoiseKind.LAPLACE

    def noise_scale(self, charge: float, sensitivity: float) -> float:
        return laplace_scale(charge, sensitivity)

    def sensitivity_of(self, l2: float, l1: float) -> float:
        return l1


def _validate_eps_delta(epsilon: float, delta: float) -> None:
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise PrivacyParameterError("epsilon must be a finite number greater than 0")
    if not (isinstance(delta, int | float) and 0 < delta < 1):
        raise PrivacyParameterError("delta must be a number strictly between 0 and 1")


def make_accountant(
    kind: AccountantKind | str, *, epsilon: float, delta: float, max_releases: int
) -> BasicAccountant | GdpAccountant | PureAccountant:
    """Build the accountant for an epoch (``max_releases`` only matters for ``basic``)."""
    try:
        k = AccountantKind(kind)
    except ValueError:
        raise PrivacyParameterError("accountant must be one of: basic, gdp, pure") from None
    if k is AccountantKind.BASIC:
        return BasicAccountant.create(epsilon, delta, max_releases)
    if k is AccountantKind.GDP:
        return GdpAccountant.create(epsilon, delta)
    if delta != 0:
        raise PrivacyParameterError("the pure accountant requires delta = 0")
    return PureAccountant.create(epsilon)


def noise_variance(kind: NoiseKind, scale: float) -> float:
    """Variance of one draw: ``sigma^2`` (Gaussian) or ``2 b^2`` (Laplace)."""
    return scale * scale if kind is NoiseKind.GAUSSIAN else 2.0 * scale * scale
