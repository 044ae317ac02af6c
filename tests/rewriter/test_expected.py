"""E, the fresh answers an epoch expects, from the query log (rewriter.expected)."""

from __future__ import annotations

import datetime as dt

import pytest

from rewriter.expected import expected_fresh
from rewriter.predict import LogRecord

DAY = 86_400.0


def test_busiest_window_of_distinct_statements_with_a_margin() -> None:
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    log = [
        # day 1: three distinct statements, one of them asked twice
        *(LogRecord(time=t0 + dt.timedelta(hours=h), key=k) for h, k in enumerate("abca")),
        # day 2: five distinct (repeats of day 1 count again: a new epoch answers them anew)
        *(LogRecord(time=t0 + dt.timedelta(days=1, hours=h), key=k) for h, k in enumerate("abdef")),
        # answered from the declared values alone: no release, not counted
        LogRecord(time=t0 + dt.timedelta(days=1), key="g", outcome="public"),
    ]
    assert expected_fresh(log, window_seconds=DAY) == 8  # ceil(5 * 1.5)
    assert expected_fresh(log, window_seconds=2 * DAY) == 9  # a..f over both days
    assert expected_fresh(log, window_seconds=DAY, margin=1.0) == 5
    # without a key, the SQL (or the template and its bindings) tells statements apart
    raw = [LogRecord(time=1.0, sql="SELECT 1"), LogRecord(time=2.0, template="t", bindings=(1,))]
    raw.append(LogRecord(time=3.0, template="t", bindings=(2,)))
    assert expected_fresh(raw, window_seconds=DAY, margin=1.0) == 3


def test_an_empty_log_gives_none_and_bad_arguments_are_refused() -> None:
    assert expected_fresh([], window_seconds=DAY) is None
    with pytest.raises(ValueError):
        expected_fresh([], window_seconds=0.0)
    with pytest.raises(ValueError):
        expected_fresh([], window_seconds=DAY, margin=0.5)


def test_windows_end_at_now_as_a_predictions_do() -> None:
    """E is counted on rewriter.stream_length's windows (the one estimate a prediction's S
    and E come from): aligned to end at ``now``, so the same log gives another busiest window
    when the epoch starts at another hour."""
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    log = [LogRecord(time=t0 + dt.timedelta(hours=h), key=k) for h, k in enumerate("abcdef")]
    # a day ending at 03:00 holds a..c (hours 0-2), the one after d..f
    now = t0 + dt.timedelta(days=1, hours=3)
    assert expected_fresh(log, window_seconds=DAY, margin=1.0, now=now) == 3
    # a day ending at 06:00 holds all six; a statement at or after now is not counted
    assert expected_fresh(log, window_seconds=DAY, margin=1.0, now=t0 + dt.timedelta(hours=6)) == 6
    assert expected_fresh(log, window_seconds=DAY, margin=1.0, now=t0 + dt.timedelta(hours=2)) == 2
