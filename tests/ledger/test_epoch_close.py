"""``lapras epoch close`` stops a closed epoch's answers at once, repeats included, in every proxy
process on the ledger (proxy/epoch_watch.py): an in-process proxy (``proxy.app.running`` on a
thread) and a ``lapras serve`` process, closed through the real CLI.

Checked: the very next repeat of an answered statement is refused with 55000 by both, with no
sleep in between; after ``lapras epoch start`` the same statement is answered in the new epoch
(fresh, with the new epoch's budget in its NOTICE); a killed watch session makes each process
drop its epochs and recover (new session, epoch reloaded under it, and the next close confirmed
by both); a process that does not confirm in time is reported by the CLI.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy
from ledger_helpers import (
    ANALYST,
    cell_queries,
    cli_start_epoch,
    dsn,
    lapras,
    ledger_rows,
    reset_ledger,
    serve,
    write_config,
)

from dp import engine
from proxy.epoch_watch import APPLICATION_NAME, WATCH_SPACE

pytestmark = pytest.mark.timeout(180)


@dataclass(frozen=True)
class Notice:
    message: str
    detail: str


@contextmanager
def client(port: int) -> Iterator[tuple[psycopg.Connection[Any], list[Notice]]]:
    """An analyst's connection and the NOTICEs it received (copied: psycopg frees them)."""
    notices: list[Notice] = []
    with psycopg.connect(dsn(port, ANALYST), autocommit=True) as conn:
        conn.add_notice_handler(
            lambda d: notices.append(Notice(d.message_primary or "", d.message_detail or ""))
        )
        yield conn, notices


def holders(pg: Any, epoch: int) -> set[int]:
    """The backend pids holding the epoch's shared watch lock (one per serving process)."""
    with psycopg.connect(pg.state_admin_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s::bigint::oid"
            " AND objid = %s::bigint::oid AND objsubid = 2 AND mode = 'ShareLock' AND granted",
            (WATCH_SPACE, epoch),
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def watch_sessions(pg: Any) -> set[int]:
    with psycopg.connect(pg.state_admin_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            (APPLICATION_NAME,),
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Wait for an asynchronous event of another process (bounded)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def close_epoch(path: Path, *extra: str) -> str:
    done = lapras("epoch", "close", "--config", str(path), "--table", "adult", *extra)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_close_stops_repeats_at_once_in_every_proxy_process(pg: Any, tmp_path: Path) -> None:
    reset_ledger(pg)
    path, config = write_config(tmp_path, pg, stream_length=20, reuse=False)
    first = cli_start_epoch(path, [])
    queries = cell_queries()[:2]
    with Proxy(config) as local, serve(path) as (_, port):
        with client(local.port) as (a, a_notes), client(port) as (b, b_notes):
            answered = [a.execute(q).fetchone() for q in queries]
            assert "fresh noise" in a_notes[-1].message
            assert "online releases 2 of 20" in a_notes[-1].detail
            for q, row in zip(queries, answered, strict=True):
                assert b.execute(q).fetchone() == row  # b loads the epoch: the stored answers
                assert a.execute(q).fetchone() == row  # repeats, from memory
            for notes in (a_notes, b_notes):
                assert "a repeat" in notes[-1].message
            assert len(holders(pg, first)) == 2  # both processes serve the epoch

            out = close_epoch(path)
            assert f"epoch {first} on adult closed" in out
            assert "2 proxy processes serving it confirmed" in out and "warning" not in out
            assert holders(pg, first) == set()
            for conn in (a, b):  # the very next repeat, no sleep: refused
                for q in queries:
                    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as info:
                        conn.execute(q)
                    assert "lapras epoch start" in (info.value.diag.message_hint or "")
                assert conn.execute("SELECT 1").fetchone() == (1,)

            second = cli_start_epoch(path, [], "--stream-length", "30")
            fresh = b.execute(queries[0]).fetchone()  # answered in the new epoch
            assert "fresh noise" in b_notes[-1].message
            assert "online releases 1 of 30; stream position 1" in b_notes[-1].detail
            assert a.execute(queries[0]).fetchone() == fresh  # the new epoch's stored answer
            assert "a repeat" in a_notes[-1].message
            assert "online releases 1 of 30" in a_notes[-1].detail
    old = [ev for _, _, ev in ledger_rows(pg, first) if isinstance(ev, engine.Released)]
    new = [ev for _, _, ev in ledger_rows(pg, second) if isinstance(ev, engine.Released)]
    assert len(old) == 2 and len(new) == 1 and new[0].key == old[0].key


def test_a_killed_watch_session_drops_the_epochs_and_recovers(pg: Any, tmp_path: Path) -> None:
    reset_ledger(pg)
    path, config = write_config(tmp_path, pg, reuse=False)
    epoch = cli_start_epoch(path, [])
    q = cell_queries()[3]
    with Proxy(config) as local, serve(path) as (_, port):
        with client(local.port) as (a, _), client(port) as (b, b_notes):
            row = a.execute(q).fetchone()
            assert b.execute(q).fetchone() == row
            before = watch_sessions(pg)
            assert len(before) == 2 and holders(pg, epoch) == before
            with psycopg.connect(pg.state_admin_dsn, autocommit=True) as admin:
                for pid in before:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            # Each process sees its session end, drops its epochs, and opens a new session.
            until(lambda: len(watch_sessions(pg) - before) == 2, "the watches did not reconnect")
            after = watch_sessions(pg)
            assert after.isdisjoint(before)
            assert local.app is not None and local.app.service._handles == {}
            assert holders(pg, epoch) == set()  # nothing is served from the lost sessions
            assert a.execute(q).fetchone() == row  # reloaded from the ledger: the stored answer
            assert b.execute(q).fetchone() == row
            assert "a repeat" in b_notes[-1].message
            assert holders(pg, epoch) == after  # held again, under the new sessions

            out = close_epoch(path)
            assert "2 proxy processes serving it confirmed" in out
            for conn in (a, b):
                with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                    conn.execute(q)


def test_close_reports_a_process_that_does_not_confirm(pg: Any, tmp_path: Path) -> None:
    reset_ledger(pg)
    path, _ = write_config(tmp_path, pg)
    epoch = cli_start_epoch(path, [])
    # A session that holds the epoch's watch lock and never listens: a stuck proxy process.
    with psycopg.connect(pg.state_dsn, autocommit=True) as stuck:
        stuck.execute("SELECT pg_advisory_lock_shared(%s, %s)", (WATCH_SPACE, epoch))
        out = close_epoch(path, "--wait", "0.5")
    assert f"epoch {epoch} on adult closed" in out
    assert "1 proxy process serving it did not confirm within 0.5 s" in out
    with psycopg.connect(pg.state_dsn) as conn:
        status = conn.execute("SELECT status FROM lapras.epochs WHERE id = %s", (epoch,)).fetchone()
    assert status == ("closed",)
    cli_start_epoch(path, [])  # nobody serves this one
    assert "no proxy process was serving it" in close_epoch(path)
