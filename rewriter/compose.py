"""A statement as a small plan of DP releases and post-processing (composed questions).

Analysts and tools combine aggregates: a CTE of counts read by an outer query, two grouped
aggregates joined on their key (men vs women per education), an aggregate over grouped
aggregates (``avg(n)`` over per-occupation counts, dbt's ``count(*)`` of failing groups), a
scalar aggregate used as a threshold (``WHERE age > (SELECT avg(age) FROM adult)``), the
table joined to its own grouped, limited subquery (Tableau's top N, Superset's series limit),
``INTERSECT``/``EXCEPT`` of grouped aggregates. None of them is one linear query; each is a
small plan:

- **releases**: every part that reads a protected table is an accepted DP statement on its
  own (:func:`rewriter.classify.single_statement`: one :class:`rewriter.plan.Plan`), answered
  through the engine exactly as if it had been sent alone -- decided, charged before its
  release, stored, a repeat answered from the stored answer -- in the order the statement
  needs them;
- **public values**: a part whose answer the next part depends on (a scalar threshold, the
  groups a top-N subquery picked) is *released first*; its released value is then a constant
  of the next part (``age > 38.58...``, ``race IN ('White', 'Black', ...)``), so the next
  part is again an ordinary DP statement over public constants;
- **post-processing**: whatever combines released relations -- joins, filters, aggregates,
  window functions, set operations, ``ORDER BY``/``LIMIT`` -- is evaluated here, over the
  noisy rows only, with PostgreSQL's semantics (:mod:`rewriter.pgeval`; the golden cases
  diff each shape against PostgreSQL).

Guarantee (docs/privacy.md, "Composed statements"): each release is a mechanism of
docs/privacy.md §2 (an online release of its own batch, with its own recomputed sensitivity,
or an answer from stored releases), admitted by the epoch's filter before its noise is drawn;
the neighbouring relation and the accountant are the epoch's. A later release's *question*
may depend on earlier released values, which is adaptive composition, covered by the
filter (Rogers et al. 2016; Smith & Thakurta 2022 for GDP). Everything else is a function of
released values and of the statement: post-processing, no privacy cost. Nothing here reads
the data; refusals depend on the statement, the declaration and released values only.

The classifier calls :func:`compose` for a statement that names a protected table and is not
one DP statement: it plans the statement once with stand-in answers (every measure 1) to
refuse what cannot be answered before anything is charged and to learn the result columns.
At execution, :func:`steps` plans it again, yielding each release's plan and receiving its
answers (the proxy answers each through its one-statement path), and returns the rows.

>>> from rewriter import classify, load_schema  # doctest: +SKIP
>>> [st] = classify("SELECT avg(n) FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t",
...                 load_schema("sql_fixtures/adult/lapras.toml"))  # doctest: +SKIP
>>> run(st, schema, exact).rows  # doctest: +SKIP
((Decimal('6512.2000000000000000'),),)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt
import sqlglot
from sqlglot import exp

from dp.errors import InternalError, LaprasError

from . import pgeval, pgtime, sugar
from .answers import postprocess
from .dialect import POSTGRES
from .errors import (
    BindError,
    DomainTooLargeError,
    UndefinedColumnError,
    UndefinedTableError,
    UnsupportedError,
)
from .names import ident, output_name, unalias
from .normalise import (
    GroupingError,
    _Builder,
    row_count,
    sql_words,
    typeof,
    window_function,
)
from .plan import (
    KeyRef,
    MeasureKind,
    OrderItem,
    OutputColumn,
    Plan,
    PostExpr,
    Window,
    evaluate_with,
    window_values,
    windows_of,
)
from .plan import _sort as sort_rows
from .schema import ARRAY_OIDS, TYPE_OIDS, Schema, TableDecl

if TYPE_CHECKING:
    from .wrappers import Wrapper

__all__ = ["Composed", "Released", "Result", "compose", "run", "steps"]

_TYPES = {oid: name for name, oid in TYPE_OIDS.items()}
#: The most releases one statement may be made of (its classification plans each one).
MAX_RELEASES = 64


class CardinalityError(LaprasError):
    """21000: a scalar subquery gave more than one row."""

    sqlstate = "21000"


class AmbiguousColumnError(LaprasError):
    """42702: an unqualified column name that two relations of the FROM clause have."""

    sqlstate = "42702"


# --- what crosses the boundary -----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Composed:
    """A statement answered as a plan of DP releases and post-processing.

    ``sql``: the text as sent (a wrapper's, when it came in ``COPY (...) TO STDOUT`` or a
    cursor); ``query``: the statement itself, planned again at execution; ``columns``: the
    result columns (as PostgreSQL types them); ``releases``: how many releases its plan had
    with stand-in answers (the number at execution may differ only when a released value
    changes the plan's shape); ``plans``: the releases' plans that do not depend on earlier
    released values, by their text, reused at execution."""

    sql: str
    query: str
    columns: tuple[OutputColumn, ...]
    releases: int = 0
    plans: tuple[tuple[str, Plan], ...] = field(default=(), repr=False)
    time_zone: str = "UTC"  # the session's TimeZone when it was classified (public)
    param_types: tuple[int, ...] = ()
    wrapper: Wrapper | None = None

    @property
    def needs_params(self) -> bool:
        return bool(self.param_types)


@dataclass(frozen=True, slots=True, kw_only=True)
class Released:
    """The answers to one release's batch (noisy, or exact in tests) and their standard
    errors (None: exact)."""

    answers: npt.NDArray[np.float64]
    std_errors: npt.NDArray[np.float64] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """The statement's rows, its columns, and the releases it was made of (in order, each
    once)."""

    columns: tuple[OutputColumn, ...]
    rows: tuple[tuple[object, ...], ...]
    plans: tuple[Plan, ...]


Steps: TypeAlias = Generator[Plan, Released, Result]
#: How a part is read as one statement (rewriter.classify.single_part): None when it is not
#: one statement over a protected table; else its plan (None: a zero-row probe) and columns.
#: Raises the part's refusal. Passed in, so that the classifier may call this module.
Single: TypeAlias = Callable[
    [str, exp.Expression, Schema], "tuple[Plan | None, tuple[OutputColumn, ...]] | None"
]


# --- relations -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Relation:
    """Rows of Python values (as :mod:`rewriter.pgeval` holds them) with column names and
    PostgreSQL types: a release's rows, or rows computed from them."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]


@dataclass(frozen=True, slots=True)
class _Col:
    """A column of a FROM clause: the relation it belongs to (None: a column merged by
    USING), its name and type; ``bare``: reachable by its name alone (USING hides the two
    columns it merges); ``star``: expanded by ``*``."""

    rel: str | None
    name: str
    pg_type: str
    bare: bool = True
    star: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class RowAgg:
    """An aggregate of the post-processing (over released rows): ``func(DISTINCT arg)
    FILTER (WHERE filter)``; ``fraction`` for percentiles, ``desc`` for mode's order."""

    func: str
    arg: PostExpr | None
    pg_type: str
    distinct: bool = False
    filter: PostExpr | None = None
    fraction: float | None = None
    desc: bool = False


_AGGS: dict[type[exp.Expression], str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp", exp.VariancePop: "var_pop", exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
}  # fmt: skip
_POST_AGGS = (
    "count, sum, avg, min, max, stddev, variance, bool_and, bool_or, percentile_cont, "
    "percentile_disc, mode"
)


# --- the entry points ------------------------------------------------------------------------


def compose(sql: str, tree: exp.Expr, schema: Schema, single: Single) -> Composed:
    """The plan of a statement that names a protected table and is not one DP statement,
    checked with stand-in answers (no data, no budget): raises the refusal of the first part
    that cannot be answered, naming it."""
    zone = pgtime.SESSION_ZONE.get()
    count = _parameters(tree)
    if count:
        # planned when executed, with the values bound (checked then with stand-in answers
        # before anything is released); Describe comes from the backend, as for any DP
        # statement with parameters
        return Composed(sql=sql, query=sql, columns=(), time_zone=zone, param_types=(0,) * count)
    run_ = _Run(schema, {}, single, dry=True)
    result = _drive(run_.statement(tree.copy()), _stand_in)
    return Composed(
        sql=sql,
        query=sql,
        time_zone=zone,
        columns=result.columns,
        releases=len(result.plans),
        plans=tuple((text, plan) for text, plan in run_.planned.items() if text in run_.static),
    )


def steps(
    statement: Composed,
    schema: Schema,
    single: Single,
    params: Sequence[object] = (),
    param_oids: Sequence[int] = (),
) -> Steps:
    """The releases of ``statement`` in order (each yielded once; send its answers back),
    then its result: the generator's return value (``StopIteration.value``). ``params``:
    the values of ``$1 ...`` (of the types ``param_oids`` the backend inferred); the plan is
    then checked with stand-in answers first, so that a part that cannot be answered is
    refused before any release."""
    try:
        tree = sqlglot.parse_one(statement.query, read=POSTGRES)
    except Exception:  # it parsed when it was classified: a bug
        raise InternalError("a composed statement no longer parses") from None
    if statement.needs_params:
        if len(params) != len(statement.param_types):
            raise BindError(
                f"bind message supplies {len(params)} parameters, but prepared statement "
                f"requires {len(statement.param_types)}"
            )
        tree = _bound(tree, params, param_oids)
        sugar.expand(tree)  # ANY over a bound array: written out
        with pgtime.session_zone(statement.time_zone):
            _drive(
                _Run(schema, {}, single, dry=True).statement(tree.copy()),
                _stand_in,
            )
    run_ = _Run(schema, dict(statement.plans), single)
    gen = run_.statement(tree)
    answers: Released | None = None
    while True:
        # each step runs in the session's TimeZone, in whatever thread resumes it
        with pgtime.session_zone(statement.time_zone):
            try:
                plan = next(gen) if answers is None else gen.send(answers)
            except StopIteration as stop:
                result: Result = stop.value
                break
        answers = yield plan
    if statement.columns and tuple((c.name, c.type_oid) for c in result.columns) != tuple(
        (c.name, c.type_oid) for c in statement.columns
    ):
        raise InternalError("the columns of a composed statement changed at execution")
    return result


