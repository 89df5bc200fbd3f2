"""What the tests of a component restarted or reloaded under load share: the running
gateway's component API (with the test key) and paho clients that publish and count
numbered messages."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import paho.mqtt.client as mqtt

from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY
from tests.interop.mosquitto.tools import LOOPBACK

__all__ = ["api", "component", "load_client", "wait_running_again"]


def api(port: int, method: str, path: str) -> Any:
    """The answer of the HTTP API on ``port`` to ``method path`` (under ``/api/v1``)."""
    request = urllib.request.Request(
        f"http://{LOOPBACK}:{port}/api/v1{path}",
        method=method,
        headers={"Authorization": f"Bearer {KEY}"},
    )
    with urllib.request.urlopen(request, timeout=unit(10)) as reply:
        return json.loads(reply.read() or b"null")


def component(port: int, name: str) -> dict[str, Any]:
    """The component ``name`` as ``GET /components`` lists it."""
    for status in api(port, "GET", "/components"):
        if status["name"] == name:
            return dict(status)
    raise AssertionError(f"no component {name}")


def wait_running_again(port: int, name: str, since: float) -> dict[str, Any]:
    """Waits until ``name`` runs in a run begun after ``since`` (its state's time)."""
    deadline = time.monotonic() + unit(20)
    while True:
        status = component(port, name)
        if status["state"] == "running" and status["since"] > since:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.01)


def load_client(port: int, name: str) -> mqtt.Client:
    """A connected MQTT 3.1.1 paho client with room for 1000 messages in flight and an
    unbounded queue: a publisher never waits, a subscriber never drops."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=name, protocol=mqtt.MQTTv311)
    client.max_inflight_messages_set(1000)
    client.max_queued_messages_set(0)
    client.connect(LOOPBACK, port)
    return client
