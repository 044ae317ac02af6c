"""``lapras config check``: a good file is summarised, a broken one names file, key and fix.

No backend is needed: the check connects to nothing. docker/lapras.toml is checked too (with
the environment variables docker/compose.yaml sets), so the shipped example stays valid.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy import cli

ROOT = Path(__file__).resolve().parent.parent

BASE = """
[tables.t.columns]
a = "integer"
[tables.t.attributes.a]
kind = "integer"
min = 0
max = 9
[tables.t.views]
v = ["a"]

[server]
listen = "127.0.0.1:6432"

[backend]
aggregator_dsn = "postgresql://agg:a@db/x"
passthrough_dsn = "postgresql://pass:p@db/x"
state_dsn = "postgresql://agg:a@db/x_lapras"

[[users]]
name = "analyst"
password_env = "LAPRAS_TEST_ANALYST_PASSWORD"
"""


def _check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    code = cli.main(["config", "check", "--config", str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_good_file_is_summarised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAPRAS_TEST_ANALYST_PASSWORD", "pw")
    code, out = _check(tmp_path, BASE + '[privacy]\nepsilon = 0.5\nview = "v"\n', capsys)
    assert code == 0, out
    assert "cfg.toml: OK" in out
    assert "epsilon=0.5" in out and "accountant=gdp" in out and "restricted to view v" in out
    # a configuration written when epochs covered one view keeps working, and is told how
    # to cover the whole table
    assert "privacy.view restricts new epochs to the columns a; remove it" in out


def test_without_privacy_view_epochs_cover_the_whole_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAPRAS_TEST_ANALYST_PASSWORD", "pw")
    code, out = _check(tmp_path, BASE.replace('[tables.t.views]\nv = ["a"]\n', ""), capsys)
    assert code == 0, out
    assert "t (1 attribute, 0 views)" in out and "over the whole table" in out
    assert "note:" not in out


@pytest.mark.parametrize(
    ("section", "line", "expected"),
    [
        ("privacy", "budget = 1", "[privacy]: has an unknown key 'budget'"),
        ("privacy", "epsilon = 0", "[privacy]: epsilon must be a finite number greater than 0"),
        ("privacy", 'accountant = "pure"', "[privacy]: the pure accountant requires delta = 0"),
        ("privacy", 'view = "nope"', "privacy.view: 'nope' is not a view of any protected table"),
        ("privacy", 'log_sql = "yes"', "privacy.log_sql: must be true or false"),
        ("privacy", "query_log_days = 0", "privacy.query_log_days: must be a number of days"),
        (
            "privacy",
            "query_log_rows = 10",
            "privacy.query_log_rows: must be an integer of at least",
        ),
        ("server", "workers = 0", "server.workers: must be between 1 and 64"),
        ("server", "workers = 65", "server.workers: must be between 1 and 64"),
        ("server", 'workers = "2"', "server.workers: must be"),
        ("server", 'pool_mode = "statement"', 'server.pool_mode: must be "transaction"'),
        ("server", "pool_size = 0", "server.pool_size: must be between 1 and 10000"),
        ("server", "pool_timeout = 0", "server.pool_timeout: must be > 0 seconds"),
        ("server", "server_idle_timeout = -1", "server.server_idle_timeout: must be >= 0"),
        (
            "backend",
            'lockdown = "off"',
            'backend.lockdown: must be "require" (the default) or "warn"',
        ),
    ],
)
def test_errors_name_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    section: str,
    line: str,
    expected: str,
) -> None:
    monkeypatch.setenv("LAPRAS_TEST_ANALYST_PASSWORD", "pw")
    listen = 'listen = "127.0.0.1:6432"'
    if section == "server":
        text = BASE.replace(listen, listen + "\n" + line)
    elif section == "backend":
        text = BASE.replace("[backend]", "[backend]\n" + line)
    else:
        text = BASE + f"[{section}]\n{line}\n"
    code, out = _check(tmp_path, text, capsys)
    assert code == 2, out
    assert "cfg.toml: " + expected in out


def test_missing_environment_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAPRAS_TEST_ANALYST_PASSWORD", raising=False)
    code, out = _check(tmp_path, BASE, capsys)
    assert code == 2
    assert (
        "users[0].password_env: environment variable LAPRAS_TEST_ANALYST_PASSWORD is not set" in out
    )


def test_docker_configuration_is_valid(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    env = compose["services"]["proxy"]["environment"]
    names = ("LAPRAS_AGGREGATOR_DSN", "LAPRAS_PASSTHROUGH_DSN", "LAPRAS_STATE_DSN",
             "LAPRAS_ANALYST_PASSWORD")  # fmt: skip
    for name in names:
        assert name in env  # what docker/lapras.toml reads
        assert name in compose["services"]["provision"]["environment"]  # provision --config
        monkeypatch.setenv(name, f"postgresql://{name.lower()}:pw@postgres/lapras")
    assert cli.main(["config", "check", "--config", str(ROOT / "docker" / "lapras.toml")]) == 0
    assert "listen 0.0.0.0:6432" in capsys.readouterr().out


def test_backend_roles_and_their_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each user acts upstream as its own role, whose password is derived from the
    passthrough role's: the passthrough DSN must hold it, and roles are one user's alone."""
    monkeypatch.setenv("LAPRAS_TEST_ANALYST_PASSWORD", "pw")
    text = BASE.replace("postgresql://pass:p@db/x", "postgresql://pass@db/x")
    code, out = _check(tmp_path, text, capsys)
    assert code == 2 and "backend.passthrough_dsn: must hold the passthrough role's password" in out
    second = '\n[[users]]\nname = "bob"\npassword = "b"\nbackend_role = "lapras_user_analyst"\n'
    code, out = _check(tmp_path, BASE + second, capsys)
    assert code == 2 and "users[1].backend_role: 'lapras_user_analyst' must be a role" in out
    code, out = _check(tmp_path, BASE + second.replace("lapras_user_analyst", "x" * 64), capsys)
    assert code == 2 and "longer than PostgreSQL's 63 bytes" in out


