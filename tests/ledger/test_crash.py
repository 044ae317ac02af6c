"""Crash test: a proxy process answering a stream is killed with SIGKILL at random points, many
times; after every restart the ledger is checked and the stream goes on.

Checked after each restart (ISSUE 6, "Crash test"):

- the ledger is append-only and gapless (seq 1..n), and it folds (``dp.engine.fold`` refuses a
  release without its charge just before it);
- the total charge never exceeds the budget: the sum of the Charged amounts and the folded
  accountant's ``spent`` are within ``total``;
- every Released event has an earlier committed Charged with the same position and key;
- no answer is re-drawn: every query answered before the crash (all of the last lifetime's,
  and a sample of older ones) is answered again as a *repeat* with the identical value -- so
  every answer a client ever saw had its charge and its release committed;
- the stream continues: a new fresh query is answered (fresh noise) by the restarted proxy.

The Matrix Mechanism release (written at epoch start, in one transaction) is identical in the
ledger before and after all the kills, and so are the answers given from it.

Each proxy lifetime is a real process running ``proxy.app.running`` with the production sampler
(SecureSampler), forked from a warm helper (``forkserver.py``) so that 19 restarts fit in
seconds; the epoch is started with the real CLI. The clients' stream is fresh single-cell and
range counts (reuse of stored releases is off, so each is a fresh release with its charge);
``CLIENTS`` clients send it at once, so the proxy commits their charges in groups (group
commit, proxy/epochs.py) and a kill can fall inside a group, between its charges' commit, its
noise and its releases' commit.
"""

from __future__ import annotations

import math
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ledger_helpers import (
    DASHBOARD,
    ForkServer,
    cell_queries,
    cli_start_epoch,
    dsn,
    ledger_rows,
    reset_ledger,
    write_config,
)

from dp import engine

KILLS = 18
PER_LIFETIME = 60  # fresh queries the clients send to one proxy lifetime, at most
CLIENTS = 4  # concurrent clients per proxy lifetime: their fresh answers are grouped


def check_ledger(pg: Any, epoch: int) -> tuple[engine.BudgetStatus, int, int]:
    """The ledger invariants; returns the folded status, #Released, #charges with no release."""
    rows = ledger_rows(pg, epoch)
    assert [s for s, _, _ in rows] == list(range(1, len(rows) + 1))  # append-only, gapless
    events = [ev for _, _, ev in rows]
    state = engine.fold(events)  # type: ignore[arg-type]
    st = engine.status(state)
    charged = [ev for ev in events if isinstance(ev, engine.Charged)]
    total_charged = math.fsum(c.amount for c in charged)
    assert total_charged <= st.total * (1 + 1e-12)
    assert st.spent <= st.total * (1 + 1e-12)
    assert math.isclose(st.spent, total_charged, rel_tol=1e-9)
    released = 0
    for i, (seq, kind, ev) in enumerate(rows):
        if isinstance(ev, engine.Released):
            released += 1
            before = [e for _, _, e in rows[:i] if isinstance(e, engine.Charged)]
            assert any(c.position == ev.position and c.key == ev.key for c in before), (seq, kind)
    online = [c for c in charged if c.position > 0]
    return st, released, len(online) - released


def ask(conn: psycopg.Connection[Any], notices: list[str], sql: str) -> tuple[Any, str]:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0], notices[-1]


def connect(port: int) -> tuple[psycopg.Connection[Any], list[str]]:
    conn = psycopg.connect(dsn(port), autocommit=True, connect_timeout=20)
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    return conn, notices


