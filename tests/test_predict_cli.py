"""`lapras predict` end to end, from each source: the proxy's own query log (built by running
queries through the proxy), a csvlog that a real PostgreSQL wrote, a file of SQL statements;
and `lapras epoch start --from-prediction` using what it stored.

``pg_stat_statements`` is not shipped with the embedded PostgreSQL (the pgserver wheel has no
contrib modules): that source is tested when the backend has the extension, skipped otherwise.
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import io
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, client, config_text, reset_ledger, start_epoch
from test_end_to_end import make_config

from proxy import predicting
from proxy.embedded import EmbeddedPostgres

# a dashboard: three panels of one histogram (the release answers them from one strategy) and
# two others
DASHBOARD = [
    "SELECT sex, count(*) FROM adult GROUP BY sex",
    "SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 29",
    "SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39",
    "SELECT count(*) FROM adult WHERE age BETWEEN 40 AND 49",
    "SELECT income, avg(age) FROM adult GROUP BY income",
]
ONE_OFF = "SELECT count(*) FROM adult WHERE age BETWEEN 61 AND 64"


def lapras(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


@pytest.fixture
def config_file(pg: Any, tmp_path: Path) -> Path:
    reset_ledger(pg)
    path = tmp_path / "lapras.toml"
    path.write_text(config_text(pg))
    return path


def predicted_sql(out: Path) -> list[str]:
    return [
        line.split(";")[0] for line in out.read_text().splitlines() if not line.startswith("--")
    ]


def probabilities(out: Path) -> dict[str, float]:
    """Each predicted statement of a P script that was asked as such, with its probability
    (``-- p=...``); the likely unseen instances of templates (``instance``) are left out."""
    return {
        line.split(";")[0]: float(line.split("p=")[1].split()[0])
        for line in out.read_text().splitlines()
        if not line.startswith("--") and not line.endswith(" instance")
    }


def test_predict_from_the_proxy_log_then_start_an_epoch_from_it(
    pg: Any, config_file: Path, tmp_path: Path
) -> None:
    config = make_config(pg)
    start_epoch(config, [])
    with Proxy(config, seed=11) as proxy, client(proxy) as (conn, _):
        for _ in range(3):  # a dashboard refreshed three times
            for sql in DASHBOARD:
                conn.execute(sql).fetchall()
        conn.execute(ONE_OFF).fetchall()
    with psycopg.connect(pg.state_dsn) as direct:
        rows, logged = direct.execute(
            "SELECT count(*), sum(calls) FROM lapras.query_log"
        ).fetchone()
    # every statement is counted; identical ones written together share a row (repeats)
    assert logged == 3 * len(DASHBOARD) + 1 and rows <= logged

    out = tmp_path / "p.sql"
    # Without the error cap P is every candidate: the log has one window (all of it today), so
    # recurrence is Laplace's rule with a sceptical prior on the calls, c / (c + 3): the
    # refreshed dashboard first (3/6), the one-off last (1/4).
    text = lapras(
        "predict",
        "--config",
        str(config_file),
        "--table",
        "adult",
        "--out",
        str(out),
        "--no-error-cap",
    )
    assert "stored as prediction" in text, text
    assert "the log has one window" in text, text
    p = probabilities(out)
    assert len(p) == len(DASHBOARD) + 1
    one_off = [q for q in p if "61" in q]
    assert len(one_off) == 1 and p[one_off[0]] == 0.25
    assert {v for q, v in p.items() if q not in one_off} == {0.5}
    # the stored prediction keeps each statement's probability, which the default mode's
    # release weighs P's statements by (`lapras epoch start --from-prediction`, below)
    stored = asyncio.run(predicting.load(pg.state_dsn, "adult", "latest"))
    assert stored.probabilities is not None
    asked = dict(zip(stored.statements, stored.probabilities, strict=True))
    assert all(asked[q] == pytest.approx(v, abs=0.005) for q, v in p.items())

    lapras("epoch", "close", "--config", str(config_file), "--table", "adult")
    # a configuration that leaves S to the prediction (the test's sets stream_length = 50)
    unset = tmp_path / "unset.toml"
    unset.write_text(config_text(pg, stream_length=None))
    text = lapras(
        "epoch",
        "start",
        "--config",
        str(unset),
        "--table",
        "adult",
        "--from-prediction",
        "latest",
    )
    assert f"{len(predicted_sql(out))} predicted statement(s)" in text
    # S and E from the prediction's log: its 6 distinct statements of one day (fewer a day if
    # the run crossed midnight UTC), S = the busiest day x 1.5, E its mean (the P of the
    # uncapped prediction is not subtracted: no backtest said what it answers)
    e = re.search(r"S=(\d+), .*expected fresh answers E = (\d+) \(from prediction \d+\)", text,
                  re.DOTALL)  # fmt: skip
    assert e is not None and 3 <= int(e[2]) <= 6, text
    assert math.ceil(1.5 * int(e[2])) <= int(e[1]) <= math.ceil(1.5 * 6), text
    with Proxy(config, seed=12) as proxy, client(proxy) as (conn, notices):
        conn.execute(DASHBOARD[0]).fetchall()
        assert "Matrix Mechanism" in notices[-1]
        conn.execute("SELECT count(*) FROM adult WHERE age BETWEEN 20 AND 22").fetchall()
        assert "fresh noise" in notices[-1]


def test_predict_from_a_sql_file(config_file: Path, tmp_path: Path) -> None:
    dashboard = tmp_path / "dashboard.sql"
    dashboard.write_text(";\n".join(DASHBOARD) + ";\n")
    out = tmp_path / "p.sql"
    lapras(
        "predict", "--config", str(config_file), "--table", "adult", "--source", "sql",
        "--file", str(dashboard), "--out", str(out), "--dry-run", "--no-error-cap",
    )  # fmt: skip
    got = predicted_sql(out)
    # the dashboard, and likely unseen instances of its age-range template (other ranges)
    assert set(DASHBOARD) <= set(got)
    extra = [q for q in got if q not in DASHBOARD]
    assert extra and all("count(*)" in q and "age >=" in q for q in extra), extra


def test_predict_from_a_csvlog_written_by_postgresql(
    pg: Any, config_file: Path, tmp_path: Path
) -> None:
    """A second embedded PostgreSQL with logging_collector + csvlog; the statements run on it
    directly (a backend without the proxy in front, as an admin would export)."""
    server = EmbeddedPostgres(tmp_path / "logged")
    server.start()
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            for setting in (
                "logging_collector = on",
                "log_destination = 'csvlog'",
                "log_statement = 'all'",
                "log_timezone = 'UTC'",
            ):
                conn.execute(f"ALTER SYSTEM SET {setting}")
        server.stop()
        server.start()
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE adult (age int, sex text, income text)")
            for _ in range(5):
                for sql in DASHBOARD:
                    conn.execute(sql).fetchall()
            conn.execute(ONE_OFF).fetchall()
            (folder,) = conn.execute("SELECT current_setting('log_directory')").fetchone()
    finally:
        server.stop()
    logs = sorted((server.pgdata / folder).glob("*.csv"))
    assert logs, "PostgreSQL wrote no csvlog"
    csvlog = tmp_path / "postgresql.csv"
    csvlog.write_text("".join(p.read_text() for p in logs))
    out = tmp_path / "p.sql"
    lapras(
        "predict", "--config", str(config_file), "--table", "adult", "--source", "csvlog",
        "--file", str(csvlog), "--out", str(out), "--dry-run", "--no-error-cap",
    )  # fmt: skip
    # one window: the dashboard (refreshed five times: 5/8) above the one-off (1/4)
    p = probabilities(out)
    assert set(p) == {*DASHBOARD, ONE_OFF}
    assert p[ONE_OFF] == 0.25 and all(p[q] == pytest.approx(5 / 8, abs=0.01) for q in DASHBOARD)

    # End to end: the same real log, its five dashboard refreshes moved to five consecutive
    # days (a week's log, so that recurrence is learned: one window alone earns P little),
    # through the error-aware cap, stored, an epoch started from it, the proxy serving it to
    # psycopg: exactly P's statements come from the release.
    week = tmp_path / "week.csv"
    week.write_text(_spread_over_days(csvlog.read_text(), DASHBOARD))
    text = lapras(
        "predict", "--config", str(config_file), "--table", "adult", "--source", "csvlog",
        "--file", str(week), "--out", str(out),
    )  # fmt: skip
    assert "split" in text and "expected MAE" in text, text
    # each template of P with what it is worth: its recurrence, its share of the budget and
    # the epoch's expected MAE with and without it
    worth = re.compile(
        r"template SELECT .*: \d+ statement\(s\) asked and \d+ likely instance\(s\) in P; "
        r"asked in up to 5 window\(s\) by up to \d+ analyst\(s\); [\d.]+ of them expected "
        r"next window; [\d.]+% of the budget; expected MAE [\d.e+-]+ with it, [\d.e+-]+ without"
    )
    assert worth.search(text), text
    # the decision in words: each later day repeated the whole dashboard, so at the held-out
    # days a P answered better than everything online; S and E from the log's windows
    assert re.search(r"P kept: .* it gains \+[\d.]+% over answering online in 4 held-out", text)
    assert "distinct statements (mean" in text and "S = " in text, text
    e = re.search(r"E = (\d+) expected", text)
    assert e is not None, text
    chosen = set(predicted_sql(out))
    assert set(probabilities(out)) <= {*DASHBOARD, ONE_OFF} and chosen, text
    lapras("epoch", "close", "--config", str(config_file), "--table", "adult")
    text = lapras(
        "epoch", "start", "--config", str(config_file), "--table", "adult",
        "--from-prediction", "latest",
    )  # fmt: skip
    assert f"{len(chosen)} predicted statement(s)" in text, text
    # E from the prediction; S as the administrator set it ([privacy] stream_length = 50)
    assert re.search(rf"expected fresh answers E = {e[1]} \(from prediction \d+\)", text), text
    assert "S=50," in text, text
    config = make_config(pg)
    with Proxy(config, seed=13) as proxy, client(proxy) as (conn, notices):
        for sql in [*DASHBOARD, ONE_OFF, "SELECT count(*) FROM adult WHERE age = 44"]:
            conn.execute(sql).fetchall()
            released = "Matrix Mechanism" in notices[-1]
            assert released == (sql in chosen), (sql, notices[-1])


def _spread_over_days(text: str, dashboard: list[str]) -> str:
    """The csvlog with the k-th run of each dashboard statement (and everything logged
    between) moved to the k-th of consecutive days ending today; log_time is column 0."""
    rows = list(csv.reader(io.StringIO(text)))
    runs = sum(1 for r in rows if r[13:14] == [f"statement: {dashboard[0]}"])
    k = 0
    for r in rows:
        if r[13:14] == [f"statement: {dashboard[0]}"]:
            k += 1
        stamp = dt.datetime.strptime(r[0][:19], "%Y-%m-%d %H:%M:%S")
        r[0] = (stamp - dt.timedelta(days=runs - max(k, 1))).strftime("%Y-%m-%d %H:%M:%S") + r[0][
            19:
        ]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _system_postgres() -> Path | None:
    """A PostgreSQL installation with contrib (Debian's), for pg_stat_statements."""
    for postgres in sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), reverse=True):
        if (postgres.parent.parent / "lib" / "pg_stat_statements.so").exists():
            return postgres.parent
    return None


