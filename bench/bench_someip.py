"""SOME/IP adapter benchmark: events per second from a someipy server to MQTT, beside a
plain someipy client of the same server, in the same run.

``run()`` returns the result lines (``python -m bench`` prints them);
``python -m bench.bench_someip`` runs it alone.

Set-up, all on loopback with a service discovery port and multicast group of its own:

- a someipy server app (``tests/helpers/someip_peer.py``) on a daemon at 127.0.0.2,
  offering one event;
- a plain someipy client app of that event on a daemon at 127.0.0.3;
- edgebus with a ``someip`` adapter (its own daemon, 127.0.0.1) consuming the same event
  (raw, QoS 0), and an MQTT subscriber on a raw socket counting the PUBLISH packets.

Both consumers are remote subscribers of the same server: each event leaves the
server's daemon twice over UDP. Per round the server sends ``count`` events as fast as
it can; each consumer's rate is the events it received divided by the time from its
first to its last one. The ratio is edgebus / plain client (target: at least 0.8).
Median of ``rounds``. Figures on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench.brokers import launch
from bench.client import mqtt_connect, mqtt_subscribe
from bench.errors import BenchError
from bench.frames import PacketCounter

if TYPE_CHECKING:
    from tests.helpers.someip import SdNet

__all__ = ["run"]

SERVICE, INSTANCE, EVENTGROUP, EVENT = 0x4242, 1, 1, 0x8001
TOPIC = f"someip/{SERVICE:04x}/{INSTANCE:04x}/event/{EVENT:04x}"
TARGET = 0.8


@dataclass
class _Round:
    sent: int
    send_s: float
    edgebus: int
    edgebus_rate: float
    plain: int
    plain_rate: float

    @property
    def ratio(self) -> float:
        return self.edgebus_rate / self.plain_rate if self.plain_rate else 0.0


class _MqttCounter:
    """PUBLISH packets on one subscription, with the times of the first and the last."""

    def __init__(self, port: int) -> None:
        self.sock = mqtt_connect(port, "bench-someip-sub")
        mqtt_subscribe(self.sock, TOPIC, 0)
        self.sock.settimeout(0.2)
        self.counter = PacketCounter()
        self.lock = threading.Lock()
        self.count, self.first, self.last = 0, 0.0, 0.0
        self.running = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while self.running:
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            found = self.counter.feed(chunk)
            if found:
                now = time.monotonic()
                with self.lock:
                    if not self.count:
                        self.first = now
                    self.count += found
                    self.last = now

    def reset(self) -> None:
        with self.lock:
            self.count, self.first, self.last = 0, 0.0, 0.0

    def read(self) -> tuple[int, float]:
        with self.lock:
            span = self.last - self.first
            return self.count, (self.count - 1) / span if span > 0 else 0.0

    def close(self) -> None:
        self.running = False
        self.thread.join(1.0)
        self.sock.close()


def _adapter_yaml(net: SdNet) -> str:
    return (
        "adapters:\n"
        "  - type: someip\n"
        "    name: bench\n"
        "    daemon:\n"
        "      interface: 127.0.0.1\n"
        f"      sd_address: {net.sd_address}\n"
        f"      sd_port: {net.sd_port}\n"
        "    consume:\n"
        f"      - service_id: {SERVICE}\n"
        f"        instance_id: {INSTANCE}\n"
        f"        eventgroups: [{EVENTGROUP}]\n"
        f"        events: [{EVENT}]\n"
    )


def _settle(read: Callable[[], object], quiet_s: float = 1.0, timeout_s: float = 30.0) -> None:
    """Waits until the count ``read()`` returns stops growing for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        value = read()
        if value != last:
            last, since = value, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)


def measure(count: int = 20_000, rounds: int = 3, size: int = 16) -> list[_Round]:
    from tests.helpers.someip import SomeipDaemon, SomeipPeer, sd_net

    net = sd_net()
    results: list[_Round] = []
    with (
        SomeipDaemon.start("127.0.0.2", net) as server_daemon,
        SomeipDaemon.start("127.0.0.3", net) as client_daemon,
        SomeipPeer.start(
            server_daemon, role="server", service=SERVICE, instance=INSTANCE,
            eventgroups={EVENTGROUP: [EVENT]}, ttl=5, cycle_ms=1000,
        ) as server,
        SomeipPeer.start(
            client_daemon, role="client", service=SERVICE, instance=INSTANCE,
            eventgroups={EVENTGROUP: [EVENT]}, quiet=True,
        ) as plain,
        launch("edgebus", extra_config=_adapter_yaml(net)) as broker,
    ):  # fmt: skip
        mqtt = _MqttCounter(broker.port)
        try:

            def plain_count() -> tuple[int, float]:
                plain.send("count")
                report = plain.wait("count")
                span = report["last"] - report["first"]
                rate = (report["events"] - 1) / span if span > 0 else 0.0
                return int(report["events"]), rate

            # Warm up until both consumers receive (discovery, subscriptions acked).
            deadline = time.monotonic() + 30
            while not (mqtt.read()[0] and plain_count()[0]):
                if time.monotonic() > deadline:
                    raise RuntimeError("the consumers received nothing within 30 s")
                server.send("send", eventgroup=EVENTGROUP, event=EVENT, payload="00" * size)
                time.sleep(0.2)
            _settle(lambda: (mqtt.read()[0], plain_count()[0]))
            for _ in range(rounds):
                mqtt.reset()
                plain.send("reset")
                server.send("burst", eventgroup=EVENTGROUP, event=EVENT, count=count, size=size)
                sent = server.wait("sent", timeout=120)
                _settle(lambda: (mqtt.read()[0], plain_count()[0]))
                edgebus, edgebus_rate = mqtt.read()
                plain_n, plain_rate = plain_count()
                results.append(
                    _Round(count, sent["seconds"], edgebus, edgebus_rate, plain_n, plain_rate)
                )
        finally:
            mqtt.close()
    return results


def run(count: int = 20_000, rounds: int = 3) -> list[str]:
    """The measurement as human-readable lines."""
    try:
        results = measure(count, rounds)
    except (OSError, RuntimeError, BenchError) as exc:
        return [f"someip: not measured: {type(exc).__name__}: {exc}"]
    lines = ["someip: events/s from a someipy server (UDP, other daemon), per round:"]
    for n, r in enumerate(results, 1):
        lines.append(
            f"  round {n}: sent {r.sent:,} in {r.send_s:.1f}s ({r.sent / r.send_s:,.0f}/s);"
            f" edgebus->MQTT {r.edgebus:,} at {r.edgebus_rate:,.0f}/s;"
            f" plain someipy client {r.plain:,} at {r.plain_rate:,.0f}/s; ratio {r.ratio:.2f}"
        )
    ratio = statistics.median(r.ratio for r in results)
    verdict = "meets" if ratio >= TARGET else "misses"
    lines.append(f"someip: median ratio edgebus/plain {ratio:.2f} ({verdict} the {TARGET}x target)")
    return lines


if __name__ == "__main__":
    for line in run():
        print(line)
