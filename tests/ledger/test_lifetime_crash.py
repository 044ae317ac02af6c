"""A lifetime budget under crashes: ``lapras epoch start`` on the user-level Gowalla table
(lifetime epsilon 4) is killed with SIGKILL at random points, again and again, each surviving
epoch closed so that the next may start; then it runs to the end until the cap refuses one.
Checked after every round, on the committed ledger: the epochs never commit more than the cap,
and every epoch that exists is whole (its pin and its first event were written with it, in one
transaction)."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
from epoch_helpers import config_text
from ledger_helpers import ENV, ROOT, reset_ledger
from unit_helpers import GOWALLA, close, protect
from unit_helpers import config as make_config

CAP, EPSILON = 4.0, 1.0
KILLS = 6


def _epochs(pg: Any) -> list[tuple[int, str, float, int, int]]:
    """Every epoch of checkins: id, status, epsilon, its pins, its first events (none while
    no process has lived long enough to create the ledger's schema: a kill may come first on a
    loaded machine)."""
    with psycopg.connect(pg.state_dsn) as conn:
        if conn.execute("SELECT to_regclass('lapras.epochs')").fetchone() == (None,):
            return []
        rows = conn.execute(
            "SELECT e.id, e.status, (e.config->>'epsilon')::float8,"
            " (SELECT count(*) FROM lapras.histograms h WHERE h.epoch_id = e.id),"
            " (SELECT count(*) FROM lapras.ledger l WHERE l.epoch_id = e.id AND l.seq = 1"
            "   AND l.kind = 'EpochStarted')"
            " FROM lapras.epochs e WHERE e.table_name = 'checkins' ORDER BY e.id"
        ).fetchall()
    return [(int(a), b, float(c), int(d), int(e)) for a, b, c, d, e in rows]


def test_sigkill_during_epoch_starts_never_passes_the_lifetime_cap(pg: Any, tmp_path: Path) -> None:
    protect(pg)
    reset_ledger(pg)
    config = make_config(pg, GOWALLA)
    path = tmp_path / "lapras.toml"
    path.write_text(config_text(pg, declaration=GOWALLA, stream_length=20, delta=1e-5))
    command = [sys.executable, "-m", "proxy.cli", "epoch", "start", "--config", str(path)]
    command += ["--table", "checkins", "--epsilon", str(EPSILON), "--delta", "1e-5"]
    rng = random.Random(17)
    refused, rounds = "", 0
    while not refused:
        rounds += 1
        assert rounds <= KILLS + CAP / EPSILON + 1, _epochs(pg)
        proc = subprocess.Popen(
            command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            timeout = rng.uniform(0.3, 4.0) if rounds <= KILLS else 300.0
            _, err = proc.communicate(timeout=timeout)
            if proc.returncode != 0:
                refused = err
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
        epochs = _epochs(pg)
        assert sum(e[2] for e in epochs) <= CAP, epochs
        for ep in epochs:
            assert ep[3] == 1 and ep[4] == 1, ep  # whole: its pin and its first event
        if any(e[1] == "active" for e in epochs):
            asyncio.run(close(config, "checkins"))
    assert len(_epochs(pg)) == CAP / EPSILON  # the cap was reached, never passed
    assert "the lifetime budget of checkins does not admit this epoch" in refused, refused
