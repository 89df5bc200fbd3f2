"""Messages that used to take a ZeroMQ or NNG adapter down, from real peers.

Each is skipped and counted; the adapter keeps running (no restart, no ``last_error``)
and the next message goes through. Before, each raised out of its pump and restarted
the adapter, losing what it held in flight:

- a native topic that makes the MQTT topic longer than 65 535 bytes (the broker failed
  to encode it for a subscriber: ``OverflowError``), at a ``pull`` and at a ``rep0``
  front; and a JSON payload field ``"\\ud800"`` (a lone surrogate) rendered into an MQTT
  topic (``UnicodeEncodeError``). Such a topic is refused by the hub (counted in
  ``denied``) where the hub checks topic names, or counted in ``failed`` by the pump's
  guard where publishing it raises;
- the same field rendered into a native topic, outbound (``UnicodeEncodeError``):
  ``failed``;
- an ``xpub`` subscription whose prefix has a NUL in a level or is over 65 535 bytes
  (the MQTT filter it asked for was invalid: ``MalformedPacket``; ZeroMQ sends the
  subscription again on every reconnect, so the adapter failed again and again).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynng
import zmq

from gateway.components import ADAPTER
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.adapters.socket_support import (
    answer_upper_case,
    counters,
    ipc_dir,
    mqtt_client,
    state_of,
    wait_state,
)
from tests.integration.components.support import wait_for

__all__ = ["ipc_dir"]  # the fixture, used by name

LONG = b"t" * 70_000  # with any prefix, over the 65 535 bytes of an MQTT topic
SURROGATE = json.dumps({"id": "\ud800"}).encode()  # valid JSON, ASCII: {"id": "\ud800"}


@contextlib.contextmanager
def zmq_socket(kind: int, url: str, **options: Any) -> Iterator[zmq.Socket[bytes]]:
    """A pyzmq socket of this process connected to ``url``."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sock = context.socket(kind)
    sock.setsockopt(zmq.RCVTIMEO, int(unit(10) * 1000))
    for name, value in options.items():
        sock.setsockopt(getattr(zmq, name), value)
    sock.connect(url)
    try:
        yield sock
    finally:
        sock.close(linger=0)
        context.term()


def assert_still_running(gw: RunningGateway, name: str) -> None:
    status = state_of(gw, name)
    assert (status["state"], status["restarts"], status["last_error"]) == ("running", 0, None)


def test_zmq_bad_messages_are_counted_and_the_adapter_goes_on(
    tmp_path: Path, ipc_dir: Path
) -> None:
    config = f"""
adapters:
  - type: zmq
    name: floor
    zmq_to_mqtt:
      - name: plain
        socket: pull
        bind: ipc://{ipc_dir}/plain
        to_mqtt: in/{{zmq.topic}}
      - name: field
        socket: pull
        bind: ipc://{ipc_dir}/field
        frames: raw
        to_mqtt: f/{{payload.id}}
    mqtt_to_zmq:
      - name: out
        from_mqtt: p/#
        socket: push
        bind: ipc://{ipc_dir}/out
        topic: t/{{payload.id}}
"""
    with (
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "watcher") as watcher,
        zmq_socket(zmq.PUSH, f"ipc://{ipc_dir}/plain") as plain,
        zmq_socket(zmq.PUSH, f"ipc://{ipc_dir}/field") as field,
        zmq_socket(zmq.PULL, f"ipc://{ipc_dir}/out") as out,
    ):
        watcher.subscribe("#", 1)  # a subscriber the broker encodes each topic for
        wait_state(gw, "floor", "running")
        plain.send_multipart([LONG, b"x"])
        plain.send_multipart([b"good", b"1"])
        field.send(SURROGATE)
        field.send(b'{"id": "ok"}')
        got = {watcher.expect_message(unit(10)).topic for _ in range(2)}
        assert got == {"in/good", "f/ok"}

        watcher.publish("p/bad", SURROGATE, qos=1)
        watcher.publish("p/good", b'{"id": "ok"}', qos=1)
        assert out.recv_multipart() == [b"t/ok", b'{"id": "ok"}']

        stats = counters(gw, "floor")
        assert (stats["plain.failed"] + stats["plain.denied"], stats["plain.published"]) == (1, 1)
        assert (stats["field.failed"] + stats["field.denied"], stats["field.published"]) == (1, 1)
        assert (stats["out.failed"], stats["out.sent"]) == (1, 1)
        assert_still_running(gw, "floor")


