"""Traces -> the SQL a dashboard sends: one query log per session.

**Crossfilter** (flights, movies, weather). The UI has one COUNT histogram per view attribute,
all linked. The state is one brush per view; an interaction sets the brush of its view (a
zero-width selection clears it), rounded *outwards* to the declared bins (lower bounds down,
upper bounds up: the smallest bin-aligned range covering the one asked). When the rounded state
changes, every *other* view is refreshed: its histogram filtered by the brushes of all views but
itself (a mouse move that leaves the rounded brushes as they were sends nothing). When the
session starts every view is drawn unfiltered. A histogram is one statement, in the form the
rewriter answers for its attribute:

* unit bins (flights' hours): ``SELECT dep_time, count(*) FROM flights WHERE ... GROUP BY
  dep_time``;
* integer bins of one width over at most 10,000 values: ``SELECT ((distance - 0) / 200 + 1) AS
  distance_bin, count(*) FROM flights WHERE ... GROUP BY 1`` (the bin's number, 1-based, as
  ``width_bucket`` numbers them; in integer arithmetic, since PostgreSQL computes
  ``width_bucket`` in doubles, which put 3000 of ``width_bucket(distance, 0, 5200, 26)`` in
  the bucket before 3001's, and the rewriter refuses a key that cuts a declared bin);
* other bins (numeric attributes; the dates, in milliseconds): one ``count(*) FILTER (WHERE c >= a
  AND c < b)`` per bin, in one statement (the rewriter refuses GROUP BY over numeric bins).

Brush filters are ``c >= a AND c < b`` with the declared edges, in column order. Times: the
interaction's own (ms since the session's start).

**IDEBench** (flights). A workflow creates visualisations (1-2 binning dimensions, a COUNT or an
AVG), links them (``source``: the target is filtered by the sources' selections and, in turn, by
what filters them), selects (a disjunction of bins or values per dimension, rounded outwards) and
filters (a predicate on the visualisation itself). After each interaction, the visualisations it
changes are re-drawn: the created or linked one; for a selection every visualisation it filters
(transitively); for a filter the visualisation and those it filters. A visualisation is one
statement: ``SELECT <keys>, <aggregate> FROM flights WHERE <filters> GROUP BY <keys>``, a key
being the bin number of a numeric dimension in its declared bins (as above; each
visualisation is drawn in the declared bins, whatever width the workflow drew for it) or the
categorical column. ``AVG(X)`` becomes the average of X's bin midpoint (``avg(bin * w + c)``):
the rewriter answers AVG only of an expression that takes one value per declared bin. The
workflows have no times: one interaction every :data:`IDEBENCH_STEP` seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from bench.predict.datasets import (
    IDEBENCH,
    Attr,
    Dataset,
    dataset,
    load_trace,
    trace_files,
)

IDEBENCH_STEP = 5.0
_SEL = re.compile(r"^(\w+) >= (-?[\d.e+-]+) AND \1 < (-?[\d.e+-]+)$")
_RANGE = re.compile(r"^\(?(\w+) >= (-?[\d.]+) and \1 < (-?[\d.]+)\)?$")
_EQ = re.compile(r"^\(?(\w+) = '([^']*)'\)?$")


@dataclass(frozen=True, slots=True)
class Session:
    """One session's queries: ``(seconds since its start, SQL)``, in order."""

    dataset: str
    analyst: str  # crossfilter: the user (first 8 hex digits); IDEBench: the workflow type
    task: int  # crossfilter: the task; IDEBench: the workflow's index
    name: str  # the trace file's stem
    queries: tuple[tuple[float, str], ...]

    @property
    def label(self) -> str:
        return f"{self.analyst}/{self.task}"


# --------------------------------------------------------------------------------------------
# SQL


def lit(v: Decimal | int | str) -> str:
    """A SQL literal (numbers without exponent or trailing zeros; strings quoted)."""
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    d = Decimal(v)
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def round_out(a: Attr, lo: float, hi: float) -> tuple[int, int] | None:
    """``[lo, hi)`` rounded outwards to the declared bins: ``(first bin, last bin + 1)``, or
    None when it is empty (clamped to the domain)."""
    if hi <= lo:
        return None
    e = [float(x) for x in a.edges]
    i = max([k for k, x in enumerate(e[:-1]) if x <= lo], default=0)
    j = min([k for k, x in enumerate(e) if x >= hi and k > 0], default=len(e) - 1)
    return (i, j) if j > i else None


def range_sql(a: Attr, i: int, j: int) -> str:
    """Bins ``i .. j - 1`` of ``a`` as a condition."""
    return f"{a.column} >= {lit(a.edges[i])} AND {a.column} < {lit(a.edges[j])}"


