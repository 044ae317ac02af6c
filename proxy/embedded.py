"""An embedded PostgreSQL for the demo and the tests.

It runs the real PostgreSQL server shipped in the ``pgserver`` wheel, so a fresh machine with
only Python can run everything: nothing is installed system-wide. The server listens on
127.0.0.1 only (no Unix socket), with SCRAM-SHA-256 password authentication for every role;
the generated passwords are kept in ``<data_dir>/lapras-credentials.json`` (mode 0600).

PostgreSQL refuses to run as root. When this process is root, the server runs as the system
user ``pgserver`` (created if missing, as the pgserver package itself does).

>>> # with EmbeddedPostgres(Path("/tmp/pg")) as pg:   # doctest: +SKIP
>>> #     print(pg.dsn("postgres"))
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import sql_fixtures
from proxy import provision

SUPERUSER = "postgres"
_SYSTEM_USER = "pgserver"
_CREDENTIALS = "lapras-credentials.json"


def _bin_dir() -> Path:
    # Locate the wheel without importing it (its import has side effects we do not need).
    spec = importlib.util.find_spec("pgserver")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the embedded PostgreSQL needs the 'pgserver' package: pip install pgserver"
        )
    return Path(spec.origin).parent / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> dict[str, Any]:
    """Keyword arguments for subprocess.run that drop root to the pgserver system user."""
    if os.geteuid() != 0:
        return {}
    import pwd

    try:
        pwd.getpwnam(_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/sh", _SYSTEM_USER], check=True, capture_output=True)
    return {"user": _SYSTEM_USER, "group": pwd.getpwnam(_SYSTEM_USER).pw_gid}


def _open_for_traversal(path: Path) -> None:
    """Let the server's system user reach ``path``: g+x,o+x on every parent folder."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        parent.chmod(mode | stat.S_IXGRP | stat.S_IXOTH)


def _open_installation() -> None:
    """Let the system user read and run the wheel's PostgreSQL (it may live under /root)."""
    install = _bin_dir().parent
    _open_for_traversal(install)
    readable = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    for folder, _dirs, files in os.walk(install):
        os.chmod(folder, os.stat(folder).st_mode | readable)
        for name in files:
            f = os.path.join(folder, name)
            if not os.path.islink(f):
                os.chmod(f, os.stat(f).st_mode | stat.S_IRGRP | stat.S_IROTH)
    for exe in _bin_dir().iterdir():
        exe.chmod(exe.stat().st_mode | stat.S_IXGRP | stat.S_IXOTH)


