"""A raw protocol client for the tests: log in (any auth), send messages, read replies."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from proxy.wire.messages import (
    BackendKeyData,
    BackendMessage,
    ErrorResponse,
    FrameBuffer,
    NoticeResponse,
    ParameterStatus,
    ReadyForQuery,
    decode_backend,
)
from proxy.wire.upstream import UpstreamConfig, UpstreamConnection


@dataclass
class RawClient:
    conn: UpstreamConnection

    @classmethod
    async def login(
        cls,
        host: str,
        port: int,
        user: str,
        password: str | None,
        database: str,
        params: tuple[tuple[str, str], ...] = (),
    ) -> RawClient:
        cfg = UpstreamConfig(host=host, port=port, user=user, password=password, database=database)
        return cls(await UpstreamConnection.connect(cfg, params))

    @property
    def parameters(self) -> dict[str, str]:
        return {p.name: p.value for p in self.conn.parameters}

    @property
    def key(self) -> BackendKeyData | None:
        return self.conn.backend_key

    async def send(self, *msgs: object) -> None:
        for m in msgs:
            self.conn.write(m.encode())  # type: ignore[attr-defined]
        await self.conn.drain()

    async def send_together(self, *msgs: object) -> None:
        """The messages in one write (as libpq, asyncpg and JDBC send a batch)."""
        self.conn.write(b"".join(m.encode() for m in msgs))  # type: ignore[attr-defined]
        await self.conn.drain()

    async def read(self, timeout: float = 10.0) -> BackendMessage:
        t, body = await asyncio.wait_for(self.conn.read_frame(), timeout)
        return decode_backend(t, body)

    async def until_ready(self, timeout: float = 10.0) -> list[BackendMessage]:
        out: list[BackendMessage] = []
        while True:
            m = await self.read(timeout)
            out.append(m)
            if isinstance(m, ReadyForQuery):
                return out

    async def read_n(self, n: int, timeout: float = 10.0) -> list[BackendMessage]:
        return [await self.read(timeout) for _ in range(n)]

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()


def normalise(msgs: list[BackendMessage], *, keep_error_fields: str = "SVCMP") -> list[object]:
    """Comparable form: drop source-location fields (F, L, R) and async ParameterStatus."""
    out: list[object] = []
    for m in msgs:
        if isinstance(m, ErrorResponse | NoticeResponse):
            out.append(
                (type(m).__name__, tuple((c, v) for c, v in m.fields if c in keep_error_fields))
            )
        elif isinstance(m, ParameterStatus):
            continue
        else:
            out.append(m)
    return out


def decode_all(data: bytes) -> list[BackendMessage]:
    """Every whole backend message in ``data``, decoded."""
    fb = FrameBuffer()
    fb.feed(data)
    out = []
    while (f := fb.next_frame()) is not None:
        out.append(decode_backend(*f))
    return out
