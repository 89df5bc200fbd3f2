"""A queue whose checkpoint failed on a full disk is intact, not cut short.

A checkpoint copies the write-ahead log into the database file page by page, the first
page (with the header counting every page) first: on a full disk it stops with the file
shorter than its header says, every missing page still in the log, which SQLite reads.
Such a file opens with every row (``queue_file._refuse_torn`` looks in the log); a file
cut short whose log does not hold the missing pages is still found damaged. Real files
on a small tmpfs (``tests.helpers.small_fs``).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from bridge.queue_file import QueueDamaged, open_file, read_rows, write_rows
from broker_core.store.marker import wal_path
from tests.helpers.small_fs import fill, small_filesystem

ROWS = 200


def _rows(first: int, count: int) -> list[object]:
    values: list[object] = []
    for seq in range(first, first + count):
        values += [seq, "cloud/fwd", bytearray(b"%d" % seq).ljust(1000, b"."), 1, 0]
        values += [bytearray(), 1000.0 + seq]
    return values


def test_a_checkpoint_stopped_by_a_full_disk_leaves_a_queue_that_opens_whole(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs", 2 * 1024 * 1024) as directory:
        queue = directory / "queue.db"
        conn, _ = open_file(queue)
        write_rows(conn, _rows(1, ROWS), [], {})  # in the log, the file a page or two
        filler = fill(directory)
        with pytest.raises(sqlite3.OperationalError, match="full"):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.close()  # its own checkpoint fails too: the log stays
        header = queue.read_bytes()[:100]
        page = int.from_bytes(header[16:18], "big")
        counted = int.from_bytes(header[28:32], "big")
        assert queue.stat().st_size < counted * page  # shorter than its header says
        assert wal_path(queue).stat().st_size > 0
        filler.unlink()

        conn, last = open_file(queue)  # not QueueDamaged
        try:
            assert last == ROWS
            rows = read_rows(conn, 1, ROWS + 1)
            assert [row.seq for row in rows] == list(range(1, ROWS + 1))
            assert bytes(rows[-1].payload).startswith(b"%d." % ROWS)
        finally:
            conn.close()


def test_a_file_cut_short_whose_log_lacks_the_pages_is_damaged(tmp_path: Path) -> None:
    queue = tmp_path / "queue.db"
    conn, _ = open_file(queue)
    try:
        write_rows(conn, _rows(1, ROWS), [], {})
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # every page in the file
        write_rows(conn, _rows(ROWS + 1, 1), [], {})  # the log holds the last pages only
        # The files as a kill -9 leaves them (the log kept), the copy cut to a third.
        copy = tmp_path / "copy" / "queue.db"
        copy.parent.mkdir()
        shutil.copyfile(queue, copy)
        shutil.copyfile(wal_path(queue), wal_path(copy))
    finally:
        conn.close()
    page = int.from_bytes(copy.read_bytes()[16:18], "big")
    with open(copy, "r+b") as file:
        file.truncate((copy.stat().st_size // page // 3) * page)
    assert wal_path(copy).stat().st_size > 0
    with pytest.raises(QueueDamaged, match="cut short"):
        open_file(copy)
