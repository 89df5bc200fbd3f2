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

import bridge.queue_salvage as queue_salvage
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


def _root(queue: Path) -> int:
    look = sqlite3.connect(f"{queue.resolve().as_uri()}?immutable=1", uri=True)
    (root,) = look.execute("SELECT rootpage FROM sqlite_master WHERE name = 'queue'").fetchone()
    look.close()
    return int(root)


def _cell_rowids(data: bytes, number: int, size: int) -> list[int]:
    """The row ids of page ``number`` when it is a table leaf (its cells' second varint;
    the payload size, the first, is one or two bytes here)."""
    page = data[(number - 1) * size : number * size]
    if page[0] != 13:
        return []
    rowids = []
    for cell in range(int.from_bytes(page[3:5], "big")):
        at = int.from_bytes(page[8 + 2 * cell : 10 + 2 * cell], "big")
        at += 1 if page[at] < 0x80 else 2
        value = 0
        while True:
            byte = page[at]
            value = (value << 7) | (byte & 0x7F)
            at += 1
            if not byte & 0x80:
                break
        rowids.append(value)
    return rowids


def _closed_queue(queue: Path, rows: int, acked: int = 0) -> None:
    """A queue of ``rows`` rows whose first ``acked`` were then deleted, closed."""
    conn, _ = open_file(queue)
    write_rows(conn, _values(1, rows), [], {})
    if acked:
        write_rows(conn, [], list(range(1, acked + 1)), {})
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    mark_closed(queue)


def test_the_rows_below_an_overwritten_root_are_salvaged_from_their_pages(
    tmp_path: Path,
) -> None:
    """The b-tree cannot reach any row without its root; the leaf pages are intact, and
    their rows are read page by page (bridge.queue_pages). Rows deleted before (the
    remote acknowledged them), whose bytes stay in the pages on the freelist, are not
    brought back."""
    queue = tmp_path / "queue.db"
    _closed_queue(queue, ROWS)
    data = queue.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    first_leaf = next(  # the page of row 1, before it is deleted
        n for n in range(2, len(data) // size + 1) if _cell_rowids(data, n, size)[:3] == [1, 2, 3]
    )
    acked = data[(first_leaf - 1) * size : first_leaf * size]
    conn, _ = open_file(queue)
    write_rows(conn, [], list(range(1, ROWS // 2 + 1)), {})
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    mark_closed(queue)
    before = _rows(queue)
    assert [row[0] for row in before] == list(range(ROWS // 2 + 1, ROWS + 1))
    # A page on the freelist that still holds rows the remote acknowledged (what a page
    # freed while its cells were moved, or a reused one, may hold).
    data = queue.read_bytes()
    trunk = int.from_bytes(data[32:36], "big")
    assert trunk and int.from_bytes(data[(trunk - 1) * size + 4 : (trunk - 1) * size + 8], "big")
    freed = int.from_bytes(data[(trunk - 1) * size + 8 : (trunk - 1) * size + 12], "big")
    with queue.open("r+b") as file:
        file.seek((freed - 1) * size)
        file.write(acked)
    _overwrite(queue, [_root(queue)])
    with pytest.raises(sqlite3.DatabaseError):
        _rows(queue)

    found = salvage(queue)

    assert _rows(queue) == before
    assert (found.rows, found.first, found.last) == (ROWS // 2, ROWS // 2 + 1, ROWS)


def test_a_queue_of_which_nothing_can_be_read_is_left_as_it_was(tmp_path: Path) -> None:
    """Its only page (the root, a leaf) overwritten."""
    queue = tmp_path / "queue.db"
    _closed_queue(queue, 10)
    _overwrite(queue, [_root(queue)])
    damaged = queue.read_bytes()
    with pytest.raises(BridgeError, match="nothing of it can be salvaged"):
        salvage(queue)
    assert queue.read_bytes() == damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queue.db", "queue.db.created"]


def test_an_error_other_than_the_damage_stops_the_salvage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails for another reason (an I/O error; here the damage, taken for
    one) leaves every file as it was, and no partial copy: not a salvage of the rows
    read so far."""
    queue = tmp_path / "queue.db"
    _closed_queue(queue, ROWS)
    _overwrite(queue, _leaf_pages(queue)[:1])
    damaged = queue.read_bytes()
    monkeypatch.setattr(queue_salvage, "is_damage", lambda exc: False)
    with pytest.raises(BridgeError, match="cannot read the damaged bridge queue to salvage"):
        salvage(queue)
    assert queue.read_bytes() == damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queue.db", "queue.db.created"]
