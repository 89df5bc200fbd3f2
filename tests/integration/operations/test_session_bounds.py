"""Broker-wide bounds on what offline clients hold: sessions kept, bytes queued."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

KEEP = [("session_expiry_interval", 300)]


def _wait(gw: RunningGateway, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + unit(10)
    while not gw.call(condition):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _persistent(gw: RunningGateway, client_id: str, **connect: object) -> RawClient:
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.do_connect(client_id, proto_ver=5, clean_session=False, properties=KEEP, **connect)
    return client


def test_the_session_offline_longest_ends_past_max_offline_sessions(tmp_path: Path) -> None:
    with running_gateway(tmp_path, "mqtt:\n  max_offline_sessions: 2\n") as gw:
        watcher = RawClient("127.0.0.1", gw.port, protocol_level=5)
        watcher.do_connect("watcher", proto_ver=5)
        watcher.subscribe("wills/#", 0)
        for n in range(3):
            client = _persistent(
                gw,
                f"away-{n}",
                will_topic=f"wills/away-{n}",
                will_payload=b"gone",
                will_properties=[("will_delay_interval", 300)],
            )
            client.subscribe(f"for/away-{n}", 1)
            client.abort()  # no DISCONNECT: the will waits for its delay or the session's end
            _wait(gw, lambda n=n: gw.broker.sessions.offline_count() == min(n + 1, 2), "offline")

        # The third offline session pushed out the first: its will went out at once.
        will = watcher.expect_packet(mb.PacketType.PUBLISH)
        assert (will.topic, will.payload) == ("wills/away-0", b"gone")
        watcher.expect_no_packet(0.3)
        assert gw.call(lambda: gw.broker.counters.limit_hits["offline_sessions"]) == 1
        assert gw.call(lambda: gw.broker.sessions.get("away-0")) is None

        first = _persistent(gw, "away-0")
        assert first.connack.session_present is False
        last = _persistent(gw, "away-2")
        assert last.connack.session_present is True
        first.close()
        last.close()
        watcher.close()


def test_offline_queues_together_stay_under_max_queued_bytes_total(tmp_path: Path) -> None:
    # A queued message counts its topic, payload and properties: "q/t" + "message-N" is
    # 12 bytes; the two offline sessions may hold 65 bytes together, 5 messages, though
    # each one's own queue would take all 4.
    config = "mqtt:\n  max_queued_bytes_total: 65\n"
    with running_gateway(tmp_path, config) as gw:
        for name in ("s1", "s2"):
            client = _persistent(gw, name)
            client.subscribe("q/t", 1)
            client.close()
        _wait(gw, lambda: gw.broker.sessions.offline_count() == 2, "two offline sessions")
        pub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        pub.do_connect("pub", proto_ver=5)
        for i in range(4):
            pub.send(mb.gen_publish("q/t", f"message-{i}", qos=1, mid=i + 1, proto_ver=5))
            assert pub.expect_packet(mb.PacketType.PUBACK).packet_id == i + 1
        broker = gw.broker
        counters = broker.counters
        # 8 deliveries, 5 fit: past the bound each session made room from its own queue
        # (drop_oldest), 3 of its oldest messages in all.
        assert gw.call(lambda: counters.queued_bytes) == 60
        assert gw.call(lambda: counters.dropped_queue_full) == 3
        assert gw.call(lambda: counters.limit_hits["queued_bytes_total"]) == 3
        depth = {n: gw.call(lambda n=n: len(broker.sessions.get(n).queue)) for n in ("s1", "s2")}
        assert sorted(depth.values()) == [2, 3]
        for name in ("s1", "s2"):
            client = _persistent(gw, name)
            assert client.connack.session_present is True
            got = []
            while len(got) < depth[name]:
                packet = client.expect_packet(mb.PacketType.PUBLISH)
                got.append(packet.payload.decode())
                client.send(mb.gen_puback(packet.packet_id, proto_ver=5))
            # What is kept is the newest, in order.
            assert got == [f"message-{i}" for i in range(4 - depth[name], 4)]
            client.expect_no_packet(0.2)
            client.close()
        assert gw.call(lambda: counters.queued_bytes) == 0
        pub.close()


def test_restored_sessions_past_the_bound_end_longest_offline_first(tmp_path: Path) -> None:
    durable = "persistence: sqlite\n"
    with running_gateway(tmp_path, durable) as gw:
        for n in range(3):
            client = _persistent(gw, f"kept-{n}")
            client.subscribe(f"for/kept-{n}", 1)
            client.close()
            _wait(gw, lambda n=n: gw.broker.sessions.offline_count() == n + 1, "offline")
            time.sleep(0.01)  # distinct offline-since times
    with running_gateway(tmp_path, durable + "mqtt:\n  max_offline_sessions: 2\n") as gw:
        sessions = gw.broker.sessions
        assert gw.call(lambda: sessions.offline_count()) == 2
        assert gw.call(lambda: sessions.get("kept-0")) is None
        assert gw.call(lambda: gw.broker.counters.limit_hits["offline_sessions"]) == 1
        for n in (1, 2):
            client = _persistent(gw, f"kept-{n}")
            assert client.connack.session_present is True
            client.close()


def test_max_queued_bytes_counts_topic_payload_and_properties(tmp_path: Path) -> None:
    # A queue bounds memory: a message counts its topic, payload and properties (as
    # max_retained_bytes does), not its payload alone, so one-byte payloads under long
    # topics with user properties fill it. Three such messages fill the bound exactly;
    # the 4th makes room (drop_oldest).
    level = "x" * 40
    user = [("user_property", ("k", "v" * 20))]
    block = mb.props(*user)  # 27 bytes, as the broker encodes it again
    size = len(f"q/{level}/0") + len(b"p") + len(block)
    config = f"mqtt:\n  max_queued_bytes: {3 * size}\n"
    with running_gateway(tmp_path, config) as gw:
        client = _persistent(gw, "away")
        client.subscribe("q/#", 1)
        client.close()
        _wait(gw, lambda: gw.broker.sessions.offline_count() == 1, "an offline session")
        pub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        pub.do_connect("pub", proto_ver=5)
        for i in range(3):
            packet = mb.gen_publish(
                f"q/{level}/{i}", b"p", qos=1, mid=i + 1, proto_ver=5, properties=user
            )
            pub.send(packet)
            assert pub.expect_packet(mb.PacketType.PUBACK).packet_id == i + 1
        counters = gw.broker.counters
        assert gw.call(lambda: counters.queued_bytes) == 3 * size
        assert gw.call(lambda: gw.broker.sessions.get("away").queued_bytes) == 3 * size
        assert gw.call(lambda: counters.dropped_queue_full) == 0
        pub.send(mb.gen_publish(f"q/{level}/3", b"p", qos=1, mid=4, proto_ver=5, properties=user))
        assert pub.expect_packet(mb.PacketType.PUBACK).packet_id == 4
        assert gw.call(lambda: counters.dropped_queue_full) == 1
        assert gw.call(lambda: counters.queued_bytes) == 3 * size
        client = _persistent(gw, "away")
        assert client.connack.session_present is True
        got = []
        while len(got) < 3:
            packet = client.expect_packet(mb.PacketType.PUBLISH)
            got.append(packet.topic)
            client.send(mb.gen_puback(packet.packet_id, proto_ver=5))
        assert got == [f"q/{level}/{i}" for i in range(1, 4)]
        client.expect_no_packet(0.2)
        _wait(gw, lambda: counters.queued_bytes + counters.inflight_bytes == 0, "all acked")
        client.close()
        pub.close()
