"""What the QoS 2 bridge tests share: a QoS 2 stream publisher on a raw socket, and the
end of a count at the remote's subscriber without a timed wait.

``Qos2Publisher`` publishes ``count`` numbered QoS 2 messages (payload ``b"<n>"``) with
a window of unfinished ones (PUBLISH, PUBREC, PUBREL, PUBCOMP; 32, the gateway's
``mqtt.receive_maximum``, by default), paho being too slow for a stream.

``drained(collector, remote_port, topic)`` publishes a last message straight to the
remote once the bridge has nothing left, and waits for it at the subscriber: mosquitto
delivers to one subscriber in order, so everything the bridge delivered before is
there, and so is any duplicate.
"""

from __future__ import annotations

import threading
import time

from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.bridge.support import Collector, paho_client, wait_until

__all__ = ["END", "Qos2Publisher", "drained", "numbers"]

END = b"end"


class Qos2Publisher(threading.Thread):
    """See the module docstring; ``completed`` holds the numbers whose PUBCOMP came."""

    def __init__(self, port: int, topic: str, count: int, *, window: int = 32) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.topic = topic
        self.count = count
        self.window = window
        self.completed: list[int] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            client = RawClient("127.0.0.1", self.port, protocol_level=4)
            client.send(mb.gen_connect(f"pub2-{self.topic}", keepalive=60))
            assert client.recv_packet().reason_code == 0
            inflight: dict[int, int] = {}
            numbers = iter(range(1, self.count + 1))
            mid = 0
            while len(self.completed) < self.count:
                frames = []
                while len(inflight) < self.window and (number := next(numbers, None)) is not None:
                    mid = mid % 65535 + 1
                    inflight[mid] = number
                    frames.append(mb.gen_publish(self.topic, str(number), qos=2, mid=mid))
                if frames:
                    client.send(b"".join(frames))
                packet = client.recv_packet(unit(30))
                if packet.type == mb.PacketType.PUBREC:
                    client.send(mb.gen_pubrel(packet.packet_id))
                elif packet.type == mb.PacketType.PUBCOMP and packet.packet_id in inflight:
                    self.completed.append(inflight.pop(packet.packet_id))
            client.send(mb.gen_disconnect())
            client.close()
        except BaseException as exc:  # reported by done()
            self.error = exc

    def done(self, seconds: float = 60) -> list[int]:
        self.join(unit(seconds))
        assert not self.is_alive(), "the publisher did not finish"
        if self.error is not None:
            raise self.error
        return self.completed


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
