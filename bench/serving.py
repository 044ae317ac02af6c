"""What the benchmarks that run ``lapras serve`` share: its configuration, the CLI, waiting for it.

Used by ``bench/proxy`` and ``bench/big_statements``: the embedded PostgreSQL's database
``bench``, provisioned by :func:`proxy.embedded.provision_adult` with the proxy user ``bench``.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parents[1]


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def write_config(
    pg: Any,
    folder: Path,
    port: int,
    *,
    workers: int = 1,
    tables: str = "",
    stream_length: int = 100_000,
) -> Path:
    """``folder/lapras.toml`` for database ``bench``: Adult (and ``tables``, more protected
    table declarations) protected, the user ``bench``, a large budget."""
    import sql_fixtures.adult as adult
    from proxy import provision as prov

    text = (
        adult.DECLARATION.read_text()
        + tables
        + f"""
[server]
listen = "127.0.0.1:{port}"
max_connections = 200
workers = {workers}

[backend]
aggregator_dsn = "{pg.dsn(prov.AGGREGATOR, "bench")}"
passthrough_dsn = "{pg.dsn(prov.PASSTHROUGH, "bench")}"
state_dsn = "{pg.dsn(prov.AGGREGATOR, prov.state_database("bench"))}"

[[users]]
name = "bench"
password = "bench"

[privacy]
epsilon = 10.0
delta = 1e-6
stream_length = {stream_length}
"""
    )
    path = folder / "lapras.toml"
    path.write_text(text)
    return path


def lapras(*args: str) -> None:
    """The real CLI, ``python -m proxy.cli ARGS``."""
    subprocess.run([sys.executable, "-m", "proxy.cli", *args], check=True, cwd=ROOT)


def wait_until_serving(dsn: str) -> None:
    """Wait (up to 20 s) until a server started in the background accepts ``dsn``."""

    async def probe() -> None:
        conn = await asyncpg.connect(dsn)
        await conn.close()

    for _ in range(100):
        try:
            asyncio.run(probe())
            return
        except OSError:
            time.sleep(0.2)


def serve(config: Path) -> subprocess.Popen[bytes]:
    """``lapras serve --config CONFIG`` as a process of its own (the deployment's shape)."""
    return subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)], cwd=ROOT
    )


def stop(server: subprocess.Popen[bytes] | None, timeout: float = 60) -> None:
    """Stop a :func:`serve` process as Ctrl-C does (killed if it takes longer than
    ``timeout`` seconds)."""
    if server is None:
        return
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout)
    except subprocess.TimeoutExpired:
        server.kill()
