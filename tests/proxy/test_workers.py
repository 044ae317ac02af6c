"""Several worker processes on one port (``[server] workers``), here as two servers side by
side on one port: the kernel spreads connections over them, the connection limit and each
user's share of it are shared, and a CancelRequest that reaches the other worker is passed on
to the session's own."""

from __future__ import annotations

import contextlib
import multiprocessing
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PASSWORD, USER, TestRouter, assert_cancels, make_config

from proxy.embedded import _free_port
from proxy.wire.auth import AuthConfig
from proxy.wire.server import BackgroundServer, WorkerSlot

OTHER, OTHER_PASSWORD = "bob", "bob-secret"


@contextlib.contextmanager
def two_workers(
    pg: Any, max_connections: int, users: tuple[str, ...] = ()
) -> Iterator[tuple[list[BackgroundServer], str]]:
    """Two servers on one port, sharing the connection count (and the sessions of ``users``,
    declared beside USER, as ``lapras serve`` shares those of every declared user)."""
    port = _free_port()
    sockets = tempfile.mkdtemp(prefix="lapras-test-workers-")
    connections = multiprocessing.Value("i", 0)
    names = (USER, *users)
    counts = multiprocessing.Array("i", len(names), lock=False)
    auth = AuthConfig.with_passwords({USER: PASSWORD, **{u: f"{u}-secret" for u in users}})
    try:
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(
                    BackgroundServer(
                        make_config(
                            pg,
                            auth=auth,
                            upstream_database=pg.database,
                            port=port,
                            max_connections=max_connections,
                            worker=WorkerSlot(
                                index=i,
                                count=2,
                                sockets=sockets,
                                connections=connections,
                                user_names=names,
                                users=counts,
                            ),
                        ),
                        TestRouter({"adult"}),
                    )
                )
                for i in range(2)
            ]
            yield servers, f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/{pg.database}"
        assert connections.value == 0 and list(counts) == [0] * len(names)  # all given back
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def _owner(servers: list[BackgroundServer], pid: int) -> int:
    (index,) = [i for i, s in enumerate(servers) if pid in s.server._sessions]
    return index


def test_pids_name_their_worker_and_the_limit_is_shared(pg) -> None:  # type: ignore[no-untyped-def]
    with two_workers(pg, max_connections=3) as (servers, dsn):
        conns = [psycopg.connect(dsn, autocommit=True) for _ in range(3)]
        try:
            for c in conns:
                pid = c.info.backend_pid
                assert (pid - 1) % 2 == _owner(servers, pid)
            with pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(dsn)
            conns.pop().close()
            for _ in range(50):  # the session is given back when its task ends
                with contextlib.suppress(psycopg.OperationalError), psycopg.connect(dsn) as c:
                    assert c.execute("SELECT 1").fetchone() == (1,)
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the freed connection slot was not given back")
        finally:
            for c in conns:
                c.close()
        # Both workers take connections (the kernel's choice; 40 tries miss one with 2^-39).
        seen = set()
        for _ in range(40):
            with psycopg.connect(dsn) as c:
                seen.add((c.info.backend_pid - 1) % 2)
            if len(seen) == 2:
                break
        assert seen == {0, 1}


def test_a_users_share_counts_every_worker(pg) -> None:  # type: ignore[no-untyped-def]
    """Two users declared, max_connections = 8: a user's share (4) counts its sessions on
    both workers, wherever the kernel puts them; the other user still gets in."""
    with two_workers(pg, max_connections=8, users=(OTHER,)) as (_, dsn):
        conns = [psycopg.connect(dsn, autocommit=True) for _ in range(4)]
        try:
            for _ in range(6):  # whichever worker takes it, the fifth is refused
                with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
                    psycopg.connect(dsn)
            other = dsn.replace(f"{USER}:{PASSWORD}", f"{OTHER}:{OTHER_PASSWORD}")
            with psycopg.connect(other) as c:
                assert c.execute("SELECT 1").fetchone() == (1,)
        finally:
            for c in conns:
                c.close()


@pytest.mark.parametrize(
    "sql", ["SELECT pg_sleep(30)", "SELECT count(*) FROM adult WHERE age > 999"]
)
def test_cancel_reaching_the_other_worker_is_passed_on(pg, sql: str) -> None:  # type: ignore[no-untyped-def]
    """A relayed statement and a local answer (the test router sleeps on ``> 999``)."""
    with two_workers(pg, max_connections=10) as (servers, dsn):
        with psycopg.connect(dsn, autocommit=True) as c:
            pid = c.info.backend_pid
            owner = _owner(servers, pid)
            key = servers[owner].server._sessions[pid].key
            other = servers[1 - owner]
            assert_cancels(c, sql, lambda: other.call(other.server.cancel(pid, key)))


def test_passed_cancel_with_a_wrong_key_is_ignored(pg) -> None:  # type: ignore[no-untyped-def]
    with two_workers(pg, max_connections=10) as (servers, dsn):
        with psycopg.connect(dsn, autocommit=True) as c:
            pid = c.info.backend_pid
            owner = _owner(servers, pid)
            key = servers[owner].server._sessions[pid].key ^ 1
            other = servers[1 - owner]
            timer = threading.Timer(0.3, lambda: other.call(other.server.cancel(pid, key)))
            timer.start()
            assert c.execute("SELECT pg_sleep(1), 7").fetchone() == ("", 7)
            timer.join()
