"""The bridge queue's SQLite file: opening it, its schema, and the statements run on it.

- ``open_file(path)`` opens (creating) ``queue.db``: one connection, the process's only,
  in exclusive locking mode, WAL with ``synchronous=NORMAL`` and no automatic
  checkpoints; it returns the connection and the last sequence number. The schema
  carries a version (``SCHEMA_VERSION``): a file of version 1 is brought to 2 (the
  ``released`` column), any other version or an unreadable file is refused with what to
  do.
- A queue that existed never starts empty in silence: a marker beside it
  (``queue.db.created``, ``marker_path``) says it was created, and whether the last run
  closed it (``mark_closed``) or left it ``open``; the marker and the checks are the main
  store's (``broker_core.store.marker``), the words of the errors the queue's. While the
  marker is there, a ``queue.db`` that is missing, empty (0 bytes) or without the
  queue's tables, and, after a run that did not close it (``kill -9``, a crash), a
  missing or empty write-ahead log ``queue.db-wal`` (it held everything since the last
  checkpoint) are refused with one line naming the file and saying what to do: restore
  it, or move ``queue.db`` and the marker away to start with an empty queue on purpose.
  A ``queue.db`` without a marker (first start, or a queue of an edgebus before the
  marker) gets one.
- A damaged file (cut short, or malformed where the open reads it) raises
  ``QueueDamaged``: the bridge salvages its readable rows (``bridge.queue_salvage``).
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
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bridge.mapping import Queued
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import EMPTY, PacketKind, decode_properties
from broker_core.store.marker import CLOSED, CLOSING, OPEN, Loss, check, mark, marker_path, wal_path

__all__ = [
    "COLUMNS",
    "SCHEMA_VERSION",
    "QueueDamaged",
    "checkpoint",
    "create_schema",
    "index_rows",
    "is_damage",
    "mark_closed",
    "marker_path",
    "open_file",
    "queued_row",
    "read_rows",
    "unreadable",
    "write_rows",
]


class QueueDamaged(BridgeError):
    """The queue file is damaged (SQLite finds it malformed, or it was cut short): the
    bridge salvages its readable rows into a fresh queue (``bridge.queue_salvage``)
    rather than refusing it, as it refuses a queue that was lost or another's."""


#: SQLite's result codes for a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB.
_DAMAGE_CODES = frozenset({11, 26})


#: SQLite's result codes for a file that cannot be read or written now, not for what it
#: holds: SQLITE_BUSY, SQLITE_LOCKED (another connection has it), SQLITE_NOMEM,
#: SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_PROTOCOL.
_PASSING_CODES = frozenset({5, 6, 7, 8, 10, 13, 14, 15})
_LOCKED_CODES = frozenset({5, 6})


def _code(exc: sqlite3.Error) -> int | None:
    """The primary result code of ``exc`` (its extended code's low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file is damaged (not locked, read-only, full, ...)."""
    return _code(exc) in _DAMAGE_CODES


def unreadable(path: Path, exc: sqlite3.Error, and_marker: str) -> BridgeError:
    """The error of a queue ``path`` that SQLite cannot read (``exc``, not its damage):
    when the cause passes (a lock, a full disk, an I/O error) the bridge tries again as
    it backs off, the queue kept as it is; otherwise (not a queue of this edgebus) it
    says to move the file away, ``and_marker`` (", and <marker>,") with it."""
    code = _code(exc)
    if code in _PASSING_CODES:
        held = (
            "another connection holds its lock (another gateway with the same data_dir?);"
            if code in _LOCKED_CODES
            else "its files are left as they are;"
        )
        return BridgeError(
            f"{path}: cannot use the bridge queue now ({exc}); {held} the bridge tries"
            " again as it backs off"
        )
    return BridgeError(
        f"{path}: cannot read the bridge queue ({exc}); move it away{and_marker} to start"
        " with an empty queue"
    )


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


