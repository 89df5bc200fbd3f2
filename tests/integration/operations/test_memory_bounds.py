"""Issue 8.3: memory a client can make the broker hold has an aggregate bound.

Each attack runs against a real gateway process over real sockets, and the process's
resident memory is read from /proc before and after: topic aliases with long topics,
thousands of subscriptions, and hundreds of large retained messages. The bounds are
set low in the configuration so the tests stay quick; the unbounded broker grew by the
whole attack. After the attackers close, the memory goes back (issue 8, "Also").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import ConnectionClosedError, RawClient
from tests.helpers.timeouts import unit

MIB = 1024 * 1024


def rss_mib(broker: BrokerHandle) -> float:
    with open(f"/proc/{broker.process.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@contextlib.contextmanager
def gateway(tmp_path: Path, mqtt: str) -> Iterator[BrokerHandle]:
    with start_edgebus(tmp_path, "persistence: memory\nmqtt:\n" + mqtt) as broker:
        yield broker


def client(broker: BrokerHandle, client_id: str, proto: int = 5) -> RawClient:
    raw = RawClient(broker.host, broker.port, protocol_level=proto)
    raw.do_connect(client_id, proto_ver=proto)
    return raw


def test_topic_aliases_are_bounded_per_connection_and_in_all(tmp_path: Path) -> None:
    with gateway(tmp_path, "  max_topic_alias_bytes: 4MB\n") as broker:
        first = client(broker, "alias-0")
        assert first.connack is not None
        assert first.connack.properties["topic_alias_maximum"] == 10  # mosquitto's default
        first.send(mb.gen_publish("x", b"", proto_ver=5, properties={"topic_alias": 11}))
        first.expect_closed(reason_code=0x94)  # Topic Alias invalid

        before = rss_mib(broker)
        refused = 0
        held = []
        for n in range(20):  # 20 connections x 10 aliases x 60 KB: 12 MB of topics
            attacker = client(broker, f"alias-{n + 1}")
            for alias in range(1, 11):
                topic = f"a/{n}/{alias}/" + "t" * 60_000
                # The broker may refuse an alias and close while the rest is being sent:
                # its DISCONNECT then waits to be read below.
                attacker.send(
                    mb.gen_publish(topic, b"", proto_ver=5, properties={"topic_alias": alias}),
                    allow_closed=True,
                )
            attacker.send(mb.gen_pingreq(), allow_closed=True)
            try:
                packet = attacker.recv_packet(unit(5))
            except ConnectionClosedError:
                # Closed with our PUBLISHes still unread on its side, the broker's socket
                # sent a reset, which can discard its DISCONNECT before we read it.
                refused += 1
                continue
            if packet.type == mb.PacketType.DISCONNECT:
                assert packet.reason_code == 0x97  # Quota exceeded
                refused += 1
            else:
                assert packet.type == mb.PacketType.PINGRESP
                held.append(attacker)  # it keeps its aliases
        assert refused >= 10  # past 4 MB in all, new aliases are refused
        assert rss_mib(broker) - before < 30


def test_subscriptions_are_bounded_per_session_and_in_all(tmp_path: Path) -> None:
    config = "  max_subscriptions: 1000\n  max_subscriptions_total: 2500\n"
    with gateway(tmp_path, config) as broker:
        before = rss_mib(broker)
        codes: list[int] = []
        held = []
        for n in range(4):  # 4 clients asking for 5,000 subscriptions each
            attacker = client(broker, f"subs-{n}")
            held.append(attacker)
            for batch in range(50):
                filters = [(f"s/{n}/{batch}/{i}/" + "f" * 100, 0) for i in range(100)]
                codes += attacker.subscribe(filters, timeout=unit(10)).reason_codes
        granted = codes.count(0)
        assert granted == 2500  # 1000 + 1000 + 500 + 0
        assert codes.count(0x97) == len(codes) - granted
        grown = rss_mib(broker) - before
        assert grown < 40  # 20,000 asked for; 2,500 held
        for attacker in held:
            attacker.disconnect()


def test_retained_bytes_are_bounded(tmp_path: Path) -> None:
    with gateway(tmp_path, "  max_retained_bytes: 8MB\n") as broker:
        publisher = client(broker, "retainer")
        before = rss_mib(broker)
        payload = b"r" * 500_000
        codes = []
        for n in range(200):  # 100 MB of retained messages
            ack = publisher.publish(f"big/{n}", payload, qos=1, retain=True, timeout=unit(10))
            assert ack is not None
            codes.append(ack.reason_code)
        stored = codes.count(0) + codes.count(0x10)
        assert 10 <= stored <= 16  # 8 MB / 500 KB
        assert codes.count(0x97) == 200 - stored
        # MQTT 3.1.1 cannot be told: delivered to subscribers, not retained.
        listener = client(broker, "listener", proto=4)
        listener.subscribe([("big/#", 0)])
        old = client(broker, "old-publisher", proto=4)
        old.publish("big/v311", payload, qos=1, retain=True)
        assert listener.wait_for(
            lambda p: p.type == mb.PacketType.PUBLISH and p.topic == "big/v311"
        )
        late = client(broker, "late", proto=4)
        retained = late.subscribe([("big/v311", 0)])
        assert retained.reason_codes == [0]
        late.expect_no_packet()
        grown = rss_mib(broker) - before
        assert grown < 40  # 100 MB were offered


@pytest.mark.slow
def test_memory_goes_back_after_heavy_connections_close(tmp_path: Path) -> None:
    """Thousands of subscriptions and full alias tables, then every client leaves."""
    with gateway(tmp_path, "  max_subscriptions: 5000\n") as broker:
        baseline = rss_mib(broker)
        clients = []
        for n in range(10):
            heavy = client(broker, f"heavy-{n}")
            for batch in range(20):
                filters = [(f"h/{n}/{batch}/{i}/" + "f" * 200, 0) for i in range(250)]
                heavy.subscribe(filters, timeout=unit(10))
            for alias in range(1, 11):
                topic = f"h/{n}/{alias}/" + "t" * 60_000
                heavy.send(
                    mb.gen_publish(topic, b"", proto_ver=5, properties={"topic_alias": alias})
                )
            clients.append(heavy)
        peak = rss_mib(broker)
        assert peak - baseline > 40  # the attack did take memory
        for heavy in clients:
            heavy.disconnect()
        deadline = time.monotonic() + unit(20)
        while rss_mib(broker) - baseline > (peak - baseline) / 3:
            assert time.monotonic() < deadline, (baseline, peak, rss_mib(broker))
            time.sleep(0.25)