def run(
    statement: Composed, schema: Schema, answer: Callable[[Plan], Released], single: Single
) -> Result:
    """Drive :func:`steps` with ``answer`` (synchronous: tests, benchmarks)."""
    return _drive(steps(statement, schema, single), answer)


def _parameters(tree: exp.Expr) -> int:
    """The number of ``$n`` parameters a statement has (the largest n)."""
    top = 0
    for n in tree.walk():
        if isinstance(n, exp.Placeholder | exp.Parameter):
            raw = n.this.this if isinstance(n.this, exp.Literal) else n.name
            try:
                top = max(top, int(str(raw)))
            except ValueError:
                raise UnsupportedError(
                    "a named parameter in a statement over a protected table",
                    hint="use $1, $2, ...",
                ) from None
    return top


def _bound(tree: exp.Expr, params: Sequence[object], oids: Sequence[int]) -> exp.Expression:
    """``tree`` with each ``$n`` replaced by its value as a constant of its type (the type
    the backend inferred for it; text when it left it unknown)."""

    def repl(n: exp.Expression) -> exp.Expression:
        if not isinstance(n, exp.Placeholder | exp.Parameter):
            return n
        raw = n.this.this if isinstance(n.this, exp.Literal) else n.name
        k = int(str(raw)) - 1
        oid = oids[k] if k < len(oids) else 0
        v = params[k]
        if isinstance(v, bytes):
            v = v.decode("utf-8", errors="replace")
        element = ARRAY_OIDS.get(oid)
        if element is not None and isinstance(v, list):  # x = ANY($1): rewriter.sugar reads it
            if not v:
                to = exp.DataType.build(pgeval.sql_type(element) + "[]", dialect=POSTGRES)
                return exp.Cast(this=exp.Literal.string("{}"), to=to)
            return exp.Array(expressions=[_literal(e, element) for e in v])
        t = _TYPES.get(oid)
        if t is None:
            return exp.Literal.string(str(v)) if v is not None else exp.Null()
        return exp.paren(_literal(v, t))

    return tree.copy().transform(repl)


def _drive(gen: Steps, answer: Callable[[Plan], Released]) -> Result:
    try:
        plan = next(gen)
        while True:
            plan = gen.send(answer(plan))
    except StopIteration as stop:
        result: Result = stop.value
        return result


def _groups_with_rows(node: exp.Select, table: TableDecl | None) -> exp.Select:
    """A grouped aggregate read by an outer query, as a release of the groups that hold rows:
    ``HAVING count(*) > 0`` added (on the noisy count: post-processing). A top-level grouped
    statement returns every public group (docs/sql.md §2.3), but an outer query over its rows
    (an average over groups, a join, a set operation) means PostgreSQL's groups, which omit the
    empty ones. Left as written: no GROUP BY, no aggregate (public values answered at no
    cost), or a table with a privacy unit (its questions about units have forms of their own).
    """
    if not node.args.get("group") or (table is not None and table.unit is not None):
        return node
    aggregates = [
        a
        for e in [*node.expressions, node.args.get("having")]
        if e is not None
        for a in e.find_all(exp.AggFunc)
        if a.find_ancestor(exp.Subquery, exp.Select) in (None, node)
    ]
    if not aggregates:
        return node
    rows = exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(0))
    return node.copy().having(rows, copy=False)


def _stand_in(plan: Plan) -> Released:
    """Stand-in answers for the classification's dry run (no data): every count 1, every
    histogram count 1, every sum the middle of the range its expression takes in the group
    (so an average is the middle of its public range, and a threshold on it keeps the
    plan's later parts as they will be)."""
    width = plan.row_width
    out = np.ones(plan.batch.num_queries)
    for g in range(plan.num_groups):
        for j, lay in enumerate(plan.layouts):
            kind = plan.measures[j].kind if j < len(plan.measures) else MeasureKind.COUNT
            rng = plan.ranges[g][j] if plan.ranges and j < len(plan.ranges[g]) else None
            if kind is MeasureKind.SUM and rng is not None and lay.scale:
                out[g * width + lay.offset] = (rng[0] + rng[1]) / 2.0 / lay.scale
            elif kind is MeasureKind.SUMSQ and rng is not None and lay.scale:
                out[g * width + lay.offset] = ((rng[0] + rng[1]) / 2.0) ** 2 / lay.scale
            elif not lay.values:
                out[g * width + lay.offset] = 1.0 / lay.scale if lay.scale else 1.0
    return Released(answers=out)


# --- the evaluator ---------------------------------------------------------------------------

Gen: TypeAlias = Generator[Plan, Released, Any]


