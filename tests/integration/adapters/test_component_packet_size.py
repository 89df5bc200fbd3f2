"""A component cannot publish what an MQTT client could not: a message whose PUBLISH
would exceed ``mqtt.max_packet_size`` is refused by the hub (``on_safe`` gets 0x83, a
PUBACK's code), counted as dropped (``too_large``,
``edgebus_component_messages_dropped_total{queue="too_large"}``) and logged, as a
client's PUBLISH of that size is refused by the broker's decoder. The size
counted is the whole MQTT 5.0 PUBLISH (topic, packet id, properties, payload), checked
here against an independent packet builder and against the broker's own answer to a raw
client sending that packet.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from broker_core.context import Context
from broker_core.mqtt.properties import Properties
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.peer_process import PeerProcess
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.adapters.socket_support import (
    ipc_dir,
    mqtt_client,
    state_of,
    wait_state,
)
from tests.integration.broker.support import wait_until
from tests.integration.components.support import API, http_of, metric

__all__ = ["ipc_dir"]  # the fixture, used by name

LIMIT = 20_000

# Sends "a:" + 30 000 bytes (over the limit), "b:" + 15 000 bytes, "c:small" on a push0
# socket dialled to the adapter's pull0, then stays until ended (NNG has no linger).
SENDER = """
import sys, time, pynng
sock = pynng.Push0(send_buffer_size=16)
sock.dial(sys.argv[1], block=False)
for body in (b"a:" + b"A" * 30_000, b"b:" + b"B" * 15_000, b"c:small"):
    sock.send(body)
print('{"sent": 3}', flush=True)
time.sleep(600)
"""


def test_an_nng_message_over_max_packet_size_is_dropped_and_counted(
    tmp_path: Path, ipc_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = f"""
mqtt:
  max_packet_size: {LIMIT}
{API.strip()}
adapters:
  - type: nng
    name: cell
    nng_to_mqtt:
      - socket: pull0
        bind: ipc://{ipc_dir}/in
        delimiter: ":"
        to_mqtt: big/{{nng.topic}}
"""
    with contextlib.ExitStack() as stack:
        gw = stack.enter_context(running_gateway(tmp_path, config))
        wait_state(gw, "cell", "running")
        watcher = stack.enter_context(mqtt_client(gw, "watcher"))
        assert watcher.subscribe("big/#", 1) == [1]
        sender = PeerProcess([sys.executable, "-c", SENDER, f"ipc://{ipc_dir}/in"])
        stack.callback(sender.close)
        got: list[tuple[str, int]] = []
        while not got or got[-1][0] != "big/c":  # push/pull keeps the order: a came first
            message = watcher.expect_message(unit(10))
            got.append((message.topic, len(message.payload)))
        assert got == [("big/b", 15_000), ("big/c", 5)]
        stats = wait_until_dropped(gw)
        assert (stats["too_large"], stats["dropped"], stats["published"]) == (1, 0, 3)
        # The mapping counts it dropped too, as docs/adapters/zmq.md's "Counters" says:
        # `denied` is for the ACL and $SYS.
        mapping = state_of(gw, "cell")["component_stats"]
        assert (mapping["nng_to_mqtt[0].dropped"], mapping["nng_to_mqtt[0].denied"],
                mapping["nng_to_mqtt[0].published"]) == (1, 0, 2)
        metrics = http_of(gw).get("/metrics").text
        assert metric(metrics, "edgebus_component_messages_dropped_total", name="cell",
                      queue="too_large") == 1
        assert gw.call(lambda: gw.broker.counters.limit_hits["packet_size"]) == 1
        assert watcher.is_connected
    lines = [r.getMessage() for r in caplog.records if "max_packet_size" in r.getMessage()]
    assert len(lines) == 1
    found = re.search(r"nng 'cell': publish to 'big/a' dropped: its PUBLISH would be (\d+) "
                      r"bytes", lines[0])
    assert found is not None
    assert int(found.group(1)) > 30_000
    assert f"more than mqtt.max_packet_size ({LIMIT})" in lines[0]


# The same three messages from a pyzmq PUSH, connected to the adapter's PULL.
ZMQ_SENDER = """
import sys, time, zmq
sock = zmq.Context().socket(zmq.PUSH)
sock.connect(sys.argv[1])
for body in (b"a:" + b"A" * 30_000, b"b:" + b"B" * 15_000, b"c:small"):
    sock.send(body)
print('{"sent": 3}', flush=True)
time.sleep(600)
"""


def test_a_zmq_message_over_max_packet_size_is_counted_dropped_not_denied(
    tmp_path: Path, ipc_dir: Path
) -> None:
    config = f"""
