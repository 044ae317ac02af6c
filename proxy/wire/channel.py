"""A connected socket driven by callbacks.

A client's socket is a :class:`Channel` from accept (:meth:`Channel.accepting` is the
listener's protocol factory): every read is handed to a callback from the event loop, so
relaying a message costs no task switch, and an idle session holds no stream objects. The
backend's connections log in on asyncio streams and are taken over (:meth:`Channel.take_over`)
once they relay. Writes get their own flow control (``drain``). The callbacks must not raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from typing import cast


def _nothing(_: object) -> None:
    pass


class Channel(asyncio.Protocol):
    """The protocol of one socket: ``on_data(bytes)`` for every read (``b""`` at end of
    input), ``on_lost(exc)`` once when the connection is gone."""

    __slots__ = (
        "_closed",
        "_on_data",
        "_on_lost",
        "_on_made",
        "_paused",
        "_waiter",
        "lost",
        "transport",
    )

    transport: asyncio.Transport

    def __init__(
        self,
        on_data: Callable[[bytes], None],
        on_lost: Callable[[BaseException], None],
        on_made: Callable[[Channel], None] | None = None,
    ) -> None:
        self._on_data = on_data
        self._on_lost = on_lost
        self._on_made = on_made
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] | None = None  # made by close(), if it waits
        self.lost: BaseException | None = None

    @classmethod
    def accepting(cls, on_made: Callable[[Channel], None]) -> Callable[[], Channel]:
        """A listener's protocol factory: ``on_made(channel)`` for each accepted connection,
        from ``connection_made`` (before any read), where its owner :meth:`bind` s it."""
        return lambda: cls(_nothing, _nothing, on_made)

    @classmethod
    def take_over(
        cls,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_data: Callable[[bytes], None],
        on_lost: Callable[[BaseException], None],
    ) -> Channel:
        """Replace the streams' protocol on their transport; bytes the reader already held
        (and its end of input) are delivered first, from the loop."""
        channel = cls(on_data, on_lost)
        # A socket connection reads and writes (uvloop's transport is no asyncio subclass).
        channel.transport = cast(asyncio.Transport, writer.transport)
        held = bytes(getattr(reader, "_buffer", b""))
        channel.transport.set_protocol(channel)
        loop = asyncio.get_running_loop()
        if held:
            loop.call_soon(channel.data_received, held)
        if reader.at_eof():
            loop.call_soon(channel.eof_received)
        return channel

    def bind(
        self, on_data: Callable[[bytes], None], on_lost: Callable[[BaseException], None]
    ) -> None:
        """Where reads and the loss of the connection go from now on."""
        self._on_data = on_data
        self._on_lost = on_lost

    # -- asyncio.Protocol ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        made, self._on_made = self._on_made, None
        if made is not None:
            made(self)

    def data_received(self, data: bytes) -> None:
        if self.lost is None:
            self._on_data(data)

    def eof_received(self) -> bool:
        if self.lost is None:
            self._on_data(b"")
        return True  # keep the write side open: the owner closes

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lost is None:
            self.lost = exc or ConnectionResetError("connection closed")
            self._wake()
            self._on_lost(self.lost)
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    # -- for the owner -----------------------------------------------------------------------

    @property
    def writing_paused(self) -> bool:
        """The transport's write buffer is above its high-water mark."""
        return self._paused

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the write buffer is above its high-water mark; ConnectionError once
        the connection is gone."""
        while self._paused and self.lost is None:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        if self.lost is not None:
            raise ConnectionResetError("connection lost")

    async def start_tls(self, ctx: ssl.SSLContext) -> None:
        """The server side of a TLS handshake on this socket; reads come decrypted through
        the same callbacks afterwards, and :attr:`transport` is the TLS one. The loop stops
        reading the plain socket before this returns to it: no byte sent before the
        handshake is read as if it came through TLS."""
        loop = asyncio.get_running_loop()
        tls = await loop.start_tls(self.transport, self, ctx, server_side=True)
        if tls is None:  # the connection was closed during the handshake
            raise ConnectionResetError("connection lost during the TLS handshake")
        self.transport = tls

    def pause_reading(self) -> None:
        if not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.transport.is_closing():
            self.transport.resume_reading()

    async def close(self, timeout: float = 2.0) -> None:
        """Close the socket and wait (a while) until it is closed."""
        self.transport.close()
        if self.lost is not None:
            return
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._closed), timeout)

    @staticmethod
    async def close_stream(writer: asyncio.StreamWriter, channel: Channel | None) -> None:
        """Close a socket, taken over by ``channel`` or still on its streams, and wait (a
        while) until it is closed."""
        if channel is not None:
            await channel.close()
            return
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 2.0)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._waiter = None
