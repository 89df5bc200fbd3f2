"""A native peer streaming numbered messages into a socket adapter's unchanged mapping
while reloads change another of its mappings: what the tests of the ZeroMQ and NNG
adapters' restart hand-over share. A paho subscriber counts what arrives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt

from tests.helpers.timeouts import unit
from tests.helpers.under_load import api, component, wait_running_again
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess

__all__ = ["lost_across_reloads"]


def lost_across_reloads(
    gw: EdgebusProcess,
    api_port: int,
    name: str,
    send: Callable[[int], None],
    *,
    count: int,
    reloads: int,
    subscribe: str,
    edit: tuple[str, str],
) -> list[int]:
    """Sends ``count`` numbered messages with ``send(n)`` from a thread (a steady stream:
    a short pause every 20 messages, so that every reload meets some) while ``reloads``
    reloads (``POST /reload``) alternately replace ``edit[0]`` with ``edit[1]`` in the
    gateway's configuration file and put it back, each waiting for the adapter ``name``
    to run again. Returns the numbers a QoS 1 subscriber to ``subscribe`` did not get
    (the payloads are the numbers), once the last has arrived or the wait ran out."""
    config = gw.config.read_text()
    assert edit[0] in config, edit
    received: set[int] = set()
    subscribed = threading.Event()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="counter")
    sub.on_subscribe = lambda *_: subscribed.set()
    sub.on_message = lambda _c, _u, msg: received.add(int(msg.payload))
    sub.connect(LOOPBACK, gw.port)
    sub.subscribe(subscribe, 1)
    sub.loop_start()
    sent = 0
    stop = threading.Event()

    def stream() -> None:
        nonlocal sent
        for n in range(count):
            if stop.is_set():
                return
            send(n)  # the peer waits while the gateway has no socket
            sent = n + 1
            if n % 20 == 19:
                time.sleep(0.002)

    sender = threading.Thread(target=stream, daemon=True)
    try:
        assert subscribed.wait(unit(10))
        sender.start()
        for reload in range(reloads):
            deadline = time.monotonic() + unit(30)
            while sent < (reload + 1) * count // (reloads + 1):  # spread out
                assert time.monotonic() < deadline, sent
                time.sleep(0.005)
            old, new = edit if reload % 2 == 0 else (edit[1], edit[0])
            gw.config.write_text(gw.config.read_text().replace(old, new))
            since = component(api_port, name)["since"]
            assert api(api_port, "POST", "/reload")["reloaded"] == [f"adapter: restarted {name}"]
            wait_running_again(api_port, name, since)  # each restart done before the next
        sender.join(unit(60))
        assert not sender.is_alive()
        deadline = time.monotonic() + unit(30)
        while len(received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return sorted(set(range(count)) - received)
    finally:
        stop.set()
        sub.loop_stop()
        sub.disconnect()
