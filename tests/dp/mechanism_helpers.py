"""Helpers shared by the tests of the published mechanisms (MLDP, PMW/MWEM)."""

from __future__ import annotations

import numpy as np

from dp.domain import FloatArray
from dp.noise import SeededSampler


class SpySampler:
    """A seeded sampler that records every call."""

    def __init__(self, seed: int = 0) -> None:
        self.inner = SeededSampler(seed)
        self.calls: list[tuple[str, float, int]] = []

    def gaussian(self, scale: float, size: int) -> FloatArray:
        self.calls.append(("gaussian", scale, size))
        return self.inner.gaussian(scale, size)

    def laplace(self, scale: float, size: int) -> FloatArray:
        self.calls.append(("laplace", scale, size))
        return self.inner.laplace(scale, size)


def ranges(n: int, m: int, seed: int) -> FloatArray:
    rng = np.random.default_rng(seed)
    w = np.zeros((m, n))
    for i in range(m):
        a, b = sorted(rng.integers(0, n + 1, 2))
        w[i, a : max(b, a + 1)] = 1.0
    return w


def histogram(n: int, total: int, seed: int) -> FloatArray:
    rng = np.random.default_rng(seed)
    shape = np.exp(-0.5 * ((np.arange(n) - 0.35 * n) / (0.15 * n)) ** 2) + 0.05
    return rng.multinomial(total, shape / shape.sum()).astype(np.float64)
