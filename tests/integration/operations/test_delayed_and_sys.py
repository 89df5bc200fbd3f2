"""Delayed publish, $SYS topics and client events, and restarts of retained/delayed."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import start_edgebus
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


def connect(port: int, client_id: str, level: int = 5, **kw: object) -> RawClient:
    client = RawClient("127.0.0.1", port, protocol_level=level)
    client.send(mb.gen_connect(client_id, proto_ver=level, **kw))  # type: ignore[arg-type]
    assert client.recv_packet().reason_code == 0
    return client


def subscribe(client: RawClient, topic_filter: str, qos: int = 0) -> None:
    client.send(
        mb.gen_subscribe(client.next_mid(), topic_filter, qos, proto_ver=client.protocol_level)
    )
    assert client.recv_packet().type == mb.PacketType.SUBACK


def test_delayed_publish_arrives_after_its_delay(tmp_path: Path) -> None:
    with running_gateway(tmp_path) as gw:
        sub = connect(gw.port, "d-sub")
        subscribe(sub, "late/#")
        pub = connect(gw.port, "d-pub")
        sent_at = time.monotonic()
        pub.send(mb.gen_publish("$delayed/1/late/x", b"hello", qos=1, mid=1, proto_ver=5))
        assert pub.recv_packet().type == mb.PacketType.PUBACK
        assert gw.call(lambda: len(gw.broker.delayed)) == 1
        packet = sub.recv_packet(unit(5))
        assert (packet.topic, packet.payload) == ("late/x", b"hello")
        assert time.monotonic() - sent_at >= 0.9  # not before its delay: a lower bound only
        assert gw.call(lambda: len(gw.broker.delayed)) == 0


def test_invalid_delayed_topic_is_refused(tmp_path: Path) -> None:
    with running_gateway(tmp_path) as gw:
        pub = connect(gw.port, "d-bad")
        for mid, topic in enumerate(("$delayed/x/t", "$delayed/5", "$delayed/5/"), start=1):
            pub.send(mb.gen_publish(topic, b"x", qos=1, mid=mid, proto_ver=5))
            ack = pub.recv_packet()
            assert (ack.type, ack.reason_code) == (mb.PacketType.PUBACK, 0x90)


def test_delayed_quota(tmp_path: Path) -> None:
    with running_gateway(tmp_path, "mqtt:\n  max_delayed_messages: 1\n") as gw:
        pub = connect(gw.port, "d-quota")
        pub.send(mb.gen_publish("$delayed/60/q", b"1", qos=1, mid=1, proto_ver=5))
        assert pub.recv_packet().reason_code == 0  # accepted for later
        pub.send(mb.gen_publish("$delayed/60/q", b"2", qos=1, mid=2, proto_ver=5))
        assert pub.recv_packet().reason_code == 0x97


def test_clients_cannot_publish_to_sys(tmp_path: Path) -> None:
    with running_gateway(tmp_path) as gw:
        sub = connect(gw.port, "sys-watch")
        subscribe(sub, "$SYS/fake")
        pub = connect(gw.port, "sys-fake")
        pub.send(mb.gen_publish("$SYS/fake", b"x", qos=1, mid=1, proto_ver=5))
        assert pub.recv_packet().reason_code == 0x87
        sub.expect_no_packet(unit(0.3))


def test_sys_statistics_and_client_events(tmp_path: Path) -> None:
    with running_gateway(tmp_path, "sys:\n  interval: 1s\n  events: true\n") as gw:
        node = gw.broker.node_name
        watch = connect(gw.port, "sys-sub")
        subscribe(watch, f"$SYS/brokers/{node}/#")
        seen: dict[str, bytes] = {}
        deadline = time.monotonic() + unit(5)
        while "clients/connected" not in seen or "version" not in seen:
            assert time.monotonic() < deadline
            packet = watch.recv_packet(unit(3))
            seen[packet.topic.split(f"{node}/", 1)[1]] = packet.payload
        assert seen["version"] == b"0.1.0"
        other = connect(gw.port, "sys-other", 4)
        other.disconnect()
        events = []
        while len(events) < 2:
            packet = watch.recv_packet(unit(3))
            if packet.topic.startswith(f"$SYS/brokers/{node}/clients/sys-other/"):
                events.append((packet.topic.rsplit("/", 1)[1], json.loads(packet.payload)))
        assert [name for name, _ in events] == ["connected", "disconnected"]
        assert events[0][1]["proto_ver"] == 4
        assert events[0][1]["clientid"] == "sys-other"


def test_sys_is_not_matched_by_a_leading_wildcard(tmp_path: Path) -> None:
    with running_gateway(tmp_path, "sys:\n  interval: 1s\n") as gw:
        sub = connect(gw.port, "all")
        subscribe(sub, "#")
        sub.expect_no_packet(unit(1.5))


def test_retained_and_delayed_messages_survive_a_restart(tmp_path: Path) -> None:
    """A retained message, and a delayed one not yet due, are kept across a restart.

    The delayed message goes to a persistent session that subscribed before the stop: it
    gets it whether it fell due while the gateway restarted (queued for the session) or
    after (sent live), so the test does not depend on how long a restart takes."""
    persistent = {"clean_session": False, "properties": {"session_expiry_interval": 3600}}
    broker = start_edgebus(tmp_path)
    try:
        waiting = connect(broker.port, "r-sub", **persistent)
        subscribe(waiting, "later/#", qos=1)
        waiting.send(mb.gen_disconnect(proto_ver=5))
        waiting.close()
        pub = connect(broker.port, "r-pub")
        pub.send(mb.gen_publish("keep/me", b"retained", qos=1, mid=1, retain=True, proto_ver=5))
        assert pub.recv_packet().type == mb.PacketType.PUBACK
        pub.send(mb.gen_publish("$delayed/3/later/me", b"delayed", qos=1, mid=2, proto_ver=5))
        assert pub.recv_packet().type == mb.PacketType.PUBACK
        pub.close()
    finally:
        broker.stop()
    restarted = start_edgebus(tmp_path)
    try:
        newcomer = connect(restarted.port, "r-new")
        subscribe(newcomer, "keep/#")
        retained = newcomer.recv_packet(unit(5))
        assert (retained.topic, retained.payload, retained.retain) == ("keep/me", b"retained", True)
        waiting = connect(restarted.port, "r-sub", **persistent)
        delayed = waiting.recv_packet(unit(15))
        assert (delayed.topic, delayed.payload) == ("later/me", b"delayed")
    finally:
        restarted.stop()
