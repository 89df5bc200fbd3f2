"""The dds adapter where things go wrong or get shared: a network interface that does not
exist, adapters sharing a domain, several mappings of one discovered topic, a writer of
another type, and IDL problems found by ``edgebus check`` and refused on reload.

Each test has its own gateway, DDS domain and cyclonedds peer process (loopback only).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.brokers import REPO_ROOT, start_edgebus
from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, gateway_matched, unique
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

HERE = Path(__file__).resolve().parent
VEHICLE = HERE / "vehicle.idl"
TELEMETRY = HERE / "telemetry.idl"


def status(gw: RunningGateway, name: str) -> dict[str, Any]:
    found: dict[str, Any] = gw.call(lambda: gw.gateway.adapters.status(name))
    return found


def stats(gw: RunningGateway, name: str) -> dict[str, Any]:
    found = status(gw, name)
    return {**found["stats"], **found["component_stats"]}


@pytest.fixture
def clients_of() -> Iterator[Any]:
    made: list[Clients] = []

    def factory(gw: RunningGateway) -> Clients:
        made.append(Clients(gw))
        return made[-1]

    try:
        yield factory
    finally:
        for clients in made:
            clients.close_all()


def test_a_missing_network_interface_fails_the_adapter_with_the_reason(
        tmp_path: Path) -> None:
    config = f"""
adapters:
  - type: dds
    name: nowhere
    domain_id: {domain_id()}
    restart_backoff: 30s
    network:
      interfaces: [nosuch0]
      allow_multicast: false
    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - {{from_dds: {unique("speed")}, type: vehicle::Speed, to_mqtt: speed}}
"""
    with running_gateway(tmp_path, config) as gw:
        wait_until(lambda: status(gw, "nowhere")["state"] == "backing_off", unit(15),
                   "the adapter fails and backs off")
        error = status(gw, "nowhere")["last_error"]
        assert "cannot join DDS domain" in error
        assert "no network interface 'nosuch0'" in error
        assert "already exists" not in error


def test_an_adapter_leaving_a_shared_domain_leaves_the_others_running(
        tmp_path: Path, clients_of: Any) -> None:
    """Deleting a Cyclone ``Domain`` deletes every participant in it: the adapter that
    created the domain must not take the others' participants with it when it stops."""
    from adapters.dds.config import DdsAdapterConfig
    from gateway.components import Spec
    from gateway.components.component import ADAPTER

    domain = domain_id()
    first, second = unique("first"), unique("second")
    config = f"""
adapters:
  - type: dds
    name: one
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - {{from_dds: {first}, type: vehicle::Speed, to_mqtt: "one/{{vin}}"}}
"""
    with running_gateway(tmp_path, config) as gw, DdsPeer(domain) as peer:
        wait_until(lambda: status(gw, "one")["state"] == "running", unit(15), "one runs")
        two = DdsAdapterConfig.model_validate({
            "type": "dds", "name": "two", "domain_id": domain, "idl_files": [str(VEHICLE)],
            "network": {"interfaces": ["lo"], "peers": ["127.0.0.1"],
                        "allow_multicast": False},
            "dds_to_mqtt": [{"from_dds": second, "type": "vehicle::Speed",
                             "to_mqtt": "two/{vin}"}]})
        supervisor = gw.gateway.components
        gw.call(lambda: supervisor.add(Spec.of(ADAPTER, two)))
        wait_until(lambda: status(gw, "two")["state"] == "running", unit(15), "two runs")
        gw.call(lambda: supervisor.remove(ADAPTER, "one"))
        task = gw.call(lambda: supervisor._retiring.get((ADAPTER, "one")))
        wait_until(lambda: task is None or task.done(), unit(15), "one has stopped")

        sub = clients_of(gw).subscriber(5, "two/#", 1)
        peer.call("load", idl=[str(VEHICLE)])
        peer.call("writer", id="w", topic=second, type="vehicle::Speed")
        assert peer.call("matched", id="w", timeout=unit(10))["matched"] >= 1
        wait_until(lambda: gateway_matched(gw, "two", "reader", second), unit(10),
                   "two's reader matches the peer")
        peer.call("write", id="w", samples=[{"vin": "V2", "seq": 1, "kph": 2.0}])
        message = sub.expect_message(unit(10))
        assert message.topic == "two/V2"
        assert (status(gw, "two")["state"], status(gw, "two")["restarts"]) == ("running", 0)


