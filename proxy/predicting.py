"""``lapras predict``: read a query log, propose the predicted set P, backtest it, store it.

The method is pure and lives in :mod:`rewriter.predict`; this module only does the I/O:

- sources: the proxy's own log (``lapras.query_log``, the default), PostgreSQL's
  ``pg_stat_statements`` (read through the aggregator role), a PostgreSQL csvlog file, or a
  file of SQL statements (a dashboard's queries);
- the backtest learns on the log before the latest window (``horizon``, one day by default) and
  reports on that window: the overlap rho P would have achieved, its false positives and the
  expected error against answering everything online;
- P is stored in ``lapras.predictions`` (statements + report) and can be written as SQL;
  ``lapras epoch start --from-prediction ID|latest`` starts an epoch from it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psycopg

from proxy.exceptions import UndefinedFile
from rewriter import Schema
from rewriter.predict import (
    DAY,
    BacktestReport,
    LogRecord,
    PredictConfig,
    Prediction,
    Resolver,
    backtest,
    parse_csvlog,
    parse_pg_stat_statements,
    parse_sql_file,
    predict,
)

Source = Literal["log", "pg_stat_statements", "csvlog", "sql"]
SOURCES: tuple[Source, ...] = ("log", "pg_stat_statements", "csvlog", "sql")


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictResult:
    prediction: Prediction
    report: BacktestReport | None
    records: int
    prediction_id: int | None


async def log_records(dsn: str, table: str, *, since: dt.datetime | None = None) -> list[LogRecord]:
    """The proxy's query log for ``table`` (templates and bindings; raw SQL when it was kept)."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "SELECT logged_at, analyst, template, bindings::text, query_key, view_name, table_name,"
            " outcome, sql, calls"
            " FROM lapras.query_log WHERE table_name = %s AND (%s::timestamptz IS NULL OR logged_at >= %s)"
            " ORDER BY logged_at",
            (table, since, since),
        )
        rows = await cur.fetchall()
    return [
        LogRecord(
            time=at,
            analyst=analyst,
            sql=sql,
            template=None if sql else template,
            bindings=None if sql else tuple(json.loads(bindings)),
            key=key,
            view=view,
            table=tbl,
            outcome=outcome,
            calls=calls,
        )
        for at, analyst, template, bindings, key, view, tbl, outcome, sql, calls in rows
    ]


async def pg_stat_statements_records(dsn: str, now: dt.datetime) -> list[LogRecord]:
    """Normalised statements with their call counts (the extension must be installed)."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute("SELECT query, calls FROM pg_stat_statements")
        rows = [{"query": q, "calls": c} for q, c in await cur.fetchall()]
    # The counts cover the time since the last reset, which is not recorded: take them as
    # observed just before the predicted window starts.
    return parse_pg_stat_statements(rows, time=now - dt.timedelta(minutes=1))


def read_text_file(path: str | Path) -> str:
    """An administrator's text file, decoded as UTF-8: bytes that are not UTF-8 become
    U+FFFD (a log written in another server encoding still reads; the statements with such
    bytes then do not plan). :class:`UndefinedFile` when it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UndefinedFile(str(path), err.strerror or type(err).__name__) from None
    return data.decode("utf-8", errors="replace")


def file_records(source: Source, path: Path, now: dt.datetime) -> list[LogRecord]:
    text = read_text_file(path)
    if source == "csvlog":
        return parse_csvlog(text)
    # A dashboard file: its statements as if run once a day over the past week, so that they
    # recur (a file holds what a dashboard sends on each refresh).
    return [
        r
        for day in range(7, 0, -1)
        for r in parse_sql_file(text, time=(now - dt.timedelta(days=day)).timestamp())
    ]


async def save(
    dsn: str, table: str, source: str, prediction: Prediction, report: BacktestReport | None
) -> int:
    statements = [q.sql for q in prediction.queries]
    summary: dict[str, Any] = {
        "text": report.text() if report else None,
        "statements": len(statements),
        # what the cap chose for the epoch: `lapras epoch start --from-prediction` uses them
        "split": list(prediction.split) if prediction.split is not None else None,
        "stream_length": prediction.stream_length,
        "expected_fresh": prediction.expected_fresh,
        "decision": {t: d.text for t, d in prediction.caps.items()},
        "expected_mae": prediction.expected_mae,
        "expected_overlap": prediction.expected_overlap,
        "online_only_mae": prediction.online_only_mae,
        # each statement's probability: the default mode's release weighs them so
        "probabilities": [q.probability for q in prediction.queries],
    }
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        cur = await conn.execute(
            "INSERT INTO lapras.predictions (table_name, source, statements, report) VALUES (%s, %s, %s, %s) RETURNING id",
            (table, source, json.dumps(statements), json.dumps(summary)),
        )
        row = await cur.fetchone()
        await conn.commit()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True, slots=True, kw_only=True)
class Stored:
    """A stored prediction: its statements and what its cap chose for the epoch."""

    id: int
    statements: list[str]
    #: the probability of each statement (None for a prediction stored before they were)
    probabilities: list[float] | None
    split: tuple[float, float, float, float] | None
    stream_length: int | None
    #: E, the fresh answers the epoch is expected to make (None: stored before it was)
    expected_fresh: int | None
    expected_overlap: float | None


