"""The one seam between the wire and the answering logic: :class:`StatementRouter`.

The session asks the router about every statement:

* simple Query: ``route()`` once per statement of the (possibly multi-statement) string;
* extended query: ``route()`` at Parse with the SQL text and the declared parameter types.

``route()`` returns one of

* :data:`RELAY` -- pass the statement to the backend (passthrough role);
* :class:`Refuse` -- answer with this LaprasError (e.g. 42501); the session makes the
  backend's transaction fail too, so the client sees exactly PostgreSQL's transaction states;
* :class:`AnswerLocally` -- the proxy answers. The result columns are the backend's own
  Describe of the same SQL (default) or ``columns``; the rows come from ``result`` when given
  (e.g. a zero-row probe) or else from ``execute()``, which the session calls at the statement's
  execution (simple Query: at once; extended: at the first Execute of the portal) with the
  decoded parameter values, the backend's parameter/column types and the result formats.

``execute()`` returns a :class:`LocalResult`: rows of Python values (encoded by
:mod:`proxy.wire.types` in text or binary as the client asked) or :class:`EncodedCell`, a
command tag and notices. It may raise any LaprasError; other exceptions become XX000.

An :class:`AnswerLocally` with a ``wrapper`` (:mod:`rewriter.wrappers`) is delivered by the
session as the wrapper says: ``COPY ... TO STDOUT`` as a copy-out stream, ``DECLARE ...
CURSOR`` as a cursor the session holds (proxy.wire.local), ``PREPARE ... AS`` as a statement
kept for ``EXECUTE``, executed then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import sqlglot
from sqlglot import exp

from dp.errors import LaprasError
from proxy.errors import InsufficientPrivilege
from proxy.wire.messages import FieldDescription
from proxy.wire.settings import SessionSettings
from proxy.wire.types import type_size
from rewriter.wrappers import Wrapper


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    user: str
    database: str
    application_name: str
    session_pid: int
    txn_status: str  # 'I', 'T' or 'E' before this statement
    #: The session's ``lapras.*`` settings (one object for the session's life; the router
    #: shows it every statement, :mod:`proxy.wire.settings`). None outside a session.
    settings: SessionSettings | None = field(default=None, compare=False)
    # the session's TimeZone as the backend reports it (public: dates and timestamps with
    # time zone are answered in it, see rewriter.pgtime)
    time_zone: str = "UTC"


@dataclass(frozen=True, slots=True, kw_only=True)
class StatementInfo:
    sql: str
    protocol: Literal["simple", "extended"]
    statement_name: str = ""  # extended protocol only; "" = the unnamed statement
    param_oids: tuple[int, ...] = ()  # as declared in Parse (0 = infer)
    session: SessionInfo


@dataclass(frozen=True, slots=True)
class Relay:
    """Send the statement to the backend: unchanged, or as ``sql`` when the router rewrote it
    (for example to hide the statistics of protected tables)."""

    sql: str | None = None


RELAY = Relay()


@dataclass(frozen=True, slots=True)
class Refuse:
    error: LaprasError


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """A result column when the router knows it better than the backend's Describe."""

    name: str
    type_oid: int
    type_modifier: int = -1
    table_oid: int = 0
    column_attr: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedCell:
    """An already-encoded cell; the session sends whichever form the client asked for."""

    text: bytes | None = None
    binary: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    message: str
    detail: str | None = None
    hint: str | None = None
    severity: str = "NOTICE"
    sqlstate: str = "00000"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalResult:
    rows: tuple[tuple[object, ...], ...] = ()
    command_tag: str | None = None  # default: "SELECT <number of rows>"
    notices: tuple[Notice, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerLocally:
    columns: tuple[Column, ...] | None = None  # None: the backend's Describe gives them
    result: LocalResult | None = None  # None: call StatementRouter.execute()
    plan: object = None  # opaque to the wire; handed back in Execution.route.plan
    describe_upstream: bool = True  # Parse+Describe the SQL on the backend first
    # The wrapper the answer goes out in (COPY ... TO STDOUT, DECLARE ... CURSOR, PREPARE ...
    # AS; None: rows). ``columns`` are then the carried statement's; the wrapper itself has
    # none (Describe: NoData).
    wrapper: Wrapper | None = None
    # The parameter types when the router knows them (used where the Parse left them 0).
    param_oids: tuple[int, ...] | None = None


Route = Relay | Refuse | AnswerLocally


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """Everything the router needs to produce a local answer."""

    statement: StatementInfo
    route: AnswerLocally
    param_oids: tuple[int, ...]  # the backend's inferred types (or the declared ones)
    params: tuple[object, ...]  # decoded Python values (None = NULL)
    raw_params: tuple[bytes | None, ...]
    param_formats: tuple[int, ...]  # one per parameter, 0 text / 1 binary
    fields: tuple[FieldDescription, ...]  # result columns with the client's formats
    max_rows: int = 0  # of the first Execute (0 = all); the session does the paging


class StatementRouter(Protocol):
    # A router that decides without waiting returns the Route itself: the session then
    # relays at once from its read callback (the relay's fast lane); an awaitable is awaited
    # by the session's task.
    def route(self, statement: StatementInfo) -> Route | Awaitable[Route]: ...

    async def execute(self, execution: Execution) -> LocalResult: ...

    # The answer when it is already made and giving it changes nothing (a stored answer):
    # the session then answers from its read callback; None sends it to ``execute``.
    def execute_now(self, execution: Execution) -> LocalResult | None: ...


class ProtectedTablesRouter:
    """A small real router: relays everything except statements that reference a protected
    table, which get 42501 -- the passthrough role would refuse them too, this just says so
    with a helpful message before the backend is asked. Zero-row probes on protected tables
    (``LIMIT 0``, ``WHERE 1 = 0``, ``WHERE 1 <> 1``, ``WHERE false``) are answered locally with
    the backend's column types and no rows, as BI tools need (pgwire-research §0.12).

    The coordinator's rewriter-backed router replaces this one.
    """

    def __init__(self, protected: Collection[str]) -> None:
        self._protected = frozenset(t.lower() for t in protected)

    def protected_tables(self, sql: str) -> tuple[list[str], object | None]:
        try:
            trees = sqlglot.parse(sql, read="postgres")
        except Exception:
            return [], None  # let the backend report the syntax error
        hits: list[str] = []
        for tree in trees:
            if tree is None:
                continue
            for t in tree.find_all(exp.Table):
                if t.name.lower() in self._protected:
                    hits.append(t.name.lower())
        return hits, trees[0] if len(trees) == 1 else None

    def route(self, statement: StatementInfo) -> Route:
        hits, tree = self.protected_tables(statement.sql)
        if not hits:
            return RELAY
        if tree is not None and _is_zero_row_probe(tree):
            return AnswerLocally(result=LocalResult(rows=()))
        return Refuse(
            InsufficientPrivilege(
                f"permission denied for table {hits[0]}",
                detail=f"Table {hits[0]} is protected: rows cannot be read through the proxy.",
                hint="Only differentially private aggregates are answered on protected tables.",
            )
        )

    async def execute(self, execution: Execution) -> LocalResult:
        return LocalResult(rows=())

    def execute_now(self, execution: Execution) -> LocalResult | None:
        return None


def _is_zero_row_probe(tree: object) -> bool:
    if not isinstance(tree, exp.Select):
        return False
    limit = tree.args.get("limit")
    if isinstance(limit, exp.Limit):
        e = limit.expression
        if isinstance(e, exp.Literal) and e.is_int and int(e.this) == 0:
            return True
    where = tree.args.get("where")
    if isinstance(where, exp.Where):
        c = where.this
        if isinstance(c, exp.Boolean) and not c.this:
            return True
        if isinstance(c, exp.EQ | exp.NEQ):
            a, b = c.left, c.right
            if isinstance(a, exp.Literal) and isinstance(b, exp.Literal):
                same = a.this == b.this
                return not same if isinstance(c, exp.EQ) else same
    return False


def field_from_column(col: Column, fmt: int = 0) -> FieldDescription:
    return FieldDescription(
        name=col.name,
        table_oid=col.table_oid,
        column_attr=col.column_attr,
        type_oid=col.type_oid,
        type_size=type_size(col.type_oid),
        type_modifier=col.type_modifier,
        format=fmt,
    )


def resolve_formats(codes: Sequence[int], n: int) -> tuple[int, ...] | None:
    """Per-column formats from a Bind's result codes (protocol-message-formats, Bind): none =
    all text, one = all, else one per column; None when the count does not fit."""
    if not codes:
        return (0,) * n
    if len(codes) == 1:
        return (codes[0],) * n
    if len(codes) != n:
        return None
    return tuple(codes)
