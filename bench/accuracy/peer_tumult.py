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
        ApproxDPBudget,
        KeySet,
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
    with gzip.open(hello["csv"], "rt", encoding="utf-8") as f:
        lines = [ln.strip().replace(", ", ",").split(",") for ln in f if ln.strip()]
    frame = pd.DataFrame(lines, columns=hello["columns"])[hello["keep"]]
    for c in hello["integers"]:
        if c in frame.columns:
            frame[c] = frame[c].astype("int64")
    data = spark.createDataFrame(frame).coalesce(1).cache()
    data.count()
    domains: dict[str, list[Any]] = hello["domains"]
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

    def query(spec: dict[str, Any], agg: dict[str, Any], name: str) -> Any:
        qb = QueryBuilder("adult")
        if spec["where"]:
            qb = qb.filter(spec["where"])
        if spec["group_by"]:
            keys = KeySet.from_dict({c: domains[c] for c in spec["group_by"]})
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
        raise ValueError(f"no Tumult query for {func}")

    for line in sys.stdin:
        req = json.loads(line)
        session = Session.from_dataframe(
            privacy_budget=budget(req["budget"]),
            source_id="adult",
            dataframe=data,
            protected_change=AddOneRow(),
        )
        per_query = budget(req["per_query"])
        results: list[dict[str, Any]] = []
        for st in req["statements"]:
            spec = st["spec"]
            keys = spec["group_by"]
            t1 = time.perf_counter()
            try:
                merged = None
                for j, agg in enumerate(spec["aggs"]):
                    name = f"a{j}"
                    part = session.evaluate(query(spec, agg, name), per_query).toPandas()
                    part = part[[*keys, name]]
                    if merged is None:
                        merged = part
                    elif keys:
                        merged = merged.merge(part, on=keys, how="outer")
                    else:
                        merged = pd.concat([merged, part], axis=1)
                assert merged is not None
                rows = [
                    [None if pd.isna(v) else (v if isinstance(v, str) else float(v)) for v in row]
                    for row in merged.itertuples(index=False, name=None)
                ]
            except Exception as e:
                results.append({"id": st["id"], "error": _short(e)})
                continue
            results.append({"id": st["id"], "rows": rows, "seconds": time.perf_counter() - t1})
        out.write(
            json.dumps({"results": results, "remaining": str(session.remaining_privacy_budget)})
            + "\n"
        )


if __name__ == "__main__":
    main()
