"""The ``lapras`` command line.

``lapras demo`` brings up the embedded PostgreSQL with Adult loaded and the proxy in front of
it; ``lapras serve`` runs the proxy from a configuration file; the other commands administer
epochs and budgets. Each subcommand is one function, registered in one table (``COMMANDS``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from dp.errors import LaprasError

_T = TypeVar("_T")

DEFAULT_DEMO_DIR = Path.home() / ".lapras" / "demo"
DEMO_DATABASE = "lapras_demo"
DEMO_USER, DEMO_PASSWORD = "analyst", "analyst"

EXAMPLES = (
    (
        "predicted: answered from the Matrix Mechanism release, no budget spent",
        "SELECT sex, count(*) FROM adult GROUP BY sex;",
    ),
    (
        "not predicted: answered online, paced by LAPRAS",
        "SELECT count(*) FROM adult WHERE age BETWEEN 30 AND 39 AND sex = 'Female';",
    ),
    ("refused: row-level access to a protected table", "SELECT * FROM adult LIMIT 5;"),
    (
        "user-level privacy: each user's check-ins count at most 50 times, noise scaled to that",
        "SELECT hour, count(*) FROM checkins GROUP BY hour ORDER BY hour;",
    ),
)


def _statements(path: Path) -> list[str]:
    """The statements of a .sql file, split as the proxy splits a Query (quotes, comments)."""
    from proxy.predicting import read_text_file
    from rewriter.split import split_statements

    return [p.text.strip() for p in split_statements(read_text_file(path)) if p.text.strip()]


async def _progress(label: str, work: Awaitable[_T], every: float = 5.0) -> _T:
    """Print ``label``, then a line every ``every`` seconds until ``work`` is done (the long
    steps: loading data, the histogram scan, solving the Matrix Mechanism strategy)."""
    print(f"{label} ...", flush=True)
    t0 = time.monotonic()

    async def tick() -> None:
        while True:
            await asyncio.sleep(every)
            print(f"      ... still working ({time.monotonic() - t0:.0f} s)", flush=True)

    ticker = asyncio.create_task(tick())
    try:
        result = await work
    finally:
        ticker.cancel()
    print(f"      done in {time.monotonic() - t0:.1f} s", flush=True)
    return result


# -- demo ----------------------------------------------------------------------------------------


def _demo_config(pg: Any, data_dir: Path, port: int) -> Path:
    """Write the demo's lapras.toml (a real configuration file the user can read and reuse)."""
    import sql_fixtures.adult as adult
    import sql_fixtures.gowalla as gowalla
    from proxy import provision

    text = (
        "# The demo's configuration, written by `lapras demo`. `lapras serve --config` reads the same format.\n"
        "# The protected tables' declarations (sql_fixtures/adult/lapras.toml, sql_fixtures/gowalla/lapras.toml)\n"
        "# come first: their top-level keys must precede every [section].\n\n"
        + adult.DECLARATION.read_text()
        + "\n"
        + gowalla.DECLARATION.read_text()
        + "\n[server]\n"
        f'listen = "127.0.0.1:{port}"\n'
        'auth = "scram-sha-256"\n\n'
        "[backend]\n"
        f'aggregator_dsn = "{pg.dsn(provision.AGGREGATOR, DEMO_DATABASE)}"\n'
        f'passthrough_dsn = "{pg.dsn(provision.PASSTHROUGH, DEMO_DATABASE)}"\n'
        f'state_dsn = "{pg.dsn(provision.AGGREGATOR, provision.state_database(DEMO_DATABASE))}"\n\n'
        "[[users]]\n"
        f'name = "{DEMO_USER}"\n'
        f'password = "{DEMO_PASSWORD}"\n\n'
        "[privacy]\n"
        "epsilon = 1.0\ndelta = 1e-3\nstream_length = 1000\n"
        "# The demo has one analyst: its NOTICEs say which answers came from the predicted release\n"
        "# and which are repeats. Off by default, so that analysts do not learn what colleagues asked.\n"
        "reveal_sources = true\n"
    )
    path = data_dir / "lapras.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def _demo(args: argparse.Namespace) -> int:
    from proxy.config import load_config
    from proxy.embedded import EmbeddedPostgres, provision_adult

    data_dir = Path(args.data_dir).expanduser()
    if args.reset and data_dir.exists():
        print(f"Removing {data_dir} (--reset) ...", flush=True)
        EmbeddedPostgres(data_dir).stop()
        shutil.rmtree(data_dir)
    print(f"[1/5] Starting the embedded PostgreSQL in {data_dir} ...", flush=True)
    pg = EmbeddedPostgres(data_dir).start()
    try:
        asyncio.run(
            _progress(
                "[2/5] Loading UCI Adult (32,561 rows) and the Gowalla check-ins (157,251 rows "
                "of 1,000 users) and provisioning the backend (roles, state database, "
                "catalogue lockdown)",
                asyncio.to_thread(provision_adult, pg, DEMO_DATABASE, (DEMO_USER,)),
            )
        )
        config = load_config(_demo_config(pg, data_dir, args.port))
        _run_server_loop(_demo_async(args, config))
    finally:
        print("Stopping the embedded PostgreSQL ...", flush=True)
        pg.stop()
    return 0


#: The fresh answers the demo's check-ins epoch expects (it has no query log to read them from).
DEMO_CHECKINS_EXPECTED = 50


