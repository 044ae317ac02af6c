"""Questions about units, noise off, against PostgreSQL: random per-unit queries (WHERE
conditions, group keys, per-unit aggregates with FILTER) under random outer queries (groups of
expressions of the values, counts, sums, averages, extrema, conditions on the values), each
answered as ``postprocess(plan, plan.batch.answer(pin.marginal(plan.batch.domain)))`` on the
check-ins' pin read by the epoch service's own statement (with each unit's rows), and compared
with PostgreSQL's answer to the same statement. The check-ins are declared with a bound of
2,000 rows per user (the busiest has 1,624), so no per-unit value is clamped and PostgreSQL's
answer is the exact one (sums, whose range is then 46,001 values, are checked with the
declared bound of 50 in tests/test_unit_questions.py). A group no unit is in is returned (public groups, docs/sql.md §2.3),
PostgreSQL omits it: such rows (their last count 0) are dropped before comparing.
"""

from __future__ import annotations

import asyncio
import random
import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from unit_helpers import GOWALLA, protect
from unit_helpers import config as make_config

import rewriter
from proxy.app import admin_service

DECLARATION = re.sub(
    r"(?m)^max_rows_per_unit = .*$",
    "max_rows_per_unit = 2000",
    re.sub(r"(?m)^lifetime_\w+ = .*$", "", GOWALLA),
)
WHERES = [
    "",
    "WHERE hour >= 18",
    "WHERE lat >= 30 AND lat < 60",
    "WHERE checkin_date < '2010-01-01'",
    "WHERE hour BETWEEN 6 AND 11 OR lon < 0",
    "WHERE NOT (hour IN (1, 2, 3))",
]
GROUPS = ["", "hour", "hour / 6", "date_trunc('month', checkin_date)::date", "hour >= 12"]
AGGREGATES = [
    "count(*)",
    "count(*) FILTER (WHERE hour < 12)",
    "max(hour)",
    "min(hour)",
    "count(DISTINCT hour)",
    "count(hour) FILTER (WHERE lat >= 40)",
]
OUTERS = [
    "SELECT v, count(*) AS c FROM ({inner}) t GROUP BY v",
    "SELECT width_bucket(v, 0, 400, 8) AS b, count(*) AS c FROM ({inner}) t GROUP BY 1",
    "SELECT CASE WHEN v < 5 THEN 'few' WHEN v < 50 THEN 'some' ELSE 'many' END AS k, count(*) AS c"
    " FROM ({inner}) t GROUP BY 1",
    "SELECT count(*) AS c FROM ({inner}) t WHERE v > 3",
    "SELECT count(*) AS c FROM ({inner}) t WHERE v >= 0",  # true for every value: summed out
    "SELECT sum(v) AS s, count(*) AS c FROM ({inner}) t",
    "SELECT avg(v) AS a FROM ({inner}) t",
    "SELECT max(v) AS m, min(v) AS mi FROM ({inner}) t",
    "WITH u AS ({inner}) SELECT count(*) FILTER (WHERE v >= 10) AS big, count(*) AS c FROM u",
    "SELECT g, count(*) AS c FROM ({inner}) t GROUP BY g",
    "SELECT g, avg(v) AS a, count(*) AS c FROM ({inner}) t GROUP BY g",
]


def _statements(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        where, group = rng.choice(WHERES), rng.choice(GROUPS)
        outer = rng.choice(OUTERS)
        if "{inner}) t GROUP BY g" in outer and not group:
            continue
        agg = rng.choice(AGGREGATES)
        keys = f", {group} AS g" if group else ""
        having = f" HAVING {agg} >= 2" if rng.random() < 0.2 else ""
        inner = (
            f"SELECT user_id{keys}, {agg} AS v FROM checkins {where}"
            f" GROUP BY user_id{', ' + group if group else ''}{having}"
        )
        out.append(outer.format(inner=inner))
    distinct = [
        f"SELECT {g + ' AS g, ' if g else ''}count(DISTINCT user_id) AS c FROM checkins {w}"
        f"{' GROUP BY ' + g if g else ''}"
        for w in WHERES[:3]
        for g in GROUPS[:4]
    ]
    return out + distinct


def _value(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    return v


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(
        (x == pytest.approx(y, rel=1e-9, abs=1e-9)) if isinstance(y, float) else x == y
        for x, y in zip(a, b, strict=True)
    )


@pytest.fixture(scope="module")
def pinned(pg: Any) -> tuple[Any, Any]:
    protect(pg)
    config = make_config(pg, DECLARATION)

    async def go() -> Any:
        async with admin_service(config) as service:
            return await service.pin("checkins", None, seed="0123456789abcdef0123456789abcdef")

    pin = asyncio.run(go())
    assert pin.units is not None and pin.units.units == 1000
    return config.schema, pin


def test_random_questions_about_units_are_postgresql_s_answers(
    pg: Any, pinned: tuple[Any, Any]
) -> None:
    schema, pin = pinned
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        for sql in _statements(40, 24):
            [st] = rewriter.classify(sql, schema)
            assert isinstance(st, rewriter.DPStatement), (sql, getattr(st, "error", st))
            plan = st.plan
            assert plan is not None and plan.batch.domain.derived, sql
            ours = [
                tuple(_value(v) for v in row)
                for row in rewriter.postprocess(
                    plan, plan.batch.answer(pin.marginal(plan.batch.domain))
                )
            ]
            theirs = [tuple(_value(v) for v in row) for row in conn.execute(sql).fetchall()]
            extra = [r for r in ours if not any(_same(r, t) for t in theirs)]
            assert all(r[-1] in (0, None) for r in extra), (sql, extra, theirs)
            ours = [r for r in ours if r not in extra]
            assert len(ours) == len(theirs), (sql, ours, theirs)
            left = list(theirs)
            for r in ours:
                hit = next((i for i, t in enumerate(left) if _same(r, t)), None)
                assert hit is not None, (sql, r, theirs)
                left.pop(hit)
