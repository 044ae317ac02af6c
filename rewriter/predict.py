"""Template prediction: which DP statements will come next (the predicted set P of LAPRAS).

Pure: every function takes the log records (and "now") as arguments; no I/O, no clock.

Input. A sequence of :class:`LogRecord` (time, analyst/session, the SQL text or the template
with its bindings, the plan's ``QueryBatch`` key, view, outcome, a call count). Parsers turn the
other sources into records: :func:`parse_sql_file` (a file of SQL statements),
:func:`parse_pg_stat_statements` (``query`` with ``$n`` placeholders + ``calls``) and
:func:`parse_csvlog` (PostgreSQL's csvlog, ``statement: ...`` messages).

Method (:func:`predict`). Each record is resolved through the rewriter (``classify`` ->
``fingerprint`` -> plan) to its template, bindings, view and batch; statements are identified
by the *set* of their linear queries (:func:`canonical_key`: ``GROUP BY b, a`` is
``GROUP BY a, b``). A statement refused because a literal cuts a declared bin is *rounded
outwards* to the bin edges (the smallest bin-aligned range covering the one asked;
:func:`round_binding`) and counted as that query. Candidates:

* **exact** queries asked at least ``min_occurrences`` times (default once: every distinct
  earlier statement is a candidate, as in the literal-repeat baseline);
* **sliding** windows: a template whose date bindings stand at a constant offset from the
  day the query was asked (``date >= today - 7``), seen on two days or more, is predicted
  with its dates shifted to the day(s) of the next window ``[now, now + horizon)``.

Probability (:func:`recurrence`): how likely a candidate is to be asked in the next window
(``period``, one day by default) is *learned from the log itself* by a rolling-origin
backtest: at the start of every earlier window, each statement seen before is classed by in
how many windows and by how many analysts it was asked and whether it was asked in the window
just before, and each class's rate of being asked again is counted. So a dashboard asked
daily gets its class's rate (near 1), and a question many users repeat across their sessions
gets the rate such questions had in this log -- whatever the log's rhythm. Candidates are
ranked by probability, then by a recency-decayed frequency ``score = sum_i calls_i *
2 ** (-(now - t_i) / half_life)``.

Cap (``rewriter.predict_cap``): ``max_statements`` / ``max_rows`` always; with
``epsilon``/``delta`` given, per *table* (one epoch covers the table), a held-out backtest: at
the latest windows of the log (of the epoch's length), the predictor is run on the log before
each, and candidate rules (every earlier statement, the most recent first, and the ranking,
each cut at multiples of the typical window's distinct statements, at several Matrix
Mechanism shares) are priced against what the window really asked, as the engine answers it
(the release bounded by ``dp.release_bound``, the fresh answers at the epoch's pacing). A P is
kept only when its mean gain over those windows exceeds the model's own error; else P is
empty, and the decision says so in words (``CapDecision.text``). S and E, the most and the
expected fresh answers of the epoch, come from the log's windows (``rewriter.stream_length``).

Templates with unknown bindings (``pg_stat_statements`` normalises every constant to ``$n``):
a template without placeholders *is* a query and is predicted like one; a template with
placeholders can only be reported (:attr:`Prediction.unbound`: the template, its call count,
the attributes its placeholders constrain) -- which ranges or values it was called with is not
in ``pg_stat_statements``.

Backtest (:func:`backtest`): learn on the records before ``split_time``, compare with the
records after it (held out: nothing after ``split_time`` is learned from): overlap ``rho``,
false positives, and per table the later window answered by the model with P (its split, S and
E) and with everything online (``rewriter.predict_cap.window_error``).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Literal, NamedTuple

import numpy as np
import scipy.sparse as sp

from dp.domain import Domain, QueryBatch
from dp.release_bound import FactorCache

from .classify import DPStatement, Refused, bind, classify
from .normalise import Param
from .plan import Plan
from .reduce import _fingerprint
from .schema import AttributeDecl, Kind, Schema
from .split import split_statements, tokenize
from .stream_length import estimate

if TYPE_CHECKING:
    from .predict_cap import CapDecision, Log

DAY = 86_400.0
#: Budget splits (MM, badInit, bad, reserve), as in dp.engine.SPLITS (PRIVACY-NOTES §2).
SPLITS: Mapping[str, tuple[float, float, float, float]] = {
    "equal": (1 / 4, 1 / 4, 1 / 4, 1 / 4),
    "matrix-heavy": (1 / 2, 1 / 6, 1 / 6, 1 / 6),
    "query-heavy": (1 / 6, 1 / 3, 1 / 3, 1 / 6),
    "reserve-heavy": (1 / 6, 1 / 6, 1 / 6, 1 / 2),
}
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

TimeLike = dt.datetime | float | int


def seconds(t: TimeLike) -> float:
    """Seconds since the Unix epoch (a naive datetime is taken as UTC)."""
    if isinstance(t, dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
        return t.timestamp()
    return float(t)


def _day(t: float) -> dt.date:
    return dt.datetime.fromtimestamp(t, dt.UTC).date()


# --------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRecord:
    """One statement of a query log.

    Give ``sql`` or ``template`` (with ``bindings``; ``None`` bindings = unknown, as from
    ``pg_stat_statements``). ``key``/``view``/``table`` (the plan's batch key, view and
    qualified table, as the proxy logs them) are informational: prediction re-plans the SQL
    with the current declaration, so a changed declaration cannot leave stale keys in P; a
    record that no longer plans is counted in :attr:`Prediction.unresolved`. ``outcome``
    (release / online / refused) is informational too: a refused statement still shows what
    the analysts ask. ``calls``: how many times it was asked (>= 1).
    """

    time: TimeLike
    analyst: str = ""
    session: str = ""
    sql: str | None = None
    template: str | None = None
    bindings: tuple[object, ...] | None = None
    key: str | None = None
    view: str | None = None
    table: str | None = None
    outcome: str = ""
    calls: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A record resolved through the rewriter: a bound DP statement (``plan``) or an unbound
    template (``plan`` None, ``bindings`` None)."""

    time: float
    calls: int
    analyst: str
    session: str
    sql: str
    template: str
    bindings: tuple[object, ...] | None
    plan: Plan | None
    rounded: bool = False
    #: :func:`canonical_key` of the plan's batch ("" without a plan).
    key: str = ""

    @property
    def ident(self) -> tuple[str, str, str] | None:
        """(table, view, canonical key): the same question whatever the order of its groups
        or the spelling of its conditions (what the engine matches P against: its rows)."""
        if self.plan is None:
            return None
        return (self.plan.table, self.plan.view, self.key)


def canonical_key(batch: QueryBatch) -> str:
    """A key of the *set* of a batch's rows: equal for statements that ask the same linear
    queries in another order (``GROUP BY b, a`` and ``GROUP BY a, b``) or with equivalent
    conditions (``age > 29`` and ``age >= 30`` give the same rows). The engine treats a batch
    as predicted when each of its rows is one of P's, so this is the key P is deduplicated by."""
    h = hashlib.sha256(repr(batch.domain).encode())
    for row in sorted(set(batch.row_keys())):
        h.update(len(row).to_bytes(8, "little"))
        h.update(row)
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# SQL literals and templates

_PLACEHOLDER = re.compile(r"\$(\d+)")
_COMPARISON = re.compile(r"\b([a-z_][a-z0-9_]*) (=|<>|<=|>=|<|>) \$(\d+)\b")


def sql_literal(value: object) -> str:
    """A PostgreSQL literal for a binding value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Fraction):
        value = (
            Decimal(value.numerator)
            if value.denominator == 1
            else Decimal(value.numerator) / Decimal(value.denominator)
        )
    if isinstance(value, Decimal | float):
        return format(Decimal(repr(value)) if isinstance(value, float) else value, "f")
    if isinstance(value, dt.date):
        return "'" + value.isoformat() + "'"
    return "'" + str(value).replace("'", "''") + "'"


def render(template: str, bindings: Sequence[object]) -> str:
    """The template's SQL with ``$n`` replaced by the literals of ``bindings``."""

    def sub(m: re.Match[str]) -> str:
        i = int(m.group(1)) - 1
        if not 0 <= i < len(bindings):
            raise ValueError("a placeholder has no binding")
        return sql_literal(bindings[i])

    return _PLACEHOLDER.sub(sub, template)