async def _demo_async(args: argparse.Namespace, config: Any) -> None:
    import sql_fixtures.adult as adult
    from proxy.app import admin_service, engine_config, running, settle_heap

    async with admin_service(config) as service:
        status = await service.status("adult")
        if status is None:
            from proxy import predicting

            dashboard = _statements(adult.FOLDER / "dashboard.sql")
            now = datetime.datetime.now(datetime.UTC)
            dsn = config.backend.ledger_dsn
            seeded = await predicting.seed_log(
                dsn, config.schema, "adult", dashboard, now=now, days=7, analyst="dashboard"
            )
            adhoc = [
                f"SELECT count(*) FROM adult WHERE age BETWEEN {a} AND {a + 6}"
                for a in (23, 41, 58)
            ]
            seeded += await predicting.seed_log(
                dsn, config.schema, "adult", adhoc, now=now, days=1, analyst="ad hoc"
            )
            print(
                f"[3/5] Query log seeded with {seeded} statements: a week of a daily dashboard "
                "(sql_fixtures/adult/dashboard.sql) and a few one-off questions; predicting ...",
                flush=True,
            )
            result = await predicting.run(
                schema=config.schema,
                dsn=dsn,
                table="adult",
                source="log",
                path=None,
                now=now,
                epsilon=args.epsilon,
                delta=args.delta,
            )
            pred = result.prediction
            predicted = [q.sql for q in pred.queries]
            likely = sum(q.reason == "instance" for q in pred.queries)
            print(
                f"      lapras predict: {len(predicted) - likely} statements of the log and "
                f"{likely} likely unseen instances of its templates predicted (prediction "
                f"{result.prediction_id})"
            )
            if result.report is not None:
                r = result.report
                print(
                    f"      backtest on the last day: overlap rho = {r.rho:.2f}, "
                    f"false positives {r.false_positives} (lapras predict prints the full report)",
                    flush=True,
                )
            cfg = engine_config(
                config.privacy,
                epsilon=args.epsilon,
                delta=args.delta,
                # the demo plans S = 1000 online answers, far more than the log's 20 a day
                # that the prediction's split was chosen for: the configured split is kept
                stream_length=args.stream_length,
                # the fresh answers to expect: the log's busiest day, with a margin
                expected_fresh=await predicting.expected_from_log(dsn, "adult", window_days=1),
            )
            print(
                f"[4/5] Starting an epoch on adult: epsilon={cfg.epsilon}, delta={cfg.delta}, "
                f"S={cfg.stream_length}, E={cfg.expected} fresh answers expected, over the "
                "whole table",
                flush=True,
            )
            await _progress(
                "      pinning the data and releasing the Matrix Mechanism",
                service.start_epoch(
                    table="adult",
                    config=cfg,
                    predicted=predicted,
                    probabilities=[q.probability for q in pred.queries],
                    actor="lapras demo",
                    reason=f"demo, from prediction {result.prediction_id}",
                ),
            )
        else:
            print(
                "[3/5] Reusing the demo's data: an epoch is already active on adult "
                "(lapras demo --reset starts afresh)",
                flush=True,
            )
            print("[4/5] Epoch kept.", flush=True)
        if await service.status("checkins") is None:
            # delta well below 1 / (number of users), and within the table's lifetime_delta
            cfg = engine_config(
                config.privacy,
                epsilon=args.epsilon,
                delta=min(args.delta, 1e-5),
                stream_length=args.stream_length,
                # no log of the check-ins: a few dozen questions expected
                expected_fresh=DEMO_CHECKINS_EXPECTED,
            )
            bound = service.table("checkins").contribution.rows
            await _progress(
                f"      and a user-level epoch on checkins (epsilon={cfg.epsilon}, delta={cfg.delta} for each user, "
                f"at most {bound} check-ins of each counted)",
                service.start_epoch(
                    table="checkins", config=cfg, actor="lapras demo", reason="demo"
                ),
            )
    async with running(config) as app:
        settle_heap()
        port = app.server.port
        print(f"[5/5] LAPRAS proxy listening on 127.0.0.1:{port}\n")
        print("Connect with:\n")
        print(
            f"  psql 'postgresql://{DEMO_USER}:{DEMO_PASSWORD}@127.0.0.1:{port}/{DEMO_DATABASE}'\n"
        )
        print("and try:\n")
        for what, sql in EXAMPLES:
            print(f"  -- {what}\n  {sql}\n")
        print(f"Configuration: {config.source}. Press Ctrl-C to stop.", flush=True)
        await _wait_for_signal()


async def _wait_for_signal(*, quiet: bool = False) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if not quiet:
        print("\nShutting down ...", flush=True)


# -- serve and admin ----------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> Any:
    from proxy.config import load_config

    return load_config(Path(args.config))


def _serve(args: argparse.Namespace) -> int:
    from proxy.app import running, settle_heap

    config = _load(args)
    if config.server.workers > 1:
        return _serve_workers(args, config)

    async def serve() -> None:
        async with running(config) as app:
            settle_heap()
            print(f"LAPRAS proxy listening on {config.server.host}:{app.server.port}", flush=True)
            await _wait_for_signal()

    _run_server_loop(serve())
    return 0


def _serve_workers(args: argparse.Namespace, config: Any) -> int:
    """Run ``workers`` server processes on one port and supervise them: a signal stops them
    all (each shuts down gracefully); one that exits on its own stops the others, and the
    exit status says so (a supervisor such as systemd or Docker restarts the whole)."""
    import multiprocessing
    import tempfile

    from proxy.embedded import _free_port
    from proxy.wire.server import WorkerSlot

    n = config.server.workers
    port = config.server.port or _free_port()
    ctx = multiprocessing.get_context("spawn")
    connections = ctx.Value("i", 0)
    names = tuple(u.name for u in config.users)
    users = ctx.Array("i", len(names), lock=False)  # guarded by the lock of connections
    sockets = tempfile.mkdtemp(prefix="lapras-workers-")
    ready = [ctx.Event() for _ in range(n)]
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(
                args.config,
                port,
                WorkerSlot(
                    index=i,
                    count=n,
                    sockets=sockets,
                    connections=connections,
                    user_names=names,
                    users=users,
                ),
                ready[i],
                args.verbose,
            ),
            name=f"lapras-worker-{i}",
        )
        for i in range(n)
    ]
    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        for p in procs:
            p.start()
        announced = False
        while not stop:
            if not announced and all(e.is_set() for e in ready):
                print(
                    f"LAPRAS proxy listening on {config.server.host}:{port} ({n} worker processes)",
                    flush=True,
                )
                announced = True
            if any(not p.is_alive() for p in procs):
                status = 1
                print("lapras: a worker process exited; stopping the others", file=sys.stderr)
                break
            time.sleep(0.1)
        if stop:
            print("\nShutting down ...", flush=True)
    finally:
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGTERM)
        for p in procs:
            p.join(config.server.shutdown_grace + 10)
            if p.is_alive():
                p.kill()
                p.join()
        for sig, handler in old.items():
            signal.signal(sig, handler)
        shutil.rmtree(sockets, ignore_errors=True)
    return status


