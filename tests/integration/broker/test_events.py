"""Broker events (``broker_core.observe``) as real clients cause them.

An observer registered on the gateway's broker records every kind of event; MQTT
clients connect, subscribe, publish, acknowledge, unsubscribe, are refused, taken over
and disconnect, and each test checks the events and their fields, in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from broker_core.observe import (
    EVENT_KINDS,
    BrokerEvent,
    ClientConnack,
    ClientConnect,
    ClientConnected,
    ClientDisconnected,
    ClientSubscribe,
    ClientUnsubscribe,
    MessageAcked,
    MessageDelivered,
    MessageDropped,
    MessagePublish,
    SessionSubscribed,
    SessionTerminated,
    SessionUnsubscribed,
)
from tests.helpers.gateway import RunningGateway
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import Clients, connect_props, wait_until


class Recorder:
    """Every event, recorded on the broker's loop; read with ``of(kind)``."""

    def __init__(self, gw: RunningGateway) -> None:
        self.gw = gw
        self._lock = threading.Lock()
        self.events: list[BrokerEvent] = []
        self.stop: Callable[[], None] = gw.call(
            lambda: gw.broker.observers.observe(EVENT_KINDS, self._record)
        )

    def _record(self, event: BrokerEvent) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, *kinds: type[Any], client_id: str | None = None) -> list[Any]:
        with self._lock:
            return [
                e
                for e in self.events
                if isinstance(e, kinds)
                and (client_id is None or getattr(e, "client_id", None) == client_id)
            ]

    def wait(self, kind: type[Any], count: int = 1, client_id: str | None = None) -> list[Any]:
        wait_until(
            lambda: len(self.of(kind, client_id=client_id)) >= count,
            what=f"{count} {kind.__name__} events",
        )
        return self.of(kind, client_id=client_id)


@pytest.fixture
def events(gw: RunningGateway) -> Iterator[Recorder]:
    recorder = Recorder(gw)
    yield recorder
    gw.call(recorder.stop)


def test_a_client_session_from_connect_to_disconnect(
    gw: RunningGateway, clients: Clients, events: Recorder
) -> None:
    sub = RawClient("127.0.0.1", gw.port, protocol_level=5)
    sub.do_connect("watcher", proto_ver=5, username="alice", keepalive=30)
    [connect] = events.of(ClientConnect, client_id="watcher")
    assert (connect.username, connect.protocol_level, connect.keep_alive) == ("alice", 5, 30)
    assert (connect.clean_start, connect.listener) == (True, "tcp:127.0.0.1:0")
    assert connect.peer is not None and connect.peer.startswith("127.0.0.1:")
    [connack] = events.wait(ClientConnack, client_id="watcher")
    assert connack.reason_code == 0
    [connected] = events.wait(ClientConnected, client_id="watcher")
    assert (connected.username, connected.session_present, connected.expiry_interval) == (
        "alice",
        False,
        0,
    )
    assert connected.peer == connect.peer

    sub.subscribe("t/#", 1)
    [asked] = events.wait(ClientSubscribe, client_id="watcher")
    [granted] = events.wait(SessionSubscribed, client_id="watcher")
    assert (asked.topic_filter, asked.qos, granted.topic_filter, granted.qos) == (
        "t/#",
        1,
        "t/#",
        1,
    )

    pub = clients.paho(4, "sender")
    pub.connect()
    pub.publish("t/x", b"hello", qos=2)
    message = sub.recv_publish()  # and PUBACK: the message is acknowledged
    assert message.payload == b"hello"
    [published] = [e for e in events.wait(MessagePublish) if e.topic == "t/x"]
    assert (published.from_client_id, published.qos, published.payload) == ("sender", 2, b"hello")
    assert published.from_protocol == "mqtt"
    [delivered] = events.wait(MessageDelivered, client_id="watcher")
    assert (delivered.topic, delivered.qos, delivered.from_client_id) == ("t/x", 1, "sender")
    assert delivered.message is published.message  # the one envelope, shared
    [acked] = events.wait(MessageAcked, client_id="watcher")
    assert (acked.topic, acked.qos, acked.packet_id) == ("t/x", 1, message.packet_id)

    sub.unsubscribe("t/#")
    [unsubscribe] = events.wait(ClientUnsubscribe, client_id="watcher")
    [unsubscribed] = events.wait(SessionUnsubscribed, client_id="watcher")
    assert unsubscribe.topic_filter == unsubscribed.topic_filter == "t/#"

    pub.publish("t/nobody", b"?", qos=1)
    dropped = [e for e in events.wait(MessageDropped) if e.topic == "t/nobody"]
    assert [(e.reason, e.client_id) for e in dropped] == [("no_subscribers", None)]

    sub.disconnect()
    [gone] = events.wait(ClientDisconnected, client_id="watcher")
    assert (gone.reason_code, gone.reason, gone.username) == (0, "success", "alice")
    [ended] = events.wait(SessionTerminated, client_id="watcher")
    assert (ended.reason, ended.username) == ("disconnected", "alice")

    kinds = [type(e) for e in events.of(*EVENT_KINDS, client_id="watcher")]
    assert kinds == [
        ClientConnect,
        ClientConnack,
        ClientConnected,
        ClientSubscribe,
        SessionSubscribed,
        MessageDelivered,
        MessageAcked,
        ClientUnsubscribe,
        SessionUnsubscribed,
        ClientDisconnected,
        SessionTerminated,
    ]


