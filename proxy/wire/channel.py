"""A connected socket driven by callbacks, for the relay's hot path.

Start-up and login read with asyncio streams (simple, and TLS is set up there). Once a session
relays, both its legs are taken over by a :class:`Channel`: every read is handed to a callback
from the event loop, so relaying a reply costs no task switch, and writes get their own flow
control (``drain``). The callbacks must not raise.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import cast


class Channel(asyncio.Protocol):
    """The protocol of one socket after ``take_over``: ``on_data(bytes)`` for every read
    (``b""`` at end of input), ``on_lost(exc)`` once when the connection is gone."""

    def __init__(
        self,
        transport: asyncio.Transport,
        on_data: Callable[[bytes], None],
        on_lost: Callable[[BaseException], None],
    ) -> None:
        self.transport = transport
        self._on_data = on_data
        self._on_lost = on_lost
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

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
        # A socket connection reads and writes (uvloop's transport is no asyncio subclass).
        transport = cast(asyncio.Transport, writer.transport)
        channel = cls(transport, on_data, on_lost)
        held = bytes(getattr(reader, "_buffer", b""))
        transport.set_protocol(channel)
        loop = asyncio.get_running_loop()
        if held:
            loop.call_soon(channel.data_received, held)
        if reader.at_eof():
            loop.call_soon(channel.eof_received)
        return channel

    # -- asyncio.Protocol ------------------------------------------------------------------

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
        if not self.closed.done():
            self.closed.set_result(None)

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

    def pause_reading(self) -> None:
        if not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.transport.is_closing():
            self.transport.resume_reading()

    async def close(self, timeout: float = 2.0) -> None:
        self.transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.closed), timeout)

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
