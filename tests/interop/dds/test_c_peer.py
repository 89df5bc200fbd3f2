"""The dds adapter against a C peer: Debian's Cyclone DDS (idlc, cyclonedds-dev, gcc).

The peer (c_peer.c) is built by the test from the adapter's own IDL
(tests/integration/adapters/dds/vehicle.idl) with ``idlc`` 0.10.2 and linked against
Debian's libddsc 0.10.2; the adapter runs cyclonedds-python 11 from PyPI. The two
exchange ``vehicle::State`` (nested structs, a sequence of structs, a union, an enum, a
key, a sequence of strings) with XTypes type information on both sides: both ways,
every sample, equal values.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.dds import NETWORK_YAML, dds_environment, domain_id, unique
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

pytestmark = pytest.mark.interop
HERE = Path(__file__).resolve().parent
IDL = HERE.parents[1] / "integration" / "adapters" / "dds" / "vehicle.idl"
COUNT = 200


def _missing_tools() -> str | None:
    missing = [tool for tool in ("idlc", "gcc") if shutil.which(tool) is None]
    if not Path("/usr/include/dds/dds.h").is_file():
        missing.append("/usr/include/dds/dds.h")
    if missing:
        return ("needs Debian's cyclonedds-dev, cyclonedds-tools and gcc (make test installs"
                f" them); missing: {', '.join(missing)}")
    return None


@pytest.fixture(scope="module")
def c_peer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _missing_tools()
    if reason is not None:
        pytest.skip(reason)
    build = tmp_path_factory.mktemp("c_peer")
    subprocess.run(["idlc", "-o", str(build), str(IDL)], check=True, capture_output=True,
                   timeout=unit(60))
    program = build / "c_peer"
    subprocess.run(["gcc", "-O1", "-Wall", "-Werror", "-o", str(program), str(HERE / "c_peer.c"),
                    str(build / "vehicle.c"), "-I", str(build), "-lddsc"],
                   check=True, capture_output=True, timeout=unit(120))
    return program


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningGateway, dict[str, Any]]]:
    names = {"domain": domain_id(), "out": unique("c_out"), "in": unique("c_in")}
    config = f"""
mqtt:
  max_queued_messages: 1000
adapters:
  - type: dds
    name: c
    domain_id: {names["domain"]}
{NETWORK_YAML}    idl_files: [{IDL}]
    dds_to_mqtt:
      - from_dds: {names["out"]}
        type: vehicle::State
        to_mqtt: c/{{vin}}/{{seq}}
    mqtt_to_dds:
      - from_mqtt: to_c/{{vin}}
        to_dds: {names["in"]}
        type: vehicle::State
"""
    with running_gateway(tmp_path_factory.mktemp("gw"), config) as gw:
        wait_until(lambda: gw.call(lambda: gw.gateway.adapters.status("c"))["state"]
                   == "running", unit(10), "the dds adapter runs")
        yield gw, names


def test_c_publisher_to_mqtt(c_peer: Path, setup: tuple[RunningGateway, dict[str, Any]]) -> None:
    gw, names = setup
    clients = Clients(gw)
    try:
        sub = clients.subscriber(5, "c/#", 1)
        publisher = subprocess.Popen(
            [str(c_peer), "pub", names["out"], str(names["domain"]), str(COUNT),
             str(int(unit(15)))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=dds_environment())
        try:
            messages = sub.expect_messages(COUNT, unit(30))
        finally:
            out, err = publisher.communicate(input="", timeout=unit(20))
        assert (out, err, publisher.returncode) == (f"written {COUNT}\n", "", 0)
        by_seq = {json.loads(m.payload)["seq"]: m for m in messages}
        assert sorted(by_seq) == list(range(COUNT))
        message = by_seq[7]
        assert message.topic == "c/CPEER1/7"
        assert json.loads(message.payload) == {
            "vin": "CPEER1", "seq": 7, "gear": "REVERSE",
            "velocity": {"x": 3.5, "y": -1.25, "z": 1e-3},
            "wheels": [{"index": 1, "pressure_kpa": 220.5}, {"index": 2, "pressure_kpa": 230.25}],
            "reading": {"discriminator": 2, "text": "c text"}, "tags": ["from", "c"],
        }
    finally:
        clients.close_all()


def test_mqtt_to_c_subscriber(c_peer: Path, setup: tuple[RunningGateway, dict[str, Any]]) -> None:
    gw, names = setup
    count = 20
    subscriber = subprocess.Popen(
        [str(c_peer), "sub", names["in"], str(names["domain"]), str(count), str(int(unit(30)))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dds_environment())
    clients = Clients(gw)
    try:
        assert subscriber.stdout is not None
        assert subscriber.stdout.readline() == "ready\n"
        wait_until(lambda: gw.call(lambda: gw.gateway.adapters.status("c"))["component_stats"]
                   ["writers"] == 1, unit(10), "the adapter's writer exists")
        writer = gw.call(lambda: gw.gateway.adapters.instance("c")._bridge.writer_for(names["in"]))
        wait_until(lambda: gw.call(writer.matched) >= 1, unit(15), "the C reader matched")
        publisher = clients.connect(5)
        for seq in range(count):
            sample = {"vin": f"MQTT{seq % 2}", "seq": seq, "gear": "NEUTRAL",
                      "velocity": {"x": 0.25, "y": seq, "z": -2},
                      "wheels": [{"index": 9, "pressure_kpa": 1.5}],
                      "reading": {"discriminator": 1, "number": 2.5}, "tags": []}
            publisher.publish(f"to_c/{sample['vin']}", json.dumps(sample).encode(), 1)
        out, err = subscriber.communicate(timeout=unit(40))
    finally:
        clients.close_all()
        if subscriber.poll() is None:
            subscriber.kill()
    assert (err, subscriber.returncode) == ("", 0)
    # a reader takes by instance (key), each instance's samples in order
    lines = {line["seq"]: line for line in map(json.loads, out.splitlines())}
    assert sorted(lines) == list(range(count))
    assert lines[3] == {"vin": "MQTT1", "seq": 3, "gear": "NEUTRAL", "velocity": [0.25, 3, -2],
                        "wheels": [[9, 1.5]], "reading": [1, 2.5], "tags": []}