def _worker_main(config_path: str, port: int, slot: Any, ready: Any, verbose: bool) -> None:
    """One worker process of ``_serve_workers`` (a spawned process: imports afresh)."""
    import dataclasses

    from proxy.app import running, settle_heap
    from proxy.config import load_config

    _single_threaded_blas()
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format=f"%(levelname)s worker {slot.index} %(name)s: %(message)s",
    )
    config = load_config(Path(config_path))
    config = dataclasses.replace(config, server=dataclasses.replace(config.server, port=port))

    async def serve() -> None:
        async with running(config, worker=slot):
            settle_heap()
            ready.set()
            await _wait_for_signal(quiet=True)

    _run_server_loop(serve())


def _config_check(args: argparse.Namespace) -> int:
    from dp.errors import PrivacyParameterError
    from proxy.app import engine_config, log_retention
    from rewriter.errors import ConfigError

    config = _load(args)
    # [privacy] holds the defaults of a new epoch: check them now, not at `lapras epoch start`.
    try:
        cfg = engine_config(dict(config.privacy))
    except PrivacyParameterError as err:
        message = err.message.removeprefix("[privacy] has ")
        message = message if message is err.message else f"has {message}"
        raise ConfigError(f"{config.source}: [privacy]: {message}", hint=err.hint) from None
    except TypeError:
        raise ConfigError(
            f"{config.source}: [privacy]: a value has the wrong type",
            hint="see docs/configuration.md, section [privacy]",
        ) from None
    views = {v.name: v for d in config.schema.tables.values() for v in d.views}
    view = config.privacy.get("view")
    if view is not None and view not in views:
        raise ConfigError(
            f"{config.source}: privacy.view: {view!r} is not a view of any protected table",
            hint=f"declared views: {', '.join(sorted(views)) or 'none'}; without privacy.view "
            "an epoch covers the whole table",
        )
    for flag in ("log_sql", "reveal_sources"):
        if not isinstance(config.privacy.get(flag, False), bool):
            raise ConfigError(f"{config.source}: privacy.{flag}: must be true or false")
    try:
        log_retention(dict(config.privacy))
    except ConfigError as err:
        raise ConfigError(f"{config.source}: {err.message}") from None
    tables = ", ".join(
        f"{t} ({_count(len(d.attributes), 'attribute')}, {_count(len(d.views), 'view')})"
        for t, d in config.schema.tables.items()
    )
    print(f"{config.source}: OK")
    print(
        f"  listen {config.server.host}:{config.server.port}, auth {config.server.auth}, "
        f"{len(config.users)} user(s)" + (", TLS" if config.server.tls_cert else "")
    )
    print(f"  protected tables: {tables or 'none'}")
    print(f"  DP statements' work: {config.server.dp.summary()}")
    print(
        f"  epoch defaults: epsilon={cfg.epsilon}, delta={cfg.delta}, S={cfg.stream_length}, "
        f"mode={cfg.mode}, accountant={cfg.accountant_kind.value}, split={cfg.split}, "
        f"allocation={cfg.allocation_kind.value}"
        + (f", restricted to view {view}" if view else ", over the whole table")
    )
    if view is not None:
        print(
            f"  note: privacy.view restricts new epochs to the columns {', '.join(views[view].names)}; "
            "remove it (or pass --view to lapras epoch start only when wanted) for epochs over "
            "every declared column"
        )
    for line in unit_bound_notes(config.schema):
        print(f"  {line}")
    return 0


def unit_bound_notes(schema: Any) -> list[str]:
    """What each user-level table's bound on a unit's rows keeps of the data, from the
    declaration alone: with ``expected_rows_per_unit`` (a unit's rows on average, the
    administrator's figure), a bound of k keeps at most k / average of the rows (a unit keeps
    min(its rows, k), never above k: the share is at most k over the average); a warning when
    that is under half. The data is not read."""
    out = []
    for name, table in schema.tables.items():
        unit = table.unit
        if unit is None:
            continue
        k = unit.contribution.rows
        if unit.expected_rows is None:
            out.append(
                f"note: {name} counts at most {k} rows of each {unit.column} (max_rows_per_unit); "
                f"declare expected_rows_per_unit (a {unit.column}'s rows on average) to check how "
                "much of the data that keeps (docs/privacy.md, section 1a)"
            )
            continue
        share = min(1.0, k / unit.expected_rows)
        if share < 0.5:
            out.append(
                f"warning: {name}: max_rows_per_unit = {k} keeps at most {100 * share:.0f}% of its "
                f"rows (a {unit.column} has {unit.expected_rows:g} on average, "
                "expected_rows_per_unit): every count and sum over it counts at most that share; "
                "a larger bound keeps more rows and adds noise in proportion (docs/privacy.md, "
                "section 1a, choosing the bound)"
            )
        elif share < 1.0:
            out.append(
                f"note: {name}: max_rows_per_unit = {k} keeps at most {100 * share:.0f}% of its "
                f"rows ({unit.expected_rows:g} per {unit.column} on average)"
            )
        else:
            out.append(
                f"note: {name}: max_rows_per_unit = {k} is above the {unit.expected_rows:g} rows "
                f"of a {unit.column} on average; a {unit.column} with more than {k} still loses "
                "the rest"
            )
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _table(config: Any, name: str) -> Any:
    """The declaration of a protected table named on the command line."""
    decl = config.schema.tables.get(name)
    if decl is None:
        raise SystemExit(f"lapras: {name} is not a protected table of {config.source}")
    return decl


