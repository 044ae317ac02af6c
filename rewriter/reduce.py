"""Bind parameters and reduce a normalised statement to linear queries over a view.

Predicates become three-valued masks over the cells of the view (true / false / unknown,
as SQL evaluates them; NULL is its own cell). A predicate that is true for some values of a
bin and false for others *cuts* the bin and is refused. ``GROUP BY`` yields one query per
public group (every combination of the group attributes' cells, empty or not).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import itertools
import math
from collections import OrderedDict
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.domain import QueryBatch

from . import binned, cost, lookups, pgeval, pgtime
from .canonical import canonical
from .errors import BindError, DomainTooLargeError, InvalidValueError, UnsupportedError
from .normalise import _attrs_of, _fmt_expr
from .plan import (
    AggRef,
    AttrRef,
    Const,
    Fingerprint,
    KeyRef,
    Layout,
    Logical,
    Measure,
    MeasureKind,
    Param,
    PBool,
    PCmp,
    PConst,
    PExpr,
    PIsNull,
    Plan,
    PostExpr,
    PostProcess,
    Pred,
    Value,
    evaluate_with,
    nodes,
    transform,
)
from .schema import AttributeDecl, Kind, TableDecl, ViewDecl

BoolArray = npt.NDArray[np.bool_]
_T = TypeVar("_T")
_G = TypeVar("_G", bound=np.generic)


def marginal_name(names: Sequence[str]) -> str:
    """How a marginal is named in plans, logs and reports: its attributes, in table order."""
    return "(" + ", ".join(names) + ")"


def marginal(table: TableDecl, attributes: frozenset[str]) -> ViewDecl:
    """The marginal of ``table`` over exactly ``attributes`` (in the table's declaration
    order): the domain a statement using those columns is reduced over. Its number of cells is
    public (a product of declared domains); above the table's cell limit it is refused."""
    every = (*table.attributes.items(), *table.value_axes.items())  # clamped values too
    attrs = tuple(a for name, a in every if name in attributes)
    view = ViewDecl(name=marginal_name([a.name for a in attrs]), attributes=attrs)
    if view.size > table.cell_limit:
        raise DomainTooLargeError(
            f"the columns {', '.join(view.names)} of protected table {table.name} span "
            f"{view.size:,} cells together, above the cell limit ({table.cell_limit:,})",
            hint="ask about fewer of these columns in one statement, or declare coarser "
            "domains (or raise cell_limit in lapras.toml)",
        )
    return view


# --- values ---------------------------------------------------------------------------------


def coerce(attr: AttributeDecl, value: object) -> object:
    """A literal or bound parameter as a comparable key for ``attr`` (None stays None)."""
    if value is None:
        return None
    if attr.kind in (Kind.INTEGER, Kind.NUMERIC):
        if isinstance(value, bool):
            raise InvalidValueError(f"a boolean cannot be compared with integer column {attr.name}")
        if isinstance(value, Fraction | int):
            return Fraction(value)
        if isinstance(value, float | Decimal):
            try:
                return Fraction(value)
            except (ValueError, OverflowError):  # NaN, Infinity
                raise InvalidValueError(
                    f"column {attr.name} cannot be compared with NaN or infinity"
                ) from None
        if isinstance(value, str | bytes):
            try:
                text = value.decode() if isinstance(value, bytes) else value
                return Fraction(Decimal(text.strip()))
            except (InvalidOperation, ValueError, OverflowError):  # UnicodeDecodeError too
                raise InvalidValueError(
                    f"invalid input syntax for the type of column {attr.name}"
                ) from None
        raise InvalidValueError(f"a value of this type cannot be compared with column {attr.name}")
    if attr.kind is Kind.DATE:
        if isinstance(value, dt.datetime):
            # PostgreSQL compares the date as its midnight (in the session's TimeZone for a
            # timestamp with time zone): a day and the fraction of it the time adds
            if value.tzinfo is not None:
                local = value.astimezone(pgtime.zone(pgtime.SESSION_ZONE.get()))
                value = local.replace(tzinfo=None)
            since = value - dt.datetime.combine(value.date(), dt.time())
            return Fraction(value.toordinal()) + Fraction(
                since // dt.timedelta(microseconds=1), 86_400_000_000
            )
        if isinstance(value, dt.date):
            return Fraction(value.toordinal())
        if isinstance(value, str):
            try:
                return Fraction(pgtime.parse_date(value).toordinal())
            except pgeval.EvalError as e:  # PostgreSQL's date input (an ISO timestamp too)
                err = InvalidValueError(e.message, hint="write dates as 'YYYY-MM-DD'")
                err.sqlstate = e.sqlstate  # type: ignore[misc]
                raise err from None
        raise InvalidValueError(
            f"a value of this type cannot be compared with date column {attr.name}"
        )
    if attr.kind is Kind.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            b = pgeval.parse_bool(value)
            if b is not None:
                return b
        raise InvalidValueError("invalid input syntax for type boolean")
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidValueError("invalid byte sequence for encoding UTF8") from None
    if isinstance(value, str):
        return value
    raise InvalidValueError(f"compare text column {attr.name} with a string")


# --- three-valued masks ---------------------------------------------------------------------

Mask = tuple[BoolArray, BoolArray, BoolArray]  # (true, false, mixed); none of them = unknown


#: Comparisons' masks over one attribute's cells, by attribute, operator and value, oldest
#: first: dashboards compare the same columns with the same values again and again. All
#: public (the declaration and what the analyst sent); the arrays are read-only. As for
#: _STATIC below, each use is one call on the OrderedDict, atomic under the interpreter lock.
_COMPARED: OrderedDict[
    tuple[int, str, type, object], tuple[AttributeDecl, BoolArray, BoolArray, BoolArray]
] = OrderedDict()
_COMPARED_SIZE = 4096
#: Only attributes of at most this many cells are kept (at most 12 MB of masks in all).
_COMPARED_CELLS = 1024


