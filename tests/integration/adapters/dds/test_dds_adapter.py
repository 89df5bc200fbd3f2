"""The dds adapter against a cyclonedds peer in its own process, MQTT through paho.

One gateway and one peer serve the whole module (a DDS participant costs a start-up),
in a domain of their own; every test uses topics of its own. The types
(vehicle.idl) cover nested structs, sequences, unions, enums and keys; telemetry.idl is
known to the peer only (``type: auto``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.dds.codec import InRoute
from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, gateway_matched, unique
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

HERE = Path(__file__).resolve().parent
VEHICLE = HERE / "vehicle.idl"
TELEMETRY = HERE / "telemetry.idl"
NAMES = ("state", "cmd", "diag", "diag_cmd", "speed", "loop", "raw", "raw_cmd", "fleet",
         "bad_cmd", "deep_cmd")

CONFIG = """
mqtt:
  max_queued_messages: 20000    # the 10 000 samples wait for the paho subscriber
adapters:
  - type: dds
    name: car
    domain_id: {domain}
{network}    idl_files: [{vehicle}]
    qos_profiles:
      - name: latched
        durability: transient_local
        history: 1
    dds_to_mqtt:
      - from_dds: {state}
        type: vehicle::State
        to_mqtt: "vehicle/{{vin}}/state"
      - from_dds: {diag}
        type: vehicle::Diagnostics
        to_mqtt: "vehicle/{{key.vin}}/diag/{{dds.topic}}"
      - from_dds: {speed}
        type: vehicle::Speed
        to_mqtt: "{speed}/{{vin}}"
      - from_dds: {loop}
        type: vehicle::Speed
        to_mqtt: "{loop}/mqtt"
      - from_dds: {raw}
        type: vehicle::Speed
        to_mqtt: "{raw}/cdr"
        payload: cdr
      - from_dds: "{fleet}_*"
        type: vehicle::Speed
        to_mqtt: "fleet/{{dds.topic}}/{{vin}}"
      - from_dds: "{fleet}auto_*"
        type: auto
        to_mqtt: "auto/{{dds.topic}}"
    mqtt_to_dds:
      - from_mqtt: "cmd/{{vin}}/state"
        to_dds: {cmd}
        type: vehicle::State
      - from_mqtt: "cmd/{{vin}}/diag"
        to_dds: {diag_cmd}
        type: vehicle::Diagnostics
      - from_mqtt: "{loop}/mqtt"
        to_dds: {loop}
        type: vehicle::Speed
      - from_mqtt: "{raw_cmd}/cdr"
        to_dds: {raw_cmd}
        type: vehicle::Speed
        payload: cdr
        qos_profile: latched
      - from_mqtt: "{bad_cmd}/json"
        to_dds: {bad_cmd}
        type: vehicle::Speed
      - from_mqtt: "{deep_cmd}/json"
        to_dds: {deep_cmd}
        type: vehicle::Speed