def test_refusals_are_answered_connacks(gw: RunningGateway, events: Recorder) -> None:
    raw = RawClient("127.0.0.1", gw.port, protocol_level=4)
    # MQTT 3.1.1 without a client id must ask for a clean session [MQTT-3.1.3-8]: return
    # code 2, reason code 0x85 in MQTT 5 terms.
    raw.do_connect("", proto_ver=4, clean_session=False, expect_code=2)
    [connack] = events.wait(ClientConnack, client_id="")
    assert (connack.reason_code, connack.protocol_level, connack.clean_start) == (0x85, 4, False)
    assert len(events.of(ClientConnect, client_id="")) == 1
    assert events.of(ClientConnected) == []


@pytest.mark.gateway_config("mqtt:\n  max_queued_messages: 2\n")
def test_sessions_taken_over_discarded_and_dropping(
    gw: RunningGateway, clients: Clients, events: Recorder
) -> None:
    away = clients.paho(5, "away")
    away.connect(properties=connect_props(SessionExpiryInterval=600))
    away.subscribe("q/#", 1)
    away.disconnect()
    events.wait(ClientDisconnected, client_id="away")
    assert events.of(SessionTerminated) == []  # it lives on, offline

    pub = clients.paho(5, "pub")
    pub.connect()
    for i in range(4):
        pub.publish(f"q/{i}", b"m", qos=1)
    full = events.wait(MessageDropped, 2, client_id="away")
    assert [(e.reason, e.topic) for e in full] == [("queue_full", "q/0"), ("queue_full", "q/1")]

    first = clients.paho(5, "twice")
    first.connect(properties=connect_props(SessionExpiryInterval=600))
    second = clients.paho(5, "twice")
    # takes over: the first connection ends, the session goes on
    second.connect(clean_start=False, properties=connect_props(SessionExpiryInterval=600))
    first.wait_disconnected()
    [old] = events.wait(ClientDisconnected, client_id="twice")
    assert old.reason_code == 0x8E  # session taken over
    assert events.of(SessionTerminated, client_id="twice") == []

    back = clients.paho(5, "away")
    back.connect(clean_start=True)  # clean start: the offline session ends
    [ended] = events.wait(SessionTerminated, client_id="away")
    assert ended.reason == "discarded"
    [connected] = [e for e in events.of(ClientConnected, client_id="away")][-1:]
    assert connected.session_present is False

    assert gw.call(lambda: gw.broker.discard_session("twice"))
    [kicked] = events.wait(SessionTerminated, client_id="twice")
    assert kicked.reason == "kicked"


def test_a_failing_observer_is_counted_and_the_broker_goes_on(
    gw: RunningGateway, clients: Clients
) -> None:
    def boom(event: BrokerEvent) -> None:
        if isinstance(event, MessagePublish) and event.topic.startswith("b/"):
            raise RuntimeError("observer bug")

    stop = gw.call(lambda: gw.broker.observers.observe(MessagePublish, boom))
    try:
        sub = clients.paho(5, "s")
        sub.connect()
        sub.subscribe("b/#", 1)
        pub = clients.paho(5, "p")
        pub.connect()
        for i in range(3):
            assert pub.publish(f"b/{i}", b"x", qos=1) == 0
        assert [m.topic for m in sub.expect_messages(3)] == ["b/0", "b/1", "b/2"]
        assert gw.call(lambda: gw.broker.stats().observer_errors) == 3
    finally:
        gw.call(stop)


def test_nothing_is_built_for_kinds_nobody_observes(gw: RunningGateway, clients: Clients) -> None:
    """With no observer, sessions never call the broker's report functions."""

    def must_not_run(*args: object) -> None:
        raise AssertionError("reported without an observer")

    observers = gw.broker.observers
    gw.call(lambda: [setattr(observers, name, must_not_run) for name in REPORTS])
    sub = clients.paho(5, "quiet-sub")
    sub.connect()
    sub.subscribe("z/#", 1)
    pub = clients.paho(5, "quiet-pub")
    pub.connect()
    pub.publish("z/1", b"x", qos=1)
    pub.publish("nobody/1", b"x", qos=1)
    assert [m.topic for m in sub.expect_messages(1)] == ["z/1"]
    assert gw.call(lambda: gw.broker.stats().observer_errors) == 0


REPORTS = ("report_delivered", "report_acked", "report_dropped")
