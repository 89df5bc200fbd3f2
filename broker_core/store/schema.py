"""The SQLite schema, its version, and opening a database file safely.

The schema carries a version in ``meta``. A database written by a newer edgebus is
refused with a clear message rather than misread; older versions are migrated here
(version 1 is the first, so there is nothing to migrate yet).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from broker_core.errors import EdgebusError

__all__ = ["SCHEMA_VERSION", "StoreError", "connect"]

SCHEMA_VERSION = 1

_DDL = """
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
"""


class StoreError(EdgebusError):
    """The persistent store cannot be opened or written."""


def connect(path: Path) -> sqlite3.Connection:
    """Opens (creating if needed) the database in WAL mode and checks its version.

    ``synchronous=NORMAL`` in WAL mode: a commit survives a crash of the process
    (``kill -9``); only a power loss can take the last commits.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.executescript(_DDL)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc}") from exc
    if row is None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
        return conn
    version = int(row[0])
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"{path}: store schema version {version} is newer than this edgebus supports "
            f"({SCHEMA_VERSION}); upgrade edgebus or point data_dir elsewhere"
        )
    if version < SCHEMA_VERSION:  # pragma: no cover - no older version exists yet
        conn.close()
        raise StoreError(f"{path}: store schema version {version} cannot be migrated")
    return conn
