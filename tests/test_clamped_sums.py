"""Sums and averages of clamped columns through the wire (rewriter/clamp.py): Adult's
capital_gain and capital_loss (``clamp = true``, bounds that hold every value) answered noise
off exactly as PostgreSQL does, with the clamping stated in the NOTICE; with noise, a sum's
standard error is its bound times a count's (the sensitivity clamping gives)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, ZeroSampler, config_text, reset_ledger, start_epoch

import sql_fixtures.adult as adult
from proxy.config import parse_config


@pytest.fixture(scope="module")
def config(pg: Any) -> Iterator[Any]:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg, stream_length=200, delta=1e-5), "clamped.toml")
    start_epoch(cfg, [], epsilon=1e4)
    yield cfg
    reset_ledger(pg)


STATEMENTS = [
    'SELECT avg("public"."adult"."capital_gain") AS "avg" FROM "public"."adult"',  # Metabase
    'SELECT sex AS sex, SUM(capital_gain) AS "SUM(capital_gain)" FROM public.adult GROUP BY sex'
    ' ORDER BY "SUM(capital_gain)" DESC LIMIT 10000',  # Superset
    "SELECT education_num, sum(capital_gain - capital_loss) AS net FROM adult"
    " WHERE education_num >= 13 GROUP BY 1 ORDER BY 1",
    "SELECT income, sum(CASE WHEN capital_gain > 0 THEN capital_gain ELSE 0 END),"
    " avg(capital_loss)::numeric(10,2) FROM adult GROUP BY 1 ORDER BY 1",
]


def _run(dsn: str, sql: str) -> tuple[list[tuple[str, int]], list[tuple[Any, ...]], list[str]]:
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        cur = conn.execute(sql)
        assert cur.description is not None
        return [(d.name, d.type_code) for d in cur.description], cur.fetchall(), notices


@pytest.mark.parametrize("sql", STATEMENTS)
def test_clamped_sums_are_postgresql_s_noise_off(config: Any, pg: Any, sql: str) -> None:
    with Proxy(config, sampler=ZeroSampler) as proxy:
        cols, rows, notices = _run(proxy.dsn, sql)
    theirs_cols, theirs, _ = _run(pg.admin_dsn, sql)
    assert cols == theirs_cols
    assert rows == theirs
    assert any("capital_gain's values to [0, 99999]" in n or "capital_loss's values" in n
               for n in notices), notices  # fmt: skip


def test_a_sum_s_error_is_its_bound_times_a_count_s(config: Any, pg: Any) -> None:
    reset_ledger(pg)  # a fresh epoch: the answer is one fresh release, not a combination
    start_epoch(config, [], epsilon=1e4)
    with Proxy(config) as proxy:
        _, rows, notices = _run(proxy.dsn, "SELECT sum(capital_loss), count(*) FROM adult")
    [notice] = [n for n in notices if n.startswith("LAPRAS")]
    found = dict(
        re.findall(r"(sum|count) ([0-9][0-9.e+-]*[0-9])", notice.split("standard error", 1)[1])
    )
    assert float(found["sum"]) == pytest.approx(4999 * float(found["count"]), rel=1e-3)
    assert "capital_loss's values to [0, 4999]" in notice
    assert 0 <= rows[0][0] <= 4999 * max(rows[0][1], 1)  # within n times the range


def test_an_epoch_pinned_before_clamp_says_so(pg: Any) -> None:
    """An epoch started while capital_gain had no clamp = true holds no values of it: the
    sum is refused (0A000) saying so, before anything is charged."""
    reset_ledger(pg)
    before = adult.DECLARATION.read_text().replace("clamp = true", "# (no clamp)")
    start_epoch(parse_config(config_text(pg, declaration=before), "before.toml"), [])
    now = parse_config(config_text(pg), "now.toml")
    try:
        with Proxy(now) as proxy, psycopg.connect(proxy.dsn, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="clamp = true"):
                conn.execute("SELECT avg(capital_gain) FROM adult")
            assert conn.execute("SELECT count(*) > 0 FROM adult").fetchone() == (True,)
    finally:
        reset_ledger(pg)
