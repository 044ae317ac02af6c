"""How many fresh answers an epoch should expect, from the query log (pure).

The Steady pacing of the default mode (``dp.pacing``) spreads an epoch's online budget over E
fresh answers. When an administrator does not set E (``expected_fresh``) and the epoch is not
started from a prediction, ``lapras epoch start`` reads it from the query log with
:func:`expected_fresh`: the distinct statements of the busiest window of the epoch's length
that the log holds, times a margin. Distinct, since a statement asked again in the epoch is
answered with its stored answer (no fresh noise); the busiest window, with a margin, since
running short of E costs precision (the answers beyond E get less precise, smoothly) while an
E too large only lowers every answer's precision a little.

The windows are counted in one place, ``rewriter.stream_length.estimate``, which also gives a
prediction its S and E (``rewriter.predict_cap``: there a backtest of the log's windows
chooses the level E is taken at, and what P answers is taken off). Here, with no backtest,
E is that estimate's S: the busiest window with the margin.

>>> from rewriter.predict import LogRecord
>>> day = 86_400.0
>>> log = [LogRecord(time=t * 3_600.0, key=k) for t, k in [(1, "a"), (2, "b"), (3, "a")]]
>>> log += [LogRecord(time=2 * day, key="c")]  # windows end just after it
>>> expected_fresh(log, window_seconds=day)
3
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .predict import LogRecord, TimeLike, seconds
from .stream_length import MARGIN, estimate

#: Outcomes that made no release (the declared values alone answered them): not counted.
_NO_RELEASE = frozenset({"public"})


@dataclass(frozen=True, slots=True)
class _Keyed:
    time: float
    key: str


def expected_fresh(
    records: Iterable[LogRecord],
    *,
    window_seconds: float,
    margin: float = MARGIN,
    now: TimeLike | None = None,
) -> int | None:
    """E from a table's log records: the largest number of distinct statements (by the
    plan's batch key, else the SQL or template with its bindings) logged in one window of
    ``window_seconds`` (windows aligned to end at ``now``; None: just after the latest
    record), times ``margin``, rounded up; None when the log holds no statement. Public: the
    statements analysts sent."""
    if not (window_seconds > 0 and margin >= 1):
        raise ValueError("the window must be positive and the margin at least 1")
    keyed = [
        _Keyed(seconds(r.time), r.key or r.sql or f"{r.template}\0{r.bindings!r}")
        for r in records
        if r.outcome not in _NO_RELEASE
    ]
    if not keyed:
        return None
    end = seconds(now) if now is not None else max(k.time for k in keyed) + 1e-3
    got = estimate(keyed, window=window_seconds, now=end, quantile=1.0, margin=margin)
    return got.stream_length if got is not None else None
