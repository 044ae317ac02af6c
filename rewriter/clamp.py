"""Sums and averages of binned and continuous columns, with declared clamping bounds.

A column declared in bins wider than one value -- an integer column by ``edges``
(``capital_gain``) or by ``bin_width``, a ``numeric``/``double precision`` column by ``edges``
(a money amount, a latitude) -- has many values per cell, and the histogram counts rows per
bin, not their values: ``SUM``/``AVG`` of it cannot be a function of the counts. With ``clamp
= true`` in its declaration (``[tables.T.attributes.X]``, docs/configuration.md), its values
are **clamped** into its declared range ``[lower, upper]`` (:attr:`AttributeDecl.bounds`: a
value below counts as ``lower``, above as ``upper``, in the first or last bin, as SmartNoise
and Tumult clamp), and the epoch's pin carries each row's clamped value exactly, so that
``sum(x)`` and ``avg(x)`` are answered.

**How the pin carries the values.** A row in bin ``[a, b]`` with clamped value ``v`` is split
between the bin's two ends: a share ``l = (b - v) / (b - a)`` at ``a`` and ``1 - l`` at ``b``
(``v = l a + (1 - l) b``; ``l = 1`` for a bin of one value). The table's domain gets, for each
clamped column ``X``, one more attribute ``X#value`` (:class:`rewriter.schema.ValueAxis`)
whose cells are the ends of the bins (two per bin, then NULL's for a nullable column); a row
puts mass ``l`` on its bin's low end and ``1 - l`` on its high end (with several clamped
columns, the product of the shares: one mass per combination of ends). Counts are unchanged
(the masses of a row sum to 1: a statement that does not read ``X#value`` sums it out), and
``sum(x)`` is the linear query whose weight in an end's cell is that end: exactly
``sum(least(greatest(x, lower), upper))`` over the rows. The pin statement computes, per
combination of declared cells, the sums of the products of the shares (:func:`factors`), on
the backend, at the epoch's start, as it computes the counts; :func:`expand` splits them.

**Which arguments.** The argument of ``SUM``/``AVG`` may be any expression whose value, on
each cell of the columns it reads, is affine in each clamped column's value
(:func:`summand`): the column itself, sums and differences (``capital_gain - capital_loss``,
``amount + age``), products and quotients by values that do not read it (``amount * 1.2``,
``amount / 100.0``, ``amount * w.rate`` of a public relation), negation, casts that neither
round nor wrap, ``COALESCE``, and ``CASE`` whose conditions read the column's *bins* (as every
condition does: ``CASE WHEN capital_gain > 0 THEN capital_gain END``, ``CASE WHEN sex =
'Male' THEN amount ELSE 0 END``) and whose branches are affine. Such an expression's value on
a row is the same mix of its values at the bin's ends, so the sum is exact. Anything else
(``floor(x)``, ``x * x``, integer division, ``round``) is refused (0A000), and so are
variances (a sum of squares is not a sum of values); conditions, ``FILTER`` and groupings
read the column's bins as before (rewriter.binned).

**Privacy** (docs/privacy.md §2): the bounds are public (declared), and so is the split's
form. Adding or removing a row moves the pin by masses ``l, 1 - l`` (products, for several
clamped columns) on the ends of one cell of the declared attributes: a convex combination of
unit vectors, so any linear query moves by a convex combination of its columns, at most its
largest column norm -- the sensitivity the engine recomputes from the batch; a privacy unit's
masses in a cell sum to its kept rows there, so the bounds of ``dp.units`` hold as for
counts. A sum's largest weight is ``max(|lower|, |upper|)``: the sensitivity clamping gives.

**Bias** (docs/sql.md §2.2): a value outside ``[lower, upper]`` counts at the bound, so sums
and averages lean towards the range when values fall outside it, and conditions see the
clamped value (``x < upper`` is false for it, ``x >= lower`` true); with bounds that hold
every value the answer is PostgreSQL's, noise off.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dp.domain import Domain
from dp.pin import Pin, UnitRows

from .binned import DBL_MIN
from .errors import UnsupportedError
from .plan import Arith, AttrRef, Case, Cast, Func, PostExpr, nodes, transform
from .schema import INTEGER_TYPES, VALUE_SUFFIX, AttributeDecl, Kind, TableDecl


def value_name(name: str) -> str:
    """The value axis of clamped column ``name``."""
    return name + VALUE_SUFFIX


def source_of(name: str) -> str | None:
    """The clamped column a value axis carries (None for any other attribute)."""
    return name[: -len(VALUE_SUFFIX)] if name.endswith(VALUE_SUFFIX) else None


def clamped_since(held: Sequence[str], asked: Sequence[str]) -> list[str]:
    """The clamped columns whose values ``asked`` (a statement's marginal) reads and ``held``
    (an epoch's domain) lacks: an epoch pinned before their ``clamp = true``."""
    return [c for n in asked if n not in held and (c := source_of(n)) is not None]


# --- the argument of SUM / AVG ---------------------------------------------------------------


def _reads(e: object, name: str) -> bool:
    return any(isinstance(n, AttrRef) and n.name == name for n in nodes(e))


#: Casts that neither round nor wrap (a double to numeric keeps its 15 significant digits).
_WIDENING = {
    **{(t, u): True for t in INTEGER_TYPES for u in ("int8", "numeric", "float8")},
    ("int2", "int4"): True,
    ("numeric", "numeric"): True,
    ("numeric", "float8"): True,
    ("float8", "float8"): True,
    ("float8", "numeric"): True,
}


def _affine(e: PostExpr, v: str) -> bool:
    """Whether ``e``'s value is affine in value axis ``v`` on each cell of what it reads
    (see the module doc)."""
    if not _reads(e, v):
        return True
    if isinstance(e, AttrRef):
        return True
    if isinstance(e, Arith):
        left, right = _reads(e.left, v), _reads(e.right, v)
        if e.op in ("+", "-"):
            return _affine(e.left, v) and _affine(e.right, v)
        if e.op == "*":
            return not (left and right) and _affine(e.left, v) and _affine(e.right, v)
        if e.op == "/":
            return not right and e.pg_type not in INTEGER_TYPES and _affine(e.left, v)
        return False
    if isinstance(e, Func) and e.name in ("neg", "coalesce"):
        return all(_affine(a, v) for a in e.args)
    if isinstance(e, Cast):
        return not e.typmod and (e.source, e.pg_type) in _WIDENING and _affine(e.arg, v)
    if isinstance(e, Case):
        return not any(_reads(c, v) for c, _ in e.whens) and all(
            _affine(x, v) for x in (*(w for _, w in e.whens), e.default) if x is not None
        )
    return False


def _with_values(e: PostExpr, clamped: set[str]) -> PostExpr:
    """``e`` with each clamped column's value axis where its value is read, its bins kept
    where a ``CASE`` condition reads it."""

    def swap(x: object) -> object | None:
        if isinstance(x, AttrRef) and x.name in clamped:
            return dataclasses.replace(x, name=value_name(x.name))
        if isinstance(x, Case):
            return dataclasses.replace(
                x,
                whens=tuple((c, transform(w, swap)) for c, w in x.whens),
                default=None if x.default is None else transform(x.default, swap),
            )
        return None

    return transform(e, swap)


def values_read(e: object) -> set[str]:
    """The attributes ``e`` reads as values: outside the conditions of its ``CASE``s (a
    condition reads a column's bins, rewriter.binned; a value needs its values)."""
    out: set[str] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, AttrRef):
            out.add(x.name)
        elif isinstance(x, Case):
            stack.extend(w for _, w in x.whens)
            if x.default is not None:
                stack.append(x.default)
        elif isinstance(x, tuple):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x))
    return out