class EmbeddedPostgres:
    """A PostgreSQL server in ``data_dir``: initialised on first start, reused afterwards."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        bin_dir: Path | None = None,
        settings: dict[str, str] | None = None,
        socket_dir: Path | None = None,
    ) -> None:
        """``bin_dir``: another PostgreSQL installation's binaries (default: the pgserver
        wheel's); ``settings``: extra postgresql.conf lines written at initialisation;
        ``socket_dir``: also listen on a Unix-domain socket there (default: TCP only)."""
        self._bin = bin_dir
        self.socket_dir = None if socket_dir is None else Path(socket_dir).resolve()
        self._settings = dict(settings or {})
        self.data_dir = Path(data_dir).resolve()
        self.pgdata = self.data_dir / "pgdata"
        self.host = "127.0.0.1"
        self._requested_port = port
        self.port = 0
        self._passwords: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> EmbeddedPostgres:
        """Initialise (first time) and start the server; reuse it if it is already running."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.pgdata / "PG_VERSION").exists():
            self._initdb()
        self._passwords = json.loads((self.data_dir / _CREDENTIALS).read_text())
        running = self._running_port()
        if running is not None:
            self.port = running
            return self
        self.port = self._requested_port or _free_port()
        log = self.data_dir / "postgres.log"
        if not log.exists():
            log.touch()
        if os.geteuid() == 0:
            shutil.chown(log, _SYSTEM_USER)
        sockets = "''"
        if self.socket_dir is not None:
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                _open_for_traversal(self.socket_dir)
                shutil.chown(self.socket_dir, _SYSTEM_USER, _SYSTEM_USER)
            sockets = str(self.socket_dir)
        self._ctl(
            "-w",
            "-t",
            "60",
            "-l",
            str(log),
            "-o",
            f"-h {self.host} -p {self.port} -k {sockets}",
            "start",
        )
        return self

    def configure(
        self,
        *,
        settings: dict[str, str] | None = None,
        hba: str | None = None,
        files: dict[str, bytes] | None = None,
    ) -> None:
        """Change a stopped, initialised server: ``files`` written into its data directory
        (readable by the server alone, e.g. a TLS certificate and key), ``settings`` appended
        to postgresql.conf, and ``hba`` replacing pg_hba.conf. Takes effect at the next start."""
        if self._running_port() is not None:
            raise RuntimeError("stop the server before changing its configuration")
        for name, data in (files or {}).items():
            path = self.pgdata / name
            path.write_bytes(data)
            path.chmod(0o600)
            if os.geteuid() == 0:
                shutil.chown(path, _SYSTEM_USER, _SYSTEM_USER)
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            for key, value in (settings or {}).items():
                conf.write(f"{key} = {value}\n")
        if hba is not None:
            (self.pgdata / "pg_hba.conf").write_text(hba)

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are disconnected)."""
        if self._running_port() is not None:
            self._ctl("-w", "-t", "60", "-m", "fast", "stop")

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- connection strings ------------------------------------------------------------------

    def password(self, role: str) -> str:
        return self._passwords[role]

    def set_password(self, role: str, password: str) -> None:
        """Remember a role's password (the caller has set it in PostgreSQL)."""
        self._passwords[role] = password
        path = self.data_dir / _CREDENTIALS
        path.write_text(json.dumps(self._passwords))
        path.chmod(0o600)

    def dsn(self, role: str = SUPERUSER, database: str = "postgres") -> str:
        """A libpq URI for ``role`` (its password must be known: see :meth:`set_password`)."""
        pw = quote(self._passwords[role], safe="")
        return f"postgresql://{quote(role, safe='')}:{pw}@{self.host}:{self.port}/{database}"

    # -- internals ---------------------------------------------------------------------------

    def _initdb(self) -> None:
        if self.pgdata.exists():
            shutil.rmtree(self.pgdata)
        self.pgdata.mkdir(mode=0o700)
        password = secrets.token_urlsafe(24)
        pwfile = self.data_dir / ".initdb-pw"
        pwfile.write_text(password + "\n")
        pwfile.chmod(0o644)
        if os.geteuid() == 0:
            _run_as()  # make sure the system user exists before chown
            if self._bin is None:
                _open_installation()
            _open_for_traversal(self.pgdata)
            self.data_dir.chmod(self.data_dir.stat().st_mode | stat.S_IXOTH | stat.S_IXGRP)
            shutil.chown(self.pgdata, _SYSTEM_USER, _SYSTEM_USER)
        try:
            self._tool(
                "initdb",
                "-D",
                str(self.pgdata),
                "-U",
                SUPERUSER,
                "--pwfile",
                str(pwfile),
                "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            )
        finally:
            pwfile.unlink()
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# LAPRAS embedded server\n"
                "listen_addresses = '127.0.0.1'\n"
                "max_connections = 200\n"
                "fsync = on\n"
                "log_min_messages = warning\n"
            )
            for key, value in self._settings.items():
                conf.write(f"{key} = {value}\n")
        self.set_password(SUPERUSER, password)

    def _running_port(self) -> int | None:
        pidfile = self.pgdata / "postmaster.pid"
        try:
            lines = pidfile.read_text().splitlines()
        except FileNotFoundError:
            return None
        try:
            pid, port = int(lines[0]), int(lines[3])
            os.kill(pid, 0)
        except (IndexError, ValueError, ProcessLookupError, PermissionError):
            return None
        return port

    def _ctl(self, *args: str) -> None:
        self._tool("pg_ctl", "-D", str(self.pgdata), *args)

    def _tool(self, name: str, *args: str) -> None:
        result = subprocess.run(
            [str((self._bin or _bin_dir()) / name), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
            **_run_as(),
        )
        if result.returncode != 0:
            raise RuntimeError(f"{name} failed (exit {result.returncode}):\n{result.stdout}")


def wait_until_ready(dsn: str, timeout: float = 30.0) -> None:
    """Block until a connection to ``dsn`` succeeds (the server may still be recovering)."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=5).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def provision_adult(
    pg: EmbeddedPostgres,
    database: str,
    users: tuple[str, ...] = (),
    datasets: tuple[str, ...] = ("adult", "gowalla"),
) -> provision.Plan:
    """Create ``database`` on ``pg``, load the shipped ``datasets`` into it (Adult and the
    Gowalla check-ins), and provision it for LAPRAS, their tables protected: the aggregator
    and passthrough roles, one backend role per proxy user in ``users``, the state database
    ``<database>_lapras`` and the catalogue lockdown (:func:`proxy.provision.provision`).

    Idempotent: a second call reuses the loaded table and the roles' passwords.
    """
    passwords = {}
    for role in (provision.AGGREGATOR, provision.PASSTHROUGH):
        try:
            passwords[role] = pg.password(role)
        except KeyError:
            passwords[role] = secrets.token_urlsafe(24)
            pg.set_password(role, passwords[role])
    plan = provision.Plan(
        database=database,
        protected=tuple(sql_fixtures.dataset(d).TABLE for d in datasets),
        aggregator_password=passwords[provision.AGGREGATOR],
        passthrough_password=passwords[provision.PASSTHROUGH],
        analysts=tuple((u, provision.analyst_role(u)) for u in users),
    )
    left = provision.provision(pg.dsn(database="postgres"), plan, load=datasets)
    if left:  # the embedded server's superuser owns the catalogue: this cannot happen
        raise RuntimeError(f"the catalogue lockdown is incomplete: {', '.join(left)}")
    return plan