"""


@dataclass
class Bus:
    gw: RunningGateway
    peer: DdsPeer
    names: dict[str, str]

    def stats(self) -> dict[str, Any]:
        status = self.gw.call(lambda: self.gw.gateway.adapters.status("car"))
        return {**status["stats"], **status["component_stats"]}


@pytest.fixture(scope="module")
def bus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bus]:
    domain = domain_id()
    names = {name: unique(name) for name in NAMES}
    config = CONFIG.format(domain=domain, network=NETWORK_YAML, vehicle=VEHICLE, **names)
    with running_gateway(tmp_path_factory.mktemp("dds"), config) as gw, DdsPeer(domain) as peer:
        peer.call("load", idl=[str(VEHICLE), str(TELEMETRY)])
        wait_until(lambda: gw.call(lambda: gw.gateway.adapters.status("car"))["state"]
                   == "running", unit(10), "the dds adapter runs")
        yield Bus(gw, peer, names)


@pytest.fixture
def clients(bus: Bus) -> Iterator[Clients]:
    factory = Clients(bus.gw)
    try:
        yield factory
    finally:
        factory.close_all()


def state(vin: str, seq: int) -> dict[str, Any]:
    return {
        "vin": vin, "seq": seq, "gear": "DRIVE",
        "velocity": {"x": 12.5, "y": -0.25, "z": 0.0},
        "wheels": [{"index": i, "pressure_kpa": 230.5 + i} for i in range(4)],
        "reading": {"discriminator": 3, "raw": "AQL/"},
        "tags": ["front", "rear", "\u00fcber"],
    }


def writer(bus: Bus, name: str, type_name: str, qos: dict[str, Any] | None = None) -> str:
    topic = bus.names.get(name, name)
    bus.peer.call("writer", id=name, topic=topic, type=type_name, qos=qos or {})
    assert bus.peer.call("matched", id=name, timeout=unit(10))["matched"] >= 1
    gateway_matches(bus, "reader", topic)
    return name


def gateway_matches(bus: Bus, endpoint: str, topic: str) -> None:
    """Waits until the gateway's ``endpoint`` of ``topic`` has matched the peer's, which
    may have seen the gateway's first."""
    wait_until(lambda: gateway_matched(bus.gw, "car", endpoint, topic), unit(10),
               f"the gateway's DDS {endpoint} of {topic} matches the peer")


def reader(bus: Bus, name: str, type_name: str, qos: dict[str, Any] | None = None,
           peer_id: str | None = None) -> str:
    """The peer's reader of ``name``'s topic, as ``peer_id`` (``name`` unless given)."""
    topic = bus.names.get(name, name)
    peer_id = peer_id or name
    bus.peer.call("reader", id=peer_id, topic=topic, type=type_name, qos=qos or {})
    assert bus.peer.call("matched", id=peer_id, timeout=unit(10))["matched"] >= 1
    gateway_matches(bus, "writer", topic)
    return name


def properties(message: Any) -> dict[str, Any]:
    props = message.properties
    return {"content_type": getattr(props, "ContentType", None),
            "format": getattr(props, "PayloadFormatIndicator", None),
            "user": dict(getattr(props, "UserProperty", []))}


def test_dds_to_mqtt_nested_structs_sequences_unions_enums_keys(bus: Bus,
                                                                 clients: Clients) -> None:
    sub = clients.subscriber(5, "vehicle/+/state", 1)
    writer(bus, "state", "vehicle::State")
    before = time.time_ns()
    bus.peer.call("write", id="state", samples=[state("WVW1", 1), state("WVW2", 2)])
    got = {m.topic: m for m in sub.expect_messages(2, unit(10))}
    assert sorted(got) == ["vehicle/WVW1/state", "vehicle/WVW2/state"]
    message = got["vehicle/WVW1/state"]
    assert json.loads(message.payload) == {**state("WVW1", 1),
                                           "velocity": {"x": 12.5, "y": -0.25, "z": 0.0}}
    props = properties(message)
    assert props["content_type"] == "application/json"
    assert props["format"] == 1
    assert props["user"]["dds.type"] == "vehicle::State"
    assert before - 10**9 < int(props["user"]["dds.source_timestamp"]) <= time.time_ns()


def test_mqtt_to_dds_nested_structs_sequences_unions_enums_keys(bus: Bus,
                                                                 clients: Clients) -> None:
    reader(bus, "cmd", "vehicle::State")
    publisher = clients.connect(5)
    sent = [state("WVW7", 7), {**state("WVW8", 8), "reading": {"discriminator": 9, "code": -4}}]
    for sample in sent:
        publisher.publish(f"cmd/{sample['vin']}/state", json.dumps(sample).encode(), 1)
    taken = bus.peer.call("take", id="cmd", count=2, timeout=unit(10))["samples"]
    assert taken == sent


