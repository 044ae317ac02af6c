"""Giving freed memory back to the system after big statements.

CPython frees objects into its own allocator and into the C library's heap; glibc keeps what
was freed in the middle of its heaps until asked (``malloc_trim``). After a big statement (a
megabyte of SQL takes a few hundred MB while it is classified, and a prepared one keeps tens
of MB until it is closed) the proxy asks, so that its resident memory goes back down
(docs/benchmarks.md, "Big statements"). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _load_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim = getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


_MALLOC_TRIM = _load_trim()


def trim_heap() -> None:
    """Return the C heap's free memory to the system where the C library can (glibc; a
    millisecond or two, without the interpreter lock)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