def placeholder_attributes(template: str) -> dict[int, tuple[str, str]]:
    """``{index: (attribute, operator)}`` of the placeholders compared with a column
    (0-based index), read from the normalised template text."""
    return {int(m.group(3)) - 1: (m.group(1), m.group(2)) for m in _COMPARISON.finditer(template)}


_CLAUSE_ON = {"WHERE", "HAVING"}
_CLAUSE_OFF = {"GROUP_BY", "ORDER_BY", "LIMIT", "OFFSET", "WINDOW", "FETCH", "UNION"}
_AFTER_OPERAND = {"VAR", "NUMBER", "STRING", "R_PAREN", "IDENTIFIER", "NULL", "TRUE", "FALSE"}


def parametrise(sql: str) -> tuple[str, tuple[object, ...]] | None:
    """Replace the literals of WHERE and HAVING by ``$n``: (text, values), or None.

    Numbers become ``int``/``Decimal`` (a leading unary minus is folded in), strings ``str``
    (a ``DATE``/``TIMESTAMP`` keyword before a string is dropped). Used to recover the template
    of a statement the rewriter refused because a literal cuts a bin.
    """
    toks = tokenize(sql)
    if toks is None or _PLACEHOLDER.search(sql):
        return None
    out: list[str] = []
    values: list[object] = []
    pos = 0
    on = False
    i = 0
    while i < len(toks):
        tok = toks[i]
        name = tok.token_type.name
        if name in _CLAUSE_ON:
            on = True
        elif name in _CLAUSE_OFF:
            on = False
        if on and name in ("NUMBER", "STRING"):
            start = tok.start
            if name == "NUMBER":
                text = tok.text
                value: object = int(text) if re.fullmatch(r"\d+", text) else Decimal(text)
                prev = toks[i - 1] if i >= 1 else None
                before = toks[i - 2] if i >= 2 else None
                if (
                    prev is not None
                    and prev.token_type.name == "DASH"
                    and (before is None or before.token_type.name not in _AFTER_OPERAND)
                ):
                    start = prev.start
                    value = -value  # type: ignore[operator]
            else:
                value = tok.text
                prev = toks[i - 1] if i >= 1 else None
                if prev is not None and prev.token_type.name in ("DATE", "TIMESTAMP"):
                    start = prev.start
            out.append(sql[pos:start])
            values.append(value)
            out.append(f"${len(values)}")
            pos = tok.end + 1
        i += 1
    if not values:
        return None
    out.append(sql[pos:])
    return "".join(out), tuple(values)


# --------------------------------------------------------------------------------------------
# bins


def _edges(attr: AttributeDecl) -> list[Fraction] | None:
    """Cell edges of an ordered attribute: values v such that ``x >= v`` / ``x < v`` never cut
    a bin (integer and date bins are closed ``[a, b]``: the edges are the ``a`` and ``b + 1``)."""
    if attr.kind in (Kind.CATEGORICAL, Kind.BOOLEAN) or not attr.bins:
        return None
    if attr.kind is Kind.NUMERIC:
        return [attr.bins[0][0], *(hi for _, hi in attr.bins)]
    return [attr.bins[0][0], *(hi + 1 for _, hi in attr.bins)]


def round_binding(attr: AttributeDecl, op: str, value: object) -> object | None:
    """``value`` moved outwards to the nearest bin edge for ``attr op value`` (None: cannot).

    Lower bounds (``>=``, ``>``) move down, upper bounds (``<``, ``<=``) move up, so the
    rounded range is the smallest bin-aligned range that covers the asked one. Equality on a
    bin wider than one value cannot be rounded. Integer and date bins are closed: ``<= v``
    becomes ``<= b`` with ``b`` the last value of a bin, ``> v`` becomes ``> b`` likewise.
    Values outside the domain are clamped to its first / last edge.
    """
    edges = _edges(attr)
    if edges is None or op in ("=", "<>") or value is None:
        return None
    try:
        if attr.kind is Kind.DATE:
            d = value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value).strip())
            v = Fraction(d.toordinal())
        else:
            v = Fraction(str(value)) if not isinstance(value, int) else Fraction(value)
    except (ValueError, TypeError, ArithmeticError):
        return None
    closed = attr.kind is not Kind.NUMERIC
    # ">" and "<=" on closed integer bins compare with the last value of a bin: edge - 1
    shift = 1 if closed and op in (">", "<=") else 0
    target = v + shift
    if op in (">=", ">"):
        cands = [e for e in edges if e <= target]
        e = cands[-1] if cands else edges[0]
    else:
        cands = [e for e in edges if e >= target]
        e = cands[0] if cands else edges[-1]
    e -= shift
    if attr.kind is Kind.DATE:
        return dt.date.fromordinal(int(e)).isoformat()
    if e.denominator == 1:
        return int(e)
    return Decimal(e.numerator) / Decimal(e.denominator)


# --------------------------------------------------------------------------------------------
# resolution through the rewriter


def _table_of(schema: Schema, qualified: str) -> Mapping[str, AttributeDecl] | None:
    name = qualified.rsplit(".", 1)[-1]
    t = schema.tables.get(name)
    return t.attributes if t is not None else None


def _bound(st: DPStatement, values: Sequence[object], schema: Schema) -> tuple[Plan, bool] | None:
    """Bind ``values``; when a literal cuts a bin, round the comparisons outwards once."""
    try:
        return bind(st, values), False
    except Exception:
        pass
    attrs = st.prepared.table.attributes
    rounded = list(values)
    changed = False
    for ti, (aname, op) in placeholder_attributes(st.prepared.template).items():
        attr = attrs.get(aname)
        b = st.prepared.bindings[ti] if ti < len(st.prepared.bindings) else None
        if attr is None or not isinstance(b, Param) or not 0 <= b.index < len(values):
            continue
        r = round_binding(attr, op, values[b.index])
        if r is not None and r != values[b.index]:
            rounded[b.index] = r
            changed = True
    if not changed:
        return None
    try:
        return bind(st, rounded), True
    except Exception:
        return None


