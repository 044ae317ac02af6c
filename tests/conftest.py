"""Shared fixtures: a real PostgreSQL with Adult loaded and the two LAPRAS roles.

By default the suite starts the embedded PostgreSQL (the ``pgserver`` wheel) in a temporary
folder, once per session. Set ``LAPRAS_TEST_DSN`` to the admin (superuser) DSN of an external
PostgreSQL to run against it instead: the fixture then creates database ``lapras_test`` there.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest

import sql_fixtures.adult as adult
from proxy import provision
from proxy.embedded import EmbeddedPostgres, provision_adult

DATABASE = "lapras_test"


@dataclass(frozen=True)
class Backend:
    """DSNs of the test database, one per role."""

    admin_dsn: str
    aggregator_dsn: str
    passthrough_dsn: str
    host: str
    port: int
    database: str

    def role_dsn(self, role: str, password: str) -> str:
        return f"postgresql://{quote(role)}:{quote(password, safe='')}@{self.host}:{self.port}/{self.database}"


def _with(dsn: str, *, user: str | None = None, password: str | None = None, db: str) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if user is not None:
        netloc = f"{quote(user)}:{quote(password or '', safe='')}@{netloc}"
    else:
        netloc = parts.netloc
    return urlunsplit((parts.scheme, netloc, "/" + db, parts.query, parts.fragment))


def _external(admin_dsn: str) -> Backend:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        provision.ensure_database(admin, DATABASE)
        passwords = {
            r: secrets.token_urlsafe(18) for r in (provision.AGGREGATOR, provision.PASSTHROUGH)
        }
        for role, pw in passwords.items():
            provision.ensure_role(admin, role, pw)
    db_admin = _with(admin_dsn, db=DATABASE)
    with psycopg.connect(db_admin) as conn:
        adult.load(conn)
        provision.grant_privileges(conn, DATABASE, ["public.adult"])
    parts = urlsplit(admin_dsn)
    return Backend(
        admin_dsn=db_admin,
        aggregator_dsn=_with(
            admin_dsn,
            user=provision.AGGREGATOR,
            password=passwords[provision.AGGREGATOR],
            db=DATABASE,
        ),
        passthrough_dsn=_with(
            admin_dsn,
            user=provision.PASSTHROUGH,
            password=passwords[provision.PASSTHROUGH],
            db=DATABASE,
        ),
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=DATABASE,
    )


@pytest.fixture(scope="session")
def pg() -> Iterator[Backend]:
    """The backend PostgreSQL: Adult loaded, aggregator and passthrough roles provisioned."""
    external = os.environ.get("LAPRAS_TEST_DSN")
    if external:
        yield _external(external)
        return
    # Not under pytest's tmp folder: pytest resets its root to mode 0700 when another run
    # starts, and the server (running as the 'pgserver' system user when we are root) must
    # keep reaching its data directory.
    folder = Path(tempfile.mkdtemp(prefix="lapras-test-pg-"))
    server = EmbeddedPostgres(folder)
    server.start()
    try:
        provision_adult(server, DATABASE)
        yield Backend(
            admin_dsn=server.dsn(database=DATABASE),
            aggregator_dsn=server.dsn(provision.AGGREGATOR, DATABASE),
            passthrough_dsn=server.dsn(provision.PASSTHROUGH, DATABASE),
            host=server.host,
            port=server.port,
            database=DATABASE,
        )
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
