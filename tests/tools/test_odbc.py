"""psqlODBC (Debian's odbc-postgresql, through unixODBC) driven by pyodbc, with and without
``UseDeclareFetch=1`` (then every SELECT is ``declare "SQL_CUR…" cursor with hold for …;
fetch N in "SQL_CUR…"``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .toolkit import Demo, Mark, near_avg, near_count

pyodbc = pytest.importorskip("pyodbc", reason="pyodbc is not installed (pip install -e '.[tools]')")

DRIVER = "PostgreSQL Unicode"  # odbc-postgresql registers it in /etc/odbcinst.ini

pytestmark = pytest.mark.skipif(
    DRIVER not in pyodbc.drivers(),
    reason=f"the ODBC driver {DRIVER!r} is not installed (apt-get install odbc-postgresql)",
)


@dataclass
class Odbc:
    conn: Any
    declare_fetch: bool


@pytest.fixture(params=["plain", "UseDeclareFetch=1"], scope="module")
def odbc(request: pytest.FixtureRequest, demo: Demo) -> Iterator[Odbc]:
    declare_fetch = request.param != "plain"
    extra = "UseDeclareFetch=1;Fetch=2;" if declare_fetch else ""
    conn = pyodbc.connect(
        f"Driver={{{DRIVER}}};Server={demo.host};Port={demo.port};Database={demo.database};"
        f"Uid={demo.user};Pwd={demo.password};{extra}",
        timeout=30,
        autocommit=True,
    )
    try:
        yield Odbc(conn, declare_fetch)
    finally:
        conn.close()


def _fetch(demo: Demo, odbc: Odbc, sql: str, *params: Any) -> tuple[list[Any], Mark]:
    mark = demo.mark()
    try:
        rows = odbc.conn.cursor().execute(sql, *params).fetchall()
    except pyodbc.Error as exc:
        pytest.fail(f"{sql!r} failed: {exc}{demo.explain(mark)}")
    # the mode is in force: with UseDeclareFetch every query goes through a cursor
    declared = any("cursor with hold for" in s.lower() for s in demo.sent(mark))
    assert declared == odbc.declare_fetch, demo.explain(mark)
    return rows, mark


def test_group_by(demo: Demo, odbc: Odbc) -> None:
    rows, mark = _fetch(demo, odbc, "SELECT sex, count(*) AS n FROM adult GROUP BY sex")
    exact = dict(demo.exact("SELECT sex, count(*) FROM adult GROUP BY sex"))
    assert sorted(r[0] for r in rows) == sorted(exact), demo.explain(mark)
    for sex, n in rows:
        near_count(n, exact[sex], f"count of {sex}" + demo.explain(mark))


def test_parameters(demo: Demo, odbc: Odbc) -> None:
    rows, mark = _fetch(
        demo, odbc, "SELECT count(*), avg(age) FROM adult WHERE age > ? AND sex = ?", 40, "Female"
    )
    n, mean_age = demo.exact(
        "SELECT count(*), avg(age) FROM adult WHERE age > 40 AND sex = 'Female'"
    )[0]
    near_count(rows[0][0], n, "count" + demo.explain(mark))
    near_avg(rows[0][1], float(mean_age), n, "mean age" + demo.explain(mark))


def test_rows_refused(demo: Demo, odbc: Odbc) -> None:
    mark = demo.mark()
    with pytest.raises(pyodbc.Error) as info:
        odbc.conn.cursor().execute("SELECT * FROM adult").fetchall()
    assert info.value.args[0] == "42501", f"{info.value}{demo.explain(mark)}"
    # the connection stays usable
    assert odbc.conn.cursor().execute("SELECT 1").fetchall()[0][0] == 1
