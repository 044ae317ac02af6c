"""Provision a backend database for LAPRAS: its two roles and their privileges.

ARCHITECTURE.md §3: the *aggregator* role reads protected tables (to build histograms) and owns
the ``lapras`` schema; the *passthrough* role, which relays analysts' catalogue and session
statements, reads the catalogue and unprotected tables but has **no SELECT on any protected
table**, so PostgreSQL itself refuses anything that reaches protected rows if the classifier
ever errs (defence in depth).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg import sql

AGGREGATOR = "lapras_aggregator"
PASSTHROUGH = "lapras_passthrough"


def ensure_database(admin_conn: Any, database: str) -> None:
    """Create ``database`` if it does not exist (admin_conn must be in autocommit mode)."""
    row = admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
    if row is None:
        admin_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))


def ensure_role(conn: Any, role: str, password: str) -> None:
    """Create a LOGIN role, or reset its password when it exists."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    verb = "ALTER" if exists else "CREATE"
    conn.execute(
        sql.SQL(verb + " ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(password)
        )
    )


def grant_privileges(conn: Any, database: str, protected: Iterable[str]) -> None:
    """Aggregator: SELECT on protected tables, CREATE on the database (for schema ``lapras``).

    Passthrough: CONNECT, USAGE on ``public``, SELECT on every table of ``public`` that is not
    protected; on protected tables only REFERENCES, which makes their columns visible in
    ``information_schema`` (BI tools list columns from there) and reads no row. REFERENCES could
    only be exercised by creating a table with a foreign key, so the database's TEMPORARY
    privilege is revoked from PUBLIC and the passthrough role has no CREATE anywhere.
    """
    protected_names = {name.split(".")[-1] for name in protected}
    db = sql.Identifier(database)
    for role in (AGGREGATOR, PASSTHROUGH):
        r = sql.Identifier(role)
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, r))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(r))
    conn.execute(
        sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(db, sql.Identifier(AGGREGATOR))
    )
    conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(db))
    conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
    tables = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
    ).fetchall()
    for (name,) in tables:
        t = sql.Identifier("public", name)
        if name in protected_names:
            passthrough = sql.Identifier(PASSTHROUGH)
            conn.execute(sql.SQL("REVOKE ALL ON {} FROM PUBLIC, {}").format(t, passthrough))
            conn.execute(sql.SQL("GRANT REFERENCES ON {} TO {}").format(t, passthrough))
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(t, sql.Identifier(AGGREGATOR)))
        else:
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(t, sql.Identifier(PASSTHROUGH)))
