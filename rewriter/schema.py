"""The declaration of protected tables: parsed from TOML, validated, frozen.

A protected table lists *all* its columns with their PostgreSQL types (so that ``SELECT *``
probes and unknown names are answered exactly) and, for the columns that queries may use, an
*attribute* with a public domain. Domains come from the declaration, never from the data.
An epoch covers every attribute of its table; views (optional) name sets of attributes an
epoch may be restricted to. See ``docs/configuration.md``.

Reading the file (:func:`load_schema`) is kept apart from parsing it (:func:`parse_schema`):

>>> s = parse_schema('''
... [tables.t.columns]
... a = "integer"
... [tables.t.attributes.a]
... kind = "integer"
... min = 0
... max = 9
... [tables.t.views]
... v = ["a"]
... ''', "example.toml")
>>> s.tables["t"].attributes["a"].size, s.tables["t"].views[0].size
(10, 10)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from dp.accuracy import MaxError, parse_max_error
from dp.domain import Domain
from dp.errors import LaprasError
from dp.units import Contribution

from .errors import ConfigError, DomainTooLargeError
from .public_tables import DEFAULT_MAX_ROWS, PublicTableDecl

DEFAULT_CELL_LIMIT = 1_000_000
SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema"})

# Canonical PostgreSQL type names and their OIDs.
TYPE_OIDS: Mapping[str, int] = {
    "bool": 16,
    "int8": 20,
    "int2": 21,
    "int4": 23,
    "text": 25,
    "float4": 700,
    "float8": 701,
    "bpchar": 1042,
    "varchar": 1043,
    "date": 1082,
    "numeric": 1700,
    "timestamp": 1114,
    "timestamptz": 1184,
}

#: Array types read as parameters (``x = ANY($1)``): each one's OID and its element type.
ARRAY_OIDS: Mapping[int, str] = {
    1000: "bool", 1005: "int2", 1007: "int4", 1016: "int8", 1009: "text", 1015: "varchar",
    1014: "bpchar", 1021: "float4", 1022: "float8", 1231: "numeric", 1182: "date",
    1115: "timestamp", 1185: "timestamptz",
}  # fmt: skip
TYPE_ALIASES: Mapping[str, str] = {
    "boolean": "bool",
    "bool": "bool",
    "smallint": "int2",
    "int2": "int2",
    "integer": "int4",
    "int": "int4",
    "int4": "int4",
    "bigint": "int8",
    "int8": "int8",
    "text": "text",
    "varchar": "varchar",
    "character varying": "varchar",
    "char": "bpchar",
    "character": "bpchar",
    "bpchar": "bpchar",
    "date": "date",
    "numeric": "numeric",
    "decimal": "numeric",
    "real": "float4",
    "float4": "float4",
    "double precision": "float8",
    "float8": "float8",
}
INTEGER_TYPES = frozenset({"int2", "int4", "int8"})
TEXT_TYPES = frozenset({"text", "varchar", "bpchar"})
FLOAT_TYPES = frozenset({"float4", "float8"})


class Kind(Enum):
    """The kind of a public domain."""

    INTEGER = "integer"
    CATEGORICAL = "categorical"
    BOOLEAN = "boolean"
    DATE = "date"
    NUMERIC = "numeric"


class DateUnit(Enum):
    DAY = "day"
    MONTH = "month"
    YEAR = "year"


Bound = Fraction


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributeDecl:
    """One column with a public domain.

    Cells, in order: for ordered kinds one cell per bin (``bins``: closed integer ranges for
    integer columns and dates as ordinals, half-open ``[lo, hi)`` ranges for numeric columns);
    for categorical columns one cell per declared value; for booleans ``false, true``. A
    nullable column has one more, last cell for NULL.
    """

    name: str
    kind: Kind
    pg_type: str
    nullable: bool
    bins: tuple[tuple[Bound, Bound], ...] = field(default=(), repr=False)
    values: tuple[str, ...] = field(default=(), repr=False)
    date_unit: DateUnit | None = None
    #: ``clamp = true``: values clamped into the declared range (:attr:`bounds`) instead of
    #: being outside the domain, and SUM/AVG answered over them (rewriter.clamp).
    clamp: bool = False

    @property
    def bounds(self) -> tuple[Bound, Bound]:
        """The declared range of an ordered column: its first bin's low end, its last bin's
        high end (the clamping bounds of a clamped column)."""
        return self.bins[0][0], self.bins[-1][1]

    @property
    def value_cells(self) -> int:
        if self.kind is Kind.CATEGORICAL:
            return len(self.values)
        if self.kind is Kind.BOOLEAN:
            return 2
        return len(self.bins)

    @property
    def size(self) -> int:
        return self.value_cells + (1 if self.nullable else 0)

    @property
    def null_cell(self) -> int | None:
        return self.value_cells if self.nullable else None

    @property
    def unit_bins(self) -> bool:
        """Each cell holds exactly one value (SUM/AVG/GROUP BY are then exact)."""
        if self.kind in (Kind.CATEGORICAL, Kind.BOOLEAN):
            return True
        if self.kind is Kind.NUMERIC:
            return False
        return all(lo == hi for lo, hi in self.bins)

    def cell_value(self, cell: int) -> object:
        """The Python value of a cell (only meaningful for unit cells); None for NULL."""
        if cell == self.null_cell:
            return None
        if self.kind is Kind.CATEGORICAL:
            return self.values[cell]
        if self.kind is Kind.BOOLEAN:
            return bool(cell)
        lo = self.bins[cell][0]
        if self.kind is Kind.DATE:
            return dt.date.fromordinal(int(lo))
        return int(lo)


#: How the value axis of a clamped column is named: the column's name and this (never an
#: identifier a statement can write unquoted).
VALUE_SUFFIX = "#value"


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueAxis(AttributeDecl):
    """The values of a clamped column in bins wider than one value (``source``;
    rewriter.clamp): one cell per end of each of its bins (low, high, in bin order), then
    NULL's for a nullable column. ``values`` are the ends, of the column's type. A row's
    clamped value ``v`` in bin ``[a, b]`` is carried as its share ``(b - v) / (b - a)`` at
    ``a`` and the rest at ``b``: never a column of statements, read only by the argument of
    a SUM or AVG."""

    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewDecl:
    """A set of attributes of one table: a declared view, or the marginal a statement uses."""

    name: str
    attributes: tuple[AttributeDecl, ...]

    @property
    def size(self) -> int:
        n = 1
        for a in self.attributes:
            n *= a.size
        return n

    @property
    def domain(self) -> Domain:
        return Domain.of(*((a.name, a.size) for a in self.attributes))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitDecl:
    """A table's privacy unit: the column ``column`` of the table itself, or (``table`` set)
    the column ``unit`` of the row of ``table`` whose ``key`` equals ``column``; and the bound
    on each unit's rows (``dp.units.Contribution``)."""

    column: str
    contribution: Contribution
    table: str | None = None  # schema.table
    key: str | None = None
    unit: str | None = None
    #: ``expected_rows_per_unit``: the administrator's figure of a unit's rows on average,
    #: read by ``lapras config check`` only (how much of the data the bound keeps).
    expected_rows: float | None = None


