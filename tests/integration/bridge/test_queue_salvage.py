"""A damaged bridge queue is salvaged, not refused: ``edgebus run`` moves the damaged
``queue.db`` aside (kept with its damage, never deleted), puts every row it can read
into a fresh queue, says so, and sends them to the remote in their order. A queue that
another opener holds is refused with its own error, never taken for a damaged one.

Real ``edgebus run`` processes, a mosquitto as the remote (down while the queue fills),
an MQTT publisher on a socket, the queue's pages overwritten on disk between two runs.
The rows lost are found independently of the code under test: the row ids of the
overwritten b-tree leaf pages, read from the file before it is damaged.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bridge.queue_file import QueueDamaged, mark_closed, open_file, write_rows
from bridge.queue_salvage import salvage
from broker_core.errors import BridgeError
from tests.helpers.brokers import BrokerHandle, free_port, start_edgebus
from tests.helpers.small_fs import fill, small_filesystem
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.bridge.support import (
    Collector,
    Remote,
    StreamPublisher,
    bridge_reply,
    first_occurrences,
    wait_until,
)

COUNT = 3000


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """An SQLite varint at ``data[at:]``: its value and the offset after it."""
    value = 0
    for index in range(8):
        byte = data[at + index]
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + index + 1
    return (value << 8) | data[at + 8], at + 9


def _leaf_rowids(page: bytes) -> list[int] | None:
    """The row ids of a table b-tree leaf page (type 13), None for another page."""
    if page[0] != 13:
        return None
    cells = int.from_bytes(page[3:5], "big")
    rowids = []
    for cell in range(cells):
        offset = int.from_bytes(page[8 + 2 * cell : 10 + 2 * cell], "big")
        _, after_size = _varint(page, offset)
        rowid, _ = _varint(page, after_size)
        rowids.append(rowid)
    return rowids


def _damage(queue: Path) -> tuple[list[int], set[int]]:
    """Overwrites two leaf pages of the ``queue`` table, a third and two thirds into the
    file (not the header, not the table's root); returns their numbers and the row ids
    they held."""
    data = queue.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    pages = len(data) // page_size
    with sqlite3.connect(f"{queue.resolve().as_uri()}?immutable=1", uri=True) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'queue'").fetchone()
    conn.close()
    lost: set[int] = set()
    damaged = []
    for start in (pages // 3, 2 * pages // 3):
        number = start
        while True:  # the first leaf page from there
            page = data[(number - 1) * page_size : number * page_size]
            rowids = _leaf_rowids(page)
            if number != root and rowids:
                break
            number += 1
        damaged.append(number)
        lost.update(rowids)
    with queue.open("r+b") as file:
        for number in damaged:
            file.seek((number - 1) * page_size)
            file.write(_DAMAGE * page_size)  # not a page SQLite can read
    return damaged, lost


_DAMAGE = b"\xa5"


def _pages(path: Path, numbers: list[int]) -> list[bytes]:
    data = path.read_bytes()
    size = int.from_bytes(data[16:18], "big")
    return [data[(number - 1) * size : number * size] for number in numbers]


def test_a_damaged_queue_is_salvaged_and_its_intact_rows_are_sent_in_order(
    tmp_path: Path,
) -> None:
    api_port = free_port()
    remote = Remote(tmp_path / "remote")
    workdir = tmp_path / "gateway"
    queue = workdir / "data" / "bridge" / "cloud" / "queue.db"
    extra = f"""
api:
  bind: 127.0.0.1:{api_port}
  keys: ['{KEY}']
bridges:
  - name: cloud
    server: "127.0.0.1:{remote.port}"
    client_id: gw-queue-salvage
    reconnect_backoff: 100ms
    reconnect_backoff_max: 200ms
    forwards:
      - {{local: "fwd/#", remote: "cloud/fwd", qos: 1}}
"""
    http = Http(f"http://127.0.0.1:{api_port}", bearer(KEY))

    def bridge() -> dict[str, Any]:
        return bridge_reply(http)

    def stats() -> dict[str, Any]:
        found: dict[str, Any] = bridge().get("stats", {})
        return found

    # The remote's subscriber has a persistent session: what the bridge sends while it
    # is away waits for it at the remote.
    with remote:
        cloud = Collector(remote.port, "cloud/#", "cloud-sub")
    gateway: BrokerHandle | None = None
    try:
        # 1. The remote down, COUNT messages queued, each acknowledged; a clean stop.
        gateway = start_edgebus(workdir, extra)
        assert StreamPublisher(gateway.port, "fwd/x", COUNT).done_after_start() == list(
            range(1, COUNT + 1)
        )
        wait_until(lambda: stats().get("queue_depth"), lambda d: d == COUNT)
        gateway.stop()
        assert not queue.with_name("queue.db-wal").exists()

        # 2. Two pages in the middle of the file overwritten.
        with sqlite3.connect(f"{queue.resolve().as_uri()}?immutable=1", uri=True) as conn:
            rows = conn.execute("SELECT seq, payload FROM queue ORDER BY seq").fetchall()
        conn.close()
        assert [int(payload) for _, payload in rows] == list(range(1, COUNT + 1))
        damaged, lost = _damage(queue)
        assert 0 < len(lost) < COUNT // 4
        size = queue.stat().st_size
        intact = [int(payload) for seq, payload in rows if seq not in lost]

        # 3. The next run salvages the intact rows, the remote still down.
        gateway = start_edgebus(workdir, extra)
        found = wait_until(stats, lambda s: "queue_depth" in s)
        assert (found["queue_salvages"], found["queue_salvaged_rows"]) == (1, len(intact))
        assert found["queue_depth"] == len(intact)
        kept = [p for p in queue.parent.iterdir() if p.name.startswith("queue.db.damaged-")]
        assert len(kept) == 1
        # Moved aside with its damage (the run that found it wrote to its meta table).
        assert kept[0].stat().st_size == size
        assert _pages(kept[0], damaged) == [
            _DAMAGE * len(page) for page in _pages(kept[0], damaged)
        ]
        log = gateway.stderr_path.read_text()
        assert f"{len(intact)} rows salvaged into a fresh queue" in log
        assert f"the damaged file is kept at {kept[0]}" in log

        # 4. The remote back: it receives every intact row, in order.
        with remote:
            wait_until(cloud.count, lambda n: n >= len(intact), seconds=60)
            wait_until(lambda: stats().get("queue_depth"), lambda d: d == 0)
            received = [int(payload) for payload in cloud.payloads()]
            assert first_occurrences(received) == intact
            assert set(received) == set(intact)
            assert bridge()["state"] == "running"
        assert kept[0].stat().st_size == size
        assert os.path.exists(queue.with_name("queue.db.created"))
    finally:
        if gateway is not None:
            gateway.stop()
        cloud.close()


def test_a_queue_another_connection_holds_is_not_taken_for_a_damaged_one(
    tmp_path: Path,
) -> None:
    """A second opener is refused with its own error, never salvaged, and not told to
    move the file away: the bridge tries again (its open waits for no lock; the marker
    check, ``broker_core.store.marker``, still waits SQLite's 5 s)."""
    queue = tmp_path / "queue.db"
    conn, _ = open_file(queue)  # exclusive locking mode, held
    try:
        with pytest.raises(BridgeError) as refused:
            open_file(queue)
        assert not isinstance(refused.value, QueueDamaged)
        assert "locked" in str(refused.value)
        assert "move it away" not in str(refused.value)
        assert "tries again" in str(refused.value)
    finally:
        conn.close()


def test_a_salvage_on_a_full_disk_changes_nothing(tmp_path: Path) -> None:
    """No room for the salvaged copy: refused with the reason, the damaged file and its
    marker as they were, the partial copy removed (a later start tries again)."""
    with small_filesystem(tmp_path / "fs", 4 * 1024 * 1024) as directory:
        queue = directory / "queue.db"
        conn, _ = open_file(queue)
        values: list[object] = []
        for seq in range(1, 3001):
            values += [seq, "cloud/fwd", bytearray(b"%d" % seq).ljust(300, b"."), 1, 0]
            values += [bytearray(), 1000.0 + seq]
        write_rows(conn, values, [], {})
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        conn.close()
        mark_closed(queue)
        _damage(queue)
        damaged = queue.read_bytes()
        marker = queue.with_name("queue.db.created").read_bytes()
        filler = fill(directory, leave=64 * 1024)
        with pytest.raises(BridgeError, match="cannot salvage the damaged bridge queue"):
            salvage(queue)
        assert queue.read_bytes() == damaged
        assert queue.with_name("queue.db.created").read_bytes() == marker
        assert sorted(p.name for p in directory.iterdir()) == sorted(
            ["queue.db", "queue.db.created", filler.name]
        )
        filler.unlink()
        assert salvage(queue).rows > 2000  # with room again
