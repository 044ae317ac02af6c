"""One epoch answers every declared column of the table (issue 15), through the real proxy.

An epoch pins the whole table once (``dp.pin``) and answers each statement over the marginal
of the columns it uses. Here, in one epoch with real (seeded) noise: counts, sums and averages
over every declared column of Adult and over random combinations of up to four columns are
answered, each within a few of its stated standard errors of PostgreSQL's own answer; the
predicted statements come from the Matrix Mechanism release, blocks over several marginals;
an epoch an administrator restricts to a view still refuses the other columns, with a hint.
"""

from __future__ import annotations

import random
import re
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from epoch_helpers import Proxy, client, config_text, reset_ledger, start_epoch

from proxy.config import Config, parse_config

#: Adult's declared columns (fnlwgt has no public domain) and a predicate over each one.
FILTERS = {
    "age": "age BETWEEN 25 AND 54",
    "workclass": "workclass = 'Private'",
    "education": "education IN ('Bachelors', 'Masters', 'Doctorate')",
    "education_num": "education_num >= 9",
    "marital_status": "marital_status <> 'Never-married'",
    "occupation": "occupation LIKE '%e%'",
    "relationship": "relationship IN ('Husband', 'Wife')",
    "race": "race = 'White'",
    "sex": "sex = 'Male'",
    "capital_gain": "capital_gain >= 1",
    "capital_loss": "capital_loss = 0",
    "hours_per_week": "hours_per_week > 40",
    "native_country": "native_country = 'United-States'",
    "income": "income = '>50K'",
}
#: Columns whose sum and average are answerable (unit bins).
NUMERIC = ("age", "education_num", "hours_per_week")
#: Declared in bins wider than one value: compared at bin edges, not grouped by value.
BINNED = ("capital_gain", "capital_loss")

PREDICTED = [
    "SELECT sex, count(*) FROM adult GROUP BY sex",
    "SELECT workclass, count(*) FROM adult GROUP BY workclass",
    "SELECT education, income, count(*) FROM adult GROUP BY education, income",
    "SELECT income, count(*) FROM adult GROUP BY income",
]


@pytest.fixture
def config(pg: Any) -> Config:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg, stream_length=400, reveal_sources=True), "test.toml")
    start_epoch(cfg, PREDICTED)
    return cfg


def _exact(pg: Any, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg.aggregator_dsn) as direct:
        return direct.execute(sql).fetchall()


