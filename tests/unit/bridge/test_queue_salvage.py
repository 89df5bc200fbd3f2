"""``bridge.queue_salvage``: a damaged queue's readable rows into a fresh queue, the
damaged file (and its write-ahead log) kept beside it; nothing moved when nothing can be
read. Real files."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from bridge.queue import DiskQueue
from bridge.queue_file import mark_closed, open_file, write_rows
from bridge.queue_salvage import salvage
from broker_core.errors import BridgeError

ROWS = 2000


def _values(first: int, last: int) -> list[object]:
    values: list[object] = []
    for seq in range(first, last + 1):
        payload = bytearray(f"{seq}".encode().ljust(100, b"."))
        values += [seq, f"t/{seq}", payload, 2 if seq % 7 == 0 else 1, 0, bytearray(), time.time()]
    return values


def _leaf_pages(path: Path) -> list[int]:
    """The table b-tree leaf pages of ``path`` after its first quarter (no root: the
    queue's root is an interior page with this many rows)."""
    data = path.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    pages = len(data) // size
    return [n for n in range(pages // 4, pages + 1) if data[(n - 1) * size] == 13]


def _overwrite(path: Path, numbers: list[int]) -> None:
    size = int.from_bytes(path.read_bytes()[16:18], "big")
    with path.open("r+b") as file:
        for number in numbers:
            file.seek((number - 1) * size)
            file.write(b"\xa5" * size)


def _rows(path: Path) -> list[tuple[int, bytes, int, int]]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT seq, payload, qos, released FROM queue ORDER BY seq").fetchall()
    finally:
        conn.close()


def test_the_readable_rows_of_a_killed_queue_are_salvaged_with_its_log(tmp_path: Path) -> None:
    """Rows in the database file and rows only in the write-ahead log (a run killed):
    every row not on an overwritten page is salvaged, in order, its QoS 2 released mark
    kept; the damaged file and its log are kept as a pair."""
    live = tmp_path / "live" / "queue.db"
    conn, _ = open_file(live)
    write_rows(conn, _values(1, ROWS), [], {})
    write_rows(conn, [], [], {seq: 1 for seq in range(7, ROWS + 1, 7)})
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    write_rows(conn, _values(ROWS + 1, ROWS + 100), [], {})  # in the log only
    # What a kill -9 leaves: the file and its log as they are on disk now.
    queue = tmp_path / "queue.db"
    for name in ("queue.db", "queue.db-wal", "queue.db.created"):
        shutil.copyfile(live.with_name(name), queue.with_name(name))
    conn.close()
    before = _rows(queue)
    assert len(before) == ROWS + 100
    pages = _leaf_pages(queue)[:2]
    _overwrite(queue, pages)
    damaged = queue.read_bytes()
    log = queue.with_name("queue.db-wal").read_bytes()
    with pytest.raises(sqlite3.DatabaseError):
        _rows(queue)

    found = salvage(queue)

    after = _rows(queue)
    assert found.rows == len(after)
    assert ROWS - 100 < len(after) < ROWS + 100
    assert after == sorted(after)
    assert set(after) < set(before)  # the same rows, marks included, none made up
    assert [row[0] for row in after][-100:] == list(range(ROWS + 1, ROWS + 101))
    assert (found.first, found.last) == (after[0][0], after[-1][0])
    assert found.kept.read_bytes() == damaged
    assert found.kept.with_name(found.kept.name + "-wal").read_bytes() == log
    assert not queue.with_name("queue.db-wal").exists()

    async def reopened() -> list[int]:
        disk = DiskQueue.open(queue, "q")
        await disk.loaded()
        done: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        disk.read(0, ROWS * 2, lambda items, last: done.set_result([i.seq for i in items]))
        seqs = await done
        disk.close()
        return seqs

    assert asyncio.run(reopened()) == [row[0] for row in after]


def test_a_queue_whose_table_cannot_be_read_is_left_as_it_was(tmp_path: Path) -> None:
    queue = tmp_path / "queue.db"
    conn, _ = open_file(queue)
    write_rows(conn, _values(1, 50), [], {})
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    mark_closed(queue)
    look = sqlite3.connect(f"{queue.resolve().as_uri()}?immutable=1", uri=True)
    (root,) = look.execute("SELECT rootpage FROM sqlite_master WHERE name = 'queue'").fetchone()
    look.close()
    _overwrite(queue, [root])
    damaged = queue.read_bytes()
    with pytest.raises(BridgeError, match="nothing of it can be salvaged"):
        salvage(queue)
    assert queue.read_bytes() == damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queue.db", "queue.db.created"]
