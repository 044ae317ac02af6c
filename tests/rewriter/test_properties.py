"""Property tests: the rewriter never raises on arbitrary text, and fingerprints are stable."""

from __future__ import annotations

import contextlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewriter
from dp.errors import LaprasError

ADULT = rewriter.load_schema(
    Path(__file__).resolve().parents[2] / "sql_fixtures" / "adult" / "lapras.toml"
)

FRAGMENTS = [
    "SELECT", "count(*)", "sum(age)", "avg(age)", "FROM", "adult", '"public"."adult"', "WHERE", "age",
    "sex", "=", "<>", "<", ">=", "BETWEEN", "SYMMETRIC", "AND", "OR", "NOT", "IN", "(", ")", ",", "30",
    "'Male'", "NULL", "IS", "GROUP BY", "1", "HAVING", "ORDER BY", "LIMIT", "0", "$1", ";", "::int",
    "CAST(", "AS", "integer", "*", "UNION", "JOIN", "WITH", "x", "'adult'::regclass", "COPY", "TO STDOUT",
    "DECLARE", "CURSOR FOR", "EXPLAIN", "pg_class", "reltuples", "pg_stat_user_tables", "$$", "E'\\x'",
    "--", "/*", "*/", "\"", "'", "U&",
]  # fmt: skip


def _check(sql: str) -> None:
    for statement in rewriter.classify(sql, ADULT):
        if isinstance(statement, rewriter.Refused):
            assert isinstance(statement.error, LaprasError)
            assert statement.error.sqlstate != "XX000", (sql, statement.error)
        if isinstance(statement, rewriter.DPStatement) and statement.plan is None:
            with contextlib.suppress(LaprasError):
                rewriter.bind(statement, [30] * len(statement.param_types))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes(sql: str) -> None:
    _check(sql)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25))
def test_sql_like_soup_never_crashes(parts: list[str]) -> None:
    _check(" ".join(parts))


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["count(*)", "COUNT(*)", "count(1)"]),
    st.sampled_from(
        ["adult", "ADULT", '"adult"', "public.adult", '"public"."adult"', "adult a", "adult AS t"]
    ),
    st.integers(17, 90),
    st.sampled_from([" ", "  ", "\n", "\t"]),
)
def test_fingerprint_stable_across_spelling(agg: str, source: str, age: int, ws: str) -> None:
    col = "age"
    if source.endswith(" a"):
        col = "a.age"
    elif source.endswith(" t"):
        col = "t.AGE"
    [st1] = rewriter.classify(f"SELECT{ws}{agg} FROM {source}{ws}WHERE {col} >= {age}", ADULT)
    [st2] = rewriter.classify(f"select count(*) from adult where age >= {age + 1}", ADULT)
    assert isinstance(st1, rewriter.DPStatement) and isinstance(st2, rewriter.DPStatement)
    f1, f2 = rewriter.fingerprint(st1), rewriter.fingerprint(st2)
    assert f1.template == f2.template and f1.key == f2.key
    assert f1.bindings == (age,) and f2.bindings == (age + 1,)


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.decimals(), st.text(max_size=10),
    st.binary(max_size=6), st.dates(), st.fractions(),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(VALUES, min_size=0, max_size=4))
def test_bind_raises_only_typed_errors(values: list[object]) -> None:
    [statement] = rewriter.classify(
        "SELECT sex, count(*) FROM adult WHERE age > $1 AND sex = $2 GROUP BY 1 HAVING count(*) > $3 LIMIT $4",
        ADULT,
    )
    assert isinstance(statement, rewriter.DPStatement)
    try:
        rewriter.bind(statement, values)
    except LaprasError as e:
        assert e.sqlstate != "XX000"
