"""End-to-end latency at a steady rate: one publisher process, one subscriber process.

The publisher sends QoS 0 PUBLISH frames on a fixed schedule (message i is due at
start + i / rate; it sleeps until then and never bursts to catch up beyond one
message). The 16-byte payload carries the sequence number and the send time from
``time.perf_counter_ns()``, which is CLOCK_MONOTONIC on Linux and so comparable
across processes. The subscriber reads with a blocking ``recv`` (no coalescing) and
takes the receive time once per read. Messages sent during the warm-up are discarded.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.client import mqtt_connect, mqtt_subscribe
from bench.errors import LoadError
from bench.frames import PUBLISH, StreamError, encode_disconnect, encode_publish, split_packets
from bench.lifetime import die_with_parent
from bench.procstat import cpu_seconds, machine_busy_seconds

__all__ = ["LatencyResult", "percentile", "run_latency"]

_TOPIC = "bench/latency"
_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LatencyResult:
    p50_ms: float
    p99_ms: float
    max_ms: float
    received: int
    expected: int
    late_sends: int
    broker_cpu: float
    generator_cpu: float
    other_cpu: float

    @property
    def lost(self) -> int:
        return self.expected - self.received


def percentile(sorted_values: list[int], fraction: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(1, math.ceil(fraction * len(sorted_values) - 1e-9))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def _publisher(
    port: int, level: int, payload_size: int, rate: float, count: int, go: Any, out: Any
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    try:
        sock = mqtt_connect(port, "bench-latency-pub", level)
    except (OSError, StreamError) as exc:
        out.put(("error", f"publisher: {exc}"))
        return
    with sock:
        frame = bytearray(encode_publish(_TOPIC, bytes(payload_size), 0, level=level))
        stamp_at = len(frame) - payload_size
        out.put(("ready", ""))
        go.wait()
        period_ns = int(1e9 / rate)
        late = 0
        start = time.perf_counter_ns()
        for seq in range(count):
            due = start + seq * period_ns
            now = time.perf_counter_ns()
            if now < due:
                time.sleep((due - now) / 1e9)
            elif now - due > period_ns:
                late += 1
            frame[stamp_at : stamp_at + 8] = seq.to_bytes(8, "big")
            frame[stamp_at + 8 : stamp_at + 16] = time.perf_counter_ns().to_bytes(8, "big")
            sock.sendall(frame)
        sock.sendall(encode_disconnect())
        out.put(("late", str(late)))


def _subscriber(port: int, level: int, payload_size: int, count: int, skip: int, out: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    try:
        sock = mqtt_connect(port, "bench-latency-sub", level)
        mqtt_subscribe(sock, _TOPIC, 0, level)
    except (OSError, StreamError) as exc:
        out.put(("error", f"subscriber: {exc}"))
        return
    samples: list[int] = []
    seen = 0
    with sock:
        sock.settimeout(5.0)
        out.put(("ready", ""))
        pending = b""
        try:
            while seen < count:
                chunk = sock.recv(65536)
                now = time.perf_counter_ns()
                if not chunk:
                    break
                packets, pending = split_packets(pending + chunk)
                for first, body in packets:
                    if first >> 4 != PUBLISH:
                        continue
                    payload = body[len(body) - payload_size :]
                    seen += 1
                    if int.from_bytes(payload[:8], "big") >= skip:
                        samples.append(now - int.from_bytes(payload[8:16], "big"))
        except TimeoutError:
            pass  # messages lost: report what arrived
        sock.sendall(encode_disconnect())
    out.put(("samples", samples))


def run_latency(
    port: int,
    broker_pid: int,
    check_broker: Callable[[], None],
    rate: float,
    warmup_s: float,
    duration_s: float,
    level: int = 4,
    payload_size: int = 16,
) -> LatencyResult:
    """Publish at ``rate`` msg/s for warm-up + duration; latency of the post-warm-up part."""
    if payload_size < 16:
        raise ValueError("the latency payload carries 16 bytes: sequence and send time")
    ctx = multiprocessing.get_context("fork")
    skip = int(warmup_s * rate)
    count = skip + int(duration_s * rate)
    sub_q: Any = ctx.Queue()
    pub_q: Any = ctx.Queue()
    go = ctx.Event()
    sub = ctx.Process(
        target=_subscriber, args=(port, level, payload_size, count, skip, sub_q), daemon=True
    )
    pub = ctx.Process(
        target=_publisher, args=(port, level, payload_size, rate, count, go, pub_q), daemon=True
    )
    started = time.perf_counter()
    busy0 = machine_busy_seconds()
    broker0 = cpu_seconds(broker_pid)
    own0 = _own_cpu()
    try:
        sub.start()
        _expect(sub_q, "ready", check_broker)
        pub.start()
        _expect(pub_q, "ready", check_broker)
        go.set()
        late = int(_expect(pub_q, "late", check_broker, warmup_s + duration_s + _TIMEOUT_S))
        samples = sorted(_expect(sub_q, "samples", check_broker, _TIMEOUT_S))
    finally:
        go.set()
        for proc in (pub, sub):
            proc.join(5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
    elapsed = time.perf_counter() - started
    broker_cpu = cpu_seconds(broker_pid) - broker0
    generator_cpu = _own_cpu() - own0
    other_cpu = max(0.0, machine_busy_seconds() - busy0 - broker_cpu - generator_cpu)
    if not samples:
        raise LoadError("latency probe received no messages")
    return LatencyResult(
        p50_ms=percentile(samples, 0.50) / 1e6,
        p99_ms=percentile(samples, 0.99) / 1e6,
        max_ms=samples[-1] / 1e6,
        received=len(samples),
        expected=count - skip,
        late_sends=late,
        broker_cpu=broker_cpu / elapsed,
        generator_cpu=generator_cpu / elapsed,
        other_cpu=other_cpu / elapsed,
    )


def _own_cpu() -> float:
    """CPU time of this process and of its reaped children (the probe's processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _expect(
    q: Any, kind: str, check_broker: Callable[[], None], timeout_s: float = _TIMEOUT_S
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got_kind, value = q.get(timeout=0.25)
        except queue.Empty:
            check_broker()
            if time.monotonic() > deadline:
                raise LoadError(f"latency probe: no {kind!r} after {timeout_s:.0f}s") from None
            continue
        if got_kind == "error":
            raise LoadError(f"latency probe {value}")
        if got_kind == kind:
            return value