def _stored_prediction(config: Any, table: str, which: str) -> Any:
    """A stored prediction of ``table`` (an id or ``latest``), or exit with the reason."""
    from proxy import predicting

    try:
        return asyncio.run(predicting.load(config.backend.ledger_dsn, table, which))
    except LookupError as exc:
        raise SystemExit(f"lapras: {exc}") from None


def _epoch_start(args: argparse.Namespace) -> int:
    from proxy.app import admin_service, engine_config

    config = _load(args)
    _table(config, args.table)  # exits with a message for an unknown table
    view = args.view or config.privacy.get("view")
    over = f"view {view}" if view else "the whole table"
    predicted = _statements(Path(args.predicted)) if args.predicted else []
    probabilities = None  # a file of statements weighs them alike
    stored_e: tuple[int, int] | None = None  # (prediction, E) of a stored prediction
    if args.from_prediction:
        if args.predicted:
            raise SystemExit("lapras: give either --predicted or --from-prediction, not both")
        stored = _stored_prediction(config, args.table, args.from_prediction)
        predicted, probabilities = stored.statements, stored.probabilities
        args.reason = args.reason or f"from prediction {stored.id}"
        # what the prediction's cap chose, unless set on the command line or in [privacy]
        if args.split is None and "split" not in config.privacy and stored.split is not None:
            args.split = stored.split
        if (
            args.stream_length is None
            and "stream_length" not in config.privacy
            and stored.stream_length is not None
        ):
            args.stream_length = stored.stream_length  # S estimated from the prediction's log
        if stored.expected_fresh is not None:
            stored_e = (stored.id, stored.expected_fresh)
    e_source = "as configured"
    if args.expected_fresh is None and "expected_fresh" not in config.privacy and stored_e:
        # E from the prediction: its log's windows less what its P answers
        args.expected_fresh = stored_e[1]
        e_source = f"from prediction {stored_e[0]}"
    elif args.expected_fresh is None and "expected_fresh" not in config.privacy:
        args.expected_fresh = _expected_from_log(config, args.table, args.epoch_days)
        e_source = "from the query log" if args.expected_fresh is not None else "= S"
    cfg = engine_config(
        config.privacy,
        epsilon=args.epsilon,
        delta=args.delta,
        stream_length=args.stream_length,
        mode=args.mode,
        split=args.split,
        allocation=args.allocation,
        accountant=args.accountant,
        expected_fresh=args.expected_fresh,
    )

    async def start() -> int:
        async with admin_service(config) as service:
            return await _progress(
                f"Pinning {args.table} over {over} on the backend and "
                f"releasing the Matrix Mechanism for {len(predicted)} predicted statement(s)",
                service.start_epoch(
                    table=args.table,
                    view=view,
                    config=cfg,
                    predicted=predicted,
                    probabilities=probabilities,
                    actor=args.actor,
                    reason=args.reason,
                ),
            )

    epoch_id = asyncio.run(start())
    print(
        f"epoch {epoch_id} started on {args.table} ({over}): epsilon={cfg.epsilon}, delta={cfg.delta}, "
        f"S={cfg.stream_length}, mode={cfg.mode}, accountant={cfg.accountant_kind.value}, "
        f"{len(predicted)} predicted statement(s)"
    )
    if cfg.allocation_kind.value == "steady":
        print(f"  expected fresh answers E = {cfg.expected} ({e_source}); steady pacing")
    return 0


def _expected_from_log(config: Any, table: str, days: float) -> int | None:
    """E from the proxy's query log (the busiest window of ``days``, with a margin), or None
    (S then) when the log is empty or cannot be read."""
    import psycopg

    from proxy import predicting

    try:
        return asyncio.run(
            predicting.expected_from_log(config.backend.ledger_dsn, table, window_days=days)
        )
    except psycopg.Error:  # (no query log yet: the state database was never served)
        return None


