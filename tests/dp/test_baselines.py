"""Baselines: Online Independent Noise and OfflineMM."""

from __future__ import annotations

import numpy as np
import pytest

from dp.baselines import offline_mm, online_independent_noise
from dp.calibration import agm_sigma
from dp.noise import SeededSampler


def test_online_independent_noise_scale() -> None:
    w = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
    x = np.array([5.0, 6.0, 7.0])
    ans, sig = online_independent_noise(
        w, x, SeededSampler(0), epsilon=1.0, delta=1e-3, stream_length=100
    )
    unit = agm_sigma(0.01, 1e-3 / 101)
    assert unit == pytest.approx(244.07, abs=0.01)
    assert sig.tolist() == pytest.approx([unit, 2 * unit])
    assert ans.shape == (2,)
    with pytest.raises(ValueError):
        online_independent_noise(w, x, SeededSampler(0), epsilon=1, delta=1e-3, stream_length=1)


def test_offline_mm_is_unbiased_with_its_variance() -> None:
    rng = np.random.default_rng(3)
    w = np.tril(np.ones((6, 6)))
    x = rng.integers(0, 50, 6).astype(float)
    runs = np.array(
        [
            offline_mm(w, x, SeededSampler(s), epsilon=1.0, delta=1e-3, stream_length=6)[0]
            for s in range(300)
        ]
    )
    _, var = offline_mm(w, x, SeededSampler(0), epsilon=1.0, delta=1e-3, stream_length=6)
    se = np.sqrt(var / 300)
    assert np.all(np.abs(runs.mean(axis=0) - w @ x) < 5 * se)
    assert np.allclose(runs.var(axis=0), var, rtol=0.3)
