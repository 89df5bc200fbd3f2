"""The SQLite schema, its version, and opening a database file safely.

The schema carries a version in ``meta``. A database written by a newer edgebus is
refused with a clear message rather than misread; an older one is migrated here, one
version at a time (``_MIGRATIONS``), each step in one transaction with the new version:

- 1 -> 2: the ``wills`` table, the pending will of an offline session (its Will Delay
  Interval running, MQTT 5.0 3.1.3.2.2), with its due time as wall-clock time.
- 2 -> 3: the ``held_wills`` table, the will of a client whose connection is open
  (written at its CONNECT, deleted when the connection ends), so that a ``kill -9``
  does not lose it (``SqliteStore.will_held``).

``_DDL`` is the current schema, written whole into a new database; every statement in
it and in the migrations is idempotent (``IF NOT EXISTS``).

A store that existed must not silently start empty: a marker file beside it,
``edgebus.db.created``, says that it was created and whether the gateway stopped cleanly
(``broker_core.store.marker``, shared with the bridge queues). While the marker is there,
a database file of 0 bytes (what a power loss leaves on some file systems), a missing
one, one without the schema (its write-ahead log ``edgebus.db-wal``, which held it, lost
or damaged), and a log missing after a gateway that did not stop cleanly (deleted after a
``kill -9``: it held the commits since the last checkpoint) are each refused with one
line naming the file and saying what to do (restore it, or delete the files named to
start with an empty store on purpose; for the log, create it empty to start with what the
database file holds). A refusal leaves the files as they were. The log itself is never
missing while the marker exists, except after a clean stop (whose close checkpoints it
into the database and deletes it). A log whose header a power cut damaged is not told
apart from a power cut's lost last commits, which ``synchronous=NORMAL`` accepts.
Without the marker, no store was ever created there: a 0-byte or missing file is a new
store. Creating one that fails (a full disk) removes the files it made, so the next
start is a first start again. Every error of opening is one ``StoreError`` line, never a
traceback; a full disk is named as one.

The schema goes into the database file itself at once: every open ends with a checkpoint
(``wal_checkpoint(TRUNCATE)``), so after a first start the file holds the schema and the
log only what was written since. The writer checkpoints again when it falls idle
(``checkpoint``, ``SqliteStore``), and SQLite itself every ~1000 pages of log
(``wal_autocheckpoint``, its default, set explicitly).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from pathlib import Path

from broker_core.errors import EdgebusError
from broker_core.store.marker import (
    CLOSED,
    CLOSING,
    OPEN,
    Check,
    Loss,
    check,
    mark,
    marker_path,
    wal_path,
)

__all__ = ["SCHEMA_VERSION", "StoreError", "checkpoint", "close", "connect", "marker_path"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 3

#: SQLite checkpoints by itself once the log holds this many pages (4 KiB each).
WAL_AUTOCHECKPOINT_PAGES = 1000

# Version 2: the pending will of an offline session, one per session (its client id).
_WILLS = """
CREATE TABLE IF NOT EXISTS wills (
    client_id TEXT PRIMARY KEY,
    due_at REAL NOT NULL,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    origin_protocol TEXT NOT NULL,
    origin_name TEXT NOT NULL,
    origin_peer TEXT,
    origin_username TEXT
)"""

# Version 3: the will of a connected client, one per client id; ``delay_s`` is its Will
# Delay Interval, at most its session's expiry interval (0 for a session that ends with
# its connection): after a kill it is due that long after the broker last ran.
_HELD_WILLS = """
CREATE TABLE IF NOT EXISTS held_wills (
    client_id TEXT PRIMARY KEY,
    delay_s REAL NOT NULL,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    origin_protocol TEXT NOT NULL,
    origin_name TEXT NOT NULL,
    origin_peer TEXT,
    origin_username TEXT
)"""

_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    origin_protocol TEXT NOT NULL,
    origin_name TEXT NOT NULL,
    received_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    client_id TEXT PRIMARY KEY,
    expiry_interval INTEGER NOT NULL,
    offline_since REAL
);
CREATE TABLE IF NOT EXISTS subscriptions (
    client_id TEXT NOT NULL,
    topic_filter TEXT NOT NULL,
    qos INTEGER NOT NULL,
    no_local INTEGER NOT NULL,
    retain_as_published INTEGER NOT NULL,
    retain_handling INTEGER NOT NULL,
    subscription_id INTEGER,
    PRIMARY KEY (client_id, topic_filter)
);
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY,
    client_id TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    subscription_ids TEXT NOT NULL,
    packet_id INTEGER NOT NULL DEFAULT 0,
    released INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS deliveries_by_client ON deliveries (client_id, id);
CREATE TABLE IF NOT EXISTS incoming (
    client_id TEXT NOT NULL,
    packet_id INTEGER NOT NULL,
    PRIMARY KEY (client_id, packet_id)
);
CREATE TABLE IF NOT EXISTS retained (
    topic TEXT PRIMARY KEY,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    properties BLOB NOT NULL,
    origin_protocol TEXT NOT NULL,
    origin_name TEXT NOT NULL,
    received_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS delayed (
    id INTEGER PRIMARY KEY,
    due_at REAL NOT NULL,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    origin_protocol TEXT NOT NULL,
    origin_name TEXT NOT NULL,
    received_at INTEGER NOT NULL
);
{_WILLS};
{_HELD_WILLS};
"""