class _Masks:
    def __init__(
        self, view: ViewDecl, params: Sequence[object] | None, values: _Values | None = None
    ) -> None:
        self.view = view
        self.values = values
        self.ndim = len(view.attributes)
        self.params = params
        self.axes = {a.name: i for i, a in enumerate(view.attributes)}

    def shape_for(self, name: str, arr: BoolArray) -> BoolArray:
        shape = [1] * self.ndim
        shape[self.axes[name]] = arr.shape[0]
        return arr.reshape(shape)

    def const(self, v: bool | None) -> Mask:
        one = np.ones([1] * self.ndim, dtype=bool)
        return (one if v is True else ~one, one if v is False else ~one, ~one)

    def value(self, v: Value) -> object:
        if isinstance(v, Param):
            assert self.params is not None
            return self.params[v.index]
        return v

    def cmp(self, attr: AttributeDecl, op: str, raw: Value) -> Mask:
        v = coerce(attr, self.value(raw))
        key = (id(attr), op, type(v), v)
        hit = _COMPARED.get(key)
        if hit is None or hit[0] is not attr:
            t, f, m = _compared(attr, op, v)
            for arr in (t, f, m):
                arr.flags.writeable = False
            hit = (attr, t, f, m)
            if attr.size <= _COMPARED_CELLS:
                _COMPARED[key] = hit
                if len(_COMPARED) > _COMPARED_SIZE:
                    _COMPARED.popitem(last=False)
        _, t, f, m = hit
        return (
            self.shape_for(attr.name, t),
            self.shape_for(attr.name, f),
            self.shape_for(attr.name, m),
        )

    def pred(self, p: Pred, table: TableDecl) -> Mask:
        if isinstance(p, PConst):
            return self.const(p.value)
        if isinstance(p, PCmp):
            return self.cmp(table.attributes[p.attribute], p.op, p.value)
        if isinstance(p, PIsNull):
            attr = table.attributes[p.attribute]
            isnull = np.zeros(attr.size, dtype=bool)
            if attr.null_cell is not None:
                isnull[attr.null_cell] = True
            no = np.zeros(attr.size, dtype=bool)
            return (
                self.shape_for(attr.name, isnull),
                self.shape_for(attr.name, ~isnull),
                self.shape_for(attr.name, no),
            )
        if isinstance(p, PBool):
            return self.cmp(table.attributes[p.attribute], "=", True)
        if isinstance(p, PExpr):
            assert self.values is not None
            return _truth(self.values.of(p.expr))
        if p.op == "or" and len(p.args) > 1:
            listed = self.equal_any(p.args, table)
            if listed is not None:
                return listed
        parts = [self.pred(a, table) for a in p.args]
        if p.op == "not":
            return parts[0][1], parts[0][0], parts[0][2]
        # A mixed cell (the bin is cut) is resolved when the other side is decisive
        # (false under AND, true under OR); otherwise it stays mixed and is refused.
        t, f, m = parts[0]
        for t2, f2, m2 in parts[1:]:
            if p.op == "and":
                t, f = t & t2 & ~m & ~m2, f | f2
                m = ~f & (m | m2)
            else:
                t, f = t | t2, f & f2 & ~m & ~m2
                m = ~t & (m | m2)
        return t, f, m

    def equal_any(self, args: Sequence[Pred], table: TableDecl) -> Mask | None:
        """``a = v1 OR a = v2 OR ...`` (an IN list) at once: the mask the OR of the
        comparisons folds to (see :meth:`pred`), in a few array operations instead of a dozen
        per value. None unless every part compares one integer, date, categorical or boolean
        attribute with ``=``.

        Each comparison's (true, false, mixed) cells are disjoint, so the fold is: true where
        any part is true; mixed where any part is mixed (never where one is true: a part is
        true only on a one-value bin, mixed only on a wider one); false where every part is
        false. A NULL value makes no cell false; a value outside every bin (or not an integer,
        for an integer column) makes no cell true or mixed.
        """
        first = args[0]
        if not isinstance(first, PCmp):
            return None
        name = first.attribute
        if not all(isinstance(a, PCmp) and a.op == "=" and a.attribute == name for a in args):
            return None
        attr = table.attributes[name]
        if attr.kind is Kind.NUMERIC:
            return None
        values = [coerce(attr, self.value(a.value)) for a in args]  # type: ignore[union-attr]
        cells = attr.value_cells
        t = np.zeros(attr.size, dtype=bool)
        f = np.zeros(attr.size, dtype=bool)
        m = np.zeros(attr.size, dtype=bool)
        null = any(v is None for v in values)
        if attr.kind in (Kind.CATEGORICAL, Kind.BOOLEAN):
            vals = attr.values if attr.kind is Kind.CATEGORICAL else (False, True)
            listed = {v for v in values if v is not None}
            t[:cells] = [x in listed for x in vals]
            f[:cells] = ~t[:cells] & (not null)
        elif cells:
            lo, hi = _int_bounds(attr)
            low, high = int(lo.min()), int(hi.max())
            ints = {
                v.numerator
                for v in values
                if isinstance(v, Fraction) and v.denominator == 1 and low <= v.numerator <= high
            }
            ks = np.array(sorted(ints), dtype=np.int64)
            hit = np.searchsorted(ks, hi, side="right") > np.searchsorted(ks, lo, side="left")
            t[:cells] = hit & (lo == hi)
            m[:cells] = hit & (lo != hi)
            f[:cells] = ~hit & (not null)
        return (
            self.shape_for(attr.name, t),
            self.shape_for(attr.name, f),
            self.shape_for(attr.name, m),
        )


