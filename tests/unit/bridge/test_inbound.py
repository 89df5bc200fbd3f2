"""Remote messages republished locally and acknowledged once safe: QoS 1 and 2, a resent
QoS 2 PUBLISH published once, refusals, topic aliases. A real in-process broker; the
remote side is a fake link recording the acknowledgements."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bridge.inbound import ReceivedIds, Receiver
from broker_core.broker import Broker
from broker_core.errors import ProtocolViolation
from broker_core.mqtt.packets import Puback, Pubcomp, Publish, Pubrec
from broker_core.mqtt.properties import Properties
from broker_core.store.sqlite import SqliteStore
from gateway.config.models.bridges import BridgeConfig
from gateway.hub import Hub


class FakeWire:
    def __init__(self, level: int) -> None:
        self.level = level
        self.alive = True
        self.sent: list[Any] = []
        self.closed: str | None = None

    def send(self, packet: Any) -> None:
        self.sent.append(packet)

    def close(self, reason: str, code: int = 0) -> None:
        self.closed = reason


def _receiver(level: int, **kw: Any) -> tuple[Receiver, Any]:
    config = BridgeConfig.model_validate(
        {
            "name": "b",
            "server": "127.0.0.1:1",
            "protocol_version": "5" if level == 5 else "3.1.1",
            "subscriptions": [
                {"remote": "in/{rest#}", "local": "local/{rest}", "qos": 2},
                {"remote": "sys/#", "local": "$SYS/forbidden"},
            ],
            **kw,
        }
    )
    hub = Hub(Broker())
    watcher = hub.client("test", "watcher").subscribe("#")
    return Receiver(config, hub.client("bridge", "b")), watcher


async def _turns() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_publish_with_no_link_attached_is_dropped_unacknowledged() -> None:
    """Unreachable through the link (it holds packets until the bridge attached), and
    not an assertion: the remote sends a QoS 1/2 message again on the next link."""

    async def main() -> None:
        receiver, watcher = _receiver(5)
        receiver.publish(Publish("in/a", b"1", 1, False, False, 10))
        await _turns()
        assert watcher.depth == 0
        assert receiver.stats() == {
            "received": 0,
            "refused": 0,
            "unmatched": 0,
            "dropped_mapping_inbound": 0,
            "inbound_qos2_pending": 0,
        }

    asyncio.run(main())


def test_qos1_and_qos2_are_acknowledged_once_safe_and_a_resend_is_published_once() -> None:
    async def main() -> None:
        receiver, watcher = _receiver(5)
        wire = FakeWire(5)
        receiver.attach(wire, session_present=False)
        receiver.publish(Publish("in/a", b"1", 1, False, False, 10))
        receiver.publish(Publish("in/b", b"2", 2, False, False, 11))
        await _turns()
        assert wire.sent == [Puback(10), Pubrec(11)]  # no store to wait for: safe at once
        receiver.publish(Publish("in/b", b"2", 2, False, True, 11))  # PUBREC lost: resent
        receiver.pubrel(11)
        assert wire.sent[2:] == [Pubrec(11), Pubcomp(11)]
        assert watcher.depth == 2  # local/a and local/b, each once
        assert receiver.stats() == {
            "received": 2,
            "refused": 0,
            "unmatched": 0,
            "dropped_mapping_inbound": 0,
            "inbound_qos2_pending": 0,
        }

    asyncio.run(main())


@pytest.mark.parametrize(("level", "code"), [(5, 0x87), (4, 0)])
def test_a_local_refusal_is_acknowledged_with_its_reason_code(level: int, code: int) -> None:
    async def main() -> None:
        receiver, _ = _receiver(level)
        wire = FakeWire(level)
        receiver.attach(wire, session_present=False)
        receiver.publish(Publish("sys/x", b"no", 1, False, False, 3))
        await _turns()
        assert wire.sent == [Puback(3, code)]
        assert receiver.refused == 1

    asyncio.run(main())


def test_topic_aliases_from_the_remote() -> None:
    async def main() -> None:
        receiver, watcher = _receiver(5, connect_properties={"topic_alias_maximum": 2})
        wire = FakeWire(5)
        receiver.attach(wire, session_present=False)
        receiver.publish(Publish("in/long/topic", b"1", 0, properties=Properties(topic_alias=1)))
        receiver.publish(Publish("", b"2", 0, properties=Properties(topic_alias=1)))
        assert watcher.depth == 2
        with pytest.raises(ProtocolViolation):
            receiver.publish(Publish("", b"3", 0, properties=Properties(topic_alias=2)))
        with pytest.raises(ProtocolViolation):
            receiver.publish(Publish("x", b"4", 0, properties=Properties(topic_alias=3)))

    asyncio.run(main())


async def _until(condition: Any, seconds: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)


def _incoming(path: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT client_id, packet_id FROM incoming"))
    finally:
        conn.close()


def _durable_receiver(data_dir: Path) -> tuple[Receiver, Any, SqliteStore]:
    store = SqliteStore(data_dir)
    store.open()
    config = BridgeConfig.model_validate(
        {
            "name": "b",
            "server": "127.0.0.1:1",
            "subscriptions": [{"remote": "in/{rest#}", "local": "local/{rest}", "qos": 2}],
        }
    )
    hub = Hub(Broker(store=store))
    watcher = hub.client("test", "watcher").subscribe("#")
    ids = ReceivedIds(store, "b", "gw-1")
    return Receiver(config, hub.client("bridge", "b"), ids), watcher, store


def test_qos2_packet_ids_are_recorded_in_the_store_before_pubrec_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    """Method B, durable: PUBREC once the Packet Identifier is committed with the message;
    the next run reads it back and answers a resent PUBLISH without publishing it again;
    PUBCOMP once its removal is committed."""

    async def first() -> None:
        receiver, watcher, store = _durable_receiver(tmp_path)
        await receiver.ids.load()
        wire = FakeWire(5)
        receiver.attach(wire, session_present=True)
        receiver.publish(Publish("in/a", b"1", 2, False, False, 11))
        assert wire.sent == []  # not before the record's commit
        await _until(lambda: wire.sent == [Pubrec(11)])
        assert _incoming(store.path) == [(ReceivedIds.key_of("b", "gw-1"), 11)]
        assert watcher.depth == 1
        store.close()

    async def second() -> None:
        receiver, watcher, store = _durable_receiver(tmp_path)
        await receiver.ids.load()
        wire = FakeWire(5)
        receiver.attach(wire, session_present=True)
        receiver.publish(Publish("in/a", b"1", 2, False, True, 11))  # resent after a restart
        assert wire.sent == [Pubrec(11)]
        receiver.pubrel(11)
        assert wire.sent == [Pubrec(11)]  # not before the removal's commit
        await _until(lambda: wire.sent == [Pubrec(11), Pubcomp(11)])
        assert _incoming(store.path) == []
        receiver.publish(Publish("in/a", b"2", 2, False, False, 11))  # a new message, reused id
        await _until(lambda: len(wire.sent) == 3)
        await _turns()
        assert watcher.depth == 1  # the new one only
        store.close()

    asyncio.run(first())
    asyncio.run(second())


def test_a_new_remote_session_forgets_the_recorded_packet_ids(tmp_path: Path) -> None:
    async def main() -> None:
        receiver, watcher, store = _durable_receiver(tmp_path)
        await receiver.ids.load()
        wire = FakeWire(4)
        receiver.attach(wire, session_present=True)
        receiver.publish(Publish("in/a", b"1", 2, False, False, 7))
        await _until(lambda: wire.sent == [Pubrec(7)])
        receiver.detach()
        wire = FakeWire(4)
        receiver.attach(wire, session_present=False)  # the remote lost our session
        receiver.publish(Publish("in/a", b"2", 2, False, False, 7))  # a new message
        await _until(lambda: wire.sent == [Pubrec(7)])
        assert watcher.depth == 2
        store.close()

    asyncio.run(main())


class _HeldStore:
    """A store whose commits are called back when the test says: each ``barrier``
    waits in ``barriers`` until called."""

    durable = False

    def __init__(self) -> None:
        self.barriers: list[Any] = []
        self.records: list[tuple[str, int]] = []

    def barrier(self, callback: Any) -> None:
        self.barriers.append(callback)

    def incoming_added(self, state: Any, packet_id: int) -> None:
        self.records.append(("added", packet_id))

    def incoming_removed(self, state: Any, packet_id: int) -> None:
        self.records.append(("removed", packet_id))


def test_pubrecs_go_in_publish_order_when_a_later_message_is_committed_first() -> None:
    """[MQTT-4.6.0-3]: PUBREC in the order of the PUBLISHes, also when the second
    message is safe and its record committed before the first's."""

    async def main() -> None:
        config = BridgeConfig.model_validate(
            {
                "name": "b",
                "server": "127.0.0.1:1",
                "subscriptions": [{"remote": "in/{rest#}", "local": "local/{rest}", "qos": 2}],
            }
        )
        store = _HeldStore()
        ids = ReceivedIds(store, "b", "gw-1")  # type: ignore[arg-type]
        receiver = Receiver(config, Hub(Broker()).client("bridge", "b"), ids)
        waiting: dict[str, Any] = {}  # topic -> its on_safe

        def publish(context: Any, on_safe: Any = None) -> bool:
            waiting[context.topic] = on_safe
            return True

        receiver.hub.publish = publish  # type: ignore[method-assign]
        wire = FakeWire(5)
        receiver.attach(wire, session_present=True)
        receiver.publish(Publish("in/a", b"1", 2, False, False, 21))
        receiver.publish(Publish("in/b", b"2", 2, False, False, 22))
        assert store.records == [("added", 21), ("added", 22)]
        waiting["local/b"](0)  # the later message is safe first ...
        assert len(store.barriers) == 1
        store.barriers.pop()(True)  # ... and its record committed first
        assert wire.sent == []  # its PUBREC waits for the first's
        waiting["local/a"](0)
        store.barriers.pop()(True)
        assert wire.sent == [Pubrec(21), Pubrec(22)]
        assert receiver.stats()["inbound_qos2_pending"] == 2  # until their PUBREL

    asyncio.run(main())