def _predict(args: argparse.Namespace) -> int:
    from proxy import predicting
    from proxy.app import engine_config
    from proxy.ledger import PgLedger
    from rewriter import stream_length

    if args.source in ("csvlog", "sql") and not args.file:
        raise SystemExit(f"lapras: --source {args.source} needs --file FILE")
    config = _load(args)
    _table(config, args.table)
    cfg = engine_config(config.privacy, epsilon=args.epsilon, delta=args.delta)
    # the cap prices P as the next epoch will spend: its accountant, and its split when one
    # is configured (else the cap chooses it); S from the log unless configured
    kinds: dict[str, Literal["basic", "gdp", "pure"]] = {
        "basic": "basic",
        "gdp": "gdp",
        "pure": "pure",
    }
    accounting = kinds[cfg.accountant_kind.value]
    split = config.privacy.get("split")
    now = (
        datetime.datetime.fromisoformat(args.now)
        if args.now
        else datetime.datetime.now(datetime.UTC)
    )
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)

    async def go() -> predicting.PredictResult:
        ledger = await PgLedger.connect(config.backend.ledger_dsn)  # creates schema lapras
        await ledger.close()
        return await predicting.run(
            schema=config.schema,
            dsn=config.backend.ledger_dsn,
            stats_dsn=config.backend.aggregator_dsn,
            table=args.table,
            source=args.source,
            path=Path(args.file) if args.file else None,
            now=now,
            epsilon=cfg.epsilon,
            delta=cfg.delta,
            accounting=accounting,
            allocation="steady" if cfg.allocation_kind.value == "steady" else "static",
            split=tuple(split) if isinstance(split, list) else split,
            weighted=cfg.mode != "paper",  # the release the epoch will make
            stream_length=args.stream_length,  # None: S from the log
            error_cap=not args.no_error_cap,
            horizon_days=args.horizon_days,
            store=not args.dry_run,
        )

    result = asyncio.run(go())
    p = result.prediction
    print(
        f"{result.records} log record(s) read from {args.source}; {p.unresolved} could not be planned"
    )
    print(f"predicted set P for {args.table}: {len(p.queries)} statement(s)")
    rec = p.recurrence
    if rec is not None:
        learned = (
            f"learned from {rec.origins} earlier window(s) of the log: a statement seen before "
            f"was asked again in {rec.rate:.0%} of the cases"
            if rec.origins
            else "the log has one window: nothing is known of recurrence across windows "
            "(a statement asked c times gets c / (c + 3))"
        )
        print(f"  recurrence {learned}")
        if rec.templates is not None:
            print(
                f"  unseen instances of templates: at those windows, {rec.instance_hits} of the "
                f"instances the slot model proposed were asked where it expected "
                f"{rec.instance_expected:.1f}: their probabilities are scaled by "
                f"{rec.instance_rate:.2g} (at most 1)"
            )
    for d in p.caps.values():
        if d.table.rsplit(".", 1)[-1] != args.table:
            continue
        print(f"  {d.text}")
        if d.estimate is not None:
            counts = d.estimate.counts
            level = "the mean" if d.level is None else f"the {d.level:.0%} quantile"
            s_from = (
                "as set"
                if args.stream_length is not None
                else f"the busiest window x {stream_length.MARGIN:g}"
            )
            print(
                f"  the log's {len(counts)} active window(s) of {args.horizon_days:g} day(s) "
                f"asked {min(counts)} to {max(counts)} distinct statements (mean "
                f"{d.estimate.typical:.1f}): S = {d.stream_length} fresh answers at most "
                f"({s_from}), E = {d.expected_fresh} expected ({level} of the "
                f"windows, less what P answers; {d.online_expected_fresh} with P empty)"
            )
    if p.split is not None:
        mae = "-" if p.expected_mae is None else f"{p.expected_mae:.3g}"
        only = "-" if p.online_only_mae is None else f"{p.online_only_mae:.3g}"
        print(
            f"  for the next epoch: S = {p.stream_length}, E = {p.expected_fresh}, split "
            f"{', '.join(f'{f:.3g}' for f in p.split)} (release, warm-up, online, reserve); "
            f"MAE in the held-out windows {mae} with P, {only} with everything online"
        )
    for v in p.views:
        print(
            f"  view {v.view}: {len(v.queries)} statement(s), {v.batch.num_queries} linear queries"
        )
    _print_templates(p)
    for q in sorted(p.queries, key=lambda q: -q.probability)[:20]:
        seen = (
            "a likely instance of a template, never asked as such"
            if q.reason == "instance"
            else f"seen in {q.windows} window(s) by {q.analysts} analyst(s)"
        )
        print(f"    p={q.probability:.2f}  {seen}, {q.batch.num_queries} row(s): {q.sql}")
    if len(p.queries) > 20:
        print(f"    ... and {len(p.queries) - 20} more (--out writes them all)")
    for u in p.unbound[:10]:
        print(f"  seen without bindings (not in P): {u.template}  [{u.calls} calls]")
    if result.report is not None:
        print("backtest on the latest window:")
        print("  " + result.report.text().replace("\n", "\n  "))
    if args.out:
        Path(args.out).write_text(p.sql_script())
        print(f"P written to {args.out}")
    if result.prediction_id is not None:
        print(
            f"stored as prediction {result.prediction_id}: "
            f"lapras epoch start --table {args.table} --from-prediction {result.prediction_id}"
        )
    return 0


def _print_templates(p: Any) -> None:
    """P's templates, most expected first: what each is worth to the next epoch when the
    error-aware cap priced P (rewriter.predict.template_values), else what it holds."""
    from rewriter.predict import template_values

    values = template_values(p)
    for v in values:
        print(
            f"  template {v.template}: {v.asked} statement(s) asked and {v.instances} likely "
            f"instance(s) in P; asked in up to {v.windows} window(s) by up to {v.analysts} "
            f"analyst(s); {v.expected:.2f} of them expected next window; "
            f"{v.budget_share:.1%} of the budget; expected MAE {v.mae_with:.3g} with it, "
            f"{v.mae_without:.3g} without"
        )
    if values:
        return
    templates: dict[str, list[Any]] = {}
    for q in p.queries:
        templates.setdefault(q.template, []).append(q)
    by_weight = sorted(templates.items(), key=lambda kv: -sum(q.probability for q in kv[1]))
    for tmpl, qs in by_weight[:10]:
        inst = sum(q.reason == "instance" for q in qs)
        print(
            f"  template {tmpl}: {len(qs) - inst} statement(s) asked and {inst} likely "
            f"instance(s) in P, expected {sum(q.probability for q in qs):.2f} of them next window"
        )


def _processes(n: int) -> str:
    return f"{n} proxy process{'' if n == 1 else 'es'}"


def _epoch_close(args: argparse.Namespace) -> int:
    """Close the epoch, then report the proxy processes that were serving it: each one that
    confirmed answers nothing more from it, repeats included (proxy/epoch_watch.py)."""
    from proxy.app import admin_service
    from proxy.epoch_watch import CLOSE_WAIT

    config = _load(args)
    wait = CLOSE_WAIT if args.wait is None else max(0.0, args.wait)

    async def close() -> Any:
        async with admin_service(config) as service:
            return await service.close_epoch(
                args.table, actor=args.actor, reason=args.reason, wait=wait
            )

    row = asyncio.run(close())
    if row is None:
        print(f"no active epoch on {args.table}")
        return 0
    confirmed = row.serving - row.unconfirmed
    print(f"epoch {row.id} on {args.table} closed")
    if row.serving == 0:
        print("no proxy process was serving it")
    elif confirmed:
        print(f"{_processes(confirmed)} serving it confirmed: none answers from it any more")
    if row.unconfirmed:
        print(
            f"lapras: warning: {_processes(row.unconfirmed)} serving it did not confirm within "
            f"{wait:g} s: charges on the epoch are refused, but it may still serve stored answers "
            "until it receives the close (see pg_stat_activity, application_name "
            "'lapras epoch watch', on the state database)",
            file=sys.stderr,
        )
    return 0