_BOUNDS: dict[int, tuple[AttributeDecl, npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}


def _int_bounds(attr: AttributeDecl) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Closed integer bounds of the bins of an integer or date attribute (cached)."""
    hit = _BOUNDS.get(id(attr))
    if hit is None or hit[0] is not attr:
        lo = np.array([int(a) for a, _ in attr.bins], dtype=np.int64)
        hi = np.array([int(b) for _, b in attr.bins], dtype=np.int64)
        hit = (attr, lo, hi)
        _BOUNDS[id(attr)] = hit
    return hit[1], hit[2]


def _ceil(v: Fraction) -> int:
    return -((-v.numerator) // v.denominator)


def _compared(attr: AttributeDecl, op: str, v: object) -> tuple[BoolArray, BoolArray, BoolArray]:
    """The three-valued mask of ``attr op v`` over the attribute's cells (``v`` coerced)."""
    n = attr.size
    t = np.zeros(n, dtype=bool)
    f = np.zeros(n, dtype=bool)
    m = np.zeros(n, dtype=bool)
    if v is None:
        return t, f, m
    cells = attr.value_cells
    if attr.kind in (Kind.CATEGORICAL, Kind.BOOLEAN):
        if op not in ("=", "<>"):
            raise UnsupportedError(
                f"ordering comparisons on column {attr.name} are not supported",
                hint=f"compare {attr.name} with =, <>, IN or NOT IN",
            )
        vals = attr.values if attr.kind is Kind.CATEGORICAL else (False, True)
        eq = np.array([x == v for x in vals], dtype=bool)
        t[:cells], f[:cells] = (eq, ~eq) if op == "=" else (~eq, eq)
    elif attr.kind is not Kind.NUMERIC:
        assert isinstance(v, Fraction)
        lo_a, hi_a = _int_bounds(attr)
        a, b = _closed_int_test(op, lo_a, hi_a, v)
        t[:cells], f[:cells], m[:cells] = a, b, ~(a | b)
    else:
        assert isinstance(v, Fraction)
        # an integer column in numeric bins holds the integers of [lo, hi): closed bounds,
        # so that an inclusive bound on a bin's last integer (k <= 999) is exact
        integral = attr.pg_type in pgeval.INTS
        for i, (lo, hi) in enumerate(attr.bins):
            if integral:
                a_, b_ = Fraction(_ceil(lo)), Fraction(_ceil(hi) - 1)
                all_, none = _bin_test(op, a_, b_, v, False, integral=True)
            else:
                all_, none = _bin_test(op, lo, hi, v, True, integral=False)
            t[i], f[i], m[i] = all_, none, not (all_ or none)
    return t, f, m


def _closed_int_test(
    op: str, lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64], v: Fraction
) -> tuple[BoolArray, BoolArray]:
    """Vectorised :func:`_bin_test` for closed integer bins: (all satisfy, none satisfy)."""
    if op in ("=", "<>"):
        if v.denominator != 1:
            a, n = np.zeros(lo.shape, dtype=bool), np.ones(lo.shape, dtype=bool)
        else:
            k = v.numerator
            a, n = (lo == k) & (hi == k), (k < lo) | (k > hi)
        return (a, n) if op == "=" else (n, a)
    if op in ("<", "<="):
        k = _ceil(v) - 1 if op == "<" else v.numerator // v.denominator
        return hi <= k, lo > k
    k = v.numerator // v.denominator + 1 if op == ">" else _ceil(v)
    return lo >= k, hi < k


def _bin_test(
    op: str, lo: Fraction, hi: Fraction, v: Fraction, half_open: bool, integral: bool
) -> tuple[bool, bool]:
    """(every value of the bin satisfies ``x op v``, no value does)."""
    if op == "<>":
        a, n = _bin_test("=", lo, hi, v, half_open, integral)
        return n, a
    if not half_open:  # closed [lo, hi] of integers
        if op == "=":
            if integral and v.denominator != 1:
                return False, True
            return (lo == hi == v), (v < lo or v > hi)
        if op == "<":
            return hi < v, lo >= v
        if op == "<=":
            return hi <= v, lo > v
        if op == ">":
            return lo > v, hi <= v
        return lo >= v, hi < v  # >=
    # half-open [lo, hi) of reals
    if op == "=":
        return False, (v < lo or v >= hi)
    if op == "<":
        return hi <= v, lo >= v
    if op == "<=":
        return hi <= v, lo > v
    if op == ">":
        return lo > v, hi <= v
    return lo >= v, hi <= v  # >=


# --- expressions over the cells of a view ---------------------------------------------------


