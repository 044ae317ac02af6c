"""Noise samplers: the one place randomness enters the DP core.

Production uses :class:`SecureSampler` (a cryptographically secure, floating-point-safe
source). Tests and benchmarks inject :class:`SeededSampler`; production never uses a seed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from dp.domain import FloatArray


class Sampler(Protocol):
    """Draws i.i.d. noise; ``scale`` is the standard deviation (Gaussian) or b (Laplace)."""

    def gaussian(self, scale: float, size: int) -> FloatArray: ...

    def laplace(self, scale: float, size: int) -> FloatArray: ...


class SeededSampler:
    """A reproducible numpy sampler, for tests and benchmarks only (not secure)."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def gaussian(self, scale: float, size: int) -> FloatArray:
        return self._rng.normal(0.0, scale, size)

    def laplace(self, scale: float, size: int) -> FloatArray:
        return self._rng.laplace(0.0, scale, size)


@functools.cache
def _opendp_spaces() -> tuple[Any, tuple[Any, Any], tuple[Any, Any]]:
    """OpenDP, with the input spaces of its Gaussian (L2) and Laplace (L1) vector mechanisms:
    built once per process (half a millisecond each time otherwise; they hold no state)."""
    import opendp.prelude as odp  # imported here: only production needs it

    odp.enable_features("contrib")
    vectors = odp.vector_domain(odp.atom_domain(T=float, nan=False))
    return odp, (vectors, odp.l2_distance(T=float)), (vectors, odp.l1_distance(T=float))


class SecureSampler:
    """Production sampler: OpenDP's cryptographically secure, floating-point-safe samplers.

    OpenDP draws Gaussian and Laplace noise exactly (from a CSPRNG, by discrete sampling on a
    fine lattice and correct rounding, so the float noise does not leak through its low bits:
    Mironov 2012). Only OpenDP's *samplers* are used, at the scale this project calibrates
    (``dp.calibration``); OpenDP's own accounting (zCDP for its Gaussian) is not ours. The noise
    is obtained as the mechanism's output on an all-zero vector.
    """

    def __init__(self) -> None:
        self._odp, self._space_l2, self._space_l1 = _opendp_spaces()

    @staticmethod
    def _check(scale: float, size: int) -> None:
        if not (isinstance(scale, int | float) and np.isfinite(scale) and scale > 0):
            raise ValueError("noise scale must be a finite number greater than 0")
        if not (isinstance(size, int | np.integer) and size >= 0):
            raise ValueError("noise size must be a non-negative integer")

    def gaussian(self, scale: float, size: int) -> FloatArray:
        """``size`` i.i.d. draws of ``N(0, scale^2)``."""
        self._check(scale, size)
        if size == 0:
            return np.zeros(0, dtype=np.float64)
        m = self._odp.m.make_gaussian(*self._space_l2, scale=float(scale))
        return np.asarray(m([0.0] * int(size)), dtype=np.float64)

    def laplace(self, scale: float, size: int) -> FloatArray:
        """``size`` i.i.d. draws of ``Laplace(0, scale)`` (standard deviation ``scale * sqrt 2``)."""
        self._check(scale, size)
        if size == 0:
            return np.zeros(0, dtype=np.float64)
        m = self._odp.m.make_laplace(*self._space_l1, scale=float(scale))
        return np.asarray(m([0.0] * int(size)), dtype=np.float64)


class DrawnAhead:
    """A sampler for a known sequence of draws (a group of releases), drawn from ``base`` in
    one call per (distribution, scale) and handed out in order.

    ``requests``: the ``("gaussian" | "laplace", scale, size)`` draws to come. Each request
    gets the next unused slice of its vector; no value is handed out twice. The slices of one
    vector are disjoint parts of one i.i.d. draw from ``base``, so every request's noise has
    exactly the distribution (and independence from the others) that a draw of its own from
    ``base`` would have; only the number of calls into ``base`` changes (OpenDP's sampler costs
    about 0.1 ms of Python per call, beside its ~50 us per value). A request beyond what was
    announced gets a draw of its own from ``base``.
    """

    def __init__(self, base: Sampler, requests: Iterable[tuple[str, float, int]]) -> None:
        self._base = base
        sizes: dict[tuple[str, float], int] = {}
        for kind, scale, size in requests:
            if kind not in ("gaussian", "laplace"):
                raise ValueError("a draw is 'gaussian' or 'laplace'")
            key = (kind, float(scale))
            sizes[key] = sizes.get(key, 0) + int(size)
        self._drawn = {
            key: np.asarray(getattr(base, key[0])(key[1], n), dtype=np.float64)
            for key, n in sizes.items()
        }
        self._used = dict.fromkeys(self._drawn, 0)

    def _take(self, kind: str, scale: float, size: int) -> FloatArray:
        key = (kind, float(scale))
        drawn = self._drawn.get(key)
        at = self._used.get(key, 0)
        if drawn is None or at + size > len(drawn):
            return np.asarray(getattr(self._base, kind)(scale, size), dtype=np.float64)
        self._used[key] = at + size
        return drawn[at : at + size]

    def gaussian(self, scale: float, size: int) -> FloatArray:
        return self._take("gaussian", scale, size)

    def laplace(self, scale: float, size: int) -> FloatArray:
        return self._take("laplace", scale, size)