def test_sigkill_at_random_points_never_overspends_nor_redraws(pg: Any, tmp_path: Path) -> None:
    began = time.monotonic()
    reset_ledger(pg)
    # reuse off: folding hundreds of GLS updates (an eigendecomposition each) would dominate the
    # test's time; the charge-before-release path is the same with it on.
    path, _ = write_config(tmp_path, pg, stream_length=2000, reuse=False)
    epoch = cli_start_epoch(path, DASHBOARD)
    mm_before = [(s, k, p) for s, k, p in _raw(pg, epoch) if k == "MatrixReleased"]
    assert len(mm_before) == 1

    rng = random.Random(6)
    fresh = cell_queries()  # 296, then 5,400 ranges: each a new fresh release (reuse is off)
    rng.shuffle(fresh)
    # ranges within one sex; 17..90 is the whole age domain, so that range is the predicted
    # `GROUP BY sex` count (answered from the MM release, not fresh): left out
    fresh += [
        f"SELECT count(*) FROM adult WHERE age BETWEEN {lo} AND {hi} AND sex = '{sex}'"
        for lo in range(17, 91)
        for hi in range(lo + 1, 91)
        if (lo, hi) != (17, 90)
        for sex in ("Female", "Male")
    ]
    stream = iter(fresh)
    taking = threading.Lock()  # the clients' threads share the stream

    def take() -> str:
        with taking:
            return next(stream)

    unexpected: list[str] = []
    answered: dict[str, Any] = {}  # every answer a client received, ever
    last_round: list[str] = []
    orphans = 0
    server = ForkServer(path)
    try:
        for round_ in range(KILLS + 1):
            pid, port = server.spawn()
            conn, notices = connect(port)
            with conn:
                if round_ > 0:
                    st, released, orphans = check_ledger(pg, epoch)
                    # no answer is re-drawn: the last lifetime's answers and a sample of older ones
                    older = [q for q in answered if q not in last_round]
                    for q in [*last_round, *rng.sample(older, min(4, len(older)))]:
                        value, notice = ask(conn, notices, q)
                        assert value == answered[q], q
                        assert "repeat" in notice, (q, notice)
                # the stream continues: a new fresh query is answered
                q = take()
                value, notice = ask(conn, notices, q)
                assert "fresh noise" in notice
                answered[q] = value
                for q in DASHBOARD:  # answered from the MM release: stable across restarts
                    value, _ = ask(conn, notices, q)
                    assert answered.setdefault(q, value) == value
            if round_ == KILLS:
                server.kill(pid)
                break
            # clients stream fresh queries until the proxy is killed at a random point
            this_round: list[str] = []
            stop = threading.Event()

            def client(
                port: int = port, out: list[str] = this_round, stop: threading.Event = stop
            ) -> None:
                try:
                    c, _ = connect(port)
                    with c:
                        while not stop.is_set() and len(out) < PER_LIFETIME:
                            q = take()
                            row = c.execute(q).fetchone()
                            if row is None:
                                unexpected.append(f"no row for {q}")
                                return
                            answered[q] = row[0]  # only after the client got it
                            out.append(q)
                except psycopg.Error as err:
                    if err.sqlstate is not None:  # an error answer, not the proxy dying
                        unexpected.append(f"{err.sqlstate}: {err}")
                except Exception as exc:
                    unexpected.append(repr(exc))

            threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.02, 0.6))
            server.kill(pid)
            stop.set()
            for t in threads:
                t.join(30)
            assert not any(t.is_alive() for t in threads)
            assert not unexpected, unexpected
            last_round = this_round

        # a last proxy: everything ever answered is a repeat with the identical value
        pid, port = server.spawn()
        conn, notices = connect(port)
        with conn:
            st, released, orphans = check_ledger(pg, epoch)
            for q, expected in answered.items():
                value, notice = ask(conn, notices, q)
                assert value == expected, q
                assert "repeat" in notice or q in DASHBOARD, (q, notice)
        server.kill(pid)
    finally:
        server.close()
    fresh_answers = len([q for q in answered if q not in DASHBOARD])
    assert released >= fresh_answers  # every answer seen has its release committed
    assert st.online_releases == released + orphans
    mm_after = [(s, k, p) for s, k, p in _raw(pg, epoch) if k == "MatrixReleased"]
    assert mm_after == mm_before  # the MM release is stored once, never re-drawn
    print(
        f"\ncrash test: {KILLS} kills, {fresh_answers} fresh answers seen by clients, "
        f"{released} releases, {orphans} charges lost to a crash before their release, "
        f"spent {st.spent:.4g} of {st.total:.4g} {st.unit}, {time.monotonic() - began:.1f} s"
    )


def _raw(pg: Any, epoch: int) -> list[tuple[int, str, str]]:
    with psycopg.connect(pg.state_dsn) as conn:
        return [
            (int(s), k, p)
            for s, k, p in conn.execute(
                "SELECT seq, kind, payload::text FROM lapras.ledger WHERE epoch_id = %s ORDER BY seq",
                (epoch,),
            ).fetchall()
        ]


pytestmark = pytest.mark.timeout(180)
