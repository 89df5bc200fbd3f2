"""The loopback adapter end to end: MQTT in, republished, MQTT out; ACL; no loops."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

LOOPBACK = """
adapters:
  - type: loopback
    name: echo
    mappings:
      - source: sensors/{room}/temp
        target: building/{room}/temperature
        qos: 1
      - source: building/{room}/temperature
        target: sensors/{room}/temp
"""


def client(port: int, client_id: str) -> RawClient:
    c = RawClient("127.0.0.1", port, protocol_level=5)
    c.send(mb.gen_connect(client_id, proto_ver=5))
    assert c.recv_packet().reason_code == 0
    return c


def wait_running(gw, name: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + unit(5)
    while gw.call(lambda: gw.gateway.adapters.status(name))["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_messages_are_republished_once_without_looping(tmp_path: Path) -> None:
    with running_gateway(tmp_path, LOOPBACK) as gw:
        wait_running(gw, "echo")
        sub = client(gw.port, "watch")
        sub.send(mb.gen_subscribe(1, "building/#", 1, proto_ver=5))
        sub.recv_packet()
        sub.send(mb.gen_subscribe(2, "sensors/#", 1, proto_ver=5))
        sub.recv_packet()
        pub = client(gw.port, "thermo")
        pub.send(mb.gen_publish("sensors/kitchen/temp", b"21.5", qos=1, mid=1, proto_ver=5))
        seen = [sub.recv_publish(unit(5)) for _ in range(2)]
        assert sorted((p.topic, p.payload) for p in seen) == [
            ("building/kitchen/temperature", b"21.5"),
            ("sensors/kitchen/temp", b"21.5"),
        ]
        # The adapter's own republished message is not mapped back (no local by origin).
        sub.expect_no_packet(unit(0.5))
        stats = gw.call(lambda: gw.gateway.adapters.status("echo"))["stats"]
        assert stats["published"] == 1


def test_the_acl_applies_to_the_adapter_identity(tmp_path: Path) -> None:
    config = (
        LOOPBACK
        + """
acl:
  rules:
    - permission: deny
      action: publish
      clientid: loopback:echo
      topics: ["building/#"]
"""
    )
    with running_gateway(tmp_path, config) as gw:
        wait_running(gw, "echo")
        sub = client(gw.port, "watch")
        sub.send(mb.gen_subscribe(1, "building/#", 1, proto_ver=5))
        sub.recv_packet()
        pub = client(gw.port, "thermo")
        pub.send(mb.gen_publish("sensors/kitchen/temp", b"21.5", qos=1, mid=1, proto_ver=5))
        sub.expect_no_packet(unit(0.5))
        assert gw.call(lambda: gw.gateway.adapters.status("echo"))["stats"]["denied"] == 1


def test_a_null_payload_field_is_no_topic_level(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``devices/{payload.id}``: an id of JSON null is skipped (counted, logged, and not
    published on ``devices/None``); booleans render as JSON has them. The failures are
    logged at 1, 2, 4, 8, ... so that a stream of them cannot flood the log."""
    config = """
adapters:
  - type: loopback
    name: ids
    mappings:
      - {source: "raw/#", target: "devices/{payload.id}", decode: json, encode: json}
"""
    with (
        caplog.at_level(logging.WARNING, logger="adapters.loopback"),
        running_gateway(tmp_path, config) as gw,
    ):
        wait_running(gw, "ids")
        clients = Clients(gw)
        try:
            watcher = clients.subscriber(5, "devices/#", qos=1)
            device = clients.connect(5, "dev")
            for value in ("null", "true", "null", "false", "null", '"a7"'):
                device.publish("raw/x", f'{{"id": {value}}}', qos=1)

            def counted() -> dict[str, int]:
                status = gw.call(lambda: gw.gateway.adapters.status("ids"))
                return status["component_stats"]  # type: ignore[no-any-return]

            wait_until(
                lambda: counted() == {"republished": 3, "failed": 3},
                what=f"every message mapped or refused (last: {counted()})",
            )
            got = [m.topic for m in watcher.expect_messages(3)]
            assert got == ["devices/true", "devices/false", "devices/a7"]
        finally:
            clients.close_all()
        logged = [r.getMessage() for r in caplog.records if r.name == "adapters.loopback.adapter"]
        null = "loopback ids: field 'payload.id' is NULL: a topic level cannot be empty"
        assert logged == [f"{null} (1 such messages so far)", f"{null} (2 such messages so far)"]


def test_a_topic_the_broker_cannot_carry_is_skipped_and_the_adapter_goes_on(
    tmp_path: Path,
) -> None:
    """A republished topic over 65 535 bytes (a long capture behind a prefix), or with a
    lone surrogate from a JSON escape (``"\\ud800"``), cannot be an MQTT topic. Publishing
    it failed inside the broker (``OverflowError``, ``UnicodeEncodeError`` while encoding
    it for a subscriber) and restarted the adapter; now it is not republished and is
    counted: refused by the hub (its ``denied``) where the hub checks topic names, in
    ``failed`` by the pump's guard where it raises."""
    config = """
adapters:
  - type: loopback
    name: long
    mappings:
      - {source: "in/{rest#}", target: "looped/{rest}"}
      - {source: "ids/#", target: "devices/{payload.id}"}
"""
    with running_gateway(tmp_path, config) as gw:
        wait_running(gw, "long")
        clients = Clients(gw)
        try:
            watcher = clients.subscriber(5, "#", qos=1)  # the broker encodes each topic
            device = clients.connect(5, "dev")
            device.publish("in/" + "x" * 65_530, b"1", qos=1)  # 65 533 bytes: a topic
            device.publish("ids/a", b'{"id": "\\ud800"}', qos=1)
            device.publish("in/good", b"2", qos=1)
            device.publish("ids/b", b'{"id": "ok"}', qos=1)
            seen: set[str] = set()

            def republished() -> bool:
                seen.update(m.topic for m in watcher.drain(unit(0.1)))
                return {"looped/good", "devices/ok"} <= seen

            wait_until(republished, what="the good messages republished")
            status = gw.call(lambda: gw.gateway.adapters.status("long"))
        finally:
            clients.close_all()
        assert status["component_stats"]["republished"] == 2
        assert status["component_stats"]["failed"] + status["stats"]["denied"] == 2
        assert (status["state"], status["restarts"], status["last_error"]) == ("running", 0, None)
