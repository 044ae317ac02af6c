"""The proxy as the only door (issue 41, item 3): an analyst cannot change its backend role's
credentials through the proxy (rewriter/doors.py), a direct login as an analyst role fails
whatever its password (proxy/doors.py: the role's login is closed but while the proxy logs
in), ``lapras provision --check`` names a role that could log in by itself or was given a
password behind the proxy's back, and provisioning retires the roles of removed users.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from epoch_helpers import ANALYST, Proxy, config_text, reset_ledger
from psycopg import sql

from proxy import provision
from proxy.config import parse_config

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
ROLE = provision.analyst_role(ANALYST[0])
#: What psql's \password sends (ALTER USER with the new password's SCRAM verifier).
PSQL_PASSWORD = (
    'ALTER USER "lapras_user_analyst" PASSWORD '
    "'SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0c2FsdA==$"
    "lOZ4yVtNQwD7r1cZ8rKmKAZlNWySBWYg2UUm7WGHWyk=:"
    "E6fgvBdKnUk0t3l2S0jBULfxOkD0vmJ8Kcz2Yn6jLc4='"
)
REFUSED = [
    "ALTER ROLE current_user PASSWORD 'mine'",
    "alter role CURRENT_USER with encrypted password 'mine' valid until 'infinity'",
    "/* a comment */ ALTER /* between */ ROLE lapras_user_analyst PASSWORD 'mine'",
    PSQL_PASSWORD,
    "ALTER USER current_user SET search_path = public",
    "ALTER GROUP lapras_passthrough ADD USER lapras_user_analyst",
    "CREATE ROLE lapras_evil LOGIN PASSWORD 'mine'",
    "CREATE USER MAPPING FOR current_user SERVER nowhere OPTIONS (password 'mine')",
    "DROP ROLE lapras_user_bob",
    "SET ROLE lapras_passthrough",
    "SET LOCAL ROLE lapras_user_bob",
    "SET SESSION AUTHORIZATION lapras_user_bob",
    'SET "role" TO lapras_passthrough',
    "set session_authorization = lapras_user_bob",
]


@pytest.fixture(scope="module")
def proxy(pg: Any) -> Iterator[Proxy]:
    reset_ledger(pg)
    with Proxy(parse_config(config_text(pg), "doors.toml"), seed=1) as p:
        yield p


def _direct(pg: Any, password: str) -> psycopg.Connection[Any]:
    return psycopg.connect(pg.role_dsn(ROLE, password), connect_timeout=10)


@pytest.mark.parametrize("prepare", [False, True], ids=["simple", "extended"])
def test_role_statements_are_refused_through_the_proxy(
    proxy: Proxy, pg: Any, prepare: bool
) -> None:
    """Every spelling of a change of role or credentials meets 42501 with a message that says
    why, in the simple and the extended protocol; the session goes on, the no-op resets are
    relayed, and the role's password is not what the analyst tried to set."""
    with psycopg.connect(proxy.dsn, autocommit=True) as conn:
        for statement in REFUSED:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as e:
                conn.execute(statement, prepare=prepare)
            assert "is not allowed through the LAPRAS proxy" in str(e.value), statement
            assert e.value.diag.message_hint and "[[users]]" in e.value.diag.message_hint
        for statement in ("RESET ROLE", "SET ROLE NONE", "SET SESSION AUTHORIZATION DEFAULT"):
            conn.execute(statement, prepare=prepare)
        assert conn.execute("SELECT current_user").fetchone() == (ROLE,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _direct(pg, "mine")


def test_psqls_password_command_is_refused(proxy: Proxy, pg: Any) -> None:
    """psql's own \\password (it reads the new password twice, then sends ALTER USER with the
    SCRAM verifier): refused, and the role's login stays closed to that password."""
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("needs psql")
    done = subprocess.run(
        [psql, "-X", proxy.dsn, "-c", "\\password"],
        input="mine\nmine\n", capture_output=True, text=True, timeout=60,
        start_new_session=True,  # no terminal: psql prompts on stdin
    )  # fmt: skip
    assert "ALTER USER is not allowed through the LAPRAS proxy" in done.stderr, (
        done.stdout + done.stderr
    )
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _direct(pg, "mine")


def test_a_direct_login_as_an_analyst_role_fails(proxy: Proxy, pg: Any) -> None:
    """Even with the password the proxy logs in with, and while the proxy opens backend
    connections as that role: its login is open only for the proxy's own."""
    derived = provision.analyst_password(pg.passthrough_password, ROLE)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _direct(pg, derived)
    with pg.analyst_login(ANALYST[0]) as dsn:  # the administrator opens it: then it works
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (ROLE,)
    # many sessions at once make the proxy open several backend connections of the role
    sessions = [psycopg.connect(proxy.dsn, autocommit=True) for _ in range(6)]
    try:
        for s in sessions:
            s.execute("BEGIN")  # each holds its backend connection
            assert s.execute("SELECT current_user").fetchone() == (ROLE,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            _direct(pg, derived)
    finally:
        for s in sessions:
            s.close()
    with psycopg.connect(pg.admin_dsn) as admin:
        until = admin.execute(
            "SELECT rolvaliduntil::text FROM pg_roles WHERE rolname = %s", (ROLE,)
        ).fetchone()
    assert until == ("-infinity",)


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", "provision", "--check", "--config", str(config)],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _provision(pg: Any, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", "provision", "--admin-dsn-env", "LAPRAS_TEST_ADMIN",
         "--config", str(config)],
        cwd=ROOT, env={**ENV, "LAPRAS_TEST_ADMIN": pg.admin_dsn}, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def _users(pg: Any, *names: str) -> str:
    """The suite's configuration, with every user the suite's backend has (bob too: a
    provisioning from it retires the roles of the users it does not name)."""
    return config_text(pg) + "".join(
        f'\n[[users]]\nname = "{n}"\npassword = "{n}-secret"\n' for n in ("bob", *names)
    )


def _alter(pg: Any, role: str, clause: str) -> None:
    with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER ROLE {} " + clause).format(sql.Identifier(role)))


def test_provision_check_finds_a_role_changed_behind_the_proxys_back(
    pg: Any, proxy: Proxy, tmp_path: Path
) -> None:
    """A password set behind the proxy's back (as an analyst would have, had the text layer
    let it through): a direct login with it still fails, `lapras provision --check` fails
    naming the role, and the proxy's next login as the role sets its own password again.
    A login opened behind its back is named too, and provisioning closes it."""
    config = tmp_path / "lapras.toml"
    config.write_text(_users(pg))
    assert _check(config).returncode == 0
    _alter(pg, ROLE, "PASSWORD 'mine'")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _direct(pg, "mine")  # its login is closed, whatever its password
    done = _check(config)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "open: its password is not the one the proxy sets (changed behind the proxy's back)"
        f" ({ROLE})"
    ) in done.stdout
    # the proxy's next backend connection of the role sets the password again
    with Proxy(parse_config(config_text(pg), "doors.toml"), seed=2) as fresh:
        with psycopg.connect(fresh.dsn) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (ROLE,)
    assert _check(config).returncode == 0

    _alter(pg, ROLE, "PASSWORD 'mine' VALID UNTIL 'infinity'")
    try:
        with _direct(pg, "mine") as conn:  # now it would let the analyst in directly
            assert conn.execute("SELECT current_user").fetchone() == (ROLE,)
        done = _check(config)
        assert done.returncode == 1, done.stdout + done.stderr
        assert (
            f"open: logs in without the proxy (its login is open: VALID UNTIL infinity) ({ROLE})"
            in done.stdout
        )
    finally:
        done = _provision(pg, config)
    assert done.returncode == 0, done.stdout + done.stderr
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        _direct(pg, "mine")


