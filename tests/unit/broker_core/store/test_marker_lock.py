"""A marker check of a database another opener holds locked (a second gateway on the
same data directory, a run of this one not yet closed) does not wait on SQLite's busy
timeout: the check runs on the event loop, and a read it cannot make at once is
reported as "cannot tell", for the caller's own open to name the lock."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from broker_core.store import marker


def test_a_locked_database_is_checked_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "queue.db"
    holder = sqlite3.connect(path)
    try:
        holder.execute("PRAGMA journal_mode=WAL")
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("CREATE TABLE queue (seq INTEGER PRIMARY KEY)")
        holder.commit()  # the exclusive lock is held from this write on
        marker.mark(path, marker.OPEN, "a test queue")
        assert marker.wal_path(path).exists()

        timeouts: list[Any] = []
        connect = sqlite3.connect

        def spy(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            timeouts.append(kwargs.get("timeout"))
            return connect(*args, **kwargs)

        monkeypatch.setattr(marker.sqlite3, "connect", spy)
        result = marker.check(path, ("queue",))
    finally:
        holder.close()
    assert result.loss is None  # cannot tell: the caller's open reports the lock
    assert timeouts == [0]  # not SQLite's default busy wait of 5 s
