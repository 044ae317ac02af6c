"""The proxy as the only door: analysts' roles log in only while the proxy logs in as them.

Each ``[[users]]`` entry acts upstream as its own role, ``lapras_user_<name>`` (docs/admin.md).
PostgreSQL lets every role change its own password (``ALTER ROLE current_user PASSWORD``,
psql's ``\\password``), so a password alone cannot keep an analyst from logging in to the
database directly, outside the proxy's limits, checks and query log. The text layer refuses
those statements (:mod:`rewriter.doors`); this module makes them useless at the database:

- ``lapras provision`` leaves every analyst role with ``VALID UNTIL '-infinity'``: PostgreSQL
  refuses any password login of it (an expired password), whatever the password. A role
  cannot change its own validity (that needs ``CREATEROLE`` and the ``ADMIN`` option on it).
- The aggregator role has ``CREATEROLE`` and the ``ADMIN`` option on each analyst role
  (PostgreSQL 16: that lets it alter those roles and nothing else). When the proxy opens a
  backend connection as an analyst role, :class:`Doors` *opens its door*: on a connection of
  its own (the aggregator, in the state database) it takes an advisory lock on the role, sets
  the role's password to the proxy's own (its SCRAM verifier: whatever the role changed it to
  is gone) valid for 30 seconds, logs in, and closes the door again (``VALID UNTIL
  '-infinity'``) before it lets the lock go. The door is open only for the proxy's own login
  (a few milliseconds); a proxy that dies meanwhile leaves it open 30 seconds at most.
- A login that fails inside an open door means the role was changed behind the proxy's back
  (dropped, ``NOLOGIN``, its membership): the analyst is refused with the error that names its
  role, and an alarm is logged.

On PostgreSQL 15 and older, ``CREATEROLE`` would let the aggregator grant itself any
non-superuser role, so nothing is closed there: the proxy logs in as before, and the text
layer is the only barrier (docs/admin.md). A backend provisioned before this (the aggregator
without the ``ADMIN`` option) is served the same way, with a warning; ``lapras provision
--check`` names both.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from proxy.exceptions import UpstreamUnavailable
from proxy.wire.upstream import UpstreamStartupError

log = logging.getLogger("lapras.doors")

T = TypeVar("T")

#: First key of the two-key advisory locks on analyst roles' doors ("LAPD"), distinct from
#: the ledger's one-key locks and the epoch watch's space, in the state database.
DOORS_SPACE = 0x4C415044
#: How long a door stays open if the proxy never closes it (it dies while logging in).
OPEN_FOR = "30 seconds"
#: How long to wait for another process's door of the same role (its login's time).
LOCK_WAIT = 30.0
#: PostgreSQL 16: CREATEROLE is limited to the roles one has the ADMIN option on.
MIN_VERSION = 160000


def close_role(role: str) -> sql.Composed:
    """The statement that closes a role's door."""
    return sql.SQL("ALTER ROLE {} VALID UNTIL '-infinity'").format(sql.Identifier(role))