class _Run:
    """One planning of a composed statement: its releases (memoised by text: a CTE read
    twice is released once) and the evaluation of everything else."""

    def __init__(
        self,
        schema: Schema,
        known: dict[str, Plan],
        single: Single,
        *,
        dry: bool = False,
    ) -> None:
        self.schema = schema
        self.single = single
        self.dry = dry  # planned with stand-in answers (no data, nothing released)
        self.known = known
        self.memo: dict[str, Relation] = {}
        self.planned: dict[str, Plan] = {}  # every release's plan, by its text
        self.static: set[str] = set()  # texts that hold no released value
        self.plans: list[Plan] = []
        self.answered: dict[str, Released] = {}  # by batch key
        self.table: TableDecl | None = None
        self.depth = 0  # released values substituted so far (0: the text is static)
        self.top: exp.Expression | None = None  # the statement's own query

    # -- statements --

    def statement(self, given: exp.Expr) -> Gen:
        tree = cast(exp.Expression, given)
        refs = _protected_tables(tree, self.schema)
        if not refs:
            raise InternalError("a composed statement reads no protected table")
        self.table = refs[0]
        if not isinstance(tree, exp.Query):
            raise UnsupportedError(
                f"this statement over protected table {self.table.name} is not supported",
                hint="write a SELECT of aggregates",
            )
        tree = _inline_ctes(tree, {}, self.table)
        self.top = tree
        rel = yield from self.query(tree)
        columns = tuple(
            OutputColumn(name=n, type_oid=TYPE_OIDS.get(t, 0))
            for n, t in zip(rel.names, rel.types, strict=True)
        )
        for col, t in zip(columns, rel.types, strict=True):
            if col.type_oid == 0:
                raise UnsupportedError(
                    f"a result of type {pgeval.sql_type(t)} (column {col.name})",
                    hint="cast it to text, a number or a date",
                )
        return Result(columns=columns, rows=rel.rows, plans=tuple(self.plans))

    def query(self, node: exp.Expression) -> Gen:
        """The rows of a query (a SELECT, a set operation, VALUES, a parenthesised one)."""
        while isinstance(node, exp.Subquery) and not node.args.get("alias"):
            node = node.this
        if isinstance(node, exp.Subquery):
            node = node.this
        if isinstance(node, exp.Union) and _protected_tables(node, self.schema):
            # a UNION of DP aggregates is one statement: one batch, one release
            key = node.sql(dialect=POSTGRES)
            hit = self.memo.get(key)
            if hit is None:
                hit = yield from self.release(node, key)
            if hit is not None:
                self.memo[key] = hit
                return hit
        if isinstance(node, exp.SetOperation):
            return (yield from self.set_operation(node))
        if isinstance(node, exp.Values):
            return self.values(node)
        if isinstance(node, exp.Select):
            return (yield from self.select(node))
        raise self.unsupported(sql_words(node))

    def unsupported(self, what: str, hint: str | None = None) -> UnsupportedError:
        table = self.table.name if self.table is not None else "?"
        return UnsupportedError(
            f"{what} is not supported in a statement over protected table {table}",
            hint=hint
            or "a statement may combine DP aggregates (each a SELECT of aggregates over the "
            "table) with joins, subqueries, CTEs, set operations and aggregates over their "
            "results; see docs/sql.md §2.6",
        )

    # -- SELECT --

    def select(self, node: exp.Select) -> Gen:
        nested = node is not self.top
        node = yield from self.substitute(node)
        key = node.sql(dialect=POSTGRES)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        direct = any(self.is_protected(it) for it in _from_items(node))
        rel = None
        if _protected_tables(node, self.schema):
            part = _groups_with_rows(node, self.table) if nested else node
            try:
                rel = yield from self.release(
                    part, key if part is node else part.sql(dialect=POSTGRES)
                )
            except UnsupportedError as refused:
                if direct or refused.sqlstate != "0A000":
                    raise
                # a wrapper folded into one statement that is not answered as one: its
                # parts may still be (an aggregate over an aggregate's rows)
                try:
                    rel = yield from self.post_select(node)
                except UnsupportedError:
                    raise refused from None
        if rel is None:
            rel = yield from (self.over_protected(node) if direct else self.post_select(node))
        self.memo[key] = rel
        return rel

    def release(self, node: exp.Query, key: str) -> Gen:
        """The rows of ``node`` when it is one DP statement (released through the engine, or
        answered from public values, or a zero-row probe); None when it is not one."""
        plan = self.known.get(key)
        if plan is None:
            try:
                got = self.single(key, cast(exp.Expression, node), self.schema)
            except LaprasError as e:
                if e.detail is None and self.dry and self.depth:
                    # its constants are stand-ins for values not released yet: not shown
                    e.detail = "In a part of this statement that uses an earlier part's answer."
                elif e.detail is None:
                    e.detail = f"In the part of this statement: {_short(key)}"
                raise
            if got is None:
                public = sorted(
                    {
                        t.name.lower()
                        for t in node.find_all(exp.Table)
                        if t.name.lower() in self.schema.public
                    }
                )
                if public:
                    # its rows are bound when the statement runs, not when it is planned
                    raise self.unsupported(
                        f"a join with public table {public[0]} inside a part (a CTE, a "
                        "subquery, a UNION branch) of a composed statement",
                        hint="ask that join as a statement of its own (HAVING and windows over "
                        "its groups, such as sum(count(*)) OVER (), are answered in it), or "
                        "write the lookup as a VALUES list or a CTE of VALUES",
                    )
                return None
            plan, columns = got
            if plan is None:  # a zero-row probe: its columns, no row
                return Relation(
                    names=tuple(c.name for c in columns),
                    types=tuple(_TYPES.get(c.type_oid, "text") for c in columns),
                    rows=(),
                )
        self.planned[key] = plan
        if self.depth == 0:
            self.static.add(key)
        if plan.batch.num_queries == 0:
            rows = postprocess(plan, np.zeros(0))
        else:
            released = self.answered.get(plan.batch.key)
            if released is None:  # the same batch again (a CTE read twice): its answers
                if len(self.plans) >= MAX_RELEASES:
                    raise DomainTooLargeError(
                        f"a statement made of more than {MAX_RELEASES} DP releases",
                        hint="ask its aggregates in several statements",
                    )
                released = yield plan
                self.answered[plan.batch.key] = released
                self.plans.append(plan)
            rows = postprocess(plan, released.answers, released.std_errors)
        return Relation(
            names=tuple(c.name for c in plan.columns),
            types=tuple(_TYPES.get(c.type_oid, "text") for c in plan.columns),
            rows=tuple(tuple(r) for r in rows),
        )

    def over_protected(self, node: exp.Select) -> Gen:
        """A SELECT that reads the protected table itself and something else: the table
        joined to subqueries on their keys (a semi-join: Tableau's top N, Superset's series
        limit). Each subquery is released first; its rows, public from then on, become the
        condition ``key IN (released keys)`` of one DP statement."""
        items = _from_items(node)
        direct = [i for i, it in enumerate(items) if self.is_protected(it)]
        table = self.table.name if self.table is not None else "?"
        if len(direct) != 1:
            if len(direct) > 1:
                raise self.unsupported(
                    f"a join of protected table {table} with itself",
                    hint="join two aggregates of the table instead: (SELECT k, count(*) ... "
                    "GROUP BY k) a JOIN (SELECT k, count(*) ... GROUP BY k) b USING (k)",
                )
            raise self.unsupported(
                "a subquery over protected table " + table + " in this position",
                hint="write the aggregates as subqueries of the FROM clause, a CTE, or a "
                "scalar subquery",
            )
        rewritten = yield from self.semi_join(node, items, direct[0])
        rel = yield from self.release(rewritten, rewritten.sql(dialect=POSTGRES))
        if rel is None:
            raise self.unsupported(
                f"this join of protected table {table}",
                hint="join the table to a subquery on its keys with ON a.k = t.k or USING (k), "
                "and read only the table's columns",
            )
        return rel

    def is_protected(self, item: exp.Expression) -> bool:
        return isinstance(item, exp.Table) and _table_decl(item, self.schema) is not None

    # -- subqueries in expressions --

    def substitute(self, node: exp.Select) -> Gen:
        """``node`` with each uncorrelated subquery of its expressions replaced by its
        released (public) value: a scalar subquery by a typed constant, ``x IN (subquery)``
        by ``x IN (constants)``, ``EXISTS (subquery)`` by a boolean; and so in the SELECTs of
        its derived tables (so that a derived table that only filters, with a threshold, is
        still merged into the query that reads it)."""
        nested = [
            item
            for item in _from_items(node)
            if isinstance(item, exp.Subquery)
            and isinstance(item.this, exp.Select)
            and any(True for _ in _subqueries_deep(item.this))
        ]
        found = list(_subqueries(node))
        if not found and not nested:
            return node
        node = node.copy()
        for item in _from_items(node):
            if (
                isinstance(item, exp.Subquery)
                and isinstance(item.this, exp.Select)
                and any(True for _ in _subqueries_deep(item.this))
            ):
                body = yield from self.substitute(item.this)
                item.set("this", body)
        found = list(_subqueries(node))
        for sub in found:
            outer = _correlated(sub)
            if outer is not None:
                raise self.unsupported(
                    f"a correlated subquery (it reads {outer} of the query around it)",
                    hint="write the subquery as a derived table joined on its key",
                )
            if isinstance(sub, exp.In):
                query = sub.args["query"]
                rel = yield from self.query(
                    query.this if isinstance(query, exp.Subquery) else query
                )
                self.depth += 1
                sub.replace(self.in_list(sub, rel))
            elif isinstance(sub, exp.Exists):
                rel = yield from self.query(sub.this)
                self.depth += 1
                sub.replace(exp.Boolean(this=bool(rel.rows)))
            else:
                rel = yield from self.query(sub.this)
                self.depth += 1
                sub.replace(_scalar(rel))
        return node

    def in_list(self, node: exp.In, rel: Relation) -> exp.Expression:
        left = node.this
        width = len(left.expressions) if isinstance(left, exp.Tuple) else 1
        if len(rel.names) != width:
            err = UnsupportedError(
                "subquery has too many columns" if len(rel.names) > width
                else "subquery has too few columns"
            )  # fmt: skip
            err.sqlstate = "42601"  # type: ignore[misc]
            raise err
        if not rel.rows:
            return exp.Boolean(this=False)
        if width == 1:
            return exp.In(
                this=left.copy(),
                expressions=[_literal(r[0], rel.types[0]) for r in rel.rows],
            )
        items = left.expressions
        ors = [
            exp.and_(
                *(
                    exp.EQ(this=items[k].copy(), expression=_literal(r[k], rel.types[k]))
                    for k in range(width)
                )
            )
            for r in rel.rows
        ]
        return exp.paren(exp.or_(*ors))

    # -- the semi-join --

    def semi_join(self, node: exp.Select, items: list[exp.Expression], at: int) -> Gen:
        """``node`` with its joined subqueries replaced by conditions on the protected
        table's columns (see :meth:`over_protected`)."""
        table_item = items[at]
        assert isinstance(table_item, exp.Table)
        decl = _table_decl(table_item, self.schema)
        assert decl is not None
        talias = ident(table_item.args["alias"].this) if table_item.args.get("alias") else decl.name
        joins = list(node.args.get("joins") or [])
        if at != 0 and joins[at - 1].args.get("on") is None and not joins[at - 1].args.get("using"):
            raise self.unsupported(f"a join of protected table {decl.name} without ON or USING")
        conditions: list[exp.Expression] = []
        aliases: dict[str, Relation] = {}  # subquery alias -> its released rows
        keys: dict[tuple[str, str], exp.Expression] = {}  # (alias, column) -> the table's expr
        pairs_of: list[tuple[str, list[tuple[exp.Expression, int, bool]]]] = []
        for i, item in enumerate(items):
            if i == at:
                continue
            join = joins[i - 1] if i > 0 else (joins[at - 1] if at > 0 else None)
            if isinstance(item, exp.Table) and not isinstance(item.this, exp.Identifier):
                raise self.unsupported(
                    f"a join of protected table {decl.name} with {_item_words(item)}",
                    hint="join a VALUES list or a table declared public instead; a calendar or "
                    "a range of numbers is not needed for gaps: the groups of GROUP BY are "
                    "public, every declared value is returned, also those without rows "
                    "(docs/sql.md §2.3)",
                )
            if (
                join is None
                or join.args.get("side")
                or (join.args.get("kind") or "").upper()
                not in (
                    "",
                    "INNER",
                )
            ):
                raise self.unsupported(
                    f"an outer or cross join of protected table {decl.name} with a subquery",
                    hint="an INNER JOIN on the subquery's keys is answered (the table's rows "
                    "whose keys the subquery released)",
                )
            if not isinstance(item, exp.Subquery):
                raise self.unsupported(
                    f"a join of protected table {decl.name} with {_item_words(item)}",
                    hint="join the table to a subquery of DP aggregates on its keys",
                )
            salias = ident(item.args["alias"].this) if item.args.get("alias") else ""
            rel = yield from self.query(item.this)
            cols = item.args["alias"].columns if item.args.get("alias") else []
            if cols:
                rel = dataclasses.replace(
                    rel, names=tuple(ident(c) for c in cols) + rel.names[len(cols) :]
                )
            aliases[salias] = rel
            pairs = self.join_keys(join, decl, talias, salias, rel)
            pairs_of.append((salias, pairs))
            for key_expr, k, _ in pairs:
                keys[(salias, rel.names[k])] = key_expr
        self.depth += 1
        for salias, pairs in pairs_of:
            conditions.append(_membership(pairs, aliases[salias], decl.name, self))
        merged = {
            ident(u.this) if isinstance(u, exp.Column) else ident(u)
            for j in joins
            for u in j.args.get("using") or []
        }
        out = node.copy()
        out.set("joins", None)
        out.set("from_", exp.From(this=table_item.copy()))
        # references to the subqueries' key columns are the table's; nothing else of theirs
        for col in list(out.find_all(exp.Column)):
            if isinstance(col.this, exp.Star):
                continue
            owner = self.owner(col, decl, talias, aliases, merged)
            if owner is None:
                continue
            name = ident(col.this) if isinstance(col.this, exp.Identifier) else col.name.lower()
            texpr = keys.get((owner, name))
            if texpr is None:
                raise self.unsupported(
                    f"column {owner + '.' if owner else ''}{name} of a subquery joined to "
                    f"protected table {decl.name}",
                    hint="read the table's own columns; the subquery may only pick the keys",
                )
            col.replace(texpr.copy())
        where = out.args.get("where")
        cond = exp.and_(*(exp.paren(c) for c in conditions))
        if where is not None:
            cond = exp.and_(exp.paren(where.this.copy()), cond)
        out.set("where", exp.Where(this=cond))
        return out

    def owner(
        self,
        col: exp.Column,
        decl: TableDecl,
        talias: str,
        aliases: dict[str, Relation],
        merged: set[str],
    ) -> str | None:
        """The subquery alias a column of the semi-join's statement belongs to (None: the
        table's)."""
        name = ident(col.this) if isinstance(col.this, exp.Identifier) else col.name.lower()
        qual = col.args.get("table")
        if qual is not None:
            q = ident(qual)
            return q if q in aliases and q != talias else None
        if name in merged:
            return None  # a column USING merged: the table's, equal to the subquery's
        mine = decl.column_type(name) is not None
        theirs = [a for a, rel in aliases.items() if name in rel.names]
        if theirs and mine:
            raise AmbiguousColumnError(f'column reference "{name}" is ambiguous')
        if len(theirs) > 1:
            raise AmbiguousColumnError(f'column reference "{name}" is ambiguous')
        return theirs[0] if theirs else None

    def join_keys(
        self, join: exp.Join, decl: TableDecl, talias: str, salias: str, rel: Relation
    ) -> list[tuple[exp.Expression, int, bool]]:
        """The key pairs of a semi-join: (the table's expression, the subquery's column, null
        safe), from ``USING (k)`` or ``ON`` conjuncts ``table-expr = sub.col`` (or ``IS NOT
        DISTINCT FROM``)."""
        using = join.args.get("using")
        if using:
            out: list[tuple[exp.Expression, int, bool]] = []
            for u in using:
                name = ident(u.this) if isinstance(u, exp.Column) else ident(u)
                if name not in rel.names or decl.column_type(name) is None:
                    raise UndefinedColumnError(
                        f'column "{name}" specified in USING clause does not exist in both tables'
                    )
                out.append(
                    (exp.column(exp.to_identifier(name, quoted=True)), rel.names.index(name), False)
                )
            return out
        on = join.args.get("on")
        if on is None:
            raise self.unsupported(f"a join of protected table {decl.name} without ON or USING")
        out = []
        for conj in _conjuncts(on):
            pair = self.key_pair(conj, decl, talias, salias, rel)
            if pair is None:
                raise self.unsupported(
                    "the join condition " + conj.sql(dialect=POSTGRES)[:80],
                    hint="join on equalities of the table's columns with the subquery's: "
                    "ON a.k = t.k AND ...",
                )
            out.append(pair)
        if not out:
            raise self.unsupported(f"a join of protected table {decl.name} without a key")
        return out

    def key_pair(
        self, conj: exp.Expression, decl: TableDecl, talias: str, salias: str, rel: Relation
    ) -> tuple[exp.Expression, int, bool] | None:
        while isinstance(conj, exp.Paren):
            conj = conj.this
        if not isinstance(conj, exp.EQ | exp.NullSafeEQ):
            return None
        safe = isinstance(conj, exp.NullSafeEQ)
        for a, b in ((conj.this, conj.expression), (conj.expression, conj.this)):
            k = _sub_column(b, salias, rel, decl)
            if k is None:
                continue
            cols = list(a.find_all(exp.Column))
            if cols and all(_table_column(c, decl, talias, salias, rel) for c in cols):
                return a.copy(), k, safe
        return None

    # -- set operations and VALUES --

    def set_operation(self, node: exp.SetOperation) -> Gen:
        left = yield from self.query(node.this)
        right = yield from self.query(node.expression)
        if len(left.names) != len(right.names):
            kind = type(node).__name__.upper()
            err = UnsupportedError(f"each {kind} query must have the same number of columns")
            err.sqlstate = "42601"  # type: ignore[misc]
            raise err
        types = []
        for a, b in zip(left.types, right.types, strict=True):
            try:
                types.append(pgeval.common_type([a, b], type(node).__name__.upper()))
            except pgeval.TypeMismatch as e:
                err = UnsupportedError(e.message)
                err.sqlstate = e.sqlstate  # type: ignore[misc]
                raise err from None
        lrows = [_widened(r, types) for r in left.rows]
        rrows = [_widened(r, types) for r in right.rows]
        distinct = bool(node.args.get("distinct"))
        if isinstance(node, exp.Union):
            rows = lrows + rrows
            if distinct:
                rows = list(dict.fromkeys(rows))
        elif isinstance(node, exp.Intersect):
            if distinct:
                theirs = set(rrows)
                rows = [r for r in dict.fromkeys(lrows) if r in theirs]
            else:
                pool = _multiset(rrows)
                rows = []
                for r in lrows:
                    if pool.get(r, 0) > 0:
                        pool[r] -= 1
                        rows.append(r)
        else:  # EXCEPT
            if distinct:
                theirs = set(rrows)
                rows = [r for r in dict.fromkeys(lrows) if r not in theirs]
            else:
                pool = _multiset(rrows)
                rows = []
                for r in lrows:
                    if pool.get(r, 0) > 0:
                        pool[r] -= 1
                    else:
                        rows.append(r)
        rel = Relation(names=left.names, types=tuple(types), rows=tuple(rows))
        return self.order_limit(node, rel)

    def order_limit(self, node: exp.Expression, rel: Relation) -> Relation:
        """A set operation's own ORDER BY (output names, positions or expressions over the
        output columns), OFFSET and LIMIT."""
        order = node.args.get("order")
        rows = list(rel.rows)
        if order is not None:
            b = self.builder()
            items: list[OrderItem] = []
            for o in order.expressions:
                e = o.this
                pos = _position(e)
                if pos is not None:
                    if not 1 <= pos <= len(rel.names):
                        raise self.position_error("ORDER BY", pos)
                    expr: PostExpr = KeyRef(index=pos - 1, pg_type=rel.types[pos - 1])
                else:
                    scope = [_Col(None, n, t) for n, t in zip(rel.names, rel.types, strict=True)]
                    expr = b.convert(e, _row_leaf(scope, self))
                items.append(_order_item(o, expr))
            keys = [[_value(i.expr, _key_leaf(r)) for i in items] for r in rows]
            rows = [rows[i] for i in sort_rows(items, keys)]
        rows = self.limit(node, rows)
        return dataclasses.replace(rel, rows=tuple(rows))

    def limit(self, node: exp.Expression, rows: list[Any]) -> list[Any]:
        b = self.builder()
        offset = row_count(b, node, "offset")  # type: ignore[arg-type]
        limit = row_count(b, node, "limit")  # type: ignore[arg-type]
        if not isinstance(offset, int | None) or not isinstance(limit, int | None):
            raise self.unsupported("a parameter in LIMIT or OFFSET")
        rows = rows[offset or 0 :]
        return rows if limit is None else rows[:limit]

    def values(self, node: exp.Values) -> Relation:
        b = self.builder()
        rows: list[list[PostExpr]] = []
        for t in node.expressions:
            items = t.expressions if isinstance(t, exp.Tuple) else [t]
            rows.append([b.convert(e, _no_columns) for e in items])
        width = len(rows[0]) if rows else 0
        if any(len(r) != width for r in rows):
            err = UnsupportedError("VALUES lists must all be the same length")
            err.sqlstate = "42601"  # type: ignore[misc]
            raise err
        types = []
        for k in range(width):
            try:
                types.append(pgeval.common_type([typeof(r[k]) for r in rows], "VALUES"))
            except pgeval.TypeMismatch as e:
                raise UnsupportedError(e.message) from None
        out = []
        for r in rows:
            vals = []
            for k, item in enumerate(r):
                typed = b._as(item, types[k])
                vals.append(_widen(_value(typed, _no_leaf), types[k]))
            out.append(tuple(vals))
        alias = node.args.get("alias")
        names = (
            tuple(ident(c) for c in alias.columns) if alias is not None and alias.columns else ()
        )
        names = names + tuple(f"column{k + 1}" for k in range(len(names), width))
        return Relation(names=names, types=tuple(types), rows=tuple(out))

    # -- post-processing of a SELECT over released relations --

    def builder(self) -> _Builder:
        assert self.table is not None
        return _Builder(table=self.table, aliases=frozenset())

    def post_select(self, node: exp.Select) -> Gen:
        """A SELECT whose FROM items are released relations (subqueries, VALUES), or none:
        joins, WHERE, GROUP BY and aggregates, HAVING, window functions, DISTINCT [ON],
        ORDER BY, OFFSET, LIMIT, evaluated over the noisy rows with PostgreSQL's semantics."""
        for key, words in (("laterals", "LATERAL"), ("windows", "a WINDOW clause"),
                           ("locks", "FOR UPDATE/SHARE"), ("into", "SELECT INTO"),
                           ("sample", "TABLESAMPLE"), ("pivots", "PIVOT")):  # fmt: skip
            if node.args.get(key):
                raise self.unsupported(words)
        scope, rows = yield from self.from_clause(node)
        return _evaluate(self, node, scope, rows)

    def from_clause(self, node: exp.Select) -> Gen:
        from_ = node.args.get("from_")
        if from_ is None:
            return [], [()]
        scope, rows = yield from self.from_item(from_.this)
        for join in node.args.get("joins") or []:
            rscope, rrows = yield from self.from_item(join.this)
            scope, rows = _join(self, join, scope, rows, rscope, rrows)
        return scope, rows

    def from_item(self, item: exp.Expression) -> Gen:
        alias_node = item.args.get("alias")
        if isinstance(item, exp.Subquery | exp.Values):
            rel = yield from self.query(item.this if isinstance(item, exp.Subquery) else item)
        elif isinstance(item, exp.Table):
            raise self.unsupported(
                f"a join of aggregates with {_item_words(item)}",
                hint="joins of released aggregates with each other are answered; a table "
                "joined to them must be protected (read through its aggregates)",
            )
        else:
            raise self.unsupported(sql_words(item) + " in FROM")
        name = ident(alias_node.this) if alias_node is not None and alias_node.this else None
        names = list(rel.names)
        if alias_node is not None and alias_node.columns:
            cols = [ident(c) for c in alias_node.columns]
            if len(cols) > len(names):
                err = UnsupportedError(
                    f'table "{name}" has {len(names)} columns available but {len(cols)} '
                    "columns specified"
                )
                err.sqlstate = "42P10"  # type: ignore[misc]
                raise err
            names[: len(cols)] = cols
        scope = [_Col(name, n, t) for n, t in zip(names, rel.types, strict=True)]
        return scope, list(rel.rows)

    def position_error(self, clause: str, pos: int) -> LaprasError:
        err = UnsupportedError(f"{clause} position {pos} is not in select list")
        err.sqlstate = "42P10"  # type: ignore[misc]
        return err


