"""Tumult Analytics worker of ``bench.accuracy.statements``: runs in its own virtual environment.

Not imported by the project: ``bench.accuracy.peers`` starts it with the interpreter of
``bench/out/peers/tumult`` (tmlt.analytics pins numpy < 2 and pyspark 3.5). Tumult has no SQL
interface: the benchmark translates each statement into a plain description (WHERE as a Spark
SQL condition, the GROUP BY columns, the aggregates with their public bounds) and this worker
builds one ``QueryBuilder`` query per aggregate, grouped by a ``KeySet`` of the declared public
values (as LAPRAS's domain: no group is dropped or invented).

Protocol: one JSON request per line on stdin, one JSON answer per line on stdout (Spark's
output goes to stderr):

- first ``{"csv", "columns", "integers", "keep", "domains"}``: start Spark (local[2]) and load
  the rows of ``adult.data.gz`` (the ``keep`` columns) as one cached DataFrame; answers
  ``{"version", "seconds"}``;
- then ``{"statements": [{"id", "spec"}], "budget", "per_query"}`` per round: a new
  ``Session`` (``AddOneRow``: add/remove-one-row neighbours, as LAPRAS) with the round's
  budget, every aggregate evaluated with ``per_query``. Budgets are ``{"kind": "rho", "rho"}``
  (zCDP: discrete Gaussian noise) or ``{"kind": "approx", "epsilon", "delta"}`` (geometric
  noise). Answers ``{"results": [{"id", "rows" | "error", "seconds"}], "remaining"}``; a row
  is the group keys then the aggregates, in the description's order.

The session benchmark (``bench.accuracy.sessions``) starts it with ``{"tables": {name: {"csv",
"columns", "integers", "floats", "dates", "keep", "domains", "id_column", "max_rows"}}}``
(a table with an ``id_column`` is protected per ID, ``AddRowsWithID``, each ID's rows
truncated to ``max_rows`` by ``MaxRowsPerID`` after the statement's filter), then asks
``{"probe": [{"id", "spec"}]}`` (each statement's queries built and its filters analysed by
Spark, nothing evaluated: ``{"refused": {id: why}}``) and, per session,
``{"statements": [{"id", "spec", "budget"}], "budgets": {table: budget}}``: one ``Session``
per table with its budget, each statement's queries evaluated with its own budget split evenly
over them; a spec names its ``table``, and each aggregate may carry its own ``where`` (a
``FILTER``), a ``quantile`` and ``bounds``.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
from importlib import metadata
from typing import Any


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:300]


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    t0 = time.perf_counter()
    import pandas as pd
    from pyspark.sql import SparkSession
    from tmlt.analytics import (
        AddOneRow,
        AddRowsWithID,
        ApproxDPBudget,
        KeySet,
        MaxRowsPerID,
        QueryBuilder,
        RhoZCDPBudget,
        Session,
    )

    hello = json.loads(sys.stdin.readline())
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.warehouse.dir", os.path.abspath("spark-warehouse"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tables: dict[str, dict[str, Any]] = hello.get("tables") or {"adult": hello}
    data: dict[str, Any] = {}
    for name, t in tables.items():
        with gzip.open(t["csv"], "rt", encoding="utf-8") as f:
            lines = [ln.strip().replace(", ", ",").split(",") for ln in f if ln.strip()]
        frame = pd.DataFrame(lines, columns=t["columns"])[t["keep"]]
        for c in t.get("integers", ()):
            if c in frame.columns:
                frame[c] = frame[c].astype("int64")
        for c in t.get("floats", ()):
            frame[c] = frame[c].astype("float64")
        for c in t.get("dates", ()):
            frame[c] = pd.to_datetime(frame[c]).dt.date
        data[name] = spark.createDataFrame(frame).coalesce(1).cache()
        data[name].count()
    out.write(
        json.dumps(
            {"version": metadata.version("tmlt.analytics"), "seconds": time.perf_counter() - t0}
        )
        + "\n"
    )

    def budget(b: dict[str, float]) -> Any:
        if b["kind"] == "rho":
            return RhoZCDPBudget(b["rho"])
        return ApproxDPBudget(b["epsilon"], b["delta"])

    def divided(b: dict[str, float], k: int) -> dict[str, float]:
        shrink = 1 - 1e-9  # the parts must add up to no more than the whole
        if b["kind"] == "rho":
            return {"kind": "rho", "rho": b["rho"] / k * shrink}
        return {
            "kind": "approx",
            "epsilon": b["epsilon"] / k * shrink,
            "delta": b["delta"] / k * shrink,
        }

    def query(spec: dict[str, Any], agg: dict[str, Any], name: str) -> Any:
        table = spec.get("table", "adult")
        t = tables[table]
        qb = QueryBuilder(table)
        if spec["where"]:
            qb = qb.filter(spec["where"])
        if agg.get("where"):
            qb = qb.filter(agg["where"])
        if t.get("id_column"):
            qb = qb.enforce(MaxRowsPerID(t["max_rows"]))
        if spec["group_by"]:
            keys = KeySet.from_dict({c: t["domains"][c] for c in spec["group_by"]})
            qb = qb.groupby(keys)
        func, col = agg["func"], agg["column"]
        if func == "count":
            return qb.count(name=name)
        if func == "count_distinct":
            return qb.count_distinct([col], name=name)
        lo, hi = agg["bounds"]
        if func == "sum":
            return qb.sum(col, lo, hi, name=name)
        if func == "avg":
            return qb.average(col, lo, hi, name=name)
        if func == "min":
            return qb.min(col, lo, hi, name=name)
        if func == "max":
            return qb.max(col, lo, hi, name=name)
        if func == "quantile":
            return qb.quantile(col, agg["quantile"], lo, hi, name=name)
        if func == "stdev":
            return qb.stdev(col, lo, hi, name=name)
        if func == "variance":
            return qb.variance(col, lo, hi, name=name)
        raise ValueError(f"no Tumult query for {func}")

    def session(table: str, b: dict[str, float]) -> Any:
        t = tables[table]
        change = AddRowsWithID(t["id_column"]) if t.get("id_column") else AddOneRow()
        return Session.from_dataframe(
            privacy_budget=budget(b),
            source_id=table,
            dataframe=data[table],
            protected_change=change,
        )

    def evaluate(sess: Any, spec: dict[str, Any], per_query: dict[str, float]) -> list[Any]:
        keys = spec["group_by"]
        merged = None
        for j, agg in enumerate(spec["aggs"]):
            name = f"a{j}"
            part = sess.evaluate(query(spec, agg, name), budget(per_query)).toPandas()
            part = part[[*keys, name]]
            if merged is None:
                merged = part
            elif keys:
                merged = merged.merge(part, on=keys, how="outer")
            else:
                merged = pd.concat([merged, part], axis=1)
        assert merged is not None
        return [
            [None if pd.isna(v) else (v if isinstance(v, str) else float(v)) for v in row]
            for row in merged.itertuples(index=False, name=None)
        ]

    for line in sys.stdin:
        req = json.loads(line)
        if "probe" in req:
            refused: dict[str, str] = {}
            for st in req["probe"]:
                spec = st["spec"]
                try:
                    frame = data[spec.get("table", "adult")]
                    for cond in [spec["where"], *(a.get("where") for a in spec["aggs"])]:
                        if cond:
                            frame.filter(cond)  # Spark analyses the condition (no data read)
                    for j, agg in enumerate(spec["aggs"]):
                        query(spec, agg, f"a{j}")
                except Exception as e:
                    refused[st["id"]] = _short(e)
            out.write(json.dumps({"refused": refused}) + "\n")
            continue
        if "budgets" in req:
            sessions = {t: session(t, b) for t, b in req["budgets"].items()}
            results: list[dict[str, Any]] = []
            for st in req["statements"]:
                spec = st["spec"]
                t1 = time.perf_counter()
                try:
                    rows = evaluate(
                        sessions[spec["table"]], spec, divided(st["budget"], len(spec["aggs"]))
                    )
                except Exception as e:
                    results.append({"id": st["id"], "error": _short(e)})
                    continue
                results.append({"id": st["id"], "rows": rows, "seconds": time.perf_counter() - t1})
            remaining = {t: str(s.remaining_privacy_budget) for t, s in sessions.items()}
            out.write(json.dumps({"results": results, "remaining": remaining}) + "\n")
            continue
        one = session("adult", req["budget"])
        results = []
        for st in req["statements"]:
            t1 = time.perf_counter()
            try:
                rows = evaluate(one, st["spec"], req["per_query"])
            except Exception as e:
                results.append({"id": st["id"], "error": _short(e)})
                continue
            results.append({"id": st["id"], "rows": rows, "seconds": time.perf_counter() - t1})
        out.write(
            json.dumps({"results": results, "remaining": str(one.remaining_privacy_budget)}) + "\n"
        )


if __name__ == "__main__":
    main()
