"""The product's main use, end to end: a vehicle's DDS bus to the cloud.

A reliable cyclonedds writer in a process of its own (``DdsPeer``) -> the dds adapter ->
the bridge (QoS 1, its disk queue) -> a mosquitto standing in for EMQX Cloud (TLS and a
password) -> a subscriber there; the cloud is stopped and started again in the middle of
the stream. Every sample arrives, in order. And back: a command published in the cloud
reaches a DDS reader.

The gateway runs ``examples/vehicle-dds-to-cloud.yaml`` itself: its dds adapter and its
``cloud`` bridge as written, with only what ties them to a machine replaced (the DDS
domain and network, the cloud's address, credentials and CA, a short reconnect backoff).
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, gateway_matched
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import (
    PASSWORD,
    USER,
    Collector,
    Remote,
    paho_client,
    wait_until,
)
from tests.integration.components.support import status_of
from tests.integration.listeners.pki import Pki

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "vehicle-dds-to-cloud.yaml"
IDL = ROOT / "examples" / "vehicle" / "vehicle.idl"
GATEWAY = "gw-e2e"  # ${HOSTNAME} in the example's remote topics
PER_PHASE = 2_000  # samples per vehicle: before, during and after the outage
VINS = ("E2E-BEFORE", "E2E-OUTAGE", "E2E-AFTER")
WINDOW = 100  # the bridge's max_inflight: the example leaves the default


def _config(domain: int, remote: Remote, pki: Pki) -> str:
    """The example, tied to this machine: its dds adapter and its bridge, unchanged
    otherwise (the ros2 adapter is left out: no ROS 2 peer here)."""
    example = yaml.safe_load(EXAMPLE.read_text())
    dds = next(adapter for adapter in example["adapters"] if adapter["type"] == "dds")
    dds.update(
        domain_id=domain,
        idl_files=[str(IDL)],
        network=yaml.safe_load(textwrap.dedent(NETWORK_YAML))["network"],
    )
    (bridge,) = example["bridges"]
    assert bridge["type"] == "emqx_cloud"
    bridge.update(
        server=f"127.0.0.1:{remote.tls_port}",
        username=USER,
        password=PASSWORD,
        tls={**bridge["tls"], "cafile": str(pki.ca)},
        reconnect_backoff="100ms",
        reconnect_backoff_max="500ms",
    )
    config = {"adapters": [dds], "bridges": [bridge], "persistence": example["persistence"]}
    return yaml.safe_dump(config)


def _speed(vin: str) -> dict[str, Any]:
    return {"vin": vin, "stamp": {"sec": 1_790_000_000, "nanosec": 0}, "kph": 0.0, "gear": "DRIVE"}


def _bridge(gw: RunningGateway) -> dict[str, Any]:
    return status_of(gw, "bridge", "cloud")


@pytest.mark.timeout(300)
def test_dds_to_the_cloud_through_a_restart_of_the_cloud_loses_nothing(
    tmp_path: Path, secure_remote: Remote, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOSTNAME", GATEWAY)
    domain = domain_id()
    total = PER_PHASE * len(VINS)
    cloud = Collector(secure_remote.port, f"fleet/{GATEWAY}/#", "cloud-sub")
    try:
        with (
            running_gateway(tmp_path, _config(domain, secure_remote, pki)) as gw,
            DdsPeer(domain) as car,
        ):
            wait_until(lambda: _bridge(gw)["state"], lambda s: s == "running", seconds=15)
            car.call("load", idl=[str(IDL)])
            car.call(
                "writer",
                id="speed",
                topic="vehicle_speed",
                type="vehicle::Speed",
                qos={"reliability": "reliable", "history": "all"},
            )
            assert car.call("matched", id="speed", timeout=unit(15))["matched"] >= 1
            wait_until(  # and the adapter's reader has seen the writer
                lambda: gateway_matched(gw, "vehicle", "reader", "vehicle_speed"),
                bool,
                seconds=unit(15),
            )

            def write(vin: str) -> None:
                reply = car.call(
                    "bulk", id="speed", n=PER_PHASE, field="kph", sample=_speed(vin), wait=unit(60)
                )
                assert reply["written"] == PER_PHASE

            write(VINS[0])
            wait_until(cloud.count, lambda n: n >= PER_PHASE // 4, seconds=60)
            secure_remote.stop()  # mid-stream: the rest of the first vehicle is on its way
            wait_until(lambda: _bridge(gw)["component_stats"]["connected"], lambda c: c == 0)
            write(VINS[1])  # while the cloud is down: into the bridge's queue
            wait_until(
                lambda: _bridge(gw)["component_stats"]["queued"],
                lambda n: n >= PER_PHASE * 2,
                seconds=60,
            )
            time.sleep(0.5)  # an outage, with messages waiting
            secure_remote.start()
            write(VINS[2])
            wait_until(lambda: len(set(cloud.payloads())), lambda n: n >= total, seconds=120)
            stats = wait_until(
                lambda: _bridge(gw)["component_stats"], lambda s: s["queue_depth"] == 0
            )
            status = status_of(gw, "adapter", "vehicle")
            adapter = {**status["stats"], **status["component_stats"]}
            _command_reaches_dds(secure_remote, car)
    finally:
        cloud.close()
    got = [
        (topic, json.loads(payload))
        for topic, payload in cloud.messages
        if topic.endswith("/speed")
    ]
    sent = [(f"fleet/{GATEWAY}/{vin}/speed", float(n)) for vin in VINS for n in range(PER_PHASE)]
    received = [(topic, sample["kph"]) for topic, sample in got]
    # In order and complete; the cloud's subscriber may see a message twice (mosquitto,
    # restarted, delivers again what it had not seen acknowledged), never one missing.
    assert list(dict.fromkeys(received)) == sent
    assert all(sample["vin"] in topic and sample["gear"] == "DRIVE" for topic, sample in got)
    assert adapter["dds_to_mqtt"] == total
    assert adapter["inbox_dropped"] == adapter["dds_samples_lost"] == 0
    assert (stats["acked"], stats["dropped"], stats["rejected"]) == (total, 0, 0)
    assert total <= stats["sent"] <= total + WINDOW
    assert stats["connects"] >= 2


def _command_reaches_dds(remote: Remote, car: DdsPeer) -> None:
    """The example's way back: fleet/<gateway>/<vin>/command -> vehicle_command."""
    car.call(
        "reader",
        id="command",
        topic="vehicle_command",
        type="vehicle::Command",
        qos={"durability": "transient_local", "history": 1},
    )
    command = {
        "vin": "E2E-AFTER",
        "request_id": 7,
        "setting": {"discriminator": 1, "cabin_temp_c": 21.5},
    }
    client = paho_client("cloud-operator")
    client.connect("127.0.0.1", remote.port)
    client.loop_start()
    try:
        client.publish(
            f"fleet/{GATEWAY}/E2E-AFTER/command", json.dumps(command).encode(), qos=1
        ).wait_for_publish(unit(5))
        taken = car.call("take", id="command", count=1, timeout=unit(15))["samples"]
    finally:
        client.disconnect()
        client.loop_stop()
    assert taken == [command]
