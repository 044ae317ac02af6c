"""The upstream leg: one raw protocol-3.0 connection to the real PostgreSQL per client session.

The proxy logs in as the passthrough role (no SELECT on protected tables) and relays frames
without re-encoding them, so OIDs, formats, notices and ParameterStatus values are the
backend's own. Login follows protocol-flow "Start-up": StartupMessage, then one of
AuthenticationOk / CleartextPassword / MD5Password / SASL (SCRAM-SHA-256 via ``scramp``),
then ParameterStatus*, BackendKeyData, ReadyForQuery.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import scramp

from proxy.errors import ProtocolViolation, UpstreamUnavailable
from proxy.wire.channel import Channel
from proxy.wire.messages import (
    MAX_BACKEND_MESSAGE,
    AuthenticationCleartextPassword,
    AuthenticationMD5Password,
    AuthenticationOk,
    AuthenticationSASL,
    AuthenticationSASLContinue,
    AuthenticationSASLFinal,
    BackendKeyData,
    CancelRequest,
    Close,
    Describe,
    ErrorResponse,
    FieldDescription,
    FrameBuffer,
    NegotiateProtocolVersion,
    NoData,
    NoticeResponse,
    ParameterDescription,
    ParameterStatus,
    Parse,
    PasswordMessage,
    ReadyForQuery,
    RowDescription,
    StartupMessage,
    Sync,
    decode_backend,
)

# Startup parameters never forwarded: identity comes from the proxy's upstream role, and a
# replication connection is refused before we get here.
_NOT_FORWARDED = frozenset({"user", "database", "replication"})


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamConfig:
    host: str
    port: int
    user: str
    password: str | None = None
    database: str = "postgres"
    connect_timeout: float = 10.0

    @staticmethod
    def from_dsn(dsn: str, *, connect_timeout: float = 10.0) -> UpstreamConfig:
        """Build from a libpq URI or key=value string (parsed by psycopg's conninfo)."""
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(dsn)
        return UpstreamConfig(
            host=str(d.get("host") or "127.0.0.1"),
            port=int(d.get("port") or 5432),
            user=str(d.get("user") or "postgres"),
            password=None if d.get("password") is None else str(d["password"]),
            database=str(d.get("dbname") or d.get("user") or "postgres"),
            connect_timeout=connect_timeout,
        )


class UpstreamStartupError(Exception):
    """The backend refused the login with this ErrorResponse (relayed to the client)."""

    def __init__(self, error: ErrorResponse) -> None:
        super().__init__(error.field("M") or "upstream error")
        self.error = error


@dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """The backend's own Describe of a statement: parameter types and result columns."""

    param_oids: tuple[int, ...]
    fields: tuple[FieldDescription, ...] | None  # None = NoData (no result rows)


class UpstreamConnection:
    """A logged-in connection to the backend: read frame by frame while logging in, then
    (``start_relay``) frames go to a callback as they arrive."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        config: UpstreamConfig,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.config = config
        self._frames = FrameBuffer(max_message=MAX_BACKEND_MESSAGE)
        self.parameters: list[ParameterStatus] = []
        self.notices: list[NoticeResponse] = []
        self.backend_key: BackendKeyData | None = None
        self.closed = False
        self._channel: Channel | None = None
        self._write: Callable[[bytes], None] = writer.write

    @classmethod
    async def connect(
        cls,
        config: UpstreamConfig,
        params: Sequence[tuple[str, str]] = (),
        *,
        database: str | None = None,
    ) -> UpstreamConnection:
        """Open and log in. Raises UpstreamStartupError (backend said no) or
        UpstreamUnavailable (cannot reach or speak to it)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(config.host, config.port), config.connect_timeout
            )
        except (OSError, TimeoutError) as e:
            raise UpstreamUnavailable(
                "could not connect to the upstream PostgreSQL server",
                detail=type(e).__name__,
            ) from None
        conn = cls(reader, writer, config)
        try:
            await asyncio.wait_for(conn._login(params, database), config.connect_timeout)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _login(self, params: Sequence[tuple[str, str]], database: str | None) -> None:
        cfg = self.config
        fwd = [(k, v) for k, v in params if k not in _NOT_FORWARDED and not k.startswith("_pq_.")]
        startup = StartupMessage(
            params=(("user", cfg.user), ("database", database or cfg.database), *fwd)
        )
        self.write(startup.encode())
        scram: scramp.ScramClient | None = None
        while True:
            msg = await self.read_message()
            if isinstance(msg, AuthenticationOk):
                continue
            if isinstance(msg, AuthenticationCleartextPassword):
                self.write(PasswordMessage(data=self._password().encode() + b"\x00").encode())
            elif isinstance(msg, AuthenticationMD5Password):
                pw = self._password()
                inner = hashlib.md5((pw + cfg.user).encode()).hexdigest()
                digest = "md5" + hashlib.md5(inner.encode() + msg.salt).hexdigest()
                self.write(PasswordMessage(data=digest.encode() + b"\x00").encode())
            elif isinstance(msg, AuthenticationSASL):
                if "SCRAM-SHA-256" not in msg.mechanisms:
                    raise UpstreamUnavailable("upstream offers no supported SASL mechanism")
                scram = scramp.ScramClient(["SCRAM-SHA-256"], cfg.user, self._password())
                first = scram.get_client_first().encode()
                self.write(PasswordMessage.sasl_initial_response("SCRAM-SHA-256", first).encode())
            elif isinstance(msg, AuthenticationSASLContinue) and scram is not None:
                scram.set_server_first(msg.data.decode())
                self.write(PasswordMessage(data=scram.get_client_final().encode()).encode())
            elif isinstance(msg, AuthenticationSASLFinal) and scram is not None:
                scram.set_server_final(msg.data.decode())
            elif isinstance(msg, ParameterStatus):
                self.parameters.append(msg)
            elif isinstance(msg, BackendKeyData):
                self.backend_key = msg
            elif isinstance(msg, NoticeResponse):
                self.notices.append(msg)
            elif isinstance(msg, NegotiateProtocolVersion):
                continue
            elif isinstance(msg, ErrorResponse):
                raise UpstreamStartupError(msg)
            elif isinstance(msg, ReadyForQuery):
                return
            else:
                raise UpstreamUnavailable(
                    "unexpected message from the upstream server during login",
                    detail=type(msg).__name__,
                )

    def _password(self) -> str:
        if self.config.password is None:
            raise UpstreamUnavailable("the upstream server asks for a password; none configured")
        return self.config.password

    # -- frames ------------------------------------------------------------------------------

    async def read_frame(self) -> tuple[bytes, bytes]:
        """The next (type, body) frame; raises ConnectionError at EOF."""
        while True:
            frame = self._frames.next_frame()
            if frame is not None:
                return frame
            data = await self._reader.read(65536)
            if not data:
                self.closed = True
                raise ConnectionError("upstream closed the connection")
            self._frames.feed(data)

    def start_relay(
        self,
        on_frames: Callable[[list[bytes]], None],
        on_lost: Callable[[BaseException], None],
        on_read: Callable[[bytes], bool] | None = None,
    ) -> None:
        """From now on every complete frame the backend sends goes to ``on_frames`` (a list
        per read, each frame as it came: type byte, length, body), called from the event
        loop; ``on_lost`` is called once when the connection ends or the backend breaks the
        protocol. ``on_read`` first sees each read that starts a frame, and takes it whole
        when it returns True (its frames then never reach ``on_frames``). No ``read_*``
        after this."""

        def lost(e: BaseException) -> None:
            if not self.closed:
                self.closed = True
                on_lost(e)

        def deliver() -> None:
            try:
                frames = self._frames.raw_frames()
            except ProtocolViolation as e:
                lost(e)
                return
            if frames and not self.closed:
                on_frames(frames)

        def on_data(data: bytes) -> None:
            if not data:
                lost(ConnectionResetError("upstream closed the connection"))
                return
            if on_read is not None and not len(self._frames) and on_read(data):
                return
            self._frames.feed(data)
            deliver()

        self._channel = Channel.take_over(self._reader, self._writer, on_data, lost)
        self._write = self._channel.transport.write
        asyncio.get_running_loop().call_soon(deliver)  # frames read with the login's last bytes

    @property
    def writing_paused(self) -> bool:
        """The write buffer towards the backend is above its high-water mark."""
        return self._channel is not None and self._channel.writing_paused

    def pause_reading(self) -> None:
        if self._channel is not None:
            self._channel.pause_reading()

    def resume_reading(self) -> None:
        if self._channel is not None:
            self._channel.resume_reading()

    async def read_message(self) -> object:
        t, body = await self.read_frame()
        return decode_backend(t, body)

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionError("upstream connection is closed")
        self._write(data)

    async def drain(self) -> None:
        if self._channel is not None:
            await self._channel.drain()
        else:
            await self._writer.drain()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(Exception):
                self._writer.write(b"X\x00\x00\x00\x04")
        await Channel.close_stream(self._writer, self._channel)

    async def cancel(self) -> None:
        """Send a CancelRequest for this backend on a new connection (protocol-flow
        "Canceling Requests in Progress"); the backend answers nothing and closes."""
        key = self.backend_key
        if key is None:
            return
        try:
            _, w = await asyncio.wait_for(
                asyncio.open_connection(self.config.host, self.config.port), 5.0
            )
        except (OSError, TimeoutError):
            return
        try:
            w.write(CancelRequest(pid=key.pid, key=key.key).encode())
            await w.drain()
        finally:
            w.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait_closed(), 2.0)


