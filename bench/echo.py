"""A client that publishes at QoS 1 to a topic it subscribes to, one message at a time.

This is what a paho client does with ``publish(...).wait_for_publish()`` when it also
subscribes to the topic: PUBLISH, then read until its PUBACK, acknowledging the copy
that comes back on the way. Nagle's algorithm stays on, as paho leaves it. Each round
trip is timed; the broker's CPU over the measurement window is read as elsewhere.

With Nagle on, the client's next PUBLISH waits for the TCP ACK of the PUBACK it sent for
the copy: a broker that lets the kernel delay that ACK (up to 40 ms) makes each round
trip that long (docs/broker.md, "TCP").
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.client import mqtt_connect, mqtt_subscribe
from bench.errors import LoadError
from bench.frames import (
    PUBACK,
    PUBLISH,
    encode_disconnect,
    encode_puback,
    encode_publish,
    split_packets,
)
from bench.latency import percentile
from bench.procstat import cpu_seconds, machine_busy_seconds

__all__ = ["EchoResult", "run_echo"]

_TOPIC = "bench/echo"
_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class EchoResult:
    round_trips: int
    duration_s: float
    p50_ms: float
    p99_ms: float
    broker_cpu: float  # cores over the window
    generator_cpu: float  # this process's
    other_cpu: float

    @property
    def rate(self) -> float:
        return self.round_trips / self.duration_s


def _round_trip(sock: socket.socket, frame: bytes, packet_id: int, pending: bytes) -> bytes:
    """Sends ``frame`` and reads until its PUBACK, acknowledging QoS 1 deliveries; the
    bytes read past that PUBACK."""
    sock.sendall(frame)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            raise LoadError("the broker closed the echo client's connection")
        packets, pending = split_packets(pending + chunk)
        acked = False
        for first, body in packets:
            kind = first >> 4
            if kind == PUBLISH and (first >> 1) & 3:
                topic_length = int.from_bytes(body[:2], "big")
                delivered = int.from_bytes(body[2 + topic_length : 4 + topic_length], "big")
                sock.sendall(encode_puback(delivered))
            elif kind == PUBACK and int.from_bytes(body[:2], "big") == packet_id:
                acked = True
        if acked:
            return pending


def run_echo(
    port: int,
    broker_pid: int,
    check_broker: Callable[[], None],
    warmup_s: float,
    duration_s: float,
    level: int = 4,
    payload_size: int = 16,
) -> EchoResult:
    sock = mqtt_connect(port, "bench-echo", level, timeout_s=_TIMEOUT_S)
    with sock:
        mqtt_subscribe(sock, _TOPIC, 1, level)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)  # as paho leaves it
        frames = [encode_publish(_TOPIC, bytes(payload_size), 1, pid, level) for pid in (1, 2)]
        pending = b""
        deadline = time.monotonic() + warmup_s
        n = 0
        while time.monotonic() < deadline:
            pending = _round_trip(sock, frames[n & 1], 1 + (n & 1), pending)
            n += 1
        check_broker()
        samples: list[int] = []
        me = os.getpid()
        cpu0, own0, busy0 = cpu_seconds(broker_pid), cpu_seconds(me), machine_busy_seconds()
        t0 = time.monotonic()
        end = t0 + duration_s
        while True:
            start = time.perf_counter_ns()
            pending = _round_trip(sock, frames[n & 1], 1 + (n & 1), pending)
            samples.append(time.perf_counter_ns() - start)
            n += 1
            if time.monotonic() >= end:
                break
        cpu1, own1, busy1 = cpu_seconds(broker_pid), cpu_seconds(me), machine_busy_seconds()
        t1 = time.monotonic()
        check_broker()
        sock.sendall(encode_disconnect())
    samples.sort()
    elapsed = t1 - t0
    broker, generator = (cpu1 - cpu0) / elapsed, (own1 - own0) / elapsed
    return EchoResult(
        round_trips=len(samples),
        duration_s=elapsed,
        p50_ms=percentile(samples, 0.50) / 1e6,
        p99_ms=percentile(samples, 0.99) / 1e6,
        broker_cpu=broker,
        generator_cpu=generator,
        other_cpu=max(0.0, (busy1 - busy0) / elapsed - broker - generator),
    )
