"""``lapras serve`` with ``[server] workers = 2``: two processes on one port answer DP
statements and relay, a repeat is the same stored answer whichever worker gives it, and a
signal stops both cleanly."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from epoch_helpers import ANALYST, DASHBOARD, config_text, reset_ledger, start_epoch

from proxy.config import parse_config
from proxy.embedded import _free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_two_workers_serve_one_port(pg: Any, tmp_path: Path, loop: str) -> None:
    reset_ledger(pg)
    port = _free_port()
    text = config_text(pg).replace(
        'listen = "127.0.0.1:0"', f'listen = "127.0.0.1:{port}"\nworkers = 2'
    )
    path = tmp_path / "lapras.toml"
    path.write_text(text)
    start_epoch(parse_config(text, str(path)), DASHBOARD)
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "LAPRAS_EVENT_LOOP": loop},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()
    try:
        first = lines.get(timeout=90)
        assert f"listening on 127.0.0.1:{port} (2 worker processes)" in first, first
        dsn = f"postgresql://{ANALYST[0]}:{ANALYST[1]}@127.0.0.1:{port}/{pg.database}"
        answers: dict[int, list[Any]] = {0: [], 1: []}
        for _ in range(40):
            with psycopg.connect(dsn, autocommit=True) as c:
                worker = (c.info.backend_pid - 1) % 2
                assert c.execute("SELECT 1").fetchone() == (1,)
                answers[worker].append(
                    c.execute("SELECT count(*) FROM adult WHERE age BETWEEN 40 AND 49").fetchone()
                )
            if all(answers.values()):
                break
        assert all(answers.values()), "the kernel gave every connection to one worker"
        # The first answer was fresh, every later one a repeat: the same stored value from
        # both processes (the other worker learns it from the ledger).
        assert len({a for got in answers.values() for a in got}) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    out = "".join(iter(lambda: lines.get_nowait() if not lines.empty() else "", ""))
    assert proc.returncode == 0, out
