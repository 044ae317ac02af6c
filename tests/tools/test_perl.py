"""Perl DBI with DBD::Pg (Debian's libdbd-pg-perl): a grouped count, a prepared statement
executed until DBD::Pg prepares it on the server, freed (DBD::Pg then sends SQL
``DEALLOCATE dbdpg_p…`` itself) and followed by a COMMIT that must really commit, a row read
refused with 42501, and ``table_info`` (its catalogue query reads ``pg_class.tableoid``). The
script is ``clients/dbd_pg.pl``."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from proxy import provision

from .toolkit import CLIENTS, Demo, near_count, run_script

CHECK_TABLE = "tools_commit_check"
PERL = shutil.which("perl")

pytestmark = pytest.mark.skipif(
    PERL is None
    or subprocess.run([PERL, "-MDBD::Pg", "-MJSON::PP", "-e1"], capture_output=True).returncode
    != 0,
    reason="perl with DBD::Pg is not installed (apt-get install libdbd-pg-perl)",
)


@pytest.fixture(scope="module")
def commit_table(demo: Demo) -> Iterator[str]:
    """An unprotected table the analyst may write: the COMMIT's effect is checked in it."""
    role = provision.analyst_role(demo.user)
    with psycopg.connect(demo.admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {CHECK_TABLE} (tag text)")
        conn.execute(f"GRANT SELECT, INSERT ON {CHECK_TABLE} TO {role}")
    try:
        yield CHECK_TABLE
    finally:
        with psycopg.connect(demo.admin_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {CHECK_TABLE}")


@pytest.fixture(scope="module")
def result(demo: Demo, commit_table: str) -> tuple[dict[str, Any], list[str]]:
    mark = demo.mark()
    r = run_script(
        [str(PERL), str(CLIENTS / "dbd_pg.pl"), demo.host, str(demo.port), demo.database, demo.user,
         demo.password]
    )  # fmt: skip
    sent = demo.sent(mark)
    assert r.returncode == 0, r.stderr + demo.explain(mark)
    return json.loads(r.stdout.splitlines()[-1]), sent


def _explain(sent: list[str]) -> str:
    return "\nSQL sent by DBD::Pg:\n" + "\n".join(f"  > {s}" for s in sent)


def test_grouped(demo: Demo, result: tuple[dict[str, Any], list[str]]) -> None:
    out, sent = result
    exact = dict(demo.exact("SELECT sex, count(*) FROM adult GROUP BY sex"))
    assert set(out.get("grouped") or {}) == set(exact), f"{out}{_explain(sent)}"
    for sex, n in exact.items():
        near_count(out["grouped"][sex], n, f"count of {sex}" + _explain(sent))


def test_prepared_statement(demo: Demo, result: tuple[dict[str, Any], list[str]]) -> None:
    out, sent = result
    assert [a for a, _ in out.get("prepared", [])] == [40, 40, 50], f"{out}{_explain(sent)}"
    (_, first), (_, again), (_, older) = out["prepared"]
    assert again == first, "the same bound query returns the stored answer"
    near_count(first, demo.exact_value("SELECT count(*) FROM adult WHERE age > 40"), "age > 40")
    near_count(older, demo.exact_value("SELECT count(*) FROM adult WHERE age > 50"), "age > 50")


def test_deallocate_then_commit_really_commits(
    demo: Demo, result: tuple[dict[str, Any], list[str]]
) -> None:
    out, sent = result
    name = out.get("prepare_name")
    assert name and f"DEALLOCATE {name}" in sent, (
        "DBD::Pg did not prepare on the server and free it: the scenario did not happen"
        + _explain(sent)
    )
    with psycopg.connect(demo.admin_dsn) as conn:
        tags = [t for (t,) in conn.execute(f"SELECT tag FROM {CHECK_TABLE}").fetchall()]
    assert tags == ["dbd-pg"], (
        f"the COMMIT did not commit (DEALLOCATE: {out.get('deallocate_error', 'ok')})"
        + _explain(sent)
    )
    assert "deallocate_error" not in out, f"{out['deallocate_error']}{_explain(sent)}"


def test_rows_refused(result: tuple[dict[str, Any], list[str]]) -> None:
    out, sent = result
    assert out.get("rows_sqlstate") == "42501", f"{out}{_explain(sent)}"
    assert out.get("after") == 1


def test_table_info_lists_the_tables(result: tuple[dict[str, Any], list[str]]) -> None:
    out, sent = result
    assert not [e for e in out.get("errors", []) if "table_info" in e], f"{out}{_explain(sent)}"
    assert "adult" in out.get("tables", []), f"{out}{_explain(sent)}"
