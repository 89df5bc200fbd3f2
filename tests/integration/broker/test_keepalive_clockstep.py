"""Keep alive under a wall-clock step: an NTP step of the system clock while the broker
runs (+1 h, then -1 h) closes no healthy client and publishes no will, and a silent
client is still disconnected after 1.5 times its keep alive (broker_core.clock).

``edgebus run`` runs in a subprocess whose ``time.time()`` / ``time.time_ns()`` (the
wall clock, CLOCK_REALTIME) carry an offset read from a file, as an NTP step moves
them; ``time.monotonic()``, which asyncio's timers use, is untouched, as in a real
step (``tests.helpers.clock_offset``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.clock_offset import CLOCK_OFFSET_MAIN, OFFSET_ENV, ClockStep
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

HOUR = 3600.0
HEALTHY_KEEP_ALIVE = 2  # seconds; protocol time, not scaled
PING_EVERY_S = 0.5


class _Pinger(threading.Thread):
    """Healthy clients: each sends a complete PINGREQ every PING_EVERY_S and waits for
    its PINGRESP; the first failure is kept."""

    def __init__(self, clients: list[RawClient]) -> None:
        super().__init__(name="keepalive-pinger", daemon=True)
        self.clients = clients
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.rounds = 0

    def run(self) -> None:
        try:
            while not self.stopping.wait(PING_EVERY_S):
                for client in self.clients:
                    client.ping(unit(5))
                self.rounds += 1
        except BaseException as exc:  # reported by the test (check)
            self.failure = exc

    def check(self, when: str) -> None:
        if self.failure is not None:
            raise AssertionError(
                f"a healthy client (keep alive {HEALTHY_KEEP_ALIVE}s, pinging every "
                f"{PING_EVERY_S}s) lost its connection {when}: {self.failure}"
            )

    def wait_rounds(self, rounds: int, when: str) -> None:
        """Until ``rounds`` more rounds of pings were answered (several sweeps)."""
        target = self.rounds + rounds
        deadline = time.monotonic() + unit(15)
        while self.rounds < target and self.failure is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"pings not answered in time {when}")
            time.sleep(0.05)
        self.check(when)

    def stop(self) -> None:
        self.stopping.set()
        self.join(unit(10))


@pytest.fixture
def stepped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[BrokerHandle, ClockStep]]:
    step = ClockStep(tmp_path / "clock_offset")
    monkeypatch.setenv(OFFSET_ENV, str(step.path))
    broker = start_edgebus(
        tmp_path / "edgebus",
        "persistence: memory\n",
        main=CLOCK_OFFSET_MAIN,
    )
    with broker:
        yield broker, step


def _raw(broker: BrokerHandle, proto: int, client_id: str, **connect_args: object) -> RawClient:
    client = RawClient(broker.host, broker.port, protocol_level=proto)
    client.do_connect(client_id, proto_ver=proto, **connect_args)  # type: ignore[arg-type]
    return client


def _silent_client_is_closed(watcher: RawClient, silent: RawClient, will_topic: str) -> None:
    """``silent`` (MQTT 5) is disconnected for its keep alive, and its will reaches
    ``watcher``, the only message that does."""
    silent.expect_closed(
        unit(10), reason_code=mb.ReasonCode.KEEP_ALIVE_TIMEOUT, require_reason=True
    )
    will = watcher.recv_publish(unit(10))
    assert (will.topic, will.payload) == (will_topic, b"silent")


def _healthy(broker: BrokerHandle) -> tuple[RawClient, list[RawClient], _Pinger]:
    """A watcher subscribed to every will (keep alive 60 s), and healthy clients with a
    will each (MQTT 3.1.1 and 5), pinging from a thread."""
    watcher = _raw(broker, 5, "watcher", keepalive=60)
    watcher.subscribe("will/#", qos=0)
    healthy = [
        _raw(
            broker,
            proto,
            f"healthy-{proto}",
            keepalive=HEALTHY_KEEP_ALIVE,
            will_topic=f"will/healthy-{proto}",
            will_payload=b"healthy client lost",
        )
        for proto in (4, 5)
    ]
    pinger = _Pinger(healthy)
    pinger.start()
    pinger.wait_rounds(2, "before any step")
    return watcher, healthy, pinger


def _end(watcher: RawClient, healthy: list[RawClient], pinger: _Pinger) -> None:
    pinger.stop()
    pinger.check("at the end")
    # No healthy client's will was published: nothing else reached the watcher.
    watcher.expect_no_packet(unit(0.5))
    for client in (*healthy, watcher):
        client.disconnect()
        client.close()


def test_a_wall_clock_step_forward_closes_no_healthy_client(
    stepped: tuple[BrokerHandle, ClockStep],
) -> None:
    broker, step = stepped
    watcher, healthy, pinger = _healthy(broker)
    try:
        # +1 h: on the wall clock, every connection's deadline passed at once.
        step.set(HOUR)
        pinger.wait_rounds(6, "after a wall-clock step of +1 h")
        watcher.ping(unit(5))  # keep alive 60 s: still connected too
        # A silent client is still disconnected after 1.5 x its keep alive.
        silent = _raw(
            broker,
            5,
            "silent-1",
            keepalive=1,
            will_topic="will/silent-1",
            will_payload=b"silent",
        )
        _silent_client_is_closed(watcher, silent, "will/silent-1")
    finally:
        pinger.stop()
    _end(watcher, healthy, pinger)


def test_a_wall_clock_step_back_keeps_no_silent_client(
    stepped: tuple[BrokerHandle, ClockStep],
) -> None:
    broker, step = stepped
    step.set(HOUR)  # from +1 h to 0 below: a step of -1 h
    watcher, healthy, pinger = _healthy(broker)
    try:
        # -1 h: a client silent since before the step must not get an hour more.
        silent = _raw(
            broker,
            5,
            "silent-2",
            keepalive=3,
            will_topic="will/silent-2",
            will_payload=b"silent",
        )
        step.set(0.0)
        _silent_client_is_closed(watcher, silent, "will/silent-2")
        pinger.wait_rounds(2, "after a wall-clock step of -1 h")
    finally:
        pinger.stop()
    _end(watcher, healthy, pinger)
