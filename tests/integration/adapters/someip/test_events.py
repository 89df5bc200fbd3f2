"""Events between someipy apps on another daemon (real discovery over loopback multicast,
127.0.0.1 <-> 127.0.0.2) and MQTT: consumed events to MQTT, typed and raw; MQTT to the
events of a service the gateway offers; payloads that do not fit their layout."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.helpers.someip import SomeipPeer, daemons
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import (
    adapter_status,
    first_event,
    first_message,
    gateway,
    mqtt,
    wait_state,
)
from tests.integration.broker.support import wait_until

SPEED_LAYOUT = """
layouts:
  VehicleSpeed:
    type: struct
    fields:
      - {name: speed_kmh, type: float32}
      - {name: valid, type: bool}
"""

CONSUME = (
    SPEED_LAYOUT
    + """
consume:
  - service_id: 0x1234
    instance_id: 1
    eventgroups: [1]
    events:
      - {id: 0x8001, layout: VehicleSpeed}
      - {id: 0x8002}
"""
)


def test_events_of_a_remote_server_reach_mqtt_typed_and_raw(tmp_path: Path) -> None:
    with (
        daemons("127.0.0.2") as (remote,),
        SomeipPeer.start(
            remote, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001, 0x8002]}
        ) as server,
    ):
        with gateway(tmp_path, remote.net, CONSUME) as gw:
            wait_state(gw, "running")
            with mqtt(gw, "dash", "someip/1234/0001/event/#") as dash:
                speed = first_message(
                    dash,
                    lambda: server.send("send", eventgroup=1, event=0x8001, payload="41dd999a01"),
                    "someip/1234/0001/event/8001",
                )
                server.send("send", eventgroup=1, event=0x8002, payload="00ff")
                raw = dash.expect_message(unit(5))
            stats = adapter_status(gw)["component_stats"]
        assert json.loads(speed.payload) == {"speed_kmh": 27.7, "valid": True}
        assert speed.properties.ContentType == "application/json"
        assert (raw.topic, raw.payload) == ("someip/1234/0001/event/8002", b"\x00\xff")
        assert raw.properties.ContentType == "application/octet-stream"
        assert stats["events_received"] >= 2
        assert stats["events_malformed"] == 0


def test_discovery_on_a_group_outside_224_works(tmp_path: Path) -> None:
    # someipy's daemon took only groups starting with "224" for multicast, and bound
    # others as broadcast sockets, which the adapter's own discovery socket then could
    # not share (adapters.someip.daemon, workaround 4).
    with (
        daemons("127.0.0.2", first_octet=239) as (remote,),
        SomeipPeer.start(
            remote, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001]}
        ) as server,
        gateway(tmp_path, remote.net, CONSUME) as gw,
    ):
        assert remote.net.sd_address.startswith("239.")
        wait_state(gw, "running")
        with mqtt(gw, "dash", "someip/1234/0001/event/#") as dash:
            speed = first_message(
                dash,
                lambda: server.send("send", eventgroup=1, event=0x8001, payload="41dd999a01"),
                "someip/1234/0001/event/8001",
            )
        assert json.loads(speed.payload) == {"speed_kmh": 27.7, "valid": True}


def test_a_malformed_event_is_counted_and_reported_with_its_field_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="adapters.someip")
    with (
        daemons("127.0.0.2") as (remote,),
        SomeipPeer.start(
            remote, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001, 0x8002]}
        ) as server,
    ):
        with gateway(tmp_path, remote.net, CONSUME) as gw:
            wait_state(gw, "running")
            with mqtt(gw, "dash", "someip/1234/0001/event/#") as dash:
                first_message(
                    dash,
                    lambda: server.send("send", eventgroup=1, event=0x8002, payload="01"),
                    "someip/1234/0001/event/8002",
                )
                server.send("send", eventgroup=1, event=0x8001, payload="41dd999a02")  # bool 2
                server.send("send", eventgroup=1, event=0x8001, payload="41dd999a")  # short
                server.send("send", eventgroup=1, event=0x8002, payload="02")  # a marker
                marker = dash.expect_message(unit(5))
                assert (marker.topic, marker.payload) == ("someip/1234/0001/event/8002", b"\x02")
                dash.expect_no_message(unit(0.3))
            stats = wait_until(
                lambda: (s := adapter_status(gw)["component_stats"])["events_malformed"] == 2 and s,
                unit(5),
            )
        assert stats["events_malformed"] == 2
    reports = [r.getMessage() for r in caplog.records if "does not fit" in r.getMessage()]
    assert any("$.valid: expected a boolean 0 or 1, got 2" in text for text in reports)
    assert any("$.valid: needs 1 bytes at offset 4, 0 left" in text for text in reports)


OFFER = (
    SPEED_LAYOUT
    + """
