"""The worked example of docs/adapters/someip.md, run as written (its YAML block, with
this test's discovery network), driven by mosquitto's command-line clients."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.gateway import running_gateway
from tests.helpers.someip import SomeipPeer, daemons
from tests.helpers.timeouts import unit
from tests.integration.adapters.someip.support import first_event, wait_state

DOC = Path(__file__).resolve().parents[4] / "docs" / "adapters" / "someip.md"


def example_config() -> dict[str, Any]:
    text = DOC.read_text()
    block = re.search(r"<!-- example: vehicle-speed.*?-->\n```yaml\n(.*?)```", text, re.S)
    assert block is not None
    config: dict[str, Any] = yaml.safe_load(block.group(1))
    return config


def clients(port: int, *argv: str) -> list[str]:
    return [argv[0], "-p", str(port), *argv[1:]]


def test_the_vehicle_speed_example(tmp_path: Path) -> None:
    config = example_config()
    with daemons("127.0.0.2") as (ecus,):
        (adapter,) = config["adapters"]
        adapter["daemon"].update(sd_address=ecus.net.sd_address, sd_port=ecus.net.sd_port)
        esp = SomeipPeer.start(
            ecus, role="server", service=0x1234, instance=1, eventgroups={1: [0x8001]},
            methods={1: "hex:006400000007efbbbf6d617000"},
        )  # fmt: skip
        with esp, running_gateway(tmp_path, yaml.safe_dump(config)) as gw:
            port = gw.port
            wait_state(gw, "running")
            # Events, as mosquitto_sub shows them.
            sub = subprocess.Popen(
                clients(port, "mosquitto_sub", "-v", "-t", "someip/1234/0001/event/#", "-C", "1"),
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                while sub.poll() is None:
                    esp.send(
                        "send", eventgroup=1, event=0x8001, payload="41dd999a0107efbbbf61627300"
                    )
                    try:
                        sub.wait(0.3)
                    except subprocess.TimeoutExpired:
                        continue
            finally:
                if sub.poll() is None:
                    sub.kill()
                out = sub.communicate(timeout=unit(5))[0]
            assert out == (
                'someip/1234/0001/event/8001 {"speed_kmh":27.7,"valid":true,"sensor":"abs"}\n'
            )
            # A method call with mosquitto_rr.
            rr = subprocess.run(
                clients(port, "mosquitto_rr", "-t", "someip/1234/0001/method/0001",
                        "-e", "replies/dash", "-m", "2", "-W", str(int(unit(10)))),
                capture_output=True, text=True, timeout=unit(15), check=True,
            )  # fmt: skip
            assert rr.stdout == '{"limit_kmh":100,"source":"map"}\n'
            assert esp.wait("request")["payload"] == "02"
            # Speed advice from MQTT to an ECU subscribed to the gateway's service.
            with SomeipPeer.start(
                ecus, role="client", service=0x2000, instance=1, eventgroups={1: [0x8001]}
            ) as display:
                advice = '{"limit_kmh": 80, "source": "cloud"}'
                event = first_event(
                    display,
                    lambda: subprocess.run(
                        clients(port, "mosquitto_pub", "-t", "cloud/speed-advice", "-m", advice),
                        check=True,
                        timeout=unit(5),
                    ),
                    0x8001,
                )
                assert event["payload"] == "005000000009efbbbf636c6f756400"
            # The retained status of both services.
            status = subprocess.run(
                clients(port, "mosquitto_sub", "-v", "-t", "someip/+/+/status", "-C", "2",
                        "-W", str(int(unit(10)))),
                capture_output=True, text=True, timeout=unit(15), check=True,
            )  # fmt: skip
            states = {
                line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1])
                for line in status.stdout.splitlines()
            }
            assert states["someip/1234/0001/status"]["state"] == "offered"
            assert states["someip/1234/0001/status"]["endpoint"].startswith("127.0.0.2:")
            assert states["someip/2000/0001/status"]["state"] == "offered"
            assert states["someip/2000/0001/status"]["ttl_s"] == 5