@pytest.mark.parametrize("kind", ["auto", "pattern"])
def test_every_mapping_of_a_discovered_topic_gets_every_sample(
        tmp_path: Path, clients_of: Any, kind: str) -> None:
    domain = domain_id()
    topic = unique("battery")
    if kind == "auto":
        source, type_name, idl = topic, "auto", ""
    else:
        source, type_name, idl = f"{topic[:-3]}*", "telemetry::Battery", (
            f"    idl_files: [{TELEMETRY}]\n")
    config = f"""
adapters:
  - type: dds
    name: many
    domain_id: {domain}
{NETWORK_YAML}{idl}    dds_to_mqtt:
      - {{from_dds: "{source}", type: {type_name}, to_mqtt: "json/{{station}}"}}
      - {{from_dds: "{source}", type: {type_name}, to_mqtt: "cdr/{{station}}", payload: cdr}}
      - {{from_dds: "{topic}", type: auto, to_mqtt: "third/{{station}}"}}
"""
    with running_gateway(tmp_path, config) as gw, DdsPeer(domain) as peer:
        wait_until(lambda: status(gw, "many")["state"] == "running", unit(15), "it runs")
        sub = clients_of(gw).subscriber(5, ["json/#", "cdr/#", "third/#"], 1)
        peer.call("load", idl=[str(TELEMETRY)])
        peer.call("writer", id="w", topic=topic, type="telemetry::Battery")
        # one reader per mapping
        assert peer.call("matched", id="w", count=3, timeout=unit(20))["matched"] == 3
        wait_until(lambda: gateway_matched(gw, "many", "reader", topic), unit(10),
                   "the gateway's readers match the peer")
        samples = [{"station": f"s{i}", "mode": "IDLE", "cells": [], "soc": 0.5}
                   for i in range(5)]
        peer.call("write", id="w", samples=samples)
        got = sub.expect_messages(15, unit(15))
        topics = sorted(message.topic for message in got)
        assert topics == sorted(f"{prefix}/s{i}" for prefix in ("json", "cdr", "third")
                                for i in range(5))
        sub.expect_no_message(unit(0.5))
        assert stats(gw, "many")["readers"] == 3