def summand(table: TableDecl, e: PostExpr, func: str) -> PostExpr | None:
    """The argument ``e`` of ``func`` (sum, avg, a variance) over the values of the clamped
    columns it reads (each one's value axis where its value is read), or None when it reads
    none. An argument not affine in a clamped column's value, or a variance of one, is
    refused (0A000)."""
    clamped = {
        n.name
        for n in nodes(e)
        if isinstance(n, AttrRef) and value_name(n.name) in table.value_axes
    }
    if not clamped:
        return None
    out = _with_values(e, clamped)
    read = sorted(c for c in clamped if _reads(out, value_name(c)))
    if not read:
        return None  # read in CASE conditions only: its bins, as any condition
    first = read[0]
    if func not in ("sum", "avg"):
        raise UnsupportedError(
            f"{func.upper()} of column {first}, declared with clamping bounds, over protected "
            f"table {table.name}",
            hint="SUM and AVG of a clamped column are answered (a sum of squares is not a sum "
            "of its values)",
        )
    for name in read:
        if not _affine(out, value_name(name)):
            raise UnsupportedError(
                f"{func.upper()} of an expression that is not affine in column {name} "
                f"(declared with clamping bounds) over protected table {table.name}",
                hint=f"{func.upper()} is answered of {name} itself, of sums, differences, "
                "multiples and quotients by other values of it, and of CASE over conditions "
                f"with such branches; {name}'s bins hold many values, so floor, round, "
                "integer division and products of it with itself cut them",
            )
    return out


