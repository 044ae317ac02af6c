"""A fork server for the crash test: imports the proxy once, then forks a proxy per request.

Usage: ``python tests/ledger/forkserver.py CONFIG``; each ``spawn`` line read on stdin forks a
child that runs ``proxy.app.running(config)`` (production sampler: SecureSampler) and prints
``ready PID PORT`` once it listens. The test kills children with SIGKILL; they are reaped
automatically (SIGCHLD ignored). End of stdin ends the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from proxy.app import running  # noqa: E402
from proxy.config import load_config  # noqa: E402


async def _serve(config_path: str) -> None:
    config = load_config(Path(config_path))
    async with running(config) as app:
        os.write(1, f"ready {os.getpid()} {app.server.port}\n".encode())
        await asyncio.Event().wait()


def main() -> None:
    config_path = sys.argv[1]
    load_config(Path(config_path))  # fail early, in the server, on a bad file
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # killed children are reaped by the kernel
    for line in sys.stdin:
        if line.strip() != "spawn":
            continue
        sys.stdout.flush()
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setsid()  # a SIGINT to the test's process group does not reach it twice
            try:
                asyncio.run(_serve(config_path))
            except BaseException:
                traceback.print_exc()
                os.write(1, b"failed\n")
            finally:
                os._exit(1)


if __name__ == "__main__":
    main()