mqtt:
  max_packet_size: {LIMIT}
{API.strip()}
adapters:
  - type: zmq
    name: cell
    zmq_to_mqtt:
      - socket: pull
        bind: ipc://{ipc_dir}/in
        frames: prefix
        delimiter: ":"
        to_mqtt: big/{{zmq.topic}}
"""
    with contextlib.ExitStack() as stack:
        gw = stack.enter_context(running_gateway(tmp_path, config))
        wait_state(gw, "cell", "running")
        watcher = stack.enter_context(mqtt_client(gw, "watcher"))
        assert watcher.subscribe("big/#", 1) == [1]
        sender = PeerProcess([sys.executable, "-c", ZMQ_SENDER, f"ipc://{ipc_dir}/in"])
        stack.callback(sender.close)
        got: list[tuple[str, int]] = []
        while not got or got[-1][0] != "big/c":
            message = watcher.expect_message(unit(10))
            got.append((message.topic, len(message.payload)))
        assert got == [("big/b", 15_000), ("big/c", 5)]
        wait_until_dropped(gw)
        mapping = state_of(gw, "cell")["component_stats"]
        assert (mapping["zmq_to_mqtt[0].received"], mapping["zmq_to_mqtt[0].published"],
                mapping["zmq_to_mqtt[0].dropped"], mapping["zmq_to_mqtt[0].denied"]) == (
                    3, 2, 1, 0)


def wait_until_dropped(gw: object) -> dict[str, int]:
    result: dict[str, int] = {}

    def dropped() -> bool:
        result.update(state_of(gw, "cell")["stats"])  # type: ignore[arg-type]
        return result.get("too_large", 0) >= 1

    wait_until(dropped, unit(10), "the adapter's dropped count")
    return result


@pytest.mark.parametrize(
    ("topic", "qos", "props"),
    [
        ("t/plain", 0, None),
        ("t/qos1", 1, None),
        ("t/\u00e9t\u00e9", 1, {"user_property": [("k", "v" * 300)], "content_type": "x/y"}),
    ],
    ids=["qos0", "qos1", "utf8-topic-and-properties"],
)
def test_the_hub_counts_a_publish_as_the_broker_counts_a_clients(
    tmp_path: Path, topic: str, qos: int, props: dict[str, object] | None
) -> None:
    config = f"mqtt:\n  max_packet_size: {LIMIT}\napi:\n  enabled: false\n"
    properties = Properties()
    if props is not None:
        properties = Properties(
            user_properties=tuple(props["user_property"]),  # type: ignore[arg-type]
            content_type=str(props["content_type"]),
        )

    def packet(size: int) -> bytes:
        return mb.gen_publish(topic, b"x" * size, qos=qos, mid=1 if qos else None,
                              proto_ver=5, properties=props)

    fits = LIMIT - len(packet(0))  # the largest payload whose PUBLISH is <= LIMIT bytes
    while len(packet(fits)) > LIMIT:  # the Remaining Length grows by 2 bytes on the way
        fits -= 1
    over = len(packet(fits + 1))
    assert over > LIMIT
    with running_gateway(tmp_path, config) as gw:
        client = gw.call(lambda: gw.gateway.hub.client("test", "sizes"))
        codes: dict[int, int] = {}  # a refusal is answered at once, a success when durable
        for size in (fits, fits + 1):
            message = Context(topic, b"x" * size, qos, False, properties=properties,
                              origin=client.origin)

            def answered(code: int, n: int = size) -> None:
                codes[n] = code

            def publish(m: Context = message, a: Callable[[int], None] = answered) -> bool:
                return client.publish(m, a)

            gw.call(publish)
        wait_until(lambda: len(codes) == 2, unit(10), "both answered")
        assert codes[fits + 1] == 0x83
        assert codes[fits] in (0x00, 0x10)  # success, or no matching subscribers
        assert client.too_large == 1
        assert client.stats()["too_large"] == 1
        assert client.refusal == (f"packet too large: {over} bytes, "
                                  f"mqtt.max_packet_size is {LIMIT}")

        # The broker's decoder draws the line at the same byte for a client's PUBLISH.
        host, port = gw.address()
        with RawClient(host, port) as raw:
            raw.do_connect("fits", proto_ver=5)
            raw.send(packet(fits))
            if qos:
                assert raw.recv_packet(unit(10)).type == mb.PacketType.PUBACK
            raw.send(packet(fits + 1))
            raw.expect_closed(reason_code=0x95)
