"""The benchmark's protected tables: declarations from the traces' binnings, synthetic rows.

The traces' own data tables are not shipped (Git LFS / OSF), so every table here is
**synthesised**: its attributes are the numeric view attributes of the traces (the
Crossfilter workflows' ``setup``: binning dimension, width, reference; IDEBench's ``binning``
dimensions), its public domains come from the binning in the traces -- never from data -- and
its rows are drawn by a seeded generator.

Declared domains (public):

* **Crossfilter flights / movies / weather**: each view attribute is declared in the bins of
  its view: reference + i * width, over the extent the traces' brushes span (the envelope of
  every brush endpoint of every session, rounded out to the view's bins). Where that gives more
  than 48 bins the width is multiplied by the smallest factor of 1, 2, 5 x 10^k that brings it
  to at most 48 (movies: Production_Budget 2 -> 10, US_Gross 5 -> 25, Worldwide_Gross 5 -> 50,
  US_DVD_Sales 2 -> 20,000, whose traces brush 0-400,000 with a declared width of 2); those
  views are then drawn (and their brushes rounded) in the declared bins. The dates
  (Release_Date, RECORD_DATE) are milliseconds since the epoch as in the traces; Release_Date's
  width (30,541,006,451.6 ms, 31 bins over 1980-2010) is rounded to whole milliseconds.
* **IDEBench flights**: the workflows bin each attribute at a width drawn per visualisation
  (DISTANCE 125-479, ...); the table declares one "nice" width per attribute near the median
  of those widths, over the envelope of the workflows' selections and filters, and every
  visualisation is drawn in the declared bins. Categorical attributes: every value the
  workflows' selections and filters name (states: the USPS codes of ``sql_fixtures/flights``
  as well; ORIGIN and DEST share one airport list).

Rows (``rows``): ``ROWS[name]`` rows from ``numpy.random.default_rng(seed)`` (independent of
the noise seed). Each attribute has a fixed, plausible distribution over its declared bins
(:class:`Shape`: a discretised normal, exponential or uniform, a Zipf law for categorical
values) and may follow a *parent* attribute with a correlation ``rho`` through a Gaussian
copula (arrival delay on departure delay, air time on distance, max on min temperature,
gross on budget, ...). A value is drawn uniformly inside its bin. The rows are mapped to their
cells exactly as the declaration bins them (:func:`cells`) and pinned (:func:`pin`), the data of
a whole-table epoch. The MAE the benchmark measures is that of noise, which does not depend on
the data (only its shape matters, for nothing but the exact answers).
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.special import ndtr

from dp.domain import Domain
from dp.pin import Pin
from rewriter import parse_schema
from rewriter.schema import Schema

HERE = Path(__file__).resolve().parent
TRACES = HERE / "traces"
CROSSFILTER = ("flights", "movies", "weather")
IDEBENCH = "idebench"
DATASETS = (*CROSSFILTER, IDEBENCH)
#: Rows synthesised per table (the vega movies table has 3,201 rows).
ROWS = {"flights": 100_000, "movies": 3_200, "weather": 50_000, "idebench": 100_000}
MAX_BINS = 48
CELL_LIMIT = 1_000_000
#: Integer attributes grouped by their bin number (``replay.bucket``) span at most this many values.
GROUPABLE_VALUES = 10_000
#: The flights fixture's USPS codes (sql_fixtures/flights/lapras.toml): public.
STATES = [
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "FL", "GA", "HI", "ID", "IL", "IN", "IA",
    "KS", "KY", "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ",
    "NM", "NY", "NC", "ND", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT",
    "VA", "WA", "WV", "WI", "WY", "DC", "PR", "VI", "GU",
]  # fmt: skip

Kind = Literal["integer", "numeric", "categorical"]


@dataclass(frozen=True, slots=True)
class Shape:
    """The distribution of an attribute over its bins: ``normal`` (centre and sd as fractions
    of the bins), ``exp`` (mean as a fraction), ``uniform``, ``zipf`` (exponent ``a``)."""

    law: Literal["normal", "exp", "uniform", "zipf"]
    a: float = 0.5
    b: float = 0.25

    def weights(self, n: int) -> np.ndarray:
        x = (np.arange(n) + 0.5) / n
        if self.law == "normal":
            w = np.exp(-0.5 * ((x - self.a) / self.b) ** 2)
        elif self.law == "exp":
            w = np.exp(-x / self.a)
        elif self.law == "zipf":
            w = 1.0 / np.arange(1, n + 1) ** self.a
        else:
            w = np.ones(n)
        w = w + 1e-3 * w.max()  # every cell can occur
        return np.asarray(w / w.sum())


@dataclass(frozen=True, slots=True)
class Attr:
    """One declared attribute. Ordered ones: bins ``[edges[i], edges[i + 1])`` (integer kind:
    closed ``[edges[i], edges[i + 1] - 1]``); ``uniform`` when all have width ``width``."""

    column: str
    dimension: str  # the traces' name
    kind: Kind
    sql_type: str
    edges: tuple[Decimal, ...] = ()
    values: tuple[str, ...] = ()
    trace_width: str = ""  # the traces' width(s), for the documentation
    shape: Shape = Shape("uniform")
    parent: str | None = None
    rho: float = 0.0

    @property
    def bins(self) -> int:
        return len(self.values) if self.kind == "categorical" else len(self.edges) - 1

    @property
    def width(self) -> Decimal | None:
        w = {self.edges[i + 1] - self.edges[i] for i in range(len(self.edges) - 1)}
        return next(iter(w)) if len(w) == 1 else None

    @property
    def groupable(self) -> bool:
        """Integer bins of one width over few values: ``GROUP BY`` the bin number (the
        rewriter evaluates a grouping expression at every declared value)."""
        return (
            self.kind == "integer"
            and self.width is not None
            and self.edges[-1] - self.edges[0] <= GROUPABLE_VALUES
        )

    @property
    def unit(self) -> bool:
        """Integer bins of one value each (GROUP BY the column itself)."""
        return self.kind == "integer" and self.width == 1


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    table: str
    attrs: tuple[Attr, ...]

    def attr(self, column: str) -> Attr:
        return next(a for a in self.attrs if a.column == column)

    def by_dimension(self, dimension: str) -> Attr | None:
        return next((a for a in self.attrs if a.dimension == dimension), None)


def _grid(ref: Decimal, width: Decimal, lo: float, hi: float) -> tuple[Decimal, Decimal, int]:
    """The bins of ``ref + i * width`` covering ``[lo, hi]``, coarsened to at most MAX_BINS."""
    i0 = math.floor((Decimal(repr(lo)) - ref) / width)
    i1 = math.ceil((Decimal(repr(hi)) - ref) / width)
    n = i1 - i0
    start = ref + i0 * width
    if n <= MAX_BINS:
        return start, width, n
    k = 1
    while True:
        for m in (1, 2, 5):
            f = m * k
            if math.ceil(n / f) <= MAX_BINS:
                return start, width * f, math.ceil(n / f)
        k *= 10


def _ordered(
    column: str,
    dimension: str,
    kind: Kind,
    sql_type: str,
    start: Decimal,
    width: Decimal,
    n: int,
    trace_width: str,
    shape: Shape,
    parent: str | None = None,
    rho: float = 0.0,
) -> Attr:
    edges = tuple(start + i * width for i in range(n + 1))
    if kind == "integer":
        edges = tuple(Decimal(round(e)) for e in edges)
    return Attr(column, dimension, kind, sql_type, edges, (), trace_width, shape, parent, rho)


# --------------------------------------------------------------------------------------------
# Crossfilter: (dimension, column, kind, SQL type, shape, parent, rho). The bins come from the
# traces (_crossfilter_attrs): the setup's reference and width, the brushes' envelope.

_CF_SPEC: dict[str, list[tuple[str, str, Kind, str, Shape, str | None, float]]] = {
    "flights": [
        ("DISTANCE", "distance", "integer", "integer", Shape("exp", 0.18), None, 0.0),
        ("AIR_TIME", "air_time", "integer", "integer", Shape("exp", 0.2), "distance", 0.9),
        ("DEP_TIME", "dep_time", "integer", "integer", Shape("normal", 0.55, 0.22), None, 0.0),
        ("ARR_TIME", "arr_time", "integer", "integer", Shape("normal", 0.6, 0.22), "dep_time", 0.7),
        ("DEP_DELAY", "dep_delay", "integer", "integer", Shape("exp", 0.2), None, 0.0),
        ("ARR_DELAY", "arr_delay", "integer", "integer", Shape("exp", 0.22), "dep_delay", 0.85),
    ],
    "movies": [
        ("Release_Date", "release_date", "integer", "bigint", Shape("normal", 0.7, 0.25), None, 0.0),
        ("IMDB_Rating", "imdb_rating", "numeric", "numeric", Shape("normal", 0.55, 0.2), None, 0.0),
        ("Rotten_Tomatoes_Rating", "rotten_tomatoes_rating", "integer", "integer",
         Shape("normal", 0.55, 0.3), "imdb_rating", 0.7),
        ("Production_Budget", "production_budget", "numeric", "numeric", Shape("exp", 0.12),
         None, 0.0),
        ("Running_Time_min", "running_time_min", "integer", "integer", Shape("normal", 0.45, 0.12),
         None, 0.0),
        ("US_DVD_Sales", "us_dvd_sales", "numeric", "numeric", Shape("exp", 0.1),
         "us_gross", 0.6),
        ("US_Gross", "us_gross", "numeric", "numeric", Shape("exp", 0.1), "production_budget", 0.6),
        ("Worldwide_Gross", "worldwide_gross", "numeric", "numeric", Shape("exp", 0.1),
         "us_gross", 0.9),
    ],
    "weather": [
        ("RECORD_DATE", "record_date", "integer", "bigint", Shape("uniform"), None, 0.0),
        ("ELEVATION", "elevation", "integer", "integer", Shape("exp", 0.2), None, 0.0),
        ("LONGITUDE", "longitude", "numeric", "numeric", Shape("normal", 0.3, 0.12), None, 0.0),
        ("TEMP_MIN", "temp_min", "numeric", "numeric", Shape("normal", 0.3, 0.2), "elevation", -0.3),
        ("TEMP_MAX", "temp_max", "numeric", "numeric", Shape("normal", 0.45, 0.2), "temp_min", 0.85),
        ("SNOW", "snow", "integer", "integer", Shape("exp", 0.05), None, 0.0),
        ("PRECIPITATION", "precipitation", "numeric", "numeric", Shape("exp", 0.06), None, 0.0),
        ("WIND", "wind", "numeric", "numeric", Shape("exp", 0.2), None, 0.0),
    ],
}  # fmt: skip

_SEL = re.compile(r"^(\w+) >= (-?[\d.e+-]+) AND \1 < (-?[\d.e+-]+)$")


def trace_files(name: str) -> list[Path]:
    """The shipped trace files of a dataset, sorted by name."""
    if name == IDEBENCH:
        return sorted((TRACES / "idebench").glob("*.json.gz"))
    return sorted((TRACES / "crossfilter" / name).glob(f"*_{name}_*_workflow*.json.gz"))


def load_trace(path: Path) -> dict[str, Any]:
    """A trace file (IDEBench workflow JSON)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        out: dict[str, Any] = json.load(f)
    return out


