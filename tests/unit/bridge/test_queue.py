"""The bridge's disk queue: rows committed in order, read back, deleted; its index."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import bridge.queue as queue_module
from bridge.mapping import Queued
from bridge.queue import DiskQueue
from bridge.queue_file import QueueDamaged
from bridge.queue_index import QueueIndex
from bridge.queue_salvage import salvage
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import Properties
from tests.helpers.timeouts import unit


def _route(number: int, qos: int = 1, properties: Properties | None = None) -> Queued:
    return Queued.of(
        f"t/{number}",
        str(number).encode(),
        qos,
        False,
        Properties() if properties is None else properties,
        1000.0 + number,
    )


async def _barrier(queue: DiskQueue) -> bool:
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    queue.barrier(done.set_result)
    return await done


async def _read(queue: DiskQueue, first: int, limit: int) -> tuple[list[Queued], int]:
    done: asyncio.Future[tuple[list[Queued], int]] = asyncio.get_running_loop().create_future()
    queue.read(first, limit, lambda items, last: done.set_result((items, last)))
    return await done


def test_rows_are_committed_in_order_and_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"

    async def first_run() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        items = [queue.append(_route(n)) for n in range(1, 11)]
        assert [item.seq for item in items] == list(range(1, 11))
        assert queue.pending == 10
        assert await _barrier(queue) is True
        assert (queue.pending, queue.committed) == (0, 10)
        queue.remove(3)
        queue.remove(1)
        queue.close()

    async def second_run() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        index = queue.index
        assert (index.count, index.first(), queue.last) == (8, 2, 10)
        assert index.bytes == sum(
            len(f"t/{n}") + len(str(n)) for n in range(1, 11) if n not in (1, 3)
        )
        assert index.oldest_time() == 1002.0
        items, last = await _read(queue, 0, 4)
        assert [item.seq for item in items] == [2, 4, 5, 6]
        assert last == 6
        assert (items[0].topic, items[0].payload, items[0].qos) == ("t/2", b"2", 1)
        assert queue.append(_route(11)).seq == 11  # numbering goes on
        queue.close()

    asyncio.run(first_run())
    asyncio.run(second_run())


def test_properties_and_flags_round_trip(tmp_path: Path) -> None:
    props = Properties(
        message_expiry_interval=30, content_type="text/plain", user_properties=(("a", "b"),)
    )

    async def main() -> None:
        queue = DiskQueue.open(tmp_path / "queue.db", "q")
        await queue.loaded()
        queue.append(Queued.of("a/b", b"\x00\xff", 2, True, props, 5.5))
        items, _ = await _read(queue, 1, 10)
        queue.close()
        item = items[0]
        assert (item.topic, item.payload, item.qos, item.retain, item.received_at) == (
            "a/b",
            b"\x00\xff",
            2,
            True,
            5.5,
        )
        assert item.properties == props

    asyncio.run(main())


def test_a_read_leaves_out_rows_removed_meanwhile(tmp_path: Path) -> None:
    async def main() -> None:
        queue = DiskQueue.open(tmp_path / "queue.db", "q")
        await queue.loaded()
        for n in range(1, 6):
            queue.append(_route(n))
        await _barrier(queue)
        done: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
        queue.read(1, 10, lambda items, last: done.set_result([i.seq for i in items]))
        queue.remove(2)  # asked after the read, removed before its answer is handed over
        assert await done == [1, 3, 4, 5]
        queue.close()

    asyncio.run(main())


def test_a_file_that_is_not_a_queue_is_a_clear_error(tmp_path: Path) -> None:
    """Taken for a damaged queue (SQLite: "file is not a database"), of which nothing can
    be salvaged: refused, the file left as it was."""
    path = tmp_path / "queue.db"
    text = b"this is not a database, not at all" * 100
    path.write_bytes(text)

    async def main() -> None:
        with pytest.raises(QueueDamaged, match="the bridge queue is damaged"):
            DiskQueue.open(path, "q")

    asyncio.run(main())
    with pytest.raises(BridgeError, match=r"nothing of it can be salvaged.*move it away"):
        salvage(path)
    assert path.read_bytes() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["queue.db"]


def test_the_index_answers_without_the_disk() -> None:
    index = QueueIndex()
    assert (index.first(), index.oldest_time(), index.last) == (None, None, 0)
    for seq in range(5, 10):
        index.add(seq, 10, float(seq))
    index.add(12, 7, 12.0)  # 10 and 11 were never there
    assert (index.count, index.bytes, index.first(), index.last) == (6, 57, 5, 12)
    assert index.first(10) == 12
    assert index.nth(0) == 5 and index.nth(5) == 12 and index.nth(6) is None
    assert index.remove(7) == 10 and index.remove(7) == -1 and index.remove(99) == -1
    assert index.contains(8) and not index.contains(7) and not index.contains(10)
    assert index.remove(5) == 10 and index.first() == 6 and index.oldest_time() == 6.0
    with pytest.raises(ValueError):
        index.add(12, 1, 0.0)


def test_the_index_sheds_its_dead_prefix() -> None:
    index = QueueIndex()
    for seq in range(1, 20_001):
        index.add(seq, 1, 0.0)
    for seq in range(1, 15_001):
        index.remove(seq)
    assert len(index.sizes) <= 5_000 + 4096
    assert (index.count, index.first(), index.nth(0), index.last) == (5_000, 15_001, 15_001, 20_000)
    assert index.contains(20_000) and not index.contains(15_000)


def test_appends_while_the_earlier_rows_are_read_come_after_them(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"

    async def first_run() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        for n in range(1, 4):
            queue.append(_route(n))
        queue.close()

    async def second_run() -> None:
        queue = DiskQueue.open(path, "q")
        assert queue.append(_route(4)).seq == 4  # at once, before the index is read
        await queue.loaded()
        assert (queue.index.count, queue.index.first(), queue.index.nth(3)) == (4, 1, 4)
        items, _ = await _read(queue, 1, 10)
        assert [item.seq for item in items] == [1, 2, 3, 4]
        queue.close()

    asyncio.run(first_run())
    asyncio.run(second_run())


def test_checkpoints_run_in_the_thread_and_keep_the_wal_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_module, "CHECKPOINT_BYTES", 64 * 1024)
    path = tmp_path / "queue.db"
    wal = tmp_path / "queue.db-wal"
    committing_threads: set[int] = set()

    async def main() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        loop_thread = threading.get_ident()
        largest = 0
        for round_ in range(200):
            items = [queue.append(_route(round_ * 20 + n)) for n in range(20)]
            assert await _barrier(queue) is True
            committing_threads.add(threading.get_ident())
            queue.remove_many([item.seq for item in items[:-1]])
            largest = max(largest, wal.stat().st_size)
        await _until(lambda: queue.checkpoints >= 5)
        assert committing_threads == {loop_thread}
        # About CHECKPOINT_BYTES between checkpoints; the WAL starts over after each.
        assert largest < 1024 * 1024, largest
        assert queue.index.count == 200
        queue.close()
        assert not wal.exists() or wal.stat().st_size == 0  # closing checkpointed it

    asyncio.run(main())
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM queue").fetchone()[0] == 200
    conn.close()


_CHILD = """
import asyncio, os, sys
from pathlib import Path
from bridge.mapping import Queued
from bridge.queue import DiskQueue
from broker_core.mqtt.properties import EMPTY

