"""Service availability as retained MQTT status messages (offered, stopped, expired), a
service that vanishes, and the stop-offer the adapter sends when it stops."""

from __future__ import annotations

import json
import logging
import socket
import struct
import time
from pathlib import Path

import pytest

from tests.helpers.someip import SdNet, SomeipPeer, daemons
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import (
    adapter_status,
    first_message,
    gateway,
    mqtt,
    status_of,
    wait_state,
)
from tests.integration.broker.support import PahoClient, publish_props, wait_until

CONSUME = """
consume:
  - service_id: 0x1234
    instance_id: 1
    timeout: 1s
    eventgroups: [1]
    events: [0x8001]
    methods: [1]
"""
STATUS = "someip/1234/0001/status"
SERVER = {"role": "server", "service": 0x1234, "instance": 1, "eventgroups": {1: [0x8001]},
          "methods": {1: "reverse"}, "ttl": 2, "cycle_ms": 500}  # fmt: skip


def test_offered_stopped_expired_are_retained_status_messages(tmp_path: Path) -> None:
    with daemons("127.0.0.2") as (remote,), gateway(tmp_path, remote.net, CONSUME) as gw:
        with mqtt(gw, "watch", STATUS, "someip/1234/0001/event/#", "replies/#") as watch:
            assert status_of(watch, STATUS, "unknown")["service_id"] == 0x1234
            with SomeipPeer.start(remote, **SERVER) as server:
                offered = status_of(watch, STATUS, "offered")
                assert offered["endpoint"] == f"127.0.0.2:{server.config['port']}"
                assert (offered["major_version"], offered["ttl_s"]) == (1, 2)
                wait_state(gw, "running")
                # Retained: a late subscriber learns the state at once.
                with mqtt(gw, "late", STATUS) as late:
                    message = late.expect_message(unit(5))
                    assert message.retain
                    assert json.loads(message.payload)["state"] == "offered"
                server.send("stop_offer")
                status_of(watch, STATUS, "stopped")
                assert "0x1234/0x0001 stopped" in wait_state(gw, "degraded")["reason"]
            # Offered again by a new server that then vanishes without a stop-offer.
            with SomeipPeer.start(remote, **SERVER) as server:
                status_of(watch, STATUS, "offered")
                first_message(
                    watch,
                    lambda: server.send("send", eventgroup=1, event=0x8001, payload="01"),
                    "someip/1234/0001/event/8001",
                )
                server.kill()
                started = time.monotonic()
                status_of(watch, STATUS, "expired", timeout=unit(10))
                assert time.monotonic() - started >= 1.5  # its TTL (2 s), not at once

            # Calls to the vanished service fail with E_NOT_REACHABLE once the daemon has
            # expired it too.
            def unreachable() -> bool:
                props = publish_props(ResponseTopic="replies/w", CorrelationData=b"x")
                watch.publish("someip/1234/0001/method/0001", b"", qos=1, properties=props)
                for message in watch.drain(unit(1.5)):
                    if message.topic == "replies/w":
                        return json.loads(message.payload)["error"] == "E_NOT_REACHABLE"
                return False

            wait_until(unreachable, unit(10), "E_NOT_REACHABLE")
        stats = adapter_status(gw)["component_stats"]
    assert stats["services_offered"] == 2
    assert stats["services_stopped"] == 1
    assert stats["services_expired"] == 1


def _offer_ttls(data: bytes, service_id: int) -> list[int]:
    """TTLs of the offer entries for ``service_id`` in an SD datagram, parsed by hand:
    a 16-byte SOME/IP header, flags, the entries' length, 16-byte entries (type 0x01 is
    OfferService; TTL 0 makes it a StopOfferService)."""
    if len(data) < 24 or data[:4] != b"\xff\xff\x81\x00":
        return []
    (length,) = struct.unpack_from(">I", data, 20)
    ttls = []
    for at in range(24, 24 + length, 16):
        (service,) = struct.unpack_from(">H", data, at + 4)
        if data[at] == 0x01 and service == service_id:
            ttls.append(int.from_bytes(data[at + 9 : at + 12], "big"))
    return ttls


def _hear_offer(wire: socket.socket, service_id: int, ttl: int) -> None:
    """Waits for an offer of ``service_id`` with ``ttl`` on the wire."""
    deadline = time.monotonic() + unit(5)
    while time.monotonic() < deadline:
        if ttl in _offer_ttls(wire.recv(65535), service_id):
            return
    raise AssertionError(f"no offer of 0x{service_id:04x} with TTL {ttl}")


def _listen(net: SdNet) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((net.sd_address, net.sd_port))
    membership = socket.inet_aton(net.sd_address) + socket.inet_aton("127.0.0.1")
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    sock.settimeout(unit(5))
    return sock


OFFER = """
offer:
  - service_id: 0x2000
    instance_id: 3
    ttl: 3s
    cyclic_offer_delay: 500ms
    eventgroups: [1]
    events: [0x8001]
"""


