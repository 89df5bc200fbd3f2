"""Shared by the ZeroMQ and NNG adapter tests: peers in their own processes, MQTT 5
clients, short ipc paths, and waits on the adapter's state and counters."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.brokers import free_port
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.peer_process import PeerProcess
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient, publish_props
from tests.integration.components.support import wait_for

__all__ = [
    "answer_upper_case",
    "check_peers_come_back",
    "counters",
    "ipc_dir",
    "mqtt_client",
    "nng_peer",
    "state_of",
    "tcp_url",
    "wait_counter",
    "wait_state",
    "zmq_peer",
]

PEERS = Path(__file__).parent / "peers"


def zmq_peer(*args: str) -> PeerProcess:
    """``peers/zmq_peer.py`` with ``args``, in its own process."""
    return PeerProcess([sys.executable, str(PEERS / "zmq_peer.py"), *args])


def nng_peer(*args: str) -> PeerProcess:
    """``peers/nng_peer.py`` with ``args``, in its own process."""
    return PeerProcess([sys.executable, str(PEERS / "nng_peer.py"), *args])


def tcp_url() -> str:
    """A loopback TCP URL on a port that was free a moment ago."""
    return f"tcp://127.0.0.1:{free_port()}"


@pytest.fixture
def ipc_dir() -> Iterator[Path]:
    """A short directory for ipc:// sockets (Unix socket paths are limited to 107 bytes,
    and pytest's tmp_path can be longer)."""
    path = Path(tempfile.mkdtemp(prefix="eb-ipc-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def mqtt_client(gw: RunningGateway, client_id: str) -> Iterator[PahoClient]:
    """A connected MQTT 5 paho client."""
    host, port = gw.address()
    client = PahoClient(host, port, 5, client_id)
    client.connect()
    try:
        yield client
    finally:
        client.close()


def state_of(gw: RunningGateway, name: str) -> dict[str, Any]:
    status = gw.call(lambda: gw.gateway.adapters.status(name))
    assert status is not None
    return status


def wait_state(gw: RunningGateway, name: str, state: str, seconds: float = 10) -> dict[str, Any]:
    return wait_for(lambda: state_of(gw, name), lambda s: s["state"] == state, seconds)


def counters(gw: RunningGateway, name: str) -> dict[str, int]:
    stats: dict[str, int] = state_of(gw, name)["component_stats"]
    return stats


def wait_counter(
    gw: RunningGateway, name: str, counter: str, at_least: int, seconds: float = 10
) -> dict[str, int]:
    return wait_for(lambda: counters(gw, name), lambda c: c[counter] >= at_least, seconds)


def answer_upper_case(responder: PahoClient, topic: str) -> None:
    """Makes ``responder`` an MQTT 5 responder for requests on ``topic``: it publishes
    the payload in upper case to the Response Topic with the Correlation Data."""

    def answer(client: object, userdata: object, message: Any) -> None:
        if message.topic != topic:
            return
        props = publish_props(CorrelationData=message.properties.CorrelationData)
        responder.client.publish(
            message.properties.ResponseTopic, message.payload.upper(), 1, properties=props
        )

    responder.client.on_message = answer


def check_peers_come_back(tmp_path: Path, ipc_dir: Path, kind: str) -> None:
    """A ``kind`` (``zmq``, ``nng``) adapter whose two mappings connect to their peers:
    both peers go away (the adapter says so, naming both mappings) and come back
    twice; each time the adapter reconnects by itself and messages flow both ways."""
    out_url, in_url = f"ipc://{ipc_dir}/out", f"ipc://{ipc_dir}/in"
    sub, push, peer = ("sub", "push", zmq_peer) if kind == "zmq" else ("sub0", "push0", nng_peer)
    config = f"""
adapters:
  - type: {kind}
    name: again
    {kind}_to_mqtt:
      - {{socket: {sub}, connect: "{in_url}", to_mqtt: "back/{{{kind}.topic}}", qos: 0}}
    mqtt_to_{kind}:
      - {{from_mqtt: "cmd/#", socket: {push}, connect: "{out_url}"}}
"""
    with running_gateway(tmp_path, config) as gw, mqtt_client(gw, "op") as op:
        op.subscribe("back/#", 0)
        for round_ in range(2):
            with (
                peer("pull", "--bind", out_url, "--count", "1", "--print") as pull,
                peer("pub", "--bind", in_url, "--topic", f"round{round_}") as pub,
            ):
                pull.expect("ready")
                pub.expect("ready")
                wait_state(gw, "again", "running")
                op.publish(f"cmd/{round_}", b"x", qos=1)
                got = pull.expect("message", timeout=unit(10))
                # ZeroMQ: [topic, payload]; NNG: NanoMQ's "topic/payload"
                assert got == ([f"cmd/{round_}", "x"] if kind == "zmq" else f"cmd/{round_}/x")
                message = op.expect_message(unit(10))
                while message.topic != f"back/round{round_}":  # the last round's stragglers
                    message = op.expect_message(unit(10))
                pub.kill()
            wait_for(
                lambda: state_of(gw, "again"),
                lambda s: (
                    s["state"] == "degraded"
                    and f"mqtt_to_{kind}[0]" in s["reason"]
                    and f"{kind}_to_mqtt[0]" in s["reason"]
                ),
            )
        assert counters(gw, "again")[f"mqtt_to_{kind}[0].sent"] == 2
