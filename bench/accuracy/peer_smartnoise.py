"""SmartNoise SQL worker of ``bench.accuracy.statements``: runs in its own virtual environment.

Not imported by the project: ``bench.accuracy.peers`` starts it with the interpreter of
``bench/out/peers/smartnoise`` (smartnoise-sql pins opendp < 0.15, the project uses a newer
one). It reads one JSON request per line on stdin and writes one JSON answer per line on
stdout (anything the libraries print goes to stderr):

- first ``{"dsn", "metadata"}``: connect (psycopg2) to the PostgreSQL holding ``public.adult``;
  answers ``{"version"}``;
- then ``{"statements": [{"id", "sql"}], "epsilon", "delta"}`` per round: a new reader (a new
  odometer), the round's (epsilon, delta) split evenly over the *mechanisms* of the statements
  SmartNoise accepts (basic composition: ``get_privacy_cost`` at epsilon = 1 counts them, one
  per COUNT or SUM, two per AVG); every accepted statement executed once. Answers
  ``{"results": [{"id", "rows" | "error", "seconds", "mechanisms"}], "spent", "per_mechanism"}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from importlib import metadata
from typing import Any


def _value(v: Any) -> Any:
    if v is None or isinstance(v, str):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return None if f != f else f  # NaN -> NULL


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:300]


def main() -> None:
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the libraries print goes to stderr, not into the answers
    import psycopg2
    import snsql
    from snsql import Privacy

    hello = json.loads(sys.stdin.readline())
    conn = psycopg2.connect(hello["dsn"])
    conn.autocommit = True
    meta = hello["metadata"]
    out.write(json.dumps({"version": metadata.version("smartnoise-sql")}) + "\n")

    def execute(reader: Any, st: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            rows = reader.execute(st["sql"])
        except Exception as e:
            return {"id": st["id"], "error": _short(e)}
        return {
            "id": st["id"],
            "rows": [[_value(v) for v in row] for row in rows[1:]],
            "seconds": time.perf_counter() - t0,
        }

    for line in sys.stdin:
        req = json.loads(line)
        if "probe" in req:
            probe = snsql.from_connection(
                conn, engine="postgres", privacy=Privacy(epsilon=1.0, delta=1e-9), metadata=meta
            )
            counted: dict[str, float] = {}
            why: dict[str, str] = {}
            for st in req["probe"]:
                try:
                    counted[st["id"]] = float(probe.get_privacy_cost(st["sql"])[0])
                except Exception as e:
                    why[st["id"]] = _short(e)
            out.write(json.dumps({"mechanisms": counted, "refused": why}) + "\n")
            continue
        if "privacy" in req:
            readers = {
                table: snsql.from_connection(
                    conn,
                    engine="postgres",
                    privacy=Privacy(epsilon=eps, delta=dlt),
                    metadata=meta,
                )
                for table, (eps, dlt) in req["privacy"].items()
            }
            answers = [execute(readers[st["table"]], st) for st in req["statements"]]
            spent = {t: [float(x) for x in r.odometer.spent] for t, r in readers.items()}
            out.write(json.dumps({"results": answers, "spent": spent}) + "\n")
            continue
        probe = snsql.from_connection(
            conn, engine="postgres", privacy=Privacy(epsilon=1.0, delta=1e-9), metadata=meta
        )
        mechanisms: dict[str, float] = {}
        refused: dict[str, str] = {}
        for st in req["statements"]:
            try:
                mechanisms[st["id"]] = float(probe.get_privacy_cost(st["sql"])[0])
            except Exception as e:  # a parse or validation error: the statement is refused
                refused[st["id"]] = _short(e)
        total = sum(mechanisms.values()) or 1.0
        eps_m, delta_m = req["epsilon"] / total, req["delta"] / total
        reader = snsql.from_connection(
            conn, engine="postgres", privacy=Privacy(epsilon=eps_m, delta=delta_m), metadata=meta
        )
        results: list[dict[str, Any]] = []
        for st in req["statements"]:
            sid = st["id"]
            if sid in refused:
                results.append({"id": sid, "error": refused[sid]})
                continue
            t0 = time.perf_counter()
            try:
                rows = reader.execute(st["sql"])
            except Exception as e:
                results.append({"id": sid, "error": _short(e)})
                continue
            seconds = time.perf_counter() - t0
            results.append(
                {
                    "id": sid,
                    "rows": [[_value(v) for v in row] for row in rows[1:]],
                    "seconds": seconds,
                    "mechanisms": mechanisms[sid],
                }
            )
        spent = [float(x) for x in reader.odometer.spent]
        out.write(
            json.dumps({"results": results, "spent": spent, "per_mechanism": [eps_m, delta_m]})
            + "\n"
        )


if __name__ == "__main__":
    main()