_DESCRIBE_NAME = "__lapras_describe__"


async def describe_idle(
    conn: UpstreamConnection, sql: str, param_oids: Sequence[int] = ()
) -> Described:
    """Parse + Describe ``sql`` on an idle connection and return the backend's types.

    Works for a role without SELECT on the tables involved: privileges are checked at
    execution, not at Parse. Raises UpstreamStartupError-like ``DescribeError`` with the
    backend's ErrorResponse if the statement does not parse or analyse.
    """
    conn.write(
        Parse(name=_DESCRIBE_NAME, sql=sql, param_oids=tuple(param_oids)).encode()
        + Describe(kind="S", name=_DESCRIBE_NAME).encode()
        + Close(kind="S", name=_DESCRIBE_NAME).encode()
        + Sync().encode()
    )
    await conn.drain()
    params: tuple[int, ...] = ()
    fields: tuple[FieldDescription, ...] | None = None
    error: ErrorResponse | None = None
    while True:
        msg = await conn.read_message()
        if isinstance(msg, ParameterDescription):
            params = msg.oids
        elif isinstance(msg, RowDescription):
            fields = msg.fields
        elif isinstance(msg, NoData):
            fields = None
        elif isinstance(msg, ErrorResponse):
            error = msg
        elif isinstance(msg, ReadyForQuery):
            break
    if error is not None:
        raise DescribeError(error)
    return Described(param_oids=params, fields=fields)


class DescribeError(Exception):
    """The backend could not Parse/Describe the statement; ``error`` is its ErrorResponse."""

    def __init__(self, error: ErrorResponse) -> None:
        super().__init__(error.field("M") or "describe failed")
        self.error = error