# --- the evaluation of a SELECT over rows ---------------------------------------------------------


def _evaluate(
    run_: _Run, node: exp.Select, scope: list[_Col], rows: list[tuple[object, ...]]
) -> Relation:
    b = run_.builder()
    row_leaf = _row_leaf(scope, run_)
    where = node.args.get("where")
    if where is not None:
        cond = _condition(b, where.this, row_leaf, "WHERE")
        rows = [r for r in rows if _truth(cond, _key_leaf(r))]
    items: list[exp.Expression] = []
    for e in node.expressions:
        inner = unalias(e)
        if isinstance(inner, exp.Star) or (
            isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)
        ):
            qual = (
                ident(inner.args.get("table"))
                if isinstance(inner, exp.Column) and inner.args.get("table")
                else None
            )
            picked = [c for c in scope if c.star and (qual is None or c.rel == qual)]
            if qual is not None and not any(c.rel == qual for c in scope):
                raise UndefinedTableError(f'missing FROM-clause entry for table "{qual}"')
            for c in picked:
                col = exp.column(exp.to_identifier(c.name, quoted=True))
                if c.rel is not None:
                    col.set("table", exp.to_identifier(c.rel, quoted=True))
                items.append(
                    cast(exp.Expression, exp.alias_(col, exp.to_identifier(c.name, quoted=True)))
                )
            continue
        items.append(e)
    names = [output_name(e) for e in items]
    group = node.args.get("group")
    aggregated = (
        group is not None
        or node.args.get("having") is not None
        or any(
            _has_aggregate(e)
            for e in [*items, *((node.args.get("order") or exp.Order()).expressions)]
        )
    )
    distinct_node = node.args.get("distinct")
    on = distinct_node.args.get("on") if isinstance(distinct_node, exp.Distinct) else None
    if aggregated:
        contexts, post_leaf = _grouped(run_, b, node, items, names, scope, rows, row_leaf)
    else:
        contexts, post_leaf = _ungrouped(b, rows, row_leaf)
    outputs = [b.convert(unalias(e), post_leaf) for e in items]
    types = [_result_type(typeof(o)) for o in outputs]
    outputs = [b._as(o, t) for o, t in zip(outputs, types, strict=True)]
    # ORDER BY: an output name or position, else an expression in the same context
    order_items: list[OrderItem] = []
    onode = node.args.get("order")
    aliases_out = {output_name(e) for e in items if isinstance(e, exp.Alias)}
    input_names = {c.name for c in scope}
    for o in onode.expressions if onode is not None else []:
        e = o.this
        pos = _position(e)
        if pos is not None:
            if not 1 <= pos <= len(outputs):
                raise run_.position_error("ORDER BY", pos)
            order_items.append(_order_item(o, outputs[pos - 1]))
            continue
        if isinstance(e, exp.Column) and not e.args.get("table"):
            oname = output_name(e)
            if oname in names and (oname in aliases_out or oname not in input_names):
                order_items.append(_order_item(o, outputs[names.index(oname)]))
                continue
        order_items.append(_order_item(o, b.convert(e, post_leaf)))
    distinct_on = [b.convert(x, post_leaf) for x in (on.expressions if on is not None else [])]
    found = windows_of((*outputs, *(i.expr for i in order_items), *distinct_on))
    win = window_values(found, [c.leaf for c in contexts]) if found else [{} for _ in contexts]
    out_rows: list[tuple[object, ...]] = []
    sort_keys: list[list[object]] = []
    on_keys: list[tuple[object, ...]] = []
    for ctx, w in zip(contexts, win, strict=True):
        leaf = ctx.with_windows(w)
        out_rows.append(
            tuple(_widen(_value(o, leaf), t) for o, t in zip(outputs, types, strict=True))
        )
        sort_keys.append([_value(i.expr, leaf) for i in order_items])
        on_keys.append(tuple(_value(x, leaf) for x in distinct_on))
    order = sort_rows(order_items, sort_keys) if order_items else list(range(len(out_rows)))
    picked_rows = [out_rows[i] for i in order]
    if distinct_node is not None and on is not None:
        seen_on: set[tuple[object, ...]] = set()
        kept = []
        for i in order:
            if on_keys[i] not in seen_on:
                seen_on.add(on_keys[i])
                kept.append(out_rows[i])
        picked_rows = kept
    elif distinct_node is not None:
        picked_rows = list(dict.fromkeys(picked_rows))
    picked_rows = run_.limit(node, picked_rows)
    return Relation(names=tuple(names), types=tuple(types), rows=tuple(picked_rows))


