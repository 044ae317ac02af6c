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

Classification is pure Python (sqlglot and the rewriter's passes) and takes about 10 ms per
KiB of a worst-case statement: a statement longer than ``off_loop_chars``, or a new text that
may name a protected table, is classified in the router's worker thread, so that the event
loop keeps serving every other session meanwhile (docs/benchmarks.md, "Big statements");
the others are classified at once; routes are cached by text.

The rewriter's work of each execution of a DP statement runs in a second worker thread
(``lapras-answer``): binding a prepared statement's parameters (``rewriter.bind``, 0.2 to
1 ms on Adult), and the rows and NOTICE of an answer of more than :data:`LOOP_QUERIES`
linear queries (``rewriter.postprocess``, :func:`describe_answer`). The event loop keeps
the I/O, the routing, and what costs less than a trip to the worker and back (about 20 to
30 us): an exact repeat answered from the read callback (``execute_now``: the stored answer,
no noise), and the rows of a small answer. Bound plans are kept by statement and parameter
values (public: what the analyst sent), so that an exact repeat of a prepared statement is
found without binding it again (docs/benchmarks.md, "DP answers off the event loop").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import gc
import logging
import math
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any, TypeVar
from uuid import UUID

import numpy as np

import rewriter
from dp import engine
from dp.errors import LaprasError
from proxy import accuracy, admin, composing
from proxy.epochs import Answer, EpochService
from proxy.errors import InsufficientPrivilege
from proxy.wire.heap import trim_heap
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
    StatementInfo,
)
from rewriter.schema import TableDecl

log = logging.getLogger("lapras.router")

#: Statements longer than this (characters) are classified in the worker thread. Below it a
#: worst-case statement takes up to about 150 ms on the loop, once (its route is cached);
#: the longest statements clients send by themselves (asyncpg's type introspection, 7.6 KiB)
#: stay below it, cached and relayed from the read callback.
OFF_LOOP_CHARS = 16 * 1024
#: The query log's default retention ([privacy] query_log_days, query_log_rows) and how often
#: it is applied (seconds, at most).
LOG_DAYS, LOG_ROWS = 90.0, 1_000_000
PRUNE_INTERVAL = 60.0
#: The interpreter's switch interval while a worker classifies or answers: how long the event
#: loop may wait for the worker to hand over the interpreter (Python's default is 5 ms).
_SWITCH_INTERVAL = 0.001
#: Answers of at most this many linear queries get their rows and NOTICE on the event loop
#: (tens of microseconds, less than the trip to the worker); larger ones in the worker.
LOOP_QUERIES = 8
#: Bound plans kept (by statement and parameters): at most this many, holding at most this
#: many non-zero weights in all; a bigger plan is not kept.
PLANS, PLAN_WEIGHTS = 1024, 4_000_000
#: Parameter values a bound plan is kept for (their ``repr`` tells equal values apart exactly).
_KEYED: frozenset[type] = frozenset(
    (type(None), bool, int, float, str, bytes, Decimal, dt.date, dt.datetime, dt.time)
) | {dt.timedelta, UUID}

_T = TypeVar("_T")

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
    ) -> None:
        """``log_interval``: seconds the query log gathers records before one write;
        ``off_loop_chars``: statements longer than this are classified in the worker thread;
        ``log_retention``: the query log keeps rows at most this many days, and at most this
        many rows (pruned at most every :data:`PRUNE_INTERVAL` seconds, after a write);
        ``reveal_sources``: NOTICEs say whether an answer came from the predicted release or
        is a repeat (:func:`describe_answer`)."""
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
        self._worker: ThreadPoolExecutor | None = None  # started at the first long statement
        self._answering: ThreadPoolExecutor | None = None  # started at the first DP execution
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
        """The classification of one statement and its route (pure; any thread); ``zone``:
        the session's TimeZone."""
        statements = rewriter.classify(sql, self.service.schema, time_zone=zone)
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

    def route(self, statement: StatementInfo) -> Route | Awaitable[Route]:
        """Decided without waiting when the route is cached or the statement certainly names
        nothing protected (catalogue and session traffic: the relay's fast lane). A statement
        that may name a protected table is classified in the worker thread the first time
        (its expressions are evaluated over the declared domains, up to ``cell_limit`` values:
        seconds at worst, which must not hold the event loop), then cached; one longer than
        ``off_loop_chars`` is classified there and not cached (the cache would keep big
        texts and their classification)."""
        sql = statement.sql
        refusal = _observe_settings(statement)
        if refusal is not None:
            return refusal
        zone = statement.session.time_zone
        command = admin.parse(sql)
        if command is not None:
            return self._admin_route(statement, command)
        target = accuracy.preview_target(sql)
        if target is not None:
            return self._preview_route(sql, *target, zone=zone)
        if len(sql) > self.off_loop_chars:
            return self._route_off_loop(sql, zone, cache=False)
        key = _key(sql, zone)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit[1]
        if rewriter.may_name_protected(sql, self.service.schema):
            return self._route_off_loop(sql, zone, cache=True)
        return self._classified(sql, zone)[1]

    async def _preview_route(
        self, sql: str, kind: accuracy.PreviewKind, inner: str, zone: str = "UTC"
    ) -> Route:
        """``EXPLAIN <stmt>`` / ``SELECT lapras.cost('<stmt>')``: a cost preview when ``stmt``
        is a DP statement (answered here, :mod:`proxy.accuracy`); else EXPLAIN is routed as
        before, and ``lapras.cost`` of anything else is refused."""
        hit = self._cache.get(_key(inner, zone))
        if hit is None:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="lapras-classify"
                )
            loop = asyncio.get_running_loop()
            classify = functools.partial(self._classify, zone=zone)
            hit = await loop.run_in_executor(self._worker, _off_loop, classify, inner)
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
            return await self._route_off_loop(sql, zone, cache=True)
        return Refuse(
            rewriter.UnsupportedError(
                "lapras.cost() previews a differentially private statement over a protected "
                "table only",
                hint="pass the text of an aggregate over a protected table, e.g. "
                "SELECT lapras.cost('SELECT count(*) FROM adult')",
            )
        )

    async def _route_off_loop(self, sql: str, zone: str, *, cache: bool) -> Route:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lapras-classify")
        loop = asyncio.get_running_loop()
        classify = functools.partial(self._classify, zone=zone)
        hit = await loop.run_in_executor(self._worker, _off_loop, classify, sql)
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
        plan = st.plan if st.plan is not None else self._bound(st, params)
        if plan is None:
            # a join with declared public tables: their rows as the epoch holds them (a plan
            # bound to them is not kept: the next epoch may hold others)
            names = rewriter.public_tables_of(st)
            public = (
                await self.service.public_rows(st.prepared.table.name, names) if names else None
            )
            plan = await self._answer_off_loop(rewriter.bind, st, params, public)
            if public is None:
                self._keep(st, params, plan)
        if plan.batch.num_queries == 0:
            if _small(plan):
                return self._public(execution, plan, _public_rows(plan))
            return self._public(execution, plan, await self._answer_off_loop(_public_rows, plan))
        try:
            answer = await self.service.answer(plan, max_error=self._requested(execution, plan))
        except LaprasError:
            self._log(execution.statement, plan, "refused")
            raise
        if _small(plan):
            rendered = _rendered(plan, answer, self.reveal_sources, self._unit(plan))
        else:
            rendered = await self._answer_off_loop(
                _rendered, plan, answer, self.reveal_sources, self._unit(plan)
            )
        return self._result(execution, plan, answer, rendered)

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
        """The NOTICE's note on the unit bound of the plan's table (:func:`unit_note`)."""
        table = self.service.schema.tables.get(plan.table.split(".")[-1])
        return "" if table is None else unit_note(table)

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
            plan = await self._answer_off_loop(rewriter.bind, st, params)
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

    async def _answer_off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in the answering worker thread (with the switch interval lowered)."""
        if self._answering is None:
            self._answering = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lapras-answer")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._answering, _quick, fn, *args)

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
        """Wait for the query-log writes still in flight, and stop the worker thread (at
        shutdown)."""
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
        self.close()

    def close(self) -> None:
        """Stop the worker threads: queued work is dropped, what is under way ends on its own
        (nothing waits for it any more). A later statement starts new ones."""
        for worker in (self._worker, self._answering):
            if worker is not None:
                worker.shutdown(wait=False, cancel_futures=True)
        self._worker = self._answering = None

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


def _off_loop(classify: Callable[[str], _T], sql: str) -> _T:
    """``classify(sql)`` in a worker thread, disturbing the event loop as little as it can.

    - The garbage collector is paused meanwhile: while a big statement is parsed, its tokens
      and nodes are most of the live objects, and each full collection walks them all,
      holding the interpreter for up to a second (measured: 1.07 s on a 1 MiB statement).
      The rewriter frees its trees and tokens by reference counting, a node at a time
      (rewriter.classify ``_dismantle``), so nothing is left for the collector afterwards.
    - The interpreter's switch interval is shortened, so the loop gets the interpreter back
      within about a millisecond whenever it has work.
    - Afterwards the C heap's free memory is given back to the system (glibc), since a 1 MiB
      statement takes a few hundred MB while it is classified.

    Both settings are the process's: the first classification under way (of any router in
    the process) sets them, the last one to end restores them (the switch interval: the last
    piece of work of either worker, see :func:`_quick`).
    """
    _quiet(+1, pause_gc=True)
    try:
        return classify(sql)
    finally:
        _quiet(-1, pause_gc=True)
        trim_heap()


def _quick(fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)`` in the answering worker thread (a bind, the rows of an answer: under a
    few milliseconds), with the switch interval shortened as :func:`_off_loop` does, so
    that the event loop waits at most about a millisecond for the interpreter. The
    collector is left running: under a steady DP load the worker is almost always busy."""
    _quiet(+1, pause_gc=False)
    try:
        return fn(*args)
    finally:
        _quiet(-1, pause_gc=False)


def _quiet(step: int, *, pause_gc: bool) -> None:
    """Enter (``step`` +1) or leave (-1) a piece of worker work: the first one under way
    shortens the switch interval and the last one restores it; the same, separately, for
    pausing the garbage collector (classifications only)."""
    global _quiet_depth, _quiet_interval, _gc_depth, _gc_saved
    with _quiet_lock:
        if step > 0:
            if _quiet_depth == 0:
                _quiet_interval = sys.getswitchinterval()
                sys.setswitchinterval(min(_quiet_interval, _SWITCH_INTERVAL))
            _quiet_depth += 1
            if pause_gc:
                if _gc_depth == 0:
                    _gc_saved = gc.isenabled()
                    gc.disable()
                _gc_depth += 1
            return
        _quiet_depth -= 1
        if _quiet_depth == 0:
            sys.setswitchinterval(_quiet_interval)
        if pause_gc:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_saved:
                gc.enable()


_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_interval = 0.005
_gc_depth = 0
_gc_saved = True
