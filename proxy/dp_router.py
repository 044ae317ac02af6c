"""The statement router of the product: the rewriter decides, the epoch service answers.

It plugs into the wire's one seam (:class:`proxy.wire.router.StatementRouter`):

- catalogue, session and unprotected statements are relayed to the backend's passthrough role
  (rewritten first when they would read statistics of protected tables);
- zero-row probes are answered with the columns and no rows;
- refused statements get the rewriter's typed error (42501, 0A000, 42601, ...);
- DP aggregates are answered by :class:`proxy.epochs.EpochService`: result types come from the
  backend's own Describe of the same SQL (exactly what PostgreSQL would return), and a NOTICE
  says how the answer was made, what it cost and its standard error. One in a wrapper
  (``COPY (...) TO STDOUT``, ``DECLARE ... CURSOR FOR``, ``PREPARE ... AS``) is answered the
  same way; the route carries the wrapper, which the session delivers (proxy.wire.local).

``SHOW LAPRAS BUDGET | EPOCHS | RELEASES`` are answered locally for users declared
``admin = true`` (read-only admin views, :mod:`proxy.admin`); others get 42501.

Every statement on a protected table goes to the query log (template, bindings, outcome; the
raw SQL only when configured), which ``lapras predict`` reads.

Classification is pure Python (sqlglot and the rewriter's passes): a new text that may name a
protected table, or one longer than ``off_loop_chars``, is classified in a worker process
(:mod:`proxy.dp_workers`), so that the event loop keeps serving every other session
meanwhile and no statement holds the others' DP work; the others (catalogue and session
traffic) are classified at once; routes are cached by text.

The rewriter's work of each execution of a DP statement runs in the worker processes too:
binding a prepared statement's parameters (``rewriter.bind``), and the rows and NOTICE of an
answer of more than :data:`LOOP_QUERIES` linear queries (``rewriter.postprocess``,
:func:`describe_answer`). Each piece is limited in time and memory (``[server]
dp_statement_timeout``, ``dp_statement_memory``): one predicted above the time limit is
refused before it starts (54000, :mod:`rewriter.cost`), one that runs past a limit is stopped
(57014, 53200). The event loop keeps the I/O, the routing, the engine's answers (the state
machine's own, :mod:`proxy.epochs`), and what costs less than a trip to a worker and back: an
exact repeat answered from the read callback (``execute_now``: the stored answer, no noise),
and the rows of a small answer. Bound plans are kept by statement and parameter values
(public: what the analyst sent), so that an exact repeat of a prepared statement is found
without binding it again (docs/benchmarks.md, "DP answers off the event loop").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, TypeVar
from uuid import UUID

import numpy as np
import psycopg

import rewriter
from dp import engine
from dp.errors import InternalError, LaprasError
from proxy import accuracy, admin, composing
from proxy.dp_workers import (
    SETTING,
    SLIM_CHARS,
    DPWorkers,
    StatementTimeout,
    WorkerLimits,
    WorkerOutOfMemory,
    bind_text,
    classify_text,
)
from proxy.epochs import Answer, EpochService
from proxy.errors import InsufficientPrivilege
from proxy.ledger import unavailable_error
from proxy.wire.router import (
    RELAY,
    AnswerLocally,
    Column,
    Execution,
    LocalResult,
    Notice,
    Refuse,
    Relay,
    Route,
    SessionInfo,
    StatementInfo,
)
from rewriter import cost
from rewriter.schema import TableDecl

log = logging.getLogger("lapras.router")
_T = TypeVar("_T")

#: Statements longer than this (characters) are classified in the worker thread. Below it a
#: worst-case statement takes up to about 150 ms on the loop, once (its route is cached);
#: the longest statements clients send by themselves (asyncpg's type introspection, 7.6 KiB)
#: stay below it, cached and relayed from the read callback.
OFF_LOOP_CHARS = 16 * 1024
#: The query log's default retention ([privacy] query_log_days, query_log_rows) and how often
#: it is applied (seconds, at most).
LOG_DAYS, LOG_ROWS = 90.0, 1_000_000
PRUNE_INTERVAL = 60.0
#: Answers of at most this many linear queries get their rows and NOTICE on the event loop
#: (tens of microseconds, less than the trip to the worker); larger ones in the worker.
LOOP_QUERIES = 8
#: A binding predicted under this much work (rewriter.cost units: about 1 ms), of a statement
#: of at most this many characters, is made on the event loop: a trip to a worker process
#: and back costs the serving process about 0.3 ms of its interpreter, twice a small binding.
INLINE_UNITS, INLINE_CHARS = 2_000, SLIM_CHARS
#: Bound plans kept (by statement and parameters): at most this many, holding at most this
#: many non-zero weights in all; a bigger plan is not kept.
PLANS, PLAN_WEIGHTS = 1024, 4_000_000
#: Parameter values a bound plan is kept for (their ``repr`` tells equal values apart exactly).
_KEYED: frozenset[type] = frozenset(
    (type(None), bool, int, float, str, bytes, Decimal, dt.date, dt.datetime, dt.time)
) | {dt.timedelta, UUID}

_INTERNAL = "internal error in the LAPRAS proxy; see the server log"

_HOW = {
    engine.DecisionKind.REPEAT: "a repeat of an earlier answer (the stored answer; no budget spent)",
    engine.DecisionKind.MATRIX: "answered from the Matrix Mechanism release of the predicted queries (no budget spent)",
    engine.DecisionKind.STORED: "answered from earlier releases (no budget spent)",
    engine.DecisionKind.FRESH: "answered online with fresh noise",
}
#: What every answer that spent nothing says when the sources are not revealed: whether a
#: statement was predicted, or asked before, is then not told ([privacy] reveal_sources).
_EARLIER = "answered from earlier releases (no budget spent)"


def describe_answer(
    answer: Answer, plan: rewriter.Plan | None = None, *, reveal: bool = False, unit: str = ""
) -> Notice:
    """The NOTICE sent with a DP answer: how it was made, what it cost, each aggregate's own
    error (the 95% interval of a MIN, MAX, percentile or COUNT(DISTINCT), the standard error
    of the others; from public noise scales and the noisy answers only), and ``unit``, what
    the bound on each privacy unit's rows does to the answer (:func:`unit_note`). Unless
    ``reveal``, an answer that spent nothing says only that it came from earlier releases:
    not whether the statement was predicted (asked in the log the prediction read) or is a
    repeat (asked before in this epoch, perhaps by a colleague)."""
    st = answer.status
    per: list[str] = []
    if plan is not None and answer.std_errors:
        names = [c.name for c in plan.columns]
        for label, low, high in rewriter.aggregate_errors(
            plan, answer.answers, answer.std_errors, names
        ):
            per.append(f"{label} {_range(low, high)}")
    stats = _statistic_intervals(answer, plan)
    if per:
        se = "standard error " + ", ".join(per)
    elif not answer.std_errors:
        se = "no values"
    elif stats:
        se = ""
    else:
        se = "standard error " + _range(min(answer.std_errors), max(answer.std_errors)) + " per row"
    se = "; ".join(x for x in (unit, stats, se) if x)
    spent = ""
    if answer.charge > 0:
        spent = f"; spent {answer.charge:.4g} {st.unit}"
    how = _HOW[answer.kind] if reveal or answer.kind is engine.DecisionKind.FRESH else _EARLIER
    message = f"LAPRAS: {how}{spent}; {se}."
    detail = (
        f"Budget spent {st.spent:.4g} of {st.total:.4g} {st.unit} "
        f"({100 * st.spent / st.total:.1f}%); online releases {st.online_releases} of {st.stream_length}; "
        f"stream position {st.position}; {next_fresh(st)}."
    )
    return Notice(message=message, detail=detail)


def next_fresh(st: engine.BudgetStatus) -> str:
    """What the next fresh answer of the epoch will be worth (public: the pacing's next
    charge), for the NOTICE's budget sentence."""
    if st.next_std_error is None:
        return "no further fresh answers"
    return f"next fresh answer: standard error of a count {st.next_std_error:.4g}"


