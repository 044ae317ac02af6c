"""Noise samplers: the one place randomness enters the DP core.

Production uses :class:`SecureSampler` (a cryptographically secure, floating-point-safe
source). Tests and benchmarks inject :class:`SeededSampler`; production never uses a seed.
"""

from __future__ import annotations

from typing import Protocol

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
