"""Provision a backend for LAPRAS, and check that every route to an exact statistic is closed.

ARCHITECTURE.md §4: exact statistics of protected tables are refused *by the database itself* to
the roles analysts act as, whatever SQL they run (including SQL built at run time); the proxy's
text guard (:mod:`rewriter.guard`) is only the first layer. :func:`provision` sets up:

- the **aggregator** role: reads the protected tables (one histogram scan per epoch) and owns
  the **state database** (``<database>_lapras`` by default), which holds schema ``lapras``: the
  ledger, releases, pinned histograms, the query log. No other role may connect to it, so its
  tables, row counts and sizes are out of analysts' sight, and so are the ledger's advisory
  locks (a lock taken by an analyst there could stall every answer).
- the **passthrough** group role: what analysts may do upstream. ``CONNECT``, ``USAGE`` on
  ``public``, ``SELECT`` on unprotected relations that do not read a protected table, only
  ``REFERENCES`` on protected tables (their columns stay visible in ``information_schema``);
  no ``CREATE`` anywhere, no temporary objects.
- one **analyst role** per ``[[users]]`` entry (``lapras_user_<name>``), a member of the group:
  each analyst's upstream session runs as its own role, so ``pg_stat_activity`` shows nobody
  else's statements and ``pg_terminate_backend`` / ``pg_cancel_backend`` cannot reach another
  analyst's session (PostgreSQL allows them only on sessions of roles whose privileges one has).
  Its password is derived from the passthrough role's (:func:`analyst_password`), so the proxy
  needs no further secret.
- the **catalogue lockdown** (:func:`lock_down`), in the data database: ``SELECT`` on the
  statistics columns of ``pg_class`` (``relpages``, ``reltuples``, ``relallvisible``), and
  ``EXECUTE`` on every statistics, size, lock and WAL-position function
  (:func:`rewriter.guard.restricted_function`), are taken from ``PUBLIC`` and given to
  ``pg_read_all_stats`` (monitoring keeps working); ``USAGE`` on every trusted procedural
  language (``DO`` blocks) is taken from ``PUBLIC``. Whole-row references, ``row_to_json``,
  ``query_to_xml`` and ``DO`` then all meet PostgreSQL's own 42501.

:func:`check` lists every route that is still open (as data: what, for whom, the SQL that closes
it); ``lapras provision --check`` prints it and ``lapras serve`` refuses to start while one is
open (``[backend] lockdown = "require"``, the default). Both need only the aggregator role.

Managed services (RDS, Cloud SQL, Azure, Supabase, Neon) do not let their administrator change the
privileges of ``pg_catalog``: there :func:`lock_down` reports the catalogue items it could not
change and the operator decides (docs/admin.md, "Managed PostgreSQL").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from proxy import doors, lineage
from rewriter.guard import STAT_COLUMNS, SYSTEM_COLUMNS, restricted_function

AGGREGATOR = "lapras_aggregator"
PASSTHROUGH = "lapras_passthrough"
ANALYST_PREFIX = "lapras_user_"
STATE_SUFFIX = "_lapras"

#: Predefined roles that would give an analyst statistics, other roles' sessions or files.
FORBIDDEN_MEMBERSHIPS = (
    "pg_read_all_stats",
    "pg_monitor",
    "pg_read_all_data",
    "pg_stat_scan_tables",
    "pg_signal_backend",
    "pg_read_server_files",
    "pg_execute_server_program",
)


def analyst_role(user: str) -> str:
    """The backend role a proxy user acts as (PostgreSQL names are at most 63 bytes)."""
    return ANALYST_PREFIX + user


def analyst_password(secret: str, role: str) -> str:
    """The password of an analyst role: HMAC-SHA256 of its name under the passthrough
    role's password, so that the proxy (which has that password) can log in as every analyst
    and nobody without it can."""
    mac = hmac.new(secret.encode(), b"lapras analyst role\x00" + role.encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def state_database(database: str) -> str:
    """The default name of the state database of data database ``database``."""
    return database + STATE_SUFFIX


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What to provision: the data database and its protected tables, the roles' passwords,
    the analysts (proxy user name -> backend role), the state database."""

    database: str
    protected: tuple[str, ...]  # "schema.table"
    aggregator_password: str = field(repr=False)
    passthrough_password: str = field(repr=False)
    analysts: tuple[tuple[str, str], ...] = ()
    state_database: str | None = None  # default: state_database(database)
    # the analysts are all the [[users]] (a configuration): other roles of the group are
    # retired (NOLOGIN), as users removed from it
    retire_others: bool = False

    @property
    def state(self) -> str:
        return self.state_database or state_database(self.database)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One route still open: what it is, for which role, and the SQL that closes it."""

    route: str
    role: str
    fix: str

    def __str__(self) -> str:
        return f"{self.route} ({self.role}); fix: {self.fix}"


# -- roles and databases --------------------------------------------------------------------------


def ensure_database(admin_conn: Any, database: str, *, owner: str | None = None) -> None:
    """Create ``database`` if it does not exist (admin_conn must be in autocommit mode)."""
    row = admin_conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
    if row is None:
        stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database))
        if owner is not None:
            stmt = sql.SQL("{} OWNER {}").format(stmt, sql.Identifier(owner))
        admin_conn.execute(stmt)


def ensure_role(conn: Any, role: str, password: str) -> None:
    """Create a LOGIN role, or reset its password when it exists; never with more than LOGIN."""
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    verb = "ALTER" if exists else "CREATE"
    conn.execute(
        sql.SQL(
            verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
            " PASSWORD {}"
        ).format(sql.Identifier(role), sql.Literal(password))
    )


def _secure_state(admin_conn: Any, state: str) -> None:
    """The state database: owned by the aggregator, no CONNECT for anybody else."""
    ensure_database(admin_conn, state, owner=AGGREGATOR)
    db = sql.Identifier(state)
    admin_conn.execute(
        sql.SQL("ALTER DATABASE {} OWNER TO {}").format(db, sql.Identifier(AGGREGATOR))
    )
    admin_conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db))


def _grant_membership(conn: Any, analyst: str) -> None:
    member = sql.SQL("GRANT {} TO {}").format(sql.Identifier(PASSTHROUGH), sql.Identifier(analyst))
    if conn.info.server_version >= 160000:
        # INHERIT the privileges, but no SET ROLE to the group (PostgreSQL 16 grant options).
        member = sql.SQL("{} WITH INHERIT TRUE, SET FALSE").format(member)
    conn.execute(member)


# -- privileges in the data database --------------------------------------------------------------


def grant_privileges(conn: Any, database: str, protected: Iterable[str]) -> None:
    """Aggregator: SELECT on protected tables, CREATE on the database.

    Passthrough (the analysts' group role): CONNECT, USAGE on ``public``, SELECT on every
    relation of ``public`` that is neither protected nor reads a protected table (a view or
    materialised view over one would hand its rows out); on protected tables only REFERENCES,
    which makes their columns visible in ``information_schema`` (BI tools list columns from
    there) and reads no row. REFERENCES could only be exercised by creating a table with a
    foreign key, so TEMPORARY is revoked from PUBLIC and the passthrough role has no CREATE.
    What reads or holds rows of a protected table is found in the catalogue
    (:mod:`proxy.lineage`: views and materialised views, also through functions; partitions
    and child tables; tables that a protected table's rules or triggers write to; look-alike
    copies) and gets no SELECT either.
    """
    names = [_qualified(t) for t in protected]
    db = sql.Identifier(database)
    for role in (AGGREGATOR, PASSTHROUGH):
        r = sql.Identifier(role)
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, r))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(r))
    conn.execute(
        sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(db, sql.Identifier(AGGREGATOR))
    )
    conn.execute(sql.SQL("REVOKE TEMPORARY, CREATE ON DATABASE {} FROM PUBLIC").format(db))
    conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
    protected_oids = {
        r[0] for r in conn.execute("SELECT unnest(%s::regclass[])::oid", (names,)).fetchall()
    }
    tainted = set(lineage.load(conn).derived(protected_oids))
    rows = conn.execute(
        "SELECT c.oid, c.relname FROM pg_catalog.pg_class c"
        " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v', 'm', 'p', 'f')"
    ).fetchall()
    passthrough = sql.Identifier(PASSTHROUGH)
    for oid, name in rows:
        t = sql.Identifier("public", name)
        if oid in protected_oids:
            conn.execute(sql.SQL("REVOKE ALL ON {} FROM PUBLIC, {}").format(t, passthrough))
            conn.execute(sql.SQL("GRANT REFERENCES ON {} TO {}").format(t, passthrough))
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(t, sql.Identifier(AGGREGATOR)))
        elif oid in tainted:
            conn.execute(sql.SQL("REVOKE ALL ON {} FROM PUBLIC, {}").format(t, passthrough))
        else:
            conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(t, passthrough))


#: ``lapras_interval_low(agg)`` / ``lapras_interval_high(agg)`` (docs/sql.md §2.11) are answered
#: by the proxy; the backend has these declarations of them so that it can Parse and Describe
#: a statement that uses them (a prepared statement's types come from the backend): the
#: result is of the argument's type (``anyelement``). Run anywhere else, they raise 0A000.
_INTERVAL_FUNCTION = """
CREATE OR REPLACE FUNCTION public.{name}(anyelement) RETURNS anyelement
LANGUAGE plpgsql VOLATILE AS $lapras$
BEGIN
    RAISE EXCEPTION '{name}() is answered by the LAPRAS proxy, around an aggregate of a protected table'
        USING ERRCODE = '0A000',
              HINT = 'write it around an aggregate of a DP statement, e.g. SELECT count(*), {name}(count(*)) FROM <protected table>';
END
$lapras$;
COMMENT ON FUNCTION public.{name}(anyelement) IS
    'LAPRAS: the {end} end of the 95% interval of a DP aggregate (answered by the proxy)';
"""


def interval_functions(conn: Any) -> None:
    """Declare ``lapras_interval_low``/``_high`` in schema ``public`` of the data database
    (idempotent): :data:`_INTERVAL_FUNCTION`."""
    for name, end in (("lapras_interval_low", "low"), ("lapras_interval_high", "high")):
        conn.execute(_INTERVAL_FUNCTION.format(name=name, end=end))


def _scalar(conn: Any, query: Any, params: Any = ()) -> Any:
    """The first column of the first row of ``query``."""
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _qualified(table: str) -> str:
    return table if "." in table else f"public.{table}"


def _quoted(qualified: str) -> str:
    """``schema.name`` as SQL (each part quoted)."""
    schema, _, name = qualified.partition(".")
    return ".".join('"' + p.replace('"', '""') + '"' for p in (schema, name))


def _restricted_functions(conn: Any, *, public_only: bool) -> list[tuple[str, int]]:
    """``(signature, oid)`` of the restricted functions present (any schema: contrib modules
    such as pgstattuple or pg_stat_statements live outside pg_catalog)."""
    rows = conn.execute(
        "SELECT p.oid::regprocedure::text, p.oid, p.proname,"
        " p.proacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(p.proacl) a"
        "   WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')"
        " FROM pg_catalog.pg_proc p"
    ).fetchall()
    return [
        (sig, oid)
        for sig, oid, name, public in rows
        if restricted_function(name) and (public or not public_only)
    ]


_TRUSTED_LANGUAGES = (
    "SELECT lanname FROM pg_catalog.pg_language WHERE lanpltrusted AND lanname <> 'sql'"
)


def lock_down(conn: Any) -> list[str]:
    """Take every exact statistic away from PUBLIC in the connected database (idempotent).

    Needs the owner of the catalogue (a superuser on a self-managed PostgreSQL); a managed
    service's administrator gets a WARNING from PostgreSQL and nothing changes. Returns what
    PUBLIC still holds afterwards (empty when the lockdown is complete). What is taken from
    PUBLIC is given to ``pg_read_all_stats`` (and pg_stat_statements to the aggregator, for
    ``lapras predict``), so monitoring roles keep their view.
    """

    def run(stmt: sql.Composable) -> None:
        try:
            with conn.transaction():
                conn.execute(stmt)
        except psycopg.errors.InsufficientPrivilege:
            pass  # reported below, by what PUBLIC still holds

    pg_class = sql.SQL("pg_catalog.pg_class")
    if _public_columns(conn):
        cols = conn.execute(
            "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = %s::regclass"
            " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            ("pg_catalog.pg_class",),
        ).fetchall()
        others = sql.SQL(", ").join(sql.Identifier(c[0]) for c in cols if c[0] not in STAT_COLUMNS)
        run(
            sql.SQL(
                "REVOKE SELECT ON {t} FROM PUBLIC; GRANT SELECT ({cols}) ON {t} TO PUBLIC;"
                " GRANT SELECT ON {t} TO pg_read_all_stats"
            ).format(t=pg_class, cols=others)
        )
    # The system columns (tableoid, ctid, xmin ...) are not in the column list above; tools
    # read them (DBD::Pg's table_info joins on c.tableoid), and they hold no statistic.
    run(
        sql.SQL("GRANT SELECT ({cols}) ON {t} TO PUBLIC").format(
            t=pg_class, cols=sql.SQL(", ").join(map(sql.Identifier, SYSTEM_COLUMNS))
        )
    )
    for signature, _oid in _restricted_functions(conn, public_only=True):
        grantees: sql.Composable = sql.SQL("pg_read_all_stats")
        if signature.split("(")[0].split(".")[-1].startswith("pg_stat_statements"):
            grantees = sql.SQL("pg_read_all_stats, {}").format(sql.Identifier(AGGREGATOR))
        run(
            sql.SQL(
                "REVOKE EXECUTE ON FUNCTION {f} FROM PUBLIC; GRANT EXECUTE ON FUNCTION {f} TO {g}"
            ).format(f=sql.SQL(signature), g=grantees)
        )
    for (lang,) in conn.execute(_TRUSTED_LANGUAGES).fetchall():
        run(sql.SQL("REVOKE USAGE ON LANGUAGE {} FROM PUBLIC").format(sql.Identifier(lang)))
    return public_routes(conn)


def _public_columns(conn: Any) -> list[str]:
    return [
        col
        for col in sorted(STAT_COLUMNS)
        if _scalar(
            conn,
            "SELECT has_column_privilege('public', 'pg_catalog.pg_class', %s, 'SELECT')",
            (col,),
        )
    ]


def public_routes(conn: Any) -> list[str]:
    """The statistics routes PUBLIC (every role) still has in the connected database."""
    out = [f"SELECT on pg_class.{col}" for col in _public_columns(conn)]
    out += [f"EXECUTE on {sig}" for sig, _ in _restricted_functions(conn, public_only=True)]
    out += [
        f"USAGE on language {lang}"
        for (lang,) in conn.execute(
            _TRUSTED_LANGUAGES + " AND has_language_privilege('public', oid, 'USAGE')"
        ).fetchall()
    ]
    return out


# -- the whole provisioning -----------------------------------------------------------------------


def provision(
    admin_dsn: str,
    plan: Plan,
    *,
    load: Sequence[str] = (),
    report: Callable[[str], None] | None = None,
) -> list[str]:
    """Create and grant everything ``plan`` describes (idempotent); move an old in-database
    ledger into the state database. Returns the lockdown items that could not be applied;
    ``report`` is told of analyst roles retired (``plan.retire_others``)."""
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        ensure_database(admin, plan.database)
        ensure_role(admin, AGGREGATOR, plan.aggregator_password)
        doors.provision_keeper(admin, AGGREGATOR)
        ensure_role(admin, PASSTHROUGH, plan.passthrough_password)
        for _user, role in plan.analysts:
            password = analyst_password(plan.passthrough_password, role)
            doors.provision_analyst(admin, role, password, AGGREGATOR)  # its door closed
            _grant_membership(admin, role)
        if plan.retire_others:
            for role in doors.retire(admin, PASSTHROUGH, [r for _, r in plan.analysts]):
                if report is not None:
                    report(f"role {role} (no [[users]] entry): it cannot log in any more")
        _secure_state(admin, plan.state)
    with psycopg.connect(make_conninfo(admin_dsn, dbname=plan.database), autocommit=True) as conn:
        for name in load:
            import sql_fixtures

            with psycopg.connect(make_conninfo(admin_dsn, dbname=plan.database)) as loader:
                sql_fixtures.dataset(name).load(loader)
        with conn.transaction():
            grant_privileges(conn, plan.database, plan.protected)
            interval_functions(conn)
        failed = lock_down(conn)
    _move_state(admin_dsn, plan)
    return failed


#: Tables of schema ``lapras`` in dependency order (what :func:`_move_state` copies).
_STATE_TABLES = ("epochs", "ledger", "histograms", "query_log", "predictions", "admin_log")


def _move_state(admin_dsn: str, plan: Plan) -> None:
    """Before version 0.2 the ledger lived in schema ``lapras`` of the data database, where the
    passthrough role could see its tables. Copy it into the state database (only when that one
    has no epoch yet) and drop it from the data database, so that moving it never resets a
    budget."""
    from proxy.ledger import migrate_sync

    with psycopg.connect(make_conninfo(admin_dsn, dbname=plan.database)) as old:
        if _scalar(old, "SELECT to_regclass('lapras.epochs')") is None:
            return
        migrate_sync(old)  # both at the latest version: the rows fit the same tables
        owner = make_conninfo(
            admin_dsn, dbname=plan.state, user=AGGREGATOR, password=plan.aggregator_password
        )
        with psycopg.connect(owner) as new:
            migrate_sync(new)
            if _scalar(new, "SELECT count(*) FROM lapras.epochs"):
                raise RuntimeError(
                    f"both {plan.database} and {plan.state} hold a LAPRAS ledger: keep one "
                    f"(drop schema lapras of {plan.database} once it is not needed)"
                )
            with new.transaction():
                for table in _STATE_TABLES:
                    with (
                        old.cursor().copy(f"COPY lapras.{table} TO STDOUT") as src,
                        new.cursor().copy(f"COPY lapras.{table} FROM STDIN") as dst,
                    ):
                        for chunk in src:
                            dst.write(chunk)
                for table in ("epochs", "query_log", "predictions", "admin_log"):
                    new.execute(
                        f"SELECT setval(pg_get_serial_sequence('lapras.{table}', 'id'),"
                        f" coalesce((SELECT max(id) FROM lapras.{table}), 0) + 1, false)"
                    )
        old.execute("DROP SCHEMA lapras CASCADE")
        old.commit()


# -- the check ------------------------------------------------------------------------------------


def check(
    data_conn: Any,
    *,
    protected: Sequence[str],
    roles: Sequence[str],
    data_database: str,
    state_database: str | None,
    verify: Callable[[str], bool] | None = None,
) -> list[Finding]:
    """Every route still open, for each role analysts act as (``roles``), checked with
    PostgreSQL's own privilege functions on ``data_conn`` (any role may ask them); with
    ``verify``, also each role's password (:func:`proxy.doors.findings`)."""
    findings: list[Finding] = []
    names = [_qualified(t) for t in protected]
    found = {
        r[0]
        for r in data_conn.execute(
            "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY(%s)", (list(roles),)
        ).fetchall()
    }
    functions = _restricted_functions(data_conn, public_only=False)
    known = lineage.load(data_conn)
    protected_oids = [r.oid for t in names if (r := known.find(t)) is not None]
    tainted = [
        (known.relations[oid].qualified, why)
        for oid, why in sorted(known.derived(protected_oids).items())
    ]
    if state_database is None or state_database == data_database:
        findings.append(
            Finding(
                route="the proxy's ledger and query log live in the analysts' database",
                role="all",
                fix="set [backend] state_dsn to a database of its own and run lapras provision"
                " (it moves schema lapras there)",
            )
        )
    for role in roles:
        if role not in found:
            findings.append(
                Finding(route="the analyst role does not exist", role=role,
                        fix="run lapras provision --config (it creates one role per [[users]])")
            )  # fmt: skip
            continue
        findings.extend(_role_findings(data_conn, role, names, tainted, functions, state_database))
    findings += [
        Finding(route=route, role=role, fix=fix)
        for route, role, fix in doors.findings(
            data_conn,
            roles=[r for r in roles if r in found],
            group=PASSTHROUGH,
            aggregator=AGGREGATOR,
            verify=verify,
        )
    ]
    return findings


def _role_findings(
    conn: Any,
    role: str,
    protected: Sequence[str],
    tainted: Sequence[tuple[str, str]],
    functions: Sequence[tuple[str, int]],
    state_database: str | None,
) -> list[Finding]:
    out: list[Finding] = []
    r = sql.Literal(role)

    def ask(query: str, params: Sequence[Any] = ()) -> Any:
        return _scalar(conn, sql.SQL(query).format(r=r), params)

    def rows(query: str, params: Sequence[Any] = ()) -> list[Any]:
        return [row[0] for row in conn.execute(sql.SQL(query).format(r=r), params).fetchall()]

    def found(route: str, fix: str) -> None:
        out.append(Finding(route=route, role=role, fix=fix))

    if ask(
        "SELECT rolsuper OR rolbypassrls OR rolcreaterole OR rolcreatedb"
        " FROM pg_catalog.pg_roles WHERE rolname = {r}"
    ):
        found(
            "superuser, BYPASSRLS, CREATEROLE or CREATEDB",
            f"ALTER ROLE {role} NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB",
        )
    members = [
        m for m in FORBIDDEN_MEMBERSHIPS if ask("SELECT pg_has_role({r}, %s, 'USAGE')", (m,))
    ]
    for member in members:
        found(
            f"member of {member}",
            f"REVOKE {member} FROM {role} (or from the role it inherits it through)",
        )
    for table in protected:
        for priv in ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER"):
            fn = (
                "has_any_column_privilege"
                if priv in ("SELECT", "INSERT", "UPDATE")
                else "has_table_privilege"
            )
            if ask(f"SELECT {fn}({{r}}, %s, %s)", (table, priv)):
                found(
                    f"{priv} on protected table {table}",
                    f"REVOKE {priv} ON {table} FROM {role}, PUBLIC",
                )
    for rel, why in tainted:
        if ask("SELECT has_any_column_privilege({r}, %s::regclass, 'SELECT')", (_quoted(rel),)):
            found(
                f"SELECT on {rel}, which {why}",
                f"REVOKE SELECT ON {_quoted(rel)} FROM {role}, PUBLIC (or protect it)",
            )
    if not members:  # with a statistics membership these follow from it: one fix for all
        for col in sorted(STAT_COLUMNS):
            if ask("SELECT has_column_privilege({r}, 'pg_catalog.pg_class', %s, 'SELECT')", (col,)):
                found(
                    f"SELECT on pg_class.{col}",
                    "lapras provision (a column-level REVOKE on pg_catalog.pg_class)",
                )
        executable = [
            sig
            for sig, oid in functions
            if ask("SELECT has_function_privilege({r}, %s::oid, 'EXECUTE')", (oid,))
        ]
        if executable:
            more = f" and {len(executable) - 3} more" if len(executable) > 3 else ""
            found(
                f"EXECUTE on statistics functions ({', '.join(executable[:3])}{more})",
                "lapras provision (REVOKE EXECUTE ... FROM PUBLIC)",
            )
    for lang in rows(_TRUSTED_LANGUAGES + " AND has_language_privilege({r}, oid, 'USAGE')"):
        found(
            f"USAGE on language {lang} (DO blocks)",
            f"REVOKE USAGE ON LANGUAGE {lang} FROM PUBLIC, {role}",
        )
    for schema in rows(
        "SELECT nspname FROM pg_catalog.pg_namespace WHERE has_schema_privilege({r}, oid, 'CREATE')"
    ):
        found(
            f"CREATE on schema {schema} (functions, views)",
            f"REVOKE CREATE ON SCHEMA {schema} FROM PUBLIC, {role}",
        )
    if ask("SELECT has_database_privilege({r}, current_database(), 'TEMPORARY')"):
        found(
            "TEMPORARY on the database (temporary functions)",
            "REVOKE TEMPORARY ON DATABASE <db> FROM PUBLIC",
        )
    if state_database is not None and ask(
        "SELECT has_database_privilege({r}, %s, 'CONNECT')", (state_database,)
    ):
        found(
            f"CONNECT on the state database {state_database}",
            f"REVOKE ALL ON DATABASE {state_database} FROM PUBLIC",
        )
    # A SECURITY DEFINER function runs as its owner: one whose owner may read a protected
    # table or all statistics hands that to whoever may call it.
    for fn in rows(
        "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p"
        " JOIN pg_catalog.pg_roles o ON o.oid = p.proowner"
        " WHERE p.prosecdef AND has_function_privilege({r}, p.oid, 'EXECUTE')"
        " AND (o.rolsuper OR pg_has_role(o.oid, 'pg_read_all_stats', 'USAGE')"
        "   OR EXISTS (SELECT 1 FROM unnest(%s::regclass[]) t"
        "              WHERE has_any_column_privilege(o.oid, t, 'SELECT')))",
        (list(protected),),
    ):
        found(
            f"SECURITY DEFINER function {fn} runs as a role that reads protected data",
            f"REVOKE EXECUTE ON FUNCTION {fn} FROM PUBLIC, {role}",
        )
    return out


def data_database(dsn: str) -> str:
    """The database a libpq DSN names."""
    d = conninfo_to_dict(dsn)
    return str(d.get("dbname") or d.get("user") or "postgres")