class _Values:
    """Values of cell-level expressions over a view, evaluated over the public values of the
    attributes each reads (never over rows), with PostgreSQL's semantics (rewriter.pgeval).

    A cell of a binned integer or date attribute holds several values: an expression is
    evaluated at each of them and must take one value per cell (else it cuts a bin and is
    refused). At most ``limit`` evaluations per expression (the schema's cell limit)."""

    def __init__(self, view: ViewDecl, table: TableDecl, limit: int) -> None:
        self.view = view
        self.table = table
        self.limit = limit
        self.axes = {a.name: i for i, a in enumerate(view.attributes)}
        self._memo: dict[PostExpr, tuple[npt.NDArray[np.object_], int, str]] = {}

    def of(self, expr: PostExpr) -> npt.NDArray[np.object_]:
        """An object array broadcastable to the view's shape: the expression's value in each
        cell (an axis of length 1 for each attribute it does not read)."""
        hit = self._memo.get(expr)
        if hit is not None:  # spent again: once per piece of work, cached or not (cost)
            cost.spend_values(hit[1], _size(expr), hit[2], key=expr)
            return hit[0]
        names = sorted(_attrs_of(expr), key=lambda n: self.axes[n])
        attrs = [self.table.attribute(n) for n in names]
        per_cell = [_cell_values(a, self.table) for a in attrs]
        total = 1
        for cells in per_cell:
            total *= sum(len(vs) for vs in cells)
        if total > self.limit:
            raise DomainTooLargeError(
                f"the expression spans {total:,} values of columns {', '.join(names)} of "
                f"protected table {self.table.name}, above the cell limit ({self.limit:,})",
                hint="use fewer columns in one expression, or declare coarser domains",
            )
        cost.spend_values(total, _size(expr), ", ".join(names), key=expr)
        shape = [1] * len(self.view.attributes)
        for name, cells in zip(names, per_cell, strict=True):
            shape[self.axes[name]] = len(cells)
        out = np.empty([len(c) for c in per_cell], dtype=object)
        env: dict[str, object] = {}

        def leaf(e: PostExpr) -> object:
            if isinstance(e, AttrRef):
                return env[e.name]
            raise ValueError("not a cell expression")

        # a column in numeric bins holds one span per cell, evaluated as an interval
        spans = any(a.kind is Kind.NUMERIC for a in attrs)
        idx: tuple[int, ...] = ()
        try:
            for idx in itertools.product(*(range(len(c)) for c in per_cell)):
                result: object = _UNSET
                for combo in itertools.product(*(per_cell[k][i] for k, i in enumerate(idx))):
                    env.update(zip(names, combo, strict=True))
                    v = binned.evaluate(expr, env) if spans else evaluate_with(expr, leaf)
                    if result is _UNSET:
                        result = v
                    elif v != result or type(v) is not type(result):
                        raise binned.Cut
                out[idx] = result
        except binned.Cut:
            raise binned.cut_error(_fmt_expr(expr, (), (), []), attrs, idx, self.table) from None
        except pgeval.EvalError as e:
            err = InvalidValueError(
                f"{e.message} for a value of the declared domain of column {', '.join(names)} "
                f"of protected table {self.table.name}",
                hint="the expression is evaluated over every declared value, not only the ones in the data",
            )
            err.sqlstate = e.sqlstate  # type: ignore[misc]
            raise err from None
        arr = out.reshape(shape)
        self._memo[expr] = (arr, total, ", ".join(names))
        return arr


_UNSET = object()


def _size(expr: PostExpr) -> int:
    """The number of nodes of an expression (its evaluation's cost per value)."""
    return sum(1 for _ in nodes(expr))


def _cell_values(attr: AttributeDecl, table: TableDecl) -> list[list[object]]:
    """Per cell of ``attr``, the public values a row in it can have."""
    if attr.kind is Kind.CATEGORICAL:
        cells: list[list[object]] = [[v] for v in attr.values]
    elif attr.kind is Kind.BOOLEAN:
        cells = [[False], [True]]
    elif attr.kind is Kind.INTEGER:
        cells = [list(range(int(lo), int(hi) + 1)) for lo, hi in attr.bins]
    elif attr.kind is Kind.DATE:
        cells = [
            [dt.date.fromordinal(d) for d in range(int(lo), int(hi) + 1)] for lo, hi in attr.bins
        ]
    else:  # numeric bins: one span of values per cell (rewriter.binned)
        return binned.cell_spans(attr)
    if attr.nullable:
        cells.append([None])
    return cells


def _truth(values: npt.NDArray[np.object_]) -> Mask:
    # np.asarray: over a marginal of no column the values are a 0-d array, which a ufunc
    # returns as a scalar
    t = np.asarray(np.frompyfunc(lambda v: v is True, 1, 1)(values), dtype=bool)
    f = np.asarray(np.frompyfunc(lambda v: v is False, 1, 1)(values), dtype=bool)
    return t, f, np.zeros(t.shape, dtype=bool)


def _numbers(values: npt.NDArray[np.object_], null: float) -> npt.NDArray[np.float64]:
    """An object array of numbers (NULL: ``null``) as floats, in the same shape."""
    as_float = np.frompyfunc(lambda v: null if v is None else float(v), 1, 1)
    return np.asarray(as_float(values), dtype=np.float64)


# --- binding --------------------------------------------------------------------------------


def _bind(e: _T, params: Sequence[object]) -> _T:
    """``e`` with every ``Const($n)`` replaced by its bound value."""

    def bound(x: object) -> object | None:
        if isinstance(x, Const) and isinstance(x.value, Param):
            v = params[x.value.index]
            if isinstance(v, float) and x.pg_type != "float8":
                v = Decimal(repr(v))
            if x.pg_type not in ("", "unknown") and v is not None:
                try:
                    v = pgeval.cast(
                        v if not isinstance(v, bytes) else v.decode(), "unknown", x.pg_type
                    )
                except (
                    pgeval.EvalError,
                    pgeval.TypeMismatch,
                    UnicodeDecodeError,
                    ArithmeticError,
                    ValueError,
                ):
                    raise InvalidValueError(
                        f"invalid input syntax for type {pgeval.sql_type(x.pg_type)}"
                    ) from None
            return Const(value=v, pg_type=x.pg_type)
        return None

    return transform(e, bound)


def _bound_int(v: Value, params: Sequence[object], what: str) -> int | None:
    if isinstance(v, Param):
        v = params[v.index]
        if v is None:
            return None
        try:
            n = Fraction(str(v).strip()) if not isinstance(v, int | Fraction) else Fraction(v)
        except (ValueError, ZeroDivisionError, OverflowError):
            raise InvalidValueError(f"{what} must be a non-negative integer") from None
        if isinstance(v, bool) or n.denominator != 1 or n < 0:
            raise InvalidValueError(f"{what} must be a non-negative integer")
        return int(n)
    assert v is None or isinstance(v, int)
    return v


def _post_value(v: object) -> object:
    if isinstance(v, Fraction):
        return int(v) if v.denominator == 1 else Decimal(v.numerator) / Decimal(v.denominator)
    return v