def _statistic_intervals(answer: Answer, plan: rewriter.Plan | None) -> str:
    if plan is None or not answer.std_errors:
        return ""
    names = [c.name for c in plan.columns]
    found = rewriter.histogram_intervals(plan, answer.answers, answer.std_errors, names)
    return "95% interval " + ", ".join(found) if found else ""


def unit_note(table: TableDecl) -> str:
    """What a user-level table's bound does to every answer over it (public: the
    declaration); "" for a row-level table."""
    unit = table.unit
    if unit is None:
        return ""
    bound = unit.contribution
    cell = f", at most {bound.per_cell} of them in one cell" if bound.per_cell < bound.rows else ""
    return (
        f"each {unit.column} counts with at most {bound.rows} of its rows{cell} "
        f"(max_rows_per_unit): a count or sum leaves out the rows beyond that, so it is below "
        f"the table's own when a {unit.column} has more"
    )


def _range(low: float, high: float) -> str:
    return f"{high:.4g}" if high - low <= 1e-6 * max(high, 1e-300) else f"{low:.4g} to {high:.4g}"


PUBLIC_NOTICE = Notice(
    message="LAPRAS: answered from the declared public values of the columns (no budget spent)."
)


def _route_of(st: rewriter.Statement) -> Route:
    if isinstance(st, rewriter.Passthrough):
        return Relay(sql=st.sql) if st.rewritten else RELAY
    if isinstance(st, rewriter.Refused):
        return Refuse(st.error)
    if isinstance(st, rewriter.ZeroRowProbe):
        return AnswerLocally(result=LocalResult(rows=()))
    columns = tuple(Column(name=c.name, type_oid=c.type_oid) for c in st.columns)
    if st.wrapper is not None:
        # COPY, DECLARE, PREPARE: the backend could only describe the wrapper (no columns),
        # so the rewriter's columns and parameter types are the carried statement's.
        return AnswerLocally(
            plan=st,
            columns=columns,
            describe_upstream=False,
            wrapper=st.wrapper,
            param_oids=st.param_types,
        )
    if st.needs_params:
        # Parameter types: the backend's own inference (asyncpg, pg8000 Describe first).
        return AnswerLocally(plan=st)
    # The rewriter knows the result columns exactly as PostgreSQL types them (checked
    # against the backend by the exactness tests): no Describe round trip to the backend.
    return AnswerLocally(plan=st, columns=columns, describe_upstream=False)


