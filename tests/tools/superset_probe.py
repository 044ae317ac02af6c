"""Drive a real Apache Superset against the proxy; run by Superset's own Python.

``python superset_probe.py WORKDIR SQLALCHEMY_URI`` (with Superset's virtual environment:
Superset needs SQLAlchemy 1.4, the project 2.x). It writes ``WORKDIR/superset_config.py`` (a
SQLite metadata database in WORKDIR), runs ``superset db upgrade``, ``superset fab
create-admin`` and ``superset init``, then, through Superset's REST API (the Flask test client,
JWT login), connects a database to the proxy, creates the dataset ``adult``, and asks what a
user's clicks ask: chart data for saved charts (count by sex, AVG(age), a filtered count), a
native filter's value list, the explore view's column values, SQL Lab, and a sample of rows.

It asserts nothing: it prints one JSON object, one entry per step, each ``{"status": HTTP
status, "data": rows or null, "error": Superset's error text or null}``; the test asserts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

CONFIG = """\
SECRET_KEY = "lapras-tools-suite-not-a-secret-0123456789abcdef"
SQLALCHEMY_DATABASE_URI = "sqlite:///{db}"
WTF_CSRF_ENABLED = False
TALISMAN_ENABLED = False
FEATURE_FLAGS = {{"ENABLE_TEMPLATE_PROCESSING": False}}
"""

ADMIN = ("admin", "admin-password")


def _cli(bindir: Path, *args: str) -> None:
    r = subprocess.run([str(bindir / "superset"), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(
            f"superset {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        )


def setup(workdir: Path) -> None:
    config = workdir / "superset_config.py"
    config.write_text(CONFIG.format(db=workdir / "superset.db"))
    os.environ["SUPERSET_CONFIG_PATH"] = str(config)
    os.environ["FLASK_APP"] = "superset"
    bindir = Path(sys.executable).parent
    _cli(bindir, "db", "upgrade")
    _cli(
        bindir, "fab", "create-admin", "--username", ADMIN[0], "--firstname", "Ada",
        "--lastname", "Admin", "--email", "admin@example.invalid", "--password", ADMIN[1],
    )  # fmt: skip
    _cli(bindir, "init")


def _error(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    parts: list[str] = []
    for key in ("message", "msg", "error"):
        if body.get(key):
            parts.append(json.dumps(body[key]) if not isinstance(body[key], str) else body[key])
    for err in body.get("errors") or []:
        parts.append(str(err.get("message", err)))
    return " | ".join(parts) or None


def main(workdir: Path, uri: str) -> dict[str, Any]:
    setup(workdir)
    from superset.app import create_app

    app = create_app()
    client = app.test_client()
    out: dict[str, Any] = {}

    login = client.post(
        "/api/v1/security/login",
        json={"username": ADMIN[0], "password": ADMIN[1], "provider": "db", "refresh": True},
    )
    assert login.status_code == 200, login.get_data(as_text=True)
    headers = {"Authorization": f"Bearer {login.get_json()['access_token']}"}

    def call(method: str, url: str, body: Any = None) -> tuple[int, Any]:
        r = client.open(url, method=method, json=body, headers=headers)
        try:
            return r.status_code, r.get_json()
        except Exception:
            return r.status_code, r.get_data(as_text=True)

    def record(step: str, status: int, body: Any, data: Any = None) -> None:
        out[step] = {"status": status, "data": data, "error": None if data else _error(body)}
        marker(f"after {step}")

    def marker(text: str) -> None:
        """A statement of our own through the same wire tap: it splits the tap's log by step."""
        import psycopg2

        with psycopg2.connect(uri.replace("+psycopg2", "")) as conn, conn.cursor() as cur:
            cur.execute("SELECT %s", (f"lapras-step {text}",))
        conn.close()

    marker("start")

    # 1. the database connection (Superset's "test connection" first, as the UI does)
    status, body = call("POST", "/api/v1/database/test_connection/", {"sqlalchemy_uri": uri})
    record("test_connection", status, body, body.get("message") if status == 200 else None)
    status, body = call(
        "POST",
        "/api/v1/database/",
        {"database_name": "lapras", "sqlalchemy_uri": uri, "expose_in_sqllab": True},
    )
    record("database", status, body, body.get("id") if status == 201 else None)
    if status != 201:
        return out
    db_id = body["id"]

    status, body = call("GET", f"/api/v1/database/{db_id}/tables/?q=(schema_name:public)")
    tables = [t["value"] for t in body.get("result", [])] if status == 200 else None
    record("tables", status, body, tables)

    # 2. the dataset (its columns come from SQLAlchemy's Inspector)
    status, body = call(
        "POST", "/api/v1/dataset/", {"database": db_id, "schema": "public", "table_name": "adult"}
    )
    record("dataset", status, body, body.get("id") if status == 201 else None)
    if status != 201:
        return out
    ds_id = body["id"]
    status, body = call("GET", f"/api/v1/dataset/{ds_id}")
    columns = sorted(c["column_name"] for c in body["result"]["columns"]) if status == 200 else None
    record("dataset_columns", status, body, columns)

    def chart(step: str, viz: str, query: dict[str, Any], params: dict[str, Any]) -> None:
        """Save a chart with its query context, then load its data as a dashboard does."""
        datasource = {"id": ds_id, "type": "table"}
        context = {
            "datasource": datasource,
            "force": True,
            "queries": [query],
            "form_data": {"datasource": f"{ds_id}__table", "viz_type": viz, **params},
            "result_format": "json",
            "result_type": "full",
        }
        status, body = call(
            "POST",
            "/api/v1/chart/",
            {
                "slice_name": step,
                "viz_type": viz,
                "datasource_id": ds_id,
                "datasource_type": "table",
                "params": json.dumps({"datasource": f"{ds_id}__table", "viz_type": viz, **params}),
                "query_context": json.dumps(context),
            },
        )
        if status != 201:
            record(step, status, body)
            return
        status, body = call("GET", f"/api/v1/chart/{body['id']}/data/?force=true")
        result = body.get("result") if isinstance(body, dict) else None
        data = result[0].get("data") if status == 200 and result else None
        record(step, status, body, data)

    # 3. charts
    count = {"expressionType": "SQL", "sqlExpression": "COUNT(*)", "label": "count"}
    avg_age = {
        "expressionType": "SIMPLE",
        "column": {"column_name": "age"},
        "aggregate": "AVG",
        "label": "AVG(age)",
    }
    chart(
        "bar_count_by_sex",
        "echarts_timeseries_bar",
        {
            "columns": ["sex"],
            "metrics": [count],
            "orderby": [[count, False]],
            "row_limit": 10000,
            "filters": [],
        },
        {"x_axis": "sex", "metrics": [count], "groupby": []},
    )
    chart(
        "avg_age",
        "big_number_total",
        {"columns": [], "metrics": [avg_age], "row_limit": 10000, "filters": []},
        {"metric": avg_age},
    )
    chart(
        "filtered_count",
        "big_number_total",
        {
            "columns": [],
            "metrics": [count],
            "row_limit": 10000,
            "filters": [
                {"col": "sex", "op": "==", "val": "Female"},
                {"col": "age", "op": ">=", "val": 30},
                {"col": "age", "op": "<", "val": 40},
            ],
        },
        {"metric": count},
    )

    # 4. a native filter's value list (the filter_select plugin's query: the column, no metric)
    status, body = call(
        "POST",
        "/api/v1/chart/data",
        {
            "datasource": {"id": ds_id, "type": "table"},
            "force": True,
            "queries": [
                {
                    "columns": ["sex"],
                    "metrics": [],
                    "orderby": [["sex", True]],
                    "row_limit": 1000,
                    "filters": [],
                }
            ],
            "form_data": {"viz_type": "filter_select", "groupby": ["sex"]},
            "result_format": "json",
            "result_type": "full",
        },
    )
    result = body.get("result") if isinstance(body, dict) else None
    values = result[0].get("data") if status == 200 and result else None
    record("native_filter_values", status, body, values)

    # 5. the explore view's filter popover: the column's distinct values
    status, body = call("GET", f"/api/v1/datasource/table/{ds_id}/column/sex/values/")
    record("column_values", status, body, body.get("result") if status == 200 else None)

    # 6. SQL Lab
    def sqllab(step: str, sql: str) -> None:
        status, body = call(
            "POST",
            "/api/v1/sqllab/execute/",
            {
                "database_id": db_id,
                "sql": sql,
                "schema": "public",
                "runAsync": False,
                "queryLimit": 1000,
                "client_id": step[:10],
            },
        )
        data = body.get("data") if status == 200 and isinstance(body, dict) else None
        record(step, status, body, data)

    sqllab(
        "sqllab_aggregate",
        "SELECT sex, count(*) AS n, avg(age) AS mean_age FROM adult GROUP BY sex",
    )
    sqllab("sqllab_rows", "SELECT * FROM adult")

    # 7. the chart's samples pane ("View as table", "Samples"): rows, refused
    status, body = call(
        "POST",
        "/api/v1/chart/data",
        {
            "datasource": {"id": ds_id, "type": "table"},
            "force": True,
            "queries": [{"columns": [], "metrics": [], "row_limit": 100, "filters": []}],
            "result_format": "json",
            "result_type": "samples",
        },
    )
    result = body.get("result") if isinstance(body, dict) else None
    record("samples", status, body, result[0].get("data") if status == 200 and result else None)
    return out


if __name__ == "__main__":
    result = main(Path(sys.argv[1]), sys.argv[2])
    print("LAPRAS-PROBE " + json.dumps(result, default=str))