@dataclass(slots=True)
class _Context:
    """One output row's leaves before projection: a row of the FROM clause, or a group (its
    keys, and its rows for its aggregates, computed when first asked); window values are
    added once computed."""

    values: tuple[object, ...]
    members: list[tuple[object, ...]] | None = None  # a group's rows (None: a row)
    aggs: dict[RowAgg, object] = field(default_factory=dict)
    windows: dict[Window, object] = field(default_factory=dict)

    def leaf(self, e: PostExpr) -> object:
        if isinstance(e, KeyRef):
            return self.values[e.index]
        if isinstance(e, RowAgg) and self.members is not None:
            if e not in self.aggs:
                self.aggs[e] = _compute(e, self.members)
            return self.aggs[e]
        if isinstance(e, Window):
            return self.windows[e]
        raise InternalError("an unknown leaf in post-processing")

    def with_windows(self, w: dict[Window, object]) -> Callable[[PostExpr], object]:
        self.windows = w
        return self.leaf


Leaf: TypeAlias = Callable[[exp.Expression], PostExpr | None]


def _ungrouped(
    b: _Builder, rows: list[tuple[object, ...]], row_leaf: Leaf
) -> tuple[list[_Context], Leaf]:
    def leaf(node: exp.Expression) -> PostExpr | None:
        if isinstance(node, exp.Window):
            return window_function(b, node, leaf)
        if isinstance(node, exp.AggFunc | exp.Filter | exp.WithinGroup):
            raise InternalError("an aggregate in a SELECT without groups")
        return row_leaf(node)

    return [_Context(values=r) for r in rows], leaf