def _template_key(template: str) -> str:
    return hashlib.sha256(template.encode()).hexdigest()[:16]


def _fingerprint(logical: Logical, params: Sequence[object], key: str | None = None) -> Fingerprint:
    """The template, its bindings and the template's key (``key``: when already known)."""
    bindings = tuple(
        _post_value(params[b.index] if isinstance(b, Param) and 0 <= b.index < len(params) else b)
        for b in logical.bindings
    )
    key = key or _template_key(logical.template)
    return Fingerprint(template=logical.template, bindings=bindings, key=key)


def _measure_parts(
    meas: Measure, table: TableDecl, masks: _Masks, values: _Values
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64] | None, tuple[object, ...]]:
    """A measure's weight before its FILTER, over the attributes it reads (an axis of length
    1 for the others; broadcast to the view by :func:`_measure_weights`), and for a histogram
    each of those cells' value code and the public values in ascending order. A function of
    the statement and the view only: the measures are never bound."""
    if meas.kind is MeasureKind.COUNT_STAR:
        return np.ones([1] * masks.ndim), None, ()
    if meas.kind is MeasureKind.COUNT and meas.attribute is not None:
        attr = table.attribute(meas.attribute)
        per = np.ones(attr.size)
        if attr.null_cell is not None:
            per[attr.null_cell] = 0.0
        axes = [1] * masks.ndim
        axes[masks.axes[attr.name]] = attr.size
        return per.reshape(axes), None, ()
    assert meas.expr is not None
    small = values.of(meas.expr)
    known = np.asarray(np.frompyfunc(lambda x: x is not None, 1, 1)(small), dtype=bool)
    if meas.kind is MeasureKind.COUNT:
        return known.astype(np.float64), None, ()
    if meas.kind is MeasureKind.HIST:
        distinct = sorted({x for x in small.reshape(-1) if x is not None}, key=_order_key)
        index = {x: i for i, x in enumerate(distinct)}
        small_codes = np.frompyfunc(lambda x: index.get(x, 0) if x is not None else 0, 1, 1)
        codes = np.asarray(small_codes(small), dtype=np.int64)
        return known.astype(np.float64), codes, tuple(distinct)
    num = _numbers(small, 0.0)
    return (num * num if meas.kind is MeasureKind.SUMSQ else num), None, ()


def _measure_weights(
    meas: Measure,
    table: TableDecl,
    masks: _Masks,
    values: _Values,
    shape: tuple[int, ...],
    static: _Static | None = None,
    j: int = 0,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64] | None, tuple[object, ...]]:
    """A measure's weight in every cell, and for a histogram each cell's value code and the
    public values in ascending order. The arrays are *small*: broadcast to ``shape`` they
    give every cell's value, and an axis along which the value does not change has length 1
    (:func:`_collapsed`: equal small arrays are equal measures). With ``static`` (measure
    ``j`` of its statement), what does not depend on the parameters is computed once per
    statement."""
    parts = static.parts.get(j) if static is not None else None
    if parts is None:
        parts = _measure_parts(meas, table, masks, static.values if static else values)
        if static is not None:
            static.parts[j] = parts
    part, small_codes, hist_values = parts
    ndim = len(shape)
    w = _padded(part.astype(np.float64), ndim)
    if meas.filter is not None:
        t = static.filters.get(j) if static is not None else None
        if t is None:
            t, _, mixed = masks.pred(meas.filter, table)
            if mixed.any():
                raise _cut(table, masks.view, mixed)
            if static is not None and not _has_param(meas.filter):
                static.filters[j] = t
        w = w * _padded(t, ndim)
    codes = None if small_codes is None else _collapsed(_padded(small_codes, ndim))
    return _collapsed(w), codes, hist_values


def _padded(a: npt.NDArray[_G], ndim: int) -> npt.NDArray[_G]:
    """``a`` with leading axes of length 1 up to ``ndim`` axes (as broadcasting aligns it)."""
    return a.reshape((1,) * (ndim - a.ndim) + a.shape)


def _collapsed(a: npt.NDArray[_G]) -> npt.NDArray[_G]:
    """``a`` with every axis along which it does not change cut to length 1 (the same array
    once broadcast; a canonical form: two arrays that broadcast to the same values are equal
    in it)."""
    for axis, n in enumerate(a.shape):
        if n > 1:
            first = a.take([0], axis=axis)
            if np.array_equal(a, np.broadcast_to(first, a.shape)):
                a = first
    return a


def _asked(logical: Logical) -> list[bool]:
    """For each measure, whether an aggregate the statement asks for is made from it; False
    for a count kept only to tell whether a SUM is NULL (over no row)."""
    asked = [False] * len(logical.measures)
    for e in nodes((logical.outputs, logical.having, logical.order_by)):
        if isinstance(e, AggRef):
            asked[e.value] = True
            if e.square is not None:
                asked[e.square] = True
            if e.count is not None and e.func != "sum":
                asked[e.count] = True
    return asked


def _order_key(v: object) -> tuple[int, float, str]:
    """Ascending order of a histogram's values: numbers by value, then dates, then text."""
    if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
        return (0, float(v), "")
    if isinstance(v, dt.date):
        return (1, float(v.toordinal()), "")
    return (2, float(bool(v)) if isinstance(v, bool) else 0.0, str(v))


def _uncut(mask: Mask, table: TableDecl, view: ViewDecl) -> Mask:
    """``mask``, unless a condition cuts a declared bin (refused)."""
    if mask[2].any():
        raise _cut(table, view, mask[2])
    return mask


