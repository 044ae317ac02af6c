"""A bare TCP byte pipe on the proxy's event loop: no parsing, no routing, one write per read.

    python -m bench.proxy.pipe LISTEN_PORT UPSTREAM_PORT

bench/proxy measures clients through it to show the floor of any proxy here: what one more
hop costs on this machine before a single protocol message is looked at.
"""

from __future__ import annotations

import asyncio
import sys


class _Up(asyncio.Protocol):
    def __init__(self, down: _Down) -> None:
        self.down = down
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        assert self.down.transport is not None
        self.down.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.down.transport is not None:
            self.down.transport.close()


class _Down(asyncio.Protocol):
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.transport: asyncio.Transport | None = None
        self.up: _Up | None = None
        self.held: list[bytes] = []
        self.connecting: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.connecting = asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        _, up = await loop.create_connection(lambda: _Up(self), "127.0.0.1", self.upstream_port)
        self.up = up
        assert up.transport is not None
        for data in self.held:
            up.transport.write(data)

    def data_received(self, data: bytes) -> None:
        if self.up is None or self.up.transport is None:
            self.held.append(data)
        else:
            self.up.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.up is not None and self.up.transport is not None:
            self.up.transport.close()


async def serve(listen_port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Down(upstream_port), "127.0.0.1", listen_port)
    await server.serve_forever()


def main() -> None:
    from proxy.cli import _run_server_loop

    _run_server_loop(serve(int(sys.argv[1]), int(sys.argv[2])))


if __name__ == "__main__":
    main()
