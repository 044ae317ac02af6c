"""Bind parameters and reduce a normalised statement to linear queries over a view.

Predicates become three-valued masks over the cells of the view (true / false / unknown,
as SQL evaluates them; NULL is its own cell). A predicate that is true for some values of a
bin and false for others *cuts* the bin and is refused. ``GROUP BY`` yields one query per
public group (every combination of the group attributes' cells, empty or not).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from dp.domain import QueryBatch

from .errors import BindError, InvalidValueError, UnsupportedError
from .normalise import Logical, Param, PBool, PCmp, PConst, PIsNull, Pred, Value
from .plan import (
    AggRef,
    Arith,
    Compare,
    Const,
    Fingerprint,
    KeyRef,
    Logic,
    MeasureKind,
    OrderItem,
    Plan,
    PostExpr,
    PostProcess,
)
from .schema import AttributeDecl, Kind, TableDecl, ViewDecl

BoolArray = npt.NDArray[np.bool_]


def choose_view(table: TableDecl, attributes: frozenset[str]) -> ViewDecl:
    """The smallest declared view whose attributes cover ``attributes``."""
    best: ViewDecl | None = None
    for v in table.views:
        if attributes <= set(v.names) and (best is None or v.size < best.size):
            best = v
    if best is None:
        raise UnsupportedError(
            f"no declared view of protected table {table.name} covers the columns "
            + ", ".join(sorted(attributes)),
            hint="declare a view with these attributes in lapras.toml, or query fewer columns together",
        )
    return best


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
            raise InvalidValueError(f"compare date column {attr.name} with dates, not timestamps")
        if isinstance(value, dt.date):
            return Fraction(value.toordinal())
        if isinstance(value, str):
            try:
                return Fraction(dt.date.fromisoformat(value.strip()).toordinal())
            except ValueError:
                raise InvalidValueError("invalid input syntax for type date") from None
        raise InvalidValueError(
            f"a value of this type cannot be compared with date column {attr.name}"
        )
    if attr.kind is Kind.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            t = value.strip().lower()
            if t in ("t", "true", "y", "yes", "on", "1"):
                return True
            if t in ("f", "false", "n", "no", "off", "0"):
                return False
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


class _Masks:
    def __init__(self, view: ViewDecl, params: Sequence[object] | None) -> None:
        self.view = view
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
        n = attr.size
        t = np.zeros(n, dtype=bool)
        f = np.zeros(n, dtype=bool)
        m = np.zeros(n, dtype=bool)
        if v is None:
            return (
                self.shape_for(attr.name, t),
                self.shape_for(attr.name, f),
                self.shape_for(attr.name, m),
            )
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
            half_open = True
            for i, (lo, hi) in enumerate(attr.bins):
                all_, none = _bin_test(op, lo, hi, v, half_open, integral=not half_open)
                t[i], f[i], m[i] = all_, none, not (all_ or none)
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


# --- binding --------------------------------------------------------------------------------


def _bind_post(e: PostExpr, params: Sequence[object]) -> PostExpr:
    if isinstance(e, Const) and isinstance(e.value, Param):
        v = params[e.value.index]
        if isinstance(v, float):
            v = Decimal(repr(v))
        return Const(value=v)
    if isinstance(e, Compare):
        return Compare(op=e.op, left=_bind_post(e.left, params), right=_bind_post(e.right, params))
    if isinstance(e, Arith):
        return Arith(op=e.op, left=_bind_post(e.left, params), right=_bind_post(e.right, params))
    if isinstance(e, Logic):
        return Logic(op=e.op, args=tuple(_bind_post(a, params) for a in e.args))
    return e


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


def _fingerprint(logical: Logical, params: Sequence[object]) -> Fingerprint:
    import hashlib

    bindings = tuple(
        _post_value(params[b.index] if isinstance(b, Param) and 0 <= b.index < len(params) else b)
        for b in logical.bindings
    )
    key = hashlib.sha256(logical.template.encode()).hexdigest()[:16]
    return Fingerprint(template=logical.template, bindings=bindings, key=key)


def reduce(logical: Logical, params: Sequence[object] = ()) -> Plan:
    """Bind ``params`` (values of ``$1..$n``) and reduce to a :class:`Plan`."""
    if len(params) != len(logical.param_types):
        raise BindError(
            f"bind message supplies {len(params)} parameters, but prepared statement requires {len(logical.param_types)}"
        )
    table = logical.table
    view = choose_view(table, logical.attributes)
    domain = view.domain
    shape = domain.shape
    masks = _Masks(view, params)
    if logical.where is not None:
        t, _, mixed = masks.pred(logical.where, table)
        if mixed.any():
            raise UnsupportedError(
                "a condition cuts a declared bin of a column of protected table " + table.name,
                hint="columns declared in bins wider than one value can only be compared at bin edges "
                "(see lapras.toml)",
            )
        selected = np.broadcast_to(t, shape).reshape(-1)
    else:
        selected = np.ones(domain.size, dtype=bool)

    # group id of every cell (C order over the group attributes' cells)
    gid = np.zeros(shape, dtype=np.int64)
    n_groups = 1
    for name in logical.group_by:
        attr = table.attributes[name]
        idx = np.arange(attr.size, dtype=np.int64)
        gid = gid * attr.size + masks.shape_for(name, idx)  # type: ignore[arg-type]
        n_groups *= attr.size
    gid_flat = np.broadcast_to(gid, shape).reshape(-1)

    m = len(logical.measures)
    rows_list, cols_list, data_list = [], [], []
    nz = np.flatnonzero(selected)
    for j, meas in enumerate(logical.measures):
        w: npt.NDArray[np.float64]
        if meas.kind is MeasureKind.COUNT_STAR:
            w = np.ones(nz.shape[0])
        else:
            assert meas.attribute is not None
            attr = table.attributes[meas.attribute]
            if meas.kind is MeasureKind.COUNT:
                per = np.ones(attr.size)
            else:
                per = np.array(
                    [float(lo) for lo, _ in attr.bins] + ([0.0] if attr.nullable else [])
                )
            if attr.null_cell is not None:
                per[attr.null_cell] = 0.0
            full = np.broadcast_to(masks.shape_for(attr.name, per), shape).reshape(-1)  # type: ignore[arg-type]
            w = np.asarray(full[nz], dtype=np.float64)
        rows_list.append(gid_flat[nz] * m + j)
        cols_list.append(nz)
        data_list.append(w)
    n_rows = n_groups * m
    if rows_list:
        matrix = sp.csr_array(
            (np.concatenate(data_list), (np.concatenate(rows_list), np.concatenate(cols_list))),
            shape=(n_rows, domain.size),
        )
    else:
        matrix = sp.csr_array((n_rows, domain.size))
    batch = QueryBatch(domain, matrix)

    # group keys in C order
    keys: list[tuple[object, ...]] = [()]
    for name in logical.group_by:
        attr = table.attributes[name]
        keys = [(*k, attr.cell_value(c)) for k in keys for c in range(attr.size)]

    post = PostProcess(
        outputs=tuple(_bind_post(o, params) for o in logical.outputs),
        having=_bind_post(logical.having, params) if logical.having is not None else None,
        order_by=tuple(
            OrderItem(expr=_bind_post(o.expr, params), desc=o.desc, nulls_first=o.nulls_first)
            for o in logical.order_by
        ),
        limit=_bound_int(logical.limit, params, "LIMIT"),
        offset=_bound_int(logical.offset, params, "OFFSET") or 0,
    )
    return Plan(
        table=table.qualified,
        view=view.name,
        domain=domain,
        batch=batch,
        measures=logical.measures,
        columns=logical.columns,
        group_keys=tuple(keys),
        post=post,
        fingerprint=_fingerprint(logical, params),
    )


__all__ = ["AggRef", "KeyRef", "choose_view", "coerce", "reduce"]