def test_provisioning_retires_the_roles_of_removed_users(pg: Any, tmp_path: Path) -> None:
    """A user removed from [[users]]: the next `lapras provision --config` takes LOGIN from
    its role. A role of the analysts' group that is no declared user and can log in by
    itself is named by `lapras provision --check`."""
    config = tmp_path / "lapras.toml"
    eve = provision.analyst_role("eve")
    try:
        config.write_text(_users(pg, "eve"))
        done = _provision(pg, config)
        assert done.returncode == 0, done.stdout + done.stderr
        config.write_text(_users(pg))
        done = _provision(pg, config)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"role {eve} (no [[users]] entry): it cannot log in any more" in done.stdout
        with psycopg.connect(pg.admin_dsn) as admin:
            can = admin.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (eve,))
            assert can.fetchone() == (False,)
        _alter(pg, eve, "LOGIN VALID UNTIL 'infinity'")
        done = _check(config)
        assert done.returncode == 1, done.stdout + done.stderr
        assert (
            "open: a role of lapras_passthrough that is no [[users]] entry logs in by itself"
            f" ({eve})"
        ) in done.stdout
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(eve)))


def test_a_role_changed_behind_the_proxys_back_is_refused_with_an_alarm(
    pg: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """An analyst role whose LOGIN was taken behind the proxy's back: the proxy's own login
    fails while its door is open, the user is refused with an error naming its role, and an
    alarm is logged."""
    reset_ledger(pg)
    text = _users(pg, "carol")
    carol = provision.analyst_role("carol")
    path = tmp_path / "lapras.toml"
    path.write_text(text)
    try:
        assert _provision(pg, path).returncode == 0
        _alter(pg, carol, "NOLOGIN")
        with Proxy(parse_config(text, "doors.toml"), seed=3) as p:
            dsn = p.dsn.replace(f"{ANALYST[0]}:{ANALYST[1]}", "carol:carol-secret")
            with (
                caplog.at_level(logging.ERROR, logger="lapras.doors"),
                pytest.raises(psycopg.OperationalError, match=f'backend role "{carol}"'),
            ):
                psycopg.connect(dsn)
        assert any("ALARM" in r.getMessage() and carol in r.getMessage() for r in caplog.records)
    finally:
        with psycopg.connect(pg.admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(carol)))