def _budget(args: argparse.Namespace) -> int:
    from proxy.app import admin_service
    from proxy.epochs import coverage

    config = _load(args)
    tables = [args.table] if args.table else sorted(config.schema.tables)

    async def show() -> list[dict[str, Any]]:
        out = []
        async with admin_service(config) as service:
            for table in tables:
                entry: dict[str, Any] = {"table": table, "epoch": None}
                cap = service.lifetime(table)
                if cap is not None:
                    known = await service.ledger.lifetime(cap)
                    entry["lifetime"] = {
                        "group": known.group,
                        "epochs": known.epochs,
                        "committed_epsilon": known.committed_epsilon,
                        "committed_delta": known.committed_delta,
                        "epsilon": known.epsilon,
                        "delta": known.delta,
                    }
                st = await service.status(table)
                if st is not None:
                    row, status = st
                    entry.update(
                        {
                            "epoch": row.id,
                            "view": row.view_name,
                            "started_at": row.started_at,
                            "started_by": row.started_by,
                            "unit": status.unit,
                            "total": status.total,
                            "spent": status.spent,
                            "spent_epsilon": status.spent_epsilon,
                            "online_releases": status.online_releases,
                            "stream_length": status.stream_length,
                            "position": status.position,
                            "b_est": status.b_est,
                            "reserve": status.reserve,
                            "expected_fresh": status.expected_fresh,
                            "next_std_error": status.next_std_error,
                        }
                    )
                out.append(entry)
        return out

    rows = asyncio.run(show())
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        if r["epoch"] is None:
            print(f"{r['table']}: no active epoch")
        else:
            pct = 100 * r["spent"] / r["total"] if r["total"] else 0.0
            print(
                f"{r['table']}: epoch {r['epoch']} ({coverage(r['view'])}, started {r['started_at']} by {r['started_by']})"
            )
            in_eps = (
                ""
                if r["unit"] == "epsilon"
                else f" = epsilon {r['spent_epsilon']:.4g} at the epoch's delta"
            )
            print(
                f"  spent {r['spent']:.6g} of {r['total']:.6g} {r['unit']} ({pct:.1f}%){in_eps}, reserve {r['reserve']:.4g}"
            )
            estimate = (
                f"expected fresh answers {r['expected_fresh']}"
                if r["expected_fresh"] is not None
                else f"B_est {'-' if r['b_est'] is None else format(r['b_est'], '.1f')}"
            )
            print(
                f"  online releases {r['online_releases']} of {r['stream_length']}, stream position {r['position']}, "
                f"{estimate}"
            )
            nxt = r["next_std_error"]
            print(
                "  next fresh answer: "
                + (
                    "none (a limit of the epoch is reached)"
                    if nxt is None
                    else f"standard error of a count {nxt:.4g}"
                )
            )
        life = r.get("lifetime")
        if life is not None:
            print(
                f"  lifetime budget of {life['group']}: {life['epochs']} epoch(s) committed epsilon "
                f"{life['committed_epsilon']:.6g} of {life['epsilon']:.6g}, delta "
                f"{life['committed_delta']:.3g} of {life['delta']:.3g}"
            )
    return 0


def _provision(args: argparse.Namespace) -> int:
    from psycopg.conninfo import conninfo_to_dict

    from proxy import provision

    if args.check:
        return _provision_check(args)
    admin_dsn = os.environ[args.admin_dsn_env] if args.admin_dsn_env else args.admin_dsn
    if not admin_dsn:
        raise SystemExit("lapras provision: give --admin-dsn or --admin-dsn-env")
    env = {
        provision.AGGREGATOR: "LAPRAS_AGGREGATOR_PASSWORD",
        provision.PASSTHROUGH: "LAPRAS_PASSTHROUGH_PASSWORD",
    }
    shown: dict[str, str] = {}
    if args.config:
        config = _load(args)
        backend = config.backend
        database = args.database or backend.data_database
        passwords = {
            role: str(conninfo_to_dict(dsn).get("password") or "")
            for role, dsn in (
                (provision.AGGREGATOR, backend.aggregator_dsn),
                (provision.PASSTHROUGH, backend.passthrough_dsn),
            )
        }
        protected = config.protected_tables
        analysts = tuple((u.name, u.backend_role) for u in config.users)
        state = backend.state_database
    else:
        if not args.database:
            raise SystemExit("lapras provision: give --config, or --database")
        database = args.database
        passwords = {}
        for role, var in env.items():
            given = os.environ.get(var)
            passwords[role] = given or secrets.token_urlsafe(18)
            shown[role] = f"from ${var}" if given else passwords[role]
        protected = tuple(args.protected or ["public.adult"])
        analysts = ()
        state = None
    plan = provision.Plan(
        database=database,
        protected=protected,
        aggregator_password=passwords[provision.AGGREGATOR],
        passthrough_password=passwords[provision.PASSTHROUGH],
        analysts=analysts,
        state_database=args.state_database or state,
        retire_others=bool(args.config),  # the [[users]] are all the analysts
    )
    left = provision.provision(admin_dsn, plan, load=args.load, report=print)
    host = conninfo_to_dict(admin_dsn).get("host", "localhost")
    for role, text in shown.items():
        print(f"role {role} on {host}/{database}: password {text}")
    for user, role in analysts:
        print(f"role {role} (user {user}): password derived from the passthrough role's")
    where = conninfo_to_dict(admin_dsn)
    state_dsn = (
        f"postgresql://{provision.AGGREGATOR}:<password>@{where.get('host', 'localhost')}:"
        f"{where.get('port', 5432)}/{plan.state}"
    )
    print(
        f"state database {plan.state} (only {provision.AGGREGATOR} connects): "
        f'[backend] state_dsn = "{state_dsn}"'
    )
    for item in left:
        print(f"not changed (needs the catalogue's owner): {item}", file=sys.stderr)
    if args.config:
        return _provision_check(args)
    return 1 if left else 0


