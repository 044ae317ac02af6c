"""bench/proxy/pgbouncer's report, without PgBouncer or pgbench: the ratios and targets, the
table when PgBouncer is skipped, and the docs block written once and then replaced in place
(keeping its hand-written reading). Structural facts only; the benchmark itself is not run."""

from __future__ import annotations

from pathlib import Path

from bench.proxy import pgbouncer as B


def _scenario(unit: str, target: str, lapras: list[float], bouncer: list[float]) -> B.Scenario:
    sc = B.Scenario("k", "label", 50, "simple", "SELECT 1\n", unit, target)
    sc.samples = {B.DIRECT: [1.0] * len(lapras), B.PGBOUNCER: bouncer, B.LAPRAS: lapras}
    return sc


def test_ratio_is_the_median_of_paired_rounds_and_targets_read_both_ways() -> None:
    sc = _scenario("tps", "≥ 1.0x", [10.0, 30.0, 20.0], [20.0, 20.0, 20.0])
    assert B.paired_ratio(sc) == 1.0
    assert B.met(1.0, "≥ 1.0x") == "yes"
    assert B.met(0.99, "≥ 1.0x") == "no"
    assert B.met(1.3, "≤ 1.2x") == "no"
    assert B.met(1.1, "≤ 1.2x") == "yes"
    assert B.met(None, "≤ 1.2x") == "—"
    # a failed round: the medians are paired instead
    uneven = _scenario("tps", "≥ 1.0x", [10.0, 30.0], [20.0, 20.0, 40.0])
    assert B.paired_ratio(uneven) == 1.0


def test_table_without_pgbouncer_says_skipped() -> None:
    plan = [_scenario("tps", "≥ 1.0x", [5.0], [])]
    idle = {B.LAPRAS: B.Idle(B.LAPRAS, 10, connected=10, held_during=10, rss_during_kb=100)}
    text = B.table(plan, idle, have_bouncer=False)
    assert "skipped" in text
    assert "| 10.0 |" in text  # 100 KB over 10 clients
    assert text.count("\n") == 1 + len(plan) + 6


def test_docs_block_is_added_once_then_replaced_keeping_the_reading(tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# Benchmarks\n\n## Other\n\ntext\n\n{B.BEFORE}\n\nledger\n")
    B.write_docs(f"{B.BEGIN}\nfirst\n{B.END}", docs)
    body = docs.read_text()
    assert body.index(B.HEADING) < body.index(B.BEGIN) < body.index(B.BEFORE)
    reading = f"{B.READING}\nwhat it means\n{B.READING_END}"
    docs.write_text(body.replace(f"first\n{B.END}", f"first\n{reading}\n{B.END}"))
    B.write_docs(f"{B.BEGIN}\nsecond\n{B.END}", docs)
    body = docs.read_text()
    assert body.count(B.HEADING) == 1 and body.count(B.BEGIN) == 1
    assert "first" not in body and "second" in body and "what it means" in body
    assert body.endswith(f"{B.BEFORE}\n\nledger\n") and "## Other\n\ntext\n" in body