class Doors:
    """Opens an analyst role's door for the proxy's own login (see the module).

    ``dsn``: the aggregator's, in the state database; ``verifiers``: each analyst role's SCRAM
    verifier of the password the proxy logs in with (:func:`proxy.provision.scram_verifier`).
    """

    def __init__(self, dsn: str, verifiers: Mapping[str, str]) -> None:
        self._dsn = dsn
        self._verifiers = dict(verifiers)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._connecting = asyncio.Lock()
        self._locks: dict[str, asyncio.Lock] = {}
        self._open: set[str] = set()  # roles served without a door (see the module)

    async def enter(self, role: str, login: Callable[[], Awaitable[T]]) -> T:
        """``login()``, run while ``role``'s door is open (directly when it has none)."""
        if role not in self._verifiers or role in self._open:
            return await login()
        lock = self._locks.setdefault(role, asyncio.Lock())
        async with lock:
            try:
                conn = await self._connection()
                if conn.info.server_version < MIN_VERSION:
                    self._open.update(self._verifiers)
                    return await login()
                await self._lock(conn, role)
            except psycopg.Error as e:
                raise _unreachable(role, e) from None
            try:
                if not await self._open_door(conn, role):
                    return await login()
                try:
                    return await login()
                except UpstreamStartupError as e:
                    if e.error.field("C") in ("28P01", "28000"):
                        log.error(
                            "ALARM: backend role %s refused the proxy's login while its door "
                            "was open: the role was changed outside the proxy (dropped, NOLOGIN "
                            "or its membership); an administrator runs lapras provision --config",
                            role,
                        )
                    raise
                finally:
                    await self._quietly(conn, close_role(role), role)
            except psycopg.Error as e:
                raise _unreachable(role, e) from None
            finally:
                await self._quietly(
                    conn,
                    sql.SQL("SELECT pg_advisory_unlock({}, hashtext({}))").format(
                        sql.Literal(DOORS_SPACE), sql.Literal(role)
                    ),
                    role,
                )

    @staticmethod
    async def _quietly(conn: psycopg.AsyncConnection[Any], stmt: sql.Composed, role: str) -> None:
        """Run ``stmt``; a broken connection releases its lock and the door closes by itself
        within ``OPEN_FOR``, so its failure is logged, not raised over the login's outcome."""
        try:
            await conn.execute(stmt)
        except psycopg.Error as e:
            log.warning("could not close the door of backend role %s at once: %s", role, e)

    async def _open_door(self, conn: psycopg.AsyncConnection[Any], role: str) -> bool:
        """Set ``role``'s password to the proxy's and open it for ``OPEN_FOR``; False when the
        aggregator may not (a backend provisioned before doors: served without one)."""
        cur = await conn.execute(f"SELECT (clock_timestamp() + interval '{OPEN_FOR}')::text")
        row = await cur.fetchone()
        assert row is not None
        try:
            await conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {} VALID UNTIL {}").format(
                    sql.Identifier(role),
                    sql.Literal(self._verifiers[role]),
                    sql.Literal(row[0]),
                )
            )
        except psycopg.errors.InsufficientPrivilege:
            log.warning(
                "backend role %s is served without a door: the aggregator may not alter it "
                "(a backend provisioned before doors); lapras provision --config closes it",
                role,
            )
            self._open.add(role)
            return False
        return True

    async def _lock(self, conn: psycopg.AsyncConnection[Any], role: str) -> None:
        """The role's advisory lock: one door at a time across every proxy process. A try-lock
        in a loop, so that the connection stays free for other roles' doors meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOCK_WAIT
        pause = 0.002
        while True:
            cur = await conn.execute(
                "SELECT pg_try_advisory_lock(%s, hashtext(%s))", (DOORS_SPACE, role)
            )
            row = await cur.fetchone()
            if row is not None and row[0]:
                return
            if loop.time() > deadline:
                raise UpstreamUnavailable(
                    f"could not open the backend login of role {role}: another proxy process "
                    f"held it for {LOCK_WAIT:.0f} s"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        async with self._connecting:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=10
                )
            return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


def _unreachable(role: str, e: psycopg.Error) -> UpstreamUnavailable:
    return UpstreamUnavailable(
        f"could not open the backend login of role {role}: the aggregator's connection to "
        "the state database failed",
        detail=str(e).strip() or type(e).__name__,
    )


# -- provisioning and checking (synchronous, as lapras provision runs) ---------------------------


def scram_verifier(password: str) -> str:
    """The SCRAM-SHA-256 verifier of ``password`` in PostgreSQL's own format: given as the
    password of ``ALTER ROLE``, PostgreSQL stores it as is (the password itself never travels
    to the server nor into its statement log)."""
    from base64 import b64encode

    from proxy.wire.auth import ScramVerifier

    v = ScramVerifier.from_password(password)
    salt, stored, server = (b64encode(x).decode() for x in (v.salt, v.stored_key, v.server_key))
    return f"SCRAM-SHA-256${v.iterations}:{salt}${stored}:{server}"


def can_close(conn: Any) -> bool:
    """Whether the server closes analysts' doors (PostgreSQL 16 or newer, see the module)."""
    return int(conn.info.server_version) >= MIN_VERSION


def provision_keeper(admin: Any, aggregator: str) -> None:
    """Let ``aggregator`` open and close doors: ``CREATEROLE`` (limited, in PostgreSQL 16, to
    the roles it has the ``ADMIN`` option on: :func:`provision_analyst` gives it that)."""
    if can_close(admin):
        admin.execute(sql.SQL("ALTER ROLE {} CREATEROLE").format(sql.Identifier(aggregator)))


def provision_analyst(admin: Any, role: str, password: str, aggregator: str) -> None:
    """Create (or reset) an analyst role with the proxy's password, its door closed, and give
    ``aggregator`` the ``ADMIN`` option on it (without its privileges nor SET ROLE to it)."""
    exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    closed = can_close(admin)
    admin.execute(
        sql.SQL(
            ("ALTER" if exists else "CREATE")
            + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            " PASSWORD {}" + (" VALID UNTIL '-infinity'" if closed else "")
        ).format(sql.Identifier(role), sql.Literal(scram_verifier(password)))
    )
    if closed:
        admin.execute(
            sql.SQL("GRANT {} TO {} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE").format(
                sql.Identifier(role), sql.Identifier(aggregator)
            )
        )


