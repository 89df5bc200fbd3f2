"""One gateway per data directory.

The SQLite store, the bridges' queues, the stream log, the adapters' state and the API
key live in ``data_dir``. Two gateways writing one directory would mix their sessions,
retained messages and log segments. ``edgebus run`` takes ``<data_dir>/edgebus.lock``
before it opens anything there and holds it while it runs. The lock is ``flock``'s:
the kernel releases it when the process ends, ``kill -9`` included, so a stale file
never keeps a gateway from starting. The file holds the pid of its holder, for the
message a second gateway gets.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["LOCK_NAME", "DataDirInUse", "LockHeld", "lock_data_dir", "lock_file"]

LOCK_NAME = "edgebus.lock"


class DataDirInUse(Exception):
    """Another process holds the data directory's lock."""


class LockHeld(Exception):
    """Another process holds a lock file; ``holder`` is its pid as the file says."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def lock_file(path: Path) -> int:
    """Takes the ``flock`` of ``path`` (created if needed) and writes this process's pid
    in it; the file descriptor that holds it, open until closed or the process ends.
    Raises ``LockHeld`` or ``OSError``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise LockHeld(holder) from None
    except OSError:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def lock_data_dir(data_dir: Path) -> int:
    """Takes the lock of ``data_dir`` (created if needed); the file descriptor that
    holds it, open until the process ends. Raises ``DataDirInUse`` or ``OSError``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        return lock_file(data_dir / LOCK_NAME)
    except LockHeld as exc:
        raise DataDirInUse(
            f"{data_dir}: in use by another edgebus (pid {exc.holder}); give each gateway"
            " its own data_dir"
        ) from None
