"""50,000 messages through each adapter, each way, with none lost.

ZeroMQ / NNG -> MQTT: a peer process pushes 50,000 numbered messages to the adapter's
``pull`` / ``pull0`` socket; ``mosquitto_sub`` (QoS 1) must print every number once, in
order. MQTT -> ZeroMQ / NNG: ``mosquitto_pub -l`` publishes 50,000 lines at QoS 1; the
peer's ``pull`` socket must receive every one, in order.

Push/pull never drops: a full peer makes the sender wait. The MQTT side gets room to
match: the subscriber's session queue (``mqtt.max_queued_messages``) and the adapter's
outbound subscription queue (``queue_size``) hold all 50,000, so the figure tested is
the adapter's: what it took in, it delivered.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.adapters.socket_support import (
    counters,
    ipc_dir,
    nng_peer,
    wait_counter,
    wait_state,
    zmq_peer,
)
from tests.integration.components.support import wait_for

__all__ = ["ipc_dir"]  # the fixture, used by name

COUNT = 50_000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("mosquitto_sub") is None,
        reason="mosquitto_sub / mosquitto_pub are missing (apt-get install mosquitto-clients)",
    ),
]

ROOM = f"""
mqtt:
  max_queued_messages: {COUNT * 2}
"""


def config(kind: str, inbound: str, outbound: str) -> str:
    return f"""
adapters:
  - type: {kind}
    name: bulk
    queue_size: {COUNT * 2}
    {kind}_to_mqtt:
      - {inbound}
    mqtt_to_{kind}:
      - {outbound}
{ROOM}"""


def subscribed(gw: RunningGateway, topic_filter: str) -> bool:
    return gw.call(lambda: any(e.topic_filter == topic_filter for e in gw.broker.router.entries()))


def receive_on_mqtt(gw: RunningGateway, tmp_path: Path, push: list[str], peer: str) -> None:
    host, port = gw.address()
    out = tmp_path / "sub.txt"
    with out.open("wb") as sink:
        sub = subprocess.Popen(
            [
                "mosquitto_sub",
                "-h",
                host,
                "-p",
                str(port),
                "-V",
                "5",
                "-i",
                "bulk-sub",
                "-t",
                "bulk/in/#",
                "-q",
                "1",
                "-C",
                str(COUNT),
                "-F",
                "%p",
            ],
            stdout=sink,
            stderr=subprocess.PIPE,
        )
        try:
            wait_for(lambda: subscribed(gw, "bulk/in/#"), bool)
            maker = zmq_peer if peer == "zmq" else nng_peer
            with maker(*push) as pusher:
                assert pusher.expect("sent", timeout=unit(120)) == COUNT
                sub.wait(unit(120))
        finally:
            if sub.poll() is None:
                sub.kill()
                sub.wait()
    lines = out.read_bytes().splitlines()
    assert len(lines) == COUNT
    assert lines == [str(i).encode() for i in range(COUNT)]


def send_from_mqtt(gw: RunningGateway, pull: list[str], peer: str) -> None:
    host, port = gw.address()
    maker = zmq_peer if peer == "zmq" else nng_peer
    with maker(*pull) as puller:
        puller.expect("ready")
        wait_state(gw, "bulk", "running")
        lines = "".join(f"{i}\n" for i in range(COUNT))
        done = subprocess.run(
            [
                "mosquitto_pub",
                "-h",
                host,
                "-p",
                str(port),
                "-V",
                "5",
                "-i",
                "bulk-pub",
                "-t",
                "bulk/out/x",
                "-q",
                "1",
                "-l",
            ],
            input=lines.encode(),
            capture_output=True,
            timeout=unit(120),
            check=False,
        )
        assert done.returncode == 0, done.stderr
        report = puller.expect("in_order", timeout=unit(120))
    assert report is True


def test_zmq_50k_each_way_none_lost(tmp_path: Path, ipc_dir: Path) -> None:
    inbound = f"{{socket: pull, bind: 'ipc://{ipc_dir}/in', to_mqtt: 'bulk/in/{{zmq.topic}}'}}"
    outbound = f"{{from_mqtt: 'bulk/out/#', socket: push, bind: 'ipc://{ipc_dir}/out'}}"
    with running_gateway(tmp_path, config("zmq", inbound, outbound)) as gw:
        push = ["push", "--connect", f"ipc://{ipc_dir}/in", "--topic", "n", "--count", str(COUNT)]
        receive_on_mqtt(gw, tmp_path, push, "zmq")
        pull = ["pull", "--connect", f"ipc://{ipc_dir}/out", "--count", str(COUNT)]
        send_from_mqtt(gw, pull, "zmq")
        stats = wait_counter(gw, "bulk", "mqtt_to_zmq[0].sent", COUNT)
    assert stats["zmq_to_mqtt[0].published"] == COUNT
    assert stats["mqtt_to_zmq[0].dropped"] == 0


def test_nng_50k_each_way_none_lost(tmp_path: Path, ipc_dir: Path) -> None:
    inbound = (
        f"{{socket: pull0, bind: 'ipc://{ipc_dir}/in', delimiter: ':',"
        f" to_mqtt: 'bulk/in/{{nng.topic}}'}}"
    )
    outbound = f"{{from_mqtt: 'bulk/out/#', socket: push0, bind: 'ipc://{ipc_dir}/out'}}"
    with running_gateway(tmp_path, config("nng", inbound, outbound)) as gw:
        push = [
            "push",
            "--connect",
            f"ipc://{ipc_dir}/in",
            "--topic",
            "n",
            "--delimiter",
            ":",
            "--count",
            str(COUNT),
        ]
        receive_on_mqtt(gw, tmp_path, push, "nng")
        pull = ["pull", "--connect", f"ipc://{ipc_dir}/out", "--count", str(COUNT)]
        send_from_mqtt(gw, pull, "nng")
        stats = counters(gw, "bulk")
    assert stats["nng_to_mqtt[0].published"] == COUNT
    assert stats["mqtt_to_nng[0].sent"] == COUNT
    assert stats["mqtt_to_nng[0].dropped"] == 0