def _crossfilter_attrs(name: str) -> tuple[Attr, ...]:
    setup: dict[str, tuple[Decimal, Decimal]] = {}
    env: dict[str, list[float]] = {}
    for path in trace_files(name):
        trace = load_trace(path)
        for view in trace["setup"]:
            [b] = view["binning"]
            got = (Decimal(repr(b["reference"])), Decimal(repr(b["width"])))
            if setup.setdefault(b["dimension"], got) != got:
                raise ValueError(f"{path.name}: {b['dimension']} is binned differently")
        for it in trace["interactions"]:
            m = _SEL.match(it.get("selection", ""))
            if m is not None:
                e = env.setdefault(m.group(1), [math.inf, -math.inf])
                e[0] = min(e[0], float(m.group(2)), float(m.group(3)))
                e[1] = max(e[1], float(m.group(2)), float(m.group(3)))
    out = []
    for dim, col, kind, sql_type, shape, parent, rho in _CF_SPEC[name]:
        ref, width = setup[dim]
        lo, hi = env[dim]
        start, w, n = _grid(ref, width, lo, hi)
        out.append(
            _ordered(col, dim, kind, sql_type, start, w, n, f"{width:g}", shape, parent, rho)
        )
    if set(setup) != {a.dimension for a in out}:
        raise ValueError(f"{name}: the traces' views are not the declared attributes")
    return tuple(out)


