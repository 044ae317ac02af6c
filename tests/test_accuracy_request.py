"""Accuracy on request through the wire (issue 39, item 2): ``SET lapras.max_error`` from
psql, psycopg and pgjdbc; answered free from earlier releases when their stated error meets
it, charged the least that meets it when not, refused when the budget cannot; the setting
follows its client under transaction pooling; the cost preview (EXPLAIN, lapras.cost())
charges nothing."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch
from jdbc_helpers import jdbc_command

import sql_fixtures.adult as adult
from proxy.config import Config, parse_config

GROUPS = "SELECT sex, count(*) FROM adult GROUP BY sex"  # in P: from the release
ADHOC = "SELECT count(*) FROM adult WHERE age BETWEEN 33 AND 47"  # not in P


def _config(pg: Any, *, table: str = "", server: str = "") -> Config:
    decl = adult.DECLARATION.read_text().replace("[tables.adult]\n", f"[tables.adult]\n{table}")
    text = config_text(pg, declaration=decl, stream_length=50, expected_fresh=20)
    text = text.replace("shutdown_grace = 1\n", f"shutdown_grace = 1\n{server}")
    return parse_config(text, "test.toml")


def _charges(pg: Any) -> int:
    with psycopg.connect(pg.state_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM lapras.ledger WHERE kind = 'Charged'").fetchone()
    assert row is not None
    return int(row[0])


def _error(notice: str) -> float:
    """The largest standard error a NOTICE states (``standard error count 8.877 to 8.935``)."""
    num = r"([0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)"
    m = re.search(rf"standard error \w+ {num}(?: to {num})?", notice)
    assert m is not None, notice
    return float(m[2] or m[1])


@contextmanager
def refused(match: str | None = None) -> Iterator[pytest.ExceptionInfo[psycopg.Error]]:
    """The statement is refused with 42Q01 (a budget or accuracy limit)."""
    with pytest.raises(psycopg.Error, match=match) as err:
        yield err
    assert err.value.sqlstate == "42Q01"


@pytest.fixture
def epoch(pg: Any) -> Config:
    reset_ledger(pg)
    config = _config(pg)
    start_epoch(config, DASHBOARD, expected_fresh=20)
    return config


def test_free_when_earlier_releases_meet_it_charged_the_least_when_not(
    epoch: Config, pg: Any
) -> None:
    with Proxy(epoch, seed=3) as proxy, client(proxy) as (conn, notices):
        base = _charges(pg)  # the Matrix Mechanism's
        conn.execute(GROUPS).fetchall()
        stated = _error(notices[-1])  # ~8.9: the release's
        # a request the release meets: free, from it (a repeat of it too)
        conn.execute("SET lapras.max_error = 1000")
        assert conn.execute("SHOW lapras.max_error").fetchone() == ("1000",)  # relayed too
        conn.execute("SELECT income, count(*) FROM adult GROUP BY income").fetchall()
        assert "no budget spent" in notices[-1] and _charges(pg) == base
        # a request below the release's stated error: a fresh release, of the least charge
        # that meets it (combined with the earlier releases of its marginal)
        conn.execute(f"SET lapras.max_error = {stated * 0.8:.4f}")
        conn.execute("SELECT sex, count(*) FROM adult WHERE age >= 18 GROUP BY sex").fetchall()
        assert "fresh noise" in notices[-1] and _charges(pg) == base + 1
        assert _error(notices[-1]) <= stated * 0.8 * 1.0001
        # a request the budget cannot meet: refused, saying what it can give, nothing charged
        conn.execute("SET lapras.max_error = 0.01")
        with refused() as err:
            conn.execute(ADHOC).fetchall()
        assert "lapras.max_error = 0.01" in str(err.value) and "at best" in str(err.value)
        assert _charges(pg) == base + 1
        # off: the pacing's answer
        conn.execute("SET lapras.max_error = off")
        conn.execute(ADHOC).fetchall()
        assert "fresh noise" in notices[-1] and _charges(pg) == base + 2
        # a repeat stricter than its stored answer is refused (never measured again)
        conn.execute("SET lapras.max_error = 1")
        with refused("earlier answer"):
            conn.execute(ADHOC).fetchall()
        conn.execute("RESET lapras.max_error")
        conn.execute(ADHOC).fetchall()
        assert "earlier releases" in notices[-1] or "repeat" in notices[-1]


def test_invalid_and_unknown_settings_are_refused_before_they_are_relayed(
    epoch: Config,
) -> None:
    with Proxy(epoch, seed=4) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"lapras\.max_error"):
            conn.execute("SET lapras.max_error = 'lots'")
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute("SET lapras.precision = 3")
        # a percentage needs the table's public size
        conn.execute("SET lapras.max_error = '5%'")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="public_rows"):
            conn.execute(ADHOC).fetchall()


def test_a_table_default_a_relative_request_and_transactions(pg: Any) -> None:
    reset_ledger(pg)
    config = _config(pg, table="public_rows = 30000\nmax_error = 0.001\n")
    start_epoch(config, DASHBOARD, expected_fresh=20)
    with Proxy(config, seed=5) as proxy, client(proxy) as (conn, notices):
        # the administrator's default (0.001): more than the budget can give
        with refused(r"0\.001"):
            conn.execute(ADHOC).fetchall()
        # '1%' of 30000 = 300: met by the pacing's fresh answer ... at the least charge
        conn.execute("SET lapras.max_error = '1%'")
        conn.execute(ADHOC).fetchall()
        assert "fresh noise" in notices[-1] and _error(notices[-1]) <= 300.0
        # a SET in a block that rolls back is undone; SET LOCAL lasts for its block
        conn.execute("BEGIN")
        conn.execute("SET lapras.max_error = 0.002")
        conn.execute("ROLLBACK")
        conn.execute("SELECT count(*) FROM adult WHERE age < 30").fetchall()  # under '1%'
        assert _error(notices[-1]) <= 300.0
        conn.execute("BEGIN")
        conn.execute("SET LOCAL lapras.max_error = 0.002")
        with refused(r"0\.002"):
            conn.execute("SELECT count(*) FROM adult WHERE age < 40").fetchall()
        conn.execute("ROLLBACK")
        conn.execute("SELECT count(*) FROM adult WHERE age < 40").fetchall()
        assert "fresh noise" in notices[-1]


def test_the_setting_follows_its_client_under_transaction_pooling(pg: Any) -> None:
    """Two clients on one backend connection (pool_size = 1): each one's lapras.max_error
    is its own, in the proxy and on the backend (SHOW), whichever held the connection last."""
    reset_ledger(pg)
    config = _config(pg, server='pool_mode = "transaction"\npool_size = 1\n')
    start_epoch(config, DASHBOARD, expected_fresh=20)
    with (
        Proxy(config, seed=6) as proxy,
        client(proxy) as (a, _),
        client(proxy) as (
            b,
            b_notes,
        ),
    ):
        a.execute("SET lapras.max_error = 0.01")
        assert b.execute("SHOW lapras.max_error").fetchone() != ("0.01",)
        b.execute(ADHOC).fetchall()  # b asks nothing: answered at the pacing
        assert "fresh noise" in b_notes[-1]
        with refused():
            a.execute("SELECT count(*) FROM adult WHERE age < 25").fetchall()
        assert a.execute("SHOW lapras.max_error").fetchone() == ("0.01",)
        b.execute("SET lapras.max_error = 2000")
        assert a.execute("SHOW lapras.max_error").fetchone() == ("0.01",)
        assert b.execute("SHOW lapras.max_error").fetchone() == ("2000",)
        b.execute("SELECT count(*) FROM adult WHERE age < 25").fetchall()
        assert "fresh noise" in b_notes[-1] or "earlier releases" in b_notes[-1]


def test_the_cost_preview_charges_nothing(epoch: Config, pg: Any) -> None:
    with Proxy(epoch, seed=7) as proxy, client(proxy) as (conn, notices):
        before = _charges(pg)
        with psycopg.connect(pg.state_dsn) as st:
            events = st.execute("SELECT count(*) FROM lapras.ledger").fetchone()
        plan = [r[0] for r in conn.execute(f"EXPLAIN {ADHOC}").fetchall()]
        assert plan[0].startswith("LAPRAS cost preview") and "nothing is charged" in plan[0]
        assert any("Answered from: fresh noise" in line for line in plan), plan
        cost_line = next(line for line in plan if line.strip().startswith("Cost:"))
        cost = float(cost_line.split("Cost:")[1].split()[0])
        row = conn.execute(f"SELECT lapras.cost('{ADHOC}')").fetchone()
        assert row is not None and row[0] == "fresh noise" and row[1] == pytest.approx(cost, 1e-3)
        assert row[2] == "mu^2" and row[6] is None
        # free statements preview as free; a request shows in the preview, a refusal too
        free = conn.execute(f"SELECT lapras.cost('{GROUPS}')").fetchone()
        # (the tests' configuration reveals sources: the release, not just "earlier releases")
        assert free is not None and "Matrix Mechanism" in free[0] and free[1] == 0.0
        conn.execute("SET lapras.max_error = 0.01")
        refused = conn.execute(f"SELECT lapras.cost($${ADHOC}$$)").fetchone()
        assert refused is not None and refused[0] is None and "at best" in refused[6]
        # nothing was charged, written or moved
        with psycopg.connect(pg.state_dsn) as st:
            assert st.execute("SELECT count(*) FROM lapras.ledger").fetchone() == events
        assert _charges(pg) == before
        conn.execute("SET lapras.max_error = off")
        conn.execute(ADHOC).fetchall()  # the statement itself: as previewed
        assert f"spent {cost:.4g}" in notices[-1]
        # EXPLAIN of anything else is unchanged; EXPLAIN ANALYZE of a DP statement refused
        assert conn.execute("EXPLAIN SELECT 1").fetchall()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"EXPLAIN ANALYZE {ADHOC}")


def test_psql_sets_and_previews(epoch: Config, pg: Any) -> None:
    psql = _psql()
    with Proxy(epoch, seed=8) as proxy:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        args = [psql, "-X", "-v", "ON_ERROR_STOP=1", proxy.dsn]
        done = subprocess.run(
            [
                *args,
                "-c", "SET lapras.max_error = 1000",
                "-c", "SHOW lapras.max_error",
                "-c", GROUPS,
                "-c", f"EXPLAIN {ADHOC}",
                "-c", "SET lapras.max_error = 0.01",
                "-c", ADHOC,
            ],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    assert done.returncode != 0  # the last statement is refused
    assert " 1000\n" in done.stdout and "Female" in done.stdout
    assert "LAPRAS cost preview" in done.stdout
    assert "no budget spent" in done.stderr  # the NOTICE of the release's answer
    assert "lapras.max_error = 0.01" in done.stderr and "at best" in done.stderr


def _psql() -> str:
    import importlib.util
    import shutil

    spec = importlib.util.find_spec("pgserver")
    if spec and spec.origin:
        p = Path(spec.origin).parent / "pginstall" / "bin" / "psql"
        if p.exists():
            return str(p)
    found = shutil.which("psql")
    if found is None:
        pytest.skip("needs psql")
    return found


_JAVA = """
import java.sql.*;

