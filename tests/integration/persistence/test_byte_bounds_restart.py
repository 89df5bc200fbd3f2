"""The byte bounds' counts survive a restart: a persistent session's in-flight and queued
QoS 1 messages, reloaded from the SQLite store, count in ``inflight_bytes`` and
``queued_bytes`` (each message's topic, payload and properties) as they did before, and
leave them when acknowledged."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import wait_until

CONFIG = "persistence: sqlite\napi:\n  enabled: false\n"
KEEP = [("session_expiry_interval", 3600), ("receive_maximum", 1)]
SIZE = len("t/0") + 100  # topic and payload, no properties


def _keeper(gw: RunningGateway) -> RawClient:
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.do_connect("keeper", proto_ver=5, clean_session=False, properties=KEEP)
    return client


def _held(gw: RunningGateway) -> tuple[int, int, int, int]:
    stats = gw.call(gw.broker.stats)
    return stats.inflight, stats.inflight_bytes, stats.queued_messages, stats.queued_bytes


def test_in_flight_and_queued_bytes_are_counted_again_after_a_restart(tmp_path: Path) -> None:
    with running_gateway(tmp_path, CONFIG) as gw:
        keeper = _keeper(gw)
        keeper.subscribe("t/#", 1)
        pub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        pub.do_connect("pub", proto_ver=5)
        for n in range(3):  # Receive Maximum 1: one in flight, two queued
            assert pub.publish(f"t/{n}", b"p" * 100, qos=1).reason_code == 0  # type: ignore[union-attr]
        assert keeper.recv_publish(ack=False).topic == "t/0"
        keeper.abort()
        wait_until(lambda: gw.call(lambda: gw.broker.sessions.offline_count()) == 1)
        pub.publish("other", b"x", qos=1)  # its PUBACK: the store wrote what came before
        assert _held(gw) == (1, SIZE, 2, 2 * SIZE)
        pub.close()
    with running_gateway(tmp_path, CONFIG) as gw:
        assert _held(gw) == (1, SIZE, 2, 2 * SIZE)
        keeper = _keeper(gw)
        assert keeper.connack.session_present is True  # type: ignore[union-attr]
        got: list[str] = []
        while len(got) < 3:
            got.append(keeper.recv_publish().topic)  # acknowledged
        assert got == ["t/0", "t/1", "t/2"]
        wait_until(lambda: _held(gw) == (0, 0, 0, 0), what="all acknowledged")
        keeper.close()
