"""No exact fact of a protected table by any route; analysts isolated from each other.

The battery (tests/lockdown_attacks.py) runs through the proxy, directly on the provisioned
backend as an analyst's own role (the database's refusal, without the proxy's guard), through
``lapras serve`` with two workers, and through ``lapras demo``. Then: the route checker finds
nothing open on a provisioned backend and names each route it is shown; two analysts can
neither see nor end each other's sessions.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from epoch_helpers import ADMIN, ANALYST, DASHBOARD, Proxy, config_text, reset_ledger, start_epoch
from lockdown_attacks import ATTACKS, facts, leaks, run

from proxy import provision
from proxy.config import parse_config
from proxy.embedded import _free_port

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
BOB = ("bob", "bob-secret")


def _config(pg: Any, **server: Any) -> str:
    text = config_text(pg)
    text += f'\n[[users]]\nname = "{BOB[0]}"\npassword = "{BOB[1]}"\n'
    for key, value in server.items():
        text = text.replace("[server]\n", f"[server]\n{key} = {value}\n")
    return text


@pytest.fixture(scope="module")
def epoch(pg: Any) -> Any:
    """An active epoch whose histogram scan has run, and a few answers in the ledger."""
    reset_ledger(pg)
    config = parse_config(_config(pg), "lockdown.toml")
    start_epoch(config, DASHBOARD)
    return config


def _battery(
    dsn: str, known: dict[str, int], *, prepare: bool, mask_dp: bool = False
) -> dict[str, list[str]]:
    found = {}
    for name, statements in ATTACKS.items():
        with psycopg.connect(dsn, autocommit=True) as conn:
            out = run(conn, statements, prepare=prepare, mask_dp=mask_dp)
        if leaks(out, known):
            found[name] = leaks(out, known)
    return found


def test_the_battery_sees_a_leak_where_there_is_one(pg: Any, epoch: Any) -> None:
    """The same battery as the superuser, who may read everything: it must find the facts
    (else a clean result below would mean nothing). The query_to_xml attacks matter only on a
    server built with libxml, which the embedded one is not."""
    known = facts(pg.admin_dsn)
    found = _battery(pg.admin_dsn, known, prepare=False)
    for attack in ("whole row", "row_to_json", "escaped column name", "CTE column rename",
                   "PREPARE / EXECUTE", "cursor", "COPY",
                   "DO with dynamic SQL", "pg_stat_user_tables", "sizes by oid",
                   "oracle in WHERE", "oracle on size", "rows through a CTE"):  # fmt: skip
        assert attack in found, (attack, sorted(found))


@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "extended"])
def test_no_exact_fact_through_the_proxy(pg: Any, epoch: Any, prepare: bool) -> None:
    with Proxy(epoch, seed=3) as proxy:
        with psycopg.connect(proxy.dsn, autocommit=True) as conn:
            for sql in DASHBOARD:  # the aggregator has scanned; the ledger has rows
                conn.execute(sql).fetchall()
        known = facts(pg.admin_dsn)
        assert known["rows"] == 32561
        assert _battery(proxy.dsn, known, prepare=prepare) == {}


def test_no_exact_fact_directly_as_the_analysts_role(pg: Any, epoch: Any) -> None:
    """Without the proxy at all: PostgreSQL itself refuses every route to the role the
    analyst's sessions run as (the guard is only the first layer)."""
    known = facts(pg.admin_dsn)
    with pg.analyst_login(ANALYST[0]) as dsn:
        assert _battery(dsn, known, prepare=False) == {}
        with psycopg.connect(dsn, autocommit=True) as conn:
            for sql in ("SELECT reltuples FROM pg_class", "SELECT c FROM pg_class c"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)


def _listening(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    out = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        out += line
        if "listening on" in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"the proxy did not start:\n{out}")


def _stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_no_exact_fact_through_two_workers(pg: Any, epoch: Any, tmp_path: Path) -> None:
    port = _free_port()
    path = tmp_path / "lapras.toml"
    path.write_text(
        _config(pg).replace('listen = "127.0.0.1:0"', f'listen = "127.0.0.1:{port}"\nworkers = 2')
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(path)],
        cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert "(2 worker processes)" in _listening(proc)
        dsn = f"postgresql://{ANALYST[0]}:{ANALYST[1]}@127.0.0.1:{port}/{pg.database}"
        known = facts(pg.admin_dsn)
        assert _battery(dsn, known, prepare=False) == {}
    finally:
        _stop(proc)


