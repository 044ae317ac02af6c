"""A seeded generator of random accepted DP queries over a declaration (for exactness tests).

Used by tests/rewriter/test_exactness.py. :meth:`QueryGenerator.query` writes one statement
over a set of attributes: counts, sums and averages (also with ``FILTER``), minima and maxima,
``WHERE`` filters and ``GROUP BY`` over them, with the spellings BI tools use. With ``cover``
(the default) the statement uses every attribute of the set, so that the rewriter must reduce
it over exactly that marginal; :attr:`Generated.attributes` names the attributes it uses.
Every query it produces must be accepted by the rewriter and answered exactly (on the exact
histogram of that marginal) as PostgreSQL answers it.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from rewriter.schema import AttributeDecl, Kind, TableDecl, ViewDecl


@dataclass(frozen=True)
class Generated:
    sql: str
    grouped: bool  # an extra trailing count(*) column lets the test drop empty public groups
    attributes: frozenset[str] = frozenset()  # the attributes the statement uses


def _lit(attr: AttributeDecl, v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, Fraction):
        return (
            str(v.numerator)
            if v.denominator == 1
            else str(Decimal(v.numerator) / Decimal(v.denominator))
        )
    if attr.kind is Kind.CATEGORICAL:
        return "'" + str(v).replace("'", "''") + "'"
    if attr.kind is Kind.BOOLEAN:
        return "TRUE" if v else "FALSE"
    if attr.kind is Kind.DATE:
        assert isinstance(v, dt.date)
        return f"DATE '{v.isoformat()}'" if hash(v) % 2 else f"'{v.isoformat()}'"
    return str(v)


class QueryGenerator:
    def __init__(self, table: TableDecl, seed: int, *, bi_style: bool = True) -> None:
        self.t = table
        self.r = random.Random(seed)
        self.bi = bi_style
        self.used: set[str] = set()

    # -- names with BI-style variations --
    def col(self, name: str, alias: str | None) -> str:
        r = self.r
        self.used.add(name)
        choice = r.random() if self.bi else 0.0
        if choice < 0.5:
            base = f"{alias}.{name}" if alias else name
        elif choice < 0.7:
            base = (
                f'"{self.t.schema}"."{self.t.name}"."{name}"'
                if not alias
                else f'"{alias}"."{name}"'
            )
        elif choice < 0.85:
            base = name.upper() if not alias else f"{alias}.{name.upper()}"
        else:
            base = f'"{name}"'
        return base

    def value(self, attr: AttributeDecl, edge: str = "any") -> object:
        r = self.r
        if attr.kind is Kind.CATEGORICAL:
            if r.random() < 0.05:
                return "no-such-value"
            return r.choice(attr.values)
        if attr.kind is Kind.BOOLEAN:
            return r.random() < 0.5
        i = r.randrange(len(attr.bins))
        lo, hi = attr.bins[i]
        if attr.kind is Kind.DATE:
            o = int(lo if edge in ("lo", "any") else hi)
            return dt.date.fromordinal(o)
        if attr.kind is Kind.NUMERIC:
            return lo if edge != "hi" else hi
        if edge == "hi":
            return int(hi)
        if edge == "out" or (edge == "any" and r.random() < 0.03):
            return int(attr.bins[-1][1]) + r.randint(1, 5)
        return int(lo)

    def atom(self, attr: AttributeDecl, alias: str | None) -> str:
        r = self.r
        c = self.col(attr.name, alias)
        if r.random() < 0.15 and attr.kind is Kind.INTEGER:
            c = f"{c}::int" if r.random() < 0.5 else f"CAST({c} AS integer)"
        unit = attr.unit_bins
        if attr.nullable and r.random() < 0.15:
            return f"{c} IS {'NOT ' if r.random() < 0.5 else ''}NULL"
        if attr.kind in (Kind.CATEGORICAL, Kind.BOOLEAN):
            if attr.kind is Kind.BOOLEAN and r.random() < 0.3:
                return c if r.random() < 0.5 else f"NOT {c}"
            op = r.choice(["=", "<>", "!=", "IN", "NOT IN"])
            if "IN" in op:
                vals = {self.value(attr) for _ in range(r.randint(1, 4))}
                if attr.nullable and r.random() < 0.1:
                    return f"{c} {op} ({', '.join(_lit(attr, v) for v in vals)}, NULL)"
                return f"{c} {op} ({', '.join(_lit(attr, v) for v in vals)})"
            return f"{c} {op} {_lit(attr, self.value(attr))}"
        ops = ["<", "<=", ">", ">=", "BETWEEN", "BETWEEN SYMMETRIC"]
        if unit:
            ops += ["=", "<>", "IN", "NOT IN"]
        op = r.choice(ops)
        if op in ("<", ">="):
            return f"{c} {op} {_lit(attr, self.value(attr, 'lo'))}"
        if op in ("<=", ">"):
            v = self.value(attr, "hi")
            if attr.kind is Kind.NUMERIC:  # half-open bins: compare at lower edges only
                return f"{c} {'<' if op == '<=' else '>='} {_lit(attr, v)}"
            return f"{c} {op} {_lit(attr, v)}"
        if op.startswith("BETWEEN"):
            if attr.kind is Kind.NUMERIC:
                return f"{c} >= {_lit(attr, self.value(attr, 'lo'))}"
            i, j = sorted(r.randrange(len(attr.bins)) for _ in range(2))
            a, b = attr.bins[i][0], attr.bins[j][1]
            if attr.kind is Kind.DATE:
                a, b = dt.date.fromordinal(int(a)), dt.date.fromordinal(int(b))
            else:
                a, b = int(a), int(b)
            if op == "BETWEEN" and r.random() < 0.1 and attr.unit_bins:
                a, b = b, a  # an empty range
            if op == "BETWEEN SYMMETRIC" and r.random() < 0.5:
                a, b = b, a
            return f"{c} {op} {_lit(attr, a)} AND {_lit(attr, b)}"
        if op in ("IN", "NOT IN"):
            vals = {self.value(attr) for _ in range(r.randint(1, 5))}
            return f"{c} {op} ({', '.join(_lit(attr, v) for v in vals)})"
        return f"{c} {op} {_lit(attr, self.value(attr))}"

    def pred(self, attrs: list[AttributeDecl], alias: str | None, depth: int = 0) -> str:
        r = self.r
        if depth >= 2 or r.random() < 0.5:
            return self.atom(r.choice(attrs), alias)
        if r.random() < 0.15:
            return f"NOT ({self.pred(attrs, alias, depth + 1)})"
        conn = r.choice([" AND ", " OR "])
        return (
            "("
            + conn.join(self.pred(attrs, alias, depth + 1) for _ in range(r.randint(2, 3)))
            + ")"
        )

    def aggregate(self, attrs: list[AttributeDecl], alias: str | None) -> str:
        r = self.r
        ints = [a for a in attrs if a.kind is Kind.INTEGER and a.unit_bins]
        kind = r.random()
        if kind < 0.3 or not ints:
            if r.random() < 0.1:
                return f"count(*) FILTER (WHERE {self.atom(r.choice(attrs), alias)})"
            if r.random() < 0.2:
                a = r.choice(attrs)
                return f"count({self.col(a.name, alias)})"
            return r.choice(["count(*)", "COUNT(*)", "count(1)"])
        if 0.55 <= kind < 0.6:
            return "sum(1)"
        c = self.col(r.choice(ints).name, alias)
        if kind < 0.55:
            if r.random() < 0.15:
                return f"sum({c}) FILTER (WHERE {self.atom(r.choice(attrs), alias)})"
            return f"sum({c})"
        if kind < 0.9:
            return f"avg({c})"
        return f"{r.choice(['min', 'max'])}({c})"

    def query(
        self, attributes: ViewDecl | Sequence[AttributeDecl], *, cover: bool = True
    ) -> Generated:
        """One statement over ``attributes`` (at least one); with ``cover``, it uses all of them
        (an attribute the random parts left out is added to the ``WHERE`` clause)."""
        r = self.r
        attrs = list(attributes.attributes if isinstance(attributes, ViewDecl) else attributes)
        self.used = set()
        alias = r.choice([None, None, "a", "t1"]) if self.bi else None
        unit = [a for a in attrs if a.unit_bins]
        ngroup = r.choice([0, 0, 1, 1, 2]) if unit else 0
        group = r.sample(unit, min(ngroup, len(unit)))
        aggs = [self.aggregate(attrs, alias) for _ in range(r.randint(1, 3))]
        items = []
        for i, g in enumerate(group):
            items.append(self.col(g.name, alias) + (f" AS g{i}" if r.random() < 0.3 else ""))
        for i, a in enumerate(aggs):
            items.append(
                a
                + (
                    r.choice([" AS count", f" AS m{i}", ' AS "Value"', ""])
                    if r.random() < 0.5
                    else ""
                )
            )
        if group:
            items.append("count(*) AS zz_nonempty")
        src = f"{self.t.name}" if r.random() < 0.5 else f'"{self.t.schema}"."{self.t.name}"'
        if alias:
            src += f" {'AS ' if r.random() < 0.5 else ''}{alias}"
        sql = f"SELECT {', '.join(items)} FROM {src}"
        where = self.pred(attrs, alias) if r.random() < 0.85 else None
        if cover:
            for a in attrs:
                if a.name not in self.used:
                    atom = self.atom(a, alias)
                    where = atom if where is None else f"({where}) {r.choice(['AND', 'OR'])} {atom}"
        if where is not None:
            sql += " WHERE " + where
        if group:
            if r.random() < 0.4:
                sql += " GROUP BY " + ", ".join(str(i + 1) for i in range(len(group)))
            else:
                sql += " GROUP BY " + ", ".join(self.col(g.name, alias) for g in group)
            if r.random() < 0.2:
                sql += f" HAVING count(*) > {r.randint(0, 50)}"
            if r.random() < 0.3:
                sql += " ORDER BY 1" + r.choice(["", " DESC", " ASC NULLS FIRST"])
        return Generated(sql=sql, grouped=bool(group), attributes=frozenset(self.used))