# --------------------------------------------------------------------------------------------
# IDEBench: (dimension, column, declared width, shape, parent, rho); the extents come from the
# workflows' selections and filters, the categorical values likewise.

_IDE_NUMERIC: list[tuple[str, str, int, Shape, str | None, float]] = [
    ("DISTANCE", "distance", 200, Shape("exp", 0.15), None, 0.0),
    ("AIR_TIME", "air_time", 30, Shape("exp", 0.15), "distance", 0.9),
    ("DEP_DELAY", "dep_delay", 30, Shape("exp", 0.06), None, 0.0),
    ("ARR_DELAY", "arr_delay", 30, Shape("exp", 0.08), "dep_delay", 0.85),
    ("TAXI_OUT", "taxi_out", 15, Shape("exp", 0.1), None, 0.0),
    ("TAXI_IN", "taxi_in", 10, Shape("exp", 0.08), None, 0.0),
]
_IDE_CATEGORICAL: list[tuple[str, str, Shape]] = [
    ("UNIQUE_CARRIER", "unique_carrier", Shape("zipf", 1.0)),
    ("ORIGIN_STATE_ABR", "origin_state_abr", Shape("zipf", 0.8)),
    ("DEST_STATE_ABR", "dest_state_abr", Shape("zipf", 0.8)),
    ("ORIGIN", "origin", Shape("zipf", 1.0)),
    ("DEST", "dest", Shape("zipf", 1.0)),
]
_RANGE = re.compile(r"(\w+) >= (-?[\d.]+) and \1 < (-?[\d.]+)")
_EQ = re.compile(r"(\w+) = '([^']*)'")


