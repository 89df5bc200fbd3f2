"""The throughput load generator: publisher and subscriber processes on raw sockets.

One ``FlowSpec`` describes a run: publisher connections (each on its own topic),
subscriber connections (all on one filter that matches every publisher's topic, so
every subscriber receives every message), and how the connections are spread over
processes. ``run_flow`` forks the processes, lets them connect and subscribe, starts
them together, measures over a window after a warm-up, stops the publishers, lets the
subscribers drain, and returns a ``FlowResult``.

Leanness, because the generator shares two cores with the broker:

- frames are encoded once: a QoS 0 publisher sends ``batch`` copies of one frame with
  one ``sendall``; a QoS 1 publisher slices its window out of a pre-encoded run of
  65535 frames carrying Packet Identifiers 1..65535;
- subscribers ``recv_into`` a 1 MiB buffer and count packets by their fixed headers
  (``bench.frames.PacketCounter``); a QoS 0 subscriber that got little data sleeps
  ``coalesce_s`` so that the next read is a big one.

Flow control: QoS 0 publishers keep at most ``e2e_window`` messages published but not
yet received by the slowest subscriber (shared counters in shared memory), so neither
broker is flooded into unbounded buffering or forced to drop; the figure is what the
broker delivers end to end. If nothing arrives for ``stall_s`` while the window is
full, the publisher counts the missing messages as dropped and goes on. QoS 1
publishers keep at most ``window`` unacknowledged PUBLISH per connection, and the same
end-to-end bound.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import selectors
import signal
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.sharedctypes import RawArray, RawValue
from typing import Any

from bench.client import mqtt_connect, mqtt_subscribe
from bench.errors import LoadError
from bench.frames import (
    PUBACK,
    PUBLISH,
    PacketCounter,
    StreamError,
    encode_disconnect,
    encode_publish,
    encode_publish_run,
)
from bench.lifetime import die_with_parent
from bench.procstat import cpu_seconds, machine_busy_seconds

__all__ = ["FlowResult", "FlowSpec", "run_flow", "spread"]

_RECV_BUFFER = 1 << 20
_PACKET_IDS = 0xFFFF
_READY_TIMEOUT_S = 30.0
_DRAIN_TIMEOUT_S = 3.0
_JOIN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class FlowSpec:
    """One throughput run. Every subscriber receives every published message."""

    qos: int
    publish_topics: tuple[str, ...]
    subscribe_filter: str
    subscribers: int
    publisher_procs: int
    subscriber_procs: int
    level: int = 4
    payload_size: int = 16
    batch: int = 512
    window: int = 100
    e2e_window: int = 32_768
    coalesce_s: float = 0.0005
    coalesce_bytes: int = 32_768
    stall_s: float = 0.5

    @property
    def publishers(self) -> int:
        return len(self.publish_topics)


@dataclass(frozen=True)
class FlowResult:
    """Counts over the measurement window, and totals over the whole run."""

    duration_s: float
    published: int
    acked: int
    delivered: tuple[int, ...]
    broker_cpu: float
    generator_cpu: float
    other_cpu: float
    sent_total: int
    delivered_total: int
    subscribers: int

    @property
    def publish_rate(self) -> float:
        return self.published / self.duration_s

    @property
    def ack_rate(self) -> float:
        return self.acked / self.duration_s

    @property
    def delivery_rate(self) -> float:
        """Deliveries per second summed over all subscribers."""
        return sum(self.delivered) / self.duration_s

    @property
    def per_subscriber_rate(self) -> float:
        return self.delivery_rate / self.subscribers

    @property
    def delivery_ratio(self) -> float:
        """Delivered / expected over the whole run (1.0: nothing was dropped)."""
        expected = self.sent_total * self.subscribers
        return self.delivered_total / expected if expected else 0.0


def spread(count: int, procs: int) -> list[list[int]]:
    """Connection indices 0..count-1 dealt round-robin over at most ``procs`` processes."""
    procs = max(1, min(procs, count))
    return [list(range(first, count, procs)) for first in range(procs)]


class _Shared:
    """Counters and flags in shared memory; each counter slot has one writer."""

    def __init__(self, ctx: Any, spec: FlowSpec) -> None:
        self.sent = RawArray("Q", spec.publishers)
        self.acked = RawArray("Q", spec.publishers)
        self.received = RawArray("Q", spec.subscribers)
        self.pub_stop = RawValue("B", 0)
        self.sub_stop = RawValue("B", 0)
        self.go = ctx.Event()
        self.status = ctx.Queue()


def _worker(
    role: str,
    body: Callable[[FlowSpec, _Shared, list[int], list[socket.socket]], None],
    spec: FlowSpec,
    shared: _Shared,
    indices: list[int],
    port: int,
) -> None:
    """Process entry: connect (and subscribe), report ready, wait for go, run ``body``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    name = f"{role}{indices}"
    socks: list[socket.socket] = []
    try:
        for i in indices:
            sock = mqtt_connect(port, f"bench-{role}-{i}", spec.level)
            socks.append(sock)
            if role == "sub":
                mqtt_subscribe(sock, spec.subscribe_filter, spec.qos, spec.level)
            sock.settimeout(None)
        shared.status.put(("ready", name, ""))
        shared.go.wait()
        body(spec, shared, indices, socks)
        for sock in socks:
            _close_gracefully(sock)
    except (OSError, StreamError, ValueError) as exc:
        shared.status.put(("error", name, f"{type(exc).__name__}: {exc}"))
    finally:
        for sock in socks:
            sock.close()