async def main():
    queue = DiskQueue.open(Path(sys.argv[1]), "q")
    await queue.loaded()
    for n in range(1, 1001):
        queue.append(Queued.of(f"t/{n}", b"x" * 100, 1, False, EMPTY, 1.0))
        if n % 100 == 0:
            done = asyncio.get_running_loop().create_future()
            queue.barrier(done.set_result)
            assert await done
            print(n, flush=True)  # what a publisher's PUBACK would say
    queue.remove_many(list(range(1, 301)))
    done = asyncio.get_running_loop().create_future()
    queue.append(Queued.of("t/last", b"", 1, False, EMPTY, 1.0))
    queue.barrier(done.set_result)
    assert await done
    print("removed", flush=True)
    await asyncio.sleep(60)  # killed here

asyncio.run(main())
"""


def test_what_a_barrier_confirmed_survives_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    watchdog = threading.Timer(unit(60), child.kill)  # a child that hangs fails the test
    watchdog.start()
    try:
        assert child.stdout is not None
        lines = [child.stdout.readline().strip() for _ in range(11)]
        assert lines[-1] == "removed"
    finally:
        watchdog.cancel()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=unit(30))

    async def reopen() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        # The 1000 rows and the last one were committed, the first 300 deleted.
        assert (queue.index.count, queue.index.first(), queue.last) == (701, 301, 1001)
        queue.close()

    asyncio.run(reopen())


async def _until(condition: Callable[[], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + unit(30)
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_the_index_removes_runs_as_one_at_a_time_would() -> None:
    one, many = QueueIndex(), QueueIndex()
    for seq in range(1, 9_001):
        one.add(seq, seq % 7, float(seq))
        many.add(seq, seq % 7, float(seq))
    runs = [[3, 1, 2, 2, 50_000], list(range(4, 5_000)), [8_000, 7_999, 0, -5], [5_000]]
    for run in runs:
        expected = [seq for seq in run if one.remove(seq) >= 0]
        assert many.remove_many(run) == expected
        assert (many.count, many.bytes, many.first(), many.nth(10)) == (
            one.count,
            one.bytes,
            one.first(),
            one.nth(10),
        )
    assert len(many.sizes) < 9_000  # the dead prefix was shed


def test_one_commit_carries_what_several_loop_turns_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows appended and removed over several loop turns within ``COMMIT_DELAY_S`` go in
    one transaction, and a barrier is called back only once that commit is done."""
    monkeypatch.setattr(queue_module, "COMMIT_DELAY_S", 0.5)  # four turns fit, loaded or not

    async def main() -> None:
        queue = DiskQueue.open(tmp_path / "queue.db", "q")
        await queue.loaded()
        items = [queue.append(_route(1))]
        await _barrier(queue)
        before = queue.batch
        answers: list[bool] = []
        for n in range(2, 6):  # four loop turns, well within the delay on any machine
            items.append(queue.append(_route(n)))
            queue.barrier(answers.append)
            await asyncio.sleep(0)
        queue.remove(items[0].seq)
        assert answers == [] and queue.batch == before  # nothing committed yet
        await _until(lambda: len(answers) == 4)
        assert answers == [True] * 4
        assert queue.batch == before + 1  # one commit for the four turns and the delete
        assert queue.committed == items[-1].seq and queue.pending_deletes == 0
        queue.close()

    asyncio.run(main())
    conn = sqlite3.connect(tmp_path / "queue.db")
    assert [row[0] for row in conn.execute("SELECT seq FROM queue ORDER BY seq")] == [2, 3, 4, 5]
    conn.close()
