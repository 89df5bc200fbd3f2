"""The SQLite store keeps the will of a connected client (``will_held``) until its
connection ends (``will_released``); after a stop that was not clean it comes back as a
pending will due its delay after ``last_alive``: its session's, or, without a session,
in ``Snapshot.wills``. After a clean stop none is restored. A version 2 store migrates.

A stop that was not clean is made by closing the store, then marking it ``open`` again
with an empty log, as a ``kill -9`` leaves it (``broker_core.store.marker``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from broker_core.context import Origin
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import Will
from broker_core.mqtt.properties import Properties
from broker_core.mqtt.session_state import Counters, SessionState
from broker_core.store.base import RestoredWill, Snapshot
from broker_core.store.marker import OPEN, mark, wal_path
from broker_core.store.schema import SCHEMA_VERSION
from broker_core.store.sqlite import SqliteStore

WILL = Will("status/dev-1", b"offline", 1, True, Properties(will_delay_interval=30))
ORIGIN = Origin("mqtt", "dev-1", "127.0.0.1:50412", "alice")


def session(client_id: str = "dev-1") -> SessionState:
    state = SessionState(client_id, ServerLimits(), Counters())
    state.expiry_interval = 3600
    return state


def run_store(data_dir: Path, *changes: str, killed: bool = False) -> Snapshot:
    """Opens the store, makes ``changes``, stops (``killed``: as a kill leaves it)."""

    async def main() -> Snapshot:
        store = SqliteStore(data_dir)
        snapshot = store.open()
        for change in changes:
            if change == "session":
                store.session_saved(session())
            elif change == "held":
                store.will_held("dev-1", WILL, ORIGIN, 30)
            elif change == "released":
                store.will_released("dev-1")
            elif change == "deleted":
                store.will_deleted("dev-1")
        store.close()
        return snapshot

    snapshot = asyncio.run(main())
    if killed:
        path = data_dir / "edgebus.db"
        mark(path, OPEN, "edgebus.db created")
        wal_path(path).touch()
    return snapshot


def rows(data_dir: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(data_dir / "edgebus.db") as db:
        return db.execute(sql).fetchall()


def last_alive(data_dir: Path) -> float:
    ((value,),) = rows(data_dir, "SELECT value FROM meta WHERE key = 'last_alive'")
    return float(str(value))


def test_a_held_will_of_a_session_is_its_pending_will_after_a_kill(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "held", killed=True)
    due_at = last_alive(tmp_path) + 30
    (restored,) = run_store(tmp_path, killed=True).sessions
    assert restored.will == RestoredWill(due_at, WILL, ORIGIN)
    # Written back as the session's pending will: another kill does not move it.
    assert rows(tmp_path, "SELECT count(*) FROM held_wills") == [(0,)]
    (again,) = run_store(tmp_path).sessions
    assert again.will == RestoredWill(due_at, WILL, ORIGIN)


def test_a_held_will_without_a_session_is_due_until_deleted(tmp_path: Path) -> None:
    run_store(tmp_path, "held", killed=True)
    due_at = last_alive(tmp_path) + 30
    snapshot = run_store(tmp_path, killed=True)
    assert (snapshot.sessions, snapshot.wills) == (
        [],
        [("dev-1", RestoredWill(due_at, WILL, ORIGIN))],
    )
    assert run_store(tmp_path, "deleted", killed=True).wills == [
        ("dev-1", RestoredWill(due_at, WILL, ORIGIN))
    ]
    assert run_store(tmp_path).wills == []


def test_a_released_will_is_not_restored(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "held", "released", killed=True)
    snapshot = run_store(tmp_path)
    assert snapshot.wills == []
    (restored,) = snapshot.sessions
    assert restored.will is None


def test_a_held_will_left_after_a_clean_stop_is_dropped(tmp_path: Path) -> None:
    run_store(tmp_path, "session", "held")
    snapshot = run_store(tmp_path)
    assert snapshot.wills == []
    assert snapshot.sessions[0].will is None
    assert rows(tmp_path, "SELECT count(*) FROM held_wills") == [(0,)]


def test_a_version_2_store_is_migrated(tmp_path: Path) -> None:
    run_store(tmp_path, "session")
    with sqlite3.connect(tmp_path / "edgebus.db") as db:
        db.execute("DROP TABLE held_wills")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    run_store(tmp_path, "held", killed=True)
    assert rows(tmp_path, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(SCHEMA_VERSION),)
    ]
    assert SCHEMA_VERSION == 3
    (restored,) = run_store(tmp_path).sessions
    assert restored.will is not None and restored.will.will == WILL
