"""The compatibility suite with real tools (issue 14): ibis, pandas, polars, ADBC, connectorx,
psqlODBC, Perl DBD::Pg, Ruby pg, server-side cursors, Apache Superset.

One ``lapras demo`` for the whole session, in a subprocess (its own temporary data directory,
``--reset``, a free port): the embedded PostgreSQL with UCI Adult and an epoch over the view
``demographics`` (epsilon = 1 over 32,561 rows). Every tool connects through a wire tap
(``wiretap.py``) in front of the proxy, which records the SQL the tool sends: a failing test
shows it (``LAPRAS_TOOLS_SQL_LOG=FILE`` keeps the whole record). Exact answers come from
the backend itself, as its superuser.

Each tool's test skips when the tool is not installed (``.ci/run`` installs them where it can).
The folder is a package (``tools``), so that this conftest does not take the module name
``conftest`` from ``tests/proxy/conftest.py``, which tests there import at run time.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from proxy.embedded import EmbeddedPostgres

from .toolkit import DATABASE, ROOT, Demo
from .wiretap import WireTap


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lapras() -> list[str]:
    """The ``lapras`` command of the tree under test: ``python -m proxy.cli`` run in it (the
    installed ``lapras`` script imports whichever tree the package was installed from, which
    for a git worktree is another one)."""
    return [sys.executable, "-m", "proxy.cli"]


@pytest.fixture(scope="session")
def demo() -> Iterator[Demo]:
    """``lapras demo --reset`` on a free port, in a temporary data directory."""
    # Not under pytest's tmp folder (see tests/conftest.py): the server may run as another
    # system user, which must keep reaching its data directory.
    folder = Path(tempfile.mkdtemp(prefix="lapras-tools-"))
    data_dir = folder / "demo"
    port = _free_port()
    process = subprocess.Popen(
        [*_lapras(), "demo", "--data-dir", str(data_dir), "--port", str(port), "--reset"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    output: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if "LAPRAS proxy listening" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    tap: WireTap | None = None
    try:
        deadline = time.monotonic() + 180
        while not ready.wait(0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("lapras demo did not start:\n" + "".join(output))
        backend = EmbeddedPostgres(data_dir).start()  # the demo's server, already running
        tap = WireTap(("127.0.0.1", port), folder / "sent.jsonl")
        yield Demo(
            tap=tap,
            proxy_port=port,
            admin_dsn=backend.dsn(database=DATABASE),
            data_dir=data_dir,
            output=output,
        )
    finally:
        if tap is not None:
            tap.close()
            keep = os.environ.get("LAPRAS_TOOLS_SQL_LOG")
            if keep:  # every statement the tools sent, one JSON string a line
                shutil.copyfile(tap.log, keep)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        EmbeddedPostgres(data_dir).stop()  # in case the demo died without stopping it
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module", params=["psycopg2", "psycopg"])
def engine(request: pytest.FixtureRequest, demo: Demo) -> Iterator[Any]:
    """A SQLAlchemy engine on the demo through the tap, over each of the two drivers."""
    engine = sa.create_engine(demo.sqlalchemy_url(request.param))
    try:
        yield engine
    finally:
        engine.dispose()
