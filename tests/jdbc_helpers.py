"""pgjdbc programs for the tests: optional, they need a JDK and Debian's libpostgresql-jdbc-java
(tests/proxy/test_clients.py, tests/proxy/test_pooling.py, tests/test_catalogue_parity.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PGJDBC_JAR = Path("/usr/share/java/postgresql.jar")


def jdbc_command(folder: Path, name: str, source: str) -> list[str]:
    """The command that runs the Java program ``source`` (its public class ``name``, written
    to ``folder``) with pgjdbc on its class path; the test is skipped where either is missing."""
    java = shutil.which("java")
    if java is None or not PGJDBC_JAR.exists():
        pytest.skip(f"needs java and {PGJDBC_JAR} (libpostgresql-jdbc-java)")
    src = folder / f"{name}.java"
    src.write_text(source)
    return [java, "-cp", str(PGJDBC_JAR), str(src)]