public class MaxError {
    public static void main(String[] a) throws Exception {
        try (Connection c = DriverManager.getConnection(a[0], a[1], a[2]);
             Statement s = c.createStatement()) {
            s.execute("SET lapras.max_error = 1000");
            try (ResultSet r = s.executeQuery("SHOW lapras.max_error")) {
                r.next();
                System.out.println("show " + r.getString(1));
            }
            try (ResultSet r = s.executeQuery("SELECT sex, count(*) FROM adult GROUP BY sex")) {
                int n = 0;
                while (r.next()) n++;
                System.out.println("rows " + n);
            }
            SQLWarning w = s.getWarnings();
            System.out.println("warning " + (w == null ? "" : w.getMessage()));
            s.execute("SET lapras.max_error = 0.01");
            try (PreparedStatement p = c.prepareStatement(
                    "SELECT count(*) FROM adult WHERE age BETWEEN ? AND ?")) {
                p.setInt(1, 33);
                p.setInt(2, 47);
                p.executeQuery();
                System.out.println("answered");
            } catch (SQLException e) {
                System.out.println("sqlstate " + e.getSQLState());
            }
            s.execute("SET lapras.max_error = off");
            try (ResultSet r = s.executeQuery("EXPLAIN SELECT count(*) FROM adult WHERE age > 60")) {
                r.next();
                System.out.println("explain " + r.getString(1));
            }
        }
    }
}
"""


def test_pgjdbc_sets_it(epoch: Config, tmp_path: Path) -> None:
    java = jdbc_command(tmp_path, "MaxError", _JAVA)
    with Proxy(epoch, seed=9) as proxy:
        url = f"jdbc:postgresql://127.0.0.1:{proxy.port}/lapras_test"
        done = subprocess.run(
            [*java, url, "analyst", "secret"], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "show 1000" and lines[1] == "rows 2"
    assert "no budget spent" in lines[2]
    assert lines[3] == "sqlstate 42Q01"
    assert lines[4].startswith("explain LAPRAS cost preview")


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ('max_error = "5%"\n', "public_rows"),
        ('max_error = "lots"\n', "a standard error"),
        ("max_error = -3\n", "a standard error"),
        ("public_rows = 0\n", "at least 1"),
    ],
)
def test_a_table_default_is_checked_with_the_configuration(
    pg: Any, keys: str, problem: str
) -> None:
    from rewriter.errors import ConfigError

    with pytest.raises(ConfigError, match=problem) as err:
        _config(pg, table=keys)
    assert "tables.adult." in err.value.message
    ok = _config(pg, table='public_rows = 1000\nmax_error = "2%"\n').schema.tables["adult"]
    assert ok.max_error is not None and ok.max_error.resolve(ok.public_rows) == 20.0
