"""The forwarder: window, Packet Identifiers, DUP, order, overflow, QoS 0, expiry.

A fake link records the bytes written; the independent parser of tests/helpers reads
them back. The queue is real (SQLite in tmp_path).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bridge.forward import MID_SPAN, Forwarder
from bridge.queue import DiskQueue
from broker_core.context import Context
from broker_core.mqtt.properties import Properties
from gateway.config.models.bridges import BridgeConfig
from tests.helpers import mqtt_builder as mb


class FakeWire:
    def __init__(self, level: int = 4) -> None:
        self.level = level
        self.writable = True
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def packets(self) -> list[mb.Packet]:
        out = []
        rest = self.data
        while (split := mb.split_packet(rest)) is not None:
            one, rest = split
            out.append(mb.parse_packet(one, self.level))
        self.data = rest
        return out


def _config(**kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {
        "name": "b",
        "server": "127.0.0.1:1",
        "forwards": [{"local": "in/{rest#}", "remote": "out/{rest}", "qos": 2}],
    }
    base.update(kw)
    return BridgeConfig.model_validate(base)


def _ctx(number: int, qos: int = 1, topic: str | None = None, **kw: Any) -> Context:
    return Context(topic or f"in/{number}", str(number).encode(), qos, **kw)


async def _settle(f: Forwarder) -> None:
    """Until the queue's thread has committed and answered, and the loop ran what followed
    (a condition polled on the loop, not a timed wait)."""
    quiet = 0
    for _ in range(5000):
        await asyncio.sleep(0.001)
        queue = f.queue
        busy = queue.pending or queue.pending_deletes or f.reading or f._pump_scheduled
        busy = busy or queue._flush_timer is not None or not queue._loaded.done()
        quiet = 0 if busy else quiet + 1
        if quiet >= 3:
            return
    raise AssertionError("the forwarder did not settle")


def _run(
    tmp_path: Path, config: BridgeConfig, body: Callable[[Forwarder], Awaitable[None]]
) -> None:
    async def main() -> None:
        queue = DiskQueue.open(tmp_path / "queue.db", "q")
        await queue.loaded()
        forwarder = Forwarder(config, queue)
        try:
            await body(forwarder)
        finally:
            forwarder.close()
            queue.close()

    asyncio.run(main())


def _numbers(packets: list[mb.Packet]) -> list[int]:
    return [int(p.payload) for p in packets if p.type == mb.PacketType.PUBLISH]


def test_the_window_packet_ids_and_acknowledgements(tmp_path: Path) -> None:
    async def body(f: Forwarder) -> None:
        for n in range(1, 11):
            f.offer(_ctx(n))
        wire = FakeWire()
        f.attach(wire, False, 4, None)  # the remote's Receive Maximum is 4
        await _settle(f)
        sent = wire.packets()
        assert _numbers(sent) == [1, 2, 3, 4]
        first = sent[0]
        assert (first.topic, first.qos, first.packet_id, first.dup) == ("out/1", 1, 2, False)
        f.puback(2, 0)  # seq 1 -> Packet Identifier 2
        f.puback(3, 0)
        await _settle(f)
        assert _numbers(wire.packets()) == [5, 6]
        assert f.queue.index.count == 8
        f.puback(4, 0x87)  # refused: gone, counted
        await _settle(f)
        assert (f.acked, f.rejected, f.queue.index.count) == (2, 1, 7)

    _run(tmp_path, _config(), body)


def test_half_a_window_of_deletes_is_committed_at_once(tmp_path: Path) -> None:
    """An acknowledged message keeps its place in the window until its delete is
    committed; once half the window waits on deletes they are committed at once, not
    within COMMIT_DELAY_S, and the freed places are filled in the next loop pass."""

    async def body(f: Forwarder) -> None:
        for n in range(1, 11):
            f.offer(_ctx(n))
        wire = FakeWire()
        f.attach(wire, False, 4, None)
        await _settle(f)
        assert _numbers(wire.packets()) == [1, 2, 3, 4]
        f.pubacks([2])  # a quarter of the window: the delete waits for the timer
        assert f.queue.pending_deletes == 1
        f.pubacks([3])  # half: committed now, both
        assert f.queue.pending_deletes == 0
        assert f.queue.index.count == 8
        for _ in range(3):
            await asyncio.sleep(0)
        assert _numbers(wire.packets()) == [5, 6]

    _run(tmp_path, _config(), body)


def test_a_lost_link_sends_what_was_in_flight_again_with_dup_in_order(tmp_path: Path) -> None:
    async def body(f: Forwarder) -> None:
        for n in range(1, 7):
            f.offer(_ctx(n))
        first = FakeWire()
        f.attach(first, False, 3, None)
        await _settle(f)
        assert _numbers(first.packets()) == [1, 2, 3]
        f.puback(2, 0)
        f.detach()
        second = FakeWire()
        f.attach(second, True, None, None)
        await _settle(f)
        again = second.packets()
        assert _numbers(again) == [2, 3, 4, 5, 6]
        assert [p.dup for p in again] == [True, True, False, False, False]
        assert [p.packet_id for p in again] == [3, 4, 5, 6, 7]

    _run(tmp_path, _config(), body)


def test_after_a_restart_the_first_window_goes_out_with_dup(tmp_path: Path) -> None:
    config = _config(max_inflight=3)

    async def first(f: Forwarder) -> None:
        for n in range(1, 7):
            f.offer(_ctx(n))
        await _settle(f)

    async def second(f: Forwarder) -> None:
        wire = FakeWire()
        f.attach(wire, False, None, None)
        await _settle(f)
        sent = wire.packets()
        assert _numbers(sent) == [1, 2, 3]
        assert all(p.dup for p in sent)
        for packet in sent:
            f.puback(packet.packet_id or 0, 0)
        await _settle(f)
        later = wire.packets()
        assert _numbers(later) == [4, 5, 6]
        assert not any(p.dup for p in later)

    _run(tmp_path, config, first)
    _run(tmp_path, config, second)


def test_overflow_drops_the_oldest_and_counts_every_drop(tmp_path: Path) -> None:
    config = _config(queue={"max_messages": 5})

    async def body(f: Forwarder) -> None:
        for n in range(1, 13):
            f.offer(_ctx(n))
        assert (f.dropped["overflow"], f.queue.index.count) == (7, 5)
        wire = FakeWire()
        f.attach(wire, False, None, None)
        await _settle(f)
        assert _numbers(wire.packets()) == [8, 9, 10, 11, 12]

    _run(tmp_path, config, body)


def test_drop_new_refuses_the_new_message(tmp_path: Path) -> None:
    config = _config(queue={"max_messages": 3, "overflow": "drop_new"})

    async def body(f: Forwarder) -> None:
        for n in range(1, 6):
            f.offer(_ctx(n))
        wire = FakeWire()
        f.attach(wire, False, None, None)
        await _settle(f)
        assert _numbers(wire.packets()) == [1, 2, 3]
        assert f.dropped["overflow"] == 2

    _run(tmp_path, config, body)


def test_a_backlog_larger_than_memory_is_read_back_in_order(tmp_path: Path) -> None:
    config = _config(queue={"batch_size": 50}, max_inflight=1000)

    async def body(f: Forwarder) -> None:
        f.ready_messages = 2_000  # the memory bound, lowered: a backlog of a few batches
        total = 3 * f.ready_messages + 17
        for n in range(1, total + 1):
            f.offer(_ctx(n))
        assert f.spilled
        wire = FakeWire()
        f.attach(wire, False, None, None)
        got: list[int] = []
        for _ in range(1000):
            await asyncio.sleep(0.005)
            for packet in wire.packets():
                got.append(int(packet.payload))
                f.puback(packet.packet_id or 0, 0)
            if len(got) >= total:
                break
        assert got == list(range(1, total + 1))
        await _settle(f)
        assert (f.queue.index.count, f.spilled, f.acked) == (0, False, total)

    _run(tmp_path, config, body)


def test_qos0_is_sent_when_it_can_be_and_dropped_otherwise(tmp_path: Path) -> None:
    config = _config(forwards=[{"local": "in/#", "qos": 1}])

    async def body(f: Forwarder) -> None:
        f.offer(_ctx(1, qos=0))  # link down: dropped
        wire = FakeWire()
        f.attach(wire, False, None, None)
        f.offer(_ctx(2, qos=0))  # link up, nothing ahead: at once
        assert [(p.qos, p.payload) for p in wire.packets()] == [(0, b"2")]
        assert (f.dropped["qos0"], f.queue.index.count) == (1, 0)

    _run(tmp_path, config, body)


def test_qos0_is_queued_on_disk_with_queue_qos0(tmp_path: Path) -> None:
    config = _config(forwards=[{"local": "in/#", "qos": 1}], queue={"qos0": True})

    async def body(f: Forwarder) -> None:
        f.offer(_ctx(1, qos=0))
        f.offer(_ctx(2, qos=1))
        assert f.queue.index.count == 2
        wire = FakeWire()
        f.attach(wire, False, None, None)
        await _settle(f)
        assert [(p.qos, p.payload) for p in wire.packets()] == [(0, b"1"), (1, b"2")]
        assert f.queue.index.count == 1  # the QoS 0 one left once written

    _run(tmp_path, config, body)


def test_qos2_flow_and_remote_limits(tmp_path: Path) -> None:
    async def body(f: Forwarder) -> None:
        f.offer(_ctx(1, qos=2))
        f.offer(_ctx(2, qos=2, properties=Properties(message_expiry_interval=1), received_at=0))
        f.offer(Context("in/big", b"x" * 500, 1))
        wire = FakeWire(level=5)
        f.attach(wire, False, None, 300)  # the remote's Maximum Packet Size
        await _settle(f)
        sent = wire.packets()
        assert [(p.qos, p.payload) for p in sent] == [(2, b"1")]
        assert (f.dropped["expired"], f.dropped["too_large"]) == (1, 1)
        f.pubrec(2, 0)
        await _settle(f)  # the PUBREL goes once the row's released mark is committed
        assert [(p.type, p.packet_id) for p in wire.packets()] == [(mb.PacketType.PUBREL, 2)]
        f.pubcomp(2, 0)
        await _settle(f)
        assert (f.acked, f.queue.index.count) == (1, 0)

    _run(tmp_path, _config(), body)


def test_templates_that_cannot_be_filled_are_counted(tmp_path: Path) -> None:
    config = _config(forwards=[{"local": "in/{a}/{b}", "remote": "out/{b}/{a}"}])

    async def body(f: Forwarder) -> None:
        f.offer(Context("in/x/", b"empty level", 1))
        f.offer(Context("in/x/y", b"ok", 1))
        assert (f.dropped["mapping"], f.queue.index.count) == (1, 1)

    _run(tmp_path, config, body)


def test_packet_ids_wrap_within_their_span() -> None:
    assert 65535 - MID_SPAN >= 500  # room for SUBSCRIBE's identifiers
    assert {seq % MID_SPAN + 1 for seq in range(1, MID_SPAN + 1)} == set(range(1, MID_SPAN + 1))


def test_the_byte_bound_drops_the_oldest_too(tmp_path: Path) -> None:
    # each message: topic "out/N" is routed from "in/N": 5 + len(payload) bytes counted
    config = _config(queue={"max_bytes": 100})

    async def body(f: Forwarder) -> None:
        for n in range(10):
            f.offer(Context(f"in/{n}", b"x" * 15, 1))  # 20 bytes each
        assert (f.queue.index.count, f.queue.index.bytes, f.dropped["overflow"]) == (5, 100, 5)
        f.offer(Context("in/big", b"x" * 200, 1))  # larger than the whole bound
        assert f.dropped["too_large"] == 1
        wire = FakeWire()
        f.attach(wire, False, None, None)
        await _settle(f)
        assert [p.topic for p in wire.packets()] == [f"out/{n}" for n in range(5, 10)]

    _run(tmp_path, config, body)