def _cut(table: TableDecl, view: ViewDecl, mixed: npt.NDArray[np.bool_]) -> UnsupportedError:
    """The refusal of a condition true on part of a declared bin only (``mixed``: the cells
    where it is, over ``view``'s axes), naming the first such bin (public: the cells come
    from the condition and the declaration, never from the data)."""
    mixed = _padded(mixed, len(view.attributes))
    at = np.argwhere(mixed)[0]
    axes = [i for i, n in enumerate(mixed.shape) if n > 1]
    if axes:
        attrs = [view.attributes[i] for i in axes]
        return binned.cut_error("a condition", attrs, [int(at[i]) for i in axes], table)
    return UnsupportedError(
        "a condition cuts a declared bin of a column of protected table " + table.name,
        hint="columns declared in bins wider than one value can only be compared at bin edges "
        "(see lapras.toml)",
    )


def _reduce_union(
    logical: Logical, params: Sequence[object], view: ViewDecl, *, reuse: bool = False
) -> Plan:
    """A UNION: each branch reduced over the one marginal covering them all, their batches
    stacked into one (one release, one charge; the sensitivity of the stack is recomputed)."""
    parts = tuple(
        _reduce(b, params[: len(b.param_types)], view=view, reuse=reuse) for b in logical.branches
    )
    return Plan(
        table=logical.table.qualified,
        view=view.name,
        domain=view.domain,
        batch=QueryBatch.stack([p.batch for p in parts]),
        measures=(),
        columns=logical.columns,
        group_keys=(),
        post=PostProcess(
            outputs=(),
            order_by=logical.order_by,
            limit=logical.limit if isinstance(logical.limit, int) else None,
            offset=logical.offset if isinstance(logical.offset, int) else 0,
            distinct=logical.distinct,
        ),
        fingerprint=_fingerprint(logical, params),
        parts=parts,
    )


class _Static:
    """What binding a statement over its view computes that does not depend on the
    parameters, kept between its bindings (:func:`reduce` with ``reuse``): the view, the
    values of its expressions over the declared domains, its measures' weights before
    broadcasting, its grouping expressions' codes, and which parts hold no parameter (bound
    as they are). Each part is computed at its first use, in the order :func:`reduce` always
    uses them, so that a statement refused for one reason is refused for it every time.

    Everything here is public: the declaration and the statement (no parameter value, no
    data). Arrays are kept over the attributes each part reads, not over the whole view."""

    def __init__(self, logical: Logical, view: ViewDecl) -> None:
        self.logical = logical
        self.view = view
        self.values = _Values(view, logical.table, logical.table.cell_limit)
        self.asked = _asked(logical)
        self.parts: dict[
            int, tuple[npt.NDArray[np.float64], npt.NDArray[np.int64] | None, tuple[object, ...]]
        ] = {}
        self.filters: dict[int, BoolArray] = {}
        self.groups: dict[int, tuple[npt.NDArray[np.int64], list[object]]] = {}
        self.group_free = [not _has_param(g) for g in logical.group_by]
        # bound as they are (:func:`_bind` replaces constants that are parameters only; the
        # parameters a comparison holds are read by the masks)
        self.where_free = not _has_const_param(logical.where)
        self.measures_free = _measures_free(logical)
        self.post_free = not _has_const_param((logical.outputs, logical.having, logical.order_by))
        self.key = _template_key(logical.template)


#: The statements bound most recently (:class:`_Static`, by the identity of the statement).
#: Bindings may run in several threads: each use below is one call on an OrderedDict with
#: integer keys, which the interpreter lock makes atomic (a part computed twice at once is
#: computed alike), so no lock is taken.
_STATIC: OrderedDict[int, _Static] = OrderedDict()
_STATIC_SIZE = 256


def _static(logical: Logical, view: ViewDecl | None) -> _Static:
    """The :class:`_Static` of ``logical`` over ``view`` (its own marginal when None)."""
    hit = _STATIC.get(id(logical))
    if hit is not None and hit.logical is logical and (view is None or hit.view == view):
        with contextlib.suppress(KeyError):  # dropped meanwhile by another thread's binding
            _STATIC.move_to_end(id(logical))
        return hit
    made = _Static(logical, view or marginal(logical.table, logical.attributes))
    _STATIC[id(logical)] = made
    while len(_STATIC) > _STATIC_SIZE:
        try:
            _STATIC.popitem(last=False)
        except KeyError:
            break
    return made


def _measures_free(logical: Logical) -> list[bool]:
    """For each measure, whether its expression holds no parameter (bound as it is)."""
    return [not _has_const_param(m) for m in logical.measures]


def _has_param(e: object) -> bool:
    return any(isinstance(n, Param) for n in nodes(e))


def _has_const_param(e: object) -> bool:
    return any(isinstance(n, Const) and isinstance(n.value, Param) for n in nodes(e))


def _matrix(
    group_cells: Sequence[npt.NDArray[np.int64]],
    layouts: Sequence[Layout],
    weights: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64] | None]],
    width: int,
    shape: tuple[int, int],
    domain_shape: tuple[int, ...],
) -> sp.csr_array:
    """The query matrix: row ``g * width + offset (+ the value's code, for a histogram)`` of
    group ``g`` and measure layout, the measure's weight over its scale in each selected
    cell of the group (zeros left out), built in canonical CSR form (rows in order, columns
    ascending within a row, no duplicates), all groups of a layout at once."""
    if not group_cells or not layouts:
        return sp.csr_array(shape)
    sizes = np.fromiter((c.shape[0] for c in group_cells), dtype=np.int64, count=len(group_cells))
    cells = np.concatenate(group_cells)
    group = np.repeat(np.arange(len(group_cells), dtype=np.int64), sizes)
    at = _cells_at(cells, domain_shape)
    rows_list, cols_list, data_list = [], [], []
    for lay, (w, hcodes) in zip(layouts, weights, strict=True):
        wc = _at(w, at, cells.shape[0]) / lay.scale
        keep = wc != 0
        c = cells[keep]
        r = group[keep] * width + lay.offset
        if hcodes is not None:
            r = r + _at(hcodes, at, cells.shape[0])[keep]
        rows_list.append(r)
        cols_list.append(c)
        data_list.append(wc[keep])
    rows = np.concatenate(rows_list)
    cols = np.concatenate(cols_list)
    data = np.concatenate(data_list)
    if rows.size > 1 and bool(np.any(rows[1:] < rows[:-1])):
        # the entries of one row come from one layout and one group, their cells ascending:
        # a stable sort by row keeps them so
        order = np.argsort(rows, kind="stable")
        rows, cols, data = rows[order], cols[order], data[order]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return sp.csr_array((data, cols, indptr), shape=shape)