def test_a_multipart_message_of_one_or_three_frames_does_not_fit(
    tmp_path: Path, ipc_dir: Path
) -> None:
    # docs/adapters/zmq.md, "Frame layouts": `multipart` is exactly [topic, payload].
    config = f"""
adapters:
  - type: zmq
    name: frames
    zmq_to_mqtt:
      - name: parts
        socket: pull
        bind: ipc://{ipc_dir}/parts
        to_mqtt: in/{{zmq.topic}}
"""
    with (
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "watcher") as watcher,
        zmq_socket(zmq.PUSH, f"ipc://{ipc_dir}/parts") as parts,
    ):
        watcher.subscribe("in/#", 1)
        wait_state(gw, "frames", "running")
        parts.send_multipart([b"three", b"x", b"y"])
        parts.send_multipart([b"one"])
        parts.send_multipart([b"two", b"z"])  # push/pull keeps the order: it comes last
        assert watcher.expect_message(unit(10)).topic == "in/two"
        stats = counters(gw, "frames")
        assert (stats["parts.received"], stats["parts.failed"], stats["parts.published"]) == (
            3, 2, 1)
        assert_still_running(gw, "frames")


def test_xpub_subscriptions_no_mqtt_topic_can_match_ask_for_nothing(
    tmp_path: Path, ipc_dir: Path
) -> None:
    config = f"""
adapters:
  - type: zmq
    name: fan
    mqtt_to_zmq: [{{name: robots, from_mqtt: robots/#, socket: xpub, bind: "ipc://{ipc_dir}/x"}}]
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "source") as source:
        wait_state(gw, "fan", "running")
        adapter = gw.call(lambda: gw.gateway.components.instance(ADAPTER, "fan"))

        def filters() -> list[str]:
            return gw.call(lambda: adapter._subscriptions["robots"].filters)

        with zmq_socket(zmq.SUB, f"ipc://{ipc_dir}/x") as sub:
            sub.setsockopt(zmq.SUBSCRIBE, b"robots/a\x00b/")  # a NUL in a whole level
            sub.setsockopt(zmq.SUBSCRIBE, b"robots/" + LONG + b"/")  # over 65 535 bytes
            sub.setsockopt(zmq.SUBSCRIBE, b"robots/r1/")
            # the good subscription after the bad ones: those have been read by then
            wait_for(filters, lambda f: f == ["robots/r1/#"])
            source.publish("robots/r1/pose", b"one", qos=1)
            assert sub.recv_multipart() == [b"robots/r1/pose", b"one"]
            assert filters() == ["robots/r1/#"]
            assert_still_running(gw, "fan")


def test_nng_bad_messages_are_counted_and_the_adapter_goes_on(
    tmp_path: Path, ipc_dir: Path
) -> None:
    config = f"""
adapters:
  - type: nng
    name: floor
    nng_to_mqtt:
      - name: front
        socket: rep0
        bind: ipc://{ipc_dir}/front
        frames: prefix
        to_mqtt: svc/{{nng.topic}}
        response_topic: replies/front
    mqtt_to_nng:
      - name: out
        from_mqtt: p/#
        socket: push0
        bind: ipc://{ipc_dir}/out
        topic: t/{{payload.id}}
"""
    timeout_ms = int(unit(10) * 1000)
    with (
        running_gateway(tmp_path, config) as gw,
        mqtt_client(gw, "responder") as responder,
        pynng.Req0(dial=f"ipc://{ipc_dir}/front", recv_timeout=timeout_ms) as req,
        pynng.Pull0(dial=f"ipc://{ipc_dir}/out", recv_timeout=timeout_ms) as pull,
    ):
        responder.subscribe("#", 1)  # a subscriber the broker encodes each topic for
        answer_upper_case(responder, "svc/good")
        wait_state(gw, "floor", "running")
        req.send(LONG + b"/x")
        # the front's empty answer to a request that does not fit (pynng's recv() cannot
        # take an empty message; recv_msg() can)
        assert req.recv_msg().bytes == b""
        req.send(b"good/x")
        assert req.recv_msg().bytes == b"X"

        responder.publish("p/bad", SURROGATE, qos=1)
        responder.publish("p/good", b'{"id": "ok"}', qos=1)
        assert pull.recv() == b't/ok/{"id": "ok"}'

        stats = counters(gw, "floor")
        refused = stats["front.failed"] + stats["front.denied"]
        assert (refused, stats["front.published"], stats["front.sent"]) == (1, 1, 2)
        assert (stats["out.failed"], stats["out.sent"]) == (1, 1)
        assert_still_running(gw, "floor")
