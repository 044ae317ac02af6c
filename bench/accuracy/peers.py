"""SmartNoise SQL and Tumult Analytics for ``bench.accuracy.statements``, each in a venv of its own.

Neither can share the project's environment: smartnoise-sql 1.0.10 pins ``opendp < 0.15``
(the project runs a newer opendp), tmlt.analytics 0.21.0 pins ``numpy < 2`` and pyspark 3.5.
So each peer gets a virtual environment under ``bench/out/peers/NAME``, made the first time
the benchmark needs it (``python -m venv`` and ``pip install`` of the pinned versions from
PyPI; a few minutes, once), and runs as a worker process (``peer_smartnoise.py``,
``peer_tumult.py``) spoken to in JSON lines. A peer that cannot be installed or started, or
that dies, is reported as such and left out; the benchmark goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "bench" / "out" / "peers"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    label: str
    requirements: tuple[str, ...]
    worker: Path
    needs_java: bool = False


SMARTNOISE = Peer(
    "smartnoise",
    "SmartNoise SQL",
    ("smartnoise-sql==1.0.10", "psycopg2-binary>=2.9,<3"),
    HERE / "peer_smartnoise.py",
)
TUMULT = Peer(
    "tumult", "Tumult Analytics", ("tmlt.analytics==0.21.0",), HERE / "peer_tumult.py", True
)


class PeerError(RuntimeError):
    """The peer could not be installed, started or asked (the message says why)."""


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])[:400]


def ensure(peer: Peer, *, install: bool = True) -> Path:
    """The Python of ``peer``'s environment, installing it if needed (PeerError if not)."""
    folder = PEERS / peer.name
    python = folder / "bin" / "python"
    marker = folder / "installed.txt"
    wanted = "\n".join(peer.requirements)
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    if not install:
        raise PeerError("not installed (run without --no-install to install it)")
    if peer.needs_java and shutil.which("java") is None:
        raise PeerError("needs Java (pyspark), and no java is on PATH")
    PEERS.mkdir(parents=True, exist_ok=True)
    log = PEERS / f"{peer.name}-install.log"
    print(
        f"installing {peer.label} into {folder.relative_to(ROOT)} ({', '.join(peer.requirements)}) ...",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    with log.open("w") as f:
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(folder)],
            [str(python), "-m", "pip", "install", "--quiet", *peer.requirements],
        ]
        for cmd in steps:
            if subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False).returncode:
                raise PeerError(f"installation failed ({' '.join(cmd[:4])}...): {_tail(log)}")
    marker.write_text(wanted)
    print(f"  done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return python


class Worker:
    """One peer worker process: ``ask`` sends a JSON request and waits for its JSON answer."""

    def __init__(self, peer: Peer, python: Path, hello: dict[str, Any]) -> None:
        self.peer = peer
        self.log = PEERS / f"{peer.name}-worker.log"
        self._log_file: IO[str] = self.log.open("w")
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        env["PYSPARK_PYTHON"] = str(python)
        env["PYSPARK_DRIVER_PYTHON"] = str(python)
        self.proc = subprocess.Popen(
            [str(python), str(peer.worker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
            env=env,
            cwd=PEERS,  # Spark's warehouse folder lands there
        )
        try:
            self.hello = self.ask(hello)
        except PeerError:
            self.close()
            raise

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise PeerError(f"the worker stopped ({e}): {_tail(self.log)}") from None
        if not line:
            self.proc.wait(timeout=10)
            raise PeerError(f"the worker exited (status {self.proc.returncode}): {_tail(self.log)}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log_file.close()


def start(peer: Peer, hello: dict[str, Any], *, install: bool = True) -> Worker:
    """Install (if needed) and start ``peer``'s worker; PeerError with the reason if it fails."""
    python = ensure(peer, install=install)
    try:
        return Worker(peer, python, hello)
    except (OSError, ValueError) as e:
        raise PeerError(f"the worker did not start: {e}") from None
