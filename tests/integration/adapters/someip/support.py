"""What the SOME/IP adapter tests share: a gateway with a ``someip`` adapter whose own
daemon joins the test's discovery network, paho clients, waits."""

from __future__ import annotations

import contextlib
import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.someip import SdNet
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient, wait_until

__all__ = ["adapter_status", "gateway", "mqtt", "status_of", "wait_state"]


@contextlib.contextmanager
def gateway(
    tmp_path: Path, net: SdNet, body: str, *, interface: str = "127.0.0.1", name: str = "car"
) -> Iterator[RunningGateway]:
    """A gateway running one ``someip`` adapter ``name`` (``body``: its YAML keys)."""
    config = f"""
adapters:
  - type: someip
    name: {name}
    restart_backoff: 0.2s
    daemon:
      interface: {interface}
      sd_address: {net.sd_address}
      sd_port: {net.sd_port}
{textwrap.indent(textwrap.dedent(body).strip(), "    ")}
"""
    with running_gateway(tmp_path, config) as gw:
        yield gw


def adapter_status(gw: RunningGateway, name: str = "car") -> dict[str, Any]:
    status = gw.call(lambda: gw.gateway.adapters.status(name))
    assert status is not None
    return status


def wait_state(gw: RunningGateway, state: str, name: str = "car", timeout: float | None = None) -> dict[str, Any]:
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


def status_of(client: PahoClient, topic: str, state: str, timeout: float | None = None) -> dict[str, Any]:
    """Waits for the status message on ``topic`` saying ``state``."""
    deadline = time.monotonic() + (unit(15) if timeout is None else timeout)
    while True:
        message = client.expect_message(max(deadline - time.monotonic(), 0.01))
        if message.topic == topic:
            body: dict[str, Any] = json.loads(message.payload)
            if body["state"] == state:
                return body