def test_an_administrators_file_reads_or_says_why_not(tmp_path: Path) -> None:
    """``lapras predict --file`` / ``epoch start --predicted``: a missing file is a clean
    error in PostgreSQL's words (58P01), bytes that are not UTF-8 (a log in another server
    encoding) read as U+FFFD instead of a traceback."""
    from proxy.exceptions import UndefinedFile
    from proxy.predicting import read_text_file

    missing = tmp_path / "nope.csv"
    with pytest.raises(UndefinedFile) as err:
        read_text_file(missing)
    assert err.value.sqlstate == "58P01"
    assert (
        err.value.message
        == f'could not open file "{missing}" for reading: No such file or directory'
    )
    latin = tmp_path / "latin1.sql"
    latin.write_bytes("SELECT count(*) FROM adult WHERE native_country = 'Côte';".encode("latin-1"))
    assert read_text_file(latin) == "SELECT count(*) FROM adult WHERE native_country = 'C\ufffdte';"


UNIT = BASE.replace(
    '[tables.t.columns]\na = "integer"\n',
    '[tables.t]\nprivacy_unit = "u"\nmax_rows_per_unit = 50\n{extra}\n'
    '[tables.t.columns]\na = "integer"\nu = "integer"\n',
)


@pytest.mark.parametrize(
    ("extra", "expected", "code"),
    [
        ("", "note: t counts at most 50 rows of each u (max_rows_per_unit); declare", 0),
        (
            "expected_rows_per_unit = 157",
            "warning: t: max_rows_per_unit = 50 keeps at most 32% of its rows",
            0,
        ),
        ("expected_rows_per_unit = 80", "note: t: max_rows_per_unit = 50 keeps at most 62%", 0),
        ("expected_rows_per_unit = 20", "note: t: max_rows_per_unit = 50 is above the 20", 0),
        ("expected_rows_per_unit = 0", "expected_rows_per_unit: must be a number of at least 1", 2),
    ],
)
def test_the_unit_bound_is_checked_against_a_declared_average(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: str,
    expected: str,
    code: int,
) -> None:
    """A bound that cuts most of the rows is warned about, from the declaration alone."""
    monkeypatch.setenv("LAPRAS_TEST_ANALYST_PASSWORD", "pw")
    got, out = _check(tmp_path, UNIT.format(extra=extra), capsys)
    assert got == code, out
    assert expected in out


def test_a_row_level_table_needs_no_average(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAPRAS_TEST_ANALYST_PASSWORD", "pw")
    text = BASE.replace(
        "[tables.t.columns]", "[tables.t]\nexpected_rows_per_unit = 9\n[tables.t.columns]"
    )
    code, out = _check(tmp_path, text, capsys)
    assert code == 2 and "expected_rows_per_unit: needs privacy_unit" in out
