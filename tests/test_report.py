"""``lapras report``: a real epoch built through the proxy, drawn from its ledger.

The epoch is started on the embedded PostgreSQL, analysts' statements go through the whole
proxy (predicted, fresh, repeated), then the CLI reads the ledger and writes the PNG and the
HTML page.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest
from epoch_helpers import DASHBOARD, Proxy, client, config_text, reset_ledger, start_epoch

from dp import engine
from proxy import cli, report
from proxy.app import admin_service
from proxy.config import load_config

pytest.importorskip("matplotlib")


def _config_file(pg: Any, folder: Path) -> Path:
    path = folder / "lapras.toml"
    path.write_text(config_text(pg))
    return path


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_of_a_real_epoch(
    pg: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reset_ledger(pg)
    path = _config_file(pg, tmp_path)
    config = load_config(path)
    epoch_id = start_epoch(config, DASHBOARD)
    fresh = [
        f"SELECT count(*) FROM adult WHERE age BETWEEN {lo} AND {lo + 4}" for lo in range(20, 80, 5)
    ]
    with Proxy(config, seed=21) as proxy, client(proxy) as (conn, _):
        conn.execute(DASHBOARD[0]).fetchall()  # predicted: from the Matrix Mechanism release
        for sql in fresh:
            conn.execute(sql).fetchall()
        conn.execute(fresh[0]).fetchall()  # an exact repeat: no event

    png, page = tmp_path / "epoch.png", tmp_path / "epoch.html"
    argv = [
        "report",
        "--config",
        str(path),
        "--table",
        "adult",
        "--out",
        str(png),
        "--html",
        str(page),
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "[1/3]" in out and "[3/3]" in out and f"epoch {epoch_id} on adult" in out

    assert _png_size(png) == (
        int(report.FIGSIZE[0] * report.DPI),
        int(report.FIGSIZE[1] * report.DPI),
    )
    html = page.read_text()
    assert f"LAPRAS epoch {epoch_id} on adult" in html
    assert "data:image/png;base64," in html

    # The series the picture is drawn from: one point per answered statement, fresh charges
    # for the unpredicted ones; the Steady pacing's expected number of fresh answers (E = S).
    row, events = asyncio.run(report.load_epoch(pg.state_dsn, "adult"))
    tl = report.timeline(events)
    assert row.id == epoch_id
    assert [a.source for a in tl.answers].count("matrix") >= 1
    assert len(tl.answers) == 1 + len(fresh)
    assert len(tl.bad) == len(fresh) - [a.source for a in tl.answers].count("stored")
    assert tl.b_est == 50 and tl.b_est_position == 0
    assert tl.status == engine.status(engine.fold(events))  # type: ignore[arg-type]
    last = tl.budget[-1]
    assert last.matrix + last.online == pytest.approx(tl.status.spent)
    # the realised overlap: the share of answered statements that came from the release
    matrix = [a.source for a in tl.answers].count("matrix")
    assert tl.overlap()[-1][1] == pytest.approx(matrix / len(tl.answers))
    assert "overlap: " in out and "were in P" in out


def test_report_of_a_closed_epoch_needs_its_id(pg: Any, tmp_path: Path) -> None:
    reset_ledger(pg)
    path = _config_file(pg, tmp_path)
    config = load_config(path)
    epoch_id = start_epoch(config, [])

    async def close() -> None:
        async with admin_service(config) as service:
            await service.close_epoch("adult", actor="pytest", reason="test")

    asyncio.run(close())
    png = tmp_path / "closed.png"
    base = ["report", "--config", str(path), "--table", "adult", "--out", str(png)]
    assert cli.main(base) == 2  # no active epoch: a clear error, no picture
    assert not png.exists()
    assert cli.main([*base, "--epoch", str(epoch_id)]) == 0
    assert _png_size(png) == (
        int(report.FIGSIZE[0] * report.DPI),
        int(report.FIGSIZE[1] * report.DPI),
    )
    assert cli.main([*base, "--epoch", str(epoch_id + 100)]) == 2
