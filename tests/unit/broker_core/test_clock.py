"""broker_core.clock: the broker's time, moved by the monotonic clock only; and the keep
alive a ``Session`` counts on it, from complete Control Packets."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from broker_core import clock
from broker_core.listeners.connections import Connections
from broker_core.mqtt.events import ConnectRequested
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.session import Session
from broker_core.mqtt.session_state import Counters, SessionState
from tests.helpers import mqtt_builder as mb

T0 = 1_000_000.0


def test_now_is_the_base_plus_the_monotonic_clock() -> None:
    before = clock.monotonic()
    now = clock.now()
    after = clock.monotonic()
    assert clock.BASE + before <= now <= clock.BASE + after


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="no CLOCK_BOOTTIME here")
def test_the_clock_counts_time_suspended_where_the_system_can() -> None:
    """Linux: the broker's clock is CLOCK_BOOTTIME, which runs on while the machine is
    suspended (CLOCK_MONOTONIC, ``time.monotonic()``, stops). A test cannot suspend the
    machine: it checks that the clock read is that one, in seconds and in ns."""
    assert clock.CLOCK_NAME == "CLOCK_BOOTTIME"
    boot = time.CLOCK_BOOTTIME
    before = time.clock_gettime(boot)
    read = clock.monotonic()
    after = time.clock_gettime(boot)
    assert before <= read <= after
    before_ns = time.clock_gettime_ns(boot)
    read_ns = clock.monotonic_ns()
    after_ns = time.clock_gettime_ns(boot)
    assert before_ns <= read_ns <= after_ns
    before = time.clock_gettime(boot)
    now = clock.now()
    after = time.clock_gettime(boot)
    assert clock.BASE + before <= now <= clock.BASE + after


def test_the_base_comes_from_the_closest_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process preempted between its wall and monotonic reads at start would carry the
    preemption in every time it gives (a will stored by one run fell due 0.2 ms early in
    the next). The base is the wall read between the two monotonic reads of the try
    that took least; here the first try is preempted 5 ms after its wall read."""
    walls = iter([10_000_000_000 + i * 1_000 for i in range(5)])
    monotonics = iter(
        [
            1_000,
            5_001_000,  # the first try, 5 ms between its reads
            5_002_000,
            5_002_002,  # the second, 2 ns
            5_003_000,
            5_003_010,
            5_004_000,
            5_004_010,
            5_005_000,
            5_005_010,
        ]
    )
    monkeypatch.setattr(time, "time_ns", lambda: next(walls))
    monkeypatch.setattr(clock, "monotonic_ns", lambda: next(monotonics))
    # The second try: wall 10_000_001_000 at monotonic 5_002_001.
    assert clock._base_ns() == 10_000_001_000 - 5_002_001


def test_without_boottime_the_clock_is_time_monotonic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(time, "CLOCK_BOOTTIME", raising=False)
    assert clock._pick() == ("monotonic", time.monotonic, time.monotonic_ns)


def test_a_boottime_the_kernel_refuses_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(clock_id: int) -> float:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(time, "CLOCK_BOOTTIME", 7, raising=False)
    monkeypatch.setattr(time, "clock_gettime", refused)
    assert clock._pick() == ("monotonic", time.monotonic, time.monotonic_ns)


def test_every_hot_path_reads_the_broker_clock() -> None:
    """The modules that add ``BASE + monotonic()`` inline (the clock read per packet, per
    message) read this clock, not one of their own: every deadline compared against
    ``now()`` is on the same clock (a module reading ``time.monotonic()`` would not
    count a suspend that the others count)."""
    import bridge.forward
    import broker_core.broker
    import broker_core.listeners.connection
    import gateway.hub

    for module in (
        broker_core.listeners.connection,
        broker_core.broker,
        gateway.hub,
        bridge.forward,
    ):
        assert module._monotonic is clock.monotonic, module.__name__
        assert module._CLOCK_BASE == clock.BASE, module.__name__


def test_a_wall_clock_step_does_not_move_the_broker_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = time.time
    start = clock.monotonic()
    first = clock.now()
    for step in (3600.0, -3600.0, -86400.0 * 365):
        monkeypatch.setattr(time, "time", lambda step=step: real() + step)
        now = clock.now()
        elapsed = clock.monotonic() - start
        assert first <= now <= first + elapsed