def _at(small: npt.NDArray[_G], at: tuple[npt.NDArray[np.intp], ...], n: int) -> npt.NDArray[_G]:
    """The values of ``small`` broadcast to the domain's shape, at the ``n`` cells whose
    coordinates are ``at`` (one array per axis; none for a domain without attributes),
    without building the broadcast array."""
    small = _padded(small, len(at))
    zero = np.zeros(1, dtype=np.intp)
    got = small[tuple(ix if k != 1 else zero for ix, k in zip(at, small.shape, strict=True))]
    return np.broadcast_to(got, (n,))


def _cells_at(
    cells: npt.NDArray[np.int64], shape: tuple[int, ...]
) -> tuple[npt.NDArray[np.intp], ...]:
    """The coordinates of flat cell indices, one array per axis."""
    return tuple(np.unravel_index(cells, shape)) if shape else ()


def _first_identical(
    computed: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64] | None, object]],
) -> list[int]:
    """For each measure, the first measure with the same weight (and histogram code) in
    every cell: identical measures share their rows (compared in :func:`_collapsed` form)."""
    seen: dict[tuple[object, ...], int] = {}
    first: list[int] = []
    for j, (w, codes, _) in enumerate(computed):
        key = (w.shape, w.tobytes(), None if codes is None else (codes.shape, codes.tobytes()))
        first.append(seen.setdefault(key, j))
    return first


def reduce(
    logical: Logical,
    params: Sequence[object] = (),
    *,
    view: ViewDecl | None = None,
    reuse: bool = False,
) -> Plan:
    """:func:`_reduce`, over the smallest marginal the queries depend on (rewriter.canonical:
    a condition true for every declared value asks what the statement without it asks)."""
    return canonical(_reduce(logical, params, view=view, reuse=reuse), marginal_name)