def _grouped(
    run_: _Run,
    b: _Builder,
    node: exp.Select,
    items: list[exp.Expression],
    names: list[str],
    scope: list[_Col],
    rows: list[tuple[object, ...]],
    row_leaf: Leaf,
) -> tuple[list[_Context], Leaf]:
    """The groups of an aggregating SELECT (GROUP BY, or one group of every row) after
    HAVING, and the leaf resolver of expressions over groups: group keys, aggregates (over
    the group's rows), window functions."""
    group_exprs: list[PostExpr] = []
    plain = _no_aggregates(row_leaf, run_)
    gnode = node.args.get("group")
    if gnode is not None:
        if any(gnode.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
            raise run_.unsupported(
                "ROLLUP, CUBE or GROUPING SETS over released results",
                hint="group the protected table itself with ROLLUP/CUBE/GROUPING SETS",
            )
        input_names = {c.name for c in scope}
        for g in gnode.expressions:
            target = g
            pos = _position(g)
            if pos is not None:
                if not 1 <= pos <= len(items):
                    raise run_.position_error("GROUP BY", pos)
                target = unalias(items[pos - 1])
            elif isinstance(g, exp.Column) and not g.args.get("table"):
                gname = output_name(g)
                if gname not in input_names and gname in names:
                    target = unalias(items[names.index(gname)])
            ge = b.convert(target, plain)
            if ge not in group_exprs:
                group_exprs.append(ge)

    def key_of(e: PostExpr) -> PostExpr | None:
        return KeyRef(index=group_exprs.index(e), pg_type=typeof(e)) if e in group_exprs else None

    def leaf(n: exp.Expression) -> PostExpr | None:
        if isinstance(n, exp.Window):
            return window_function(b, n, leaf)
        got = _aggregate(run_, b, n, plain)
        if got is not None:
            return cast(PostExpr, got)  # a leaf of its own, evaluated by _Context
        if isinstance(n, exp.Column):
            key = key_of(row_leaf(n))  # type: ignore[arg-type]
            if key is not None:
                return key
            raise GroupingError(
                f'column "{n.name}" must appear in the GROUP BY clause or be used in an '
                "aggregate function"
            )
        if group_exprs and not b.is_value(n) and not _has_aggregate(n):
            try:
                return key_of(b.convert(n, plain))
            except LaprasError:
                return None
        return None

    having_node = node.args.get("having")
    having = _condition(b, having_node.this, leaf, "HAVING") if having_node is not None else None
    buckets: dict[tuple[object, ...], list[tuple[object, ...]]] = {}
    for r in rows:
        buckets.setdefault(tuple(_value(g, _key_leaf(r)) for g in group_exprs), []).append(r)
    if not group_exprs and not buckets:
        buckets[()] = []  # an aggregate without GROUP BY: one row, also over no rows
    contexts = [_Context(values=key, members=members) for key, members in buckets.items()]
    if having is not None:
        contexts = [c for c in contexts if _truth(having, c.leaf)]
    return contexts, leaf


def _aggregate(
    run_: _Run,
    b: _Builder,
    node: exp.Expression,
    arg_leaf: Callable[[exp.Expression], PostExpr | None],
) -> RowAgg | None:
    """The aggregate a node of the post-processing is (None: not an aggregate)."""
    filt: PostExpr | None = None
    if isinstance(node, exp.Filter):
        where = node.expression
        filt = _condition(
            b, where.this if isinstance(where, exp.Where) else where, arg_leaf, "FILTER"
        )
        node = node.this
    within: exp.Expression | None = None
    desc = False
    if isinstance(node, exp.WithinGroup):
        order = node.expression
        obys = order.expressions if isinstance(order, exp.Order) else []
        if len(obys) != 1:
            raise run_.unsupported("WITHIN GROUP with several ORDER BY items")
        within, desc = obys[0].this, bool(obys[0].args.get("desc"))
        node = node.this
    if isinstance(node, exp.PercentileCont | exp.PercentileDisc | exp.Mode):
        if within is None:
            raise run_.unsupported(f"{sql_words(node)} without WITHIN GROUP")
        arg = b.convert(within, arg_leaf)
        t = typeof(arg)
        if isinstance(node, exp.Mode):
            return RowAgg(func="mode", arg=arg, pg_type=t, filter=filt, desc=desc)
        frac = b.literal(node.this)
        if not isinstance(frac.value, int | Decimal) or not 0 <= frac.value <= 1:
            err = UnsupportedError("percentile value must be a constant between 0 and 1")
            err.sqlstate = "22003"  # type: ignore[misc]
            raise err
        if desc:
            raise run_.unsupported("WITHIN GROUP (ORDER BY ... DESC) of a percentile",
                                   hint="write the fraction 1 - f with ORDER BY x")  # fmt: skip
        cont = isinstance(node, exp.PercentileCont)
        if cont and not pgeval.is_number(t):
            raise run_.unsupported("percentile_cont of a value that is not a number")
        return RowAgg(
            func="percentile_cont" if cont else "percentile_disc",
            arg=arg,
            pg_type="float8" if cont else t,
            filter=filt,
            fraction=float(frac.value),
        )
    func = _AGGS.get(type(node))
    if func is None:
        if isinstance(node, exp.AggFunc) and not isinstance(node, exp.Window):
            word = sql_words(node)
            raise run_.unsupported(
                f"aggregate {word} over released results",
                hint=f"the aggregates answered over released results are {_POST_AGGS}",
            )
        if filt is not None:
            raise run_.unsupported("FILTER on something other than an aggregate")
        return None
    inner = node.this
    distinct = isinstance(inner, exp.Distinct)
    if distinct:
        if len(inner.expressions) != 1:
            raise run_.unsupported(f"{func}(DISTINCT ...) of several values")
        inner = inner.expressions[0]
    if node.args.get("expressions") and not distinct:
        raise run_.unsupported(f"{func}() of several arguments")
    if func == "count" and (inner is None or isinstance(inner, exp.Star)):
        return RowAgg(func="count", arg=None, pg_type="int8", filter=filt)
    arg = b.convert(inner, arg_leaf)
    t = typeof(arg)
    if func == "count":
        out = "int8"
    elif func in ("bool_and", "bool_or"):
        if t != "bool":
            raise UnsupportedError(f"function {func}({pgeval.sql_type(t)}) does not exist")
        out = "bool"
    elif func in ("min", "max"):
        out = t
    else:
        if not pgeval.is_number(t):
            err = UnsupportedError(f"function {func}({pgeval.sql_type(t)}) does not exist",
                                   hint=f"{func} takes numbers")  # fmt: skip
            err.sqlstate = "42883"  # type: ignore[misc]
            raise err
        if func == "sum":
            out = {"int2": "int8", "int4": "int8", "int8": "numeric", "float4": "float4"}.get(t, t)
        elif t in ("float4", "float8"):
            out = "float8"
        else:
            out = "numeric"
    return RowAgg(func=func, arg=arg, pg_type=out, distinct=distinct, filter=filt)


def _compute(a: RowAgg, members: list[tuple[object, ...]]) -> object:
    """An aggregate over a group's rows, with PostgreSQL's result (types, NULLs)."""
    picked = members
    if a.filter is not None:
        filt = a.filter
        picked = [r for r in members if _truth(filt, _key_leaf(r))]
    if a.arg is None:
        return len(picked)
    arg = a.arg
    vals = [_value(arg, _key_leaf(r)) for r in picked]
    vals = [v for v in vals if v is not None]
    if a.distinct:
        vals = list(dict.fromkeys(vals))
    func = a.func
    if func == "count":
        return len(vals)
    if not vals:
        return None
    if func == "min":
        return min(vals)  # type: ignore[type-var]
    if func == "max":
        return max(vals)  # type: ignore[type-var]
    if func == "bool_and":
        return all(vals)
    if func == "bool_or":
        return any(vals)
    if func in ("mode", "percentile_disc", "percentile_cont"):
        ordered = sorted(vals, reverse=a.desc)  # type: ignore[type-var]
        if func == "mode":
            best, count, run_v, run_n = ordered[0], 0, None, 0
            for v in ordered:
                run_n = run_n + 1 if v == run_v else 1
                run_v = v
                if run_n > count:
                    best, count = v, run_n
            return best
        f = a.fraction or 0.0
        n = len(ordered)
        if func == "percentile_disc":
            return ordered[max(int(np.ceil(f * n)), 1) - 1]
        pos = f * (n - 1)
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        x, y = float(ordered[lo]), float(ordered[hi])  # type: ignore[arg-type]
        return x + (y - x) * (pos - lo)
    t = a.pg_type
    if t in ("float8", "float4"):
        nums = [float(v) for v in vals]  # type: ignore[arg-type]
        total: object = sum(nums)
    else:
        dec = [pgeval.to_decimal(v) for v in vals]
        total = sum(dec, Decimal(0))
    n = len(vals)
    if func == "sum":
        if t == "int8":
            return int(total)  # type: ignore[call-overload]
        return total
    if func == "avg":
        if isinstance(total, float):
            return total / n
        return pgeval.numeric_div(pgeval.to_decimal(total), Decimal(n))
    samp = func.endswith("_samp")
    if samp and n <= 1:
        return None
    if isinstance(total, float):
        mean = total / n
        ss = 0.0
        for x in nums:
            ss += (x - mean) ** 2
        var = ss / (n - 1 if samp else n)
        return var**0.5 if func.startswith("stddev") else var
    sq = sum((pgeval.to_decimal(v) ** 2 for v in vals), Decimal(0))
    num = Decimal(n) * sq - pgeval.to_decimal(total) ** 2
    den = Decimal(n * (n - 1 if samp else n))
    if num <= 0:
        return Decimal(0)
    return pgeval.numeric_variance(num, den, root=func.startswith("stddev"))


# --- joins ---------------------------------------------------------------------------------------


def _join(
    run_: _Run,
    join: exp.Join,
    lscope: list[_Col],
    lrows: list[tuple[object, ...]],
    rscope: list[_Col],
    rrows: list[tuple[object, ...]],
) -> tuple[list[_Col], list[tuple[object, ...]]]:
    """PostgreSQL's joins of two relations: CROSS (or a comma), [INNER], LEFT, RIGHT, FULL
    with ON, USING or NATURAL (USING's columns merged: first, once, coalesced for FULL)."""
    side = str(join.args.get("side") or "").upper()
    kind = str(join.args.get("kind") or "").upper()
    if kind not in ("", "INNER", "OUTER", "CROSS"):
        raise run_.unsupported(f"{kind} JOIN")
    using_names: list[str] = []
    if str(join.args.get("method") or "").upper() == "NATURAL":
        rnames = {c.name for c in rscope if c.bare}
        using_names = [c.name for c in lscope if c.bare and c.name in rnames]
    elif join.args.get("using"):
        using_names = [
            ident(u.this) if isinstance(u, exp.Column) else ident(u) for u in join.args["using"]
        ]
    width_l = len(lscope)
    scope = [*lscope, *rscope]
    b = run_.builder()
    pairs: list[tuple[int, int]] = []
    for name in using_names:
        li = [i for i, c in enumerate(lscope) if c.name == name and c.bare]
        ri = [i for i, c in enumerate(rscope) if c.name == name and c.bare]
        if len(li) != 1 or len(ri) != 1:
            if not li or not ri:
                raise UndefinedColumnError(
                    f'column "{name}" specified in USING clause does not exist in '
                    f"{'left' if not li else 'right'} table"
                )
            raise AmbiguousColumnError(f'common column name "{name}" appears more than once')
        pairs.append((li[0], ri[0]))
    cond: PostExpr | None = None
    on = join.args.get("on")
    if on is not None:
        cond = _condition(b, on, _row_leaf(scope, run_), "JOIN/ON")
    elif not pairs and kind != "CROSS" and side and not using_names:
        raise run_.unsupported("an outer join without ON or USING")

    def matches(lr: tuple[object, ...], rr: tuple[object, ...]) -> bool:
        for i, j in pairs:
            if pgeval.compare("=", lr[i], rr[j]) is not True:
                return False
        if cond is not None:
            return _truth(cond, _key_leaf((*lr, *rr)))
        return True

    out: list[tuple[tuple[object, ...] | None, tuple[object, ...] | None]] = []
    used_right: set[int] = set()
    for lr in lrows:
        hit = False
        for k, rr in enumerate(rrows):
            if matches(lr, rr):
                out.append((lr, rr))
                used_right.add(k)
                hit = True
        if not hit and side in ("LEFT", "FULL"):
            out.append((lr, None))
    if side in ("RIGHT", "FULL"):
        out.extend((None, rr) for k, rr in enumerate(rrows) if k not in used_right)
    nulls_l = (None,) * width_l
    nulls_r = (None,) * len(rscope)
    rows = [(*(lr or nulls_l), *(rr or nulls_r)) for lr, rr in out]
    if not pairs:
        return scope, rows
    # USING: the merged columns first (PostgreSQL's order), the originals hidden from
    # unqualified names and from *
    merged: list[_Col] = []
    for i, j in pairs:
        lt, rt = lscope[i].pg_type, rscope[j].pg_type
        try:
            t = pgeval.common_type([lt, rt], "JOIN/USING")
        except pgeval.TypeMismatch as e:
            raise UnsupportedError(e.message) from None
        merged.append(_Col(None, lscope[i].name, t))
    hidden = {i for i, _ in pairs} | {width_l + j for _, j in pairs}
    scope = merged + [
        dataclasses.replace(c, bare=False, star=False) if k in hidden else c
        for k, c in enumerate(scope)
    ]
    new_rows = []
    for r in rows:
        vals = []
        for (i, j), c in zip(pairs, merged, strict=True):
            lv, rv = r[i], r[width_l + j]
            v = (rv if lv is None else lv) if side == "FULL" else (rv if side == "RIGHT" else lv)
            vals.append(_widen(v, c.pg_type))
        new_rows.append((*vals, *r))
    return scope, new_rows


# --- leaves and values ---------------------------------------------------------------------------


def _row_leaf(scope: list[_Col], run_: _Run) -> Callable[[exp.Expression], PostExpr | None]:
    """Resolves columns of a FROM clause to :class:`KeyRef` (the row's position)."""

    def leaf(node: exp.Expression) -> PostExpr | None:
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise run_.unsupported("* in an expression")
            name = ident(node.this) if isinstance(node.this, exp.Identifier) else node.name.lower()
            qual = node.args.get("table")
            if qual is not None:
                q = ident(qual)
                if not any(c.rel == q for c in scope):
                    raise UndefinedTableError(f'missing FROM-clause entry for table "{q}"')
                hits = [i for i, c in enumerate(scope) if c.rel == q and c.name == name]
            else:
                hits = [i for i, c in enumerate(scope) if c.bare and c.name == name]
            if not hits:
                raise UndefinedColumnError(
                    f"column {name} does not exist" if name.isidentifier() and len(name) <= 63
                    else "unknown column"
                )  # fmt: skip
            if len(hits) > 1:
                raise AmbiguousColumnError(f'column reference "{name}" is ambiguous')
            return KeyRef(index=hits[0], pg_type=scope[hits[0]].pg_type)
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists):
            raise run_.unsupported("a subquery here")
        if isinstance(node, exp.Grouping):
            raise run_.unsupported("GROUPING() over released results")
        return None

    return leaf