def _provision_check(args: argparse.Namespace) -> int:
    """Print every open route (exit 1), or that there is none (exit 0)."""
    from proxy.app import lockdown_findings

    if not args.config:
        raise SystemExit("lapras provision --check needs --config")
    config = _load(args)
    findings = lockdown_findings(config, verify=True)
    for f in findings:
        print(f"open: {f}")
    print(
        f"{config.source}: {len(findings)} open route(s) to exact statistics or around the proxy"
        if findings
        else f"{config.source}: every route to an exact statistic is closed"
        f" ({len(config.users)} analyst role(s) checked)"
    )
    return 1 if findings else 0


def _report(args: argparse.Namespace) -> int:
    from proxy import report

    config = _load(args)
    decl = _table(config, args.table)
    which = "the active epoch" if args.epoch is None else f"epoch {args.epoch}"
    print(f"[1/3] Reading {which} of {decl.name} from the ledger ...", flush=True)
    row, events = asyncio.run(report.load_epoch(config.backend.ledger_dsn, decl.name, args.epoch))
    print(f"[2/3] Replaying {len(events)} events of epoch {row.id} ...", flush=True)
    out, html_out = Path(args.out), Path(args.html) if args.html else None
    print(f"[3/3] Drawing {out}" + (f" and {html_out}" if html_out else "") + " ...", flush=True)
    expected = None
    if args.prediction:
        expected = _stored_prediction(config, decl.name, args.prediction).expected_overlap
    tl = report.write_report(row, events, out, html_out, predicted_overlap=expected)
    st = tl.status
    print(
        f"epoch {row.id} on {decl.name}: spent {st.spent:.6g} of {st.total:.6g} {st.unit}, "
        f"{len(tl.answers)} answered statement(s), {st.online_releases} online release(s)"
    )
    series = tl.overlap()
    if series:
        predicted = "" if expected is None else f" (the prediction expected {expected:.2f})"
        print(f"overlap: {series[-1][1]:.2f} of the answered statements were in P{predicted}")
    return 0


# -- the table of commands -----------------------------------------------------------------------