def _reduce(
    logical: Logical,
    params: Sequence[object] = (),
    *,
    view: ViewDecl | None = None,
    reuse: bool = False,
) -> Plan:
    """Bind ``params`` (values of ``$1..$n``) and reduce to a :class:`Plan`.

    Groups: every combination of the grouping expressions' values that some cell selected by
    WHERE takes (public: from the domain and the statement only), in the order of the
    attributes' declared cells. Each measure's rows are divided by the largest absolute
    weight it has over the marginal (its *scale*, a public constant), so that every measure of
    a statement is answered at the same relative precision: a count next to a sum is no
    longer measured at the sum's noise scale (``postprocess`` multiplies back).

    ``reuse``: keep what does not depend on the parameters for the statement's next binding
    (a prepared statement executed again and again: :func:`rewriter.bind`).
    """
    if len(params) != len(logical.param_types):
        raise BindError(
            f"bind message supplies {len(params)} parameters, but prepared statement requires {len(logical.param_types)}"
        )
    table = logical.table
    joined = None
    if logical.lookups:  # the cells times the rows of its public relations (rewriter.lookups)
        joined = lookups.joined(logical, view or marginal(table, logical.attributes))
        view = joined.view
    static = _static(logical, view) if reuse else None
    view = static.view if static is not None else view or marginal(table, logical.attributes)
    if logical.branches:
        return _reduce_union(logical, params, view, reuse=reuse)
    domain = table.marginal_domain(view)
    shape = domain.shape
    cost.spend_cells(domain.size, len(logical.measures), view.name)
    values = _Values(view, table, table.cell_limit)
    masks = _Masks(view, params, values)
    where = logical.where
    if where is not None and not (static is not None and static.where_free):
        where = _bind(where, params)
    if where is not None:
        t, _, mixed = masks.pred(where, table)
        if mixed.any():
            raise _cut(table, view, mixed)
        selected = np.broadcast_to(t, shape).reshape(-1)
    else:
        selected = np.ones(domain.size, dtype=bool)
    if joined is not None:
        present = joined.presence(lambda p: _uncut(masks.pred(p, table), table, view))
        selected = selected & np.broadcast_to(present > 0, shape).reshape(-1)
    possible = table.selectable(view)  # a derived relation's cells that may hold a row
    if possible is not None:
        selected = selected & possible.reshape(-1)

    if static is not None and all(static.group_free):
        group_by = logical.group_by
    else:
        group_by = _bind(logical.group_by, params)
    sets = logical.grouping_sets or (tuple(range(len(group_by))),)
    # each grouping expression: a code per cell (first-appearance order over its cells)
    codes: list[npt.NDArray[np.int64]] = []
    keys_of: list[list[object]] = []
    for k, gexpr in enumerate(group_by):
        free = static is not None and static.group_free[k]
        hit = static.groups.get(k) if static is not None and free else None
        if hit is None:
            vals = (static.values if static is not None and free else values).of(gexpr)
            distinct: dict[tuple[type, object], int] = {}
            small = np.empty(vals.shape, dtype=np.int64)
            for pos, x in np.ndenumerate(vals):
                small[pos] = distinct.setdefault((type(x), x), len(distinct))
            hit = (small, [x for _, x in distinct])
            if static is not None and free:
                static.groups[k] = hit
        codes.append(hit[0])
        keys_of.append(hit[1])
    nz = np.flatnonzero(selected)
    # the selected cells' coordinates, per axis (for the grouping expressions' codes)
    at = _cells_at(nz, shape) if any(sets) else ()
    group_cells: list[npt.NDArray[np.int64]] = []  # per group, its selected cells
    group_keys: list[tuple[object, ...]] = []
    grouped: list[tuple[int, ...]] = []  # per group, the keys of its grouping set
    last: tuple[int, ...] = ()
    groups = sum(min(math.prod(len(keys_of[k]) for k in one), nz.size) for one in sets)
    cost.spend_groups(groups, len(logical.columns))
    for one in sets:
        grouped.extend([last] * (len(group_keys) - len(grouped)))
        last = tuple(one)
        if one:
            combo = np.zeros(nz.shape[0], dtype=np.int64)
            for k in one:
                combo = combo * len(keys_of[k]) + _at(codes[k], at, nz.shape[0])
            uniq, inverse = np.unique(combo, return_inverse=True)
        else:
            group_keys.append((None,) * len(group_by))  # one group: every selected cell
            group_cells.append(nz)
            continue
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
        for gi, u in enumerate(uniq):
            rest = int(u)
            key_codes: dict[int, int] = {}
            for k in reversed(one):
                key_codes[k] = rest % len(keys_of[k])
                rest //= len(keys_of[k])
            group_keys.append(
                tuple(
                    keys_of[k][key_codes[k]] if k in key_codes else None
                    for k in range(len(group_by))
                )
            )
            group_cells.append(nz[order[bounds[gi] : bounds[gi + 1]]])

    # measures: weights, scales, layout; identical measures share their rows. A measure
    # whose expression holds a parameter (``sum($1::int)``) is bound, and not kept.
    asked = static.asked if static is not None else _asked(logical)
    mfree = static.measures_free if static is not None else _measures_free(logical)
    measures = tuple(m if mfree[j] else _bind(m, params) for j, m in enumerate(logical.measures))
    computed = [
        _measure_weights(m, table, masks, values, shape, static if mfree[j] else None, j)
        for j, m in enumerate(measures)
    ]
    if joined is not None:  # each (cell, relation rows) as often as the join holds it
        computed = [(_collapsed(_padded(w, len(shape)) * present), c, v) for w, c, v in computed]
    first = _first_identical(computed)
    layouts: list[Layout] = []
    weights: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64] | None]] = []
    width = 0
    for j, (w, hist_codes, hist_values) in enumerate(computed):
        k = first[j]
        if k != j:
            layouts.append(layouts[k])
            continue
        peak = float(np.max(np.abs(w))) if w.size else 0.0
        # weights in [-1, 1] for what was asked; a count kept only to tell whether a SUM is
        # NULL in [-1/4, 1/4] (a quarter of the weight: 1/16 of its share of the noise)
        weight = 1.0 if any(asked[i] for i in range(len(first)) if first[i] == j) else 0.25
        scale = (peak if peak > 0 else 1.0) / weight
        n_rows = len(hist_values) if hist_codes is not None else 1
        layouts.append(Layout(offset=width, width=n_rows, scale=scale, values=hist_values))
        weights.append((w, hist_codes))
        width += n_rows

    grouped.extend([last] * (len(group_keys) - len(grouped)))
    unique_layouts = [lay for j, lay in enumerate(layouts) if first[j] == j]
    n_rows = len(group_keys) * width
    matrix = _matrix(
        group_cells, unique_layouts, weights, width, (n_rows, domain.size), domain.shape
    )
    if joined is not None:  # the relations' axes summed out: over the table's marginal
        matrix, domain = joined.contract(matrix), joined.base.domain
    batch = QueryBatch(domain, matrix)

    # the range of each summed expression in each group (AVG stays inside it)
    ranges: list[list[tuple[float, float] | None]] = [[None] * len(layouts) for _ in group_keys]
    for j, meas in enumerate(measures):
        if meas.kind is not MeasureKind.SUM or meas.expr is None:
            continue
        small_num = _numbers(
            (static.values if static is not None and mfree[j] else values).of(meas.expr),
            math.nan,
        )
        num = np.broadcast_to(small_num, shape).reshape(-1)
        if meas.filter is not None:
            kept = static.filters.get(j) if static is not None else None
            t = kept if kept is not None else masks.pred(meas.filter, table)[0]
            num = np.where(np.broadcast_to(t, shape).reshape(-1), num, np.nan)
        for g, cells in enumerate(group_cells):
            sub = num[cells]
            sub = sub[~np.isnan(sub)]
            if sub.size:
                ranges[g][j] = (float(sub.min()), float(sub.max()))

    free = static is not None and static.post_free
    post = PostProcess(
        outputs=logical.outputs if free else _bind(logical.outputs, params),
        having=_bind(logical.having, params)
        if logical.having is not None and not free
        else logical.having,
        order_by=logical.order_by if free else _bind(logical.order_by, params),
        limit=_bound_int(logical.limit, params, "LIMIT"),
        offset=_bound_int(logical.offset, params, "OFFSET") or 0,
        distinct=logical.distinct,
        count_rows=logical.count_rows,
    )
    return Plan(
        table=table.qualified,
        view=view.name,
        domain=domain,
        batch=batch,
        measures=measures,
        columns=logical.columns,
        group_keys=tuple(group_keys),
        post=post,
        fingerprint=_fingerprint(logical, params, static.key if static is not None else None),
        layouts=tuple(layouts),
        ranges=tuple(tuple(r) for r in ranges),
        grouped=tuple(grouped) if logical.grouping_sets else (),
    )


__all__ = ["AggRef", "KeyRef", "coerce", "marginal", "marginal_name", "reduce"]
