"""Each aggregate's own error: its estimate from a noisy histogram, and its 95% interval.

Post-processing of a DP answer (its noisy values and the standard errors the engine states,
functions of public noise scales): no privacy cost, no new release. ``lapras_interval_low(agg)``
and ``lapras_interval_high(agg)`` in a DP statement are the two ends of ``agg``'s interval, of
the same type as ``agg`` (docs/sql.md §2.11), computed from the same answer as ``agg`` itself:

- ``count``: ``n ± Z se`` (``Z`` = :data:`dp.stats.Z`, 2.118), rounded outwards, never below 0;
- ``sum``: ``s ± Z se``, never on the wrong side of 0 when its argument's range is;
- ``avg``: ``m ± Z se`` with ``se`` by the delta method from its sum's and its count's
  standard errors at the noisy values (``sqrt(se_s^2 + (m se_n)^2) / n``), within the range of
  its argument in the group;
- ``min``, ``max``, percentiles and ``count(DISTINCT)``: the interval :mod:`dp.stats` computes
  for that statistic from the group's noisy histogram (not the histogram's count error).

A NULL aggregate (a SUM or AVG over a noisy count of 0, a statistic of an empty histogram) has
NULL ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dp import stats

FloatArray = npt.NDArray[np.float64]

#: The aggregates computed from one noisy histogram.
HISTOGRAM_FUNCS = frozenset(
    {"min", "max", "count_distinct", "percentile_cont", "percentile_disc", "mode"}
)
#: Those with an interval (``mode`` has none: its values need not be ordered by closeness).
INTERVAL_FUNCS = HISTOGRAM_FUNCS - {"mode"}
#: The functions an analyst writes around an aggregate, and the end each gives.
FUNCTIONS = {"lapras_interval_low": "low", "lapras_interval_high": "high"}


@dataclass(frozen=True, slots=True)
class Hist:
    """A group's noisy histogram of one expression: the public values that can hold a row in
    the group (ascending; NULL left out), each one's noisy count and its standard error."""

    values: tuple[object, ...]
    counts: FloatArray
    errors: FloatArray


def hist_of(
    values: tuple[object, ...],
    counts: npt.ArrayLike,
    errors: npt.ArrayLike | None = None,
    reachable: npt.ArrayLike | None = None,
) -> Hist:
    """A group's histogram of one expression: ``counts`` (noisy, or exact when ``errors`` is
    None) over ``values``, keeping only the values a row of the group can have (``reachable``,
    public; None: all) and not NULL."""
    raw = np.asarray(counts, dtype=np.float64).reshape(-1)
    se = np.zeros_like(raw) if errors is None else np.asarray(errors, dtype=np.float64)
    reach = np.ones(raw.shape, dtype=bool) if reachable is None else np.asarray(reachable, bool)
    keep = [i for i, v in enumerate(values) if v is not None and reach[i]]
    return Hist(values=tuple(values[i] for i in keep), counts=raw[keep], errors=se[keep])


def mode(hist: Hist, *, desc: bool = False) -> object:
    """``mode() WITHIN GROUP (ORDER BY x [DESC])``: the value with the largest (noisy) count;
    a tie goes to the first value in the sort order (the last with DESC). NULL when no value
    can hold a row, or the counts are exact and all 0."""
    y = hist.counts
    if y.size == 0 or (not np.any(hist.errors > 0) and not np.any(y >= 0.5)):
        return None
    sign = 1 if desc else -1
    best = max(range(y.size), key=lambda i: (float(y[i]), sign * i))
    return hist.values[best]


def of_histogram(func: str, fraction: float | None, hist: Hist) -> tuple[object, object, object]:
    """``func`` of the histogram: ``(estimate, low, high)``, values of ``hist.values`` (floats
    for ``percentile_cont``, ints for ``count_distinct``). Nones (NULL) when no value can hold a
    row, or the counts are exact and all 0 (``count_distinct``: 0)."""
    y, s = hist.counts, hist.errors
    if func == "count_distinct":
        c = stats.distinct(y, s)
        return c.value, c.low, c.high
    if func in ("min", "max"):
        loc = stats.extreme(y, s, largest=func == "max")
    else:
        loc = stats.percentile(y, s, float(fraction or 0.0), cont=func == "percentile_cont")
    if loc is None:
        return None, None, None
    v = hist.values
    if func == "percentile_cont":
        a, b = float(v[loc.lower]), float(v[loc.upper])  # type: ignore[arg-type]
        return a + (b - a) * loc.t, float(v[loc.low]), float(v[loc.high])  # type: ignore[arg-type]
    return v[loc.lower], v[loc.low], v[loc.high]


def around(value: float, se: float) -> tuple[float, float]:
    """``value ± Z se``."""
    return value - stats.Z * se, value + stats.Z * se


def outwards(low: float, high: float) -> tuple[int, int]:
    """An interval of integers holding ``[low, high]`` (exact values stay themselves)."""
    return math.floor(low + 1e-9), math.ceil(high - 1e-9)


def avg_error(total: float, n: float, se_total: float, se_n: float) -> float:
    """The delta-method standard error of ``total / n``."""
    mean = total / n
    return math.sqrt(se_total**2 + (mean * se_n) ** 2) / n