def _add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "-c",
        default="lapras.toml",
        help="the configuration file (default: %(default)s)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lapras",
        description="LAPRAS proxy: differentially private answers to aggregate SQL, over the PostgreSQL wire protocol.",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="log more")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run the demo: embedded PostgreSQL + UCI Adult + the proxy",
        description="Start an embedded PostgreSQL, load UCI Adult, start an epoch from "
        "yesterday's dashboard and serve the proxy on 127.0.0.1.",
    )
    demo.add_argument(
        "--data-dir", default=str(DEFAULT_DEMO_DIR), help="the demo's data (default: %(default)s)"
    )
    demo.add_argument(
        "--reset", action="store_true", help="delete the demo's data first and start afresh"
    )
    demo.add_argument(
        "--port", type=int, default=6432, help="the proxy's port (default: %(default)s)"
    )
    demo.add_argument(
        "--epsilon", type=float, default=1.0, help="privacy budget epsilon (default: %(default)s)"
    )
    demo.add_argument(
        "--delta", type=float, default=1e-3, help="privacy budget delta (default: %(default)s)"
    )
    demo.add_argument(
        "--stream-length",
        type=int,
        default=1000,
        help="planned number of online answers S (default: %(default)s)",
    )
    demo.set_defaults(func=_demo)

    serve = sub.add_parser("serve", help="run the proxy from a configuration file")
    _add_config(serve)
    serve.set_defaults(func=_serve)

    config = sub.add_parser("config", help="configuration tools").add_subparsers(
        dest="sub", required=True, metavar="ACTION"
    )
    check = config.add_parser("check", help="validate a configuration file and explain any error")
    _add_config(check)
    check.set_defaults(func=_config_check)

    epoch = sub.add_parser("epoch", help="start or close a privacy epoch").add_subparsers(
        dest="sub", required=True, metavar="ACTION"
    )
    start = epoch.add_parser(
        "start", help="start an epoch over a protected table (an explicit, logged act)"
    )
    _add_config(start)
    start.add_argument("--table", required=True, help="the protected table")
    start.add_argument(
        "--view",
        help="restrict the epoch to a declared view's columns (default: [privacy].view, or "
        "none: the epoch covers every declared column of the table)",
    )
    start.add_argument(
        "--predicted", help="a .sql file of predicted statements (P), e.g. from lapras predict"
    )
    start.add_argument(
        "--from-prediction",
        metavar="ID",
        help="use a prediction stored by lapras predict (its id, or 'latest')",
    )
    start.add_argument("--epsilon", type=float, help="privacy budget epsilon (default: [privacy])")
    start.add_argument("--delta", type=float, help="privacy budget delta (default: [privacy])")
    start.add_argument("--stream-length", type=int, help="S: the planned number of online answers")
    start.add_argument(
        "--mode",
        choices=("paper", "default"),
        help="paper: Algorithm 1 as written (docs/privacy.md)",
    )
    start.add_argument(
        "--split",
        choices=("equal", "matrix-heavy", "query-heavy", "reserve-heavy"),
        help="how the budget is divided between the release, the online answers and the reserve",
    )
    start.add_argument(
        "--allocation",
        choices=("static", "smooth", "steady"),
        help="LAPRAS pacing of the online budget (default mode: steady; paper: static)",
    )
    start.add_argument(
        "--expected-fresh",
        type=int,
        help="E: the fresh (online) answers the epoch expects; the steady pacing spreads the "
        "online budget over them (default: [privacy] expected_fresh, else the query log's "
        "distinct statements of its busiest --epoch-days window, x1.5, else S)",
    )
    start.add_argument(
        "--epoch-days",
        type=float,
        default=1.0,
        help="how long the epoch is expected to run, for E from the query log "
        "(default: %(default)s)",
    )
    start.add_argument(
        "--accountant",
        choices=("basic", "gdp", "pure"),
        help="how releases compose (pure: delta=0)",
    )
    start.add_argument(
        "--actor", default=os.environ.get("USER", "admin"), help="who starts it (logged)"
    )
    start.add_argument("--reason", default="", help="why (logged)")
    start.set_defaults(func=_epoch_start)
    close = epoch.add_parser("close", help="close the active epoch of a table")
    _add_config(close)
    close.add_argument("--table", required=True, help="the protected table")
    close.add_argument(
        "--actor", default=os.environ.get("USER", "admin"), help="who closes it (logged)"
    )
    close.add_argument("--reason", default="", help="why (logged)")
    close.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long to wait for the running proxies to confirm (default 10)",
    )
    close.set_defaults(func=_epoch_close)
    show = epoch.add_parser(
        "show", help="the active epochs and their budgets (same as lapras budget)"
    )
    _add_config(show)
    show.add_argument("--table", help="only this protected table")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_budget)

    pred = sub.add_parser(
        "predict",
        help="predict the next window's queries from a log (the set P of the next epoch)",
        description="Read a query log, propose P, backtest it on the latest window and store it "
        "in lapras.predictions.",
    )
    _add_config(pred)
    pred.add_argument("--table", required=True, help="the protected table")
    pred.add_argument(
        "--source",
        choices=("log", "pg_stat_statements", "csvlog", "sql"),
        default="log",
        help="the proxy's query log (default), pg_stat_statements, a csvlog file or a .sql file",
    )
    pred.add_argument("--file", help="the csvlog or .sql file (with --source csvlog|sql)")
    pred.add_argument("--now", help="start of the predicted window, ISO 8601 (default: now)")
    pred.add_argument(
        "--horizon-days",
        type=float,
        default=1.0,
        help="the epoch's length: the window P is predicted for, and the windows S, E and the "
        "held-out backtest are measured in (default: %(default)s)",
    )
    pred.add_argument("--epsilon", type=float, help="budget of the next epoch (default: [privacy])")
    pred.add_argument("--delta", type=float, help="(default: [privacy])")
    pred.add_argument(
        "--stream-length",
        type=int,
        help="S, the most fresh answers of the next epoch (default: the log's busiest window "
        "of --horizon-days, x1.5)",
    )
    pred.add_argument("--out", help="also write P as a .sql file")
    pred.add_argument("--dry-run", action="store_true", help="do not store the prediction")
    pred.add_argument(
        "--no-error-cap",
        action="store_true",
        help="keep every candidate (default: a P only when a backtest on held-out windows of "
        "the log says it answers better than everything online)",
    )
    pred.set_defaults(func=_predict)

    budget = sub.add_parser("budget", help="budget spent and left per protected table")
    _add_config(budget)
    budget.add_argument("--table", help="only this protected table")
    budget.add_argument("--json", action="store_true", help="machine-readable output")
    budget.set_defaults(func=_budget)

    rep = sub.add_parser(
        "report",
        help="draw an epoch: budget over the stream, the estimator, standard errors (PNG, HTML)",
        description="Read an epoch's events from the ledger and draw its budget over the stream "
        "(Matrix Mechanism, online, reserve), the estimator's B_hat and B_est, and every answer's "
        "standard error. Public values only. Needs matplotlib: pip install -e '.[report]'.",
    )
    _add_config(rep)
    rep.add_argument("--table", required=True, help="the protected table")
    rep.add_argument("--epoch", type=int, help="the epoch id (default: the table's active epoch)")
    rep.add_argument("--out", default="epoch.png", help="the PNG to write (default: %(default)s)")
    rep.add_argument("--html", help="also write a self-contained HTML page here")
    rep.add_argument(
        "--prediction",
        help="the stored prediction (id or latest) the epoch was started from: its expected "
        "overlap is drawn against the realised one",
    )
    rep.set_defaults(func=_report)

    prov = sub.add_parser(
        "provision",
        help="create the roles, the state database and the catalogue lockdown; --check lists open routes",
        description="As an administrator: create (or update) the aggregator and passthrough roles, "
        "one backend role per [[users]] entry, the state database, and take every exact "
        "statistic away from PUBLIC. With --check (no administrator needed): list every route "
        "to an exact statistic that is still open; exit status 1 if there is one.",
    )
    prov.add_argument("--config", "-c", help="the configuration to provision for (recommended)")
    prov.add_argument("--admin-dsn", help="a superuser DSN of the backend")
    prov.add_argument("--admin-dsn-env", help="read the admin DSN from this environment variable")
    prov.add_argument(
        "--database", help="the database to create or use (default: the passthrough DSN's)"
    )
    prov.add_argument(
        "--state-database",
        help="the proxy's own database (default: state_dsn's, else <database>_lapras)",
    )
    prov.add_argument(
        "--load",
        action="append",
        default=[],
        choices=("adult", "gowalla"),
        help="load a shipped dataset",
    )
    prov.add_argument(
        "--protected", action="append", help="schema.table to protect (default: public.adult)"
    )
    prov.add_argument(
        "--check", action="store_true", help="only list the routes still open (needs --config)"
    )
    prov.set_defaults(func=_provision)
    return parser


def _run_server_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the server's event loop: uvloop when installed (the ``fast`` extra; about half the
    per-message cost of the standard loop), unless LAPRAS_EVENT_LOOP=asyncio."""
    if os.environ.get("LAPRAS_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(main)
            return
    asyncio.run(main)


def _single_threaded_blas() -> None:
    """One BLAS thread: the engine's matrices are small, and on a shared machine a
    multi-threaded OpenBLAS spins against PostgreSQL and the clients (several times slower,
    measured). Must run before numpy is first imported; an explicit setting wins."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def main(argv: Sequence[str] | None = None) -> int:
    _single_threaded_blas()
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # it warns on what the rewriter refuses
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except LaprasError as err:
        print(f"lapras: {err.message}", file=sys.stderr)
        if err.hint:
            print(f"hint: {err.hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
