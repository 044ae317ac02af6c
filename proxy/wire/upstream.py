"""The upstream leg: a raw protocol-3.0 connection to the real PostgreSQL (pooled by
:mod:`proxy.wire.pool`).

The proxy logs in as the passthrough role (no SELECT on protected tables) and relays frames
without re-encoding them, so OIDs, formats, notices and ParameterStatus values are the
backend's own. Login follows protocol-flow "Start-up": StartupMessage, then one of
AuthenticationOk / CleartextPassword / MD5Password / SASL (SCRAM-SHA-256 via ``scramp``),
then ParameterStatus*, BackendKeyData, ReadyForQuery.

The connection is made as libpq makes it from the same DSN (:class:`UpstreamConfig`): every
host of a comma-separated ``host`` list in turn (a host starting with ``/`` is a Unix-domain
socket directory), TLS negotiated by ``sslmode`` (``disable``, ``allow``, ``prefer`` -- the
default --, ``require``, ``verify-ca``, ``verify-full``) with ``sslrootcert`` (a file, or
``system`` for the platform's store; default ``~/.postgresql/root.crt`` when it exists, which
makes ``require`` verify the chain as libpq does), ``sslcert``/``sslkey`` for a client
certificate (default ``~/.postgresql/postgresql.crt``/``.key`` when they exist), and
``target_session_attrs`` (``any``, ``read-write``, ``read-only``, ``primary``, ``standby``,
``prefer-standby``) judged from the ``in_hot_standby`` and ``default_transaction_read_only``
parameters the server reports (PostgreSQL 14 and later). As in libpq, ``sslmode`` is ignored on
Unix-domain sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import ssl
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

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


SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
#: SSLRequest: length 8, the code 1234.5679 (protocol-flow "SSL Session Encryption").
_SSL_REQUEST = struct.pack("!ii", 8, 80877103)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamConfig:
    """How to reach and log in to the backend, as libpq would from the same DSN (module doc).

    ``host``/``port`` are the first (or only) address; ``hosts`` all of them, in order.
    """

    host: str
    port: int
    user: str
    password: str | None = None
    database: str = "postgres"
    connect_timeout: float = 10.0
    hosts: tuple[tuple[str, int], ...] = ()
    sslmode: str = "prefer"
    sslrootcert: str | None = None
    sslcert: str | None = None
    sslkey: str | None = None
    target_session_attrs: str = "any"

    def __post_init__(self) -> None:
        if self.sslmode not in SSL_MODES:
            raise ValueError(f"sslmode must be one of {', '.join(SSL_MODES)}")
        if self.target_session_attrs not in SESSION_ATTRS:
            raise ValueError(f"target_session_attrs must be one of {', '.join(SESSION_ATTRS)}")
        if not self.hosts:
            object.__setattr__(self, "hosts", ((self.host, self.port),))

    @staticmethod
    def from_dsn(dsn: str, *, connect_timeout: float = 10.0) -> UpstreamConfig:
        """Build from a libpq URI or key=value string (parsed by psycopg's conninfo), with
        libpq's environment variables (``PGSSLMODE``, ...) for what the DSN leaves out."""
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(dsn)

        def opt(key: str, env: str) -> str | None:
            v = d.get(key)
            return str(v) if v not in (None, "") else os.environ.get(env) or None

        names = [h.strip() for h in str(opt("host", "PGHOST") or "127.0.0.1").split(",")]
        ports = [int(p) if p.strip() else 5432 for p in str(opt("port", "PGPORT") or "").split(",")]
        if len(ports) == 1:
            ports = ports * len(names)
        if len(ports) != len(names):
            raise ValueError("the DSN gives another number of ports than of hosts")
        hosts = tuple(zip(names, ports, strict=True))
        timeout = opt("connect_timeout", "PGCONNECT_TIMEOUT")
        return UpstreamConfig(
            host=hosts[0][0],
            port=hosts[0][1],
            hosts=hosts,
            user=str(d.get("user") or "postgres"),
            password=None if d.get("password") is None else str(d["password"]),
            database=str(d.get("dbname") or d.get("user") or "postgres"),
            connect_timeout=float(timeout) if timeout else connect_timeout,
            sslmode=opt("sslmode", "PGSSLMODE") or "prefer",
            sslrootcert=opt("sslrootcert", "PGSSLROOTCERT"),
            sslcert=opt("sslcert", "PGSSLCERT"),
            sslkey=opt("sslkey", "PGSSLKEY"),
            target_session_attrs=opt("target_session_attrs", "PGTARGETSESSIONATTRS") or "any",
        )


def _default_file(name: str) -> str | None:
    path = Path.home() / ".postgresql" / name
    return str(path) if path.is_file() else None


@functools.lru_cache(maxsize=16)
def ssl_context(config: UpstreamConfig) -> tuple[ssl.SSLContext, bool]:
    """The TLS context for ``config``'s ``sslmode`` and whether the host name is checked:
    ``verify-full`` checks chain and name, ``verify-ca`` the chain (as ``require`` does when a
    root certificate is configured or ``~/.postgresql/root.crt`` exists), ``prefer``/``allow``/
    ``require`` otherwise encrypt without verifying, exactly as libpq. Built once per
    configuration (the files are read when the first connection is made)."""
    mode = config.sslmode
    root = config.sslrootcert or _default_file("root.crt")
    verify = mode in ("verify-ca", "verify-full") or (mode == "require" and root is not None)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if verify:
        ctx.check_hostname = mode == "verify-full"
        ctx.verify_mode = ssl.CERT_REQUIRED
        if root is None or root == "system":
            ctx.load_default_certs()
        else:
            ctx.load_verify_locations(cafile=root)
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    cert = config.sslcert or _default_file("postgresql.crt")
    if cert is not None:
        key = config.sslkey or _default_file("postgresql.key")
        ctx.load_cert_chain(cert, key)
    return ctx, ctx.check_hostname


def _fits(attrs: str, parameters: Sequence[ParameterStatus]) -> bool | None:
    """Whether a logged-in server fits ``target_session_attrs`` (None: it does not say)."""
    if attrs == "any":
        return True
    values = {p.name: p.value for p in parameters}
    standby = values.get("in_hot_standby")
    read_only = values.get("default_transaction_read_only")
    if standby is None or read_only is None:
        return None
    hot, ro = standby == "on", read_only == "on" or standby == "on"
    return {
        "read-write": not ro,
        "read-only": ro,
        "primary": not hot,
        "standby": hot,
        "prefer-standby": hot,
    }[attrs]


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
        self._on_frames: Callable[[list[bytes]], None] = _ignore
        self._on_lost: Callable[[BaseException], None] = _ignore
        self._on_read: Callable[[bytes], bool] | None = None

    @classmethod
    async def connect(
        cls,
        config: UpstreamConfig,
        params: Sequence[tuple[str, str]] = (),
        *,
        database: str | None = None,
    ) -> UpstreamConnection:
        """Open and log in to the first host of ``config.hosts`` that accepts the login and
        fits ``target_session_attrs`` (``prefer-standby``: a standby if any, else any host).
        Raises UpstreamStartupError (a backend said no) or UpstreamUnavailable (none could be
        reached or spoken to, or none fits)."""
        passes = ["standby", "any"] if config.target_session_attrs == "prefer-standby" else [None]
        refusal: UpstreamStartupError | None = None
        unreachable: UpstreamUnavailable | None = None
        for want in passes:
            for host, port in config.hosts:
                try:
                    conn = await cls._connect_one(config, host, port, params, database)
                except UpstreamStartupError as e:
                    refusal = refusal or e
                    continue
                except UpstreamUnavailable as e:
                    unreachable = unreachable or e
                    continue
                fits = _fits(want or config.target_session_attrs, conn.parameters)
                if fits:
                    return conn
                await conn.close()
                if fits is None:
                    raise UpstreamUnavailable(
                        "the upstream server does not report whether it is a standby or "
                        "read-only, which target_session_attrs needs (PostgreSQL 14 or later)"
                    )
        if refusal is not None and len(config.hosts) == 1:
            raise refusal
        if config.target_session_attrs != "any":
            raise UpstreamUnavailable(
                "no upstream PostgreSQL server fits target_session_attrs = "
                + config.target_session_attrs
            )
        if refusal is not None:
            raise refusal
        raise unreachable or UpstreamUnavailable("could not connect to the upstream server")

    @classmethod
    async def _connect_one(
        cls,
        config: UpstreamConfig,
        host: str,
        port: int,
        params: Sequence[tuple[str, str]],
        database: str | None,
    ) -> UpstreamConnection:
        """One host: connect, negotiate TLS by ``sslmode``, log in (``allow``: in the clear
        first, then with TLS if the server refuses that login)."""
        unix = host.startswith("/")
        mode = "disable" if unix else config.sslmode
        tries = ["disable", "prefer"] if mode == "allow" else [mode]
        for i, attempt in enumerate(tries):
            try:
                reader, writer = await asyncio.wait_for(
                    _open(config, host, port, attempt), config.connect_timeout
                )
            except (OSError, TimeoutError, ssl.SSLError) as e:
                raise UpstreamUnavailable(
                    "could not connect to the upstream PostgreSQL server",
                    detail=type(e).__name__,
                ) from None
            conn = cls(reader, writer, replace(config, host=host, port=port))
            try:
                await asyncio.wait_for(conn._login(params, database), config.connect_timeout)
            except UpstreamStartupError:
                await conn.close()
                if i + 1 < len(tries):
                    continue
                raise
            except BaseException:
                await conn.close()
                raise
            return conn
        raise UpstreamUnavailable("could not connect to the upstream PostgreSQL server")

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
        after this; :meth:`bind` hands the callbacks to another owner (the pooler's)."""
        self.bind(on_frames, on_lost, on_read)

        def lost(e: BaseException) -> None:
            if not self.closed:
                self.closed = True
                self._on_lost(e)

        def deliver() -> None:
            try:
                frames = self._frames.raw_frames()
            except ProtocolViolation as e:
                lost(e)
                return
            if frames and not self.closed:
                self._on_frames(frames)

        def on_data(data: bytes) -> None:
            if not data:
                lost(ConnectionResetError("upstream closed the connection"))
                return
            on_read = self._on_read
            if on_read is not None and not len(self._frames) and on_read(data):
                return
            self._frames.feed(data)
            deliver()

        self._channel = Channel.take_over(self._reader, self._writer, on_data, lost)
        self._write = self._channel.transport.write
        asyncio.get_running_loop().call_soon(deliver)  # frames read with the login's last bytes

    def bind(
        self,
        on_frames: Callable[[list[bytes]], None],
        on_lost: Callable[[BaseException], None],
        on_read: Callable[[bytes], bool] | None = None,
    ) -> None:
        """The callbacks of :meth:`start_relay`, for the connection's next owner."""
        self._on_frames, self._on_lost, self._on_read = on_frames, on_lost, on_read

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
        try:  # in the clear, to the host this connection reached, as libpq's PQcancel
            _, w = await asyncio.wait_for(
                _open(self.config, self.config.host, self.config.port, "disable"), 5.0
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


def _ignore(_: object) -> None:
    pass


async def _open(
    config: UpstreamConfig, host: str, port: int, sslmode: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A stream to one host (a Unix-domain socket when ``host`` is a directory), with TLS
    negotiated as ``sslmode`` says (protocol-flow "SSL Session Encryption")."""
    if host.startswith("/"):
        return await asyncio.open_unix_connection(os.path.join(host, f".s.PGSQL.{port}"))
    reader, writer = await asyncio.open_connection(host, port)
    if sslmode == "disable":
        return reader, writer
    try:
        writer.write(_SSL_REQUEST)
        await writer.drain()
        answer = await reader.readexactly(1)
        if answer == b"S":
            ctx, named = ssl_context(config)
            await writer.start_tls(ctx, server_hostname=host if named else None)
            return reader, writer
        if answer != b"N":
            raise UpstreamUnavailable("the upstream server answered the SSLRequest oddly")
        if sslmode in ("require", "verify-ca", "verify-full"):
            raise UpstreamUnavailable(
                "the upstream server does not support SSL, but sslmode = " + sslmode
            )
        return reader, writer
    except BaseException:
        writer.close()
        raise


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
