"""The one place errors and notices are rendered as protocol messages.

Every error that reaches a client is a :class:`dp.errors.LaprasError` subclass declaring its
SQLSTATE and severity (STYLE.md "Errors"); the proxy's own are in :mod:`proxy.exceptions`
(re-exported here). :func:`render_error` renders any of them as an ErrorResponse,
:func:`render_unexpected` any other exception (a bug: XX000, the traceback logged),
:func:`render_notice` a NoticeResponse. The codes follow PostgreSQL's errcodes table
(https://www.postgresql.org/docs/current/errcodes-appendix.html); FATAL means the connection
is closed after the ErrorResponse, as the server does (protocol-flow, "Termination").
"""

from __future__ import annotations

import logging

from dp.errors import LaprasError
from proxy.exceptions import (
    AdminShutdown,
    AuthenticationFailed,
    CharacterNotInRepertoire,
    DuplicateCursor,
    DuplicatePreparedStatement,
    FeatureNotSupported,
    IdleInTransactionTimeout,
    IdleSessionTimeout,
    InFailedTransaction,
    InsufficientPrivilege,
    InvalidAuthorization,
    InvalidBinaryRepresentation,
    InvalidParameterValue,
    InvalidStatementName,
    NoActiveTransaction,
    NotInPrerequisiteState,
    ProtocolError,
    ProtocolViolation,
    QueryCanceled,
    StartupFeatureNotSupported,
    StatementTooLong,
    TooManyConnections,
    UndefinedCursor,
    UnsupportedFormatCode,
    UpstreamUnavailable,
)
from proxy.wire.messages import ErrorResponse, NoticeResponse

__all__ = [
    "AdminShutdown",
    "AuthenticationFailed",
    "CharacterNotInRepertoire",
    "DuplicateCursor",
    "DuplicatePreparedStatement",
    "FeatureNotSupported",
    "IdleInTransactionTimeout",
    "IdleSessionTimeout",
    "InFailedTransaction",
    "InsufficientPrivilege",
    "InvalidAuthorization",
    "InvalidBinaryRepresentation",
    "InvalidParameterValue",
    "InvalidStatementName",
    "LaprasError",
    "NoActiveTransaction",
    "NotInPrerequisiteState",
    "ProtocolError",
    "ProtocolViolation",
    "QueryCanceled",
    "StartupFeatureNotSupported",
    "StatementTooLong",
    "TooManyConnections",
    "UndefinedCursor",
    "UnsupportedFormatCode",
    "UpstreamUnavailable",
    "error_fields",
    "render_error",
    "render_hidden_error",
    "render_notice",
    "render_unexpected",
]

log = logging.getLogger("lapras.proxy")


def error_fields(err: LaprasError) -> tuple[tuple[str, str], ...]:
    """The ErrorResponse fields of ``err`` (protocol-error-fields): S, V, C, M always; D, H, P
    when known. ``V`` is the non-localised severity (since 9.6), which clients prefer."""
    fields: list[tuple[str, str]] = [
        ("S", err.severity),
        ("V", err.severity),
        ("C", err.sqlstate),
        ("M", err.message),
    ]
    if err.detail is not None:
        fields.append(("D", err.detail))
    if err.hint is not None:
        fields.append(("H", err.hint))
    if err.position is not None:
        fields.append(("P", str(err.position)))
    return tuple(fields)


def render_error(err: LaprasError) -> ErrorResponse:
    """Render any :class:`LaprasError` as an ErrorResponse message."""
    return ErrorResponse(fields=error_fields(err))


def render_unexpected(exc: BaseException, *, where: str, fatal: bool = False) -> ErrorResponse:
    """An exception that is not a LaprasError is a bug: log the traceback here, send the
    client XX000 with a generic message that reveals nothing about data or internals. ``fatal``:
    the session ends with it (severity FATAL, the connection closes after it)."""
    log.error("internal error in %s", where, exc_info=exc)
    err = render_error(LaprasError("internal error in the LAPRAS proxy; see the server log"))
    if fatal:
        err = ErrorResponse(fields=tuple((c, "FATAL" if c in "SV" else v) for c, v in err.fields))
    return err


def render_notice(
    message: str,
    *,
    severity: str = "NOTICE",
    sqlstate: str = "00000",
    detail: str | None = None,
    hint: str | None = None,
) -> NoticeResponse:
    """A NoticeResponse (protocol-error-fields, as an error's: S, V, C, M, then D and H when
    known), e.g. what a DP answer spent (:class:`proxy.wire.router.Notice`)."""
    fields = [("S", severity), ("V", severity), ("C", sqlstate), ("M", message)]
    if detail:
        fields.append(("D", detail))
    if hint:
        fields.append(("H", hint))
    return NoticeResponse(fields=tuple(fields))


def render_hidden_error(err: ErrorResponse) -> ErrorResponse:
    """The backend's error of a statement the proxy ran unseen for the client's (a check of a
    name), as the error of the client's statement: its severity, code, message, detail and
    hint; no position or context, which would point into the hidden text."""
    return ErrorResponse(fields=tuple(f for f in err.fields if f[0] in "SVCMDH"))
