"""The queue's marker (``queue.db.created``): a queue that existed never opens empty in
silence; one written before the marker opens and gets one; a clean close leaves no WAL
and marks the queue closed."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.mapping import Queued
from bridge.queue import DiskQueue
from bridge.queue_file import marker_path
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import Properties


def _item(number: int) -> Queued:
    return Queued.of(f"t/{number}", b"x", 1, False, Properties(), 1000.0 + number)


async def _fill(path: Path, count: int) -> None:
    queue = DiskQueue.open(path, "q")
    await queue.loaded()
    for number in range(count):
        queue.append(_item(number))
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    queue.barrier(done.set_result)
    assert await done
    assert marker_path(path).read_text().endswith("state: open\n")
    queue.close()


def test_a_clean_close_checkpoints_and_marks_the_queue_closed(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    asyncio.run(_fill(path, 5))
    assert not path.with_name("queue.db-wal").exists()
    assert marker_path(path).read_text().endswith("state: closed\n")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM queue").fetchone()[0] == 5
    conn.close()


def test_a_queue_written_before_the_marker_opens_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    asyncio.run(_fill(path, 3))
    marker_path(path).unlink()

    async def main() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        assert queue.index.count == 3
        queue.close()

    asyncio.run(main())
    assert marker_path(path).exists()


@pytest.mark.parametrize("loss", ["missing", "empty", "no tables"])
def test_a_queue_that_existed_and_was_lost_is_refused(tmp_path: Path, loss: str) -> None:
    path = tmp_path / "queue.db"
    asyncio.run(_fill(path, 3))
    path.unlink()
    if loss == "empty":
        path.write_bytes(b"")
    elif loss == "no tables":
        sqlite3.connect(path).close()
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE other (x)")
        conn.close()

    async def main() -> None:
        with pytest.raises(BridgeError, match=f"move {path} and {marker_path(path)} away"):
            DiskQueue.open(path, "q")

    asyncio.run(main())


def test_a_queue_without_tables_is_refused_and_left_as_found(tmp_path: Path) -> None:
    """What a ``kill -9`` before the first checkpoint leaves, its log's header then
    damaged: ``queue.db`` one page without tables, everything in ``queue.db-wal``, which
    SQLite no longer reads. The refusal changes neither file (a read-write connection
    closed on it would delete the log)."""
    path = tmp_path / "queue.db"
    asyncio.run(_fill(path, 3))
    marker = marker_path(path).read_text()
    path.unlink()
    script = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA journal_mode=WAL')\n"
        "conn.execute('CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)')\n"
        "conn.execute('CREATE TABLE queue (seq INTEGER PRIMARY KEY)')\n"
        "os._exit(0)\n"  # no close: the log stays
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=30)
    wal = path.with_name("queue.db-wal")
    wal.write_bytes(bytes(32) + wal.read_bytes()[32:])
    marker_path(path).write_text(marker.replace("state: closed", "state: open"))
    files = (path, wal, marker_path(path))  # not -shm, an index a reader rebuilds
    before = [file.read_bytes() for file in files]

    async def main() -> None:
        with pytest.raises(BridgeError, match="the bridge queue has no tables"):
            DiskQueue.open(path, "q")

    asyncio.run(main())
    assert all(file.exists() for file in files)  # nothing deleted
    assert [file.read_bytes() for file in files] == before  # nor changed
