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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import psycopg.sql
import pytest
import single_blas_thread  # noqa: F401  (before numpy: one BLAS thread per process)

from proxy import provision
from proxy.embedded import EmbeddedPostgres, provision_adult

DATABASE = "lapras_test"
STATE_DATABASE = provision.state_database(DATABASE)
#: The proxy users of the suite's configurations, each with its own backend role.
USERS = ("analyst", "root", "bob")


@dataclass(frozen=True)
class Backend:
    """DSNs of the test database, one per role, and of the proxy's state database."""

    admin_dsn: str
    aggregator_dsn: str
    passthrough_dsn: str
    state_dsn: str
    host: str
    port: int
    database: str
    passthrough_password: str

    def role_dsn(self, role: str, password: str) -> str:
        return f"postgresql://{quote(role)}:{quote(password, safe='')}@{self.host}:{self.port}/{self.database}"

    def analyst_dsn(self, user: str) -> str:
        """The DSN of a proxy user's own backend role (what the proxy logs in as). Its login
        is closed but while the proxy logs in (proxy/doors.py): see :meth:`analyst_login`."""
        role = provision.analyst_role(user)
        return self.role_dsn(role, provision.analyst_password(self.passthrough_password, role))

    @contextmanager
    def analyst_login(self, user: str) -> Iterator[str]:
        """:meth:`analyst_dsn`, with the role's door held open for the block (by the
        administrator), for tests that compare with what PostgreSQL shows that role itself.
        A proxy that logs in as the role meanwhile closes it again behind its own login."""
        role = psycopg.sql.Identifier(provision.analyst_role(user))
        with psycopg.connect(self.admin_dsn, autocommit=True) as admin:
            admin.execute(psycopg.sql.SQL("ALTER ROLE {} VALID UNTIL 'infinity'").format(role))
        try:
            yield self.analyst_dsn(user)
        finally:
            with psycopg.connect(self.admin_dsn, autocommit=True) as admin:
                admin.execute(psycopg.sql.SQL("ALTER ROLE {} VALID UNTIL '-infinity'").format(role))

    @property
    def state_admin_dsn(self) -> str:
        return _with(self.admin_dsn, db=STATE_DATABASE)


def _with(dsn: str, *, user: str | None = None, password: str | None = None, db: str) -> str:
    parts = urlsplit(dsn)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if user is not None:
        netloc = f"{quote(user)}:{quote(password or '', safe='')}@{netloc}"
    else:
        netloc = parts.netloc
    return urlunsplit((parts.scheme, netloc, "/" + db, parts.query, parts.fragment))


def _provisioned(admin_dsn: str, plan: provision.Plan) -> Backend:
    parts = urlsplit(admin_dsn)
    agg = (provision.AGGREGATOR, plan.aggregator_password)
    return Backend(
        admin_dsn=_with(admin_dsn, db=DATABASE),
        aggregator_dsn=_with(admin_dsn, user=agg[0], password=agg[1], db=DATABASE),
        passthrough_dsn=_with(
            admin_dsn, user=provision.PASSTHROUGH, password=plan.passthrough_password, db=DATABASE
        ),
        state_dsn=_with(admin_dsn, user=agg[0], password=agg[1], db=STATE_DATABASE),
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=DATABASE,
        passthrough_password=plan.passthrough_password,
    )


def _external(admin_dsn: str) -> Backend:
    plan = provision.Plan(
        database=DATABASE,
        protected=("public.adult",),
        aggregator_password=secrets.token_urlsafe(18),
        passthrough_password=secrets.token_urlsafe(18),
        analysts=tuple((u, provision.analyst_role(u)) for u in USERS),
    )
    left = provision.provision(_with(admin_dsn, db="postgres"), plan, load=("adult",))
    assert not left, left
    return _provisioned(admin_dsn, plan)


@pytest.fixture(scope="session")
def pg() -> Iterator[Backend]:
    """The backend PostgreSQL: Adult loaded, provisioned (roles, state database, lockdown)."""
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
        plan = provision_adult(server, DATABASE, USERS)
        yield _provisioned(server.dsn(database=DATABASE), plan)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