def retire(admin: Any, group: str, declared: Sequence[str]) -> list[str]:
    """Close the door, for good, of every role of ``group`` that is no declared analyst (a
    user removed from ``[[users]]``): ``NOLOGIN``. Returns their names."""
    rows = admin.execute(
        "SELECT r.rolname FROM pg_catalog.pg_auth_members m"
        " JOIN pg_catalog.pg_roles r ON r.oid = m.member"
        " WHERE m.roleid = %s::regrole AND r.rolcanlogin AND r.rolname <> ALL(%s)"
        " ORDER BY 1",
        (group, list(declared)),
    ).fetchall()
    for (role,) in rows:
        admin.execute(
            sql.SQL("ALTER ROLE {} NOLOGIN VALID UNTIL '-infinity'").format(sql.Identifier(role))
        )
    return [r[0] for r in rows]


#: A role "logs in by itself" when its validity is open beyond a door's own few seconds.
_OPEN = (
    "r.rolcanlogin AND (r.rolvaliduntil IS NULL OR r.rolvaliduntil > now() + interval '1 minute')"
)


def findings(
    conn: Any,
    *,
    roles: Sequence[str],
    group: str,
    aggregator: str,
    verify: Callable[[str], bool] | None = None,
) -> list[tuple[str, str, str]]:
    """``(route, role, fix)`` of every analyst role that can be logged in to without the proxy:
    its door open (PostgreSQL 16), the proxy unable to close it, a password the proxy did not
    set (``verify(role)``: a login with the proxy's password, when given), and every role of
    ``group`` that is no declared analyst yet logs in by itself."""
    out: list[tuple[str, str, str]] = []
    provision = "lapras provision --config"
    if can_close(conn):
        keeper = conn.execute(
            "SELECT rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = %s", (aggregator,)
        ).fetchone()
        for role, is_open, until, admin in conn.execute(
            f"SELECT r.rolname, {_OPEN}, r.rolvaliduntil::text,"
            " pg_has_role(%s, r.oid, 'MEMBER WITH ADMIN OPTION')"
            " FROM pg_catalog.pg_roles r WHERE r.rolname = ANY(%s) ORDER BY 1",
            (aggregator, list(roles)),
        ).fetchall():
            if is_open:
                out.append(
                    (
                        f"logs in without the proxy (its login is open: VALID UNTIL "
                        f"{until or 'not set'})",
                        role,
                        f"{provision} (closes it: VALID UNTIL '-infinity')",
                    )
                )
            if not (keeper and keeper[0] and admin):
                out.append(
                    (
                        "the proxy cannot open and close its login (the aggregator lacks "
                        "CREATEROLE or the ADMIN option on it)",
                        role,
                        provision,
                    )
                )
            elif verify is not None and not verify(role):
                out.append(
                    (
                        "its password is not the one the proxy sets (changed behind the "
                        "proxy's back)",
                        role,
                        f"{provision} (sets it again)",
                    )
                )
    for (role,) in conn.execute(
        "SELECT r.rolname FROM pg_catalog.pg_auth_members m"
        " JOIN pg_catalog.pg_roles r ON r.oid = m.member"
        f" WHERE m.roleid = %s::regrole AND {_OPEN} AND r.rolname <> ALL(%s) ORDER BY 1",
        (group, list(roles)),
    ).fetchall():
        out.append(
            (
                f"a role of {group} that is no [[users]] entry logs in by itself",
                role,
                f"ALTER ROLE {role} NOLOGIN ({provision} does it)",
            )
        )
    return out


def verify_login(keeper_dsn: str, role_dsn: str, role: str) -> bool:
    """Whether ``role`` accepts the proxy's password (``role_dsn`` carries it): its door is
    opened for the attempt (without setting the password, which is what is checked) under the
    same lock as the proxy's, and closed again. Run as the aggregator (``keeper_dsn``)."""
    with psycopg.connect(keeper_dsn, autocommit=True, connect_timeout=10) as keeper:
        keeper.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (DOORS_SPACE, role))
        try:
            row = keeper.execute(
                f"SELECT (clock_timestamp() + interval '{OPEN_FOR}')::text"
            ).fetchone()
            assert row is not None
            keeper.execute(
                sql.SQL("ALTER ROLE {} VALID UNTIL {}").format(
                    sql.Identifier(role), sql.Literal(row[0])
                )
            )
            try:
                with psycopg.connect(role_dsn, connect_timeout=10):
                    return True
            except psycopg.OperationalError:
                return False
            finally:
                keeper.execute(close_role(role))
        finally:
            keeper.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (DOORS_SPACE, role))
