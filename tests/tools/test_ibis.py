"""ibis (ibis-framework[postgres], on psycopg 3): expressions compiled to PostgreSQL SQL by
sqlglot, executed through the proxy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .toolkit import Demo, near_avg, near_count, sqlstate_of

ibis = pytest.importorskip(
    "ibis", reason="ibis-framework is not installed (pip install -e '.[tools]')"
)
pytest.importorskip("psycopg", reason="ibis's postgres backend needs psycopg")


@pytest.fixture(scope="module")
def adult(demo: Demo) -> Iterator[Any]:
    con = ibis.postgres.connect(
        host=demo.host, port=demo.port, user=demo.user, password=demo.password,
        database=demo.database,
    )  # fmt: skip
    try:
        yield con.table("adult")
    finally:
        con.disconnect()


def test_table_schema(adult: Any) -> None:
    # ibis reads the columns from the catalogue (relayed)
    assert adult.schema().names[:2] == ("age", "workclass")
    assert str(adult.schema()["age"]).lstrip("!") == "int32"


def test_count(demo: Demo, adult: Any) -> None:
    mark = demo.mark()
    n = adult.count().execute()
    near_count(n, demo.exact_value("SELECT count(*) FROM adult"), "t.count()" + demo.explain(mark))


def test_filter_count(demo: Demo, adult: Any) -> None:
    # ibis wraps a filter: SELECT COUNT(*) FROM (SELECT * FROM adult WHERE ...) AS t1
    expr = adult.filter((adult.sex == "Female") & (adult.age >= 30) & (adult.age <= 39)).count()
    mark = demo.mark()
    try:
        n = expr.execute()
    except Exception as exc:
        pytest.fail(f"t.filter(...).count() failed: {exc}{demo.explain(mark)}")
    exact = demo.exact_value(
        "SELECT count(*) FROM adult WHERE sex = 'Female' AND age BETWEEN 30 AND 39"
    )
    near_count(n, exact, "t.filter(...).count()" + demo.explain(mark))


def test_group_by(demo: Demo, adult: Any) -> None:
    mark = demo.mark()
    df = adult.group_by("sex").aggregate(n=adult.count(), mean_age=adult.age.mean()).execute()
    got = {r.sex: (r.n, r.mean_age) for r in df.itertuples()}
    exact = {
        s: (n, a)
        for s, n, a in demo.exact("SELECT sex, count(*), avg(age) FROM adult GROUP BY sex")
    }
    assert set(got) == set(exact), demo.explain(mark)
    for sex, (n, mean_age) in exact.items():
        near_count(got[sex][0], n, f"count of {sex}" + demo.explain(mark))
        near_avg(got[sex][1], float(mean_age), n, f"mean age of {sex}" + demo.explain(mark))


def test_top_k(demo: Demo, adult: Any) -> None:
    expr = adult.group_by("race").aggregate(n=adult.count()).order_by(ibis.desc("n")).limit(3)
    mark = demo.mark()
    try:
        df = expr.execute()
    except Exception as exc:
        pytest.fail(f"top-3 races failed: {exc}{demo.explain(mark)}")
    exact = dict(demo.exact("SELECT race, count(*) FROM adult GROUP BY race"))
    assert len(df) == 3, demo.explain(mark)
    ns = list(df["n"])
    assert ns == sorted(ns, reverse=True), demo.explain(mark)
    assert df["race"][0] == "White", demo.explain(mark)
    for race, n in zip(df["race"], ns, strict=True):
        near_count(n, exact[race], f"count of {race}" + demo.explain(mark))


def test_head_is_refused(demo: Demo, adult: Any) -> None:
    mark = demo.mark()
    with pytest.raises(Exception) as info:
        adult.head().execute()
    assert sqlstate_of(info.value) == "42501", f"{info.value!r}{demo.explain(mark)}"
