"""The ``lapras`` command line.

``lapras demo`` brings up the embedded PostgreSQL with Adult loaded and the proxy in front of
it; ``lapras serve`` runs the proxy from a configuration file. Each subcommand is one function,
registered in one table.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

DEFAULT_DEMO_DIR = Path.home() / ".lapras" / "demo"


def _demo(args: argparse.Namespace) -> int:
    import shutil

    from proxy import provision
    from proxy.embedded import EmbeddedPostgres, provision_adult

    data_dir = Path(args.data_dir)
    if args.reset and data_dir.exists():
        EmbeddedPostgres(data_dir).stop()
        shutil.rmtree(data_dir)
    print(f"Starting the embedded PostgreSQL in {data_dir} ...", flush=True)
    pg = EmbeddedPostgres(data_dir).start()
    try:
        print("Loading UCI Adult (32,561 rows) and provisioning roles ...", flush=True)
        provision_adult(pg, args.database)
        print()
        print("The backend is ready. Connect to it directly (as the aggregator role) with:")
        print(f"  psql '{pg.dsn(provision.AGGREGATOR, args.database)}'")
        print()
        print("Press Ctrl-C to stop.", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    finally:
        print("\nStopping the embedded PostgreSQL ...", flush=True)
        pg.stop()
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lapras",
        description="LAPRAS proxy: differentially private answers to aggregate SQL, "
        "over the PostgreSQL wire protocol.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run the demo on an embedded PostgreSQL with UCI Adult",
        description="Start an embedded PostgreSQL, load UCI Adult and serve the proxy in front of it.",
    )
    demo.add_argument(
        "--data-dir",
        default=str(DEFAULT_DEMO_DIR),
        help="where the demo keeps its data (default: %(default)s)",
    )
    demo.add_argument(
        "--database", default="lapras_demo", help="backend database name (default: %(default)s)"
    )
    demo.add_argument("--reset", action="store_true", help="delete the demo data directory first")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
