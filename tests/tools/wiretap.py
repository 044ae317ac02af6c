"""A transparent TCP relay in front of the proxy that records the SQL each client sends.

Every byte is forwarded unchanged in both directions; the client's half is also decoded as
PostgreSQL v3 frontend messages, and the text of each Query (simple protocol) and Parse
(extended protocol) is appended to a log file, one JSON string a line. The tool tests connect
through it, so that a failing assertion shows exactly what the tool sent.

It runs in a process of its own (``python wiretap.py HOST PORT LOG``, printing its port):
drivers such as connectorx hold the GIL while they wait for the server, which would stall a
relay thread in the test process.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

_UNTYPED = {80877103, 80877104, 80877102}  # SSLRequest, GSSENCRequest, CancelRequest


class WireTap:
    """The relay's process, listening on 127.0.0.1:``port``, relaying to ``target``."""

    def __init__(self, target: tuple[str, int], log: Path) -> None:
        self.log = log
        log.write_text("")
        self._process = subprocess.Popen(
            [sys.executable, __file__, target[0], str(target[1]), str(log)],
            stdin=subprocess.PIPE,  # the relay exits when this closes (also if we die)
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        self.port = int(self._process.stdout.readline())

    def statements(self) -> list[str]:
        """Every statement recorded so far (the relay writes each one as it passes)."""
        lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line]

    def mark(self) -> int:
        return len(self.statements())

    def since(self, mark: int, settle: float = 0.2) -> list[str]:
        time.sleep(settle)  # the relay writes asynchronously
        return self.statements()[mark:]

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)


# -- the relay process ---------------------------------------------------------------------------


def _shutdown(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        _shutdown(src, dst)


def _decode(buf: bytes, typed: bool, found: list[str]) -> tuple[bytes, bool]:
    while True:
        if not typed:
            if len(buf) < 8:
                return buf, typed
            (length,) = struct.unpack("!i", buf[:4])
            if len(buf) < length:
                return buf, typed
            (code,) = struct.unpack("!i", buf[4:8])
            buf = buf[length:]
            typed = code not in _UNTYPED
            continue
        if len(buf) < 5:
            return buf, typed
        kind = buf[:1]
        (length,) = struct.unpack("!i", buf[1:5])
        if len(buf) < 1 + length:
            return buf, typed
        body, buf = buf[5 : 1 + length], buf[1 + length :]
        if kind == b"Q":
            found.append(body.split(b"\0", 1)[0].decode("utf-8", "replace"))
        elif kind == b"P":
            rest = body.split(b"\0", 1)[1]
            found.append(rest.split(b"\0", 1)[0].decode("utf-8", "replace"))


def _client_half(client: socket.socket, server: socket.socket, out: IO[str]) -> None:
    buf, typed = b"", False
    try:
        while data := client.recv(65536):
            found: list[str] = []
            buf, typed = _decode(buf + data, typed, found)
            with _LOCK:  # recorded before it is forwarded: the log is never behind an answer
                for text in found:
                    out.write(json.dumps(text) + "\n")
                out.flush()
            server.sendall(data)
    except OSError:
        pass
    finally:
        _shutdown(client, server)


_LOCK = threading.Lock()


def _exit_with_parent() -> None:
    sys.stdin.read()
    os._exit(0)


def main(host: str, port: int, log: str) -> None:
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    with open(log, "a", encoding="utf-8") as out:
        while True:
            client, _ = listener.accept()
            try:
                server = socket.create_connection((host, port), timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            threading.Thread(target=_client_half, args=(client, server, out), daemon=True).start()
            threading.Thread(target=_pipe, args=(server, client), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