@dataclass(frozen=True, slots=True)
class Lifetime:
    """The cap across epochs of a budget group: every epoch of its tables, composed."""

    epsilon: float
    delta: float


@dataclass(frozen=True, slots=True, kw_only=True)
class TableDecl:
    """A protected table: all its columns (name -> canonical type), attributes, views, its
    privacy unit (None: every row is its own unit) and the budget group it spends from."""

    name: str
    schema: str
    columns: tuple[tuple[str, str], ...]
    attributes: Mapping[str, AttributeDecl] = field(repr=False)
    views: tuple[ViewDecl, ...] = field(repr=False)
    cell_limit: int = DEFAULT_CELL_LIMIT  # the largest domain an expression may span
    unit: UnitDecl | None = None
    budget_group: str = ""  # "": the table's own name
    #: The administrator's default request (``lapras.max_error``) for the table's statements
    #: (None: none; an analyst's session setting overrides it).
    max_error: MaxError | None = None
    #: A public size of the table, declared (never read from the data): the scale of a
    #: relative ``lapras.max_error`` ('5%').
    public_rows: int | None = None
    #: With a unit: keep each unit's rows with the pin, for questions about units.
    unit_questions: bool = True
    #: The value axis of each clamped attribute in bins wider than one value, by its name
    #: (rewriter.clamp): part of the table's domain, after the declared attributes.
    value_axes: Mapping[str, ValueAxis] = field(default_factory=dict, repr=False)

    @property
    def contribution(self) -> Contribution:
        return Contribution() if self.unit is None else self.unit.contribution

    @property
    def group(self) -> str:
        return self.budget_group or self.name

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def domain(self) -> Domain:
        """The whole table's domain: every declared attribute, in declaration order, then
        the value axes of clamped ones (an epoch's domain; never materialised)."""
        every = (*self.attributes.values(), *self.value_axes.values())
        return Domain.of(*((a.name, a.size) for a in every))

    def attribute(self, name: str) -> AttributeDecl:
        """A declared attribute, or the value axis of a clamped one (KeyError: neither)."""
        got = self.attributes.get(name)
        return got if got is not None else self.value_axes[name]

    def with_value_axes(self, names: Sequence[str]) -> tuple[AttributeDecl, ...]:
        """The declared attributes ``names``, then the value axes of the clamped ones among
        them (an epoch restricted to a view holds their values too)."""
        declared = tuple(self.attributes[n] for n in names)
        return declared + tuple(v for v in self.value_axes.values() if v.source in names)

    def marginal_domain(self, view: ViewDecl) -> Domain:
        """The domain a statement over ``view`` (a marginal of this table) is reduced over
        (a derived relation's is its own: ``rewriter.units``)."""
        return view.domain

    def selectable(self, view: ViewDecl) -> npt.NDArray[np.bool_] | None:
        """The cells of ``view`` a row may be in (None: all of them)."""
        return None

    def column_type(self, name: str) -> str | None:
        for col, typ in self.columns:
            if col == name:
                return typ
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Schema:
    """All protected tables (keyed by lower-case name) and the passthrough policy.

    ``passthrough_tables``: when None, every table that is not protected is relayed (the
    upstream's passthrough role decides); otherwise only these (``schema.table``) and the
    system catalogues are.
    """

    tables: Mapping[str, TableDecl]
    passthrough_tables: frozenset[str] | None
    cell_limit: int
    source: str
    #: Budget group -> its lifetime cap (groups without one are uncapped).
    lifetimes: Mapping[str, Lifetime] = field(default_factory=dict)
    #: Declared public tables (``[public_tables]``: rewriter.public_tables), by name.
    public: Mapping[str, PublicTableDecl] = field(default_factory=dict)

    def protected(self, name: str, schema: str | None) -> TableDecl | None:
        t = self.tables.get(name)
        if t is None or (schema is not None and schema != t.schema):
            return None
        return t


