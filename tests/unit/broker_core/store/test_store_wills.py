"""The SQLite store keeps a session's pending will, and migrates a version 1 store.

A will written with ``will_saved`` comes back with its session at the next ``open``
(due time, will, publisher); it goes with ``will_deleted`` and with the session. A
version 1 database (no ``wills`` table) is migrated to version 2 on open and keeps its
sessions.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from broker_core.context import Origin
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import Will
from broker_core.mqtt.properties import Properties
from broker_core.mqtt.session_state import Counters, SessionState
from broker_core.store.base import RestoredWill, Snapshot
from broker_core.store.schema import SCHEMA_VERSION, StoreError, connect
from broker_core.store.sqlite import SqliteStore

WILL = Will(
    "status/dev-1",
    b"offline",
    1,
    True,
    Properties(
        will_delay_interval=30,
        message_expiry_interval=60,
        content_type="text/plain",
        user_properties=(("k", "v"), ("k", "w")),
    ),
)
ORIGIN = Origin("mqtt", "dev-1", "127.0.0.1:50412", "alice")
DUE_AT = 1_800_000_030.25


def session(client_id: str = "dev-1") -> SessionState:
    state = SessionState(client_id, ServerLimits(), Counters())
    state.expiry_interval = 3600
    return state


def run_store(data_dir: Path, *changes: str) -> Snapshot:
    """Opens the store, makes ``changes`` (names below), closes it; returns what it read."""

    async def main() -> Snapshot:
        store = SqliteStore(data_dir)
        snapshot = store.open()
        for change in changes:
            if change == "session":
                store.session_saved(session())
            elif change == "will":
                store.will_saved("dev-1", DUE_AT, WILL, ORIGIN)
            elif change == "will deleted":
                store.will_deleted("dev-1")
            elif change == "session deleted":
                store.session_deleted(session())
        store.close()
        return snapshot

    return asyncio.run(main())


def test_a_pending_will_comes_back_with_its_session(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "will")
    (restored,) = run_store(tmp_path).sessions
    assert restored.client_id == "dev-1"
    assert restored.will == RestoredWill(DUE_AT, WILL, ORIGIN)


def test_a_will_saved_again_replaces_the_first(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "will", "will")
    (restored,) = run_store(tmp_path).sessions
    assert restored.will == RestoredWill(DUE_AT, WILL, ORIGIN)


def test_a_deleted_will_is_not_restored(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "will", "will deleted")
    (restored,) = run_store(tmp_path).sessions
    assert restored.will is None


def test_a_will_goes_with_its_session(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "will", "session deleted")
    assert run_store(tmp_path).sessions == []
    with sqlite3.connect(tmp_path / "edgebus.db") as db:
        assert db.execute("SELECT count(*) FROM wills").fetchone() == (0,)


def test_a_will_without_its_session_is_dropped_at_open(tmp_path: Path) -> None:
    run_store(tmp_path, "will")
    assert run_store(tmp_path).sessions == []
    with sqlite3.connect(tmp_path / "edgebus.db") as db:
        assert db.execute("SELECT count(*) FROM wills").fetchone() == (0,)


def make_version_1(tmp_path: Path) -> Path:
    """A store as edgebus with schema version 1 wrote it: no ``wills`` table, a session."""
    run_store(tmp_path, "session")
    path = tmp_path / "edgebus.db"
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE wills")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    return path


def test_a_version_1_store_is_migrated_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = make_version_1(tmp_path)
    (restored,) = run_store(tmp_path, "will").sessions
    assert (restored.client_id, restored.expiry_interval, restored.will) == ("dev-1", 3600, None)
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    assert SCHEMA_VERSION == 3
    (restored,) = run_store(tmp_path).sessions
    assert restored.will == RestoredWill(DUE_AT, WILL, ORIGIN)


def test_a_version_with_no_migration_is_refused(tmp_path: Path) -> None:
    path = make_version_1(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 0 cannot be migrated"):
        connect(path)


def test_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = make_version_1(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    with pytest.raises(StoreError, match="newer than this edgebus supports"):
        connect(path)
