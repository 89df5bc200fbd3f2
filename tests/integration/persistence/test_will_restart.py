"""A pending delayed will survives a gateway restart (MQTT 5.0 3.1.2.5, 3.1.3.2.2).

A client with a persistent session (expiry 1 h) and a will with a Will Delay Interval
loses its network connection without DISCONNECT, so its will is pending. The gateway
process is then stopped (SIGTERM) or killed (SIGKILL) and started again on the same data
directory. The will must still be published when its delay runs out or its session
expires, whichever is first; when that moment passed while the gateway was down, promptly
after the start. A client that takes its session over before then cancels it.

The will is watched by a persistent subscriber (QoS 1, session expiry 1 h) that is
offline across the restart: a will published before it reconnects waits in its session.
Before the gateway is stopped, a ``$SYS`` disconnected event says the broker handled the
lost connection, and a QoS 1 PUBACK after it says the store committed what came before.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient, connect_props, will_props

CONFIG = "persistence: sqlite\nsys:\n  events: true\n"
HOUR = 3600
WILL_TOPIC = "wr/will"
STOPS = pytest.mark.parametrize("stop", ["sigterm", "sigkill"])


class Run:
    """The gateway of one test, restarted on the same data directory; clients closed after."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.broker = start_edgebus(tmp_path, CONFIG)
        self.clients: list[PahoClient] = []

    def client(self, client_id: str) -> PahoClient:
        client = PahoClient(self.broker.host, self.broker.port, 5, client_id)
        self.clients.append(client)
        return client

    def subscriber(self, clean_start: bool) -> PahoClient:
        """The persistent subscriber of ``wr/#`` (QoS 1), connected."""
        sub = self.client("wr-sub")
        connack = sub.connect(
            clean_start=clean_start, properties=connect_props(SessionExpiryInterval=HOUR)
        )
        if clean_start:
            assert sub.subscribe("wr/#", 1) == [1]
        else:
            assert connack.session_present is True
        return sub

    def leave_pending_will(self, delay_s: int, session_expiry_s: int = HOUR) -> float:
        """``wr-will`` connects with a delayed will and drops its connection; returns when
        the store holds what the broker did about it. Returns the wall time of the drop."""
        watcher = self.client("wr-watcher")
        watcher.connect()
        assert watcher.subscribe("$SYS/brokers/+/clients/wr-will/disconnected", 0) == [0]
        will = self.client("wr-will")
        will.will_set(WILL_TOPIC, b"gone", 1, False, will_props(WillDelayInterval=delay_s))
        will.connect(properties=connect_props(SessionExpiryInterval=session_expiry_s))
        dropped_at = time.time()
        will.abort()  # no DISCONNECT: the will is due after its delay
        event = watcher.expect_message(unit(10))
        assert event.topic.endswith("/clients/wr-will/disconnected")
        # PUBACK waits until everything handed to the store before it is committed.
        assert watcher.publish("barrier", b"", 1) in (0, 0x10)
        watcher.disconnect()
        return dropped_at

    def stop(self, how: str) -> None:
        self.close_clients()
        if how == "sigkill":
            self.broker.process.send_signal(signal.SIGKILL)
            self.broker.process.wait(unit(10))
        self.broker.stop()  # SIGTERM (a clean shutdown); after SIGKILL, closes the logs
        assert self.broker.process.returncode is not None

    def restart(self) -> BrokerHandle:
        self.broker = start_edgebus(self.tmp_path, CONFIG)
        return self.broker

    def close_clients(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    gateway = Run(tmp_path)
    try:
        yield gateway
    finally:
        gateway.close_clients()
        gateway.broker.stop()


def wait_for_wall_time(moment: float) -> None:
    """Lets the wall clock pass ``moment`` (a precondition, not an assertion)."""
    while time.time() < moment:
        time.sleep(min(moment - time.time(), 0.1) + 0.001)


def expect_will(sub: PahoClient, due_at: float) -> float:
    """Waits for the will (due at wall time ``due_at``) generously; returns its arrival."""
    message = sub.expect_message(max(due_at - time.time(), 0) + unit(15))
    arrived = time.time()
    assert (message.topic, message.payload, message.qos) == (WILL_TOPIC, b"gone", 1)
    return arrived


@STOPS
def test_a_will_whose_delay_runs_out_after_the_restart_is_published_then(
    run: Run, stop: str
) -> None:
    delay = math.ceil(unit(8))
    sub = run.subscriber(clean_start=True)
    sub.disconnect()
    dropped_at = run.leave_pending_will(delay)
    run.stop(stop)
    run.restart()
    restarted_at = time.time()
    assert restarted_at < dropped_at + delay, "the gateway restarted after the will was due"
    sub = run.subscriber(clean_start=False)
    arrived = expect_will(sub, dropped_at + delay)
    assert arrived >= dropped_at + delay  # not early: the delay counts from the drop
    sub.expect_no_message()  # once


@STOPS
def test_a_will_due_while_the_gateway_was_down_is_published_after_the_start(
    run: Run, stop: str
) -> None:
    delay = 2
    sub = run.subscriber(clean_start=True)
    sub.disconnect()
    dropped_at = run.leave_pending_will(delay)
    run.stop(stop)
    wait_for_wall_time(dropped_at + delay + unit(0.5))
    run.restart()
    sub = run.subscriber(clean_start=False)
    expect_will(sub, time.time())
    sub.expect_no_message()


def test_a_will_is_published_when_its_session_expires_before_its_delay(run: Run) -> None:
    """Whichever is first: the session (expiry 3 s) ends before the will delay (1 h)."""
    expiry = 3
    sub = run.subscriber(clean_start=True)
    sub.disconnect()
    dropped_at = run.leave_pending_will(HOUR, session_expiry_s=expiry)
    run.stop("sigkill")
    run.restart()
    sub = run.subscriber(clean_start=False)
    arrived = expect_will(sub, dropped_at + expiry)
    assert arrived >= dropped_at + expiry


@STOPS
def test_taking_the_session_over_after_the_restart_cancels_the_will(run: Run, stop: str) -> None:
    delay = math.ceil(unit(6))
    sub = run.subscriber(clean_start=True)
    sub.disconnect()
    dropped_at = run.leave_pending_will(delay)
    run.stop(stop)
    run.restart()
    assert time.time() < dropped_at + delay, "the gateway restarted after the will was due"
    back = run.client("wr-will")
    connack = back.connect(clean_start=False, properties=connect_props(SessionExpiryInterval=HOUR))
    assert connack.session_present is True
    sub = run.subscriber(clean_start=False)
    # Had the will not been cancelled, it would have been published at its due time,
    # before this message from the same broker.
    wait_for_wall_time(dropped_at + delay + unit(1))
    assert back.publish("wr/sentinel", b"sentinel", 1) == 0
    message = sub.expect_message(unit(10))
    assert (message.topic, message.payload) == ("wr/sentinel", b"sentinel")
