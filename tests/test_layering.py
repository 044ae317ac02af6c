"""The arrows of the house point one way: proxy -> rewriter -> dp.

``dp`` imports nothing of ours; ``rewriter`` imports only ``dp``; only ``proxy`` does I/O
(asyncio, sockets, database drivers, subprocesses). The test walks every import statement of
every module, including imports inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"dp", "rewriter", "proxy", "sql_fixtures", "bench", "tests"}
ALLOWED_OURS = {"dp": {"dp"}, "rewriter": {"rewriter", "dp"}}
IO_MODULES = {
    "asyncio",
    "socket",
    "ssl",
    "selectors",
    "subprocess",
    "psycopg",
    "psycopg2",
    "asyncpg",
    "pg8000",
    "sqlalchemy",
    "pgserver",
    "urllib",
    "http",
    "requests",
    "threading",
    "time",
    "os",
    "shutil",
    "signal",
    "logging",
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.add(path.relative_to(ROOT).parts[0])  # a relative import stays in its package
    return names


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED_OURS))
def test_pure_packages_import_only_downwards(package: str) -> None:
    assert modules(package), f"{package} has no modules"
    for path in modules(package):
        ours = imports_of(path) & OURS
        assert ours <= ALLOWED_OURS[package], (
            f"{path.relative_to(ROOT)} imports {ours - ALLOWED_OURS[package]}"
        )


@pytest.mark.parametrize("package", sorted(ALLOWED_OURS))
def test_pure_packages_do_no_io(package: str) -> None:
    for path in modules(package):
        io = imports_of(path) & IO_MODULES
        assert not io, f"{path.relative_to(ROOT)} imports I/O modules {io}"


def test_the_walker_sees_function_level_imports(tmp_path: Path) -> None:
    # The check itself must be able to fail: an import hidden in a function is still seen.
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    import proxy.server\n    from asyncio import sleep\n")
    assert imports_of(probe) == {"proxy", "asyncio"}
