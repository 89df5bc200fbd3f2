"""Giving freed memory back to the system after memory-heavy connections closed.

CPython returns large blocks to the C allocator when they are freed, but glibc's malloc
keeps freed heap memory for reuse: after thousands of connections with big alias
tables, subscriptions or queued messages have closed, the process keeps its peak size.
``release_free_memory()`` asks glibc to give back what it holds unused
(``malloc_trim(0)``); elsewhere it does nothing. The broker calls it from its
housekeeping (in a worker thread), at most every ``TRIM_INTERVAL_S``, when
connections have closed since.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

__all__ = ["TRIM_INTERVAL_S", "release_free_memory"]

TRIM_INTERVAL_S = 5.0


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # The process's own symbols, libc's among them: ``ctypes.util.find_library`` would
        # run ``ldconfig`` and import ~1 MB of modules to name the library loaded already.
        trim = ctypes.CDLL(None).malloc_trim  # glibc only; musl has none
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def release_free_memory() -> bool:
    """Returns free heap memory to the system; False where that is not possible."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