def _err(source: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{source}: {key}: {problem}")


def _get(
    source: str, key: str, table: Mapping[str, Any], name: str, typ: type | tuple[type, ...]
) -> Any:
    if name not in table:
        raise _err(source, f"{key}.{name}", "is required")
    value = table[name]
    if isinstance(value, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        raise _err(source, f"{key}.{name}", "has the wrong type")
    if not isinstance(value, typ):
        raise _err(source, f"{key}.{name}", "has the wrong type")
    return value


def _check_keys(source: str, key: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    for k in table:
        if k not in allowed:
            raise _err(
                source, f"{key}.{k}", f"unknown key (accepted: {', '.join(sorted(allowed))})"
            )


def _ident(source: str, key: str, name: str) -> str:
    if not name or not all(c.isalnum() or c == "_" for c in name) or name[0].isdigit():
        raise _err(source, key, "must be a lower-case SQL identifier (letters, digits, _)")
    if name != name.lower():
        raise _err(source, key, "must be lower case (declare the name as PostgreSQL folds it)")
    return name


def _type(source: str, key: str, raw: object) -> str:
    if not isinstance(raw, str) or raw.strip().lower() not in TYPE_ALIASES:
        raise _err(source, key, f"unknown type (accepted: {', '.join(sorted(TYPE_ALIASES))})")
    return TYPE_ALIASES[raw.strip().lower()]


def _number(source: str, key: str, raw: object) -> Fraction:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise _err(source, key, "must be a number")
    try:
        return Fraction(str(raw))
    except ValueError:
        raise _err(source, key, "must be a number") from None


def _date(source: str, key: str, raw: object) -> dt.date:
    if isinstance(raw, dt.datetime):
        raise _err(source, key, "must be a date (YYYY-MM-DD)")
    if isinstance(raw, dt.date):
        return raw
    if isinstance(raw, str):
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            pass
    raise _err(source, key, "must be a date (YYYY-MM-DD)")


def _month_start(d: dt.date, months: int) -> dt.date:
    m = d.year * 12 + d.month - 1 + months
    return dt.date(m // 12, m % 12 + 1, 1)


def _attribute(
    source: str, key: str, name: str, pg_type: str, raw: Mapping[str, Any]
) -> AttributeDecl:
    """One ``[tables.T.attributes.X]``; ``clamp = true`` (integer and numeric kinds): values
    clamped into the declared range, SUM and AVG answered over them (rewriter.clamp)."""
    clamp = raw.get("clamp", False)
    if not isinstance(clamp, bool):
        raise _err(source, f"{key}.clamp", "must be true or false")
    attr = _declared(source, key, name, pg_type, raw)
    if not clamp:
        return attr
    if pg_type in INTEGER_TYPES and any(e.denominator != 1 for b in attr.bins for e in b):
        raise _err(source, f"{key}.clamp", "an integer column is clamped at integer edges")
    if pg_type == "float4":
        raise _err(source, f"{key}.clamp", "a real column is not clamped: declare double precision")
    return dataclasses.replace(attr, clamp=True)


def _declared(
    source: str, key: str, name: str, pg_type: str, raw: Mapping[str, Any]
) -> AttributeDecl:
    kind_raw = _get(source, key, raw, "kind", str)
    try:
        kind = Kind(kind_raw)
    except ValueError:
        raise _err(
            source, f"{key}.kind", f"unknown kind (accepted: {', '.join(k.value for k in Kind)})"
        ) from None
    nullable = raw.get("nullable", False)
    if not isinstance(nullable, bool):
        raise _err(source, f"{key}.nullable", "must be true or false")
    common = {"kind", "nullable"}
    if kind is Kind.INTEGER:
        if pg_type not in INTEGER_TYPES:
            raise _err(source, key, "kind integer needs an integer column type")
        if "edges" in raw:
            _check_keys(source, key, raw, common | {"edges", "clamp"})
            edges_raw = _get(source, key, raw, "edges", list)
            edges = [_number(source, f"{key}.edges", e) for e in edges_raw]
            if len(edges) < 2 or any(e.denominator != 1 for e in edges):
                raise _err(source, f"{key}.edges", "needs at least two integer edges")
            if any(b <= a for a, b in itertools.pairwise(edges)):
                raise _err(source, f"{key}.edges", "must be strictly increasing")
            bins = tuple((a, b - 1) for a, b in itertools.pairwise(edges))
        else:
            _check_keys(source, key, raw, common | {"min", "max", "bin_width", "clamp"})
            lo = _get(source, key, raw, "min", int)
            hi = _get(source, key, raw, "max", int)
            width = raw.get("bin_width", 1)
            if isinstance(width, bool) or not isinstance(width, int) or width < 1:
                raise _err(source, f"{key}.bin_width", "must be a positive integer")
            if hi < lo:
                raise _err(source, f"{key}.max", "must be at least min")
            if (hi - lo + 1) % width:
                raise _err(source, f"{key}.bin_width", "must divide max - min + 1")
            bins = tuple((Fraction(a), Fraction(a + width - 1)) for a in range(lo, hi + 1, width))
        return AttributeDecl(name=name, kind=kind, pg_type=pg_type, nullable=nullable, bins=bins)
    if kind is Kind.CATEGORICAL:
        _check_keys(source, key, raw, common | {"values"})
        if pg_type not in TEXT_TYPES:
            raise _err(source, key, "kind categorical needs a text column type")
        values = _get(source, key, raw, "values", list)
        if not values or not all(isinstance(v, str) for v in values):
            raise _err(source, f"{key}.values", "must be a non-empty list of strings")
        if len(set(values)) != len(values):
            raise _err(source, f"{key}.values", "has duplicates")
        return AttributeDecl(
            name=name, kind=kind, pg_type=pg_type, nullable=nullable, values=tuple(values)
        )
    if kind is Kind.BOOLEAN:
        _check_keys(source, key, raw, common)
        if pg_type != "bool":
            raise _err(source, key, "kind boolean needs a boolean column type")
        return AttributeDecl(name=name, kind=kind, pg_type=pg_type, nullable=nullable)
    if kind is Kind.DATE:
        _check_keys(source, key, raw, common | {"min", "max", "unit"})
        if pg_type != "date":
            raise _err(source, key, "kind date needs a date column type")
        start = _date(source, f"{key}.min", raw.get("min"))
        end = _date(source, f"{key}.max", raw.get("max"))
        if end < start:
            raise _err(source, f"{key}.max", "must not be before min")
        try:
            unit = DateUnit(raw.get("unit", "day"))
        except ValueError:
            raise _err(source, f"{key}.unit", "must be day, month or year") from None
        dbins: list[tuple[Fraction, Fraction]] = []
        if unit is DateUnit.DAY:
            dbins = [
                (Fraction(o), Fraction(o)) for o in range(start.toordinal(), end.toordinal() + 1)
            ]
        else:
            step = 1 if unit is DateUnit.MONTH else 12
            cur = dt.date(start.year, start.month if unit is DateUnit.MONTH else 1, 1)
            if cur != start:
                raise _err(source, f"{key}.min", f"must be the first day of a {unit.value}")
            while cur <= end:
                nxt = _month_start(cur, step)
                dbins.append((Fraction(cur.toordinal()), Fraction(nxt.toordinal() - 1)))
                cur = nxt
            if dbins[-1][1] != end.toordinal():
                raise _err(source, f"{key}.max", f"must be the last day of a {unit.value}")
        return AttributeDecl(
            name=name,
            kind=kind,
            pg_type=pg_type,
            nullable=nullable,
            bins=tuple(dbins),
            date_unit=unit,
        )
    # NUMERIC
    _check_keys(source, key, raw, common | {"edges", "clamp"})
    if pg_type not in FLOAT_TYPES | {"numeric"} | INTEGER_TYPES:
        raise _err(source, key, "kind numeric needs a numeric column type")
    nedges = [_number(source, f"{key}.edges", e) for e in _get(source, key, raw, "edges", list)]
    if len(nedges) < 2 or any(b <= a for a, b in itertools.pairwise(nedges)):
        raise _err(source, f"{key}.edges", "needs at least two strictly increasing edges")
    return AttributeDecl(
        name=name,
        kind=kind,
        pg_type=pg_type,
        nullable=nullable,
        bins=tuple(itertools.pairwise(nedges)),
    )


def _table(source: str, name: str, raw: Mapping[str, Any], cell_limit: int) -> TableDecl:
    key = f"tables.{name}"
    if not isinstance(raw, dict):
        raise _err(source, key, "must be a table")
    _check_keys(
        source,
        key,
        raw,
        {
            "schema",
            "columns",
            "attributes",
            "views",
            "privacy_unit",
            "max_rows_per_unit",
            "max_rows_per_unit_per_cell",
            "expected_rows_per_unit",
            "budget_group",
            "lifetime_epsilon",
            "lifetime_delta",
            "max_error",
            "public_rows",
            "unit_questions",
        },
    )
    schema = _ident(source, f"{key}.schema", raw.get("schema", "public"))
    cols_raw = _get(source, key, raw, "columns", dict)
    if not cols_raw:
        raise _err(source, f"{key}.columns", "must list every column of the table")
    columns = tuple(
        (_ident(source, f"{key}.columns.{c}", c), _type(source, f"{key}.columns.{c}", t))
        for c, t in cols_raw.items()
    )
    types = dict(columns)
    attrs: dict[str, AttributeDecl] = {}
    for aname, araw in _get(source, key, raw, "attributes", dict).items():
        akey = f"{key}.attributes.{aname}"
        if aname not in types:
            raise _err(source, akey, "is not a declared column of the table")
        if not isinstance(araw, dict):
            raise _err(source, akey, "must be a table")
        attrs[aname] = _attribute(source, akey, aname, types[aname], araw)
    views: list[ViewDecl] = []
    vdecl = _get(source, key, raw, "views", dict) if "views" in raw else {}
    for vname, vraw in vdecl.items():
        vkey = f"{key}.views.{vname}"
        _ident(source, vkey, vname)
        if not isinstance(vraw, list) or not vraw or not all(isinstance(v, str) for v in vraw):
            raise _err(source, vkey, "must be a non-empty list of attribute names")
        if len(set(vraw)) != len(vraw):
            raise _err(source, vkey, "names an attribute twice")
        for v in vraw:
            if v not in attrs:
                raise _err(source, vkey, f"names {v}, which is not a declared attribute")
        view = ViewDecl(name=vname, attributes=tuple(attrs[v] for v in vraw))
        if view.size > cell_limit:
            raise DomainTooLargeError(
                f"{source}: {vkey}: the view has more cells than the limit cell_limit",
                hint="split the view, use wider bins, or raise cell_limit",
            )
        views.append(view)
    if not attrs:
        raise _err(source, f"{key}.attributes", "declare at least one attribute")
    group = _ident(source, f"{key}.budget_group", raw.get("budget_group", name))
    questions = raw.get("unit_questions", True)
    if not isinstance(questions, bool):
        raise _err(source, f"{key}.unit_questions", "must be true or false")
    if "unit_questions" in raw and "privacy_unit" not in raw:
        raise _err(source, f"{key}.unit_questions", "needs privacy_unit")
    return TableDecl(
        name=name,
        schema=schema,
        columns=columns,
        attributes=attrs,
        views=tuple(views),
        cell_limit=cell_limit,
        unit=_unit(source, key, raw, types),
        budget_group="" if group == name else group,
        max_error=_max_error(source, key, raw),
        public_rows=_count(source, f"{key}.public_rows", raw["public_rows"])
        if "public_rows" in raw
        else None,
        unit_questions=questions,
        value_axes=_value_axes(attrs),
    )


def _value_end(v: Fraction, pg_type: str) -> object:
    """A bin's end as a value of the column's type (as expressions read it)."""
    if pg_type in INTEGER_TYPES:
        return int(v)
    if pg_type in FLOAT_TYPES:
        return float(v)
    return Decimal(v.numerator) / Decimal(v.denominator)


def _value_axes(attrs: Mapping[str, AttributeDecl]) -> dict[str, ValueAxis]:
    """The value axis of each clamped attribute in bins wider than one value (one with
    unit bins is summed exactly without one)."""
    out: dict[str, ValueAxis] = {}
    for a in attrs.values():
        if not a.clamp or a.unit_bins:
            continue
        ends = tuple(_value_end(v, a.pg_type) for lo, hi in a.bins for v in (lo, hi))
        out[a.name + VALUE_SUFFIX] = ValueAxis(
            name=a.name + VALUE_SUFFIX,
            kind=Kind.CATEGORICAL,
            pg_type=a.pg_type,
            nullable=a.nullable,
            values=cast(tuple[str, ...], ends),
            source=a.name,
        )
    return out


def _max_error(source: str, key: str, raw: Mapping[str, Any]) -> MaxError | None:
    """A table's default ``max_error`` (a relative one needs ``public_rows``)."""
    if "max_error" not in raw:
        return None
    try:
        value = parse_max_error(raw["max_error"], name=f"{key}.max_error")
    except LaprasError as err:
        raise _err(source, f"{key}.max_error", err.hint or err.message) from None
    if value is not None and value.relative and "public_rows" not in raw:
        raise _err(
            source,
            f"{key}.max_error",
            "a percentage is of the table's public size: declare public_rows too",
        )
    return value


def _count(source: str, key: str, raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise _err(source, key, "must be an integer of at least 1")
    return raw


def _unit(
    source: str, key: str, raw: Mapping[str, Any], types: Mapping[str, str]
) -> UnitDecl | None:
    bounds = ("max_rows_per_unit", "max_rows_per_unit_per_cell", "expected_rows_per_unit")
    if "privacy_unit" not in raw:
        for b in bounds:
            if b in raw:
                raise _err(source, f"{key}.{b}", "needs privacy_unit")
        return None
    if "max_rows_per_unit" not in raw:
        raise _err(
            source,
            f"{key}.max_rows_per_unit",
            "is required with privacy_unit (the most rows of one unit an epoch counts)",
        )
    rows = _count(source, f"{key}.max_rows_per_unit", raw["max_rows_per_unit"])
    per_cell = 0
    if bounds[1] in raw:
        per_cell = _count(source, f"{key}.{bounds[1]}", raw[bounds[1]])
        if per_cell > rows:
            raise _err(source, f"{key}.{bounds[1]}", "must not exceed max_rows_per_unit")
    bound = Contribution(rows, per_cell)
    expected = raw.get(bounds[2])
    if expected is not None and (
        isinstance(expected, bool)
        or not isinstance(expected, int | float)
        or not 1 <= expected < float("inf")
    ):
        raise _err(source, f"{key}.{bounds[2]}", "must be a number of at least 1")
    average = None if expected is None else float(expected)
    ukey = f"{key}.privacy_unit"
    spec = raw["privacy_unit"]
    if isinstance(spec, str):
        if _ident(source, ukey, spec) not in types:
            raise _err(source, ukey, "is not a declared column of the table")
        return UnitDecl(column=spec, contribution=bound, expected_rows=average)
    if not isinstance(spec, dict):
        raise _err(source, ukey, "must be a column name or {column, table, key, unit}")
    _check_keys(source, ukey, spec, {"column", "table", "key", "unit"})
    column = _ident(source, f"{ukey}.column", _get(source, ukey, spec, "column", str))
    if column not in types:
        raise _err(source, f"{ukey}.column", "is not a declared column of the table")
    table = _get(source, ukey, spec, "table", str).lower()
    parts = table.split(".")
    if len(parts) != 2:
        raise _err(source, f"{ukey}.table", "must be schema.table")
    for part in parts:
        _ident(source, f"{ukey}.table", part)
    return UnitDecl(
        column=column,
        contribution=bound,
        expected_rows=average,
        table=table,
        key=_ident(source, f"{ukey}.key", _get(source, ukey, spec, "key", str)),
        unit=_ident(source, f"{ukey}.unit", _get(source, ukey, spec, "unit", str)),
    )


def _lifetimes(
    source: str, raw: Mapping[str, Any], tables: Mapping[str, TableDecl]
) -> dict[str, Lifetime]:
    """Each budget group's cap, from the tables that declare one (they must agree). The
    tables of a group count the same people: all have a privacy unit, or none has (a
    row-level epoch over rows of people with many rows would spend more than its budget for
    each of them)."""
    out: dict[str, Lifetime] = {}
    for name, t in tables.items():
        mixed = [u.name for u in tables.values() if u.group == t.group and (u.unit is None)]
        if t.unit is not None and mixed:
            raise _err(
                source,
                f"tables.{mixed[0]}.privacy_unit",
                f"is required: table {name} of the same budget group {t.group} has one",
            )
        traw = raw[name]
        key = f"tables.{name}"
        if "lifetime_epsilon" not in traw:
            if "lifetime_delta" in traw:
                raise _err(source, f"{key}.lifetime_delta", "needs lifetime_epsilon")
            continue
        eps = traw["lifetime_epsilon"]
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < float("inf"):
            raise _err(source, f"{key}.lifetime_epsilon", "must be a number greater than 0")
        delta = traw.get("lifetime_delta", 0.0)
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 <= delta < 1:
            raise _err(source, f"{key}.lifetime_delta", "must be a number from 0 to below 1")
        cap = Lifetime(float(eps), float(delta))
        if out.setdefault(t.group, cap) != cap:
            raise _err(
                source,
                f"{key}.lifetime_epsilon",
                f"budget group {t.group} is given two different lifetime budgets",
            )
    return out


def _public_tables(
    source: str, raw: object, protected: Mapping[str, object]
) -> dict[str, PublicTableDecl]:
    """The ``[public_tables]`` section (rewriter.public_tables): each table's ``schema``
    (default ``public``), every column it is read by, with its type, and ``max_rows``
    (default 10,000)."""
    if not isinstance(raw, dict):
        raise _err(source, "public_tables", "must be a table")
    out: dict[str, PublicTableDecl] = {}
    for name, spec in raw.items():
        key = f"public_tables.{name}"
        _ident(source, key, name)
        if not isinstance(spec, dict):
            raise _err(source, key, "must be a table")
        _check_keys(source, key, spec, {"schema", "columns", "max_rows"})
        schema = _ident(source, f"{key}.schema", spec.get("schema", "public"))
        if name in protected:
            raise _err(
                source,
                key,
                f"{name} is declared protected too; a table is either protected or public",
            )
        cols = spec.get("columns")
        if not isinstance(cols, dict) or not cols:
            raise _err(
                source, f"{key}.columns", "must list the columns statements read, with their types"
            )
        columns = tuple(
            (_ident(source, f"{key}.columns.{c}", c), _type(source, f"{key}.columns.{c}", t))
            for c, t in cols.items()
        )
        rows: Any = spec.get("max_rows", DEFAULT_MAX_ROWS)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise _err(source, f"{key}.max_rows", "must be an integer of at least 1")
        out[name] = PublicTableDecl(name=name, schema=schema, columns=columns, max_rows=rows)
    return out


def parse_schema(text: str, source_name: str) -> Schema:
    """Parse and validate a declaration; errors name ``source_name``, the key and the problem."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source_name}: not valid TOML: {e}") from None
    return schema_from_mapping(raw, source_name)


def schema_from_mapping(raw: Mapping[str, Any], source_name: str) -> Schema:
    """Validate an already-parsed declaration (the top-level keys of the TOML document)."""
    _check_keys(
        source_name, "(top level)", raw, {"cell_limit", "tables", "passthrough", "public_tables"}
    )
    limit = raw.get("cell_limit", DEFAULT_CELL_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise _err(source_name, "cell_limit", "must be a positive integer")
    tables_raw = raw.get("tables", {})
    if not isinstance(tables_raw, dict):
        raise _err(source_name, "tables", "must be a table")
    tables = {}
    for name, traw in tables_raw.items():
        tables[_ident(source_name, f"tables.{name}", name)] = _table(source_name, name, traw, limit)
    passthrough: frozenset[str] | None = None
    if "passthrough" in raw:
        praw = raw["passthrough"]
        if not isinstance(praw, dict):
            raise _err(source_name, "passthrough", "must be a table")
        _check_keys(source_name, "passthrough", praw, {"tables"})
        lst = _get(source_name, "passthrough", praw, "tables", list)
        names = []
        for t in lst:
            if not isinstance(t, str) or t.count(".") != 1:
                raise _err(source_name, "passthrough.tables", "entries must be schema.table")
            names.append(t.lower())
        passthrough = frozenset(names)
    return Schema(
        tables=tables,
        passthrough_tables=passthrough,
        cell_limit=limit,
        source=source_name,
        lifetimes=_lifetimes(source_name, tables_raw, tables),
        public=_public_tables(source_name, raw.get("public_tables", {}), tables),
    )


def load_schema(path: str | Path) -> Schema:
    """Read a TOML declaration from ``path`` (the rewriter's only I/O) and parse it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{p}: cannot read the declaration ({e.strerror})") from None
    return parse_schema(text, str(p))