def test_appendable_type_with_optional_member_both_ways(bus: Bus, clients: Clients) -> None:
    sub = clients.subscriber(5, "vehicle/+/diag/#", 1)
    writer(bus, "diag", "vehicle::Diagnostics")
    reader(bus, "diag_cmd", "vehicle::Diagnostics")
    out = {"vin": "WVW3", "code": "P0420", "values": [1, -2, 3], "note": None}
    bus.peer.call("write", id="diag", samples=[out])
    message = sub.expect_message(unit(10))
    assert message.topic == f"vehicle/WVW3/diag/{bus.names['diag']}"
    assert json.loads(message.payload) == out
    back = {"vin": "WVW4", "code": "U0100", "values": [], "note": "bus off"}
    clients.connect(5).publish("cmd/WVW4/diag", json.dumps(back).encode(), 1)
    assert bus.peer.call("take", id="diag_cmd", count=1, timeout=unit(10))["samples"] == [back]


def test_type_auto_rebuilds_an_unknown_type_from_the_network(bus: Bus,
                                                              clients: Clients) -> None:
    sub = clients.subscriber(5, "auto/#", 1)
    topic = f"{bus.names['fleet']}auto_battery"
    bus.peer.call("writer", id="battery", topic=topic, type="telemetry::Battery")
    wait_until(lambda: bus.peer.call("matched", id="battery", timeout=0.1)["matched"] >= 1,
               unit(15), "the adapter discovers the type and reads the topic")
    gateway_matches(bus, "reader", topic)
    sample = {"station": "depot-3", "mode": "CHARGING",
              "cells": [{"id": 1, "volts": 3.5}, {"id": 2, "volts": 3.25}], "soc": 0.75}
    bus.peer.call("write", id="battery", samples=[sample])
    message = sub.expect_message(unit(10))
    assert message.topic == f"auto/{topic}"
    assert json.loads(message.payload) == sample
    assert properties(message)["user"]["dds.type"] == "telemetry::Battery"


def test_a_pattern_reads_every_matching_topic(bus: Bus, clients: Clients) -> None:
    sub = clients.subscriber(5, "fleet/#", 1)
    topics = [f"{bus.names['fleet']}_{n}" for n in ("north", "south")]
    for index, topic in enumerate(topics):
        bus.peer.call("writer", id=topic, topic=topic, type="vehicle::Speed")
        wait_until(lambda t=topic: bus.peer.call("matched", id=t, timeout=0.1)["matched"] >= 1,
                   unit(15), f"the adapter reads {topic}")
        gateway_matches(bus, "reader", topic)
        bus.peer.call("write", id=topic, samples=[{"vin": f"V{index}", "seq": 0, "kph": 50.0}])
    got = sorted(m.topic for m in sub.expect_messages(2, unit(10)))
    assert got == sorted(f"fleet/{topic}/V{i}" for i, topic in enumerate(topics))


@pytest.mark.slow
def test_10000_reliable_samples_arrive_none_lost(bus: Bus, clients: Clients) -> None:
    count = 10_000
    sub = clients.subscriber(5, f"{bus.names['speed']}/+", 1)
    writer(bus, "speed", "vehicle::Speed")
    before = bus.stats()
    reply = bus.peer.call("bulk", id="speed", n=count, field="seq", wait=unit(120),
                          sample={"vin": "BULK", "seq": 0, "kph": 88.5})
    assert reply["written"] == count
    messages = sub.expect_messages(count, unit(120))
    seqs = [json.loads(m.payload)["seq"] for m in messages]
    assert seqs == list(range(count))  # all of them, in order
    after = bus.stats()
    assert after["dds_to_mqtt"] - before["dds_to_mqtt"] == count
    assert after["inbox_dropped"] == before["inbox_dropped"] == 0
    assert after["dds_samples_lost"] == after["dds_samples_rejected"] == 0