def _close_gracefully(sock: socket.socket) -> None:
    """DISCONNECT, then read to EOF: closing with unread input would reset the
    connection and make the broker discard what it has not read yet."""
    with contextlib.suppress(OSError):
        sock.sendall(encode_disconnect())
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(1.0)
        while sock.recv(_RECV_BUFFER):
            pass


def _wait_window(spec: FlowSpec, shared: _Shared, slack: int) -> int:
    """Block while the end-to-end window is full; return the updated drop allowance."""
    sent, received = shared.sent, shared.received
    last = min(received)
    stalled_since = time.monotonic()
    while not shared.pub_stop.value:
        time.sleep(0.0005)
        low = min(received)
        in_flight = sum(sent) - low - slack
        if in_flight < spec.e2e_window:
            break
        now = time.monotonic()
        if low != last:
            last, stalled_since = low, now
        elif now - stalled_since > spec.stall_s:
            return slack + in_flight  # the broker dropped these: stop waiting for them
    return slack


def _publish_qos0(
    spec: FlowSpec, shared: _Shared, indices: list[int], socks: list[socket.socket]
) -> None:
    payload = bytes(spec.payload_size)
    batches = [
        encode_publish(spec.publish_topics[i], payload, 0, level=spec.level) * spec.batch
        for i in indices
    ]
    pairs = list(zip(indices, socks, batches, strict=True))
    sent, received, stop = shared.sent, shared.received, shared.pub_stop
    batch, limit = spec.batch, spec.e2e_window
    slack = 0
    while not stop.value:
        for index, sock, frames in pairs:
            if sum(sent) - min(received) - slack >= limit:
                slack = _wait_window(spec, shared, slack)
            sock.sendall(frames)
            sent[index] += batch


def _publish_qos1(
    spec: FlowSpec, shared: _Shared, indices: list[int], socks: list[socket.socket]
) -> None:
    payload = bytes(spec.payload_size)
    runs = [
        memoryview(
            encode_publish_run(spec.publish_topics[i], payload, 1, 1, _PACKET_IDS, spec.level)
        )
        for i in indices
    ]
    size = len(runs[0]) // _PACKET_IDS
    selector = selectors.DefaultSelector()
    for k, sock in enumerate(socks):
        selector.register(sock, selectors.EVENT_READ, k)
    counters = [PacketCounter(PUBACK) for _ in socks]
    next_id = [0] * len(socks)
    outstanding = [0] * len(socks)
    buffer = memoryview(bytearray(_RECV_BUFFER))
    sent, acked, received, stop = shared.sent, shared.acked, shared.received, shared.pub_stop
    window, limit = spec.window, spec.e2e_window
    slack = 0
    while not stop.value:
        blocked = False
        for k, sock in enumerate(socks):
            free = window - outstanding[k]
            if free <= 0:
                continue
            if sum(sent) - min(received) - slack >= limit:
                blocked = True
                break
            first = next_id[k]
            n = min(free, _PACKET_IDS - first)
            sock.sendall(runs[k][first * size : (first + n) * size])
            next_id[k] = (first + n) % _PACKET_IDS
            outstanding[k] += n
            sent[indices[k]] += n
        if blocked:
            slack = _wait_window(spec, shared, slack)
        _read_acks(selector, socks, counters, buffer, 0.1, outstanding, acked, indices)
    # Collect the PUBACKs still owed, so that the totals agree and that no connection is
    # closed with unread bytes (which would reset it and lose what the broker holds).
    deadline = time.monotonic() + _DRAIN_TIMEOUT_S
    while any(outstanding) and time.monotonic() < deadline:
        _read_acks(selector, socks, counters, buffer, 0.05, outstanding, acked, indices)


