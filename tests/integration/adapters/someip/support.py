"""What the SOME/IP adapter tests share: a gateway with a ``someip`` adapter whose own
daemon joins the test's discovery network, paho clients, waits."""

from __future__ import annotations

import contextlib
import json
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from paho.mqtt.client import MQTTMessage

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.someip import SdNet, SomeipPeer
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient, wait_until

__all__ = [
    "adapter_status",
    "adapter_yaml",
    "first_event",
    "first_message",
    "gateway",
    "mqtt",
    "status_of",
    "wait_state",
]


@contextlib.contextmanager
def gateway(
    tmp_path: Path,
    net: SdNet,
    body: str,
    *,
    interface: str = "127.0.0.1",
    name: str = "car",
    socket_path: str | None = None,
) -> Iterator[RunningGateway]:
    """A gateway running one ``someip`` adapter ``name`` (``body``: its YAML keys), with
    its own daemon, or connected to the daemon at ``socket_path``."""
    with running_gateway(tmp_path, adapter_yaml(net, body, interface, name, socket_path)) as gw:
        yield gw


def adapter_yaml(
    net: SdNet,
    body: str,
    interface: str = "127.0.0.1",
    name: str = "car",
    socket_path: str | None = None,
) -> str:
    daemon = f"\n      socket_path: {socket_path}" if socket_path else ""
    return f"""
adapters:
  - type: someip
    name: {name}
    restart_backoff: 0.2s
    daemon:
      interface: {interface}
      sd_address: {net.sd_address}
      sd_port: {net.sd_port}{daemon}
{textwrap.indent(textwrap.dedent(body).strip(), "    ")}
"""


def adapter_status(gw: RunningGateway, name: str = "car") -> dict[str, Any]:
    status = gw.call(lambda: gw.gateway.adapters.status(name))
    assert status is not None
    return status


def wait_state(
    gw: RunningGateway, state: str, name: str = "car", timeout: float | None = None
) -> dict[str, Any]:
    return wait_until(
        lambda: (s := adapter_status(gw, name))["state"] == state and s,
        unit(15) if timeout is None else timeout,
        f"adapter state {state}",
    )


@contextlib.contextmanager
def mqtt(gw: RunningGateway, client_id: str, *topics: str) -> Iterator[PahoClient]:
    """A connected MQTT 5 paho client subscribed to ``topics`` (QoS 1)."""
    host, port = gw.address()
    client = PahoClient(host, port, 5, client_id)
    client.connect()
    for topic in topics:
        client.subscribe(topic, 1)
    try:
        yield client
    finally:
        client.close()


def status_of(
    client: PahoClient, topic: str, state: str, timeout: float | None = None
) -> dict[str, Any]:
    """Waits for the status message on ``topic`` saying ``state``."""
    deadline = time.monotonic() + (unit(15) if timeout is None else timeout)
    while True:
        message = client.expect_message(max(deadline - time.monotonic(), 0.01))
        if message.topic == topic:
            body: dict[str, Any] = json.loads(message.payload)
            if body["state"] == state:
                return body


def first_message(
    client: PahoClient, send: Callable[[], None], topic: str, timeout: float | None = None
) -> MQTTMessage:
    """Calls ``send`` every 0.2 s until a message on ``topic`` arrives (an eventgroup
    subscription is acknowledged some time after the offer is seen); the first one."""
    deadline = time.monotonic() + (unit(15) if timeout is None else timeout)
    while time.monotonic() < deadline:
        send()
        for message in client.drain(0.2):
            if message.topic == topic:
                client.drain(0.3)  # the other sends that got through
                return message
    raise AssertionError(f"nothing on {topic}")


def first_event(
    ecu: SomeipPeer, send: Callable[[], object], event_id: int, timeout: float | None = None
) -> dict[str, Any]:
    """Calls ``send`` every 0.3 s until the someipy client app ``ecu`` reports event
    ``event_id`` (its subscription is acknowledged some time after the offer); that
    report."""
    deadline = time.monotonic() + (unit(15) if timeout is None else timeout)
    while time.monotonic() < deadline:
        send()
        try:
            return ecu.wait("event", lambda e: e["event"] == event_id, timeout=0.3)
        except TimeoutError:
            continue
    raise AssertionError(f"event 0x{event_id:04x} never arrived")