def test_without_a_step_a_time_converts_to_itself() -> None:
    # The offset is rounded to the ms: the µs of noise in reading two clocks go away.
    for _ in range(1000):
        assert clock.wall_offset_ns() == 0
    stamp = clock.now_ns()
    assert clock.to_wall_ns(stamp) == stamp
    assert clock.to_wall(1_700_000_000.5) == 1_700_000_000.5


def test_a_time_converts_to_the_wall_clock_as_it_reads_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The wall clock steps a day back, then NTP sets it right: a time stamped in
    # between converts with the offset of the moment it is read (a day, then none).
    real_ns = time.time_ns
    day_ns = 86_400 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() - day_ns)
    monkeypatch.setattr(time, "time", lambda: (real_ns() - day_ns) / 1e9)
    stamped = clock.now_ns()  # the broker's clock does not follow the wall clock
    assert clock.wall_offset_ns() == -day_ns
    assert abs(clock.to_wall_ns(stamped) - time.time_ns()) < 10**9
    monkeypatch.setattr(time, "time_ns", real_ns)  # the step: NTP sets it right
    monkeypatch.setattr(time, "time", lambda: real_ns() / 1e9)
    assert clock.wall_offset_ns() == 0
    assert abs(clock.to_wall_ns(stamped) - real_ns()) < 10**9
    assert abs(clock.to_wall(stamped / 1e9) - real_ns() / 1e9) < 1


def connected(keep_alive: int) -> Session:
    limits = ServerLimits()
    session = Session(limits, T0, "peer")
    session.receive_data(mb.gen_connect("c", proto_ver=5, keepalive=keep_alive), T0)
    [event] = session.events()
    assert isinstance(event, ConnectRequested)
    session.accept(SessionState("c", limits, Counters()), False, T0)
    session.data_to_send()
    return session


def test_bytes_of_an_unfinished_packet_do_not_restart_keep_alive() -> None:
    # MQTT 5.0 [MQTT-3.1.2-22], 3.1.1 [MQTT-3.1.2-24]: a Control Packet within 1.5 x
    # Keep Alive, not any byte.
    session = connected(keep_alive=2)
    assert session.next_deadline() == T0 + 3
    publish = mb.gen_publish("t", b"x" * 1000)
    for i in range(10):
        session.receive_data(publish[i : i + 1], T0 + 0.25 * (i + 1))
    assert session.next_deadline() == T0 + 3
    session.handle_timeout(T0 + 3)
    assert session.closed
    assert session.data_to_send() == mb.gen_disconnect(0x8D, proto_ver=5)


def test_the_input_completing_a_packet_restarts_keep_alive() -> None:
    session = connected(keep_alive=2)
    ping = mb.gen_pingreq()
    session.receive_data(ping[:1], T0 + 1)
    assert session.next_deadline() == T0 + 3
    session.receive_data(ping[1:], T0 + 2)
    assert session.data_to_send() == mb.gen_pingresp()
    assert session.next_deadline() == T0 + 5


@dataclass
class _Listener:
    name: str = "tcp"
    max_pending_connections: int = 10


@dataclass
class _Session:
    deadline: float
    timed_out: list[float] = field(default_factory=list)

    def next_deadline(self) -> float | None:
        return None if self.timed_out else self.deadline

    def handle_timeout(self, now: float) -> None:
        if now >= self.deadline:
            self.timed_out.append(now)


@dataclass(eq=False)
class _Connection:
    session: _Session
    listener: _Listener = field(default_factory=_Listener)
    updated: asyncio.Event = field(default_factory=asyncio.Event)

    def has_unread_input(self) -> bool:
        return False

    def evict(self) -> None:
        raise AssertionError("not evicted here")

    def input_held_back(self) -> bool:
        return False

    def after_session_update(self, now: float) -> None:
        self.updated.set()


def test_a_deadline_before_the_next_sweep_gets_a_timer_of_its_own() -> None:
    # The sweep runs every sweep_interval_s; a deadline due in between is not left
    # for the next sweep (up to an interval late) but checked at its time.
    async def main() -> None:
        connections = Connections(Counters())
        now = clock.now()
        soon = _Connection(_Session(now + 0.05))
        later = _Connection(_Session(now + 3600))
        for conn in (soon, later):
            connections.opened(conn)  # type: ignore[arg-type]
        connections.sweep(now, 3600)  # no further sweep in this test
        assert soon.session.timed_out == []
        await asyncio.wait_for(soon.updated.wait(), 30)
        assert len(soon.session.timed_out) == 1
        assert soon.session.timed_out[0] >= soon.session.deadline
        assert later.session.timed_out == []

    asyncio.run(main())
