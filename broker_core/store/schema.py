"""The SQLite schema, its version, and opening a database file safely.

The schema carries a version in ``meta``. A database written by a newer edgebus is
refused with a clear message rather than misread; an older one is migrated here, one
version at a time (``_MIGRATIONS``), each step in one transaction with the new version:

- 1 -> 2: the ``wills`` table, the pending will of an offline session (its Will Delay
  Interval running, MQTT 5.0 3.1.3.2.2), with its due time as wall-clock time.

``_DDL`` is the current schema, written whole into a new database; every statement in
it and in the migrations is idempotent (``IF NOT EXISTS``).

A store that existed must not silently start empty. Once a database is open, a marker
file beside it (``<name>.created``) records that it exists. A database file of 0 bytes
(what a power loss leaves on some file systems) is never a store edgebus wrote, and a
missing one whose marker is still there was lost: both are refused with one line naming
the file and saying how to start with an empty store on purpose (delete the marker, and
the empty file). Every error of opening is one ``StoreError`` line, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path

from broker_core.errors import EdgebusError

__all__ = ["SCHEMA_VERSION", "StoreError", "connect", "marker_path"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2

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
"""

# Version n -> n + 1: the statements, idempotent, run in one transaction with the version.
_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (_WILLS,),
}


class StoreError(EdgebusError):
    """The persistent store cannot be opened or written."""


def marker_path(path: Path) -> Path:
    """The file that says the database at ``path`` was created."""
    return path.with_name(path.name + ".created")


def _refuse_lost_store(path: Path) -> None:
    """Raises StoreError when the database is empty (0 bytes) or gone after it existed."""
    marker = marker_path(path)
    try:
        size: int | None = path.stat().st_size
    except FileNotFoundError:
        size = None
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc.strerror or exc}") from exc
    if size == 0:
        fresh = f"delete {path} and {marker}" if marker.exists() else f"delete {path}"
        raise StoreError(
            f"{path}: the store file is empty (0 bytes), so its sessions, queued and retained"
            f" messages are lost (a power loss or a copy that went wrong); edgebus will not"
            f" start with an empty store silently: restore the file from a backup, or {fresh}"
            " to start with an empty store on purpose"
        )
    if size is None and marker.exists():
        raise StoreError(
            f"{path}: the store file is missing, but {marker} says it was created; edgebus"
            f" will not start with an empty store silently: restore the file from a backup,"
            f" or delete {marker} to start with an empty store on purpose"
        )


def _write_marker(path: Path) -> None:
    marker = marker_path(path)
    if marker.exists():
        return
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        with open(marker, "w", encoding="utf-8") as file:
            file.write(
                f"{path.name} created {stamp}; while this file exists edgebus refuses to start"
                " when the store is missing or empty. Delete it to start with an empty store.\n"
            )
            file.flush()
            os.fsync(file.fileno())
    except OSError as exc:
        raise StoreError(f"{marker}: cannot write the store marker: {exc.strerror or exc}") from exc


def connect(path: Path) -> sqlite3.Connection:
    """Opens (creating if needed) the database in WAL mode and checks its version.

    ``synchronous=NORMAL`` in WAL mode: a commit survives a crash of the process
    (``kill -9``); only a power loss can take the last commits.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"{path.parent}: cannot create the data directory: {exc}") from exc
    _refuse_lost_store(path)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.executescript(_DDL)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(
            f"{path}: cannot open the store ({exc}); restore it from a backup, or move it and"
            f" {marker_path(path)} away to start with an empty store on purpose"
        ) from exc
    if row is None:
        try:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(f"{path}: cannot open the store: {exc}") from exc
        _write_marker(path)
        return conn
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
    _write_marker(path)
    return conn


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
