"""What the QoS 2 bridge tests share: the end of a count at the remote's subscriber
without a timed wait (their QoS 2 stream is ``support.StreamPublisher(..., qos=2)``).

``drained(collector, remote_port, topic)`` publishes a last message straight to the
remote once the bridge has nothing left, and waits for it at the subscriber: mosquitto
delivers to one subscriber in order, so everything the bridge delivered before is
there, and so is any duplicate.
"""

from __future__ import annotations

import time

from tests.helpers.timeouts import unit
from tests.integration.bridge.support import Collector, paho_client, wait_until

__all__ = ["END", "QOS2_WINDOW", "drained", "numbers"]

#: The QoS 2 publishers' window: the gateway's ``mqtt.receive_maximum``.
QOS2_WINDOW = 32

END = b"end"


def numbers(collector: Collector) -> list[int]:
    """The numbered payloads the collector received, in order (the end mark left out)."""
    return [int(payload) for payload in collector.payloads() if payload != END]


def drained(collector: Collector, remote_port: int, topic: str, seconds: float = 60) -> None:
    """Publishes ``END`` to ``topic`` at the remote (QoS 2) and waits until the collector
    has it: what the remote took before is at the collector by then."""
    client = paho_client(f"end-{time.monotonic_ns()}")
    client.connect("127.0.0.1", remote_port)
    client.loop_start()
    try:
        client.publish(topic, END, qos=2).wait_for_publish(unit(10))
        wait_until(collector.payloads, lambda got: END in got, seconds=seconds)
    finally:
        client.disconnect()
        client.loop_stop()