def _where(parts: Sequence[str]) -> str:
    return (" WHERE " + " AND ".join(parts)) if parts else ""


def bucket(a: Attr) -> str:
    """The group key of a uniformly binned integer attribute: its bin's number from 1, as
    ``width_bucket`` numbers them, in integer arithmetic (exact on every declared bin)."""
    assert a.width is not None
    return f"(({a.column} - {lit(a.edges[0])}) / {lit(a.width)} + 1)"


def histogram_sql(ds: Dataset, a: Attr, filters: Sequence[str]) -> str:
    """The COUNT histogram of ``a`` under ``filters`` (one statement; see the module doc)."""
    w = _where(filters)
    if a.unit:
        return f"SELECT {a.column}, count(*) FROM {ds.table}{w} GROUP BY {a.column}"
    if a.groupable:
        return f"SELECT {bucket(a)} AS {a.column}_bin, count(*) FROM {ds.table}{w} GROUP BY 1"
    cols = ", ".join(
        f"count(*) FILTER (WHERE {range_sql(a, i, i + 1)}) AS b{i}" for i in range(a.bins)
    )
    return f"SELECT {cols} FROM {ds.table}{w}"


# --------------------------------------------------------------------------------------------
# Crossfilter


def crossfilter_session(ds: Dataset, path: Path) -> Session:
    trace = load_trace(path)
    user, _, task, *_ = path.name.split("_")
    views = [ds.by_dimension(v["binning"][0]["dimension"]) for v in trace["setup"]]
    attrs = [a for a in views if a is not None]
    brushes: dict[str, tuple[int, int]] = {}

    def refresh(t: float, changed: str | None) -> list[tuple[float, str]]:
        out = []
        for a in attrs:
            if a.column == changed:
                continue
            filters = [
                range_sql(ds.attr(c), *b) for c, b in sorted(brushes.items()) if c != a.column
            ]
            out.append((t, histogram_sql(ds, a, filters)))
        return out

    queries = refresh(0.0, None)
    for it in trace["interactions"]:
        m = _SEL.match(it.get("selection", ""))
        a = ds.by_dimension(it["name"])
        if m is None or a is None:
            continue
        got = round_out(a, float(m.group(2)), float(m.group(3)))
        old = brushes.get(a.column)
        if got == old:
            continue
        if got is None:
            del brushes[a.column]
        else:
            brushes[a.column] = got
        queries += refresh(float(it["time"]) / 1000.0, a.column)
    return Session(ds.name, user[:8], int(task), path.name.split(".")[0], tuple(queries))


# --------------------------------------------------------------------------------------------
# IDEBench

#: A predicate: (column, allowed bins or values) terms, all of which must hold.
Term = tuple[str, frozenset[object]]


def _atom(ds: Dataset, text: str) -> tuple[Attr, frozenset[object]] | None:
    text = text.strip()
    m = _RANGE.match(text)
    if m is not None:
        a = ds.by_dimension(m.group(1))
        if a is None:
            return None
        got = round_out(a, float(m.group(2)), float(m.group(3)))
        return (a, frozenset(range(*got))) if got is not None else None
    m = _EQ.match(text)
    if m is not None:
        a = ds.by_dimension(m.group(1))
        if a is None:
            return None
        if a.kind == "categorical":
            return a, frozenset([m.group(2)]) if m.group(2) in a.values else frozenset()
        v = Decimal(m.group(2))  # YEAR_DATE = '1995': a unit bin
        k = [i for i in range(a.bins) if a.edges[i] <= v < a.edges[i + 1]]
        return a, frozenset(k)
    return None