def _number(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else str(float(v))


def note(table: TableDecl, attributes: Sequence[str]) -> str:
    """What clamping does to an answer that reads clamped columns' values (``attributes``:
    its marginal's; public: the declaration), for its NOTICE; "" when it reads none."""
    read = [table.attributes[c] for n in attributes if (c := source_of(n)) is not None]
    if not read:
        return ""
    ranges = " and ".join(
        f"{a.name}'s values to [{_number(a.bounds[0])}, {_number(a.bounds[1])}]" for a in read
    )
    return (
        f"sums and averages read {ranges} (clamp = true): a value outside counts as the bound, "
        "so they lean towards the range when values fall outside it"
    )


# --- the pin statement -----------------------------------------------------------------------


def _lit(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    return f"({v.numerator}::numeric / {v.denominator})"


def _float(v: Fraction) -> str:
    if v.denominator == 1:
        return f"{v.numerator}::float8"
    return f"({v.numerator}::float8 / {v.denominator})"


def _clamped(a: AttributeDecl, c: str) -> str:
    """SQL of the clamped value of column ``c`` (of its own type)."""
    lo, hi = a.bounds
    return f"least(greatest({c}, {_lit(lo)}), {_lit(hi)})"


def _tests(a: AttributeDecl, v: str) -> list[str]:
    """Per bin but the last, the SQL test that the clamped value ``v`` is in it (integer bins
    are closed, numeric ones half-open; the last bin takes the rest, its upper end too)."""
    op = "<=" if a.kind is Kind.INTEGER else "<"
    return [f"{v} {op} {_lit(hi)}" for _, hi in a.bins[:-1]]


def _outside(a: AttributeDecl, c: str) -> str:
    """The cases of a row with no cell: NULL's cell (or none), a subnormal double (a double
    column's cells hold normal doubles and zero, clamped or not: rewriter.binned)."""
    null = f"WHEN {c} IS NULL THEN {a.null_cell if a.null_cell is not None else 'NULL'} "
    if a.pg_type == "float8":
        null += f"WHEN {c} <> 0 AND abs({c}) < {DBL_MIN!r} THEN NULL "
    return null


def cell_sql(a: AttributeDecl, c: str) -> str:
    """The cell of a clamped column's row: its clamped value's bin (NULL's cell for NULL;
    none for a subnormal double)."""
    v = _clamped(a, c)
    whens = " ".join(f"WHEN {t} THEN {i}" for i, t in enumerate(_tests(a, v)))
    return f"CASE {_outside(a, c)}{whens} ELSE {len(a.bins) - 1} END"


def share_sql(a: AttributeDecl, c: str) -> str:
    """The share ``l = (b - v) / (b - a)`` of a row at its bin's low end (``v`` clamped; 1 for
    a bin of one value, and for NULL)."""
    v = _clamped(a, c)
    vf = f"({v})::float8"

    def share(lo: Fraction, hi: Fraction) -> str:
        return "1.0::float8" if hi == lo else f"({_float(hi)} - {vf}) / {_float(hi - lo)}"

    whens = " ".join(
        f"WHEN {t} THEN {share(lo, hi)}"
        for t, (lo, hi) in zip(_tests(a, v), a.bins[:-1], strict=True)
    )
    return f"CASE WHEN {c} IS NULL THEN 1.0::float8 {whens} ELSE {share(*a.bins[-1])} END"


def factors(attrs: Sequence[AttributeDecl], column: Callable[[str], str]) -> list[str]:
    """SQL over a row's raw values (``column(name)``: the SQL of a column) of the products of
    the shares of the clamped columns ``attrs`` (in the domain's order of their value axes),
    one per non-empty subset ``S`` of them, in the order of the bit mask ``sum(2^i for i in
    S)``: ``sum(n * <product>)`` per combination of cells is what the pin reads besides the
    count."""
    shares = [share_sql(a, column(a.name)) for a in attrs]
    return [
        " * ".join(f"({shares[i]})" for i in range(len(shares)) if mask >> i & 1)
        for mask in range(1, 1 << len(shares))
    ]


# --- reading the pin -------------------------------------------------------------------------


def value_count(domain: Domain) -> int:
    """How many value axes ``domain`` has (the pin statement's sums: ``2^k - 1`` of them)."""
    return sum(1 for n in domain.names if source_of(n) is not None)


def _split(
    domain: Domain,
    cells: Sequence[npt.NDArray[Any]],
    counts: npt.NDArray[Any],
    sums: Sequence[npt.NDArray[Any]],
) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Each row's mass split over the combinations of its clamped columns' ends, by
    inclusion-exclusion (``l1 (1 - l2) = l1 - l1 l2``): per attribute of ``domain`` (declared,
    then value axes) the cells of the entries, their masses, and the row each comes from.
    Rows with a declared cell -1 (none) are left out."""
    names = domain.names
    declared = [i for i, n in enumerate(names) if source_of(n) is None]
    values = [i for i, n in enumerate(names) if source_of(n) is not None]
    k = len(values)
    n = np.asarray(counts, dtype=np.float64)
    keep = np.ones(n.shape[0], dtype=bool)
    for c in cells:
        keep &= np.asarray(c) >= 0
    rows = np.flatnonzero(keep)
    cols = [np.asarray(c, dtype=np.int64)[keep] for c in cells]
    by_mask = {0: n[keep]}
    for i, s in enumerate(sums):
        by_mask[i + 1] = np.asarray(s, dtype=np.float64)[keep]
    position = {names[d]: pos for pos, d in enumerate(declared)}
    source = [position[str(source_of(names[v]))] for v in values]
    out_cols: list[list[npt.NDArray[np.int64]]] = [[] for _ in names]
    out_mass: list[npt.NDArray[np.float64]] = []
    for high in itertools.product((0, 1), repeat=k):
        low = sum(1 << i for i in range(k) if not high[i])
        up = [i for i in range(k) if high[i]]
        mass = np.zeros_like(by_mask[0])
        for r in range(len(up) + 1):
            for sub in itertools.combinations(up, r):
                mass = mass + (-1) ** r * by_mask[low | sum(1 << i for i in sub)]
        for pos, d in enumerate(declared):
            out_cols[d].append(cols[pos])
        for i, v in enumerate(values):
            cell = cols[source[i]]
            value = 2 * cell + high[i]
            if domain.shape[v] % 2 == 1:  # nullable: NULL is the last cell of both
                null = domain.shape[declared[source[i]]] - 1
                value = np.where(cell == null, domain.shape[v] - 1, value)
                mass = np.where((cell == null) & (high[i] == 1), 0.0, mass)
            out_cols[v].append(value)
        out_mass.append(mass)
    masses = np.maximum(np.concatenate(out_mass), 0.0)
    kept = masses > 1e-9
    origin = np.tile(rows, 1 << k)[kept]
    return [np.concatenate(c)[kept] for c in out_cols], masses[kept], origin


def expand(
    domain: Domain,
    cells: Sequence[npt.NDArray[Any]],
    counts: npt.NDArray[Any],
    sums: Sequence[npt.NDArray[Any]],
) -> Pin:
    """The pin over ``domain`` (declared attributes, then the value axes of the clamped
    ones) from the pin statement's rows: each combination of declared cells (``cells``; -1:
    none, left out), its count and the sums of the products of shares (:func:`factors`)."""
    cols, mass, _ = _split(domain, cells, counts, sums)
    return Pin(domain, tuple(c.astype(np.int32) for c in cols), mass)


def units_pin(
    domain: Domain,
    unit: npt.NDArray[np.int64],
    cells: Sequence[npt.NDArray[np.int64]],
    total: npt.NDArray[np.float64],
    kept: npt.NDArray[np.float64],
    sums: Sequence[npt.NDArray[np.float64]],
) -> Pin:
    """The pin of a table with a privacy unit and clamped columns, and each unit's rows
    (``dp.pin.UnitRows``), from the rows ``(unit, cells, total, kept, sums)``: a unit's rows
    in a cell split over the ends as their shares say (``sums`` are over all ``total`` rows),
    its kept rows in the same proportions (each stands for the cell's average row)."""
    cols, mass, origin = _split(domain, cells, total, sums)
    share = np.where(total[origin] > 0, kept[origin] / np.maximum(total[origin], 1.0), 0.0)
    pinned = mass * share
    on = pinned > 1e-9
    if cols:
        stacked = np.stack([c[on] for c in cols], axis=1)
        uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
        weights = np.bincount(inverse.reshape(-1), weights=pinned[on], minlength=uniq.shape[0])
        pin_cols = tuple(uniq[:, j].astype(np.int32) for j in range(uniq.shape[1]))
    else:
        weights = np.asarray([pinned.sum()])
        pin_cols = ()
    units = int(unit.max()) + 1 if unit.size else 0
    each = UnitRows(
        units, unit[origin].astype(np.int32), tuple(c.astype(np.int32) for c in cols), mass
    )
    return Pin(domain, pin_cols, np.asarray(weights, dtype=np.float64), each)


__all__ = [
    "cell_sql",
    "clamped_since",
    "expand",
    "factors",
    "note",
    "share_sql",
    "source_of",
    "summand",
    "units_pin",
    "value_count",
    "value_name",
    "values_read",
]