def test_no_exact_fact_through_the_demo(tmp_path: Path) -> None:
    """The README's first command: ``lapras demo`` provisions its own embedded PostgreSQL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "demo", "--data-dir", str(tmp_path / "demo"),
         "--port", str(port), "--stream-length", "100"],
        cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _listening(proc, timeout=240)
        dsn = f"postgresql://analyst:analyst@127.0.0.1:{port}/lapras_demo"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall()
        credentials = (tmp_path / "demo" / "lapras-credentials.json").read_text()
        password = re.search(r'"postgres": "([^"]+)"', credentials)
        assert password is not None
        config = (tmp_path / "demo" / "lapras.toml").read_text()
        host_port = re.search(r"@127\.0\.0\.1:(\d+)/lapras_demo", config)
        assert host_port is not None
        admin = (
            f"postgresql://postgres:{password.group(1)}@127.0.0.1:{host_port.group(1)}/lapras_demo"
        )
        known = facts(admin)
        assert known["rows"] == 32561
        # The demo draws secure noise: a DP count may round to the true one (see run's
        # mask_dp); the seeded proxies above check every row.
        assert _battery(dsn, known, prepare=False, mask_dp=True) == {}
    finally:
        _stop(proc, signal.SIGINT)


# -- the route checker --------------------------------------------------------------------------


def _check(conn: Any, roles: list[str]) -> list[provision.Finding]:
    return provision.check(
        conn,
        protected=["public.adult"],
        roles=roles,
        data_database="lapras_test",
        state_database="lapras_test_lapras",
    )


def test_a_provisioned_backend_has_no_open_route(pg: Any) -> None:
    with psycopg.connect(pg.aggregator_dsn) as conn:
        assert _check(conn, [provision.analyst_role(u) for u in ("analyst", "root", "bob")]) == []


def test_the_checker_names_every_route_it_is_shown(pg: Any) -> None:
    """Each privilege that opens a route is granted (in a transaction that is rolled back)
    and the checker must name it; the checker sees what any role may ask PostgreSQL."""
    role = provision.analyst_role("analyst")
    with psycopg.connect(pg.admin_dsn) as conn:
        opened = {
            "SELECT on protected table public.adult": f"GRANT SELECT ON adult TO {role}",
            "member of pg_read_all_stats": "GRANT pg_read_all_stats TO lapras_user_root",
            "SELECT on pg_class.reltuples": "GRANT SELECT ON pg_class TO PUBLIC",
            "EXECUTE on statistics functions": "GRANT EXECUTE ON FUNCTION pg_relation_size(regclass) TO PUBLIC",
            "USAGE on language plpgsql": "GRANT USAGE ON LANGUAGE plpgsql TO PUBLIC",
            "CREATE on schema public": "GRANT CREATE ON SCHEMA public TO PUBLIC",
            "TEMPORARY on the database": "GRANT TEMPORARY ON DATABASE lapras_test TO PUBLIC",
            "CONNECT on the state database": "GRANT CONNECT ON DATABASE lapras_test_lapras TO PUBLIC",
            "reads a protected table": (
                "CREATE VIEW public.lapras_adult_view AS SELECT age FROM adult;"
                f" GRANT SELECT ON public.lapras_adult_view TO {role}"
            ),
            "SECURITY DEFINER function": (
                "CREATE FUNCTION public.lapras_definer() RETURNS bigint LANGUAGE sql"
                " SECURITY DEFINER AS 'SELECT count(*) FROM adult'"
            ),
        }
        for sql in opened.values():
            conn.execute(sql)
        routes = [f.route for f in _check(conn, [role, "lapras_user_root", "lapras_user_nobody"])]
        conn.rollback()
    for name in opened:
        assert any(name in r for r in routes), (name, routes)
    assert "the analyst role does not exist" in routes
    with psycopg.connect(pg.aggregator_dsn) as conn:  # rolled back: closed again
        assert _check(conn, [role]) == []


def test_provision_and_check_through_the_cli(pg: Any, tmp_path: Path) -> None:
    path = tmp_path / "lapras.toml"
    path.write_text(_config(pg))
    # Provisioning again from the configuration is idempotent and ends with the check.
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "provision", "--admin-dsn-env", "LAPRAS_TEST_ADMIN",
         "--config", str(path)],
        cwd=ROOT, env={**ENV, "LAPRAS_TEST_ADMIN": pg.admin_dsn}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "role lapras_user_bob (user bob)" in done.stdout
    assert "state database lapras_test_lapras" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "provision", "--check", "--config", str(path)],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every route to an exact statistic is closed (3 analyst role(s) checked)" in done.stdout
    # a configuration naming a user without a backend role is refused at `lapras serve`
    path.write_text(_config(pg) + '\n[[users]]\nname = "eve"\npassword = "e"\n')
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(path)],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "lapras_user_eve" in done.stderr and "lapras provision --config" in done.stderr


def test_provisioning_moves_an_old_ledger_out_of_the_data_database(pg: Any) -> None:
    """Before the state database existed the ledger lived in schema lapras of the data
    database. Provisioning moves it (epochs, events, histograms) so no budget is reset."""
    plan = provision.Plan(  # roles belong to the cluster: keep the suite's passwords
        database="lapras_move",
        protected=("public.t",),
        aggregator_password=urlsplit(pg.aggregator_dsn).password or "",
        passthrough_password=pg.passthrough_password,
    )
    admin = pg.admin_dsn.rsplit("/", 1)[0]
    try:
        with psycopg.connect(admin + "/postgres", autocommit=True) as a:
            provision.ensure_database(a, plan.database)
        with psycopg.connect(admin + "/lapras_move", autocommit=True) as a:
            a.execute("CREATE TABLE IF NOT EXISTS public.t (x int)")
            from proxy.ledger import migrate_sync

            with psycopg.connect(admin + "/lapras_move") as old:
                migrate_sync(old)
                old.execute(
                    "INSERT INTO lapras.epochs (table_name, view_name, status, config, started_by)"
                    " VALUES ('t', 'v', 'active', '{}', 'pytest')"
                )
                old.execute("INSERT INTO lapras.ledger VALUES (1, 1, 'EpochStarted', '{}')")
                old.commit()
        assert provision.provision(admin + "/postgres", plan) == []
        with psycopg.connect(admin + "/lapras_move") as a:
            assert a.execute("SELECT to_regnamespace('lapras')").fetchone() == (None,)
        with psycopg.connect(admin + "/lapras_move_lapras") as s:
            assert s.execute("SELECT count(*) FROM lapras.ledger").fetchone() == (1,)
            assert s.execute("SELECT status FROM lapras.epochs").fetchone() == ("active",)
            next_id = s.execute("SELECT nextval(pg_get_serial_sequence('lapras.epochs', 'id'))")
            assert next_id.fetchone() == (2,)
        assert provision.provision(admin + "/postgres", plan) == []  # idempotent
    finally:
        with psycopg.connect(admin + "/postgres", autocommit=True) as a:
            for db in ("lapras_move", "lapras_move_lapras"):
                a.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


# -- analysts isolated --------------------------------------------------------------------------


def test_analysts_cannot_see_or_end_each_others_sessions(pg: Any, epoch: Any) -> None:
    config = parse_config(_config(pg), "lockdown.toml")
    with Proxy(config, seed=5) as proxy:
        dsn_b = proxy.dsn.replace(f"{ANALYST[0]}:{ANALYST[1]}", f"{BOB[0]}:{BOB[1]}")
        with (
            psycopg.connect(proxy.dsn, autocommit=True) as a,
            psycopg.connect(dsn_b, autocommit=True) as b,
        ):
            assert a.execute("SELECT current_user, session_user").fetchone() == (
                "lapras_user_analyst",
                "lapras_user_analyst",
            )
            (pid_b,) = b.execute("SELECT pg_backend_pid()").fetchone()
            b.execute("SELECT 'bob was here' AS marker").fetchone()
            row = a.execute(
                "SELECT usename, query, state, client_addr FROM pg_stat_activity WHERE pid = %s",
                (pid_b,),
            ).fetchone()
            assert row is not None and row[0] == "lapras_user_bob"
            # another role's session: its name, not what it runs
            assert row[1:] == ("<insufficient privilege>", None, None)
            for fn in ("pg_terminate_backend", "pg_cancel_backend"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    a.execute(f"SELECT {fn}(%s)", (pid_b,))
            assert b.execute("SELECT 1").fetchone() == (1,)  # still there
            assert b.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall()
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                a.execute("SET ROLE lapras_user_bob")
            if a.info.server_version >= 160000:  # membership without SET (PostgreSQL 16)
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    a.execute("SET ROLE lapras_passthrough")
        # the admin user is an analyst upstream like any other
        dsn_root = proxy.dsn.replace(f"{ANALYST[0]}:{ANALYST[1]}", f"{ADMIN[0]}:{ADMIN[1]}")
        with psycopg.connect(dsn_root, autocommit=True) as r:
            assert r.execute("SELECT current_user").fetchone() == ("lapras_user_root",)