class Resolver:
    """Resolve records through the rewriter, caching by SQL text (pure; deterministic)."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self._cache: dict[str, tuple[str, tuple[object, ...] | None, Plan | None, bool] | None] = {}
        self._keys: dict[str, str] = {}  # batch key -> canonical key
        self._templates: dict[str, DPStatement | None] = {}

    def statement(
        self, sql: str
    ) -> tuple[str, tuple[object, ...] | None, Plan | None, bool] | None:
        """(template, bindings, plan, rounded) of one SQL statement, or None."""
        if sql in self._cache:
            return self._cache[sql]
        res = self._resolve(sql)
        self._cache[sql] = res
        return res

    def instance(
        self, template: str, bindings: tuple[object, ...]
    ) -> tuple[str, tuple[str, tuple[object, ...] | None, Plan | None, bool] | None]:
        """The SQL of a template's instance and what :meth:`statement` makes of it, by
        binding the template's prepared statement (parsed once per template) rather than
        parsing each instance; the SQL text is resolved when the template does not bind.
        Raises ValueError when a placeholder has no binding."""
        sql = render(template, bindings)
        if sql in self._cache:
            return sql, self._cache[sql]
        if template not in self._templates:
            sts = classify(template, self.schema)
            st = sts[0] if len(sts) == 1 and isinstance(sts[0], DPStatement) else None
            self._templates[template] = st
        st = self._templates[template]
        got = _bound(st, bindings, self.schema) if st is not None else None
        if st is None or len(st.param_types) != len(bindings) or got is None:
            return sql, self.statement(sql)
        plan, rounded = got
        res = (plan.fingerprint.template, plan.fingerprint.bindings, plan, rounded)
        self._cache[sql] = res
        return sql, res

    def key_of(self, plan: Plan) -> str:
        """:func:`canonical_key` of the plan's batch (cached by the batch's key)."""
        key = self._keys.get(plan.batch.key)
        if key is None:
            key = self._keys[plan.batch.key] = canonical_key(plan.batch)
        return key

    def _resolve(self, sql: str) -> tuple[str, tuple[object, ...] | None, Plan | None, bool] | None:
        sts = classify(sql, self.schema)
        if len(sts) != 1:
            return None
        st = sts[0]
        if isinstance(st, DPStatement):
            if st.plan is not None and st.plan.batch.domain.derived:
                return None  # a question about units: answered online, never predicted
            if st.plan is not None:
                fp = st.plan.fingerprint
                return fp.template, fp.bindings, st.plan, False
            # placeholders without values: an unbound template
            return _fingerprint(st.prepared, ()).template, None, None, False
        if not isinstance(st, Refused):
            return None
        par = parametrise(sql)
        if par is None:
            return None
        text, values = par
        sts = classify(text, self.schema)
        if len(sts) != 1 or not isinstance(sts[0], DPStatement):
            return None
        pst = sts[0]
        if len(pst.param_types) != len(values):
            return None
        got = _bound(pst, values, self.schema)
        if got is None or got[0].batch.domain.derived:
            return None
        plan, rounded = got
        return plan.fingerprint.template, plan.fingerprint.bindings, plan, rounded

    def record(self, rec: LogRecord) -> Resolved | None:
        sql = rec.sql
        if sql is None and rec.template is not None:
            if rec.bindings is None:
                sql = rec.template
            else:
                try:
                    sql = render(rec.template, rec.bindings)
                except ValueError:
                    return None
        if sql is None:
            return None
        got = self.statement(sql)
        if got is None:
            return None
        template, bindings, plan, rounded = got
        key = self.key_of(plan) if plan is not None else ""
        return Resolved(
            time=seconds(rec.time),
            calls=max(1, int(rec.calls)),
            analyst=rec.analyst,
            session=rec.session,
            sql=sql,
            template=template,
            bindings=bindings,
            plan=plan,
            rounded=rounded,
            key=key,
        )


# --------------------------------------------------------------------------------------------
# prediction


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictConfig:
    """Parameters of :func:`predict` (all public; stored with the prediction).

    ``half_life``/``period``/``horizon`` in seconds (``period``: the window the recurrence of
    statements is measured in and predicted for; None: one day). ``min_occurrences``: calls a
    statement needs to be a candidate at all. ``epsilon``/``delta`` enable the error-aware cap
    (``rewriter.predict_cap``), priced with the epoch's ``accounting`` and, when ``split`` is
    given, that split (None: the cap chooses the Matrix Mechanism's share too);
    ``stream_length`` is S, the most fresh answers of the next epoch (None: from the log,
    ``rewriter.stream_length``).
    """

    half_life: float = 7 * DAY
    period: float | None = DAY
    horizon: float = DAY
    min_occurrences: int = 1
    min_probability: float = 0.0
    round_to_bins: bool = True
    slide_dates: bool = True
    instances: bool = True
    max_statements: int = 2048
    max_rows: int = 32768
    epsilon: float | None = None
    delta: float | None = None
    stream_length: int | None = None
    split: str | tuple[float, float, float, float] | None = None
    accounting: Literal["basic", "gdp", "pure"] = "gdp"
    #: the next epoch's pacing of its fresh answers (``dp.pacing``: steady in the default
    #: mode, static in the paper's), as the cap prices it
    allocation: Literal["steady", "static"] = "steady"
    #: the epoch's release weighs P's statements by their probability (the default mode's;
    #: paper mode optimises them alike), and the cap prices it so
    weighted: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictedQuery:
    """One predicted statement: SQL text, template + bindings, its plan's view and batch."""

    sql: str
    template: str
    bindings: tuple[object, ...]
    table: str
    view: str
    key: str
    batch: QueryBatch = field(repr=False)
    score: float
    probability: float
    occurrences: int
    reason: str  # exact | rounded | sliding | instance (of a template, never asked as such)
    windows: int = 0  # windows (days) in which it was asked
    analysts: int = 0  # distinct analysts who asked it


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewPrediction:
    """P for one view: its statements and the stacked batch for ``dp.engine.start``."""

    table: str
    view: str
    domain: Domain = field(repr=False)
    queries: tuple[PredictedQuery, ...]
    batch: QueryBatch = field(repr=False)
    expected_error: float | None = None  # per-row MSE of the MM release (unit: counts^2)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnboundTemplate:
    """A template seen without its bindings (``pg_stat_statements``): reported, not in P."""

    template: str
    calls: int
    attributes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """P, per view (marginal), and what the cap chose for the epoch: ``split`` (MM, badInit,
    bad, reserve; None without the error-aware cap), the predicted ``stream_length`` S,
    the expected MAE with P and with everything online, and how recurrence was learned."""

    now: float
    config: PredictConfig
    views: tuple[ViewPrediction, ...]
    unbound: tuple[UnboundTemplate, ...] = ()
    candidates: int = 0
    unresolved: int = 0
    split: tuple[float, float, float, float] | None = None
    stream_length: int | None = None
    #: E, the fresh answers the next epoch is expected to make (the steady pacing's)
    expected_fresh: int | None = None
    expected_mae: float | None = None
    online_only_mae: float | None = None
    recurrence: Recurrence | None = None
    #: every candidate's ``(table, view, key)`` in rank order, before the error-aware cap (the
    #: predictor's ranking, of which the cap keeps a prefix per table)
    ranked: tuple[tuple[str, str, str], ...] = field(default=(), repr=False)
    #: what the error-aware cap chose for each table, and why (``rewriter.predict_cap``)
    caps: Mapping[str, CapDecision] = field(default_factory=dict, repr=False)

    @property
    def expected_overlap(self) -> float | None:
        """The share of the next window's S distinct statements P is expected to cover
        (the sum of its probabilities, at most S, over S); None without S."""
        if not self.stream_length:
            return None
        return min(sum(q.probability for q in self.queries), self.stream_length) / (
            self.stream_length
        )

    @property
    def queries(self) -> tuple[PredictedQuery, ...]:
        return tuple(q for v in self.views for q in v.queries)

    @property
    def keys(self) -> frozenset[tuple[str, str, str]]:
        return frozenset((q.table, q.view, q.key) for q in self.queries)

    def batch(self, table: str, view: str) -> QueryBatch | None:
        """The predicted batch of a view (``table`` qualified or bare), or None."""
        for v in self.views:
            if v.view == view and (v.table == table or v.table.rsplit(".", 1)[-1] == table):
                return v.batch
        return None

    def sql_script(self) -> str:
        """P as a SQL script, one statement per line, grouped per view."""
        lines: list[str] = []
        for v in self.views:
            lines.append(f"-- {v.table} view {v.view}: {len(v.queries)} statements")
            for q in v.queries:
                lines.append(f"{q.sql};  -- p={q.probability:.2f} score={q.score:.2f} {q.reason}")
        return "\n".join(lines) + ("\n" if lines else "")


@dataclass(slots=True)
class _Group:
    ident: tuple[str, str, str]
    plan: Plan
    sql: str
    template: str
    bindings: tuple[object, ...]
    times: list[tuple[float, int]]
    reason: str
    analysts: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Recurrence:
    """How the statements of this log recur, learned from the log itself by a rolling-origin
    backtest (no formula tuned to dashboards).

    A statement's features at the start of a window: in how many earlier windows it was asked
    (1, 2, 3, 4 or more), by how many analysts (1, 2, 3 or more), and whether it was asked in
    the latest active window before (1/0). Every active window of the log with history before it
    is an *origin*: each statement asked before it counts once in its feature class, and is a
    *hit* when it is asked again in that window. ``probability(features)`` is then ``(hits + 2
    rate) / (seen + 2)``: the class's rate, shrunk towards the log's overall rate ``rate`` when
    the class is thin (a Beta prior of weight 2), and then by ``o / (o + 1)`` for ``o`` origins:
    the statements of one window recur together (a new task shares little with the last one, a
    refreshed dashboard everything), so the evidence is the number of windows, not of statements
    (one origin halves the rate; ten keep 91% of it). With no origin (a log of one window)
    nothing is known of recurrence across windows, and a statement asked ``c`` times gets ``c /
    (c + 3)`` (Laplace's rule with a sceptical prior): once 1/4, a refreshed dashboard's three
    times 1/2. Statements asked by *other* analysts count like one's own: on logs where users
    repeat each other's questions, the classes with several analysts learn that.

    The same origins calibrate the likely unseen instances of templates (:func:`_instances`).
    ``templates`` is the recurrence of the templates themselves (this class, learned on
    templates instead of statements). ``instance_rate`` is how often the instances the slot
    model proposes from a window's history were asked in the window, when their template was,
    against how often the model says: ``(hits + 1) / (expected + 1)`` (1 with no origin).
    """

    classes: Mapping[tuple[int, int, int], tuple[int, int]]  # features -> (hits, seen)
    rate: float
    origins: int
    #: per table and origin (in time order), how many of the window's distinct statements had
    #: been asked before it (what any P of earlier statements could have covered)
    repeats: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    #: the templates' own recurrence, and the instances' calibration (see above)
    templates: Recurrence | None = None
    instance_rate: float = 1.0
    instance_hits: int = 0
    instance_expected: float = 0.0

    def probability(self, features: tuple[int, int, int], calls: int = 1) -> float:
        if self.origins == 0:
            return calls / (calls + 3.0)
        hits, seen = self.classes.get(features, (0, 0))
        return (hits + 2.0 * self.rate) / (seen + 2.0) * self.origins / (self.origins + 1.0)


def _features(windows: int, analysts: int, recent: bool) -> tuple[int, int, int]:
    return min(windows, 4), min(analysts, 3), int(recent)


def recurrence(res: Sequence[Resolved], cfg: PredictConfig) -> Recurrence:
    """The :class:`Recurrence` of the resolved records (all before the predicted window): of
    their statements, and (with ``cfg.instances``) of their templates and instances."""
    period = cfg.period or DAY
    learned = _learn(res, period, lambda r: r.ident)
    if not cfg.instances or learned.origins == 0:
        return learned
    templates = _learn(res, period, _template_of)
    got, expected = _instance_backtest(res, templates, period)
    return replace(
        learned,
        templates=templates,
        instance_rate=(got + 1.0) / (expected + 1.0),
        instance_hits=got,
        instance_expected=expected,
    )


def _template_of(r: Resolved) -> tuple[str, str] | None:
    return None if r.plan is None else (r.plan.table, r.template)


def _learn(
    res: Sequence[Resolved],
    p: float,
    key: Callable[[Resolved], tuple[str, ...] | None],
) -> Recurrence:
    """The rolling-origin backtest of :class:`Recurrence` over windows of ``p`` seconds, for
    what ``key`` names (a statement, or a template; its first part is the table)."""
    by_window: dict[int, set[tuple[str, ...]]] = {}
    who: dict[tuple[int, tuple[str, ...]], set[str]] = {}
    for r in res:
        k = key(r)
        if k is not None:
            w = math.floor(r.time / p)
            by_window.setdefault(w, set()).add(k)
            who.setdefault((w, k), set()).add(r.analyst)
    seen: dict[tuple[str, ...], tuple[int, set[str], int]] = {}
    counts: dict[tuple[int, int, int], list[int]] = {}
    repeats: dict[str, list[int]] = {}
    origins = 0
    for rank, w in enumerate(sorted(by_window)):
        asked = by_window[w]
        if seen:
            origins += 1
            for ident in asked:
                if ident in seen:
                    row = repeats.setdefault(ident[0], [])
                    row += [0] * (origins - len(row))
                    row[-1] += 1
            for ident, (n, analysts, last) in seen.items():
                c = counts.setdefault(_features(n, len(analysts), last == rank - 1), [0, 0])
                c[1] += 1
                c[0] += ident in asked
        for ident in asked:
            n, analysts, _ = seen.get(ident, (0, set(), -1))
            seen[ident] = (n + 1, analysts | who[(w, ident)], rank)
    hits = sum(c[0] for c in counts.values())
    total = sum(c[1] for c in counts.values())
    return Recurrence(
        classes={k: (v[0], v[1]) for k, v in counts.items()},
        rate=hits / total if total else 0.5,
        origins=origins,
        repeats={t: tuple(n + [0] * (origins - len(n))) for t, n in repeats.items()},
    )


def _instance_backtest(
    res: Sequence[Resolved], templates: Recurrence, period: float
) -> tuple[int, float]:
    """At every origin, for each template of the window's history that the window asked, the
    unseen instances :func:`_instance_bindings` proposes from that history: how many of them
    the window asked, and how many the model expected (the sum of their probabilities given
    the template). By bindings, without planning them (the prediction plans its instances
    and drops the few that are no statement or already known)."""
    by_window: dict[int, list[Resolved]] = {}
    for r in res:
        if r.plan is not None and r.bindings:
            by_window.setdefault(math.floor(r.time / period), []).append(r)
    windows = sorted(by_window)
    history: dict[str, list[Resolved]] = {}
    hits, expected = 0, 0.0
    for rank, w in enumerate(windows):
        if history:
            asked: dict[str, set[tuple[object, ...] | None]] = {}
            for r in by_window[w]:
                asked.setdefault(r.template, set()).add(r.bindings)
            for template, here in asked.items():
                rs = history.get(template)
                if rs is None:
                    continue
                likely = _instance_bindings(rs, templates, windows[rank - 1], period)
                for pr, binding in likely.bindings[: likely.limit]:
                    expected += pr
                    hits += binding in here
        for r in by_window[w]:
            history.setdefault(r.template, []).append(r)
    return hits, expected


def _score(times: Sequence[tuple[float, int]], now: float, half_life: float) -> float:
    return float(sum(c * 2.0 ** (-(now - t) / half_life) for t, c in times))


def _probability(
    times: Sequence[tuple[float, int]], now: float, cfg: PredictConfig, score: float
) -> float:
    if cfg.period is None:
        return min(1.0, score / max(cfg.min_occurrences, 1))
    p = cfg.period
    now_period = math.floor(now / p)
    active = {math.floor(t / p) for t, _ in times if t < now}
    if not active:
        return 0.0
    spanned = max(now_period - min(active), 1)
    return min(1.0, len(active) / spanned)


def _sliding(
    res: Sequence[Resolved], schema: Schema, resolver: Resolver, now: float, cfg: PredictConfig
) -> list[tuple[Plan, str, float, int]]:
    """Sliding date windows: (plan, sql, days on which the shape was seen, occurrences)."""
    by_tmpl: dict[str, list[Resolved]] = {}
    for r in res:
        if r.plan is not None and r.bindings is not None:
            by_tmpl.setdefault(r.template, []).append(r)
    out: list[tuple[Plan, str, float, int]] = []
    for template, rs in sorted(by_tmpl.items()):
        attrs = _table_of(schema, rs[0].plan.table if rs[0].plan is not None else "")
        if attrs is None:
            continue
        dates = [
            i
            for i, (a, _) in sorted(placeholder_attributes(template).items())
            if a in attrs and attrs[a].kind is Kind.DATE
        ]
        if not dates:
            continue
        shapes: dict[tuple[tuple[str, object], ...], list[Resolved]] = {}
        for r in rs:
            assert r.bindings is not None
            try:
                day = _day(r.time).toordinal()
                key: tuple[tuple[str, object], ...] = tuple(
                    (
                        ("d", dt.date.fromisoformat(str(b)).toordinal() - day)
                        if i in dates
                        else ("v", b)
                    )
                    for i, b in enumerate(r.bindings)
                )
            except ValueError:
                continue
            shapes.setdefault(key, []).append(r)
        for key, group in sorted(shapes.items(), key=lambda kv: repr(kv[0])):
            if sum(g.calls for g in group) < cfg.min_occurrences:
                continue
            if len({_day(g.time) for g in group}) < 2:
                continue  # the same day twice: not a sliding window
            step = cfg.period or DAY
            n_steps = max(1, round(cfg.horizon / step))
            for k in range(n_steps):
                target = _day(now + k * step).toordinal()
                binds = [
                    dt.date.fromordinal(target + int(str(v))).isoformat() if tag == "d" else v
                    for tag, v in key
                ]
                sql = render(template, binds)
                got = resolver.statement(sql)
                if got is None or got[2] is None:
                    continue
                n_days = len({_day(g.time) for g in group})
                out.append((got[2], sql, n_days, sum(g.calls for g in group)))
    return out


#: Likely unseen instances of one template a prediction adds at most (and at most this
#: factor times the template's distinct instances seen).
INSTANCES_PER_TEMPLATE = 32
INSTANCE_FACTOR = 2


class _Unseen(NamedTuple):
    """One template's likely unseen instances (:func:`_instance_bindings`)."""

    probability: float  # the template's, of being asked in the next window
    limit: int  # how many are added at most: the first that plan as new statements
    #: (probability given the template, before the log's calibration; binding), most likely
    #: first
    bindings: list[tuple[float, tuple[object, ...]]]


def _instance_bindings(
    rs: Sequence[Resolved], templates: Recurrence, last_window: int, period: float
) -> _Unseen:
    """The likely unseen instances of the template of records ``rs`` (``templates``: the
    templates' recurrence)."""
    seen_bindings = {r.bindings for r in rs}
    limit = min(INSTANCES_PER_TEMPLATE, INSTANCE_FACTOR * len(seen_bindings))
    if len(seen_bindings) < 2:
        return _Unseen(0.0, limit, [])  # one instance: nothing to generalise from
    windows = {math.floor(r.time / period) for r in rs}
    t_prob = templates.probability(
        _features(len(windows), len({r.analyst for r in rs}), last_window in windows),
        sum(r.calls for r in rs),
    )
    per_window = len({(math.floor(r.time / period), r.bindings) for r in rs}) / len(windows)
    n_slots = len(rs[0].bindings or ())
    freqs: list[dict[object, float]] = []
    for i in range(n_slots):
        counts: dict[object, int] = {}
        for b in seen_bindings:
            assert b is not None
            counts[b[i]] = counts.get(b[i], 0) + 1
        total = sum(counts.values())
        freqs.append({v: c / total for v, c in counts.items()})
    top = max(2, math.ceil((4 * limit) ** (1.0 / max(n_slots, 1))))
    choices = [sorted(f.items(), key=lambda kv: (-kv[1], repr(kv[0])))[:top] for f in freqs]
    combos: list[tuple[float, tuple[object, ...]]] = []
    for combo in itertools.islice(itertools.product(*choices), 20_000):
        binding = tuple(v for v, _ in combo)
        if binding not in seen_bindings:
            q = math.prod(f for _, f in combo)
            combos.append((1.0 - (1.0 - q) ** per_window, binding))
    combos.sort(key=lambda c: (-c[0], repr(c[1])))
    return _Unseen(t_prob, limit, combos)


def _instances(
    res: Sequence[Resolved],
    learned: Recurrence,
    resolver: Resolver,
    known: set[tuple[str, str, str]],
    cfg: PredictConfig,
) -> list[tuple[Plan, str, str, tuple[object, ...], float]]:
    """Likely instances of the log's templates that were never asked as such.

    A template (a statement's shape with its literals as slots) recurs as the templates of
    the log do (``learned.templates``: :class:`Recurrence` learned on templates, by their
    windows and analysts). Its slots' values are modelled as independent, each with its
    frequency among the template's instances, and an instance ``b`` with probability ``q(b) =
    prod_i f_i(b_i)`` is asked in a window that asks the template with probability ``1 - (1 -
    q(b)) ** n``, where ``n`` is the mean number of the template's distinct instances per
    window. So a brush whose start and end were each seen often is likely even if the pair
    never was. That conditional probability is calibrated by the log (``instance_rate``: how
    often such instances were asked at the backtest's origins, against how often the model
    said), at most 1, and multiplied by the template's. The most likely are returned (at most
    :data:`INSTANCES_PER_TEMPLATE`, and :data:`INSTANCE_FACTOR` times the instances seen), as
    (plan, sql, template, bindings, probability); the cap decides which are worth measuring.
    """
    period = cfg.period or DAY
    last_window = max((math.floor(r.time / period) for r in res), default=0)
    by_tmpl: dict[str, list[Resolved]] = {}
    for r in res:
        if r.plan is not None and r.bindings:
            by_tmpl.setdefault(r.template, []).append(r)
    templates = learned.templates or learned  # (one window: no template recurrence learned)
    out: list[tuple[Plan, str, str, tuple[object, ...], float]] = []
    for template, rs in sorted(by_tmpl.items()):
        likely = _instance_bindings(rs, templates, last_window, period)
        added = 0
        for pr, binding in likely.bindings:
            if added >= likely.limit:
                break
            try:
                sql, got = resolver.instance(template, binding)
            except ValueError:
                continue
            if got is None or got[2] is None or got[2].batch.matrix.nnz == 0:
                continue  # not a statement, or one that reads no cell (an empty range)
            plan = got[2]
            ident = (plan.table, plan.view, resolver.key_of(plan))
            if ident in known:
                continue
            known.add(ident)
            p = likely.probability * min(1.0, pr * learned.instance_rate)
            out.append((plan, sql, template, binding, p))
            added += 1
    return out


def resolve(
    records: Iterable[LogRecord], schema: Schema, *, resolver: Resolver | None = None
) -> tuple[list[Resolved], int]:
    """Resolve records through the rewriter: (resolved, number that could not be);
    ``resolver``'s cache of statements by text is reused when given."""
    resolver = resolver or Resolver(schema)
    out: list[Resolved] = []
    bad = 0
    for rec in records:
        r = resolver.record(rec)
        if r is None:
            bad += 1
        else:
            out.append(r)
    return out, bad


def predict(
    records: Iterable[LogRecord],
    schema: Schema,
    *,
    now: TimeLike,
    config: PredictConfig | None = None,
    resolved: Sequence[Resolved] | None = None,
    resolver: Resolver | None = None,
) -> Prediction:
    """The predicted set P for the window starting at ``now`` (records after ``now`` are
    ignored). See the module doc for the method; ``resolved`` skips re-resolving records;
    ``resolver`` is reused (its cache of statements by text) when given."""
    from . import predict_cap

    cfg = config or PredictConfig()
    t_now = seconds(now)
    resolver = resolver or Resolver(schema)
    if resolved is None:
        res, unresolved = resolve(records, schema, resolver=resolver)
    else:
        res, unresolved = list(resolved), 0
    res = sorted((r for r in res if r.time < t_now), key=lambda r: r.time)
    got = _candidates(res, schema, t_now, cfg, resolver)
    kept = list(got.kept)
    order = tuple((q.table, q.view, q.key) for q in kept)
    caps: dict[str, predict_cap.CapDecision] = {}
    split: tuple[float, float, float, float] | None = None
    s_len = e_len = None
    mae = only_mae = None
    tables = sorted({r.plan.table for r in res if r.plan is not None})
    if cfg.epsilon is not None and cfg.delta is not None:
        model = predict_cap.EpochModel(
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            accounting=cfg.accounting,
            allocation=cfg.allocation,
        )
        logs: dict[float, dict[str, predict_cap.Log]] = {}

        def log_at(t: float, table: str) -> predict_cap.Log:
            if t not in logs:
                before = [r for r in res if r.time < t]
                at = got if t >= t_now else _candidates(before, schema, t, cfg, resolver)
                logs[t] = _logs(before, at)
            return logs[t].get(table) or predict_cap.Log(ranked=(), candidates={}, literal=())

        configured = SPLITS[cfg.split] if isinstance(cfg.split, str) else cfg.split
        cache = FactorCache()
        kept = []
        for table in tables:
            records_of = [
                (r.time, r.ident, r.plan.batch, r.key)
                for r in res
                if r.plan is not None and r.plan.table == table and r.ident is not None
            ]
            d = predict_cap.decide(
                table,
                now=t_now,
                window=cfg.horizon,
                records=records_of,
                log_at=lambda t, table=table: log_at(t, table),  # type: ignore[misc]
                model=model,
                split=configured,
                weighted=cfg.weighted,
                stream_length=cfg.stream_length,
                cache=cache,
            )
            caps[table] = d
            kept += [got.candidates[e.ident] for e in d.entries if e.ident in got.candidates]
            split, s_len, e_len = d.split, d.stream_length, d.expected_fresh
            mae, only_mae = d.mae, d.online_only_mae
    else:
        for table in tables:
            est = estimate(
                [r for r in res if r.plan is not None and r.plan.table == table],
                window=cfg.horizon,
                now=t_now,
            )
            if est is not None:
                s_len = cfg.stream_length or est.stream_length
                e_len = min(s_len, est.expected_fresh())
    per_view: dict[tuple[str, str], list[PredictedQuery]] = {}
    for q in kept:
        per_view.setdefault((q.table, q.view), []).append(q)
    views: list[ViewPrediction] = []
    for (table, view), qs in sorted(per_view.items()):
        views.append(
            ViewPrediction(
                table=table,
                view=view,
                domain=qs[0].batch.domain,
                queries=tuple(qs),
                batch=stack(q.batch for q in qs),
            )
        )
    return Prediction(
        now=t_now,
        config=cfg,
        views=tuple(views),
        unbound=got.unbound,
        candidates=len(got.candidates),
        unresolved=unresolved,
        split=split,
        stream_length=s_len,
        expected_fresh=e_len,
        expected_mae=mae,
        online_only_mae=only_mae,
        recurrence=got.learned,
        ranked=order,
        caps=caps,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Candidates:
    """The predictor's view of a log: every candidate by identity, those within the global
    caps in rank order (``kept``), the recurrence learned and the unbound templates."""

    candidates: Mapping[tuple[str, str, str], PredictedQuery]
    kept: tuple[PredictedQuery, ...]
    learned: Recurrence
    unbound: tuple[UnboundTemplate, ...]


def _candidates(
    res: Sequence[Resolved], schema: Schema, t_now: float, cfg: PredictConfig, resolver: Resolver
) -> _Candidates:
    """Every candidate of the log ``res`` (all before ``t_now``), ranked (module doc, steps
    1-3)."""
    groups: dict[tuple[str, str, str], _Group] = {}
    unbound: dict[str, list[Resolved]] = {}
    for r in res:
        if r.plan is None:
            unbound.setdefault(r.template, []).append(r)
            continue
        if r.rounded and not cfg.round_to_bins:
            continue
        ident = r.ident
        assert ident is not None and r.bindings is not None
        g = groups.get(ident)
        if g is None:
            g = _Group(
                ident=ident,
                plan=r.plan,
                sql=r.sql,
                template=r.template,
                bindings=r.bindings,
                times=[],
                reason="rounded" if r.rounded else "exact",
            )
            groups[ident] = g
        g.times.append((r.time, r.calls))
        g.analysts.add(r.analyst)
        if not r.rounded:  # prefer the latest text that was accepted as is
            g.sql, g.bindings, g.reason = r.sql, r.bindings, "exact"

    learned = recurrence(res, cfg)
    period = cfg.period or DAY
    last_window = max((math.floor(r.time / period) for r in res), default=0)
    cands: dict[tuple[str, str, str], PredictedQuery] = {}
    for g in groups.values():
        occ = sum(c for _, c in g.times)
        if occ < cfg.min_occurrences:
            continue
        sc = _score(g.times, t_now, cfg.half_life)
        windows = {math.floor(t / period) for t, _ in g.times}
        features = _features(len(windows), len(g.analysts), last_window in windows)
        pr = learned.probability(features, occ)
        sql = g.sql if g.reason == "exact" else render(g.template, g.bindings)
        cands[g.ident] = PredictedQuery(
            sql=sql,
            template=g.template,
            bindings=g.bindings,
            table=g.plan.table,
            view=g.plan.view,
            key=g.ident[2],
            batch=g.plan.batch,
            score=sc,
            probability=pr,
            occurrences=occ,
            reason=g.reason,
            windows=len(windows),
            analysts=len(g.analysts),
        )
    if cfg.slide_dates:
        # per template: probability from the days on which the sliding shape was seen
        for plan, sql, n_days, occ in _sliding(res, schema, resolver, t_now, cfg):
            ident = (plan.table, plan.view, resolver.key_of(plan))
            if ident in cands:
                continue
            span = [r.time for r in res if r.template == plan.fingerprint.template]
            days = max(1.0, (t_now - min(span)) / (cfg.period or DAY)) if span else 1.0
            pr = min(1.0, n_days / math.ceil(days))
            cands[ident] = PredictedQuery(
                sql=sql,
                template=plan.fingerprint.template,
                bindings=plan.fingerprint.bindings,
                table=plan.table,
                view=plan.view,
                key=ident[2],
                batch=plan.batch,
                score=float(occ),
                probability=pr,
                occurrences=occ,
                reason="sliding",
                windows=int(n_days),
            )

    if cfg.instances:
        for plan, sql, template, binding, pr in _instances(res, learned, resolver, set(cands), cfg):
            ident = (plan.table, plan.view, resolver.key_of(plan))
            cands[ident] = PredictedQuery(
                sql=sql,
                template=template,
                bindings=binding,
                table=plan.table,
                view=plan.view,
                key=ident[2],
                batch=plan.batch,
                score=0.0,
                probability=pr,
                occurrences=0,
                reason="instance",
            )
    ranked = sorted(
        (c for c in cands.values() if c.probability > 0 and c.probability >= cfg.min_probability),
        key=lambda q: (-q.probability, -q.score, q.view, q.sql),
    )
    kept: list[PredictedQuery] = []
    rows = 0
    for q in ranked:
        if len(kept) >= cfg.max_statements or rows + q.batch.num_queries > cfg.max_rows:
            continue
        kept.append(q)
        rows += q.batch.num_queries
    unb = tuple(
        UnboundTemplate(
            template=t,
            calls=sum(r.calls for r in rs),
            attributes=tuple(sorted({a for a, _ in placeholder_attributes(t).values()})),
        )
        for t, rs in sorted(unbound.items(), key=lambda kv: -sum(r.calls for r in kv[1]))
    )
    return _Candidates(candidates=cands, kept=tuple(kept), learned=learned, unbound=unb)


def _logs(res: Sequence[Resolved], got: _Candidates) -> dict[str, Log]:
    """Per table, what the cap weighs (``rewriter.predict_cap.Log``): the ranking, every
    candidate, and every earlier statement, the most recently asked first."""
    from .predict_cap import Entry, Log

    def entry(q: PredictedQuery) -> Entry:
        return Entry(
            ident=(q.table, q.view, q.key),
            batch=q.batch,
            probability=q.probability,
            template=q.template,
        )

    entries = {ident: entry(q) for ident, q in got.candidates.items()}
    latest: dict[tuple[str, str, str], float] = {}
    for r in res:
        if r.ident is not None and r.ident in entries:
            latest[r.ident] = r.time
    out: dict[str, Log] = {}
    tables = {q.table for q in got.candidates.values()}
    for table in tables:
        literal = sorted((i for i in latest if i[0] == table), key=lambda i: (-latest[i], i))
        out[table] = Log(
            ranked=tuple(entries[(q.table, q.view, q.key)] for q in got.kept if q.table == table),
            candidates={i: e for i, e in entries.items() if i[0] == table},
            literal=tuple(entries[i] for i in literal),
        )
    return out


def stack(batches: Iterable[QueryBatch]) -> QueryBatch:
    """The batches stacked, duplicate rows removed (the engine matches rows exactly)."""
    items = list(batches)
    m = sp.csr_array(sp.vstack([b.matrix for b in items], format="csr"))
    seen: set[tuple[bytes, bytes]] = set()
    keep: list[int] = []
    for i in range(m.shape[0]):
        a, b = m.indptr[i], m.indptr[i + 1]
        key = (m.indices[a:b].astype(np.int64).tobytes(), m.data[a:b].tobytes())
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return QueryBatch(items[0].domain, m[np.asarray(keep, dtype=np.intp)])


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateValue:
    """What one template of P is worth to the next epoch of its table (``lapras predict``).

    ``asked``/``instances``: its statements in P that the log asked, and its likely unseen
    instances; ``expected``: how many of them the next window is expected to ask (the sum of
    their probabilities); ``windows``/``analysts``: its recurrence, the most windows and
    analysts one of its statements was asked in and by; ``budget_share``: the share of the
    epoch's budget its part of the release costs (the Matrix Mechanism's share times the
    share of each block it is answered from, split among a block's statements by their weight
    in the block's workload: rows, times probability when the release is weighted);
    ``mae_with``/``mae_without``: the mean MAE of the cap's held-out windows with the kept
    policy's P, and with that P less this template's statements (the blocks they were in
    priced again; the split unchanged)."""

    table: str
    template: str
    asked: int
    instances: int
    expected: float
    windows: int
    analysts: int
    budget_share: float
    mae_with: float
    mae_without: float


def template_values(prediction: Prediction, *, limit: int = 8) -> tuple[TemplateValue, ...]:
    """The ``limit`` templates of each table's P that are expected to be asked most, each
    with what it is worth (:class:`TemplateValue`, ``rewriter.predict_cap.template_worth``).
    Empty without the error-aware cap, or where it kept no P."""
    from .predict_cap import EpochModel, template_worth

    cfg = prediction.config
    if cfg.epsilon is None or cfg.delta is None:
        return ()
    model = EpochModel(
        epsilon=cfg.epsilon, delta=cfg.delta, accounting=cfg.accounting, allocation=cfg.allocation
    )
    out: list[TemplateValue] = []
    for table, d in sorted(prediction.caps.items()):
        qs = [q for q in prediction.queries if q.table == table]
        for w in template_worth(d, model, cfg.weighted, limit=limit):
            members = [q for q in qs if q.template == w.template]
            if not members:
                continue
            inst = sum(q.reason == "instance" for q in members)
            out.append(
                TemplateValue(
                    table=table,
                    template=w.template,
                    asked=len(members) - inst,
                    instances=inst,
                    expected=sum(q.probability for q in members),
                    windows=max(q.windows for q in members),
                    analysts=max(q.analysts for q in members),
                    budget_share=w.budget_share,
                    mae_with=w.mae_with,
                    mae_without=w.mae_without,
                )
            )
    return tuple(out)


# --------------------------------------------------------------------------------------------
# backtest


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewReport:
    table: str
    view: str
    predicted: int
    statements: int  # later statements on this view (with repeats)
    distinct: int
    hits: int  # later statements whose batch is in P (with repeats)
    distinct_hits: int
    false_positives: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TableError:
    """The later window of one table answered by the model (``rewriter.predict_cap``) with
    the prediction's P, split, S and E, and with everything online."""

    table: str
    mae: float
    online_only_mae: float
    from_release: int
    refused: int
    online_refused: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BacktestReport:
    """``rho``: fraction of the later statements (with repeats) whose batch is in P;
    ``rho_distinct``: the same over distinct batches (what the stream length counts);
    ``false_positives``: entries of P never asked later (``false_positive_rate`` = / |P|)."""

    split: float
    train: int
    test: int
    predicted: int
    rho: float
    rho_distinct: float
    false_positives: int
    false_positive_rate: float
    mae: float | None
    online_only_mae: float | None
    views: tuple[ViewReport, ...]
    prediction: Prediction = field(repr=False)
    tables: tuple[TableError, ...] = ()

    def text(self) -> str:
        """A terminal-readable report."""
        lines = [
            f"backtest at {dt.datetime.fromtimestamp(self.split, dt.UTC).isoformat()}: "
            f"learned on {self.train} statements, checked on {self.test}",
            f"|P| = {self.predicted}   overlap rho = {self.rho:.3f} "
            f"(distinct {self.rho_distinct:.3f})   false positives = {self.false_positives} "
            f"({self.false_positive_rate:.1%} of P)",
        ]
        if self.mae is not None and self.online_only_mae is not None:
            lines.append(
                f"expected MAE: with P {self.mae:.2f}   everything online {self.online_only_mae:.2f}"
            )
        for t in self.tables:
            lines.append(
                f"{t.table}: {t.from_release} statement(s) from the release; refused for "
                f"budget {t.refused} (online only: {t.online_refused})"
            )
        lines.append("view | |P| | later | distinct | hits | false pos.")
        for v in self.views:
            lines.append(
                f"{v.table}.{v.view} | {v.predicted} | {v.statements} | {v.distinct} | "
                f"{v.hits} | {v.false_positives}"
            )
        return "\n".join(lines)


def evaluate(
    prediction: Prediction,
    later: Sequence[Resolved],
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    accounting: str = "gdp",
    allocation: Literal["steady", "static"] = "steady",
    split_time: float = 0.0,
    train: int = 0,
) -> BacktestReport:
    """Compare a prediction with the statements that came (see :class:`BacktestReport`); with
    ``epsilon``/``delta``, each table's later statements answered by the model
    (``rewriter.predict_cap.window_error``) with P (its release priced by
    ``dp.release_bound``) at the prediction's split, S and E, and with everything online."""
    from dp.release_bound import bound_release

    from .predict_cap import EpochModel, release_variances, split_for, window_error

    p_keys = prediction.keys
    per_view: dict[tuple[str, str], list[Resolved]] = {}
    for r in later:
        if r.plan is not None:
            per_view.setdefault((r.plan.table, r.plan.view), []).append(r)
    asked = {r.ident for r in later if r.ident is not None}
    total = sum(r.calls for rs in per_view.values() for r in rs)
    hits = sum(r.calls for rs in per_view.values() for r in rs if r.ident in p_keys)
    distinct = len(asked)
    dhits = len(asked & p_keys)
    fps = len(p_keys - asked)
    views: list[ViewReport] = []
    for tv in sorted(set(per_view) | {(v.table, v.view) for v in prediction.views}):
        rs = per_view.get(tv, [])
        vp = next((v for v in prediction.views if (v.table, v.view) == tv), None)
        vkeys = {(q.table, q.view, q.key) for q in vp.queries} if vp is not None else set()
        seen = {r.ident for r in rs}
        views.append(
            ViewReport(
                table=tv[0],
                view=tv[1],
                predicted=len(vkeys),
                statements=sum(r.calls for r in rs),
                distinct=len(seen),
                hits=sum(r.calls for r in rs if r.ident in vkeys),
                distinct_hits=len(seen & vkeys),
                false_positives=len(vkeys - seen),
            )
        )
    errors: list[TableError] = []
    mae_num = mae_only = rows_total = 0.0
    if epsilon is not None and delta is not None:
        model = EpochModel(
            epsilon=epsilon, delta=delta, accounting=accounting, allocation=allocation
        )
        for table in sorted({tv[0] for tv in per_view}):
            stream: list[tuple[tuple[str, str, str], QueryBatch]] = []
            seen_ids: set[tuple[str, str, str]] = set()
            for r in sorted(later, key=lambda r: r.time):
                ident = r.ident
                if r.plan is not None and r.plan.table == table and ident not in seen_ids:
                    assert ident is not None
                    seen_ids.add(ident)
                    stream.append((ident, r.plan.batch))
            d = prediction.caps.get(table)
            split = prediction.split or split_for(0.5)
            s_len = prediction.stream_length or max(1, len(stream))
            e_len = prediction.expected_fresh or s_len
            e_none = s_len
            if d is not None:
                s_len, e_len, split = d.stream_length, d.expected_fresh, d.split
                e_none = d.online_expected_fresh
            mine = [q for q in prediction.queries if q.table == table]
            release: dict[tuple[str, str, str], np.ndarray] = {}
            if mine:
                blocks = bound_release(
                    [q.batch for q in mine],
                    laplace=accounting == "pure",
                    weights=[q.probability for q in mine] if prediction.config.weighted else None,
                )
                idents = {id(q.batch): (q.table, q.view, q.key) for q in mine}
                release = release_variances(blocks, idents, model, split[0], s_len)
            with_p = window_error(
                model, stream, release, split, stream_length=s_len, expected=e_len
            )
            online = window_error(model, stream, {}, split, stream_length=s_len, expected=e_none)
            errors.append(
                TableError(
                    table=table,
                    mae=with_p.mae,
                    online_only_mae=online.mae,
                    from_release=with_p.released,
                    refused=with_p.refused,
                    online_refused=online.refused,
                )
            )
            if with_p.rows and online.rows:
                rows = float(sum(b.num_queries for _, b in stream))
                mae_num += with_p.mae * rows
                mae_only += online.mae * rows
                rows_total += rows
    n_p = len(p_keys)
    return BacktestReport(
        split=split_time,
        train=train,
        test=total,
        predicted=n_p,
        rho=hits / total if total else 0.0,
        rho_distinct=dhits / distinct if distinct else 0.0,
        false_positives=fps,
        false_positive_rate=fps / n_p if n_p else 0.0,
        mae=mae_num / rows_total if rows_total else None,
        online_only_mae=mae_only / rows_total if rows_total else None,
        views=tuple(views),
        prediction=prediction,
        tables=tuple(errors),
    )


def backtest(
    records: Iterable[LogRecord],
    split_time: TimeLike,
    schema: Schema,
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    config: PredictConfig | None = None,
    end_time: TimeLike | None = None,
    error_cap: bool = True,
    resolver: Resolver | None = None,
) -> BacktestReport:
    """Learn on the records before ``split_time``, report on those in ``[split, end)``.

    ``epsilon``/``delta`` price the report's expected errors; with ``error_cap`` they also
    turn on the error-aware cap of the prediction (when ``config`` has none)."""
    cfg = config or PredictConfig()
    if error_cap and epsilon is not None and cfg.epsilon is None:
        cfg = replace(cfg, epsilon=epsilon, delta=delta)
    t_split = seconds(split_time)
    t_end = seconds(end_time) if end_time is not None else math.inf
    resolver = resolver or Resolver(schema)
    res, bad = resolve(records, schema, resolver=resolver)
    train = [r for r in res if r.time < t_split]
    test = [r for r in res if t_split <= r.time < t_end]
    pred = predict((), schema, now=t_split, config=cfg, resolved=train, resolver=resolver)
    pred = replace(pred, unresolved=bad)
    return evaluate(
        pred,
        test,
        epsilon=epsilon,
        delta=delta,
        accounting=cfg.accounting,
        allocation=cfg.allocation,
        split_time=t_split,
        train=sum(r.calls for r in train),
    )


# --------------------------------------------------------------------------------------------
# parsers (pure: text in, records out)


def parse_sql_file(text: str, *, time: TimeLike = 0.0, step: float = 1.0) -> list[LogRecord]:
    """A file of SQL statements (split on ``;`` outside strings/comments): one record each,
    at ``time``, ``time + step``, ... (a dashboard's queries have no timestamps; give the time
    of the dashboard's refresh)."""
    t0 = seconds(time)
    return [
        LogRecord(time=t0 + i * step, sql=p.text)
        for i, p in enumerate(split_statements(text))
        if p.text.strip()
    ]


def parse_pg_stat_statements(
    rows: Iterable[Mapping[str, object]] | str, *, time: TimeLike = 0.0
) -> list[LogRecord]:
    """``pg_stat_statements`` rows (mappings with ``query`` and ``calls``, optionally
    ``userid``/``rolname``) or their CSV export text (header ``query,calls,...``).

    Each row becomes one record with ``template`` = the normalised text and ``bindings`` None
    (constants were replaced by ``$n``), weighted by ``calls``. What can be predicted from it:
    statements without placeholders exactly; templates with placeholders only as
    :class:`UnboundTemplate` (with their call counts and constrained attributes). There are no
    timestamps: every row gets ``time``.
    """
    if isinstance(rows, str):
        header, *body = _csv_rows(rows) or [[]]
        rows = [dict(zip(header, r, strict=False)) for r in body if r]
    t0 = seconds(time)
    out: list[LogRecord] = []
    for row in rows:
        q = row.get("query")
        if not isinstance(q, str) or not q.strip():
            continue
        try:
            calls = int(str(row.get("calls", 1)))
        except ValueError:
            calls = 1
        who = row.get("rolname", row.get("userid", ""))
        tmpl = q.strip().rstrip(";")
        has_params = bool(_PLACEHOLDER.search(tmpl))
        out.append(
            LogRecord(
                time=t0,
                analyst=str(who) if who is not None else "",
                template=tmpl,
                bindings=None if has_params else (),
                calls=max(1, calls),
            )
        )
    return out


#: The columns of PostgreSQL's csvlog (PostgreSQL 13-17; 14+ adds backend_type, leader_pid,
#: query_id at the end -- extra columns are ignored, missing ones are empty).
CSVLOG_COLUMNS = (
    "log_time",
    "user_name",
    "database_name",
    "process_id",
    "connection_from",
    "session_id",
    "session_line_num",
    "command_tag",
    "session_start_time",
    "virtual_transaction_id",
    "transaction_id",
    "error_severity",
    "sql_state_code",
    "message",
    "detail",
    "hint",
    "internal_query",
    "internal_query_pos",
    "context",
    "query",
    "query_pos",
    "location",
    "application_name",
    "backend_type",
    "leader_pid",
    "query_id",
)
_STATEMENT = re.compile(
    r"^(?:duration: [0-9.]+ ms\s+)?(?:statement|execute [^:]*): (.*)$", re.DOTALL
)
_PARAMS = re.compile(r"\$(\d+) = (NULL|'(?:[^']|'')*')")


def _csv_rows(text: str) -> list[list[str]]:
    """The rows of CSV text (a csvlog, a pg_stat_statements export), with any line ending.
    A field longer than the csv module's limit (128 KiB by default: a long statement; the
    proxy accepts up to 16 MiB) is a valid field: the limit, the process's, is raised while
    this text is read, then restored."""
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, len(text)))
    try:
        return list(csv.reader(io.StringIO(text, newline="")))
    finally:
        csv.field_size_limit(limit)