def test_a_writer_of_another_type_is_reported_as_a_type_mismatch(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    domain = domain_id()
    topic = unique("speed")
    other = tmp_path / "other.idl"  # the same type name, other members
    other.write_text("module vehicle {"
                     " @final struct Speed { @key string<17> vin; double kph; }; };")
    config = f"""
adapters:
  - type: dds
    name: typed
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - {{from_dds: {topic}, type: vehicle::Speed, to_mqtt: speed}}
"""
    with caplog.at_level(logging.WARNING, logger="adapters.dds"), \
            running_gateway(tmp_path, config) as gw, DdsPeer(domain) as peer:
        wait_until(lambda: status(gw, "typed")["state"] == "running", unit(15), "it runs")
        peer.call("load", idl=[str(other)])
        peer.call("writer", id="w", topic=topic, type="vehicle::Speed")
        wait_until(lambda: stats(gw, "typed")["type_mismatch"] >= 1, unit(15),
                   f"the mismatch is counted {stats(gw, 'typed')}")
        counted = stats(gw, "typed")
        assert counted["incompatible_qos"] == 0
        logged = "\n".join(record.getMessage() for record in caplog.records)
        assert (f"topic {topic!r}: a remote writer's type does not match the IDL type"
                f" vehicle::Speed") in logged
        assert "QoS" not in logged


#: vehicle::Speed without its key, and a keyless type of another name.
KEYLESS = ("module vehicle { @final struct Speed { string<17> vin; unsigned long long seq;"
           " double kph; }; };\n"
           "module other { @final struct Plain { string<17> vin; unsigned long long seq;"
           " double kph; }; };\n")


@pytest.mark.parametrize(("peer_role", "peer_type"), [("writer", "vehicle::Speed"),
                                                      ("reader", "other::Plain")])
def test_a_peer_whose_type_differs_in_key_ness_degrades_the_adapter(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, peer_role: str,
        peer_type: str) -> None:
    """DDS never matches a keyed and a keyless endpoint of one topic, and reports nothing
    (no incompatible-QoS or inconsistent-topic status): the adapter compares the RTPS
    entity kinds of the remote endpoints the builtin topics announce with its own."""
    from tests.integration.components.support import API, http_of, metric

    domain = domain_id()
    out_topic, in_topic = unique("speed"), unique("command")
    keyless = tmp_path / "keyless.idl"
    keyless.write_text(KEYLESS)
    config = API + f"""
adapters:
  - type: dds
    name: keys
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - {{from_dds: {out_topic}, type: vehicle::Speed, to_mqtt: speed}}
    mqtt_to_dds:
      - {{from_mqtt: "cmd/#", to_dds: {in_topic}, type: vehicle::Speed}}
"""
    mapping, topic = (("dds_to_mqtt[0]", out_topic) if peer_role == "writer"
                      else ("mqtt_to_dds[0]", in_topic))
    ours = "reader" if peer_role == "writer" else "writer"
    with caplog.at_level(logging.INFO, logger="adapters.dds"), \
            running_gateway(tmp_path, config) as gw, DdsPeer(domain) as peer:
        wait_until(lambda: status(gw, "keys")["state"] == "running", unit(15), "it runs")
        peer.call("load", idl=[str(keyless)])
        peer.call(peer_role, id="p", topic=topic, type=peer_type)
        wait_until(lambda: status(gw, "keys")["state"] == "degraded", unit(15),
                   f"the adapter is degraded: {status(gw, 'keys')}")
        reason = status(gw, "keys")["reason"]
        assert (f"{mapping} {topic!r}: remote {peer_role} of {peer_type} is keyless, "
                f"vehicle::Speed is keyed (never matched)") in reason
        counted = stats(gw, "keys")
        assert counted["key_mismatch"] == 1
        assert (counted["type_mismatch"], counted["incompatible_qos"]) == (0, 0)
        logged = "\n".join(record.getMessage() for record in caplog.records)
        assert (f"dds keys: {mapping} topic {topic!r}: a remote {peer_role}'s type "
                f"{peer_type} is keyless, our {ours}'s type vehicle::Speed is keyed; DDS never"
                " matches endpoints whose types differ in having a key") in logged
        http = http_of(gw)
        ident = {"kind": "adapter", "type": "dds", "name": "keys"}
        metrics = http.get("/metrics").text
        assert metric(metrics, "edgebus_component_degraded", **ident) == 1
        assert metric(metrics, "edgebus_component_stat", **ident, stat="key_mismatch") == 1
        # DDS indeed does not match them
        assert peer.call("matched", id="p", timeout=unit(0.5))["matched"] == 0

        peer.call("delete", id="p")
        wait_until(lambda: status(gw, "keys")["state"] == "running", unit(15),
                   f"the adapter runs again once the peer is gone: {status(gw, 'keys')}")
        metrics = http.get("/metrics").text
        assert metric(metrics, "edgebus_component_degraded", **ident) == 0


def test_a_keyed_peer_is_matched_and_not_reported(tmp_path: Path) -> None:
    domain = domain_id()
    topic = unique("speed")
    config = f"""
adapters:
  - type: dds
    name: keyed
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{VEHICLE}]
    dds_to_mqtt:
      - {{from_dds: {topic}, type: vehicle::Speed, to_mqtt: speed}}
"""
    with running_gateway(tmp_path, config) as gw, DdsPeer(domain) as peer:
        wait_until(lambda: status(gw, "keyed")["state"] == "running", unit(15), "it runs")
        peer.call("load", idl=[str(VEHICLE)])
        peer.call("writer", id="w", topic=topic, type="vehicle::Speed")
        assert peer.call("matched", id="w", timeout=unit(10))["matched"] == 1
        wait_until(lambda: gateway_matched(gw, "keyed", "reader", topic), unit(10),
                   "the gateway's reader matches the peer")
        assert status(gw, "keyed")["state"] == "running"
        assert stats(gw, "keyed")["key_mismatch"] == 0


BROKEN = {
    "missing": (None, "vehicle::Speed", "speed", "idl_files[0]: cannot read"),
    "syntax": ("module m { struct S { long a; };\n", "m::S", "x",
               "idl_files[0]: {idl}:2:1: expected '}}' to close module 'm'"),
    "type": (None, "vehicle::Nope", "x",
             "dds_to_mqtt[0].type: unknown DDS type 'vehicle::Nope'"),
    "member": (None, "vehicle::Speed", "x/{nosuch}",
               "dds_to_mqtt[0].to_mqtt: topic template 'x/{{nosuch}}':"
               " vehicle::Speed has no member 'nosuch'"),
}


def _adapter_yaml(domain: int, idl: Path, type_name: str, template: str) -> str:
    return f"""
adapters:
  - type: dds
    name: checked
    domain_id: {domain}
{NETWORK_YAML}    idl_files: [{idl}]
    dds_to_mqtt:
      - from_dds: {unique("t")}
        type: {type_name}
        to_mqtt: "{template}"
"""


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_check_reports_an_unusable_idl_with_file_line_and_path(tmp_path: Path,
                                                                case: str) -> None:
    text, type_name, template, expected = BROKEN[case]
    idl = VEHICLE
    if case == "missing":
        idl = tmp_path / "missing.idl"
    elif text is not None:
        idl = tmp_path / "broken.idl"
        idl.write_text(text)
    config = tmp_path / "edgebus.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\n"
                      + _adapter_yaml(domain_id(), idl, type_name, template))
    done = subprocess.run([sys.executable, "-m", "gateway.cli", "check", str(config)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=unit(60))
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    key = expected.split(":", 1)[0].rsplit(".", 1)[-1].split("[")[0]  # idl_files, type, ...
    line = max(number for number, text in enumerate(config.read_text().splitlines(), 1)
               if text.lstrip(" -").startswith(f"{key}:"))
    assert f"edgebus.yaml:{line} adapters[0].{expected.format(idl=idl)}" in output


def test_a_reload_with_an_unusable_idl_is_refused_and_the_adapter_runs_on(
        tmp_path: Path) -> None:
    domain = domain_id()
    idl = tmp_path / "types.idl"
    idl.write_text(VEHICLE.read_text())
    broker = start_edgebus(tmp_path, "persistence: memory\n"
                           + _adapter_yaml(domain, idl, "vehicle::Speed", "x/{vin}"))
    try:
        deadline = time.monotonic() + unit(15)
        while "adapter checked (dds) running" not in broker.log_tail():
            assert time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.05)
        idl.write_text("module vehicle { struct Speed { long a; };\n")  # broken
        broker.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + unit(15)
        while "reload refused" not in broker.log_tail():
            assert time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.05)
        tail = broker.log_tail()
        assert f"adapters[0].idl_files[0]: {idl}:2:1" in tail
        assert "adapter checked (dds) stopped" not in tail
        assert broker.process.poll() is None
    finally:
        broker.stop()