def _no_aggregates(
    leaf: Callable[[exp.Expression], PostExpr | None], run_: _Run
) -> Callable[[exp.Expression], PostExpr | None]:
    def inner(node: exp.Expression) -> PostExpr | None:
        if isinstance(node, exp.AggFunc | exp.Window | exp.Filter | exp.WithinGroup):
            err = UnsupportedError(
                "aggregate functions are not allowed here (an aggregate inside an aggregate, "
                "WHERE, GROUP BY or JOIN/ON)"
            )
            err.sqlstate = "42803"  # type: ignore[misc]
            raise err
        return leaf(node)

    return inner


def _no_columns(node: exp.Expression) -> PostExpr | None:
    if isinstance(node, exp.Column):
        raise UndefinedColumnError("a column in VALUES")
    return None


def _no_leaf(e: PostExpr) -> object:
    raise InternalError("a leaf in a constant")


def _key_leaf(row: Sequence[object] | None) -> Callable[[PostExpr], object]:
    def leaf(e: PostExpr) -> object:
        if isinstance(e, KeyRef) and row is not None:
            return row[e.index]
        raise InternalError("an unknown leaf in post-processing")

    return leaf


def _value(e: PostExpr, leaf: Callable[[PostExpr], object]) -> object:
    """A value of the post-processing; NULL where PostgreSQL would raise an error for these
    (noisy) values, as the DP statements' post-processing does (docs/sql.md §2.5)."""
    try:
        return evaluate_with(e, leaf)
    except pgeval.EvalError:
        return None


def _truth(e: PostExpr, leaf: Callable[[PostExpr], object]) -> bool:
    return _value(e, leaf) is True


def _condition(
    b: _Builder, node: exp.Expression, leaf: Callable[[exp.Expression], PostExpr | None], what: str
) -> PostExpr:
    e = b.convert(node, leaf)
    t = typeof(e)
    if t not in ("bool", "unknown"):
        err = UnsupportedError(
            f"argument of {what} must be type boolean, not type {pgeval.sql_type(t)}"
        )
        err.sqlstate = "42804"  # type: ignore[misc]
        raise err
    return e


def _order_item(o: exp.Expression, expr: PostExpr) -> OrderItem:
    nf = o.args.get("nulls_first") if isinstance(o, exp.Ordered) else None
    desc = bool(o.args.get("desc")) if isinstance(o, exp.Ordered) else False
    return OrderItem(expr=expr, desc=desc, nulls_first=bool(nf) if nf is not None else None)


def _position(e: exp.Expression) -> int | None:
    if isinstance(e, exp.Literal) and not e.is_string:
        try:
            return int(str(e.this))
        except ValueError:
            return None
    return None


def _has_aggregate(e: exp.Expression) -> bool:
    """Whether ``e`` holds an aggregate of this query level: not the function of a window
    (``sum(x) OVER ()``; its arguments may hold one: ``sum(count(*)) OVER ()``), not inside a
    subquery."""
    if isinstance(e, exp.Subquery | exp.Select | exp.SetOperation):
        return False
    if isinstance(e, exp.Window):
        fn = e.this
        inner = _children(fn) if isinstance(fn, exp.AggFunc) else [fn]
        return any(_has_aggregate(x) for x in [*inner, *(c for c in _children(e) if c is not fn)])
    if isinstance(e, exp.AggFunc | exp.Filter | exp.WithinGroup):
        return True
    return any(_has_aggregate(c) for c in _children(e))


def _result_type(t: str) -> str:
    return "text" if t == "unknown" else t


def _widen(v: object, t: str) -> object:
    """A value as its column's type (a wider number type, an untyped literal as text)."""
    if v is None or isinstance(v, bool):
        return v
    if t == "numeric" and isinstance(v, int | float):
        return pgeval.to_decimal(v)
    if t in ("float8", "float4") and isinstance(v, int | Decimal):
        return float(v)
    if t == "int8" and isinstance(v, Decimal) and v == v.to_integral_value():
        return int(v)
    return v


def _widened(row: tuple[object, ...], types: Sequence[str]) -> tuple[object, ...]:
    return tuple(_widen(v, t) for v, t in zip(row, types, strict=True))


def _multiset(rows: list[tuple[object, ...]]) -> dict[tuple[object, ...], int]:
    out: dict[tuple[object, ...], int] = {}
    for r in rows:
        out[r] = out.get(r, 0) + 1
    return out


# --- constants from released values --------------------------------------------------------------


def _literal(v: object, t: str) -> exp.Expression:
    """A released value as a SQL constant of its type (PostgreSQL reads it back exactly)."""
    to = exp.DataType.build(pgeval.sql_type(t) if t != "unknown" else "text", dialect=POSTGRES)
    if v is None:
        return exp.Cast(this=exp.Null(), to=to)
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, int):
        lit: exp.Expression = exp.Literal.number(abs(v))
        if v < 0:
            lit = exp.Neg(this=lit)
        return exp.Cast(this=lit, to=to)
    if isinstance(v, float):
        return exp.Cast(this=exp.Literal.string(pgeval.float_text(v)), to=to)
    if isinstance(v, Decimal):
        return exp.Cast(this=exp.Literal.string(str(v)), to=to)
    if isinstance(v, dt.date):
        return exp.Cast(this=exp.Literal.string(v.isoformat()), to=to)
    return exp.Cast(this=exp.Literal.string(str(v)), to=to)


