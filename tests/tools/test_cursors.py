"""Server-side cursors: SQLAlchemy ``stream_results=True`` (psycopg2 and psycopg 3 send
``DECLARE "c_…" CURSOR [WITHOUT HOLD] FOR …`` and ``FETCH FORWARD n``) and psycopg 3 named
cursors."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from .toolkit import Demo, Mark, near_avg, near_count, sqlstate_of

sa = pytest.importorskip("sqlalchemy")

GROUPED = "SELECT sex, count(*) AS n, avg(age) AS mean_age FROM adult GROUP BY sex"


def check_grouped(demo: Demo, rows: list[Any], mark: Mark) -> None:
    exact = {
        s: (n, a)
        for s, n, a in demo.exact("SELECT sex, count(*), avg(age) FROM adult GROUP BY sex")
    }
    got = {r[0]: (r[1], r[2]) for r in rows}
    assert set(got) == set(exact), f"{rows}{demo.explain(mark)}"
    for sex, (n, mean_age) in exact.items():
        near_count(got[sex][0], n, f"count of {sex}" + demo.explain(mark))
        near_avg(got[sex][1], float(mean_age), n, f"mean age of {sex}" + demo.explain(mark))


def test_sqlalchemy_stream_results(demo: Demo, engine: Any) -> None:
    mark = demo.mark()
    try:
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True, max_row_buffer=1).execute(
                sa.text(GROUPED)
            )
            rows = [tuple(row) for part in result.partitions(1) for row in part]
    except Exception as exc:
        pytest.fail(f"stream_results failed: {exc!r}{demo.explain(mark)}")
    assert any("DECLARE" in s.upper() for s in demo.sent(mark)), "no server-side cursor was used"
    check_grouped(demo, rows, mark)


def test_sqlalchemy_stream_results_rows_refused(demo: Demo, engine: Any) -> None:
    mark = demo.mark()
    with pytest.raises(sa.exc.DBAPIError) as info, engine.connect() as conn:
        conn.execution_options(stream_results=True).execute(
            sa.text("SELECT * FROM adult")
        ).fetchmany(5)
    assert sqlstate_of(info.value) == "42501", f"{info.value!r}{demo.explain(mark)}"


def test_psycopg_named_cursor(demo: Demo) -> None:
    mark = demo.mark()
    try:
        with psycopg.connect(demo.uri) as conn, conn.cursor(name="grouped") as cur:
            cur.itersize = 1
            cur.execute(GROUPED)
            first = cur.fetchone()
            rows = [first, *cur.fetchall()]
    except psycopg.Error as exc:
        pytest.fail(f"named cursor failed: {exc!r}{demo.explain(mark)}")
    check_grouped(demo, [r for r in rows if r is not None], mark)


def test_psycopg_named_cursor_with_hold_in_autocommit(demo: Demo) -> None:
    mark = demo.mark()
    try:
        with psycopg.connect(demo.uri, autocommit=True) as conn:
            with conn.cursor(name="held", withhold=True) as cur:
                cur.execute("SELECT count(*) FROM adult WHERE income = '>50K'")
                (n,) = cur.fetchone() or (None,)
    except psycopg.Error as exc:
        pytest.fail(f"named cursor WITH HOLD failed: {exc!r}{demo.explain(mark)}")
    near_count(
        n, demo.exact_value("SELECT count(*) FROM adult WHERE income = '>50K'"), demo.explain(mark)
    )


def test_psycopg_named_cursor_rows_refused(demo: Demo) -> None:
    mark = demo.mark()
    with psycopg.connect(demo.uri) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.cursor(name="rows") as cur:
            cur.execute("SELECT age, sex FROM adult")
            cur.fetchmany(3)
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,), demo.explain(mark)