def test_predict_from_pg_stat_statements(tmp_path: Path) -> None:
    """The embedded PostgreSQL ships no contrib modules: this runs on the system's PostgreSQL
    (Debian's postgresql-15 package) with pg_stat_statements preloaded."""
    import sql_fixtures.adult as adult
    from proxy.embedded import provision_adult

    bin_dir = _system_postgres()
    if bin_dir is None:
        pytest.skip("no PostgreSQL with pg_stat_statements on this machine")
    server = EmbeddedPostgres(
        tmp_path / "stats",
        bin_dir=bin_dir,
        settings={"shared_preload_libraries": "'pg_stat_statements'"},
    )
    server.start()
    try:
        provision_adult(server, "stats")
        with psycopg.connect(server.dsn(database="stats"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            for _ in range(3):
                for sql in DASHBOARD:
                    conn.execute(sql).fetchall()
            conn.execute(ONE_OFF).fetchall()
        config = tmp_path / "lapras.toml"
        config.write_text(
            adult.DECLARATION.read_text()
            + f"""
[backend]
aggregator_dsn = "{server.dsn(database="stats")}"
passthrough_dsn = "{server.dsn("lapras_passthrough", "stats")}"

[[users]]
name = "analyst"
password = "x"
"""
        )
        out = tmp_path / "p.sql"
        text = lapras(
            "predict", "--config", str(config), "--table", "adult", "--source", "pg_stat_statements",
            "--out", str(out), "--dry-run", "--no-error-cap",
        )  # fmt: skip
    finally:
        server.stop()
    assert "log record(s) read from pg_stat_statements" in text, text
    # Statements without constants are predicted exactly; those with constants are normalised
    # to $n by PostgreSQL and only reported as seen without bindings.
    p = predicted_sql(out)
    assert "SELECT sex, count(*) FROM adult GROUP BY sex" in p
    assert "seen without bindings" in text


def test_predict_says_when_no_prediction_is_kept(config_file: Path, tmp_path: Path) -> None:
    """An exploratory csvlog: each day asks new age ranges, never one asked before. The
    backtest on the held-out days finds no P that answers them better than everything
    online, and the command says so in words; S and E still come from the log's days."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    rows = []
    for day in range(6, 0, -1):
        for k in range(8):
            low = 17 + (day * 8 + k) % 60
            at = now - dt.timedelta(days=day) + dt.timedelta(minutes=k)
            sql = f"SELECT count(*) FROM adult WHERE age BETWEEN {low} AND {low + day % 3}"
            rows.append(
                [at.strftime("%Y-%m-%d %H:%M:%S.000 UTC"), "ana", "adult", "1", "", f"s{day}",
                 str(k), "SELECT", "", "", "0", "LOG", "00000", f"statement: {sql}"]
                + [""] * 9
            )  # fmt: skip
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    log = tmp_path / "explore.csv"
    log.write_text(out.getvalue())
    text = lapras(
        "predict", "--config", str(config_file), "--table", "adult", "--source", "csvlog",
        "--file", str(log), "--dry-run", "--now", now.isoformat(),
    )  # fmt: skip
    assert "predicted set P for adult: 0 statement(s)" in text, text
    assert "no prediction kept: the backtest says answering online is as good" in text, text
    assert re.search(r"the log's 6 active window\(s\) of 1 day\(s\) asked \d+ to \d+", text), text