def _one(sql: str, statements: list[rewriter.Statement]) -> tuple[rewriter.Statement, Route]:
    """The statement of a classified text (a Parse carries one) and its route."""
    if len(statements) == 1:
        st = statements[0]
    elif not statements:
        st = rewriter.Passthrough(sql=sql)  # an empty query: the backend answers it
    else:
        st = rewriter.Refused(
            sql=sql,
            error=rewriter.UnsupportedError(
                "several statements in one prepared statement are not accepted",
                hint="send one statement per Parse",
            ),
        )
    return st, _route_of(st)


class DPRouter:
    """Routes every statement with the rewriter and answers DP statements through epochs."""

    def __init__(
        self,
        service: EpochService,
        *,
        log_sql: bool = False,
        cache_size: int = 512,
        admins: frozenset[str] = frozenset(),
        log_interval: float = 0.1,
        off_loop_chars: int = OFF_LOOP_CHARS,
        log_retention: tuple[float, int] = (LOG_DAYS, LOG_ROWS),
        reveal_sources: bool = False,
        limits: WorkerLimits | None = None,
    ) -> None:
        """``log_interval``: seconds the query log gathers records before one write;
        ``off_loop_chars``: statements longer than this are classified in the worker thread;
        ``log_retention``: the query log keeps rows at most this many days, and at most this
        many rows (pruned at most every :data:`PRUNE_INTERVAL` seconds, after a write);
        ``reveal_sources``: NOTICEs say whether an answer came from the predicted release or
        is a repeat (:func:`describe_answer`); ``limits``: the worker processes' number and
        limits (``[server] dp_workers``, ``dp_statement_timeout``, ``dp_statement_memory``)."""
        self.service = service
        # the admin views' sources; the server sets the pools' (see proxy.app)
        self.admin_sources = admin.AdminSources(service)
        self.reveal_sources = reveal_sources
        self.log_interval = log_interval
        self.log_retention = log_retention
        self._pruned_at = -math.inf
        self.log_sql = log_sql
        self.admins = admins
        # by the session's TimeZone and the text (_key)
        self._cache: OrderedDict[str, tuple[rewriter.Statement, Route]] = OrderedDict()
        self._cache_size = cache_size
        self._pending: list[dict[str, Any]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.off_loop_chars = off_loop_chars
        # the rewriter's work for DP statements (classifying, binding, rows): proxy.dp_workers
        self.workers = DPWorkers(service.schema, limits)
        self._composing: ThreadPoolExecutor | None = None  # composed statements' plans
        # bound plans of prepared DP statements, by (id(statement), parameters); the statement
        # is kept with its plan so that its id stays its own (event loop only)
        self._plans: OrderedDict[
            tuple[int, tuple[tuple[type, str], ...]], tuple[rewriter.DPStatement, rewriter.Plan]
        ] = OrderedDict()
        self._plan_weights = 0

    def _classified(self, sql: str, zone: str = "UTC") -> tuple[rewriter.Statement, Route]:
        """The classification of one statement and its route, cached by text and the
        session's TimeZone (both are pure functions of them)."""
        key = _key(sql, zone)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        hit = self._classify(sql, zone)
        self._remember(key, hit)
        return hit

    def _remember(self, key: str, hit: tuple[rewriter.Statement, Route]) -> None:
        self._cache[key] = hit
        self._cache.move_to_end(key)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _classify(self, sql: str, zone: str = "UTC") -> tuple[rewriter.Statement, Route]:
        """The classification of one statement and its route (pure); ``zone``: the
        session's TimeZone."""
        return _one(sql, rewriter.classify(sql, self.service.schema, time_zone=zone))

    async def start(self) -> None:
        """Start the worker processes (before the port accepts anything)."""
        await self.workers.start()

    def route(self, statement: StatementInfo) -> Route | Awaitable[Route]:
        """Decided without waiting when the route is cached or the statement certainly names
        nothing protected (catalogue and session traffic: the relay's fast lane). A statement
        that may name a protected table is classified in a worker process the first time
        (its expressions are evaluated over the declared domains: seconds at worst, which
        must not hold the event loop; proxy.dp_workers), then cached; one longer than
        ``off_loop_chars`` is classified there and not cached (the cache would keep big
        texts and their classification). A refusal by the predicted work (54000,
        rewriter.cost) is cached like any refusal; a timeout (57014) is not."""
        sql = statement.sql
        refusal = _observe_settings(statement)
        if refusal is not None:
            return refusal
        zone = statement.session.time_zone
        command = admin.parse(sql)
        if command is not None:
            return self._admin_route(statement, command)
        user = statement.session.user
        target = accuracy.preview_target(sql)
        if target is not None:
            return self._preview_route(sql, user, *target, zone=zone)
        if len(sql) > self.off_loop_chars:
            return self._route_off_loop(sql, user, zone, cache=False)
        key = _key(sql, zone)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit[1]
        if rewriter.may_name_protected(sql, self.service.schema):
            return self._route_off_loop(sql, user, zone, cache=True)
        return self._classified(sql, zone)[1]

    async def _preview_route(
        self, sql: str, user: str, kind: accuracy.PreviewKind, inner: str, zone: str = "UTC"
    ) -> Route:
        """``EXPLAIN <stmt>`` / ``SELECT lapras.cost('<stmt>')``: a cost preview when ``stmt``
        is a DP statement (answered here, :mod:`proxy.accuracy`); else EXPLAIN is routed as
        before, and ``lapras.cost`` of anything else is refused."""
        hit = self._cache.get(_key(inner, zone))
        if hit is None:
            statements = await self.workers.run(
                classify_text, inner, self.service.schema, zone,
                user=user, units=cost.text_units(inner),
            )  # fmt: skip
            hit = _one(inner, statements)
            self._remember(_key(inner, zone), hit)
        st = hit[0]
        if isinstance(st, rewriter.DPStatement) and st.wrapper is None:
            explain = kind == "explain"
            return AnswerLocally(
                columns=accuracy.EXPLAIN_COLUMNS if explain else accuracy.COST_COLUMNS,
                plan=accuracy.PreviewPlan(kind, st),
                describe_upstream=False,
                param_oids=st.param_types if st.needs_params else None,
            )
        if kind == "explain":
            return await self._route_off_loop(sql, user, zone, cache=True)
        return Refuse(
            rewriter.UnsupportedError(
                "lapras.cost() previews a differentially private statement over a protected "
                "table only",
                hint="pass the text of an aggregate over a protected table, e.g. "
                "SELECT lapras.cost('SELECT count(*) FROM adult')",
            )
        )

    async def _route_off_loop(self, sql: str, user: str, zone: str, *, cache: bool) -> Route:
        statements = await self.workers.run(
            classify_text, sql, self.service.schema, zone, user=user, units=cost.text_units(sql)
        )
        hit = _one(sql, statements)
        if cache:
            self._remember(_key(sql, zone), hit)
        return hit[1]

    def _admin_route(self, statement: StatementInfo, command: admin.AdminCommand | str) -> Route:
        if statement.session.user not in self.admins:
            return Refuse(
                InsufficientPrivilege(
                    "permission denied: SHOW LAPRAS is for the proxy's administrators",
                    hint="an administrator is a [[users]] entry with admin = true",
                )
            )
        if isinstance(command, str):
            return Refuse(
                admin.UnknownAdminView(
                    f"unknown admin view LAPRAS {command.upper()}",
                    hint=f"accepted: SHOW LAPRAS {', '.join(c.upper() for c in admin.COMMANDS)}",
                )
            )
        return AnswerLocally(columns=command.columns, plan=command, describe_upstream=False)

    async def execute(self, execution: Execution) -> LocalResult:
        st = execution.route.plan
        if isinstance(st, admin.AdminCommand):
            return LocalResult(rows=tuple(await st.run(self.admin_sources)))
        if isinstance(st, rewriter.Composed):
            return await self._composed(execution, st)
        if isinstance(st, accuracy.PreviewPlan):
            return await self._preview(execution, st)
        if not isinstance(st, rewriter.DPStatement):
            return LocalResult(rows=())
        params = execution.params
        user = execution.statement.session.user
        plan = st.plan if st.plan is not None else self._bound(st, params)
        if plan is None:
            # a join with declared public tables: their rows as the epoch holds them (a plan
            # bound to them is not kept: the next epoch may hold others)
            names = rewriter.public_tables_of(st)
            public = (
                await self.service.public_rows(st.prepared.table.name, names) if names else None
            )
            plan = await self._bind(st, params, public, execution.statement.session)
            if public is None:
                self._keep(st, params, plan)
        self.workers.check_rows(plan.num_groups, len(plan.columns))  # before any charge
        if plan.batch.num_queries == 0:
            if _small(plan):
                return self._public(execution, plan, _public_rows(plan))
            rows = await self.workers.run(_public_rows, plan, user=user, units=_row_units(plan))
            return self._public(execution, plan, rows)
        try:
            answer = await self.service.answer(plan, max_error=self._requested(execution, plan))
        except LaprasError:
            self._log(execution.statement, plan, "refused")
            raise
        except psycopg.OperationalError as e:  # the state database's connection broke
            raise unavailable_error(e) from None
        # The answer is made (and perhaps charged): a failure from here on says so.
        unit = self._unit(plan)
        try:
            if _small(plan):
                rendered = _rendered(plan, answer, self.reveal_sources, unit)
            else:
                rendered = await self.workers.run(
                    _rendered, plan, answer, self.reveal_sources, unit,
                    user=user, units=_row_units(plan),
                )  # fmt: skip
        except (StatementTimeout, WorkerOutOfMemory, InternalError) as e:
            self._log(execution.statement, plan, answer.kind.value)
            raise _unshown(e, answer) from None
        except Exception:  # a bug
            log.exception("the rows of an answer could not be made")
            self._log(execution.statement, plan, answer.kind.value)
            raise _unshown(InternalError(_INTERNAL), answer) from None
        return self._result(execution, plan, answer, rendered)

    async def _bind(
        self,
        st: rewriter.DPStatement,
        params: tuple[object, ...],
        public: Mapping[str, Sequence[tuple[object, ...]]] | None,
        session: SessionInfo,
    ) -> rewriter.Plan:
        """The plan of ``st`` bound to ``params`` (and the rows of the public tables it joins):
        on the event loop when that is predicted cheaper than a trip to a worker, else in a
        worker process (which reads the statement again, in the TimeZone it was read in, when
        it does not hold it)."""
        plan = self._bind_inline(st, params, public)
        if plan is None:
            plan = await self.workers.run(
                bind_text, st.sql, self.service.schema, session.time_zone, params, public,
                user=session.user,
            )  # fmt: skip
        return plan

    def _bind_inline(
        self,
        st: rewriter.DPStatement,
        params: tuple[object, ...],
        public: Mapping[str, Sequence[tuple[object, ...]]] | None,
    ) -> rewriter.Plan | None:
        """The plan of a binding predicted to take less than a trip to a worker and back
        (:data:`INLINE_UNITS`, a statement of at most :data:`INLINE_CHARS`), bound here, on
        the event loop; None for the others (bound in a worker process). A binding above the
        full limit is refused here as there (54000)."""
        if len(st.sql) > INLINE_CHARS:
            return None  # classified in a worker, and kept there only (proxy.dp_workers)
        try:
            full = self.workers.full_units
            with cost.limited(INLINE_UNITS, setting=SETTING, full=full or math.inf):
                return rewriter.bind(st, params, public)
        except cost.WorkLimitError as e:
            if e.escalate:
                return None
            raise

    async def _composed(self, execution: Execution, st: rewriter.Composed) -> LocalResult:
        """A statement made of several DP releases: each answered as a statement of its own,
        in order, then combined (proxy/composing.py)."""

        def log(plan: rewriter.Plan, outcome: str) -> None:
            self._log(execution.statement, plan, outcome)

        async def answer(plan: rewriter.Plan) -> Answer:  # each release at the request
            return await self.service.answer(plan, max_error=self._requested(execution, plan))

        rows, notice = await composing.answer(
            st,
            self.service.schema,
            answer,
            self._answer_off_loop,
            log,
            reveal=self.reveal_sources,
            params=execution.params,
            param_oids=execution.param_oids,
        )
        return LocalResult(rows=rows, notices=(notice,))

    async def _answer_off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in the composing thread, under the limit of predicted work: a
        composed statement's plan is a generator (rewriter.steps), which cannot cross to a
        worker process; its steps are refused by their predicted work (54000) as a single
        statement's are, but not stopped by the timer (docs/admin.md)."""
        if self._composing is None:
            self._composing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lapras-compose")
        full = self.workers.full_units
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._composing, _limited, full, fn, *args)

    def execute_now(self, execution: Execution) -> LocalResult | None:
        """A stored answer (an exact repeat) of a small plan at once, from the read callback;
        None for everything else: never binds (a prepared statement's plan is found only
        when these parameters were bound before), never draws noise."""
        st = execution.route.plan
        if not isinstance(st, rewriter.DPStatement):
            return None
        plan = st.plan if st.plan is not None else self._bound(st, execution.params)
        if plan is None or not _small(plan):
            return None  # execute() binds and renders in the worker
        if plan.batch.num_queries == 0:
            return self._public(execution, plan, _public_rows(plan))
        try:
            max_error = self._requested(execution, plan)
        except LaprasError:
            return None  # execute() refuses it
        answer = self.service.answer_now(plan, max_error=max_error)
        if answer is None:
            return None
        rendered = _rendered(plan, answer, self.reveal_sources, self._unit(plan))
        return self._result(execution, plan, answer, rendered)

    def _unit(self, plan: rewriter.Plan) -> str:
        """The NOTICE's notes on what the declaration does to the plan's answer: the unit
        bound of its table (:func:`unit_note`), the clamping of the columns whose values it
        sums (:func:`rewriter.clamp_note`)."""
        table = self.service.schema.tables.get(plan.table.split(".")[-1])
        if table is None:
            return ""
        notes = (unit_note(table), rewriter.clamp_note(table, plan.batch.domain.names))
        return "; ".join(x for x in notes if x)

    def _requested(self, execution: Execution, plan: rewriter.Plan) -> float | None:
        """The standard error the session asks of ``plan``'s answer (``lapras.max_error``, else
        the table's default; None: none)."""
        decl = self.service.table(plan.table)
        if decl.max_error is None and execution.statement.session.settings is None:
            return None
        return accuracy.requested(execution.statement.session.settings, decl)

    async def _preview(self, execution: Execution, pv: accuracy.PreviewPlan) -> LocalResult:
        """A cost preview's rows: nothing is charged, and the query log is not written (the
        statement is not asked)."""
        st = pv.statement
        params = execution.params
        plan = st.plan if st.plan is not None else self._bound(st, params)
        if plan is None:
            plan = await self._bind(st, params, None, execution.statement.session)
        max_error = self._requested(execution, plan)
        if plan.batch.num_queries == 0:  # the declared values answer it: no epoch needed
            rows = accuracy.public_preview_rows(pv.kind, max_error)
        else:
            p = await self.service.preview(plan, max_error=max_error)
            rows = accuracy.preview_rows(pv.kind, p, max_error, reveal=self.reveal_sources)
        return LocalResult(rows=rows, command_tag="EXPLAIN" if pv.kind == "explain" else None)

    def _bound(self, st: rewriter.DPStatement, params: tuple[object, ...]) -> rewriter.Plan | None:
        """The plan ``st`` was bound to with these parameter values before, if kept."""
        key = _plan_key(st, params)
        hit = self._plans.get(key) if key is not None else None
        if key is None or hit is None or hit[0] is not st:
            return None
        self._plans.move_to_end(key)
        return hit[1]

    def _keep(
        self, st: rewriter.DPStatement, params: tuple[object, ...], plan: rewriter.Plan
    ) -> None:
        """Keep a bound plan (a pure function of the statement and the parameter values)."""
        key = _plan_key(st, params)
        nnz = _weights(plan)
        if key is None or nnz > PLAN_WEIGHTS:
            return
        old = self._plans.pop(key, None)
        if old is not None:
            self._plan_weights -= _weights(old[1])
        self._plans[key] = (st, plan)
        self._plan_weights += nnz
        while len(self._plans) > PLANS or self._plan_weights > PLAN_WEIGHTS:
            _, (_, dropped) = self._plans.popitem(last=False)
            self._plan_weights -= _weights(dropped)

    def _result(
        self,
        execution: Execution,
        plan: rewriter.Plan,
        answer: Answer,
        rendered: tuple[tuple[tuple[object, ...], ...], Notice],
    ) -> LocalResult:
        rows, notice = rendered
        self._log(execution.statement, plan, answer.kind.value)
        return LocalResult(rows=rows, notices=(notice,))

    def _public(
        self, execution: Execution, plan: rewriter.Plan, rows: tuple[tuple[object, ...], ...]
    ) -> LocalResult:
        """A statement that asks only for public values (``SELECT DISTINCT col``, ``GROUP
        BY col`` without aggregates): the declared values, without the engine, at no cost."""
        self._log(execution.statement, plan, "public")
        return LocalResult(rows=rows, notices=(PUBLIC_NOTICE,))

    def _log(self, statement: StatementInfo, plan: rewriter.Plan, outcome: str) -> None:
        """Append to the query log without delaying the answer (DP statements only:
        refusals before planning name no template). The plan's fingerprint is the
        statement's with its parameters as bindings (``rewriter.fingerprint``)."""
        fp = plan.fingerprint
        record = {
            "analyst": statement.session.user,
            "table": plan.table.split(".")[-1],
            "view": plan.view,
            "template": fp.template,
            "bindings": list(fp.bindings),
            "key": plan.batch.key,
            "outcome": outcome,
            "sql": statement.sql if self.log_sql else None,
        }
        self._pending.append(record)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_log())

    async def drain(self) -> None:
        """Wait for the query-log writes still in flight, and stop the worker processes (at
        shutdown)."""
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        self.close()

    def close(self) -> None:
        """Stop the worker processes (work under way or queued is refused, 57P01) and the
        composing thread (queued work is dropped)."""
        self.workers.close()
        if self._composing is not None:
            self._composing.shutdown(wait=False, cancel_futures=True)
            self._composing = None

    async def _flush_log(self) -> None:
        """Write what accumulated, in batches, until nothing is pending (one task at a time;
        each batch gathers records for ``log_interval`` seconds, so under load the log costs
        one round trip per interval, not one per answer)."""
        while self._pending:
            await asyncio.sleep(self.log_interval)
            batch, self._pending = _counted(self._pending), []
            try:
                await self.service.ledger.log_queries(batch)
                if time.monotonic() - self._pruned_at >= PRUNE_INTERVAL:
                    self._pruned_at = time.monotonic()
                    days, rows = self.log_retention
                    await self.service.ledger.prune_log(max_days=days, max_rows=rows)
            except Exception:  # the log must never break an answer
                log.exception("could not write %d query-log rows", len(batch))