offer:
  - service_id: 0x2000
    instance_id: 3
    ttl: 3s
    cyclic_offer_delay: 500ms
    eventgroups: [1]
    events:
      - {id: 0x8001, layout: VehicleSpeed}
      - {id: 0x8002, from_mqtt: raw/speed}
"""
)


def test_mqtt_feeds_the_events_of_an_offered_service_to_a_remote_client(tmp_path: Path) -> None:
    with daemons("127.0.0.2") as (remote,):
        with gateway(tmp_path, remote.net, OFFER) as gw:
            wait_state(gw, "running")  # our own offer was heard on the network
            with (
                SomeipPeer.start(
                    remote,
                    role="client",
                    service=0x2000,
                    instance=3,
                    eventgroups={1: [0x8001, 0x8002]},
                ) as ecu,
                mqtt(gw, "feeder") as feeder,
            ):
                ecu.wait("available")

                def send() -> None:
                    feeder.publish("raw/speed", b"\x07", qos=1)

                first = first_event(ecu, send, 0x8002)
                assert first["payload"] == "07"
                feeder.publish(
                    "someip/2000/0003/event/8001", b'{"speed_kmh": 27.7, "valid": true}', qos=1
                )
                typed = ecu.wait("event", lambda e: e["event"] == 0x8001)
                assert typed["payload"] == "41dd999a01"
                # Not the layout: counted, reported, not sent.
                feeder.publish("someip/2000/0003/event/8001", b'{"speed_kmh": 1}', qos=1)
                feeder.publish("someip/2000/0003/event/8001", b"not json", qos=1)
                feeder.publish("raw/speed", b"\x08", qos=1)
                assert ecu.wait("event")["payload"] == "08"
                stats = adapter_status(gw)["component_stats"]
        assert stats["feeds_malformed"] == 2


TWO_INSTANCES = """
consume:
  - {service_id: 0x1234, instance_id: 1, eventgroups: [1], events: [0x8001]}
  - {service_id: 0x1234, instance_id: 2, eventgroups: [1], events: [0x8001]}
  - {service_id: 0x1235, instance_id: 1, eventgroups: [1], events: [0x8001]}
"""


def test_many_services_and_two_instances_of_one_service_stay_apart(tmp_path: Path) -> None:
    def server(remote: object, service: int, instance: int) -> SomeipPeer:
        return SomeipPeer.start(
            remote,  # type: ignore[arg-type]
            role="server",
            service=service,
            instance=instance,
            eventgroups={1: [0x8001]},
        )

    with (
        daemons("127.0.0.2") as (remote,),
        server(remote, 0x1234, 1) as first,
        server(remote, 0x1234, 2) as second,
        server(remote, 0x1235, 1) as other,
        gateway(tmp_path, remote.net, TWO_INSTANCES) as gw,
    ):
        wait_state(gw, "running")
        with mqtt(gw, "dash", "someip/+/+/event/#") as dash:
            senders = {
                "someip/1234/0001/event/8001": (first, "01"),
                "someip/1234/0002/event/8001": (second, "02"),
                "someip/1235/0001/event/8001": (other, "03"),
            }
            for topic, (peer, payload) in senders.items():
                first_message(
                    dash,
                    lambda peer=peer, payload=payload: peer.send(  # type: ignore[misc]
                        "send", eventgroup=1, event=0x8001, payload=payload
                    ),
                    topic,
                )
            dash.drain(unit(0.5))
            for peer, payload in senders.values():
                peer.send("send", eventgroup=1, event=0x8001, payload=payload)
            got = sorted(
                (m.topic, m.payload)
                for m in dash.expect_messages(3, unit(5))
                if m.topic.endswith("/8001")
            )
            dash.expect_no_message(unit(0.5))
        assert got == [
            ("someip/1234/0001/event/8001", b"\x01"),
            ("someip/1234/0002/event/8001", b"\x02"),
            ("someip/1235/0001/event/8001", b"\x03"),
        ]