# Version n -> n + 1: the statements, idempotent, run in one transaction with the version.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (_WILLS,),
    2: (_HELD_WILLS,),
}


class StoreError(EdgebusError):
    """The persistent store cannot be opened or written."""


def _note(path: Path) -> str:
    """The marker's first line (``broker_core.store.marker``)."""
    return (
        f"{path.name} created; while this file exists edgebus refuses to start when the"
        " store is missing or empty. Delete it to start with an empty store."
    )


def _refuse_lost_store(path: Path) -> Check:
    """Raises StoreError when the marker says a store was created and it was lost
    (``marker.check``); returns what it found otherwise."""
    marker = marker_path(path)
    wal = wal_path(path)
    try:
        # A 0-byte log after a stop that was not clean is not lost here: every open
        # truncates the log (``checkpoint``), so a kill soon after leaves one.
        found = check(path, ("meta",))
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc.strerror or exc}") from exc
    if found.loss is Loss.EMPTY:
        raise StoreError(
            f"{path}: the store file is empty (0 bytes), so its sessions, queued and retained"
            f" messages are lost (a power loss or a copy that went wrong); edgebus will not"
            f" start with an empty store silently: restore the file from a backup, or delete"
            f" {path} and {marker} to start with an empty store on purpose"
        )
    if found.loss is Loss.MISSING:
        raise StoreError(
            f"{path}: the store file is missing, but {marker} says it was created; edgebus"
            f" will not start with an empty store silently: restore the file from a backup,"
            f" or delete {marker} to start with an empty store on purpose"
        )
    if found.loss is Loss.NO_TABLES:
        raise StoreError(
            f"{path}: the store has no tables, but {marker} says it was created: its"
            f" write-ahead log {wal}, which held them, is missing or damaged, so its sessions,"
            f" queued and retained messages are lost; edgebus will not start with an empty"
            f" store silently: restore {path} and {wal} from a backup, or delete {path}, {wal}"
            f" and {marker} to start with an empty store on purpose"
        )
    if found.loss is Loss.LOG_LOST:
        raise StoreError(
            f"{path}: its write-ahead log {wal} is missing, but the gateway did not stop"
            f" cleanly: the commits since the last checkpoint (the last seconds of its"
            f" sessions, queued and retained messages) were in it and are lost; edgebus"
            f" will not start without them silently: restore {wal} from a backup, or"
            f" create it empty (touch {wal}) to start with what {path} holds"
        )
    return found


def close(conn: sqlite3.Connection, path: Path) -> None:
    """Closes, which checkpoints the log into the database and deletes it (the last
    connection), then marks the stop clean. When the mark cannot be written (a full disk)
    and the close deleted the log, everything is in the database file: an empty log says
    so to the next start, which would otherwise take the missing log for a lost one.
    (Not so for a bridge queue, which takes an empty log after a run it did not close
    for a lost one: ``bridge.queue_file``.) Marked closing first, so that a kill between
    the close and its mark is not taken for a lost log by the next start."""
    try:
        mark(path, CLOSING, _note(path))
    except OSError as exc:
        log.warning("store %s: cannot record the stop: %s", path, exc.strerror or exc)
    conn.close()
    try:
        mark(path, CLOSED, _note(path))
    except OSError as exc:
        log.warning("store %s: cannot record the clean stop: %s", path, exc.strerror or exc)
        wal = wal_path(path)
        if not wal.exists():
            try:
                wal.touch()
            except OSError as exc:
                log.warning("store %s: cannot create the empty log %s: %s", path, wal, exc)