def _csvlog_time(text: str) -> float | None:
    # "2026-11-29 16:01:00.123 UTC" or "... +01" / "... -05:30"; a zone abbreviation other
    # than an offset (UTC, GMT, CET, ...) is taken as UTC: set log_timezone = 'UTC'.
    m = re.match(
        r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)(?: ([A-Za-z]+|[+-]\d\d(?::?\d\d)?))?", text
    )
    if m is None:
        return None
    try:  # a time that is not one (month 13, an offset of 99 hours): the row is skipped
        base = dt.datetime.fromisoformat(m.group(1))
        tz = m.group(2)
        if tz and (tz[0] in "+-"):
            sign = 1 if tz[0] == "+" else -1
            digits = tz[1:].replace(":", "")
            off = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
            return base.replace(tzinfo=dt.timezone(sign * off)).timestamp()
        return base.replace(tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None


def parse_csvlog(text: str, *, include_errors: bool = False) -> list[LogRecord]:
    """PostgreSQL csvlog text: one record per ``statement: ...`` (``log_statement``) or
    ``duration: ... statement/execute ...: ...`` (``log_min_duration_statement``) message.

    Extended-protocol ``execute <name>: <sql with $n>`` lines take their bindings from the
    ``parameters: $1 = '...'`` detail when present. Rows with severity ERROR/FATAL are skipped
    unless ``include_errors`` (their statement appears in the ``query`` column anyway).
    Time = ``log_time``, analyst = ``user_name``, session = ``session_id``. A row whose
    ``log_time`` is not a time is skipped, as a row with another message is.
    """
    out: list[LogRecord] = []
    for row in _csv_rows(text):
        if len(row) < 14:
            continue
        rec = dict(zip(CSVLOG_COLUMNS, row, strict=False))
        sev = rec.get("error_severity", "")
        if sev in ("ERROR", "FATAL", "PANIC") and not include_errors:
            continue
        m = _STATEMENT.match(rec.get("message", ""))
        if m is None:
            continue
        t = _csvlog_time(rec.get("log_time", ""))
        if t is None:
            continue
        sql = m.group(1).strip()
        detail = rec.get("detail", "")
        params = dict(_PARAMS.findall(detail)) if detail.startswith("parameters:") else {}
        if _PLACEHOLDER.search(sql) and params:
            values = [params.get(str(i + 1)) for i in range(len(params))]
            binds = tuple(
                None if v is None or v == "NULL" else v[1:-1].replace("''", "'") for v in values
            )
            out.append(
                LogRecord(
                    time=t,
                    analyst=rec.get("user_name", ""),
                    session=rec.get("session_id", ""),
                    template=sql.rstrip(";"),
                    bindings=binds,
                )
            )
            continue
        for p in split_statements(sql):
            out.append(
                LogRecord(
                    time=t,
                    analyst=rec.get("user_name", ""),
                    session=rec.get("session_id", ""),
                    sql=p.text,
                )
            )
    return out


__all__ = [
    "CSVLOG_COLUMNS",
    "DAY",
    "BacktestReport",
    "LogRecord",
    "PredictConfig",
    "PredictedQuery",
    "Prediction",
    "Recurrence",
    "Resolved",
    "Resolver",
    "TableError",
    "TemplateValue",
    "UnboundTemplate",
    "ViewPrediction",
    "ViewReport",
    "backtest",
    "canonical_key",
    "evaluate",
    "parametrise",
    "parse_csvlog",
    "parse_pg_stat_statements",
    "parse_sql_file",
    "placeholder_attributes",
    "predict",
    "recurrence",
    "render",
    "resolve",
    "round_binding",
    "seconds",
    "sql_literal",
    "template_values",
]
