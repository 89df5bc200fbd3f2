"""The SQLite store's ``last_alive``: sessions it still holds as connected at an open
(the process died with them connected) count as offline since the broker last ran.

``alive(now)`` writes the time at most every ``ALIVE_INTERVAL_S``; ``session_saved``
writes it too. At the next open, a session whose ``offline_since`` is NULL gets that time
(written back), one already offline keeps its own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.session_state import Counters, SessionState
from broker_core.store.base import Snapshot
from broker_core.store.sqlite import ALIVE_INTERVAL_S, SqliteStore


def session(client_id: str) -> SessionState:
    state = SessionState(client_id, ServerLimits(), Counters())
    state.expiry_interval = 60
    return state


def run_store(data_dir: Path, change: Callable[[SqliteStore], None] | None = None) -> Snapshot:
    """Opens the store, makes ``change``, closes it (no session is marked offline, as
    after a kill); returns what the open read."""

    async def main() -> Snapshot:
        store = SqliteStore(data_dir)
        snapshot = store.open()
        if change is not None:
            change(store)
        store.close()
        return snapshot

    return asyncio.run(main())


def offline_since(snapshot: Snapshot) -> dict[str, float | None]:
    return {restored.client_id: restored.offline_since for restored in snapshot.sessions}


def test_connected_sessions_are_offline_since_the_last_alive(tmp_path: Path) -> None:
    later = time.time() + 100

    def change(store: SqliteStore) -> None:
        store.session_saved(session("connected"))
        offline = session("offline")
        store.session_saved(offline)
        store.session_offline(offline, 1_000.0)
        store.alive(later)
        store.alive(later + ALIVE_INTERVAL_S / 2)  # within the interval: not written

    run_store(tmp_path, change)
    assert offline_since(run_store(tmp_path)) == {"connected": later, "offline": 1_000.0}
    # Written back: a later last_alive does not move it.
    run_store(tmp_path, lambda store: store.alive(later + 50))
    assert offline_since(run_store(tmp_path))["connected"] == later


def test_a_session_saved_after_the_last_alive_is_offline_from_its_save(tmp_path: Path) -> None:
    before = time.time()
    run_store(tmp_path, lambda store: store.session_saved(session("new")))
    since = offline_since(run_store(tmp_path))["new"]
    assert since is not None and since >= before


def test_alive_stamps_alone_do_not_put_off_the_idle_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stamp every few seconds while clients are connected is no write for the idle
    checkpoint: the log is still checkpointed once the store has had nothing else to
    write for ``CHECKPOINT_IDLE_S`` (here shortened), stamps going on all along."""
    import broker_core.store.sqlite as sqlite_store

    passive = threading.Event()
    real = sqlite_store.checkpoint

    def checkpoint(conn: object, path: Path, mode: str = "TRUNCATE") -> None:
        real(conn, path, mode)  # type: ignore[arg-type]
        if mode == "PASSIVE":
            passive.set()

    monkeypatch.setattr(sqlite_store, "checkpoint", checkpoint)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_IDLE_S", 0.5)

    async def main() -> bool:
        store = SqliteStore(tmp_path)
        store.open()
        store.session_saved(session("connected"))  # a write: a quiet spell may follow
        now = time.time()
        deadline = time.monotonic() + 30
        while not passive.is_set() and time.monotonic() < deadline:
            now += ALIVE_INTERVAL_S
            store.alive(now)  # a stamp every 0.1 s, five times the shortened idle time
            await asyncio.sleep(0.1)
        store.close()
        return passive.is_set()

    assert asyncio.run(main())
