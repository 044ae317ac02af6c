"""rewriter.stream_length: S and E of the next epoch from the log's windows."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from rewriter.stream_length import MARGIN, estimate

DAY = 86_400.0


@dataclass(frozen=True)
class Rec:
    time: float
    key: str


def test_a_bursty_log_gets_the_busy_windows_s_not_the_median() -> None:
    """Most days ask 10 distinct statements, some 120: S follows the busiest day, with the
    margin (the median day, what S was before, would refuse most of a busy epoch)."""
    sizes = [10, 10, 120, 10, 10, 10, 90, 10, 10, 10]
    log = [
        Rec(-(len(sizes) - d) * DAY + i, f"d{d}q{i % (s // 2 if s > 50 else s)}")
        for d, s in enumerate(sizes)
        for i in range(s)
    ]
    e = estimate(log, window=DAY, now=0.0)
    assert e is not None
    distinct = [s // 2 if s > 50 else s for s in sizes]  # the busy days ask each twice
    assert e.counts == tuple(distinct)
    assert e.stream_length == math.ceil(max(distinct) * MARGIN) == 90
    assert e.typical == pytest.approx(sum(distinct) / len(distinct))
    assert e.stream_length > 4 * sorted(distinct)[len(distinct) // 2]
    # E: a level of the windows, less the share P is expected to answer; at least 1, at most S
    assert e.expected_fresh() == math.ceil(e.typical)
    assert e.expected_fresh(0.5, quantile=1.0) == 30
    assert e.expected_fresh(1.0) == 1


def test_windows_are_the_epochs_length_and_end_now() -> None:
    """Two-day windows aligned to end at now: a day's statements and the next day's fall
    into one window; statements at or after now are not counted, nor empty windows."""
    log = [Rec(-4 * DAY + 10, "a"), Rec(-3 * DAY + 10, "b"), Rec(-DAY, "a"), Rec(5.0, "c")]
    e = estimate(log, window=2 * DAY, now=0.0)
    assert e is not None and e.counts == (2, 1)
    assert estimate([Rec(1.0, "x")], window=DAY, now=0.0) is None
    with pytest.raises(ValueError):
        estimate(log, window=0.0, now=0.0)
