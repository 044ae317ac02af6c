"""How many distinct statements an epoch will see, from the query log (pure).

An epoch of LAPRAS fixes S, the most fresh (online) answers it makes: the statement after the
S-th fresh answer is refused for budget, whatever budget is left. The default mode's steady
pacing (``dp.pacing``) also takes E, the number of fresh answers it expects, and spreads the
online budget over them. Both are read from the log by :func:`estimate`, for an epoch of a
given length (``window``: ``lapras predict --horizon-days``):

* the log's statements of the table fall into windows of the epoch's length, aligned so that
  the last one ends at "now"; a window's count is its number of *distinct* statements (a
  statement asked again in an epoch is answered with its stored answer: no fresh noise);
* **S** is the busiest active window's count (the quantile :data:`QUANTILE`, 1), times a
  margin (:data:`MARGIN`, 1.5), rounded up. The busiest, since exploratory use is bursty: the
  median window of such a log is several times below its busy ones, and an epoch planned on it
  refused 13-47% of a busy stream. A margin, since the next epoch may be busier than any the log
  holds. An S too large costs nothing under the default accountant (S only bounds the number of
  fresh answers; ``basic`` splits delta over S + 1 releases);
* **E** is a level of the windows' counts (their mean, or a quantile:
  :meth:`StreamEstimate.level`; ``rewriter.predict_cap`` picks the one its backtest prices
  best) less the share of them the predicted set is expected to answer
  (:meth:`StreamEstimate.expected_fresh`): E too large lowers every fresh answer's precision a
  little, E too small those beyond it, smoothly.

Windows with no statement of the table are not counted: an epoch is started for work, and a
quiet day would pull the estimates towards zero.

>>> from rewriter.predict import Resolved
>>> day = 86_400.0
>>> def r(t, k):
...     return Resolved(time=t, calls=1, analyst="", session="", sql="", template="",
...                     bindings=(), plan=None, key=k)
>>> log = [r(-3 * day + i, f"a{i}") for i in range(4)] + [r(-day + 1, "b")]
>>> e = estimate(log, window=day, now=0.0)
>>> e.counts, e.stream_length, e.typical, e.expected_fresh(0.5, quantile=1.0)
((4, 1), 6, 2.5, 2)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Keyed(Protocol):
    """A statement of the log: when it was asked and what it is (``Resolved`` is one)."""

    @property
    def time(self) -> float: ...

    @property
    def key(self) -> str: ...


#: S is this quantile of the log's active windows' distinct statements (the busiest) ...
QUANTILE = 1.0
#: ... times this margin.
MARGIN = 1.5


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEstimate:
    """The log's windows of one epoch's length, and what they say of the next epoch."""

    window: float
    #: distinct statements of each active window, oldest first
    counts: tuple[int, ...]
    #: S: the most fresh answers the epoch makes (see the module doc)
    stream_length: int
    #: the mean number of distinct statements of an active window
    typical: float

    def level(self, quantile: float | None = None) -> float:
        """A window's distinct statements: the mean (``quantile`` None) or that quantile of the
        active windows' counts."""
        if quantile is None:
            return self.typical
        return float(np.quantile(np.asarray(self.counts, dtype=np.float64), quantile))

    def expected_fresh(self, covered: float = 0.0, quantile: float | None = None) -> int:
        """E: the distinct statements of a window (:meth:`level`) less the share ``covered``
        of them the predicted set is expected to answer, at least 1, at most S."""
        fresh = self.level(quantile) * (1.0 - min(max(covered, 0.0), 1.0))
        return max(1, min(self.stream_length, math.ceil(fresh - 1e-9)))


def estimate(
    records: Iterable[Keyed],
    *,
    window: float,
    now: float,
    quantile: float = QUANTILE,
    margin: float = MARGIN,
) -> StreamEstimate | None:
    """S and the typical window from resolved records of one table before ``now`` (module
    doc); None when none of them is a statement. Statements are told apart by their
    canonical key (``Resolved.key``: the set of their linear queries)."""
    if not (window > 0 and 0 <= quantile <= 1 and margin >= 1):
        raise ValueError("the window must be positive, the quantile in [0, 1], the margin >= 1")
    windows: dict[int, set[str]] = {}
    for r in records:
        if r.key and r.time < now:
            windows.setdefault(math.floor((r.time - now) / window), set()).add(r.key)
    if not windows:
        return None
    counts = tuple(len(windows[w]) for w in sorted(windows))
    high = float(np.quantile(np.asarray(counts, dtype=np.float64), quantile))
    return StreamEstimate(
        window=window,
        counts=counts,
        stream_length=max(1, math.ceil(high * margin - 1e-9)),
        typical=float(np.mean(counts)),
    )


__all__ = ["MARGIN", "QUANTILE", "Keyed", "StreamEstimate", "estimate"]