def create_schema(conn: sqlite3.Connection) -> None:
    """The queue's tables (in the caller's transaction, if any)."""
    for statement in _DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


def queued_row(row: tuple[Any, ...]) -> Queued:
    """A row of ``queue`` (its columns in order, ``released`` last) as a ``Queued``."""
    return _queued(row)


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


def _fresh(path: Path) -> str:
    return (
        "edgebus will not start the bridge with an empty queue silently: restore the file"
        f" from a backup, or move {path} and {marker_path(path)} away to start with an"
        " empty queue on purpose"
    )


def _and_marker(path: Path, created: bool) -> str:
    return f", and {marker_path(path)}," if created else ""


def _refuse_lost_queue(path: Path) -> bool:
    """Raises ``BridgeError`` when the marker says a queue was created here and it was
    lost (``broker_core.store.marker.check``); returns whether the marker is there."""
    marker = marker_path(path)
    wal = wal_path(path)
    try:
        # A 0-byte log after a run that did not close the queue is lost too, unlike the
        # main store's: the queue's open writes to the log and only its close truncates
        # it, so no run of it leaves an empty log behind.
        found = check(path, ("meta", "queue"), empty_log_lost=True)
    except OSError as exc:
        if exc.filename == str(marker):
            raise BridgeError(
                f"{marker}: cannot read the queue marker: {exc.strerror or exc}"
            ) from exc
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc.strerror or exc}") from exc
    if found.loss is Loss.MISSING:
        raise BridgeError(
            f"{path}: the bridge queue file is missing, but {marker} says it was created, so"
            f" the messages it held are lost; {_fresh(path)}"
        )
    if found.loss is Loss.EMPTY:
        raise BridgeError(
            f"{path}: the bridge queue file is empty (0 bytes), so the messages it held are"
            f" lost (a power loss or a copy that went wrong); {_fresh(path)}"
        )
    if found.loss is Loss.NO_TABLES:
        raise BridgeError(
            f"{path}: the bridge queue has no tables, but {marker} says it was created: its"
            f" write-ahead log {wal}, which held everything not yet checkpointed, was lost or"
            f" damaged, so the messages it held are lost; {_fresh(path)}"
        )
    if found.loss is Loss.LOG_LOST:
        raise BridgeError(
            f"{path}: the bridge queue's write-ahead log {wal} is missing or empty, but the"
            f" last run did not close the queue ({marker} says it is open), so the messages"
            f" queued since its last checkpoint are lost; {_fresh(path)}"
        )
    return found.created