def _idebench_attrs() -> tuple[Attr, ...]:
    env: dict[str, list[float]] = {}
    widths: dict[str, set[float]] = {}
    cats: dict[str, set[str]] = {}
    for path in trace_files(IDEBENCH):
        for it in load_trace(path)["interactions"]:
            for b in it.get("binning", []):
                if "width" in b:
                    widths.setdefault(b["dimension"], set()).add(float(b["width"]))
            text = it.get("selection") or it.get("filter") or ""
            for m in _RANGE.finditer(text):
                e = env.setdefault(m.group(1), [math.inf, -math.inf])
                e[0] = min(e[0], float(m.group(2)))
                e[1] = max(e[1], float(m.group(3)))
            for m in _EQ.finditer(text):
                cats.setdefault(m.group(1), set()).add(m.group(2))
    out: list[Attr] = []
    for dim, col, w, shape, parent, rho in _IDE_NUMERIC:
        lo, hi = env[dim]
        width = Decimal(w)
        start = Decimal(math.floor(lo / w) * w)
        n = math.ceil((Decimal(repr(hi)) - start) / width)
        tw = f"{min(widths[dim]):g}-{max(widths[dim]):g}"
        out.append(
            _ordered(col, dim, "integer", "integer", start, width, n, tw, shape, parent, rho)
        )
    years = sorted(int(v) for v in cats["YEAR_DATE"])
    out.append(
        _ordered(
            "year_date",
            "YEAR_DATE",
            "integer",
            "integer",
            Decimal(years[0]),
            Decimal(1),
            years[-1] - years[0] + 1,
            "1",
            Shape("uniform"),
        )
    )
    airports = sorted(cats.get("ORIGIN", set()) | cats.get("DEST", set()))
    for dim, col, shape in _IDE_CATEGORICAL:
        if dim in ("ORIGIN", "DEST"):
            values = airports
        elif dim.endswith("STATE_ABR"):
            values = STATES + sorted(cats.get(dim, set()) - set(STATES))
        else:
            values = sorted(cats[dim])
        out.append(Attr(col, dim, "categorical", "text", (), tuple(values), "", shape))
    return tuple(out)


_CACHE: dict[str, Dataset] = {}


def dataset(name: str) -> Dataset:
    """The declared table of a dataset (``flights``, ``movies``, ``weather``, ``idebench``)."""
    if name not in DATASETS:
        raise ValueError(f"no dataset {name!r} (datasets: {', '.join(DATASETS)})")
    if name not in _CACHE:
        attrs = _idebench_attrs() if name == IDEBENCH else _crossfilter_attrs(name)
        table = "flights" if name == IDEBENCH else name
        _CACHE[name] = Dataset(name, table, attrs)
    return _CACHE[name]


def _toml_value(v: Decimal) -> str:
    return str(int(v)) if v == v.to_integral_value() else format(v.normalize(), "f")


def declaration(ds: Dataset) -> str:
    """The table's declaration (lapras.toml format, docs/configuration.md)."""
    lines = [
        f"# {ds.name}: synthesised by bench/predict/datasets.py; domains from the traces' binning.",
        f"cell_limit = {CELL_LIMIT}",
        "",
        f"[tables.{ds.table}]",
        'schema = "public"',
        "",
        f"[tables.{ds.table}.columns]",
        *(f'{a.column} = "{a.sql_type}"' for a in ds.attrs),
    ]
    for a in ds.attrs:
        lines += ["", f"[tables.{ds.table}.attributes.{a.column}]", f'kind = "{a.kind}"']
        if a.kind == "categorical":
            lines.append("values = [" + ", ".join(json.dumps(v) for v in a.values) + "]")
        elif a.unit:
            lines += [f"min = {_toml_value(a.edges[0])}", f"max = {_toml_value(a.edges[-1] - 1)}"]
        else:
            lines.append("edges = [" + ", ".join(_toml_value(e) for e in a.edges) + "]")
    return "\n".join(lines) + "\n"


def schema(ds: Dataset) -> Schema:
    return parse_schema(declaration(ds), f"bench/predict:{ds.name}")


# --------------------------------------------------------------------------------------------
# rows


def rows(ds: Dataset, seed: int = 0, n: int | None = None) -> dict[str, np.ndarray]:
    """``n`` synthetic rows (default ``ROWS[ds.name]``) as one array per column."""
    rng = np.random.default_rng([seed, DATASETS.index(ds.name)])
    n = ROWS[ds.name] if n is None else n
    noise = {a.column: rng.standard_normal(n) for a in ds.attrs}
    latent: dict[str, np.ndarray] = {}

    def z_of(a: Attr) -> np.ndarray:  # the Gaussian copula's latent, parents first
        if a.column not in latent:
            z = noise[a.column]
            if a.parent is not None:
                z = a.rho * z_of(ds.attr(a.parent)) + math.sqrt(1.0 - a.rho**2) * z
            latent[a.column] = z
        return latent[a.column]

    out: dict[str, np.ndarray] = {}
    for a in ds.attrs:
        z = z_of(a)
        cum = np.cumsum(a.shape.weights(a.bins))
        cell = np.minimum(np.searchsorted(cum, ndtr(z), side="right"), a.bins - 1)
        if a.kind == "categorical":
            out[a.column] = np.asarray(a.values, dtype=object)[cell]
            continue
        lo = np.asarray([float(e) for e in a.edges[:-1]])[cell]
        hi = np.asarray([float(e) for e in a.edges[1:]])[cell]
        if a.kind == "integer":
            out[a.column] = np.floor(lo + rng.random(n) * (hi - lo)).astype(np.int64)
        else:
            out[a.column] = np.round(lo + rng.random(n) * (hi - lo) * 0.999, 3)
    return out


def cells(ds: Dataset, data: dict[str, np.ndarray]) -> np.ndarray:
    """``rows x attributes`` cell indices, binned as the declaration bins (-1: outside)."""
    n = len(next(iter(data.values())))
    out = np.empty((n, len(ds.attrs)), dtype=np.int64)
    for j, a in enumerate(ds.attrs):
        v = data[a.column]
        if a.kind == "categorical":
            index = {x: i for i, x in enumerate(a.values)}
            out[:, j] = [index.get(x, -1) for x in v]
        else:
            e = np.asarray([float(x) for x in a.edges])
            c = np.searchsorted(e, v.astype(np.float64), side="right") - 1
            c[(v < e[0]) | (v >= e[-1])] = -1
            out[:, j] = c
    return out


def domain(ds: Dataset, sch: Schema) -> Domain:
    """The whole table's domain, in the declaration's order (as ``rewriter.pin_domain``)."""
    from rewriter import pin_domain

    d: Domain = pin_domain(sch, ds.table)
    return d


def pin(ds: Dataset, sch: Schema, seed: int = 0) -> Pin:
    """The synthetic table pinned over its whole domain (the data of a whole-table epoch)."""
    dom = domain(ds, sch)
    c = cells(ds, rows(ds, seed))
    order = [next(j for j, a in enumerate(ds.attrs) if a.column == name) for name in dom.names]
    c = c[:, order]
    c = c[np.all(c >= 0, axis=1)]
    uniq, counts = np.unique(c, axis=0, return_counts=True)
    return Pin.of(dom, uniq, counts.astype(np.float64))


def describe(names: Sequence[str] = DATASETS) -> str:
    """A markdown table of the declared attributes (for the docs)."""
    lines = [
        "| dataset | table (rows) | attribute | kind | declared bins | traces' width |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        ds = dataset(name)
        for a in ds.attrs:
            if a.kind == "categorical":
                bins = f"{a.bins} values"
            elif a.unit:
                bins = f"{_toml_value(a.edges[0])}..{_toml_value(a.edges[-1] - 1)} (unit)"
            else:
                w = a.width
                ws = f"width {_toml_value(w)}" if w is not None else "31 bins"
                bins = f"{a.bins} x {ws} from {_toml_value(a.edges[0])}"
            lines.append(
                f"| {name} | {ds.table} ({ROWS[name]:,}) | {a.column} | {a.kind} | {bins} "
                f"| {a.trace_width or '-'} |"
            )
    return "\n".join(lines)