def _read_acks(
    selector: selectors.BaseSelector,
    socks: list[socket.socket],
    counters: list[PacketCounter],
    buffer: memoryview,
    timeout_s: float,
    outstanding: list[int],
    acked: Any,
    indices: list[int],
) -> None:
    for key, _ in selector.select(timeout_s):
        k = key.data
        n = socks[k].recv_into(buffer)
        if not n:
            raise ConnectionError("broker closed a publisher connection")
        got = counters[k].feed(buffer[:n])
        outstanding[k] -= got
        acked[indices[k]] += got


def _subscribe(
    spec: FlowSpec, shared: _Shared, indices: list[int], socks: list[socket.socket]
) -> None:
    if len(socks) == 1:
        _subscribe_one(spec, shared, indices[0], socks[0])
        return
    selector = selectors.DefaultSelector()
    for k, sock in enumerate(socks):
        selector.register(sock, selectors.EVENT_READ, k)
    ack = spec.qos > 0
    counters = [PacketCounter(PUBLISH, ack_publishes=ack) for _ in socks]
    buffer = memoryview(bytearray(_RECV_BUFFER))
    received, stop = shared.received, shared.sub_stop
    coalesce_s = 0.0 if ack else spec.coalesce_s
    coalesce_bytes = spec.coalesce_bytes
    while not stop.value:
        got = 0
        for key, _ in selector.select(0.1):
            k = key.data
            sock = socks[k]
            n = sock.recv_into(buffer)
            if not n:
                raise ConnectionError("broker closed a subscriber connection")
            got += n
            counter = counters[k]
            count = counter.feed(buffer[:n])
            if ack:
                acks = counter.take_acks()
                if acks:
                    sock.sendall(acks)
            if count:
                received[indices[k]] += count
        if got and got < coalesce_bytes and coalesce_s:
            time.sleep(coalesce_s)


def _subscribe_one(spec: FlowSpec, shared: _Shared, index: int, sock: socket.socket) -> None:
    """``_subscribe`` for a process with one connection: no selector, one syscall per read.

    The socket stays in blocking mode with a kernel receive timeout (SO_RCVTIMEO), so a
    read returns EAGAIN after 100 ms of silence and the loop can look at the stop flag.
    """
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 100_000))
    ack = spec.qos > 0
    counter = PacketCounter(PUBLISH, ack_publishes=ack)
    buffer = memoryview(bytearray(_RECV_BUFFER))
    received, stop = shared.received, shared.sub_stop
    coalesce_s = 0.0 if ack else spec.coalesce_s
    coalesce_bytes = spec.coalesce_bytes
    while not stop.value:
        try:
            n = sock.recv_into(buffer)
        except BlockingIOError:
            continue
        if not n:
            raise ConnectionError("broker closed a subscriber connection")
        count = counter.feed(buffer[:n])
        if ack:
            acks = counter.take_acks()
            if acks:
                sock.sendall(acks)
        if count:
            received[index] += count
        if n < coalesce_bytes and coalesce_s:
            time.sleep(coalesce_s)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 0))


