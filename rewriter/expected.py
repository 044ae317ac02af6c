"""How many fresh answers an epoch should expect, from the query log (pure).

The Steady pacing of the default mode (``dp.pacing``) spreads an epoch's online budget over E
fresh answers. When an administrator does not set E (``expected_fresh``), ``lapras epoch
start`` reads it from the query log with :func:`expected_fresh`: the distinct statements of
the busiest window of the epoch's length that the log holds, times a margin. Distinct, since a
statement asked again in the epoch is answered with its stored answer (no fresh noise); the
busiest window, with a margin, since running short of E costs precision (the answers beyond E
get less precise, smoothly) while an E too large only lowers every answer's precision a little.

This is the one place that estimate is made; ``rewriter.predict``'s own S estimate (the median
window, for the predictor's cap) may be reworked without touching the epoch's E, and vice
versa.

>>> from rewriter.predict import LogRecord
>>> day = 86_400.0
>>> log = [LogRecord(time=t * 3_600.0, key=k) for t, k in [(1, "a"), (2, "b"), (3, "a")]]
>>> log += [LogRecord(time=day + 1.0, key="c")]
>>> expected_fresh(log, window_seconds=day)
3
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .predict import LogRecord, seconds

#: E is the busiest window's distinct statements times this.
MARGIN = 1.5
#: Outcomes that made no release (the declared values alone answered them): not counted.
_NO_RELEASE = frozenset({"public"})


def expected_fresh(
    records: Iterable[LogRecord], *, window_seconds: float, margin: float = MARGIN
) -> int | None:
    """E from a table's log records: the largest number of distinct statements (by the
    plan's batch key, else the SQL or template with its bindings) logged in one window of
    ``window_seconds`` (windows aligned on multiples of it), times ``margin``, rounded up;
    None when the log holds no statement. Public: the statements analysts sent."""
    if not (window_seconds > 0 and margin >= 1):
        raise ValueError("the window must be positive and the margin at least 1")
    windows: dict[int, set[str]] = {}
    for r in records:
        if r.outcome in _NO_RELEASE:
            continue
        key = r.key or r.sql or f"{r.template}\0{r.bindings!r}"
        windows.setdefault(math.floor(seconds(r.time) / window_seconds), set()).add(key)
    if not windows:
        return None
    return max(1, math.ceil(max(len(keys) for keys in windows.values()) * margin))