def test_a_malformed_payload_is_counted_logged_and_dropped(
        bus: Bus, clients: Clients, caplog: pytest.LogCaptureFixture) -> None:
    reader(bus, "bad_cmd", "vehicle::Speed")
    publisher = clients.connect(5)
    topic = f"{bus.names['bad_cmd']}/json"
    before = bus.stats()["malformed_mqtt"]
    with caplog.at_level(logging.DEBUG, logger="adapters.dds"):
        publisher.publish(topic, b"{not json", 1)
        publisher.publish(topic, json.dumps({"vin": "X", "seq": -1, "kph": 1}).encode(), 1)
        publisher.publish(topic, json.dumps({"vin": "X", "seq": 1}).encode(), 1)
        publisher.publish(topic, json.dumps({"vin": "OK", "seq": 5, "kph": 1.5}).encode(), 1)
        taken = bus.peer.call("take", id="bad_cmd", count=1, timeout=unit(10))["samples"]
    assert taken == [{"vin": "OK", "seq": 5, "kph": 1.5}]
    assert bus.stats()["malformed_mqtt"] - before == 3
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "payload is not JSON" in logged
    assert "$.seq: -1 is out of range for uint64" in logged
    assert "missing member 'kph'" in logged


def test_a_number_too_large_for_a_double_is_malformed_not_an_error(
        bus: Bus, clients: Clients, caplog: pytest.LogCaptureFixture) -> None:
    # a 400-digit integer raised OverflowError (logged as an unexpected failure with a
    # traceback); 1e400 became Infinity and was written to DDS
    reader(bus, "bad_cmd", "vehicle::Speed", peer_id="huge_cmd")
    publisher = clients.connect(5)
    topic = f"{bus.names['bad_cmd']}/json"
    before = bus.stats()
    with caplog.at_level(logging.DEBUG, logger="adapters.dds"):
        publisher.publish(topic, b'{"vin": "H1", "seq": 1, "kph": 1' + b"0" * 400 + b"}", 1)
        publisher.publish(topic, b'{"vin": "H2", "seq": 2, "kph": 1e400}', 1)
        publisher.publish(topic, b'{"vin": "H3", "seq": 3, "kph": -1e400}', 1)
        publisher.publish(topic, json.dumps({"vin": "OK", "seq": 4, "kph": 2.5}).encode(), 1)
        taken = bus.peer.call("take", id="huge_cmd", count=1, timeout=unit(10))["samples"]
    assert taken == [{"vin": "OK", "seq": 4, "kph": 2.5}]
    after = bus.stats()
    assert after["malformed_mqtt"] - before["malformed_mqtt"] == 3
    assert after["mqtt_errors"] == before["mqtt_errors"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "$.kph: 1000000000000000000000000000000000000... is out of range for float64" \
        in logged
    assert ('$.kph: number out of range for float64 (non-finite values are written "NaN", '
            '"Infinity", "-Infinity")') in logged


def test_deeply_nested_json_is_malformed_and_the_adapter_runs_on(
        bus: Bus, clients: Clients, caplog: pytest.LogCaptureFixture) -> None:
    # 100 kB of '[': json.loads raises RecursionError, which failed the adapter (restart)
    reader(bus, "deep_cmd", "vehicle::Speed")
    publisher = clients.connect(5)
    topic = f"{bus.names['deep_cmd']}/json"
    before = bus.stats()
    with caplog.at_level(logging.DEBUG, logger="adapters.dds"):
        publisher.publish(topic, b"[" * 100_000, 1)
        publisher.publish(topic, json.dumps({"vin": "DEEP", "seq": 1, "kph": 2.5}).encode(), 1)
        taken = bus.peer.call("take", id="deep_cmd", count=1, timeout=unit(10))["samples"]
    assert taken == [{"vin": "DEEP", "seq": 1, "kph": 2.5}]
    status = bus.gw.call(lambda: bus.gw.gateway.adapters.status("car"))
    assert status["state"] == "running"
    assert status["restarts"] == 0
    after = bus.stats()
    assert after["malformed_mqtt"] - before["malformed_mqtt"] == 1
    assert after["mqtt_to_dds"] - before["mqtt_to_dds"] == 1
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"{topic} -> {bus.names['deep_cmd']}: payload is not JSON" in logged


def test_an_unexpected_error_drops_one_message_and_the_adapter_runs_on(
        bus: Bus, clients: Clients, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # a bug in converting one message (simulated): logged, counted, skipped; no restart
    cdr_of = InRoute.cdr_of

    def failing(route: InRoute, context: Any, support: Any) -> bytes:
        if context.payload == b'"boom"':
            raise RuntimeError("simulated bug")
        return cdr_of(route, context, support)

    monkeypatch.setattr(InRoute, "cdr_of", failing)
    reader(bus, "deep_cmd", "vehicle::Speed", peer_id="boom_cmd")
    publisher = clients.connect(5)
    topic = f"{bus.names['deep_cmd']}/json"
    before = bus.stats()
    with caplog.at_level(logging.ERROR, logger="adapters.dds"):
        publisher.publish(topic, b'"boom"', 1)
        publisher.publish(topic, json.dumps({"vin": "BOOM", "seq": 2, "kph": 1.0}).encode(), 1)
        taken = bus.peer.call("take", id="boom_cmd", count=1, timeout=unit(10))["samples"]
    assert taken == [{"vin": "BOOM", "seq": 2, "kph": 1.0}]
    status = bus.gw.call(lambda: bus.gw.gateway.adapters.status("car"))
    assert (status["state"], status["restarts"]) == ("running", 0)
    after = bus.stats()
    assert after["mqtt_errors"] - before["mqtt_errors"] == 1
    assert after["malformed_mqtt"] == before["malformed_mqtt"]
    raised = [r.exc_info[1] for r in caplog.records
              if r.levelno == logging.ERROR and r.exc_info]
    assert [str(exc) for exc in raised] == ["simulated bug"]


def test_no_loops_either_way(bus: Bus, clients: Clients) -> None:
    loop = bus.names["loop"]
    sub = clients.subscriber(5, f"{loop}/mqtt", 1)
    writer(bus, "loop", "vehicle::Speed", {"ignore_local": True})
    reader(bus, "loop", "vehicle::Speed", {"ignore_local": True}, peer_id="loop_r")
    before = bus.stats()
    # DDS -> MQTT: published once, not written back to DDS (no-local by origin)
    bus.peer.call("write", id="loop", samples=[{"vin": "L1", "seq": 1, "kph": 1.0}])
    assert json.loads(sub.expect_message(unit(10)).payload)["vin"] == "L1"
    # MQTT -> DDS: written once, not read back to MQTT (DDS ignore-local): the subscriber
    # sees the MQTT message itself and nothing more
    sent = b'{"vin": "L2", "seq": 2, "kph": 2.0}'
    clients.connect(5).publish(f"{loop}/mqtt", sent, 1)
    assert sub.expect_message(unit(10)).payload == sent
    assert bus.peer.call("take", id="loop_r", count=1, timeout=unit(10))["samples"] == [
        {"vin": "L2", "seq": 2, "kph": 2.0}]
    sub.expect_no_message(unit(1))
    assert bus.peer.call("quiet", id="loop_r", seconds=0.2)["samples"] == []
    after = bus.stats()
    assert after["dds_to_mqtt"] - before["dds_to_mqtt"] == 1
    assert after["mqtt_to_dds"] - before["mqtt_to_dds"] == 1


def test_raw_cdr_payloads_both_ways_and_a_transient_local_writer(
        bus: Bus, clients: Clients) -> None:
    sub = clients.subscriber(5, f"{bus.names['raw']}/cdr", 1)
    writer(bus, "raw", "vehicle::Speed")
    bus.peer.call("write", id="raw", samples=[{"vin": "C1", "seq": 3, "kph": 0.5}])
    message = sub.expect_message(unit(10))
    assert properties(message)["content_type"] == "application/x-dds-cdr"
    cdr = message.payload
    assert cdr[:2] == b"\x00\x01"  # CDR_LE, as written
    # the same bytes back to DDS, through a latched (transient-local) writer: a reader
    # that joins afterwards still gets the last sample
    publisher = clients.connect(5)
    publisher.publish(f"{bus.names['raw_cmd']}/cdr", b"\x00\x01\x00\x00garbage", 1)
    publisher.publish(f"{bus.names['raw_cmd']}/cdr", cdr, 1)
    wait_until(lambda: bus.stats()["mqtt_to_dds"] >= 1 and bus.stats()["malformed_mqtt"] >= 1,
               unit(10), "the adapter wrote the CDR sample")
    bus.peer.call("reader", id="raw_cmd", topic=bus.names["raw_cmd"], type="vehicle::Speed",
                  qos={"durability": "transient_local"})
    assert bus.peer.call("take", id="raw_cmd", count=1, timeout=unit(10))["samples"] == [
        {"vin": "C1", "seq": 3, "kph": 0.5}]


def test_late_joining_adapter_reads_a_transient_local_writer(tmp_path: Path) -> None:
    domain = domain_id()
    topic = unique("latched")
    with DdsPeer(domain) as peer:
        peer.call("load", idl=[str(VEHICLE)])
        peer.call("writer", id="w", topic=topic, type="vehicle::Speed",
                  qos={"durability": "transient_local", "history": 1})
        peer.call("write", id="w", samples=[{"vin": "OLD", "seq": 1, "kph": 1.0},
                                            {"vin": "OLD", "seq": 2, "kph": 2.0}])
        config = f"""
adapters:
  - type: dds
    name: late
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - from_dds: {topic}
        type: vehicle::Speed
        to_mqtt: latched/{{vin}}
        retain: true
        dds_qos: {{durability: transient_local}}
"""
        with running_gateway(tmp_path, config) as gw:
            factory = Clients(gw)
            try:
                wait_until(lambda: gw.call(lambda: gw.gateway.adapters.status("late"))
                           ["component_stats"].get("dds_to_mqtt", 0) >= 1, unit(15),
                           "the adapter read the writer's history")
                sub = factory.subscriber(5, "latched/#", 1)
                message = sub.expect_message(unit(5))
                assert (message.topic, json.loads(message.payload)["seq"]) == ("latched/OLD", 2)
                assert message.retain
            finally:
                factory.close_all()


def test_an_unknown_type_fails_the_adapter_with_its_reason_and_nothing_else(
        bus: Bus, tmp_path: Path) -> None:
    """The configuration checks the types (``edgebus check``, reloads); an IDL file
    changed after that is loaded again at start, and fails the adapter alone."""
    from adapters.dds.config import DdsAdapterConfig
    from gateway.components import Spec
    from gateway.components.component import ADAPTER

    idl = tmp_path / "changing.idl"
    idl.write_text("module vehicle { struct Nope { long a; }; };")
    config = DdsAdapterConfig.model_validate({
        "type": "dds", "name": "broken", "domain_id": 0, "idl_files": [str(idl)],
        "restart_backoff": "30s",
        "dds_to_mqtt": [{"from_dds": "x", "type": "vehicle::Nope", "to_mqtt": "x"}]})
    idl.write_text("module vehicle { struct Other { long a; }; };")
    supervisor = bus.gw.gateway.components
    bus.gw.call(lambda: supervisor.add(Spec.of(ADAPTER, config)))
    try:
        def status() -> dict[str, Any]:
            return bus.gw.call(lambda: bus.gw.gateway.adapters.status("broken"))

        wait_until(lambda: status()["state"] == "backing_off", unit(15), "it backs off")
        assert "unknown DDS type 'vehicle::Nope'" in status()["last_error"]
        assert bus.gw.call(lambda: bus.gw.gateway.adapters.status("car"))["state"] == "running"
    finally:
        bus.gw.call(lambda: supervisor.remove(ADAPTER, "broken"))