def _refuse_torn(path: Path) -> None:
    """Raises ``QueueDamaged`` when ``path`` is an SQLite file cut short: its size is not
    a whole number of its pages, or less than its header says, and its write-ahead log
    does not hold the pages missing (``_logged_pages``). Checked before SQLite opens it,
    so that the damaged file is kept as it was (an open would write to it)."""
    try:
        with open(path, "rb") as file:
            header = file.read(100)
            size = file.seek(0, 2)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc.strerror or exc}") from exc
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return  # not SQLite's (SQLite says so), or empty
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the header's page count is up to date
    if not page or not (size % page or (valid and size < pages * page)):
        return
    # Pages a write-ahead log holds are not missing: a checkpoint that failed part way (a
    # full disk) wrote the first page, the header counting every page, but not the
    # pages the file had no room for; SQLite reads those from the log, which a checkpoint
    # copies and never empties before the file holds them all.
    missing = range(size // page + 1, max(pages, -(-size // page)) + 1)
    logged = _logged_pages(wal_path(path), page)
    if len(missing) <= len(logged) and all(number in logged for number in missing):
        return
    raise QueueDamaged(
        f"{path}: the bridge queue is damaged (the file is {size} bytes, not the"
        f" {pages} pages of {page} bytes its header counts, and its write-ahead log does"
        " not hold the pages missing: it was cut short)"
    )


#: A write-ahead log's header and a frame's, in bytes; its magic numbers.
_WAL_HEADER = 32
_FRAME_HEADER = 24
_WAL_MAGIC = (0x377F0682, 0x377F0683)


def _logged_pages(wal: Path, page: int) -> set[int]:
    """The numbers of the pages the write-ahead log ``wal`` holds for a database of pages
    of ``page`` bytes: those of its frames up to its last commit that carry the log's
    salt (a frame of an earlier generation of the log, or one written after the last
    commit, is not read by SQLite); empty when there is no such log."""
    found: set[int] = set()
    try:
        with open(wal, "rb") as file:
            header = file.read(_WAL_HEADER)
            if len(header) < _WAL_HEADER or int.from_bytes(header[:4], "big") not in _WAL_MAGIC:
                return found
            if int.from_bytes(header[8:12], "big") != page:
                return found
            salt = header[16:24]
            end = file.seek(0, 2)
            at = _WAL_HEADER
            uncommitted: set[int] = set()
            while at + _FRAME_HEADER + page <= end:
                file.seek(at)
                frame = file.read(_FRAME_HEADER)
                at += _FRAME_HEADER + page
                if len(frame) < _FRAME_HEADER or frame[8:16] != salt:
                    return found
                uncommitted.add(int.from_bytes(frame[:4], "big"))
                if int.from_bytes(frame[4:8], "big"):  # a commit frame
                    found |= uncommitted
                    uncommitted = set()
    except OSError:
        pass
    return found


def _mark(path: Path, state: str) -> None:
    note = (
        f"{path.name} created; while this file exists edgebus refuses to start the bridge"
        f" when {path.name} is missing or empty. Move both away to start with an empty"
        " queue."
    )
    try:
        mark(path, state, note)
    except OSError as exc:
        raise BridgeError(
            f"{marker_path(path)}: cannot write the queue marker: {exc.strerror or exc}"
        ) from exc


def mark_closing(path: Path) -> None:
    """The queue at ``path`` is about to be closed: a log its close removes (or its
    checkpoint empties) before ``mark_closed`` is no loss to the next open."""
    _mark(path, CLOSING)


def mark_closed(path: Path) -> None:
    """The queue at ``path`` was closed (its WAL checkpointed into it and removed)."""
    _mark(path, CLOSED)


def open_file(path: Path) -> tuple[sqlite3.Connection, int]:
    """Opens (creating) the queue file at ``path``: the connection and the last sequence
    number; ``QueueDamaged`` when the file is damaged (cut short, or malformed where the
    open reads it); ``BridgeError`` when it is not a queue this edgebus can use, or a
    queue that existed was lost (``_refuse_lost_queue``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc.strerror or exc}") from exc
    created = _refuse_lost_queue(path)
    _refuse_torn(path)
    try:
        # No busy timeout: the open runs on the event loop, and a lock is held by another
        # gateway on the same queue (the only other opener), which no wait outlasts;
        # refused at once, the bridge tries again as it backs off.
        conn = sqlite3.connect(
            path,
            timeout=0,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=_STATEMENTS,
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
                f" move it away{_and_marker(path, created)} to start with an empty queue"
            )
        last = conn.execute("SELECT max(seq) FROM queue").fetchone()[0] or 0
        # A write, so that the WAL holds a frame from now on: a run that ends without
        # closing the queue leaves a WAL that is not empty, and one found missing then
        # was lost (``_refuse_lost_queue``).
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('opened', ?)", (str(time.time()),)
        )
    except sqlite3.Error as exc:
        conn.close()
        if is_damage(exc):
            raise QueueDamaged(f"{path}: the bridge queue is damaged ({exc})") from exc
        raise unreadable(path, exc, _and_marker(path, created)) from exc
    except BridgeError:
        conn.close()
        raise
    try:
        # Refused when it cannot be written (unlike the main store, which opens with a
        # warning: the gateway cannot run without it, while a bridge backs off and retries).
        _mark(path, OPEN)
    except BridgeError:
        conn.close()
        raise
    return conn, last