class _Run:
    """The processes of one run and the watching done by the parent."""

    def __init__(self, spec: FlowSpec, port: int, check_broker: Callable[[], None]) -> None:
        self.ctx = multiprocessing.get_context("fork")
        self.spec = spec
        self.port = port
        self.check_broker = check_broker
        self.shared = _Shared(self.ctx, spec)
        self.procs: list[Any] = []

    def start(
        self, role: str, body: Any, groups: list[list[int]], port: int | None = None
    ) -> None:
        started = []
        for indices in groups:
            proc = self.ctx.Process(
                target=_worker,
                args=(role, body, self.spec, self.shared, indices, port or self.port),
                name=f"bench-{role}",
                daemon=True,
            )
            proc.start()
            started.append(proc)
        self.procs += started
        deadline = time.monotonic() + _READY_TIMEOUT_S
        ready = 0
        while ready < len(started):
            try:
                kind, name, message = self.shared.status.get(timeout=0.25)
            except queue.Empty:
                self.check_broker()
                if time.monotonic() > deadline:
                    raise LoadError(
                        f"{role} processes not ready after {_READY_TIMEOUT_S}s"
                    ) from None
                continue
            if kind == "error":
                raise LoadError(f"{name}: {message}")
            ready += 1

    def watch(self, seconds: float) -> None:
        """Sleep, but fail fast if a worker reports an error or the broker dies."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                _, name, message = self.shared.status.get(timeout=min(left, 0.25))
            except queue.Empty:
                self.check_broker()
                continue
            raise LoadError(f"{name}: {message}")

    def cpu(self) -> float:
        total = 0.0
        for proc in self.procs:
            with contextlib.suppress(OSError):
                total += cpu_seconds(proc.pid)
        return total

    def stop(self) -> None:
        self.shared.pub_stop.value = 1
        self.shared.sub_stop.value = 1
        self.shared.go.set()
        for proc in self.procs:
            proc.join(_JOIN_TIMEOUT_S)
            if proc.is_alive():
                proc.kill()
                proc.join()


def run_flow(
    spec: FlowSpec,
    port: int,
    broker_pid: int,
    check_broker: Callable[[], None],
    warmup_s: float,
    duration_s: float,
    subscriber_port: int | None = None,
) -> FlowResult:
    """Run one throughput measurement against the broker on ``port``; the subscribers
    connect to ``subscriber_port`` when given (a bridge's remote broker)."""
    run = _Run(spec, port, check_broker)
    shared = run.shared
    try:
        groups = spread(spec.subscribers, spec.subscriber_procs)
        run.start("sub", _subscribe, groups, subscriber_port)
        publish = _publish_qos1 if spec.qos else _publish_qos0
        run.start("pub", publish, spread(spec.publishers, spec.publisher_procs))
        shared.go.set()
        run.watch(warmup_s)

        def sample() -> tuple[float, int, int, list[int], float, float, float]:
            return (
                time.perf_counter(),
                sum(shared.sent),
                sum(shared.acked),
                list(shared.received),
                cpu_seconds(broker_pid),
                run.cpu() + cpu_seconds(os.getpid()),
                machine_busy_seconds(),
            )

        t0, sent0, acked0, recv0, bcpu0, gcpu0, busy0 = sample()
        run.watch(duration_s)
        t1, sent1, acked1, recv1, bcpu1, gcpu1, busy1 = sample()
        shared.pub_stop.value = 1
        _drain(run, spec)
        sent_total = sum(shared.sent)
        delivered_total = sum(shared.received)
    finally:
        run.stop()
    elapsed = t1 - t0
    return FlowResult(
        duration_s=elapsed,
        published=sent1 - sent0,
        acked=acked1 - acked0,
        delivered=tuple(b - a for a, b in zip(recv0, recv1, strict=True)),
        broker_cpu=(bcpu1 - bcpu0) / elapsed,
        generator_cpu=(gcpu1 - gcpu0) / elapsed,
        other_cpu=max(0.0, (busy1 - busy0) - (bcpu1 - bcpu0) - (gcpu1 - gcpu0)) / elapsed,
        sent_total=sent_total,
        delivered_total=delivered_total,
        subscribers=spec.subscribers,
    )


def _drain(run: _Run, spec: FlowSpec) -> None:
    """After the publishers stop, wait until the subscribers have everything or stall."""
    shared = run.shared
    time.sleep(0.05)  # let publishers leave their last sendall
    deadline = time.monotonic() + _DRAIN_TIMEOUT_S
    last = -1
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        expected = sum(shared.sent) * spec.subscribers
        got = sum(shared.received)
        if got >= expected:
            return
        now = time.monotonic()
        if got != last:
            last, quiet_since = got, now
        elif now - quiet_since > 0.3:
            return
        run.watch(0.02)