def _observe_settings(statement: StatementInfo) -> Refuse | None:
    """Show the statement to the session's ``lapras.*`` settings (proxy.wire.settings): a
    change the proxy cannot honour is refused before it is relayed."""
    settings = statement.session.settings
    if settings is None:
        return None
    try:
        settings.observe(statement.sql, statement.session.txn_status, accuracy.check_setting)
    except LaprasError as err:
        return Refuse(err)
    return None


def _key(sql: str, zone: str) -> str:
    """The cache key of a statement's route: its text, in the session's TimeZone (a NUL
    never occurs in a statement's text: the protocol ends strings with it)."""
    return sql if zone == "UTC" else f"{zone}\x00{sql}"


def _small(plan: rewriter.Plan) -> bool:
    """Whether the rows of an answer are made on the event loop (see :data:`LOOP_QUERIES`)."""
    return plan.batch.num_queries <= LOOP_QUERIES and plan.num_groups <= LOOP_QUERIES


def _weights(plan: rewriter.Plan) -> int:
    return int(plan.batch.matrix.nnz) + 1


def _plan_key(
    st: rewriter.DPStatement, params: tuple[object, ...]
) -> tuple[int, tuple[tuple[type, str], ...]] | None:
    """The key of a bound plan: the statement and each parameter's type and ``repr`` (so
    that ``1``, ``1.0``, ``True`` and ``Decimal('1.0')`` stay apart); None when a value is of
    a type not listed in :data:`_KEYED` (its ``repr`` might not tell values apart)."""
    if not all(type(p) in _KEYED for p in params):
        return None
    return id(st), tuple((type(p), repr(p)) for p in params)