def _full(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def _files(path: Path) -> list[Path]:
    return [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def _discard_new(made: list[Path]) -> None:
    """Removes the files a failed creation of a new store made."""
    for leftover in made:
        try:
            leftover.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("%s: cannot remove it after the store was not created: %s", leftover, exc)


def connect(path: Path) -> sqlite3.Connection:
    """Opens (creating if needed) the database in WAL mode and checks its version.

    ``synchronous=NORMAL`` in WAL mode: a commit survives a crash of the process
    (``kill -9``); only a power loss can take the last commits.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{path.parent}: cannot create the data directory: {exc}") from exc
    found = _refuse_lost_store(path)
    new = not found.created and not found.size  # no store was ever created here
    # The files a new store's creation makes, removed again when it fails.
    made = [f for f in _files(path) if not f.exists()] if new else []
    try:
        conn = _open(path, new)
    except StoreError:
        _discard_new(made)
        raise
    try:
        mark(path, OPEN, _note(path))  # until close() says otherwise
    except OSError as exc:
        if not found.created:
            conn.close()
            if new:
                _discard_new(made)
            raise StoreError(
                f"{marker_path(path)}: cannot write the store marker: {exc.strerror or exc}"
            ) from exc
        # The store opens (the gateway cannot run without it; a bridge queue is refused
        # instead, and retried): a kill and a lost log in this run go unnoticed.
        log.warning("store %s: cannot mark it open: %s", path, exc.strerror or exc)
    with contextlib.suppress(sqlite3.Error):  # the clean-stop record before the marker's
        conn.execute("DELETE FROM meta WHERE key = 'stopped_cleanly'")
    checkpoint(conn, path)
    return conn


def _open(path: Path, new: bool) -> sqlite3.Connection:
    """The connection to a database with the current schema (created, or migrated)."""
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.executescript(_DDL)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            return conn
    except sqlite3.DatabaseError as exc:
        if conn is not None:
            conn.close()
        if _full(exc):
            raise StoreError(
                f"{path}: cannot {'create' if new else 'open'} the store: the disk is full"
                f" ({exc}); free space on the file system of {path.parent} and start again"
            ) from exc
        if new:
            raise StoreError(f"{path}: cannot create the store: {exc}") from exc
        raise StoreError(
            f"{path}: cannot open the store ({exc}); restore it from a backup, or move it and"
            f" {marker_path(path)} away to start with an empty store on purpose"
        ) from exc
    try:
        version = int(row[0])
    except ValueError:
        conn.close()
        raise StoreError(f"{path}: the store's schema version {row[0]!r} is not a number") from None
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"{path}: store schema version {version} is newer than this edgebus supports "
            f"({SCHEMA_VERSION}); upgrade edgebus or point data_dir elsewhere"
        )
    if version < SCHEMA_VERSION:
        _migrate(conn, path, version)
    return conn


def checkpoint(conn: sqlite3.Connection, path: Path, mode: str = "TRUNCATE") -> None:
    """Copies the write-ahead log into the database file (``wal_checkpoint``); a failure
    (a full disk) is logged, the log keeps the commits and the next checkpoint retries."""
    try:
        busy, _, _ = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
    except sqlite3.Error as exc:
        log.warning("store %s: checkpoint failed: %s", path, exc)
        return
    if busy:
        log.debug("store %s: checkpoint %s could not complete (a reader)", path, mode)


def _migrate(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Brings a database of schema ``version`` to ``SCHEMA_VERSION``, step by step; a
    step that fails is rolled back and leaves the database at the version before it."""
    while version < SCHEMA_VERSION:
        steps = _MIGRATIONS.get(version)
        if steps is None:
            conn.close()
            raise StoreError(f"{path}: store schema version {version} cannot be migrated")
        try:
            conn.execute("BEGIN IMMEDIATE")
            for statement in steps:
                conn.execute(statement)
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version + 1),)
            )
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            conn.close()
            raise StoreError(
                f"{path}: cannot migrate the store from schema version {version} to"
                f" {version + 1}: {exc}"
            ) from exc
        log.info("store %s migrated from schema version %d to %d", path, version, version + 1)
        version += 1
