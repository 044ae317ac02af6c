"""pandas and polars over SQLAlchemy, over ADBC (adbc-driver-postgresql: its queries are
``COPY (…) TO STDOUT (FORMAT binary)``), and connectorx with its default protocol (binary
COPY, after a ``SELECT count(*) FROM (…) AS CXTMPTAB_COUNT`` of the result's rows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .toolkit import Demo, Mark, near_avg, near_count, sqlstate_of

GROUPED = "SELECT sex, count(*) AS n FROM adult GROUP BY sex"
FILTERED = (
    "SELECT count(*) AS n, avg(age) AS mean_age FROM adult WHERE sex = 'Male' AND income = '>50K'"
)
ROWS = "SELECT * FROM adult"


def _rows(frame: Any) -> list[dict[str, Any]]:
    """The rows of a pandas or polars DataFrame, as dictionaries."""
    if hasattr(frame, "to_dicts"):
        return list(frame.to_dicts())
    return list(frame.to_dict("records"))


def check_grouped(demo: Demo, frame: Any, mark: Mark) -> None:
    got = {r["sex"]: r["n"] for r in _rows(frame)}
    exact = dict(demo.exact("SELECT sex, count(*) FROM adult GROUP BY sex"))
    assert set(got) == set(exact), f"{got}{demo.explain(mark)}"
    for sex, n in exact.items():
        near_count(got[sex], n, f"count of {sex}" + demo.explain(mark))


def check_filtered(demo: Demo, frame: Any, mark: Mark) -> None:
    rows = _rows(frame)
    assert len(rows) == 1, demo.explain(mark)
    n, mean_age = demo.exact(
        "SELECT count(*), avg(age) FROM adult WHERE sex = 'Male' AND income = '>50K'"
    )[0]
    near_count(rows[0]["n"], n, "count" + demo.explain(mark))
    near_avg(rows[0]["mean_age"], float(mean_age), n, "mean age" + demo.explain(mark))


def run(demo: Demo, what: str, read: Callable[[], Any]) -> tuple[Any, Mark]:
    mark = demo.mark()
    try:
        return read(), mark
    except Exception as exc:
        pytest.fail(f"{what} failed: {exc!r}{demo.explain(mark)}")


def check_refused(demo: Demo, read: Callable[[], Any]) -> None:
    mark = demo.mark()
    with pytest.raises(Exception) as info:
        read()
    state = sqlstate_of(info.value)
    if state is None:  # connectorx: a message only; send what it sent again, with psycopg
        sent = [s for s in demo.sent(mark) if "adult" in s]
        assert sent, f"{info.value!r}{demo.explain(mark)}"
        state = demo.sqlstate_of_statement(sent[-1])
    assert state == "42501", f"{info.value!r}{demo.explain(mark)}"


# -- pandas and polars over SQLAlchemy -------------------------------------------------------

pd = pytest.importorskip("pandas", reason="pandas is not installed (pip install -e '.[tools]')")
sa = pytest.importorskip("sqlalchemy")


def test_pandas_read_sql(demo: Demo, engine: Any) -> None:
    frame, mark = run(demo, "pd.read_sql", lambda: pd.read_sql(GROUPED, engine))
    check_grouped(demo, frame, mark)
    frame, mark = run(demo, "pd.read_sql", lambda: pd.read_sql(FILTERED, engine))
    check_filtered(demo, frame, mark)


def test_pandas_read_sql_rows_refused(demo: Demo, engine: Any) -> None:
    check_refused(demo, lambda: pd.read_sql(ROWS, engine))
    check_refused(demo, lambda: pd.read_sql_table("adult", engine))


def test_polars_read_database(demo: Demo, engine: Any) -> None:
    pl = pytest.importorskip("polars")
    with engine.connect() as conn:
        frame, mark = run(demo, "pl.read_database", lambda: pl.read_database(GROUPED, conn))
        check_grouped(demo, frame, mark)
        frame, mark = run(demo, "pl.read_database", lambda: pl.read_database(FILTERED, conn))
        check_filtered(demo, frame, mark)
    with engine.connect() as conn:
        check_refused(demo, lambda: pl.read_database(ROWS, conn))


# -- ADBC ------------------------------------------------------------------------------------


@pytest.fixture
def adbc() -> Any:
    module = pytest.importorskip(
        "adbc_driver_postgresql.dbapi",
        reason="adbc-driver-postgresql is not installed (pip install -e '.[tools]')",
    )
    pytest.importorskip("pyarrow")
    return module


def test_polars_over_adbc(demo: Demo, adbc: Any) -> None:
    pl = pytest.importorskip("polars")
    frame, mark = run(
        demo, "pl.read_database_uri(engine='adbc')",
        lambda: pl.read_database_uri(GROUPED, demo.uri, engine="adbc"),
    )  # fmt: skip
    check_grouped(demo, frame, mark)
    frame, mark = run(
        demo, "pl.read_database_uri(engine='adbc')",
        lambda: pl.read_database_uri(FILTERED, demo.uri, engine="adbc"),
    )  # fmt: skip
    check_filtered(demo, frame, mark)
    check_refused(demo, lambda: pl.read_database_uri(ROWS, demo.uri, engine="adbc"))


def test_pandas_over_adbc(demo: Demo, adbc: Any) -> None:
    with adbc.connect(demo.uri) as conn:
        frame, mark = run(demo, "pd.read_sql over ADBC", lambda: pd.read_sql(GROUPED, conn))
        check_grouped(demo, frame, mark)
    with adbc.connect(demo.uri) as conn:
        check_refused(demo, lambda: pd.read_sql(ROWS, conn))


def test_adbc_arrow_cursor(demo: Demo, adbc: Any) -> None:
    with adbc.connect(demo.uri) as conn, conn.cursor() as cur:
        mark = demo.mark()
        try:
            cur.execute(FILTERED)
            table = cur.fetch_arrow_table()
        except Exception as exc:
            pytest.fail(f"ADBC cursor failed: {exc!r}{demo.explain(mark)}")
        assert str(table.schema.field("n").type) == "int64"  # count is int8
        check_filtered(demo, table.to_pandas(), mark)


# -- connectorx ------------------------------------------------------------------------------


@pytest.fixture
def cx() -> Any:
    return pytest.importorskip(
        "connectorx", reason="connectorx is not installed (pip install -e '.[tools]')"
    )


def test_connectorx(demo: Demo, cx: Any) -> None:
    frame, mark = run(demo, "cx.read_sql", lambda: cx.read_sql(demo.uri, GROUPED))
    check_grouped(demo, frame, mark)
    frame, mark = run(
        demo, "cx.read_sql(return_type='arrow')",
        lambda: cx.read_sql(demo.uri, FILTERED, return_type="arrow"),
    )  # fmt: skip
    check_filtered(demo, frame.to_pandas(), mark)
    check_refused(demo, lambda: cx.read_sql(demo.uri, ROWS))


def test_polars_over_connectorx(demo: Demo, cx: Any) -> None:
    pl = pytest.importorskip("polars")
    # connectorx is polars' default engine for read_database_uri
    frame, mark = run(demo, "pl.read_database_uri", lambda: pl.read_database_uri(GROUPED, demo.uri))
    check_grouped(demo, frame, mark)
    check_refused(demo, lambda: pl.read_database_uri(ROWS, demo.uri))
