"""Upstream connections as libpq makes them (issue 18, item 5): TLS by ``sslmode``, Unix sockets,
several hosts, ``target_session_attrs``.

A PostgreSQL of its own runs with ``ssl = on``, a certificate signed by a throw-away CA, and
``hostssl``-only rules for TCP in ``pg_hba.conf`` (so every TCP login that succeeds is
encrypted), plus a Unix-domain socket. The whole proxy serves through it with
``sslmode=verify-full`` on every backend connection (passthrough, aggregator, ledger), and over
the Unix socket; the raw upstream connection is checked mode by mode. The embedded wheel's
PostgreSQL is built without SSL, so this uses a Debian PostgreSQL (``/usr/lib/postgresql/*``,
the ``postgresql`` package; ``.ci/run`` installs it when it can) through
``EmbeddedPostgres(bin_dir=...)``; skipped where none or ``openssl`` is missing.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from epoch_helpers import Proxy, client, config_text, start_epoch

from proxy import provision
from proxy.config import parse_config
from proxy.embedded import EmbeddedPostgres, provision_adult
from proxy.errors import UpstreamUnavailable
from proxy.wire.messages import Query
from proxy.wire.upstream import (
    UpstreamConfig,
    UpstreamConnection,
    UpstreamStartupError,
    ssl_context,
)

DATABASE = "lapras_test"  # the name the test clients ask for (tests/epoch_helpers.py)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certificates(folder: Path) -> None:
    """A CA, a server certificate for localhost and 127.0.0.1 signed by it, and another CA."""
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-subj", f"/CN=lapras test {ca}", "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
                 cwd=folder)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
             "-keyout", "server.key", "-out", "server.csr", cwd=folder)  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt",
             cwd=folder)  # fmt: skip


@dataclass(frozen=True)
class TlsBackend:
    """The DSNs config_text reads, each with ``sslmode=verify-full`` against the test CA."""

    aggregator_dsn: str
    passthrough_dsn: str
    state_dsn: str
    state_admin_dsn: str
    socket_dir: Path
    port: int
    ca: Path
    other_ca: Path
    passthrough_password: str


def _ssl_postgres() -> Path | None:
    """The binaries of the newest PostgreSQL built with SSL (Debian's), or None."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: p.parts)
    return found[-1].parent if found else None


@pytest.fixture(scope="module")
def tls() -> Iterator[TlsBackend]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificates for the TLS backend")
    bin_dir = _ssl_postgres()
    if bin_dir is None:
        pytest.skip("no PostgreSQL built with SSL (apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="lapras-test-tls-"))
    certs = folder / "certs"
    certs.mkdir()
    _certificates(certs)
    server = EmbeddedPostgres(folder / "pg", bin_dir=bin_dir, socket_dir=folder / "sock")
    server.start()
    try:
        plan = provision_adult(server, DATABASE, ("analyst", "root"))
        server.stop()
        server.configure(
            settings={"ssl": "on", "ssl_cert_file": "'server.crt'", "ssl_key_file": "'server.key'"},
            hba="local all all scram-sha-256\nhostssl all all 127.0.0.1/32 scram-sha-256\n",
            files={n: (certs / n).read_bytes() for n in ("server.crt", "server.key")},
        )
        server.start()
        tls_opts = f"sslmode=verify-full&sslrootcert={quote(str(certs / 'ca.crt'))}"

        def dsn(role: str, password: str, db: str) -> str:
            user = f"{quote(role)}:{quote(password, safe='')}"
            return f"postgresql://{user}@localhost:{server.port}/{db}?{tls_opts}"

        agg = (provision.AGGREGATOR, plan.aggregator_password)
        state_db = provision.state_database(DATABASE)
        yield TlsBackend(
            aggregator_dsn=dsn(*agg, DATABASE),
            passthrough_dsn=dsn(provision.PASSTHROUGH, plan.passthrough_password, DATABASE),
            state_dsn=dsn(*agg, state_db),
            state_admin_dsn=dsn("postgres", server.password("postgres"), state_db),
            socket_dir=folder / "sock",
            port=server.port,
            ca=certs / "ca.crt",
            other_ca=certs / "other-ca.crt",
            passthrough_password=plan.passthrough_password,
        )
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def _ask(cfg: UpstreamConfig, sql: str) -> list[bytes]:
    """Log in, run one simple Query, return the raw DataRow frames."""
    conn = await UpstreamConnection.connect(cfg)
    try:
        conn.write(Query(sql=sql).encode())
        rows = []
        while True:
            tag, body = await conn.read_frame()
            if tag == b"D":
                rows.append(body)
            elif tag == b"Z":  # ReadyForQuery
                return rows
    finally:
        await conn.close()


def test_the_backend_accepts_tcp_logins_only_over_tls(tls: TlsBackend) -> None:
    with psycopg.connect(tls.passthrough_dsn) as conn:  # libpq, verify-full
        assert conn.info.pgconn.ssl_in_use
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        psycopg.connect(tls.passthrough_dsn.replace("sslmode=verify-full", "sslmode=disable"))


def test_the_upstream_connection_follows_sslmode(tls: TlsBackend) -> None:
    base = UpstreamConfig.from_dsn(tls.passthrough_dsn)
    assert base.sslmode == "verify-full" and base.host == "localhost"
    # verify-full, require and prefer encrypt, so the hostssl-only backend lets them in
    for mode in ("verify-full", "verify-ca", "require", "prefer", "allow"):
        assert asyncio.run(_ask(replace(base, sslmode=mode), "SELECT 1")), mode
    # by address: the certificate names 127.0.0.1 too
    by_ip = replace(base, host="127.0.0.1", hosts=(("127.0.0.1", tls.port),))
    assert asyncio.run(_ask(by_ip, "SELECT 1"))
    # in the clear the backend refuses the login, with its own error
    with pytest.raises(UpstreamStartupError, match="no encryption"):
        asyncio.run(_ask(replace(base, sslmode="disable"), "SELECT 1"))
    # a certificate the configured root does not sign is refused before any login
    with pytest.raises(UpstreamUnavailable) as err:
        asyncio.run(_ask(replace(base, sslrootcert=str(tls.other_ca)), "SELECT 1"))
    assert "SSLCertVerificationError" in str(err.value.detail)


def test_verify_full_checks_the_name_and_verify_ca_the_chain_only(tls: TlsBackend) -> None:
    base = UpstreamConfig.from_dsn(tls.passthrough_dsn)
    ctx, named = ssl_context(base)
    assert named and ctx.check_hostname
    ctx, named = ssl_context(replace(base, sslmode="verify-ca"))
    assert not named and not ctx.check_hostname
    # require with a configured root certificate verifies the chain, as libpq does
    ctx, _ = ssl_context(replace(base, sslmode="require"))
    assert ctx.verify_mode.name == "CERT_REQUIRED"
    ctx, _ = ssl_context(replace(base, sslmode="prefer"))
    assert ctx.verify_mode.name == "CERT_NONE"


def test_several_hosts_and_target_session_attrs(tls: TlsBackend) -> None:
    base = UpstreamConfig.from_dsn(tls.passthrough_dsn)
    # the first host refuses connections: the next one is used, as libpq does
    two = replace(base, hosts=(("localhost", 1), ("localhost", tls.port)))
    assert asyncio.run(_ask(two, "SELECT 1"))
    for attrs in ("any", "read-write", "primary", "prefer-standby"):
        assert asyncio.run(_ask(replace(two, target_session_attrs=attrs), "SELECT 1")), attrs
    for attrs in ("read-only", "standby"):  # the one server is a writable primary
        with pytest.raises(UpstreamUnavailable, match="target_session_attrs"):
            asyncio.run(_ask(replace(two, target_session_attrs=attrs), "SELECT 1"))


def test_the_upstream_reaches_a_unix_socket(tls: TlsBackend) -> None:
    base = UpstreamConfig.from_dsn(tls.passthrough_dsn)
    local = replace(base, host=str(tls.socket_dir), hosts=((str(tls.socket_dir), tls.port),))
    assert asyncio.run(_ask(local, "SELECT 1"))  # sslmode is ignored on a Unix socket


def test_the_whole_proxy_serves_through_a_verify_full_backend(tls: TlsBackend) -> None:
    with psycopg.connect(tls.state_admin_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS lapras CASCADE")
    cfg = parse_config(config_text(tls, stream_length=20), "tls.toml")
    start_epoch(cfg, ["SELECT sex, count(*) FROM adult GROUP BY sex"])
    with Proxy(cfg, seed=31) as proxy, client(proxy) as (conn, notices):
        assert conn.execute("SELECT 1").fetchone() == (1,)  # relayed over TLS
        assert conn.execute("SELECT count(*) FROM pg_catalog.pg_namespace").fetchone()
        rows = conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall()
        assert len(rows) == 2 and "Matrix Mechanism" in notices[-1]


def test_the_whole_proxy_serves_over_the_backends_unix_socket(tls: TlsBackend) -> None:
    head = tls.passthrough_dsn.split("?", 1)[0]
    over_socket = head.replace("@localhost:", "@:", 1) + f"?host={quote(str(tls.socket_dir))}"
    assert UpstreamConfig.from_dsn(over_socket).host == str(tls.socket_dir)
    cfg = parse_config(config_text(replace(tls, passthrough_dsn=over_socket)), "socket.toml")
    with Proxy(cfg, seed=32) as proxy, client(proxy) as (conn, _):
        assert conn.execute("SELECT 2").fetchone() == (2,)


def test_the_dsn_is_read_as_libpq_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """No server needed: hosts and ports lists, libpq's defaults and environment variables."""
    cfg = UpstreamConfig.from_dsn("host=a,/run/pg,b port=5433 user=u dbname=d")
    assert cfg.hosts == (("a", 5433), ("/run/pg", 5433), ("b", 5433))
    assert (cfg.host, cfg.port, cfg.sslmode, cfg.target_session_attrs) == (
        "a",
        5433,
        "prefer",
        "any",
    )
    cfg = UpstreamConfig.from_dsn("postgresql://u@x:1,y:2/d?target_session_attrs=read-write")
    assert cfg.hosts == (("x", 1), ("y", 2)) and cfg.target_session_attrs == "read-write"
    assert UpstreamConfig.from_dsn("postgresql://u@x,y:7/d").hosts == (("x", 5432), ("y", 7))
    monkeypatch.setenv("PGSSLMODE", "verify-ca")
    monkeypatch.setenv("PGSSLROOTCERT", "/etc/ca.crt")
    cfg = UpstreamConfig.from_dsn("host=h user=u")
    assert (cfg.sslmode, cfg.sslrootcert) == ("verify-ca", "/etc/ca.crt")
    assert UpstreamConfig.from_dsn("host=h user=u sslmode=disable").sslmode == "disable"
    with pytest.raises(ValueError, match="sslmode"):
        UpstreamConfig.from_dsn("host=h sslmode=sometimes")
    with pytest.raises(ValueError, match="ports"):
        UpstreamConfig.from_dsn("host=a,b,c port=1,2")