def _short(sql: str) -> str:
    """A part's SQL (the statement's own text, regenerated), cut for a refusal's DETAIL."""
    return sql if len(sql) <= 160 else sql[:157] + "..."


def _scalar(rel: Relation) -> exp.Expression:
    if len(rel.names) != 1:
        err = UnsupportedError("subquery must return only one column")
        err.sqlstate = "42601"  # type: ignore[misc]
        raise err
    if len(rel.rows) > 1:
        raise CardinalityError("more than one row returned by a subquery used as an expression")
    v = rel.rows[0][0] if rel.rows else None
    return exp.paren(_literal(v, rel.types[0]))


def _membership(
    pairs: list[tuple[exp.Expression, int, bool]], rel: Relation, table: str, run_: _Run
) -> exp.Expression:
    """The condition that the table's key expressions take one of the released key tuples
    (each at most once: a join with repeated keys would count rows several times)."""
    tuples: list[tuple[object, ...]] = []
    for r in rel.rows:
        vals = tuple(r[k] for _, k, _ in pairs)
        if any(v is None and not safe for v, (_, _, safe) in zip(vals, pairs, strict=True)):
            continue  # = never matches NULL
        tuples.append(vals)
    if len(set(tuples)) != len(tuples):
        raise run_.unsupported(
            f"a join of protected table {table} with a subquery whose rows repeat a key",
            hint="group the subquery by the join's keys (GROUP BY k), so that each key "
            "appears once",
        )
    if not tuples:
        return exp.Boolean(this=False)
    types = [rel.types[k] for _, k, _ in pairs]
    if len(pairs) == 1:
        texpr, _, safe = pairs[0]
        consts = [_literal(t[0], types[0]) for t in tuples if t[0] is not None]
        parts: list[exp.Expression] = []
        if consts:
            parts.append(exp.In(this=texpr.copy(), expressions=consts))
        if safe and any(t[0] is None for t in tuples):
            parts.append(exp.Is(this=texpr.copy(), expression=exp.Null()))
        return cast(exp.Expression, exp.or_(*parts)) if len(parts) > 1 else parts[0]
    ors: list[exp.Expression] = []
    for t in tuples:
        conj: list[exp.Expression] = []
        for (texpr, _, safe), v, ty in zip(pairs, t, types, strict=True):
            if v is None:
                conj.append(exp.Is(this=texpr.copy(), expression=exp.Null()))
            elif safe:
                conj.append(exp.NullSafeEQ(this=texpr.copy(), expression=_literal(v, ty)))
            else:
                conj.append(exp.EQ(this=texpr.copy(), expression=_literal(v, ty)))
        ors.append(exp.paren(exp.and_(*conj)))
    return cast(exp.Expression, exp.or_(*ors))


# --- the statement's tree --------------------------------------------------------------------------


def _children(e: exp.Expr) -> list[exp.Expression]:
    """The direct child nodes of ``e``."""
    return [c for c in e.iter_expressions() if isinstance(c, exp.Expression)]


def _table_decl(node: exp.Table, schema: Schema) -> TableDecl | None:
    """The protected table a table reference names (None: another relation)."""
    if not isinstance(node.this, exp.Identifier):
        return None
    db = node.args.get("db")
    return schema.protected(ident(node.this), ident(db) if db is not None else None)


def _protected_tables(node: exp.Expression, schema: Schema) -> list[TableDecl]:
    out: list[TableDecl] = []
    for t in node.find_all(exp.Table):
        d = _table_decl(t, schema)
        if d is not None and d not in out:
            out.append(d)
    return out


def _inline_ctes(
    node: exp.Expression, env: dict[str, tuple[exp.Expression, list[str]]], table: TableDecl
) -> exp.Expression:
    """``node`` with every reference to a CTE replaced by the CTE's query as a derived table
    of the same name (PostgreSQL's semantics for queries without side effects; a CTE read
    twice is then released once, its text being the same)."""
    with_ = node.args.get("with_") or node.args.get("with")
    if isinstance(with_, exp.With):
        if with_.args.get("recursive"):
            raise UnsupportedError(
                f"WITH RECURSIVE over protected table {table.name} is not supported",
                hint="write the CTEs without RECURSIVE",
            )
        env = dict(env)
        for cte in with_.expressions:
            alias = cte.args.get("alias")
            name = ident(alias.this) if alias is not None else ""
            if name == table.name:
                raise UnsupportedError(
                    f"a CTE named like protected table {table.name}",
                    hint="give the CTE another name",
                )
            cols = [ident(c) for c in alias.columns] if alias is not None and alias.columns else []
            body = _inline_ctes(cte.this.copy(), env, table)
            env[name] = (body, cols)
        node.set("with_", None)
        node.set("with", None)
    for child in _children(node):
        if (
            isinstance(child, exp.Table)
            and isinstance(child.this, exp.Identifier)
            and child.args.get("db") is None
            and ident(child.this) in env
        ):
            body, cols = env[ident(child.this)]
            alias = child.args.get("alias")
            name = ident(alias.this) if alias is not None and alias.this else ident(child.this)
            acols = (
                [ident(c) for c in alias.columns] if alias is not None and alias.columns else cols
            )
            child.replace(
                exp.Subquery(
                    this=body.copy(),
                    alias=exp.TableAlias(
                        this=exp.to_identifier(name, quoted=True),
                        columns=[exp.to_identifier(c, quoted=True) for c in acols],
                    ),
                )
            )
        else:
            _inline_ctes(child, env, table)
    return node


def _from_items(node: exp.Select) -> list[exp.Expression]:
    from_ = node.args.get("from_")
    items = [from_.this] if from_ is not None else []
    return items + [j.this for j in node.args.get("joins") or []]


def _item_words(item: exp.Expression) -> str:
    if isinstance(item, exp.Table):
        if isinstance(item.this, exp.Identifier):
            return f"table {ident(item.this)}"
        return f"the set-returning {sql_words(item.this)}"  # FROM generate_series(...)
    return sql_words(item)


def _subqueries(node: exp.Select) -> Iterator[exp.Expression]:
    """The subqueries of ``node``'s own expressions (not its FROM items, not those nested in
    another subquery), left to right: scalar subqueries, ``IN (subquery)``, ``EXISTS``."""

    def visit(e: exp.Expression) -> Iterator[exp.Expression]:
        if isinstance(e, exp.In) and e.args.get("query") is not None:
            yield from visit(e.this)
            yield e
        elif isinstance(e, exp.Exists | exp.Subquery):
            yield e
        elif isinstance(e, exp.Any | exp.All) and e.find(exp.Select) is not None:
            raise UnsupportedError(
                f"{sql_words(e)} (subquery) over a protected table is not supported",
                hint="write IN (subquery), or compare with a scalar subquery",
            )
        elif not isinstance(e, exp.Select | exp.SetOperation):
            for child in _children(e):
                yield from visit(child)

    for key, value in node.args.items():
        if key in ("from_", "with_", "with") or value is None:
            continue
        values = value if isinstance(value, list) else [value]
        if key == "joins":
            values = [j.args["on"] for j in value if j.args.get("on") is not None]
        for v in values:
            if isinstance(v, exp.Expression):
                yield from visit(v)


def _subqueries_deep(node: exp.Select) -> Iterator[exp.Expression]:
    """The subqueries of ``node``'s expressions and of its derived tables' (recursively)."""
    yield from _subqueries(node)
    for item in _from_items(node):
        if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select):
            yield from _subqueries_deep(item.this)


def _correlated(sub: exp.Expression) -> str | None:
    """A column of the query around a subquery that the subquery reads by qualifier (None:
    it reads none)."""
    inner = sub.args.get("query") if isinstance(sub, exp.In) else sub.this
    if inner is None:
        return None
    names: set[str] = set()
    for t in inner.find_all(exp.Table, exp.Subquery, exp.Values):
        alias = t.args.get("alias")
        if alias is not None and alias.this is not None:
            names.add(ident(alias.this))
        if isinstance(t, exp.Table) and isinstance(t.this, exp.Identifier):
            names.add(ident(t.this))
    for cte in inner.find_all(exp.CTE):
        alias = cte.args.get("alias")
        if alias is not None:
            names.add(ident(alias.this))
    for col in inner.find_all(exp.Column):
        qual = col.args.get("table")
        if qual is not None and ident(qual) not in names:
            return f"{ident(qual)}.{col.name}"
    return None


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _sub_column(e: exp.Expression, salias: str, rel: Relation, decl: TableDecl) -> int | None:
    """The subquery's column ``e`` names (qualified by its alias, or a name only it has)."""
    while isinstance(e, exp.Paren):
        e = e.this
    if not isinstance(e, exp.Column) or isinstance(e.this, exp.Star):
        return None
    name = ident(e.this) if isinstance(e.this, exp.Identifier) else e.name.lower()
    qual = e.args.get("table")
    if qual is not None:
        return rel.names.index(name) if ident(qual) == salias and name in rel.names else None
    if name in rel.names and decl.column_type(name) is None:
        return rel.names.index(name)
    return None


def _table_column(c: exp.Column, decl: TableDecl, talias: str, salias: str, rel: Relation) -> bool:
    name = ident(c.this) if isinstance(c.this, exp.Identifier) else c.name.lower()
    qual = c.args.get("table")
    if qual is not None:
        return ident(qual) in (talias, decl.name) and ident(qual) != salias
    return decl.column_type(name) is not None and name not in rel.names


__all__ += ["Relation", "RowAgg"]