def _split(text: str, sep: str) -> list[str]:
    """``text`` split on ``sep`` outside parentheses."""
    out: list[str] = []
    cur: list[str] = []
    depth = i = 0
    while i < len(text):
        ch = text[i]
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and text.startswith(sep, i):
            out.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def _strip(text: str) -> str:
    """``text`` without the parentheses that enclose all of it."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for k, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and k < len(text) - 1:
                return text  # the first parenthesis closes before the end
        text = text[1:-1].strip()
    return text


def parse_predicate(ds: Dataset, text: str) -> tuple[Term, ...]:
    """IDEBench's ``((A ...) or (A ...)) and ((B = 'x') or ...)`` as terms (one per
    dimension: the union of its rounded bins or values)."""
    terms: dict[str, set[object]] = {}
    for group in _split(_strip(text), " and "):
        for atom in _split(_strip(group), " or "):
            got = _atom(ds, _strip(atom))
            if got is None:
                continue
            a, vals = got
            terms.setdefault(a.column, set()).update(vals)
    return tuple(sorted((c, frozenset(v)) for c, v in terms.items()))


def term_sql(ds: Dataset, term: Term) -> str:
    col, vals = term
    a = ds.attr(col)
    if a.kind == "categorical":
        vs = sorted(str(v) for v in vals)
        if len(vs) == 1:
            return f"{col} = {lit(vs[0])}"
        return f"{col} IN (" + ", ".join(lit(v) for v in vs) + ")"
    bins = sorted(int(str(v)) for v in vals)
    runs: list[tuple[int, int]] = []
    for b in bins:
        if runs and runs[-1][1] == b:
            runs[-1] = (runs[-1][0], b + 1)
        else:
            runs.append((b, b + 1))
    parts = [range_sql(a, i, j) for i, j in runs]
    if len(parts) == 1:
        return parts[0]
    return "(" + " OR ".join(f"({p})" for p in parts) + ")"


@dataclass(slots=True)
class _Viz:
    keys: tuple[str, ...]
    agg: tuple[str, str | None]
    filter: tuple[Term, ...] = ()
    selection: tuple[Term, ...] = ()
    sources: tuple[str, ...] = ()


def _viz_sql(ds: Dataset, viz: _Viz, terms: Iterable[Term]) -> str:
    keys = []
    for c in viz.keys:
        a = ds.attr(c)
        keys.append(c if a.kind == "categorical" or a.unit else f"{bucket(a)} AS {c}_bin")
    kind, dim = viz.agg
    if kind == "avg" and dim is not None:
        a = ds.attr(dim)
        w = a.width if a.width is not None else Decimal(1)
        if a.unit:
            agg = f"avg({a.column})"
        else:
            agg = f"avg({bucket(a)} * {lit(w)} + {lit(a.edges[0] - w / 2)})"
    else:
        agg = "count(*)"
    where = _where(sorted({term_sql(ds, t) for t in terms if t[1]}))
    group = ", ".join(str(i + 1) for i in range(len(keys)))
    return f"SELECT {', '.join(keys)}, {agg} FROM {ds.table}{where} GROUP BY {group}"


def idebench_session(ds: Dataset, path: Path) -> Session:
    trace = load_trace(path)
    stem = path.name.split(".")[0]
    kind, _, index = stem.rpartition("_")
    vizzes: dict[str, _Viz] = {}

    def filters_of(name: str, seen: frozenset[str] = frozenset()) -> list[Term]:
        v = vizzes.get(name)
        if v is None or name in seen:
            return []
        out = list(v.filter)
        for s in v.sources:
            src = vizzes.get(s)
            if src is not None and s not in seen:
                out += list(src.selection) + filters_of(s, seen | {name})
        return out

    def dependents(name: str) -> list[str]:
        out: list[str] = []
        todo = [name]
        while todo:
            cur = todo.pop()
            for n, v in sorted(vizzes.items()):
                if cur in v.sources and n not in out and n != name:
                    out.append(n)
                    todo.append(n)
        return out

    queries: list[tuple[float, str]] = []
    for step, it in enumerate(trace["interactions"]):
        name = it["name"]
        t = step * IDEBENCH_STEP
        draw: list[str] = []
        if "binning" in it:
            keys = tuple(
                a.column
                for b in it["binning"]
                if (a := ds.by_dimension(b["dimension"])) is not None
            )
            agg = it["perBinAggregates"][0]
            dim = ds.by_dimension(agg.get("dimension", "")) if agg["type"] == "avg" else None
            vizzes[name] = _Viz(keys, (agg["type"], dim.column if dim is not None else None))
            draw = [name]
        elif name not in vizzes:
            continue
        elif "source" in it:
            vizzes[name].sources = tuple(s.strip() for s in it["source"].split(" and "))
            draw = [name]
        elif "selection" in it:
            vizzes[name].selection = parse_predicate(ds, it["selection"])
            draw = dependents(name)
        elif "filter" in it:
            vizzes[name].filter = parse_predicate(ds, it["filter"])
            draw = [name, *dependents(name)]
        for n in draw:
            if vizzes[n].keys:
                queries.append((t, _viz_sql(ds, vizzes[n], filters_of(n))))
    return Session(ds.name, kind, int(index), stem, tuple(queries))


# --------------------------------------------------------------------------------------------


def sessions(name: str) -> list[Session]:
    """Every session of a dataset, replayed (sorted by analyst, then task)."""
    ds = dataset(name)
    if name == IDEBENCH:
        out = [idebench_session(ds, p) for p in trace_files(name)]
    else:
        out = [crossfilter_session(ds, p) for p in trace_files(name)]
    return sorted(out, key=lambda s: (s.analyst, s.task))


def distinct_sql(ss: Iterable[Session]) -> Mapping[str, int]:
    """Every SQL text of the sessions with its number of occurrences."""
    out: dict[str, int] = {}
    for s in ss:
        for _, q in s.queries:
            out[q] = out.get(q, 0) + 1
    return out