def test_a_stopped_adapter_sends_a_stop_offer_and_says_stopped(tmp_path: Path) -> None:
    with daemons("127.0.0.2") as (remote,), gateway(tmp_path, remote.net, OFFER) as gw:
        status = "someip/2000/0003/status"
        with _listen(remote.net) as wire, mqtt(gw, "watch", status) as watch:
            assert status_of(watch, status, "offered")["endpoint"].startswith("127.0.0.1:")
            _hear_offer(wire, 0x2000, 3)
            assert gw.call(lambda: gw.gateway.components.pause("adapter", "car"))
            _hear_offer(wire, 0x2000, 0)  # a StopOfferService entry
            status_of(watch, status, "stopped")


def test_an_offer_of_another_major_version_is_not_the_configured_service(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The ECU offers major version 2 of a service configured as major version 1: that
    is another service interface (someipy's daemon does not use it either), so the
    status says ``incompatible``, the adapter is degraded naming the versions, a log
    line says what was seen, and calls are answered E_NOT_REACHABLE at once. When the
    configured version is offered, it is ``offered``."""
    caplog.set_level(logging.INFO, logger="adapters.someip")
    with (
        daemons("127.0.0.2") as (remote,),
        gateway(tmp_path, remote.net, CONSUME) as gw,
        mqtt(gw, "watch", STATUS, "replies/#") as watch,
    ):
        status_of(watch, STATUS, "unknown")
        with SomeipPeer.start(remote, **{**SERVER, "major": 2}) as server:
            seen = status_of(watch, STATUS, "incompatible")
            assert seen["major_version"] == 2
            assert seen["endpoint"] == f"127.0.0.2:{server.config['port']}"
            reason = wait_state(gw, "degraded")["reason"]
            assert reason == (
                "services not offered: 0x1234/0x0001 incompatible (offered with major"
                " version 2, minor 0; configured major version 1)"
            )
            props = publish_props(ResponseTopic="replies/v", CorrelationData=b"v")
            watch.publish("someip/1234/0001/method/0001", b"", qos=1, properties=props)
            while (message := watch.expect_message(unit(5))).topic != "replies/v":
                pass
            error = json.loads(message.payload)
            assert error["error"] == "E_NOT_REACHABLE"
            assert error["detail"] == f"service {reason.removeprefix('services not offered: ')}"
        with SomeipPeer.start(remote, **SERVER):
            assert status_of(watch, STATUS, "offered")["major_version"] == 1
            wait_state(gw, "running")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        f"someip car: service 0x1234 instance 0x0001 is offered at 127.0.0.2:"
        f"{server.config['port']} with major version 2, minor 0, but major version 1 is"
        " configured: not used"
    ) in warnings


def _call(client: PahoClient, correlation: bytes) -> tuple[int, bytes]:
    """Calls method 1 (``reverse``) with ``correlation`` as the payload: (return code,
    payload) of its response."""
    props = publish_props(ResponseTopic="replies/c", CorrelationData=correlation)
    client.publish("someip/1234/0001/method/0001", correlation, qos=1, properties=props)
    while True:
        message = client.expect_message(unit(10))
        if message.properties.CorrelationData == correlation:
            code = int(dict(message.properties.UserProperty)["someip.return_code"])
            return code, message.payload


def test_calls_to_a_stopped_service_fail_at_once_and_reach_it_at_its_new_endpoint(
    tmp_path: Path,
) -> None:
    """A call to a service the adapter knows stopped is answered E_NOT_REACHABLE at
    once (someipy's daemon keeps a stopped service until its TTL, 10 s here, runs out,
    and the call would time out); the first call after the service is offered again at
    another endpoint reaches that endpoint (the daemon used the stale one first)."""
    server_config = {**SERVER, "ttl": 10}
    with (
        daemons("127.0.0.2") as (remote,),
        gateway(tmp_path, remote.net, CONSUME) as gw,
        mqtt(gw, "watch", STATUS, "replies/#") as watch,
    ):
        with SomeipPeer.start(remote, **server_config) as server:
            status_of(watch, STATUS, "offered")
            assert _call(watch, b"ab") == (0, b"ba")
            server.send("stop_offer")
            status_of(watch, STATUS, "stopped")
            code, payload = _call(watch, b"cd")
            assert (code, json.loads(payload)) == (
                5,
                {
                    "error": "E_NOT_REACHABLE",
                    "return_code": 5,
                    "detail": "service 0x1234/0x0001 stopped",
                },
            )
        with SomeipPeer.start(remote, **server_config) as again:
            assert again.config["port"] != server.config["port"]
            offered = status_of(watch, STATUS, "offered")
            assert offered["endpoint"] == f"127.0.0.2:{again.config['port']}"
            assert _call(watch, b"ef") == (0, b"fe")
        stats = adapter_status(gw)["component_stats"]
    assert (stats["calls"], stats["call_errors"], stats["call_timeouts"]) == (3, 1, 0)