async def load(dsn: str, table: str, which: str) -> Stored:
    """A stored prediction: ``which`` is an id or ``latest``."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        if which == "latest":
            cur = await conn.execute(
                "SELECT id, statements::text, report::text FROM lapras.predictions"
                " WHERE table_name = %s ORDER BY id DESC LIMIT 1",
                (table,),
            )
        else:
            cur = await conn.execute(
                "SELECT id, statements::text, report::text FROM lapras.predictions"
                " WHERE table_name = %s AND id = %s",
                (table, int(which)),
            )
        row = await cur.fetchone()
    if row is None:
        raise LookupError(
            f"no stored prediction {which} for table {table} (run lapras predict first)"
        )
    report = json.loads(row[2]) or {}
    split = report.get("split")
    return Stored(
        id=int(row[0]),
        statements=list(json.loads(row[1])),
        probabilities=report.get("probabilities"),
        split=(split[0], split[1], split[2], split[3]) if split else None,
        stream_length=report.get("stream_length"),
        expected_fresh=report.get("expected_fresh"),
        expected_overlap=report.get("expected_overlap"),
    )


async def run(
    *,
    schema: Schema,
    dsn: str,
    table: str,
    source: Source,
    stats_dsn: str | None = None,
    path: Path | None,
    now: dt.datetime,
    epsilon: float,
    delta: float,
    accounting: Literal["basic", "gdp", "pure"] = "gdp",
    allocation: Literal["steady", "static"] = "steady",
    split: str | tuple[float, float, float, float] | None = None,
    weighted: bool = True,
    horizon_days: float = 1.0,
    stream_length: int | None = None,
    error_cap: bool = True,
    store: bool = True,
) -> PredictResult:
    """Read the source, predict P for the window starting ``now``, backtest, store.

    ``dsn``: the state database (the query log, stored predictions); ``stats_dsn``: the data
    database, where pg_stat_statements counts the statements (default ``dsn``).
    ``accounting``/``split``: the next epoch's, so that the cap prices P as the epoch will
    spend (``split`` None: the cap chooses it, and the stored prediction carries it);
    ``allocation``: the epoch's pacing (steady in the default mode, static in the paper's);
    ``weighted``: the epoch weighs P's statements by their probability (the default mode);
    ``stream_length``: S, None to take it from the log.
    ``error_cap``: keep a P only when a backtest on held-out windows of the log says it
    answers the epoch better than answering online (rewriter.predict_cap); without it P is
    every candidate.
    The backtest learns before the latest window and checks on it; a file of statements has
    no time, so none is made for ``sql`` (it would test the file on itself).
    """
    if source == "log":
        records: Sequence[LogRecord] = await log_records(dsn, table)
    elif source == "pg_stat_statements":
        records = await pg_stat_statements_records(stats_dsn or dsn, now)
    else:
        if path is None:
            raise ValueError(f"--source {source} needs --file")
        records = file_records(source, path, now)
    # The cap weighs the release's error against online answers paced over the next epoch's S.
    config = PredictConfig(
        epsilon=epsilon if error_cap else None,
        delta=delta if error_cap else None,
        horizon=horizon_days * DAY,
        stream_length=stream_length,
        accounting=accounting,
        allocation=allocation,
        split=split,
        weighted=weighted,
    )
    resolver = Resolver(schema)  # statements planned once, for the prediction and the backtest
    prediction = predict(records, schema, now=now.timestamp(), config=config, resolver=resolver)
    prediction = _only_table(prediction, table)
    report = None
    times = [r.time for r in records]
    if times and source in ("log", "csvlog"):
        cut = now.timestamp() - horizon_days * DAY
        if any(_seconds(t) < cut for t in times) and any(_seconds(t) >= cut for t in times):
            report = backtest(
                records,
                cut,
                schema,
                epsilon=epsilon,
                delta=delta,
                config=config,
                error_cap=error_cap,
                resolver=resolver,
            )
    prediction_id = await save(dsn, table, source, prediction, report) if store else None
    return PredictResult(
        prediction=prediction, report=report, records=len(records), prediction_id=prediction_id
    )


async def expected_from_log(dsn: str, table: str, *, window_days: float) -> int | None:
    """E for a new epoch of ``table`` (``rewriter.expected``, on ``rewriter.stream_length``'s
    windows): the distinct statements of the busiest window of ``window_days`` in the proxy's
    query log (windows ending at its latest statement), with a margin; None when the log holds
    no statement of the table."""
    from rewriter.expected import expected_fresh

    records = await log_records(dsn, table)
    return expected_fresh(records, window_seconds=window_days * 86_400.0)


def _seconds(t: Any) -> float:
    return t.timestamp() if isinstance(t, dt.datetime) else float(t)


def _only_table(prediction: Prediction, table: str) -> Prediction:
    from dataclasses import replace

    views = tuple(v for v in prediction.views if v.table.rsplit(".", 1)[-1] == table)
    return replace(prediction, views=views)


async def seed_log(
    dsn: str,
    schema: Schema,
    table: str,
    statements: Sequence[str],
    *,
    now: dt.datetime,
    days: int,
    analyst: str,
) -> int:
    """Write ``statements`` into the query log once a day for ``days`` days before ``now``
    (the demo's "yesterday's dashboard"); returns the number of rows written."""
    import rewriter

    rows = []
    for day in range(days, 0, -1):
        start = now - dt.timedelta(days=day) + dt.timedelta(hours=8)
        for i, sql in enumerate(statements):
            [st] = rewriter.classify(sql, schema)
            if not isinstance(st, rewriter.DPStatement) or st.plan is None:
                continue
            fp = st.plan.fingerprint
            rows.append(
                (
                    start + dt.timedelta(seconds=i),
                    analyst,
                    table,
                    st.plan.view,
                    fp.template,
                    json.dumps(list(fp.bindings), default=str),
                    st.plan.batch.key,
                    "seeded",
                    sql,
                )
            )
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO lapras.query_log (logged_at, analyst, table_name, view_name, template, bindings,"
                " query_key, outcome, sql) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
        await conn.commit()
    return len(rows)
