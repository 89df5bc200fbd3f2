"""Bridge benchmark: edgebus's bridge beside mosquitto's own, to a local mosquitto.

``run()`` returns the result lines (``python -m bench`` prints them after its table);
``python -m bench.bench_bridge`` runs it alone (``--rounds``, ``--duration``,
``--backlog``).

- **Forwarding, QoS 1.** The load generator's 4 QoS 1 publishers (window 100 each)
  publish to the *bridging* broker; its bridge forwards ``bench/q1/#`` at QoS 1 to a
  *remote* mosquitto, where the load generator's QoS 1 subscriber counts deliveries.
  The bridging broker is edgebus (``bridges[0]``, its store-and-forward queue on disk,
  ``max_inflight`` 100) or mosquitto (a ``connection`` section, ``topic bench/q1/# out
  1``, its inflight limit raised to the same 100; mosquitto's bridge buffers in memory).
  Both run interleaved, ``rounds`` times each; the figure is the median of deliveries
  per second at the remote. Target: edgebus >= 1.0x mosquitto.
- **paho-mqtt as the client** (the client the issue named, measured for the record):
  paho publishes QoS 1 to a local mosquitto with ``INFLIGHT`` messages in flight, as a
  bridge's client would; acknowledged publishes per second and this process's CPU per
  message (docs/bridges.md, "The client").
- **Backlog drain.** With the remote down, ``backlog`` (100,000) QoS 1 messages are
  published to edgebus and acknowledged (queued on disk); then the remote starts, the
  bridge reconnects and drains the backlog to a subscriber whose persistent session
  waits at the remote. The figure is ``backlog`` / (last delivery - remote up), in
  messages per second. Target: at least half of edgebus's live forwarding rate above.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.brokers import RunningBroker, free_port, launch
from bench.client import mqtt_connect, mqtt_subscribe, read_packet
from bench.frames import (
    CONNACK,
    PUBACK,
    PUBLISH,
    PacketCounter,
    encode_disconnect,
    encode_publish,
    encode_publish_run,
)
from bench.loadgen import FlowResult, FlowSpec, run_flow

__all__ = ["BridgeBench", "run"]

TOPICS = tuple(f"bench/q1/{i}" for i in range(4))
INFLIGHT = 100


def _edgebus_bridge(remote_port: int) -> str:
    return (
        "bridges:\n"
        "  - name: bench\n"
        f'    server: "127.0.0.1:{remote_port}"\n'
        '    protocol_version: "3.1.1"\n'
        "    clean_start: true\n"
        f"    max_inflight: {INFLIGHT}\n"
        "    reconnect_backoff: 50ms\n"
        "    reconnect_backoff_max: 100ms\n"
        '    forwards: [{local: "bench/q1/#", qos: 1}]\n'
    )


def _mosquitto_bridge(remote_port: int) -> str:
    return (
        f"max_inflight_messages {INFLIGHT}\n"
        "connection bench\n"
        f"address 127.0.0.1:{remote_port}\n"
        "bridge_protocol_version mqttv311\n"
        "cleansession true\n"
        "topic bench/q1/# out 1\n"
    )


def _remote(persistence: Path | None = None) -> str:
    lines = "max_inflight_messages 0\n"
    if persistence is not None:
        lines += f"persistence true\npersistence_location {persistence}/\nautosave_interval 0\n"
    return lines


def _wait_bridged(bridging: RunningBroker, remote: RunningBroker, timeout_s: float = 30.0) -> None:
    """Until a QoS 0 probe published to the bridging broker reaches the remote."""
    with contextlib.closing(mqtt_connect(remote.port, "bench-probe-sub")) as sub:
        mqtt_subscribe(sub, "bench/q1/#", 0)
        sub.settimeout(0.2)
        with contextlib.closing(mqtt_connect(bridging.port, "bench-probe-pub")) as pub:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                bridging.check_alive()
                pub.sendall(encode_publish("bench/q1/probe", b"probe"))
                try:
                    first, _ = read_packet(sub)
                except TimeoutError:
                    continue
                if first >> 4 == PUBLISH:
                    pub.sendall(encode_disconnect())
                    sub.sendall(encode_disconnect())
                    return
    raise TimeoutError(f"the {bridging.kind} bridge did not connect within {timeout_s:.0f}s")


def _persistent_connect(port: int, client_id: str) -> socket.socket:
    """CONNECT with Clean Session 0: the remote keeps the session and queues for it."""
    body = b"\x00\x04MQTT\x04\x00\x00\x3c" + len(client_id).to_bytes(2, "big") + client_id.encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(bytes((0x10, len(body))) + body)
    first, ack = read_packet(sock)
    if first >> 4 != CONNACK or ack[1] != 0:
        raise ConnectionError(f"persistent CONNECT refused: {ack.hex()}")
    return sock


def _publish_all(port: int, count: int, window: int = 1000) -> float:
    """Publishes ``count`` QoS 1 messages, ``window`` unacknowledged at most; returns the
    acknowledged rate (messages per second)."""
    frames = encode_publish_run("bench/q1/0", b"0123456789abcdef", 1, 1, 65535)
    size = len(frames) // 65535
    counter = PacketCounter(PUBACK)
    buffer = bytearray(1 << 20)
    sent = acked = 0
    started = time.perf_counter()
    with contextlib.closing(mqtt_connect(port, "bench-backlog")) as sock:
        while acked < count:
            room = min(window - (sent - acked), count - sent)
            while room > 0:
                start = sent % 65535
                n = min(room, 65535 - start)
                sock.sendall(frames[start * size : (start + n) * size])
                sent += n
                room -= n
            n = sock.recv_into(buffer)
            if not n:
                raise ConnectionError("the broker closed the backlog publisher")
            acked += counter.feed(memoryview(buffer)[:n])
        sock.sendall(encode_disconnect())
    return count / (time.perf_counter() - started)


def paho_publish_rate(duration_s: float = 4.0) -> tuple[float, float]:
    """paho-mqtt publishing QoS 1 to a local mosquitto, ``INFLIGHT`` in flight: (acknowledged
    publishes per second, µs of this process's CPU per message)."""
    import threading

    import paho.mqtt.client as paho
    from paho.mqtt.enums import CallbackAPIVersion

    with launch("mosquitto", mosquitto_conf=_remote()) as broker:
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id="bench-paho")
        client.max_inflight_messages_set(INFLIGHT)
        room = threading.Semaphore(INFLIGHT)
        acked = 0

        def on_publish(*_: object) -> None:
            nonlocal acked
            acked += 1
            room.release()

        client.on_publish = on_publish
        connected = threading.Event()
        client.on_connect = lambda *_: connected.set()
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        try:
            if not connected.wait(10):
                raise TimeoutError("paho did not connect")
            started, cpu = time.perf_counter(), time.process_time()
            while time.perf_counter() - started < duration_s:
                room.acquire()
                client.publish("bench/q1/paho", b"0123456789abcdef", qos=1)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        finally:
            client.disconnect()
            client.loop_stop()
    return acked / elapsed, cpu / max(acked, 1) * 1e6


