"""The bridge queue's SQLite file: opening it, its schema, and the statements run on it.

- ``open_file(path)`` opens (creating) ``queue.db``: one connection, the process's only,
  in exclusive locking mode, WAL with ``synchronous=NORMAL`` and no automatic
  checkpoints; it returns the connection and the last sequence number. The schema
  carries a version (``SCHEMA_VERSION``): a file of version 1 is brought to 2 (the
  ``released`` column), any other version or an unreadable file is refused with what to
  do.
- ``write_rows(conn, inserts, deletes, marks)``: one commit's statements, the rows
  appended in multi-row ``INSERT`` statements, the released marks and the deletes in
  ``... BETWEEN`` ranges.
- ``read_rows``, ``index_rows`` and ``checkpoint``: what the queue's thread runs.

``DiskQueue`` (``bridge.queue``) decides when each runs, on the event loop or on its
thread with the connection lent to it; nothing here knows of either.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bridge.mapping import Queued
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import EMPTY, PacketKind, decode_properties

__all__ = [
    "COLUMNS",
    "SCHEMA_VERSION",
    "checkpoint",
    "index_rows",
    "open_file",
    "read_rows",
    "write_rows",
]

#: 2 added ``queue.released``; a file of version 1 is brought to 2 when it opens (its
#: rows were never marked: the same as before).
SCHEMA_VERSION = 2

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    received_at REAL NOT NULL,
    released INTEGER NOT NULL DEFAULT 0
);
"""
#: Columns an append binds, in this order: seq, topic, payload, qos, retain, properties,
#: received_at (``released`` starts at its default, 0).
COLUMNS = 7
#: Rows per INSERT statement, at most. A batch of rows is written with one statement of
#: exactly its size (and one of this size per 256 more): each statement is a step that
#: lets go of the interpreter lock and takes it back, a handover with the busy event
#: loop's thread that costs more than the SQL. Every size is prepared once and kept
#: (``_STATEMENTS``).
_MAX_ROWS = 256
_STATEMENTS = _MAX_ROWS + 32  # the connection's statement cache
_DELETE = "DELETE FROM queue WHERE seq BETWEEN ? AND ?"
_MARK = "UPDATE queue SET released = ? WHERE seq BETWEEN ? AND ?"
_READ = (
    "SELECT seq, topic, payload, qos, retain, properties, received_at, released FROM queue"
    " WHERE seq >= ? ORDER BY seq LIMIT ?"
)


def _queued(row: tuple[Any, ...]) -> Queued:
    seq, topic, payload, qos, retain, props, received_at, released = row
    properties = EMPTY
    if props:
        properties, _ = decode_properties(props, 0, len(props), PacketKind.PUBLISH)
    item = Queued.of(topic, bytes(payload), qos, bool(retain), properties, received_at, seq)
    item.released = bool(released)
    return item


@functools.cache
def _insert_sql(rows: int) -> str:
    return (
        "INSERT INTO queue (seq, topic, payload, qos, retain, properties, received_at) VALUES "
        + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)
    )


def _insert_rows(conn: sqlite3.Connection, values: list[Any]) -> None:
    """Inserts the rows whose columns follow each other in ``values`` (``COLUMNS`` a
    row), ``_MAX_ROWS`` a statement at most."""
    width = _MAX_ROWS * COLUMNS
    for start in range(0, len(values), width):
        chunk = values[start : start + width]
        conn.execute(_insert_sql(len(chunk) // COLUMNS), chunk)


def write_rows(
    conn: sqlite3.Connection, inserts: list[Any], deletes: list[int], marks: dict[int, int]
) -> None:
    """One commit: the rows whose columns follow each other in ``inserts``, the released
    marks (``marks``: seq -> 1 or 0), the deletes; one transaction. ``sqlite3.Error``
    when it fails (the caller rolls back)."""
    ranges = _ranges(deletes) if deletes else []
    marked = _marked_ranges(marks) if marks else []
    statements = -(-len(inserts) // (_MAX_ROWS * COLUMNS)) + len(ranges) + len(marked)
    if statements > 1:  # one statement is a transaction of its own
        conn.execute("BEGIN")
    if inserts:
        _insert_rows(conn, inserts)
    if marked:
        conn.executemany(_MARK, marked)
    if ranges:
        conn.executemany(_DELETE, ranges)
    if statements > 1:
        conn.execute("COMMIT")


def read_rows(conn: sqlite3.Connection, first: int, limit: int) -> list[Queued]:
    """Up to ``limit`` rows with ``seq >= first``, in order."""
    return [_queued(row) for row in conn.execute(_READ, (first, limit)).fetchall()]


def index_rows(conn: sqlite3.Connection, upto: int) -> Iterable[tuple[int, int, float]]:
    """``(seq, size, received_at)`` of every row with ``seq <= upto``, in order."""
    return conn.execute(
        "SELECT seq, length(topic) + length(payload), received_at FROM queue"
        " WHERE seq < ? ORDER BY seq",
        (upto + 1,),
    )


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copies the WAL into the database and syncs both (``synchronous=NORMAL``); the
    next commit starts the WAL over."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _ranges(seqs: list[int]) -> list[tuple[int, int]]:
    """Sequence numbers as inclusive runs: acknowledgements come mostly in order, so a
    few ``BETWEEN`` deletes do the work of many."""
    seqs.sort()
    out: list[tuple[int, int]] = []
    first = last = seqs[0]
    for seq in seqs[1:]:
        if seq != last + 1:
            out.append((first, last))
            first = seq
        last = seq
    out.append((first, last))
    return out


def _marked_ranges(marks: dict[int, int]) -> list[tuple[int, int, int]]:
    """``(released, first, last)`` for ``_MARK``: each value's rows as ``_ranges``."""
    by_value: dict[int, list[int]] = {}
    for seq, value in marks.items():
        by_value.setdefault(value, []).append(seq)
    return [
        (value, first, last) for value, seqs in by_value.items() for first, last in _ranges(seqs)
    ]


def open_file(path: Path) -> tuple[sqlite3.Connection, int]:
    """Opens (creating) the queue file at ``path``: the connection and the last sequence
    number; ``BridgeError`` when the file is not a queue this edgebus can use."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, cached_statements=_STATEMENTS
        )
    except (OSError, sqlite3.Error) as exc:
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc}") from exc
    try:
        # One connection, this process's only: an exclusive lock (taken at the first
        # write, kept) instead of file locks and the shared-memory WAL index around
        # every transaction; another gateway opening the same queue is refused.
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Commits write the WAL and never sync; checkpoints (the syncs) are the thread's.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.executescript(_DDL)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif row[0] == "1":  # before ``released``: one column more, no row marked
            conn.executescript(
                "BEGIN;"
                " ALTER TABLE queue ADD COLUMN released INTEGER NOT NULL DEFAULT 0;"
                f" UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version';"
                " COMMIT;"
            )
        elif row[0] != str(SCHEMA_VERSION):
            raise BridgeError(
                f"{path}: bridge queue schema version {row[0]} is not {SCHEMA_VERSION};"
                " move the file away to start with an empty queue"
            )
        last = conn.execute("SELECT max(seq) FROM queue").fetchone()[0] or 0
    except sqlite3.Error as exc:
        conn.close()
        raise BridgeError(
            f"{path}: cannot read the bridge queue ({exc}); move it away to start with an"
            " empty queue"
        ) from exc
    except BridgeError:
        conn.close()
        raise
    return conn, last
