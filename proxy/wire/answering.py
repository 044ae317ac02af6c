"""Answering locally: DP answers and what the session holds, on both protocols.

What the router answers here (:class:`~proxy.wire.router.AnswerLocally`: DP answers, the
admin views) is run (``router.execute``, cancellable and timed), encoded with the types and
formats the client asked for, and sent in the client's message order: before any local answer
the session *quiesces* -- it sends Flush upstream and waits until every earlier expectation is
met, so local and relayed replies leave in the client's message order (PgDog's buffering
pattern; pgwire-research §6.7). The protocol-level statements and portals answered here are
this module's (:class:`Statement`, :class:`Portal`); relayed ones are the backend's.

A DP answer in a wrapper (``COPY ... TO STDOUT``, ``DECLARE ... CURSOR``, ``PREPARE ... AS``) is
delivered as the wrapper says; the cursors and SQL-prepared statements made so are the
session's own (:class:`proxy.wire.local.LocalObjects`), and the commands naming them (FETCH,
MOVE, CLOSE, EXECUTE, DEALLOCATE) are answered here, every other such command relayed.

Hidden statements keep the backend in step or ask it what only it knows, their replies never
relayed: its Parse+Describe of a statement answered here (the types of its parameters and
columns), whether a cursor or statement name is taken there, a BEGIN ... COMMIT around the
statements of one simple Query. As in PostgreSQL, a refused statement is prepared (Parse,
Describe) and refused at Bind.

:class:`LocalAnswering` is the session's part that answers; what it uses of the rest of the
session (output, the relay, routing, errors) is :class:`AnsweringSide`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dp.errors import LaprasError
from proxy.errors import (
    DuplicateCursor,
    DuplicatePreparedStatement,
    FeatureNotSupported,
    InFailedTransaction,
    InvalidBinaryRepresentation,
    InvalidParameterValue,
    InvalidStatementName,
    NoActiveTransaction,
    NotInPrerequisiteState,
    ProtocolError,
    QueryCanceled,
    UndefinedCursor,
    UnsupportedFormatCode,
    render_error,
    render_hidden_error,
    render_notice,
    render_unexpected,
)
from proxy.wire import types as pgtypes
from proxy.wire.copyout import copy_data, copy_response
from proxy.wire.local import Cursor, LocalObjects, Prepared
from proxy.wire.messages import (
    BackendMessage,
    Bind,
    BindComplete,
    Close,
    CloseComplete,
    CommandComplete,
    CopyData,
    CopyDone,
    DataRow,
    Describe,
    ErrorResponse,
    Execute,
    FieldDescription,
    NoData,
    NoticeResponse,
    ParameterDescription,
    Parse,
    ParseComplete,
    PortalSuspended,
    PqReader,
    Query,
    RowDescription,
    Sync,
)
from proxy.wire.pool import SessionEffect
from proxy.wire.protocol import ServerConnection
from proxy.wire.relay import BackendRelay, Expect, Kind
from proxy.wire.router import (
    AnswerLocally,
    Column,
    EncodedCell,
    Execution,
    LocalResult,
    Refuse,
    Relay,
    Route,
    StatementInfo,
    field_from_column,
    resolve_formats,
)
from proxy.wire.upstream import Described
from rewriter import wrappers
from rewriter.errors import SqlSyntaxError
from rewriter.wrappers import (
    CloseCursor,
    Command,
    CopyTo,
    Deallocate,
    DeclareCursor,
    ExecutePrepared,
    Fetch,
    NamesCursor,
    NamesStatement,
    PrepareAs,
)

if TYPE_CHECKING:
    from proxy.wire.host import ServerConfig, SessionHost

_DESCRIBE_STMT = "__lapras_describe__"
_RESET_ALL = re.compile(r"^\s*(DEALLOCATE\s+(PREPARE\s+)?ALL|DISCARD\s+ALL)\s*;?\s*$", re.I)
_DEALLOCATE = re.compile(r'^\s*DEALLOCATE\s+(?:PREPARE\s+)?("?)([^";\s]+)\1\s*;?\s*$', re.I)
_CLOSE_ALL = re.compile(r"^\s*CLOSE\s+ALL\s*;?\s*$", re.I)
# A statement that may address a cursor or statement the session holds (proxy.wire.local):
# the verbs rewriter.wrappers.command reads, or a comment before the first word.
_COMMAND_VERB = re.compile(
    r"\s*(?:/\*|--|(?:FETCH|MOVE|CLOSE|EXECUTE|DEALLOCATE|DECLARE|PREPARE)\b)", re.I
)
# Hidden checks of names the backend may hold (a DECLARE or PREPARE answered here takes a
# name PostgreSQL would refuse if it were taken there).
_CURSOR_TAKEN = "SELECT EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE name = $1)"
_STATEMENT_TAKEN = "SELECT EXISTS (SELECT FROM pg_catalog.pg_prepared_statements WHERE name = $1)"
_CHECK_STMT = "__lapras_check__"


@dataclass(slots=True)
class Statement:
    sql: str
    route: Route
    param_oids: tuple[int, ...]  # declared
    described: Described | None = None
    info: StatementInfo | None = None
    # A command answered here (FETCH, CLOSE, EXECUTE ... of what the session holds)
    command: Command | None = None
    # A relayed SET or RESET (its executions are tracked: proxy.wire.pool.PoolClient)
    effect: SessionEffect | None = None


@dataclass(slots=True)
class Portal:
    statement: Statement
    params: tuple[object, ...]
    raw_params: tuple[bytes | None, ...]
    param_formats: tuple[int, ...]
    fields: tuple[FieldDescription, ...]
    rows: list[tuple[bytes | None, ...]] | None = None
    sent: int = 0
    tag: str = ""
    notices: list[NoticeResponse] = field(default_factory=list)
    verb: str = "SELECT"  # of the tag of a chunk of rows without ``tag`` (FETCH: "FETCH n")
    # a command without rows of its own (DECLARE, COPY, MOVE ...) ran: PostgreSQL marks such
    # a portal done, and another Execute of it is 55000 "portal cannot be run"
    done: bool = False


class AnsweringSide(Protocol):
    """What local answering uses of its session: output to the client, the backend relay,
    routing and the refusal of a statement."""

    __slots__ = ()

    cfg: ServerConfig
    server: SessionHost[Any]
    conn: ServerConnection
    relay: BackendRelay
    _frame: bytes  # the client message being dispatched, as it came

    def _send(self, msg: BackendMessage) -> None: ...

    def _flush_client(self) -> None: ...

    async def _drain(self) -> None: ...

    async def _write(self, *msgs: BackendMessage) -> None: ...

    async def _quiesce(self) -> None: ...

    async def _settle(self) -> bool: ...

    async def _refuse(
        self,
        err: LaprasError | ErrorResponse,
        *,
        extended: bool,
        checks_transaction: bool = True,
    ) -> None: ...

    def _info(
        self, sql: str, protocol: str, name: str = "", oids: tuple[int, ...] = ()
    ) -> StatementInfo: ...


class LocalAnswering(AnsweringSide):
    """The session's local answers, and the statements, portals, cursors and SQL-prepared
    statements it holds."""

    if not TYPE_CHECKING:  # the session's slots hold its attributes (mypy: see Session)
        __slots__ = ()

    statements: dict[str, Statement]  # protocol-level, relayed ones included
    portals: dict[str, Portal]  # answered here
    local: LocalObjects  # cursors and SQL-prepared statements answered here
    _local_task: asyncio.Future[LocalResult] | None  # the router's execution under way

    async def _describe_upstream(
        self, sql: str, oids: tuple[int, ...], *, extended: bool
    ) -> Described | None:
        """The backend's Parse+Describe of ``sql`` in-band; on error the backend's error is
        sent to the client (it is the statement's error) and None returned."""
        await self._quiesce()
        sink: list[BackendMessage] = []
        data = (
            Parse(name=_DESCRIBE_STMT, sql=sql, param_oids=oids).encode()
            + Describe(kind="S", name=_DESCRIBE_STMT).encode()
            + Close(kind="S", name=_DESCRIBE_STMT).encode()
        )
        self.relay.forward(data, Kind.PARSE, forward=False, sink=sink)
        self.relay.expect(Expect(Kind.DESCRIBE_S, forward=False, sink=sink))
        self.relay.expect(Expect(Kind.CLOSE, forward=False, sink=sink))
        if not extended:
            self.relay.forward(Sync().encode(), Kind.SYNC, forward=False, sink=sink)
        await self._quiesce()
        params: tuple[int, ...] = oids
        fields: tuple[FieldDescription, ...] | None = None
        for m in sink:
            if isinstance(m, ErrorResponse):
                self._send(m)
                self._flush_client()
                return None
            if isinstance(m, ParameterDescription):
                params = m.oids
            elif isinstance(m, RowDescription):
                fields = m.fields
            elif isinstance(m, NoticeResponse):
                self._send(m)
        return Described(param_oids=params, fields=fields)

    async def _hidden_query(self, sql: str) -> list[BackendMessage]:
        sink: list[BackendMessage] = []
        self.relay.forward(Query(sql=sql).encode(), Kind.QUERY, forward=False, sink=sink)
        await self._quiesce()
        return sink

    async def _hidden_row(
        self, sql: str, params: tuple[str, ...], *, extended: bool
    ) -> tuple[bytes | None, ...] | None:
        """The first row of ``sql`` run on the backend in-band, unseen by the client (text
        parameters and results); None when it failed, its error sent to the client as the
        statement's (without a position, which would point into this text)."""
        await self._quiesce()
        sink: list[BackendMessage] = []
        data = (
            Parse(name=_CHECK_STMT, sql=sql).encode()
            + Bind(
                portal=_CHECK_STMT, statement=_CHECK_STMT, params=tuple(p.encode() for p in params)
            ).encode()
            + Execute(portal=_CHECK_STMT).encode()
            + Close(kind="P", name=_CHECK_STMT).encode()
            + Close(kind="S", name=_CHECK_STMT).encode()
        )
        self.relay.forward(data, Kind.PARSE, forward=False, sink=sink)
        for kind in (Kind.BIND, Kind.EXECUTE, Kind.CLOSE, Kind.CLOSE):
            self.relay.expect(Expect(kind, forward=False, sink=sink))
        if not extended:
            self.relay.forward(Sync().encode(), Kind.SYNC, forward=False, sink=sink)
        await self._quiesce()
        row: tuple[bytes | None, ...] = ()
        for msg in sink:
            if isinstance(msg, ErrorResponse):
                self._send(render_hidden_error(msg))
                self._flush_client()
                return None
            if isinstance(msg, DataRow) and not row:
                row = msg.values
        return row

    def _fields(self, stmt: Statement) -> tuple[FieldDescription, ...] | None:
        r = stmt.route
        if isinstance(r, AnswerLocally) and r.wrapper is not None:
            return ()  # COPY, DECLARE, PREPARE: no result rows of their own (NoData)
        if isinstance(r, AnswerLocally) and r.columns is not None:
            return tuple(field_from_column(c) for c in r.columns)
        if stmt.described is not None:
            return stmt.described.fields
        return None

    async def _run_local(self, execution: Execution) -> LocalResult:
        """Call the router's execute(), cancellable (CancelRequest) and timed."""
        route = execution.route
        if route.result is not None:
            return route.result
        task = asyncio.ensure_future(self.server.router.execute(execution))
        self._local_task = task
        try:
            if not self.cfg.statement_timeout:
                try:
                    return await task
                except asyncio.CancelledError:
                    me = asyncio.current_task()
                    if me is not None and me.cancelling():
                        raise  # the session itself is being stopped
                    raise QueryCanceled("canceling statement due to user request") from None
            done, _ = await asyncio.wait({task}, timeout=self.cfg.statement_timeout)
        finally:
            self._local_task = None
        if not done:
            task.cancel()
            raise QueryCanceled("canceling statement due to statement timeout")
        if task.cancelled():
            raise QueryCanceled("canceling statement due to user request")
        return task.result()

    def _encode_rows(
        self, result: LocalResult, fields: tuple[FieldDescription, ...]
    ) -> list[tuple[bytes | None, ...]]:
        out: list[tuple[bytes | None, ...]] = []
        for row in result.rows:
            if len(row) != len(fields):
                raise ValueError(f"row has {len(row)} cells, result has {len(fields)} columns")
            cells: list[bytes | None] = []
            for f, v in zip(fields, row, strict=True):
                if isinstance(v, EncodedCell):
                    c = v.binary if f.format == 1 else v.text
                    if c is None:
                        raise ValueError("encoded cell lacks the requested format")
                    cells.append(c)
                else:
                    cells.append(pgtypes.encode(f.type_oid, v, f.format))
            out.append(tuple(cells))
        return out

    @staticmethod
    def _notices(result: LocalResult) -> list[NoticeResponse]:
        return [
            render_notice(
                n.message, severity=n.severity, sqlstate=n.sqlstate, detail=n.detail, hint=n.hint
            )
            for n in result.notices
        ]

    async def _local_result(
        self, execution: Execution, *, extended: bool
    ) -> tuple[list[tuple[bytes | None, ...]], str, list[NoticeResponse]] | None:
        """Run a local answer; on error answer it as PostgreSQL would and return None."""
        result = await self._local_answer(execution, extended=extended)
        if result is None:
            return None
        try:
            rows = self._encode_rows(result, execution.fields)
        except Exception as e:
            await self._refuse(render_unexpected(e, where="router.execute"), extended=extended)
            return None
        return rows, result.command_tag or "", self._notices(result)

    async def _local_answer(self, execution: Execution, *, extended: bool) -> LocalResult | None:
        """The router's answer; on error answer it as PostgreSQL would and return None."""
        try:
            return await self._run_local(execution)
        except LaprasError as e:
            await self._refuse(e, extended=extended)
            return None
        except Exception as e:
            await self._refuse(render_unexpected(e, where="router.execute"), extended=extended)
            return None

    def _on_simple_statement(self, sql: str) -> None:
        """What a relayed statement does to what the session holds (statements, portals,
        and the cursors and statements answered here: DEALLOCATE ALL, DISCARD ALL, CLOSE
        ALL are relayed for the backend's own and drop the local ones)."""
        reset = _RESET_ALL.match(sql)
        if reset:
            self.statements.clear()
            self.portals.clear()
            if self.conn.txn_status != "E":
                self.local.prepared.clear()
            if reset.group(1).upper().startswith("DISCARD") and self.conn.txn_status == "I":
                self.local.discard_all()  # (DISCARD ALL is refused in a transaction block)
            return
        if _CLOSE_ALL.match(sql):
            if self.conn.txn_status != "E":
                self.local.close_all()
                self.portals.clear()
            return
        m = _DEALLOCATE.match(sql)
        if m:
            self.statements.pop(m.group(2) if m.group(1) else m.group(2).lower(), None)

    def _simple_execution(
        self, sql: str, route: AnswerLocally, fields: tuple[FieldDescription, ...]
    ) -> Execution:
        """A simple-protocol statement's execution: no parameters, text results."""
        return Execution(
            statement=self._info(sql, "simple"),
            route=route,
            param_oids=(),
            params=(),
            raw_params=(),
            param_formats=(),
            fields=fields,
        )

    async def _simple_local(self, sql: str, route: AnswerLocally) -> bool:
        if self.conn.txn_status == "E":
            self._send(render_error(InFailedTransaction()))
            return False
        if route.wrapper is not None:
            msgs = await self._wrapped_answer(
                self._simple_execution(sql, route, ()), extended=False
            )
            if msgs is None:
                return False
            for msg in msgs:
                self._send(msg)
            self._flush_client()
            return True
        stmt = Statement(sql=sql, route=route, param_oids=())
        if route.describe_upstream:
            d = await self._describe_upstream(sql, (), extended=False)
            if d is None:
                return False
            stmt.described = d
        fields = self._fields(stmt) or ()
        res = await self._local_result(self._simple_execution(sql, route, fields), extended=False)
        if res is None:
            return False
        rows, tag, notices = res
        for n in notices:
            self._send(n)
        if fields:
            self._send(RowDescription(fields=fields))
        for row in rows:
            self._send(DataRow(values=row))
        self._send(CommandComplete(tag=tag or f"SELECT {len(rows)}"))
        self._flush_client()
        return True

    async def _local_error(self, err: LaprasError) -> None:
        await self._refuse(err, extended=True)

    def _prepare_local(
        self, m: Parse, info: StatementInfo, route: Route, command: Command | None = None
    ) -> bool:
        """Answer a Parse that needs nothing from the backend (a failed transaction, or a
        statement answered here whose columns the router gave); False otherwise."""
        if self.conn.txn_status == "E":
            self._send(render_error(InFailedTransaction()))
            return True
        if not isinstance(route, AnswerLocally) or route.describe_upstream:
            return False
        stmt = Statement(
            sql=m.sql, route=route, param_oids=m.param_oids, info=info, command=command
        )
        if route.param_oids is not None:
            # the router's types where the Parse left them 0; PREPARE's own are EXECUTE's
            own = () if isinstance(route.wrapper, PrepareAs) else route.param_oids
            stmt.described = Described(param_oids=_merged(m.param_oids, own), fields=None)
        self.statements[m.name] = stmt
        self._send(ParseComplete())
        return True

    async def _parse_local(
        self,
        m: Parse,
        info: StatementInfo,
        route: Refuse | AnswerLocally,
        command: Command | None,
        existing: Statement | None,
    ) -> None:
        """protocol-flow "Extended Query", Parse of a statement answered here (refused, answered
        locally, or a command addressing what the session holds)."""
        if m.name and existing is not None:  # a relayed statement has the name
            await self._local_error(dup_statement(m.name))
            return
        if m.name == "":
            self.statements.pop("", None)
        if await self._settle():
            return
        if self._prepare_local(m, info, route, command):
            self._flush_client()
            return
        stmt = Statement(
            sql=m.sql, route=route, param_oids=m.param_oids, info=info, command=command
        )
        # A refused statement is prepared as the backend prepares it (its Describe gives the
        # types, its errors -- a syntax error, an unknown column -- come now) and refused at
        # Bind: PostgreSQL checks privileges when a statement is bound, not when it is parsed,
        # and tools describe statements they never run.
        if isinstance(route, Refuse) or route.describe_upstream:
            d = await self._describe_upstream(m.sql, m.param_oids, extended=True)
            if d is None:
                return
            stmt.described = d
        self.statements[m.name] = stmt
        await self._write(ParseComplete())

    async def _bind(self, statement: str) -> None:
        """Bind to a statement answered here (the session's ``_handle_now`` relays the
        others); the Bind is ``self._frame``, well formed or not."""
        stmt = self.statements[statement]
        body = self._frame[5:]
        if await self._settle():
            return
        err = self._bind_portal(body, stmt)
        if err is not None:
            await self._refuse(err, extended=True, checks_transaction=False)
            return
        self._flush_client()
        await self._drain()

    def _bind_portal(self, body: bytes, stmt: Statement) -> LaprasError | None:
        """Make the portal of a Bind (``body``) to a statement answered here and send
        BindComplete; or return the error to answer (then nothing is sent).

        The body is read and checked in the order of PostgreSQL's exec_bind_message
        (postgres.c), so that a Bind gets the error PostgreSQL reports first, well formed or
        not: the parameter format and value counts, the failed transaction, the portal name;
        each parameter in turn (its bytes, its format code, its value); the result format
        codes, the end of the message; the privilege check (a refused statement: PortalStart);
        the result format count. Layout: protocol-message-formats, "Bind"."""
        r = PqReader(body)
        try:
            portal, name = r.string(), r.string()
            pfmts = tuple(r.int16() for _ in range(r.uint16()))
            n = r.uint16()
            if len(pfmts) > 1 and len(pfmts) != n:
                return ProtocolError(
                    f"bind message has {len(pfmts)} parameter formats but {n} parameters"
                )
            oids = stmt.described.param_oids if stmt.described else stmt.param_oids
            if n != len(oids):
                return ProtocolError(
                    f"bind message supplies {n} parameters, but prepared statement "
                    f'"{name}" requires {len(oids)}'
                )
            if self.conn.txn_status == "E":
                return InFailedTransaction()
            if portal and portal in self.portals:
                return DuplicateCursor(f'cursor "{portal}" already exists')
            # CreatePortal drops the unnamed portal it replaces, even if the Bind then fails.
            self.portals.pop(portal, None)
            decode = isinstance(stmt.route, AnswerLocally)  # a refused one is never run
            raws: list[bytes | None] = []
            fmts: list[int] = []
            values: list[object] = []
            for i, oid in enumerate(oids):
                length = r.int32()
                raw = None if length == -1 else r.take(length)
                f = pfmts[i] if len(pfmts) > 1 else pfmts[0] if pfmts else 0
                if f != 0 and f != 1:
                    return UnsupportedFormatCode(f"unsupported format code: {f}")
                if f == 1 and raw is not None:
                    err = _binary_length_error(oid, raw, i)
                    if err is not None:
                        return err
                if decode:
                    try:
                        values.append(pgtypes.decode(oid, raw, f))
                    except (ValueError, ArithmeticError, UnicodeDecodeError) as e:
                        return _bad_param(e)
                raws.append(raw)
                fmts.append(f)
            rfmts = tuple(r.int16() for _ in range(r.uint16()))
            r.end()
        except LaprasError as e:  # what PqReader raises, as PostgreSQL's pq_getmsg*
            return e
        if isinstance(stmt.route, Refuse):
            return stmt.route.error
        fields = self._fields(stmt) or ()
        formats = resolve_formats(rfmts, len(fields))
        if formats is None:
            return ProtocolError(
                f"bind message has {len(rfmts)} result formats but query has {len(fields)} columns"
            )
        self.portals[portal] = Portal(
            statement=stmt,
            params=tuple(values),
            raw_params=tuple(raws),
            param_formats=tuple(fmts),
            fields=tuple(f.with_format(fmt) for f, fmt in zip(fields, formats, strict=True)),
        )
        self._send(BindComplete())
        return None

    def _portal_gone(self, m: Describe | Execute | Close, frame: bytes, kind: Kind) -> bool:
        """True, and ``frame`` relayed for the backend to answer, when the portal ``m`` names
        was dropped while the session waited for the backend: a Sync before it ended the
        transaction, as PostgreSQL drops a transaction's portals (the backend then has no such
        portal either, and answers as PostgreSQL would)."""
        name = m.portal if isinstance(m, Execute) else m.name if m.kind == "P" else None
        if name is None or name in self.portals:
            return False
        if not isinstance(m, Execute) and name in self.local.cursors:
            return False  # a cursor answered here, described or closed by the protocol
        self.relay.forward(frame, kind)
        return True

    async def _describe(self, m: Describe) -> None:
        """Describe a statement or portal answered here (the session's ``_handle_now``
        relays the others)."""
        frame = self._frame
        if await self._settle():
            return
        if self._portal_gone(m, frame, Kind.DESCRIBE_P):
            return
        if m.kind == "P" and m.name not in self.portals and self.conn.txn_status == "E":
            # a cursor made here: its rows' description in a failed transaction is 25P02
            await self._local_error(InFailedTransaction())
            return
        self._describe_local(m)
        self._flush_client()
        await self._drain()

    def _describe_local(self, m: Describe) -> None:
        if m.kind == "S":
            stmt = self.statements[m.name]
            oids = stmt.described.param_oids if stmt.described else stmt.param_oids
            fields = self._fields(stmt)
            self._send(ParameterDescription(oids=oids))
            self._send(RowDescription(fields=fields) if fields else NoData())
        else:
            portal = self.portals.get(m.name)
            if portal is None:  # a cursor made here: its columns, in text (as PostgreSQL)
                cursor = self.local.cursors[m.name]
                self._send(RowDescription(fields=_cursor_fields(cursor, 0)))
                return
            self._send(RowDescription(fields=portal.fields) if portal.fields else NoData())

    async def _execute(self, m: Execute) -> None:
        """Execute a portal answered here (the session's ``_handle_now`` relays the
        others)."""
        frame = self._frame
        if await self._settle():
            return
        portal = self.portals.get(m.portal)
        if portal is None:
            self._portal_gone(m, frame, Kind.EXECUTE)
            return
        if self.conn.txn_status == "E":
            await self._local_error(InFailedTransaction())
            return
        err = result_format_error(portal)
        if err is not None:
            await self._local_error(err)
            return
        if portal.done:
            await self._local_error(NotInPrerequisiteState(f'portal "{m.portal}" cannot be run'))
            return
        if portal.rows is None:
            stmt = portal.statement
            if stmt.command is not None or (
                isinstance(stmt.route, AnswerLocally) and stmt.route.wrapper is not None
            ):
                if not await self._execute_held(portal, m):
                    return
            else:
                res = await self._local_result(self._execution(portal, m), extended=True)
                if res is None:
                    return
                portal.rows, portal.tag, portal.notices = res
                for n in portal.notices:
                    self._send(n)
        self._send_rows(portal, m)
        self._flush_client()
        await self._drain()

    def _execution(self, portal: Portal, m: Execute) -> Execution:
        stmt = portal.statement
        assert isinstance(stmt.route, AnswerLocally)
        return Execution(
            statement=stmt.info or self._info(stmt.sql, "extended"),
            route=stmt.route,
            param_oids=stmt.described.param_oids if stmt.described else stmt.param_oids,
            params=portal.params,
            raw_params=portal.raw_params,
            param_formats=portal.param_formats,
            fields=portal.fields,
            max_rows=m.max_rows,
        )

    def _execute_now(self, portal: Portal, m: Execute) -> bool:
        """Make the rows of a portal answered here when the router has the answer at once
        (a stored answer); False when the task must run the execution."""
        route = portal.statement.route
        if (
            not isinstance(route, AnswerLocally)
            or route.wrapper is not None
            or portal.statement.command is not None
        ):
            return False  # the task answers wrappers and commands (_execute_held)
        execution = self._execution(portal, m)
        try:
            result = route.result or self.server.router.execute_now(execution)
            if result is None:
                return False
            portal.rows = self._encode_rows(result, execution.fields)
        except Exception:  # the task runs it again and reports what goes wrong
            return False
        portal.tag, portal.notices = result.command_tag or "", self._notices(result)
        for n in portal.notices:
            self._send(n)
        return True

    def _send_rows(self, portal: Portal, m: Execute) -> None:
        """The next rows of a portal answered here, and how the Execute ends."""
        rows = portal.rows
        assert rows is not None
        start = portal.sent
        end = len(rows) if m.max_rows <= 0 else min(len(rows), start + m.max_rows)
        for row in rows[start:end]:
            self._send(DataRow(values=row))
        portal.sent = end
        if m.max_rows > 0 and end - start == m.max_rows:
            # As PostgreSQL: max_rows fetched, the end is not known yet (protocol-flow,
            # "Extended Query": PortalSuspended).
            self._send(PortalSuspended())
        else:
            self._send(CommandComplete(tag=portal.tag or f"{portal.verb} {end - start}"))

    async def _close_msg(self, m: Close) -> None:
        """Close a statement or portal answered here (the session's ``_handle_now`` relays
        the others)."""
        frame = self._frame
        if await self._settle():
            return
        if self._portal_gone(m, frame, Kind.CLOSE):
            return
        self._close_local(m)
        self._flush_client()
        await self._drain()

    def _close_local(self, m: Close) -> None:
        if m.kind == "S":
            del self.statements[m.name]
        elif m.name in self.portals:
            del self.portals[m.name]
        else:
            self.local.close(m.name)  # a cursor made here, closed as a portal
        self._send(CloseComplete())

    def _intercepted(self, sql: str) -> Command | None:
        """The command ``sql`` is when it addresses what the session holds (or takes a name
        it holds, which PostgreSQL refuses); None: relay it."""
        if _COMMAND_VERB.match(sql) is None:
            return None
        cmd = wrappers.command(sql)
        if cmd is None or cmd.name is None:
            return None  # CLOSE ALL, DEALLOCATE ALL: relayed (_on_simple_statement)
        if isinstance(cmd, Fetch | CloseCursor | NamesCursor):
            return cmd if cmd.name in self.local.cursors else None
        if cmd.name in self.local.prepared or self._local_statement(cmd.name) is not None:
            return cmd
        return None

    def _local_statement(self, name: str) -> Statement | None:
        """The protocol-level statement ``name`` when it was prepared here (the backend has
        never seen it)."""
        stmt = self.statements.get(name) if name else None
        return stmt if stmt is not None and not isinstance(stmt.route, Relay) else None

    def _command_route(self, cmd: Command) -> Refuse | AnswerLocally:
        """The route of a Parse of a command answered here: its result columns."""
        if isinstance(cmd, NamesCursor):
            return Refuse(DuplicateCursor(f'cursor "{cmd.name}" already exists'))
        if isinstance(cmd, NamesStatement):
            return Refuse(dup_statement(cmd.name))
        columns: tuple[Column, ...] = ()
        if isinstance(cmd, Fetch) and not cmd.move:
            columns = self.local.cursors[cmd.name].columns
        elif isinstance(cmd, ExecutePrepared):
            columns = self._prepared_columns(cmd.name)
        return AnswerLocally(columns=columns, describe_upstream=False)

    def _prepared_columns(self, name: str) -> tuple[Column, ...]:
        prep = self.local.prepared.get(name)
        if prep is not None:
            return prep.route.columns or ()
        stmt = self._local_statement(name)
        fields = self._fields(stmt) if stmt is not None else None
        return tuple(
            Column(
                name=f.name,
                type_oid=f.type_oid,
                type_modifier=f.type_modifier,
                table_oid=f.table_oid,
                column_attr=f.column_attr,
            )
            for f in fields or ()
        )

    async def _simple_command(self, cmd: Command) -> bool:
        if self.conn.txn_status == "E":
            self._send(render_error(InFailedTransaction()))
            return False
        res = await self._command_answer(cmd, extended=False)
        if res is None:
            return False
        pre, fields, rows, tag = res
        for msg in pre:
            self._send(msg)
        if fields is not None:
            self._send(RowDescription(fields=fields))
        for row in rows:
            self._send(DataRow(values=row))
        self._send(CommandComplete(tag=tag))
        self._flush_client()
        return True

    async def _execute_held(self, portal: Portal, m: Execute) -> bool:
        """The first Execute of a portal of a wrapper or a command answered here: send what
        comes before its rows, keep the rows and the tag in the portal; False when it was
        refused (answered already)."""
        stmt = portal.statement
        if stmt.command is not None:
            res = await self._command_answer(stmt.command, extended=True, portal=portal)
            if res is None:
                return False
            pre, fields, rows, tag = res
            if fields is not None:
                # FETCH and EXECUTE return rows, which Execute may page: each chunk's tag
                # counts its own rows (pquery.c, PortalRun of a PORTAL_UTIL_SELECT)
                portal.verb, tag = tag.split()[0], ""
        else:
            msgs = await self._wrapped_answer(self._execution(portal, m), extended=True)
            if msgs is None:
                return False
            done = msgs.pop()
            assert isinstance(done, CommandComplete)
            pre, rows, tag = msgs, [], done.tag
        for msg in pre:
            self._send(msg)
        portal.rows, portal.tag = rows, tag
        portal.done = bool(tag)
        return True

    async def _command_answer(
        self, cmd: Command, *, extended: bool, portal: Portal | None = None
    ) -> (
        tuple[
            list[BackendMessage],
            tuple[FieldDescription, ...] | None,
            list[tuple[bytes | None, ...]],
            str,
        ]
        | None
    ):
        """Answer a command addressing what the session holds: the messages before the
        rows, the columns (None: no RowDescription), the encoded rows and the command tag;
        None when it was refused (answered already, as PostgreSQL answers it)."""
        try:
            if isinstance(cmd, NamesCursor):
                raise DuplicateCursor(f'cursor "{cmd.name}" already exists')
            if isinstance(cmd, NamesStatement):
                raise dup_statement(cmd.name)
            if isinstance(cmd, Fetch | CloseCursor):
                name = cmd.name or ""
                cursor = self.local.cursors.get(name)
                if cursor is None:
                    raise UndefinedCursor(f'cursor "{name}" does not exist')
                if isinstance(cmd, CloseCursor):
                    self.local.close(name)
                    return [], None, [], "CLOSE CURSOR"
                rows, n = cursor.fetch(cmd)
                if cmd.move:
                    return [], None, [], f"MOVE {n}"
                fields = _cursor_fields(cursor, 1 if cursor.binary else 0)
                if portal is not None and len(portal.fields) == len(fields):
                    fields = portal.fields  # the formats of the FETCH's own Bind
                encoded = self._encode_rows(LocalResult(rows=tuple(rows)), fields)
                return [], fields, encoded, f"FETCH {n}"
            name = cmd.name or ""
            if isinstance(cmd, Deallocate):
                if self.local.prepared.pop(name, None) is None:
                    if self._local_statement(name) is None:
                        raise InvalidStatementName(f'prepared statement "{name}" does not exist')
                    del self.statements[name]  # prepared by the protocol, answered here
                return [], None, [], "DEALLOCATE"
            execution = self._execute_prepared(cmd, portal)
        except LaprasError as e:
            await self._refuse(e, extended=extended)
            return None
        except Exception as e:
            await self._refuse(render_unexpected(e, where="local command"), extended=extended)
            return None
        if isinstance(execution, LaprasError):
            await self._refuse(execution, extended=extended)
            return None
        res = await self._local_result(execution, extended=extended)
        if res is None:
            return None
        rows_, tag, notices = res
        return list(notices), execution.fields, rows_, tag or f"SELECT {len(rows_)}"

    def _execute_prepared(self, cmd: Command, portal: Portal | None) -> Execution | LaprasError:
        """The execution ``EXECUTE name (args)`` asks for, or its error (PostgreSQL's: a
        wrong number of arguments, a value its type does not read)."""
        assert isinstance(cmd, ExecutePrepared)
        prep = self.local.prepared.get(cmd.name)
        if prep is not None:
            route, info, oids = prep.route, prep.info, prep.param_oids
            own = len(route.param_oids or ())
        else:
            stmt = self._local_statement(cmd.name)
            if stmt is None:
                return InvalidStatementName(f'prepared statement "{cmd.name}" does not exist')
            if not isinstance(stmt.route, AnswerLocally) or stmt.command is not None:
                if isinstance(stmt.route, Refuse):
                    return stmt.route.error
                return FeatureNotSupported(
                    f'EXECUTE of prepared statement "{cmd.name}" is not supported',
                    hint="execute it with the protocol's Bind and Execute",
                )
            if stmt.route.wrapper is not None:
                return FeatureNotSupported(
                    f'EXECUTE of prepared statement "{cmd.name}" is not supported',
                    hint="execute it with the protocol's Bind and Execute",
                )
            route, info = stmt.route, stmt.info or self._info(stmt.sql, "extended")
            oids = stmt.described.param_oids if stmt.described else stmt.param_oids
            own = len(oids)
        if cmd.args is None:
            return FeatureNotSupported(
                "only constants are accepted as EXECUTE parameters of a statement answered "
                "by the proxy",
                hint="write each parameter as a literal, e.g. EXECUTE p(30, 'Male')",
            )
        args: tuple[str | None, ...] = cmd.args if oids else ()
        if len(args) != len(oids):
            return SqlSyntaxError(
                f'wrong number of parameters for prepared statement "{cmd.name}"',
                detail=f"Expected {len(oids)} parameters but got {len(args)}.",
            )
        params: list[object] = []
        for oid, arg in zip(oids, args, strict=True):
            try:
                params.append(pgtypes.decode(oid, None if arg is None else arg.encode(), 0))
            except (ValueError, ArithmeticError, UnicodeDecodeError):
                return InvalidParameterValue(
                    f'invalid input syntax for type {_TYPE_NAMES.get(oid, "of the parameter")}: "{arg}"'
                )
        columns = route.columns
        if columns is None:
            stmt = self._local_statement(cmd.name)
            columns = self._prepared_columns(cmd.name) if stmt is not None else ()
        fields = tuple(field_from_column(c) for c in columns)
        if portal is not None and len(portal.fields) == len(fields):
            fields = portal.fields
        return Execution(
            statement=info,
            route=route,
            param_oids=oids[:own],
            params=tuple(params[:own]),
            raw_params=tuple(None if a is None else a.encode() for a in args[:own]),
            param_formats=(0,) * min(own, len(args)),
            fields=fields,
        )

    async def _wrapped_answer(
        self, execution: Execution, *, extended: bool
    ) -> list[BackendMessage] | None:
        """The answer of a DP statement in its wrapper, as the messages to send (the last
        a CommandComplete), or None when it was refused (answered already). Every check that
        can fail comes before the answer is made: for a cursor, the transaction block and
        the name (here and on the backend)."""
        route = execution.route
        w = route.wrapper
        columns = route.columns or ()
        if isinstance(w, PrepareAs):
            return await self._prepare_sql(execution, w, extended=extended)
        if isinstance(w, DeclareCursor):
            err: LaprasError | None = None
            if not w.hold and self.conn.txn_status == "I":
                err = NoActiveTransaction("DECLARE CURSOR can only be used in transaction blocks")
            elif w.name in self.local.cursors or w.name in self.portals:
                err = DuplicateCursor(f'cursor "{w.name}" already exists')
            else:
                taken = await self._hidden_row(_CURSOR_TAKEN, (w.name,), extended=extended)
                if taken is None:
                    return None
                if taken[:1] == (b"t",):
                    err = DuplicateCursor(f'cursor "{w.name}" already exists')
            if err is not None:
                await self._refuse(err, extended=extended)
                return None
        result = await self._local_answer(execution, extended=extended)
        if result is None:
            return None
        out: list[BackendMessage] = list(self._notices(result))
        if isinstance(w, DeclareCursor):
            self.local.add_cursor(
                Cursor(
                    name=w.name,
                    columns=columns,
                    rows=result.rows,
                    binary=w.binary,
                    no_scroll=w.scroll is False,
                    hold=w.hold,
                    pending=self.conn.txn_status != "I",
                )
            )
            out.append(CommandComplete(tag="DECLARE CURSOR"))
            return out
        assert isinstance(w, CopyTo)
        try:
            data = copy_data(
                w, [c.name for c in columns], [c.type_oid for c in columns], result.rows
            )
        except Exception as e:  # a bug: the answer is made, its encoding failed
            await self._refuse(render_unexpected(e, where="COPY"), extended=extended)
            return None
        out.append(copy_response(w, len(columns)))
        out.extend(CopyData(data=d) for d in data)
        out.append(CopyDone())
        out.append(CommandComplete(tag=f"COPY {len(result.rows)}"))
        return out

    async def _prepare_sql(
        self, execution: Execution, w: PrepareAs, *, extended: bool
    ) -> list[BackendMessage] | None:
        """``PREPARE name [(types)] AS <DP statement>``: kept here for EXECUTE. The name
        must be free here and on the backend (one namespace with the protocol's statements);
        the declared types are the backend's own reading of them (regtype)."""
        name = w.name
        if name in self.local.prepared or name in self.statements:
            await self._refuse(dup_statement(name), extended=extended)
            return None
        checks = ", ".join(
            f"${i + 2}::pg_catalog.regtype::pg_catalog.oid" for i in range(len(w.param_types))
        )
        sql = _STATEMENT_TAKEN + (f", {checks}" if checks else "")
        row = await self._hidden_row(sql, (name, *w.param_types), extended=extended)
        if row is None:
            return None
        if row[:1] == (b"t",):
            await self._refuse(dup_statement(name), extended=extended)
            return None
        declared = tuple(int(v) if v is not None else 0 for v in row[1:])
        own = execution.route.param_oids or ()
        self.local.prepared[name] = Prepared(
            name=name,
            route=execution.route,
            info=execution.statement,
            param_oids=_merged(declared, own),
        )
        return [CommandComplete(tag="PREPARE")]


def result_format_error(portal: Portal) -> LaprasError | None:
    """PostgreSQL takes any result format code at Bind (Describe shows it as it is) and refuses
    one other than text or binary when the portal runs (printtup.c), before any row."""
    for f in portal.fields:
        if f.format != 0 and f.format != 1:
            return UnsupportedFormatCode(f"unsupported format code: {f.format}")
    return None


# The binary receive functions of fixed-size types read exactly their size with pq_getmsgint
# (boolrecv: pq_getmsgbyte), and exec_bind_message requires the value to be used up.
_BINARY_SIZE = {
    pgtypes.BOOL: 1,
    pgtypes.INT2: 2,
    pgtypes.INT4: 4,
    pgtypes.INT8: 8,
    pgtypes.OID: 4,
    pgtypes.FLOAT4: 4,
    pgtypes.FLOAT8: 8,
    pgtypes.DATE: 4,
    pgtypes.TIMESTAMP: 8,
    pgtypes.TIMESTAMPTZ: 8,
}


def _binary_length_error(oid: int, raw: bytes, i: int) -> LaprasError | None:
    """PostgreSQL's error for binary parameter ``i`` of a fixed-size type of the wrong size."""
    size = _BINARY_SIZE.get(oid)
    if size is None or len(raw) == size:
        return None
    if len(raw) < size:
        return ProtocolError(
            "no data left in message" if size == 1 else "insufficient data left in message"
        )
    return InvalidBinaryRepresentation(f"incorrect binary data format in bind parameter {i + 1}")


def _merged(declared: Sequence[int], known: Sequence[int]) -> tuple[int, ...]:
    """Parameter types: the declared ones, the known ones where a declared one is 0 or
    missing (PostgreSQL infers those)."""
    n = max(len(declared), len(known))
    out = []
    for i in range(n):
        d = declared[i] if i < len(declared) else 0
        out.append(d or (known[i] if i < len(known) else 0))
    return tuple(out)


def _cursor_fields(cursor: Cursor, fmt: int) -> tuple[FieldDescription, ...]:
    return tuple(field_from_column(c, fmt) for c in cursor.columns)


# Type names in PostgreSQL's "invalid input syntax for type ..." messages.
_TYPE_NAMES = {
    pgtypes.BOOL: "boolean",
    pgtypes.INT2: "smallint",
    pgtypes.INT4: "integer",
    pgtypes.INT8: "bigint",
    pgtypes.NUMERIC: "numeric",
    pgtypes.FLOAT4: "real",
    pgtypes.FLOAT8: "double precision",
    pgtypes.DATE: "date",
    pgtypes.TIMESTAMP: "timestamp without time zone",
    pgtypes.TIMESTAMPTZ: "timestamp with time zone",
    pgtypes.OID: "oid",
}


def dup_statement(name: str) -> LaprasError:
    return DuplicatePreparedStatement(f'prepared statement "{name}" already exists')


def _bad_param(e: BaseException) -> LaprasError:
    return InvalidParameterValue(
        "invalid input value for a bind parameter", detail=type(e).__name__
    )
