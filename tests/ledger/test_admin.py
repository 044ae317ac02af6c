"""The admin surface end to end: the real CLI (``lapras epoch start|show|close``, ``lapras
budget``) and the read-only wire views (``SHOW LAPRAS BUDGET | EPOCHS | RELEASES | POOLS``) of a real
proxy process, for admins only, never showing a value computed from the data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ledger_helpers import (
    ADMIN,
    DASHBOARD,
    cell_queries,
    cli_start_epoch,
    dsn,
    lapras,
    ledger_rows,
    reset_ledger,
    serve,
    write_config,
)

from dp import engine

pytestmark = pytest.mark.timeout(180)


def test_cli_and_wire_admin_views(pg: Any, tmp_path: Path) -> None:
    reset_ledger(pg)
    path, _ = write_config(tmp_path, pg, stream_length=20, reuse=False)
    epoch = cli_start_epoch(path, DASHBOARD, "--reason", "Q3 dashboard")
    again = lapras("epoch", "start", "--config", str(path), "--table", "adult")
    assert again.returncode == 2, (again.stdout, again.stderr)
    assert "already active" in again.stderr  # never reset silently

    fresh_sql = cell_queries()[0]
    with serve(path) as (_, port):
        with psycopg.connect(dsn(port), autocommit=True) as analyst:
            fresh = analyst.execute(fresh_sql).fetchone()
            matrix = analyst.execute(DASHBOARD[1]).fetchone()
            assert fresh is not None and matrix is not None
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                analyst.execute("SHOW LAPRAS BUDGET")
            assert analyst.execute("SELECT 1").fetchone() == (1,)  # still usable

        state = engine.fold(ev for _, _, ev in ledger_rows(pg, epoch))  # type: ignore[arg-type]
        st = engine.status(state)
        with psycopg.connect(dsn(port, ADMIN), autocommit=True) as conn:
            cur = conn.execute("show lapras budget;")
            budget = cur.fetchall()
            assert [d.name for d in cur.description][:6] == [
                "table",
                "epoch",
                "view",
                "unit",
                "total",
                "spent",
            ]
            assert [d.type_code for d in cur.description][:6] == [25, 20, 25, 25, 701, 701]
            (row,) = budget
            assert row[:4] == ("adult", epoch, "*", "mu^2")  # "*": the whole table
            assert row[4] == st.total and row[5] == st.spent
            assert row[7:10] == (1, 20, 2)  # one online release of S = 20; stream position 2
            cols = [d.name for d in cur.description]
            got = dict(zip(cols, row, strict=True))
            assert got["spent_epsilon"] == pytest.approx(st.spent_epsilon)
            assert got["budget_group"] is None  # adult has no lifetime cap

            cur = conn.execute("SHOW LAPRAS RELEASES", prepare=True)  # extended protocol too
            releases = cur.fetchall()
            cols = [d.name for d in cur.description]
            kinds = [r[cols.index("kind")] for r in releases]
            assert kinds == ["from matrix release", "fresh", "matrix release"]  # newest first
            by_kind = {r[cols.index("kind")]: dict(zip(cols, r, strict=True)) for r in releases}
            assert by_kind["fresh"]["charge"] > 0 and by_kind["fresh"]["std_error"] > 0
            assert by_kind["fresh"]["position"] == 1 and by_kind["fresh"]["noise"] == "gaussian"
            assert by_kind["from matrix release"]["charge"] == 0.0
            assert by_kind["matrix release"]["charge"] > 0
            shown = {v for r in releases for v in r}
            assert fresh[0] not in shown and matrix[0] not in shown  # no answer value

            cur = conn.execute("SHOW LAPRAS POOLS")
            cols = [d.name for d in cur.description]
            assert cols == [
                "user",
                "database",
                "backend_role",
                "pool_mode",
                "active",
                "idle",
                "waiting",
                "max_wait",
                "pool_size",
            ]
            pools = {r[0]: dict(zip(cols, r, strict=True)) for r in cur.fetchall()}
            # the analyst's session has closed: its backend connection waits in its pool
            assert pools["analyst"]["backend_role"] == "lapras_user_analyst"
            assert (pools["analyst"]["active"], pools["analyst"]["idle"]) == (0, 1)
            mine = pools[ADMIN[0]]
            assert mine["pool_mode"] == "transaction" and mine["pool_size"] == 20
            assert mine["active"] + mine["idle"] == 1 and mine["waiting"] == 0

            epochs = conn.execute("SHOW LAPRAS EPOCHS").fetchall()
            assert [(e[0], e[1], e[3], e[6]) for e in epochs] == [
                (epoch, "adult", "active", "Q3 dashboard")
            ]
            with pytest.raises(psycopg.Error) as info:
                conn.execute("SHOW LAPRAS SECRETS")
            assert info.value.sqlstate == "42704"

            shown_json = lapras("budget", "--config", str(path), "--json")
            assert shown_json.returncode == 0, shown_json.stderr
            (cli,) = json.loads(shown_json.stdout)
            assert (cli["epoch"], cli["spent"], cli["online_releases"], cli["position"]) == (
                epoch,
                st.spent,
                1,
                2,
            )

            closed = lapras(
                "epoch", "close", "--config", str(path), "--table", "adult", "--reason", "done"
            )
            assert closed.returncode == 0 and f"epoch {epoch} on adult closed" in closed.stdout
            epochs = conn.execute("SHOW LAPRAS EPOCHS").fetchall()
            assert [(e[0], e[3]) for e in epochs] == [(epoch, "closed")]
            assert epochs[0][7] is not None
            assert conn.execute("SHOW LAPRAS BUDGET").fetchall()[0][1:] == (None,) * 17

        with psycopg.connect(dsn(port), autocommit=True) as analyst:
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                analyst.execute(fresh_sql)  # the running proxy sees the close at once
    with psycopg.connect(pg.state_dsn) as direct:
        log = direct.execute(
            "SELECT actor, action, details::text FROM lapras.admin_log ORDER BY id"
        ).fetchall()
    assert [a for _, a, _ in log] == ["epoch start", "epoch close"]
    assert json.loads(log[1][2])["reason"] == "done"
