"""The proxy's error classes: each declares its SQLSTATE and severity (STYLE.md "Errors").

Every error that reaches a client is a :class:`dp.errors.LaprasError` subclass. The codes follow
PostgreSQL's errcodes table (https://www.postgresql.org/docs/current/errcodes-appendix.html);
FATAL means the connection is closed after the ErrorResponse, as the server does (protocol-flow,
"Termination"). This module is the bottom of the proxy: it imports nothing of the proxy, so the
codec (:mod:`proxy.wire.messages`) can raise these errors and :mod:`proxy.errors` can render
them as messages of that codec.
"""

from __future__ import annotations

from typing import ClassVar

from dp.errors import LaprasError, Severity


class ProtocolViolation(LaprasError):
    """08P01: malformed, oversized or out-of-order message. The connection is closed.

    ``silent`` marks the cases where PostgreSQL closes without answering (e.g. plaintext
    already buffered behind an SSLRequest, where an answer could be read as TLS bytes).
    """

    sqlstate = "08P01"
    severity: ClassVar[Severity] = "FATAL"

    def __init__(self, message: str, *, silent: bool = False, detail: str | None = None) -> None:
        super().__init__(message, detail=detail)
        self.silent = silent


class StartupFeatureNotSupported(LaprasError):
    """0A000 at start-up (protocol 4.x, replication connections): FATAL."""

    sqlstate = "0A000"
    severity: ClassVar[Severity] = "FATAL"


class FeatureNotSupported(LaprasError):
    """0A000 for a statement or message the proxy does not serve (e.g. FunctionCall)."""

    sqlstate = "0A000"


class AuthenticationFailed(LaprasError):
    """28P01 invalid_password: FATAL. Also used for unknown users, so names are not probed."""

    sqlstate = "28P01"
    severity: ClassVar[Severity] = "FATAL"


class InvalidAuthorization(LaprasError):
    """28000 invalid_authorization_specification: FATAL (e.g. trust from a non-loopback peer)."""

    sqlstate = "28000"
    severity: ClassVar[Severity] = "FATAL"


class TooManyConnections(LaprasError):
    """53300 too_many_connections: FATAL."""

    sqlstate = "53300"
    severity: ClassVar[Severity] = "FATAL"


class AdminShutdown(LaprasError):
    """57P01 admin_shutdown: FATAL, sent to every session on a graceful shutdown."""

    sqlstate = "57P01"
    severity: ClassVar[Severity] = "FATAL"


class IdleSessionTimeout(LaprasError):
    """57P05 idle_session_timeout: FATAL (PostgreSQL 14+ uses the same code)."""

    sqlstate = "57P05"
    severity: ClassVar[Severity] = "FATAL"


class IdleInTransactionTimeout(LaprasError):
    """25P03 idle_in_transaction_session_timeout: FATAL."""

    sqlstate = "25P03"
    severity: ClassVar[Severity] = "FATAL"


class QueryCanceled(LaprasError):
    """57014 query_canceled: a CancelRequest or the statement timeout stopped a statement."""

    sqlstate = "57014"


class InFailedTransaction(LaprasError):
    """25P02 in_failed_sql_transaction, with PostgreSQL's own wording."""

    sqlstate = "25P02"

    def __init__(self) -> None:
        super().__init__(
            "current transaction is aborted, commands ignored until end of transaction block"
        )


class ProtocolError(LaprasError):
    """08P01 at ERROR level: a message whose framing (type, length) is fine but whose content is
    not -- a field running past the end, trailing bytes ("insufficient data left in message",
    "invalid message format": PostgreSQL's pq_getmsg* functions) -- or that does not fit (a
    Bind with the wrong number of parameters). PostgreSQL reports these without closing the
    connection (and skips to Sync after an extended-query message)."""

    sqlstate = "08P01"


class DuplicatePreparedStatement(LaprasError):
    sqlstate = "42P05"


class DuplicateCursor(LaprasError):
    """42P03 duplicate_cursor: a named portal that already exists."""

    sqlstate = "42P03"


class UndefinedCursor(LaprasError):
    """34000 invalid_cursor_name: ``cursor "x" does not exist`` (FETCH, MOVE, CLOSE)."""

    sqlstate = "34000"


class InvalidStatementName(LaprasError):
    """26000 invalid_sql_statement_name: ``prepared statement "x" does not exist``."""

    sqlstate = "26000"


class NoActiveTransaction(LaprasError):
    """25P01 no_active_sql_transaction: ``DECLARE CURSOR can only be used in transaction
    blocks`` (a cursor without HOLD outside a transaction block)."""

    sqlstate = "25P01"


class NotInPrerequisiteState(LaprasError):
    """55000 object_not_in_prerequisite_state: ``cursor can only scan forward``."""

    sqlstate = "55000"


class InvalidParameterValue(LaprasError):
    """22P02 invalid_text_representation (or a bad binary value) in a bind parameter."""

    sqlstate = "22P02"


class UnsupportedFormatCode(LaprasError):
    """22023 invalid_parameter_value: a parameter or result format code other than 0 (text) and
    1 (binary), PostgreSQL's "unsupported format code: N"."""

    sqlstate = "22023"


class InvalidBinaryRepresentation(LaprasError):
    """22P03 invalid_binary_representation: a binary bind parameter longer than its type."""

    sqlstate = "22P03"


class CharacterNotInRepertoire(LaprasError):
    """22021 character_not_in_repertoire: a protocol string that is not valid in the client
    encoding (PostgreSQL's "invalid byte sequence for encoding ...")."""

    sqlstate = "22021"


class InsufficientPrivilege(LaprasError):
    """42501 insufficient_privilege: row-level access to a protected table."""

    sqlstate = "42501"


class StatementTooLong(LaprasError):
    """54000 program_limit_exceeded: the SQL text of a Query or Parse is longer than
    ``[server] max_statement_size``. Refused before it is split, routed or parsed; the
    message names only the client's own size and the setting."""

    sqlstate = "54000"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"statement is too long: {size} bytes, more than the {limit} bytes this proxy accepts",
            hint="the limit is [server] max_statement_size in lapras.toml; send bulk data "
            "with COPY, or split the statement",
        )


class UpstreamUnavailable(LaprasError):
    """08006 connection_failure: the proxy could not reach or log into the backend."""

    sqlstate = "08006"
    severity: ClassVar[Severity] = "FATAL"


class UndefinedFile(LaprasError):
    """58P01 undefined_file: an administrator's input file (a query log, a .sql file of
    statements) cannot be read. Said in PostgreSQL's words for ``COPY ... FROM 'file'``."""

    sqlstate = "58P01"

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(
            f'could not open file "{path}" for reading: {reason}',
            hint="check the path given with --file or --predicted",
        )
