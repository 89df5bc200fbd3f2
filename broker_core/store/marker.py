"""A marker file that keeps a SQLite database in WAL mode from starting empty in silence.

Used by the main store (``broker_core.store.schema``, ``edgebus.db.created``) and by each
bridge queue (``bridge.queue_file``, ``queue.db.created``). The first open writes the
marker beside the database; from then on it says that the database was created, and
whether the last run stopped cleanly (``state: closed``, written after its close
checkpointed the write-ahead log ``<name>-wal`` into the database and deleted it) or not
(``state: open``, written by every open before anything is committed). ``state:
closing``, written just before the close, says that a log found missing (or empty) was
removed by that close, whose checkpoint SQLite completes before it removes the log: a
kill between the close and the ``closed`` mark is no loss, and no reason to refuse. ``check`` finds
what was lost of a database whose marker exists (``Loss``):

- ``MISSING``: no database file; ``EMPTY``: a file of 0 bytes (a power loss on some file
  systems, a copy that went wrong);
- ``NO_TABLES``: a file without the caller's tables (its log, which held them, is
  missing or was damaged);
- ``LOG_LOST``: the log missing after a run that did not stop cleanly (``kill -9``): the
  commits since the last checkpoint were in it.

Each caller turns a loss into its own one-line error (its words, what to do). Checking
never changes a file: the database is read through a read-only connection when its log
is there (closing it neither checkpoints nor deletes the log) and as an ``immutable`` one
when not (which creates nothing beside it), so a refused database is left as found.

``mark`` writes the marker atomically (a new file, synced, renamed over the old one).

A marker of edgebus before this module (the main store's: one line, no ``state``) is
read as it was meant: that store recorded its clean stop in its ``meta`` table
(``stopped_cleanly``, ``0`` from each open, checkpointed into the file, ``1`` at a clean
close); the next open rewrites the marker with a ``state``.
"""

from __future__ import annotations

import contextlib
import enum
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLOSED",
    "CLOSING",
    "OPEN",
    "Check",
    "Loss",
    "check",
    "mark",
    "marker_path",
    "stopped_cleanly",
    "wal_path",
]

OPEN = "open"
CLOSED = "closed"
CLOSING = "closing"


class Loss(enum.Enum):
    """What a database whose marker exists lost (see the module docstring)."""

    MISSING = "missing"
    EMPTY = "empty"
    NO_TABLES = "no tables"
    LOG_LOST = "log lost"


@dataclass(frozen=True, slots=True)
class Check:
    """``created``: the marker exists; ``size``: of the database file (None: missing);
    ``loss``: what was lost, None when nothing (or no marker)."""

    created: bool
    size: int | None
    loss: Loss | None


def marker_path(path: Path) -> Path:
    """The marker of the database at ``path``: ``<name>.created``."""
    return path.with_name(path.name + ".created")


def wal_path(path: Path) -> Path:
    """The write-ahead log of the database at ``path``: ``<name>-wal``."""
    return path.with_name(path.name + "-wal")


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def check(path: Path, tables: tuple[str, ...], *, empty_log_lost: bool = False) -> Check:
    """What was lost of the database at ``path`` (see the module docstring); ``tables``
    are the tables its schema always has. ``empty_log_lost``: a log of 0 bytes after a
    run that did not stop cleanly counts as lost too (for a database whose open writes
    to the log and never truncates it). ``OSError`` (its ``filename`` the file) when the
    marker or a file cannot be read."""
    marker = marker_path(path)
    try:
        text = marker.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Check(False, _size(path), None)
    size = _size(path)
    if size is None:
        return Check(True, size, Loss.MISSING)
    if size == 0:
        return Check(True, size, Loss.EMPTY)
    log_size = _size(wal_path(path))
    legacy: str | None = None
    if log_size is None:
        has_tables, legacy = _file_alone(path, tables)
    else:
        has_tables = _has_tables(path, tables)
    if not has_tables:
        return Check(True, size, Loss.NO_TABLES)
    state = _state(text)
    clean = state in (CLOSED, CLOSING) if state is not None else legacy != "0"
    if not clean and (log_size is None or (empty_log_lost and log_size == 0)):
        return Check(True, size, Loss.LOG_LOST)
    return Check(True, size, None)


def stopped_cleanly(path: Path) -> bool:
    """False when the marker of the database at ``path`` says its last run did not stop
    cleanly (``state: open``: a ``kill -9``, a crash, a power loss); True otherwise (a
    clean stop, no marker, or one of edgebus before this module). Read before the open
    marks it ``open`` again; ``OSError`` when the marker exists but cannot be read."""
    try:
        text = marker_path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return True
    return _state(text) != OPEN


def _state(text: str) -> str | None:
    """The marker's ``state``; None in a marker of edgebus before this module."""
    last = text.rstrip().rpartition("\n")[2]
    key, _, value = last.partition(": ")
    return value if key == "state" else None


def _count_tables(conn: sqlite3.Connection, tables: tuple[str, ...]) -> bool:
    marks = ", ".join("?" * len(tables))
    (count,) = conn.execute(
        f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ({marks})", tables
    ).fetchone()
    return bool(count == len(tables))


def _has_tables(path: Path, tables: tuple[str, ...]) -> bool:
    """True when the database (with its log) holds ``tables``, or when a read-only look
    cannot tell (the caller's read-write open reports what is wrong: a lock another
    opener holds is not waited for, since the check runs on the event loop)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0)
    except sqlite3.Error:
        return True
    try:
        return _count_tables(conn, tables)
    except sqlite3.Error:
        return True
    finally:
        conn.close()


def _file_alone(path: Path, tables: tuple[str, ...]) -> tuple[bool, str | None]:
    """Whether the database file itself (no log) holds ``tables`` (True when it cannot
    tell), and the ``meta`` table's ``stopped_cleanly`` (the clean-stop record of a store
    of edgebus before this module, None when there is none)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    except sqlite3.Error:
        return True, None
    try:
        if not _count_tables(conn, tables):
            return False, None
        row = conn.execute("SELECT value FROM meta WHERE key = 'stopped_cleanly'").fetchone()
    except sqlite3.Error:
        return True, None
    finally:
        conn.close()
    return True, None if row is None else str(row[0])


def mark(path: Path, state: str, note: str) -> None:
    """Writes the marker of the database at ``path`` with ``state`` (``OPEN``,
    ``CLOSING`` or ``CLOSED``), ``note`` its first line (what the file is for, in the
    caller's words); atomically: a new file, synced, renamed over the old one.
    ``OSError`` when it cannot (the old marker, if any, left as it was)."""
    marker = marker_path(path)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    partial = marker.with_name(marker.name + ".new")
    try:
        with open(partial, "w", encoding="utf-8") as file:
            file.write(f"{note}\nwritten {stamp}\nstate: {state}\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, marker)
        directory = os.open(marker.parent, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself
        finally:
            os.close(directory)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise
