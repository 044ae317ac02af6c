"""Helpers of the ledger tests: configuration files, ledger reset, epochs, proxy processes.

Proxies run as real processes: ``python -m proxy.cli serve`` (:func:`serve`), or forked from a
warm helper (``tests/ledger/forkserver.py``, :class:`ForkServer`) when a test restarts the proxy
many times (an import of the proxy costs seconds on a loaded machine; a fork costs nothing).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from epoch_helpers import ADMIN as ADMIN
from epoch_helpers import ANALYST, config_text
from epoch_helpers import DASHBOARD as DASHBOARD
from epoch_helpers import reset_ledger as reset_ledger

from proxy.config import Config, parse_config
from proxy.ledger import decode

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: The environment of every process the tests start: one BLAS thread per process. (Under load,
#: OpenBLAS's own threads make a 296-cell eigendecomposition ~100x slower on 2 cores.)
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def lapras(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real CLI (``python -m proxy.cli ARGS``)."""
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_start_epoch(config_path: Path, predicted: list[str], *extra: str) -> int:
    """``lapras epoch start`` through the real CLI; returns the epoch id."""
    args = ["epoch", "start", "--config", str(config_path), "--table", "adult", "--actor", "pytest"]
    if predicted:
        sql = config_path.parent / "predicted.sql"
        sql.write_text(";\n".join(predicted) + ";\n")
        args += ["--predicted", str(sql)]
    done = lapras(*args, *extra)
    assert done.returncode == 0, done.stderr
    found = re.search(r"^epoch (\d+) started", done.stdout, re.MULTILINE)
    assert found, done.stdout
    return int(found.group(1))


def write_config(folder: Path, pg: Any, **privacy: Any) -> tuple[Path, Config]:
    text = config_text(pg, **privacy)
    path = folder / "lapras.toml"
    path.write_text(text)
    return path, parse_config(text, str(path))


def ledger_rows(pg: Any, epoch: int) -> list[tuple[int, str, Any]]:
    """The epoch's committed ledger: (seq, kind, decoded event), in order."""
    with psycopg.connect(pg.state_dsn) as conn:
        rows = conn.execute(
            "SELECT seq, kind, payload::text FROM lapras.ledger WHERE epoch_id = %s ORDER BY seq",
            (epoch,),
        ).fetchall()
    return [(int(seq), kind, decode(payload)) for seq, kind, payload in rows]


def dsn(port: int, user: tuple[str, str] = ANALYST, database: str = "lapras_test") -> str:
    return f"postgresql://{user[0]}:{user[1]}@127.0.0.1:{port}/{database}"


def cell_queries() -> list[str]:
    """296 distinct single-cell counts over the view age_sex_income: linearly independent,
    so each needs a fresh release (none is answerable from the others)."""
    return [
        f"SELECT count(*) FROM adult WHERE age = {age} AND sex = '{sex}' AND income = '{inc}'"
        for age in range(17, 91)
        for sex in ("Female", "Male")
        for inc in ("<=50K", ">50K")
    ]


@contextmanager
def serve(config_path: Path, timeout: float = 60.0) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """``python -m proxy.cli serve --config PATH`` as a process; yields it and its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config_path)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline and "listening" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise AssertionError(
                    f"the proxy exited: {proc.stderr.read() if proc.stderr else ''}"
                )
        assert "listening" in line, "the proxy did not start in time"
        yield proc, int(line.rsplit(":", 1)[1])
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


class ForkServer:
    """``tests/ledger/forkserver.py CONFIG``: imports the proxy once, forks one proxy process
    (``proxy.app.running``, production SecureSampler) per :meth:`spawn`."""

    def __init__(self, config_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "forkserver.py"), str(config_path)],
            cwd=ROOT,
            env=ENV,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.children: list[int] = []

    def spawn(self) -> tuple[int, int]:
        """Fork a proxy; return (pid, port) once it listens."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("spawn\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), f"the proxy did not start: {line!r}"
        _, pid, port = line.split()
        self.children.append(int(pid))
        return int(pid), int(port)

    def kill(self, pid: int) -> None:
        """SIGKILL one proxy and wait until it is gone (its sockets closed)."""
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)
        raise AssertionError("a killed proxy did not go away")

    def close(self) -> None:
        for pid in self.children:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