@dataclass
class BridgeBench:
    rounds: int = 3
    duration_s: float = 5.0
    warmup_s: float = 1.0
    backlog: int = 100_000
    window: int = 100
    forwarding: dict[str, list[FlowResult]] = field(default_factory=dict)
    drains: list[tuple[float, float]] = field(default_factory=list)  # (drain, publish) msg/s
    paho: tuple[float, float] | None = None  # (acknowledged/s, µs of CPU per message)
    errors: list[str] = field(default_factory=list)

    def forward_once(self, kind: str) -> FlowResult:
        remote_port = free_port()
        if kind == "edgebus":
            bridging_broker = launch(kind, extra_config=_edgebus_bridge(remote_port))
        else:
            bridging_broker = launch(kind, mosquitto_conf=_mosquitto_bridge(remote_port))
        with (
            launch("mosquitto", port=remote_port, mosquitto_conf=_remote()) as remote,
            bridging_broker as bridging,
        ):
            _wait_bridged(bridging, remote)
            spec = FlowSpec(
                qos=1,
                publish_topics=TOPICS,
                subscribe_filter="bench/q1/+",
                subscribers=1,
                publisher_procs=1,
                subscriber_procs=1,
                window=self.window,
            )
            return run_flow(
                spec,
                bridging.port,
                bridging.pid,
                bridging.check_alive,
                self.warmup_s,
                self.duration_s,
                subscriber_port=remote.port,
            )

    def drain_once(self) -> tuple[float, float]:
        state = Path(tempfile.mkdtemp(prefix="bench-bridge-remote-"))
        try:
            remote_port = free_port()
            with launch("mosquitto", port=remote_port, mosquitto_conf=_remote(state)):
                sock = _persistent_connect(remote_port, "bench-drain-sub")
                mqtt_subscribe(sock, "bench/q1/#", 1)
                sock.sendall(encode_disconnect())
                sock.close()
            with launch("edgebus", extra_config=_edgebus_bridge(remote_port)) as gateway:
                publish_rate = _publish_all(gateway.port, self.backlog)
                with launch("mosquitto", port=remote_port, mosquitto_conf=_remote(state)):
                    up = time.perf_counter()
                    sock = _persistent_connect(remote_port, "bench-drain-sub")
                    counter = PacketCounter(PUBLISH, ack_publishes=True)
                    buffer = bytearray(1 << 20)
                    got = 0
                    sock.settimeout(30)
                    while got < self.backlog:
                        n = sock.recv_into(buffer)
                        if not n:
                            raise ConnectionError("the remote closed the drain subscriber")
                        got += counter.feed(memoryview(buffer)[:n])
                        sock.sendall(counter.take_acks())
                    elapsed = time.perf_counter() - up
                    sock.sendall(encode_disconnect())
                    sock.close()
                    gateway.check_alive()
            return self.backlog / elapsed, publish_rate
        finally:
            shutil.rmtree(state, ignore_errors=True)

    def measure(self, progress: bool = True) -> None:
        try:
            self.paho = paho_publish_rate()
        except Exception as exc:
            self.errors.append(f"paho-mqtt client: {exc}")
        for round_ in range(1, self.rounds + 1):
            for kind in ("edgebus", "mosquitto"):
                try:
                    result = self.forward_once(kind)
                except Exception as exc:
                    self.errors.append(f"forwarding {kind} round {round_}: {exc}")
                    continue
                self.forwarding.setdefault(kind, []).append(result)
                if progress:
                    _progress(
                        f"bridge forwarding {kind} round {round_}: "
                        f"{result.delivery_rate:,.0f} delivered/s ({result.delivery_ratio:.2%} of"
                        f" published), cpu bridging/generator/other {result.broker_cpu:.2f}/"
                        f"{result.generator_cpu:.2f}/{result.other_cpu:.2f}"
                    )
            try:
                drain, publish = self.drain_once()
            except Exception as exc:
                self.errors.append(f"drain round {round_}: {exc}")
                continue
            self.drains.append((drain, publish))
            if progress:
                _progress(
                    f"bridge drain round {round_}: {self.backlog:,} in at {publish:,.0f}/s,"
                    f" drained at {drain:,.0f}/s"
                )

    def lines(self) -> list[str]:
        def median(kind: str) -> float | None:
            results = self.forwarding.get(kind)
            return statistics.median(r.delivery_rate for r in results) if results else None

        def acked(kind: str) -> float | None:
            results = self.forwarding.get(kind)
            return statistics.median(r.ack_rate for r in results) if results else None

        ours, theirs = median("edgebus"), median("mosquitto")
        drain = statistics.median(d for d, _ in self.drains) if self.drains else None
        out = [
            "bridge (QoS 1, to a local mosquitto)    edgebus    mosquitto bridge  ratio    target"
            "     result"
        ]

        def row(
            label: str, a: float | None, b: float | None, target: float, ratio: float | None
        ) -> str:
            shown = [f"{x:>10,.0f}" if x is not None else f"{'n/a':>10}" for x in (a, b)]
            verdict = "n/a" if ratio is None else ("PASS" if ratio >= target else "FAIL")
            ratio_text = "n/a" if ratio is None else f"{ratio:.2f}x"
            return (
                f"{label:<40}{shown[0]} {shown[1]:>16}  {ratio_text:<8} >= {target:g}x  {verdict}"
            )

        ratio = ours / theirs if ours and theirs else None
        out.append(row("forwarding, delivered msg/s", ours, theirs, 1.0, ratio))
        ours_acked, theirs_acked = acked("edgebus"), acked("mosquitto")
        out.append(
            f"{'forwarding, acknowledged publishes/s':<40}"
            + (f"{ours_acked:>10,.0f}" if ours_acked else f"{'n/a':>10}")
            + (f" {theirs_acked:>16,.0f}" if theirs_acked else f" {'n/a':>16}")
        )
        drain_ratio = drain / ours if drain and ours else None
        label = f"drain of {self.backlog:,} after reconnect msg/s"
        out.append(
            row(label, drain, None, 0.5, drain_ratio).replace("x  >= 0.5x", "x  >= 0.5x of live")
        )
        out.append("  (drain ratio: the drain rate / edgebus's live forwarding rate)")
        for kind in ("edgebus", "mosquitto"):
            for result in self.forwarding.get(kind, []):
                out.append(
                    f"  per run {kind}: {result.delivery_rate:,.0f} delivered/s,"
                    f" {result.ack_rate:,.0f} acked/s, cpu bridging/generator/other"
                    f" {result.broker_cpu:.2f}/{result.generator_cpu:.2f}/{result.other_cpu:.2f}"
                )
        for drain_rate, publish_rate in self.drains:
            out.append(
                f"  per run drain: {drain_rate:,.0f}/s (backlog published at {publish_rate:,.0f}/s)"
            )
        if self.paho is not None:
            out.append(
                f"  paho-mqtt as the client, QoS 1 to a local mosquitto ({INFLIGHT} in flight):"
                f" {self.paho[0]:,.0f} acknowledged/s, {self.paho[1]:.0f} µs of CPU per message"
            )
        for kind in ("edgebus", "mosquitto"):
            for result in self.forwarding.get(kind, []):
                if result.delivery_rate:
                    out.append(
                        f"  CPU per delivered message, {kind}:"
                        f" {result.broker_cpu / result.delivery_rate * 1e6:.1f} µs"
                    )
        out += [f"  error: {error}" for error in self.errors]
        return out


def _progress(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)


def run(rounds: int = 3, duration_s: float = 5.0, backlog: int = 100_000) -> list[str]:
    bench = BridgeBench(rounds=rounds, duration_s=duration_s, backlog=backlog)
    bench.measure()
    return bench.lines()


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_bridge", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--backlog", type=int, default=100_000)
    args = parser.parse_args()
    for line in run(args.rounds, args.duration, args.backlog):
        print(line)


if __name__ == "__main__":
    _main()