def _largest_error(notice: str) -> float:
    """The largest standard error a NOTICE states (over all aggregates of the statement)."""
    part = notice.split("standard error ", 1)[1]
    return max(float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", part))


def _close(got: Any, want: Any, se: float) -> bool:
    if want is None or got is None:
        return got is None and want is None
    return abs(float(got) - float(want)) <= 6 * se + 1e-9


def _statements(rng: random.Random) -> list[str]:
    cols = list(FILTERS)
    out = []
    for col in cols:  # every column alone: grouped count, filtered count
        if col not in BINNED:
            out.append(f"SELECT {col}, count(*) FROM adult GROUP BY {col} ORDER BY {col}")
        out.append(f"SELECT count(*) FROM adult WHERE {FILTERS[col]}")
    for col in NUMERIC:
        out.append(f"SELECT sum({col}), avg({col}) FROM adult")
    for k in (2, 3, 4):  # random sets of k columns: one averaged, one grouped, the rest filtered
        for _ in range(6):
            num = rng.choice(NUMERIC)
            group = rng.choice([c for c in cols if c not in BINNED and c != num])
            rest = rng.sample([c for c in cols if c not in (num, group)], k - 2)
            where = " AND ".join(FILTERS[c] for c in [*rest, num])
            out.append(
                f"SELECT {group}, count(*), avg({num}) FROM adult WHERE {where} "
                f"GROUP BY {group} ORDER BY {group}"
            )
    return out


def test_every_declared_column_and_combinations_of_up_to_four_are_answered(
    config: Config, pg: Any
) -> None:
    statements = _statements(random.Random(15))
    with Proxy(config, seed=15) as proxy, client(proxy) as (conn, notices):
        for sql in statements:
            rows = conn.execute(sql).fetchall()
            assert notices and notices[-1].startswith("LAPRAS: "), (sql, notices[-1:])
            se = _largest_error(notices[-1])
            if "GROUP BY" in sql:
                got = {r[:1]: r for r in rows}
                # every group PostgreSQL returns is answered (the proxy returns the public
                # groups; empty ones may appear with a noisy count near zero)
                want = {r[:1]: r for r in _exact(pg, sql)}
                assert set(want) <= set(got), sql
                for key, row in want.items():
                    assert _close(got[key][1], row[1], se), (sql, key, got[key], row, se)
            else:
                [want_row] = _exact(pg, sql)
                [got_row] = rows
                for g, w in zip(got_row, want_row, strict=True):
                    assert _close(g, w, se), (sql, got_row, want_row, se)


def test_predicted_marginals_are_answered_from_the_release_without_budget(
    config: Config, pg: Any
) -> None:
    with Proxy(config, seed=16) as proxy, client(proxy) as (conn, notices):
        for sql in PREDICTED:
            conn.execute(sql).fetchall()
            assert "Matrix Mechanism release" in notices[-1], (sql, notices[-1])
        # a query over a marginal inside a predicted one is answered from that block
        # (default mode: when its variance beats a fresh answer's), with no charge
        rows = conn.execute("SELECT count(*) FROM adult WHERE education = 'Bachelors'").fetchall()
        [(want,)] = _exact(pg, "SELECT count(*) FROM adult WHERE education = 'Bachelors'")
        assert "earlier releases (no budget spent)" in notices[-1], notices[-1]
        assert abs(rows[0][0] - want) <= 6 * _largest_error(notices[-1])


def test_a_statement_with_no_column_counts_every_row(config: Config, pg: Any) -> None:
    [(want,)] = _exact(pg, "SELECT count(*) FROM adult")
    with Proxy(config, seed=17) as proxy, client(proxy) as (conn, notices):
        [(got,)] = conn.execute("SELECT count(*) FROM adult").fetchall()
        assert abs(got - want) <= 6 * _largest_error(notices[-1])


def test_an_epoch_restricted_to_a_view_refuses_other_columns_with_a_hint(pg: Any) -> None:
    reset_ledger(pg)
    cfg = parse_config(config_text(pg, stream_length=20), "test.toml")
    start_epoch(cfg, [], view="age_sex_income")
    with Proxy(cfg, seed=18) as proxy, client(proxy) as (conn, _):
        assert conn.execute("SELECT sex, count(*) FROM adult GROUP BY sex").fetchall()
        with pytest.raises(psycopg.errors.FeatureNotSupported) as err:
            conn.execute("SELECT workclass, count(*) FROM adult GROUP BY workclass")
        assert "age, sex, income only" in str(err.value)
        assert err.value.diag.message_hint is not None
        assert "without --view" in err.value.diag.message_hint


def test_combinations_are_bounded_by_the_public_cell_limit(config: Config) -> None:
    """A marginal's size is public; five large columns together exceed Adult's cell limit and
    are refused (54000-class program limit, before any data is touched)."""
    cols = ["age", "hours_per_week", "native_country", "education", "occupation"]
    sql = "SELECT count(*) FROM adult WHERE " + " AND ".join(FILTERS[c] for c in cols)
    with Proxy(config, seed=19) as proxy, client(proxy) as (conn, _):
        with pytest.raises(psycopg.Error) as err:
            conn.execute(sql)
        assert "cell limit" in str(err.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_sums_and_averages_keep_postgresql_types(config: Config) -> None:
    with Proxy(config, seed=20) as proxy, client(proxy) as (conn, _):
        for col in NUMERIC:
            cur = conn.execute(f"SELECT sum({col}), avg({col}) FROM adult")
            [(s, a)] = cur.fetchall()
            assert isinstance(s, int) and isinstance(a, Decimal)


def test_statement_list_is_not_trivial() -> None:
    statements = _statements(random.Random(15))
    assert len(statements) > 40
    used = {c for sql in statements for c in FILTERS if c in sql}
    assert used == set(FILTERS)
    assert any(sum(c in sql for c in FILTERS) >= 4 for sql in statements)
    assert all("fnlwgt" not in s for s in statements)


OUTSIDE_TOML = """
[tables.lapras_outside.columns]
a = "integer"
b = "text"
[tables.lapras_outside.attributes.a]
kind = "integer"
min = 0
max = 9
[tables.lapras_outside.attributes.b]
kind = "categorical"
values = ["x", "y"]
"""


def test_the_pin_leaves_out_rows_outside_a_declared_domain(pg: Any) -> None:
    """The pin is one histogram over the whole domain: a row with a value outside one
    attribute's domain (or NULL where none is declared) is in no marginal, so every marginal
    is the sum of every larger one (read through the proxy's own binary COPY path)."""
    import asyncio

    import rewriter
    from dp.noise import SeededSampler
    from proxy.epochs import EpochService
    from proxy.memledger import MemLedger
    from proxy.provision import AGGREGATOR

    rows = [(1, "x")] * 5 + [(2, "y")] * 3 + [(42, "x")] * 7 + [(3, "z")] * 2 + [(None, "y")]
    with psycopg.connect(pg.admin_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS public.lapras_outside")
        conn.execute("CREATE TABLE public.lapras_outside (a integer, b text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO public.lapras_outside VALUES (%s, %s)", rows)
        conn.execute(f"GRANT SELECT ON public.lapras_outside TO {AGGREGATOR}")
    schema = rewriter.parse_schema(OUTSIDE_TOML, "outside.toml")
    service = EpochService(
        schema=schema,
        ledger=MemLedger(),
        aggregator_dsn=pg.aggregator_dsn,
        sampler=lambda: SeededSampler(0),
    )
    pin = asyncio.run(service.pin("lapras_outside", None))
    dom = pin.domain
    assert pin.total == 8  # the 5 + 3 rows inside both domains
    assert pin.marginal(dom.marginal(["a"]))[[1, 2]].tolist() == [5.0, 3.0]
    assert pin.marginal(dom.marginal(["b"])).tolist() == [5.0, 3.0]


def test_the_epoch_is_loaded_before_the_port_accepts_connections(config: Config) -> None:
    """A proxy replays the ledger and reads the pin at start (in worker threads), not when its
    first DP statement arrives (ARCHITECTURE: the first answer must not stall the others)."""
    with Proxy(config, seed=21) as proxy:
        assert proxy.app is not None
        row = proxy.app.service.loaded("adult")
        assert row is not None and row.view_name == "*"
        with client(proxy) as (conn, notices):
            conn.execute("SELECT count(*) FROM adult WHERE age > 50").fetchall()
            assert "fresh noise" in notices[-1]
        assert proxy.app.service.loaded("adult") == row