def _rendered(
    plan: rewriter.Plan, answer: Answer, reveal: bool, unit: str = ""
) -> tuple[tuple[tuple[object, ...], ...], Notice]:
    """The rows and the NOTICE of a DP answer (pure; any thread)."""
    rows = rewriter.postprocess(
        plan,
        np.asarray(answer.answers, dtype=np.float64),
        np.asarray(answer.std_errors, dtype=np.float64),
    )
    return tuple(tuple(r) for r in rows), describe_answer(answer, plan, reveal=reveal, unit=unit)


def _public_rows(plan: rewriter.Plan) -> tuple[tuple[object, ...], ...]:
    return tuple(tuple(r) for r in rewriter.postprocess(plan, np.zeros(0)))


def _counted(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Identical records of one batch as one, with their number of ``calls`` (a dashboard
    refreshed by many clients at once, repeats of a stored answer), in first-seen order."""
    out: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for r in records:
        # the values' reprs tell them apart as their JSON does (1, 1.0, '1', True), faster
        key = tuple(sorted((k, repr(v)) for k, v in r.items()))
        if key in out:
            out[key]["calls"] += 1
        else:
            out[key] = {**r, "calls": 1}
    return list(out.values())


def _limited(full: float | None, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` under the full limit of predicted work (rewriter.cost), if any."""
    if full is None:
        return fn(*args)
    with cost.limited(full, setting=SETTING):
        return fn(*args)


def _row_units(plan: rewriter.Plan) -> float:
    """The predicted work of an answer's rows (rewriter.cost units)."""
    return cost.row_units(plan.num_groups, len(plan.columns))


def _unshown(error: LaprasError, answer: Answer) -> LaprasError:
    """The error of an answer made, and perhaps charged, whose rows could not be made in
    time (or memory): the answer is stored (a repeat is given it at no cost), and the
    message says what it cost (docs/admin.md, "Limits of a DP statement's work")."""
    spent = (
        f"the answer was charged {answer.charge:.4g} {answer.status.unit} of the budget and is "
        "stored"
        if answer.charge > 0
        else "the answer is stored (no budget was spent)"
    )
    before = f"{error.detail} " if error.detail else ""
    error.detail = f"{before}The statement's answer was made before its rows: {spent}."
    again = "run the same statement again to get the stored answer at no further cost"
    error.hint = f"{again}, when the proxy is less busy; {error.hint}" if error.hint else again
    return error
