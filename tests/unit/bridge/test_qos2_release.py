"""QoS 2 after PUBREC: the released mark is on disk before the PUBREL goes out, survives
reopening, and makes the next run send PUBREL, not the PUBLISH again (MQTT 5.0 4.3.3,
4.4); without a session the PUBLISH goes again, once the mark is undone on disk.

The forwarder and a real queue (SQLite in tmp_path), a fake link recording the bytes,
read back by the independent parser of tests/helpers.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from bridge.forward import Forwarder
from bridge.mapping import Queued
from bridge.queue import DiskQueue
from bridge.queue_file import SCHEMA_VERSION
from broker_core.mqtt.properties import EMPTY
from tests.helpers import mqtt_builder as mb
from tests.unit.bridge.test_forward import FakeWire, _config, _ctx, _run, _settle

PUBLISH, PUBREL = mb.PacketType.PUBLISH, mb.PacketType.PUBREL


def _sent(wire: FakeWire) -> list[tuple[mb.PacketType, int | None, bool]]:
    """(type, Packet Identifier, DUP) of each packet written."""
    return [(p.type, p.packet_id, bool(p.dup)) for p in wire.packets()]


async def _first_run(f: Forwarder) -> None:
    """Two QoS 2 messages sent; the first gets PUBREC, its PUBREL goes out once the
    released mark is committed; the run ends before the PUBCOMP (as a kill -9 would)."""
    f.offer(_ctx(1, qos=2))
    f.offer(_ctx(2, qos=2))
    wire = FakeWire()
    f.attach(wire, True, None, None)
    await _settle(f)
    assert _sent(wire) == [(PUBLISH, 2, False), (PUBLISH, 3, False)]
    f.pubrec(2, 0)
    assert wire.packets() == []  # not before the mark is on disk
    assert f.queue.pending_releases == 1
    await _settle(f)
    assert _sent(wire) == [(PUBREL, 2, False)]
    assert f.queue.pending_releases == 0


def test_a_released_row_survives_reopening_and_yields_a_pubrel(tmp_path: Path) -> None:
    config = _config()

    async def second_run(f: Forwarder) -> None:
        wire = FakeWire()
        f.attach(wire, True, None, None)  # the remote kept the session
        await _settle(f)
        # Message 1: PUBREL again, never its PUBLISH; message 2 (no PUBREC yet): DUP.
        assert _sent(wire) == [(PUBREL, 2, False), (PUBLISH, 3, True)]
        f.pubcomp(2, 0)
        f.pubrec(3, 0)
        await _settle(f)
        assert _sent(wire) == [(PUBREL, 3, False)]
        f.pubcomp(3, 0)
        await _settle(f)
        assert (f.acked, f.queue.index.count) == (2, 0)

    _run(tmp_path, config, _first_run)
    _run(tmp_path, config, second_run)


def test_without_a_session_the_publish_goes_again_once_the_mark_is_undone(
    tmp_path: Path,
) -> None:
    """The remote forgot the Packet Identifier with the session: the PUBLISH goes again (at
    least once), and its released mark is undone on disk first, so that a later run that
    finds a session sends that PUBLISH again rather than a PUBREL for it."""
    config = _config()

    async def no_session(f: Forwarder) -> None:
        wire = FakeWire()
        f.attach(wire, False, None, None)
        await _settle(f)
        assert [(t, mid) for t, mid, _ in _sent(wire)] == [(PUBLISH, 2), (PUBLISH, 3)]
        assert f.releases.unreleasing == {}

    async def session_again(f: Forwarder) -> None:
        wire = FakeWire()
        f.attach(wire, True, None, None)
        await _settle(f)
        assert _sent(wire) == [(PUBLISH, 2, True), (PUBLISH, 3, True)]

    _run(tmp_path, config, _first_run)
    _run(tmp_path, config, no_session)
    _run(tmp_path, config, session_again)


def test_a_link_lost_before_the_mark_is_committed_sends_publish_then_pubrel(
    tmp_path: Path,
) -> None:
    """PUBREC, then the link is lost before the commit: on the next link the PUBLISH goes
    again (the remote answers PUBREC to it and delivers nothing twice), and the PUBREL
    follows once the mark is committed."""

    async def body(f: Forwarder) -> None:
        f.offer(_ctx(1, qos=2))
        first = FakeWire()
        f.attach(first, True, None, None)
        await _settle(f)
        assert _sent(first) == [(PUBLISH, 2, False)]
        f.pubrec(2, 0)
        f.detach()
        second = FakeWire()
        f.attach(second, True, None, None)
        f.pump()  # before the commit
        assert _sent(second) == [(PUBLISH, 2, True)]
        await _settle(f)
        assert _sent(second) == [(PUBREL, 2, False)]
        assert first.packets() == []
        f.pubrec(2, 0)  # the remote's answer to the PUBLISH sent again: nothing more
        assert second.packets() == []

    _run(tmp_path, _config(), body)


def test_the_mark_is_a_column_read_back_with_the_row(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"

    async def read_all(queue: DiskQueue) -> list[Queued]:
        done: asyncio.Future[list[Queued]] = asyncio.get_running_loop().create_future()
        queue.read(1, 100, lambda items, last: done.set_result(items))
        return await done

    async def first() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        for n in range(1, 6):
            queue.append(Queued.of(f"t/{n}", b"x", 2, False, EMPTY, 1.0))
        queue.commit_now()
        for seq in (1, 2, 4):
            assert queue.release(seq) is True
        assert queue.unrelease(4) is True  # the last asked wins
        assert queue.release(99) is False  # not queued
        queue.close()

    async def second() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        assert [(i.seq, i.released) for i in await read_all(queue)] == [
            (1, True),
            (2, True),
            (3, False),
            (4, False),
            (5, False),
        ]
        queue.close()

    asyncio.run(first())
    asyncio.run(second())


def test_a_version_1_queue_is_brought_to_version_2_with_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "queue.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE queue (seq INTEGER PRIMARY KEY, topic TEXT NOT NULL,
            payload BLOB NOT NULL, qos INTEGER NOT NULL, retain INTEGER NOT NULL,
            properties BLOB NOT NULL, received_at REAL NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        INSERT INTO queue VALUES (7, 't/7', x'37', 2, 0, x'', 1.0);
        """
    )
    conn.commit()
    conn.close()

    async def reopen() -> None:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        done: asyncio.Future[list[Queued]] = asyncio.get_running_loop().create_future()
        queue.read(1, 10, lambda items, last: done.set_result(items))
        items = await done
        assert [(i.seq, i.topic, i.payload, i.released) for i in items] == [(7, "t/7", b"7", False)]
        assert queue.append(Queued.of("t/8", b"8", 1, False, EMPTY, 2.0)).seq == 8
        assert queue.release(7) is True
        queue.close()

    asyncio.run(reopen())
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert conn.execute("SELECT seq, released FROM queue ORDER BY seq").fetchall() == [
        (7, 1),
        (8, 0),
    ]
    conn.close()
