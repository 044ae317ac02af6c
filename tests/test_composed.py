"""Composed questions through the wire (issue 40): a statement answered as a plan of DP
releases and post-processing (rewriter/compose.py, proxy/composing.py), with psycopg.

Noise off (every draw zero), each composed statement's rows and column types equal
PostgreSQL's; each release is a charged, stored online release (the ledger holds one
``Released`` event per release, each after its committed charge); a repeat of the statement
spends nothing; a refusal of a later release refuses the statement and names the release.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, client, config_text, reset_ledger, start_epoch

from proxy.config import Config, parse_config
from proxy.ledger import decode

#: so large that noise scales are negligible (the draws are zero anyway)
EPSILON = 1e4

SHAPES = [
    # a scalar DP subquery as a threshold: two releases, the second over a public constant
    "SELECT sex, count(*) FROM adult WHERE age > (SELECT avg(age) FROM adult) GROUP BY sex ORDER BY sex",
    # two grouped aggregates joined on their key
    "SELECT m.race, m.n AS men, w.n AS women FROM (SELECT race, count(*) AS n FROM adult "
    "WHERE sex = 'Male' GROUP BY race) m JOIN (SELECT race, count(*) AS n FROM adult "
    "WHERE sex = 'Female' GROUP BY race) w USING (race) ORDER BY 1",
    # an aggregate over grouped aggregates
    "SELECT avg(n), max(n) FROM (SELECT occupation, count(*) AS n FROM adult GROUP BY 1) t",
    # dbt's test wrapper
    "select count(*) as failures, count(*) != 0 as should_warn from (select education from "
    "adult group by education having count(*) < 100) dbt_internal_test",
    # Tableau's top N: the table joined to its own grouped, limited subquery
    'SELECT "adult"."race" AS "race", SUM(1) AS "n" FROM "public"."adult" "adult" INNER JOIN '
    '(SELECT "adult"."race" AS "race", SUM(1) AS "$__alias__0" FROM "public"."adult" "adult" '
    'GROUP BY 1 ORDER BY 2 DESC, 1 ASC LIMIT 3) "t0" ON ("adult"."race" = "t0"."race") '
    "GROUP BY 1 ORDER BY 2 DESC",
    # INTERSECT of two thresholded groupings
    "SELECT education FROM adult WHERE sex = 'Male' GROUP BY education HAVING count(*) > 1000 "
    "INTERSECT SELECT education FROM adult WHERE sex = 'Female' GROUP BY education "
    "HAVING count(*) > 500 ORDER BY 1",
]


def _config(pg: Any, **privacy: Any) -> Config:
    reset_ledger(pg)
    return parse_config(config_text(pg, delta=1e-5, **privacy), "test.toml")


def _released(pg: Any) -> list[Any]:
    with psycopg.connect(pg.state_dsn) as conn:
        rows = conn.execute(
            "SELECT seq, kind, payload::text FROM lapras.ledger ORDER BY seq"
        ).fetchall()
    return [(seq, kind, decode(payload)) for seq, kind, payload in rows]


def test_composed_shapes_equal_postgresql_noise_off(pg: Any) -> None:
    config = _config(pg, stream_length=100)
    start_epoch(config, [], epsilon=EPSILON)
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, notices):
        for sql in SHAPES:
            cur = conn.execute(sql)
            ours = cur.fetchall()
            ours_types = [(d.name, d.type_code) for d in cur.description or ()]
            with psycopg.connect(pg.aggregator_dsn, autocommit=True) as direct:
                ref = direct.execute(sql)
                theirs = ref.fetchall()
                assert ours_types == [(d.name, d.type_code) for d in ref.description or ()]
            assert ours == theirs, sql
            assert notices[-1].startswith("LAPRAS: a plan of "), notices[-1]
            assert "release 1 (SELECT" in notices[-1]


def test_each_release_is_charged_and_a_repeat_spends_nothing(pg: Any) -> None:
    config = _config(pg, stream_length=100)
    start_epoch(config, [], epsilon=EPSILON)
    sql = SHAPES[0]
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, notices):
        first = conn.execute(sql).fetchall()
        assert "a plan of 2 releases" in notices[-1]
        assert "2 answered online with fresh noise" in notices[-1]
        assert "in all" in notices[-1] and "no budget spent" not in notices[-1]
        again = conn.execute(sql).fetchall()
        assert again == first
        assert "2 repeats of earlier answers" in notices[-1]
        assert "no budget spent" in notices[-1]
    events = _released(pg)
    released = [(s, ev) for s, kind, ev in events if kind == "Released"]
    assert len(released) == 2  # the repeat drew no new noise
    for seq, ev in released:
        charge = [s for s, kind, e in events if kind == "Charged" and e.position == ev.position]
        assert charge and charge[0] < seq


def test_a_refused_release_refuses_the_statement_and_names_it(pg: Any) -> None:
    config = _config(pg, stream_length=3)
    start_epoch(config, [], epsilon=1.0)
    threshold = "SELECT count(*) FROM adult WHERE age > (SELECT avg(age) FROM adult)"
    with Proxy(config, seed=5) as proxy, client(proxy) as (conn, _):
        conn.execute("SELECT count(*) FROM adult WHERE sex = 'Male'").fetchone()
        conn.execute("SELECT count(*) FROM adult WHERE sex = 'Female'").fetchone()
        # the stream has room for one more release: the threshold's first, not its second
        with pytest.raises(psycopg.Error) as info:
            conn.execute(threshold)
        assert info.value.sqlstate == "42Q01"
        detail = info.value.diag.message_detail or ""
        assert detail.startswith(
            "Release 2 of this statement (SELECT count(*) FROM public.adult WHERE age > "
        )
        # the first release stays stored: asked alone, it is a repeat
        conn.execute("SELECT avg(age) FROM adult").fetchone()


def test_wrappers_and_the_extended_protocol(pg: Any) -> None:
    config = _config(pg, stream_length=100)
    start_epoch(config, [], epsilon=EPSILON)
    sql = "SELECT avg(n) AS mean FROM (SELECT race, count(*) AS n FROM adult GROUP BY race) t"
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as direct:
        [(exact,)] = direct.execute(sql).fetchall()
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, _):
        binary = conn.cursor(binary=True).execute(sql, prepare=True).fetchall()
        assert binary == [(exact,)] and isinstance(binary[0][0], Decimal)
        with conn.cursor().copy(f"COPY ({sql}) TO STDOUT") as copy:
            text = b"".join(bytes(b) for b in copy)
        assert text == f"{exact}\n".encode()


def test_composed_refusals_name_the_construct(pg: Any) -> None:
    config = _config(pg, stream_length=100)
    start_epoch(config, [], epsilon=EPSILON)
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.errors.FeatureNotSupported) as info:
            conn.execute("SELECT count(*) FROM adult a JOIN adult b ON a.age = b.age")
        assert "a join of protected table adult with itself" in str(info.value)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "SELECT n FROM (SELECT age AS n FROM adult) t, (SELECT count(*) FROM adult) u"
            )


def test_parameters_are_bound_into_the_plan(pg: Any) -> None:
    """psycopg binds ``%s`` on the server (``$1``): the backend describes the statement, and
    the values enter the plan as constants of the types the backend inferred."""
    config = _config(pg, stream_length=100)
    start_epoch(config, [], epsilon=EPSILON)
    sql = (
        "SELECT sex, count(*) FROM adult WHERE age > (SELECT avg(age) FROM adult WHERE "
        "race = %s) AND education = %s GROUP BY sex ORDER BY sex"
    )
    params = ["Black", "Bachelors"]
    with psycopg.connect(pg.aggregator_dsn, autocommit=True) as direct:
        ref = direct.execute(sql, params)
        theirs = ref.fetchall()
        types = [(d.name, d.type_code) for d in ref.description or ()]
    with Proxy(config, sampler=ZeroSampler) as proxy, client(proxy) as (conn, notices):
        cur = conn.execute(sql, params)
        assert cur.fetchall() == theirs
        assert [(d.name, d.type_code) for d in cur.description or ()] == types
        assert "a plan of 2 releases" in notices[-1]
        # another value: another plan; a part that cannot be answered is refused before any
        # release (the threshold's second part compares a text column with an ordering)
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute(
                "SELECT count(*) FROM adult WHERE age > (SELECT avg(age) FROM adult) AND sex > %s",
                ["M"],
            )
    released = [ev for _, kind, ev in _released(pg) if kind == "Released"]
    assert len(released) == 2  # the first statement's two; the refused one released none
