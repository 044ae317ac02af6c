"""The arrows of the house point one way: proxy -> rewriter -> dp.

``dp`` imports nothing of ours; ``rewriter`` imports only ``dp``; only ``proxy`` does I/O
(asyncio, sockets, database drivers, subprocesses). The test walks every import statement of
every module, including imports inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
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


def module_graph(root: Path, packages: Sequence[str]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (every import: top level,
    ``TYPE_CHECKING``, inside functions; ``from pkg import mod`` names the module)."""
    files = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for pkg in packages
        for p in (root / pkg).rglob("*.py")
    }

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(owner(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                deps.update(owner(f"{base}.{a.name}") for a in node.names)
        # a package's own __init__ is not a dependency of its modules
        graph[name] = {d for d in deps if d and d != name and not name.startswith(d + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    graph = module_graph(ROOT, ("proxy", "rewriter", "dp"))
    assert len(graph) > 50
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    assert cycles(module_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b", "pkg.c"]]
