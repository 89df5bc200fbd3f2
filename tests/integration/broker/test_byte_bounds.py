"""Byte bounds on what the broker holds for clients, through a running gateway: messages
in flight to a client that does not acknowledge (``mqtt.max_inflight_bytes``, and
``max_queued_bytes_total`` over queues and in-flight messages together), ``$delayed/``
messages (``mqtt.max_delayed_bytes``) and wills, of connected clients and pending
(``mqtt.max_will_bytes_total``). A message counts its topic, payload and properties
(``session_state.message_size``); the statistics are what ``/metrics`` serves."""

from __future__ import annotations

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import Clients, short_wait, wait_until

PAYLOAD = b"p" * 1000
SIZE = len("t/0") + len(PAYLOAD)  # each message here: topic "t/<n>", no properties


def _publishes(client: object, count: int) -> list[mb.Packet]:
    """The next ``count`` PUBLISH packets, not acknowledged."""
    return [client.recv_publish(ack=False) for _ in range(count)]  # type: ignore[attr-defined]


@pytest.mark.gateway_config("mqtt:\n  max_inflight_bytes: 2500\n")
def test_past_max_inflight_bytes_messages_wait_in_the_queue(
    gw: RunningGateway, clients: Clients
) -> None:
    # The client's window (Receive Maximum 65535, max_inflight 256) would take all five;
    # two messages of 1003 bytes fit 2500 bytes, the third waits until one is acknowledged.
    sub = clients.raw_connect(5, "slow", properties=[("receive_maximum", 65535)])
    sub.subscribe("t/#", 1)
    pub = clients.raw_connect(5, "pub")
    for n in range(5):
        assert pub.publish(f"t/{n}", PAYLOAD, qos=1).reason_code == 0  # type: ignore[union-attr]
    got = _publishes(sub, 2)
    assert [p.topic for p in got] == ["t/0", "t/1"]
    wait_until(lambda: gw.call(lambda: gw.broker.stats().queued_messages) == 3, what="queued")
    sub.expect_no_packet(short_wait())
    stats = gw.call(gw.broker.stats)
    assert (stats.inflight, stats.inflight_bytes) == (2, 2 * SIZE)
    assert stats.queued_bytes == 3 * SIZE
    assert stats.limit_hits["inflight_bytes"] >= 1
    state = gw.call(lambda: gw.broker.sessions.get("slow"))
    assert gw.call(lambda: state.inflight_bytes) == 2 * SIZE
    sub.send(mb.gen_puback(got[0].packet_id, proto_ver=5))
    third = sub.recv_publish(ack=False)
    assert third.topic == "t/2"
    sub.expect_no_packet(short_wait())
    for packet in (got[1], third):
        sub.send(mb.gen_puback(packet.packet_id, proto_ver=5))
    rest = []
    while len(rest) < 2:
        packet = sub.recv_publish()
        rest.append(packet.topic)
    assert rest == ["t/3", "t/4"]
    stats = gw.call(gw.broker.stats)
    assert (stats.queued_bytes, stats.queued_messages) == (0, 0)
    assert stats.dropped["queue_full"] == 0


@pytest.mark.gateway_config("mqtt:\n  max_queued_bytes_total: 5000\n")
def test_in_flight_messages_count_in_max_queued_bytes_total(
    gw: RunningGateway, clients: Clients
) -> None:
    # Two clients that read and never acknowledge: four messages of 1003 bytes in flight
    # fill 5000 bytes; the next ones can neither go in flight nor be queued (no queue of
    # theirs to make room from): dropped, counted.
    subs = [
        clients.raw_connect(5, f"never-acks-{n}", properties=[("receive_maximum", 65535)])
        for n in range(2)
    ]
    for sub in subs:
        sub.subscribe("t/#", 1)
    pub = clients.raw_connect(5, "pub")
    for n in range(3):
        assert pub.publish(f"t/{n}", PAYLOAD, qos=1).reason_code == 0  # type: ignore[union-attr]
    for sub in subs:
        assert [p.topic for p in _publishes(sub, 2)] == ["t/0", "t/1"]
    for sub in subs:
        sub.expect_no_packet(short_wait())
    stats = gw.call(gw.broker.stats)
    assert (stats.inflight, stats.inflight_bytes) == (4, 4 * SIZE)
    assert (stats.queued_messages, stats.queued_bytes) == (0, 0)
    assert stats.dropped["queue_full"] == 2
    assert stats.limit_hits["queued_bytes_total"] == 2


@pytest.mark.gateway_config("mqtt:\n  max_delayed_bytes: 2000\n")
def test_delayed_messages_past_max_delayed_bytes_are_refused(
    gw: RunningGateway, clients: Clients
) -> None:
    # "$delayed/3600/d/x" is kept as "d/x": 3 + 900 bytes; two fit 2000 bytes.
    pub = clients.raw_connect(5, "delayer")
    for n in range(2):
        reply = pub.publish("$delayed/3600/d/x", b"d" * 900, qos=1)
        assert reply is not None and reply.reason_code == 0, n
    reply = pub.publish("$delayed/3600/d/x", b"d" * 900, qos=1)
    assert reply is not None and reply.reason_code == 0x97  # Quota exceeded
    stats = gw.call(gw.broker.stats)
    assert (stats.delayed, stats.delayed_bytes) == (2, 2 * 903)
    assert stats.dropped["delayed_limit"] == 1
    # A smaller one still fits the bytes left.
    reply = pub.publish("$delayed/3600/d/x", b"d" * 100, qos=1)
    assert reply is not None and reply.reason_code == 0
    assert gw.call(lambda: gw.broker.stats().delayed_bytes) == 2 * 903 + 103


WILL = [("will_delay_interval", 3600)]
KEEP = [("session_expiry_interval", 3600)]
WILL_SIZE = len("w/0") + 900 + len(mb.props(*WILL))  # topic, payload, properties


def _with_will(clients: Clients, n: int, expect_code: int = 0) -> object:
    client = clients.raw(5)
    client.do_connect(
        f"will-{n}",
        proto_ver=5,
        clean_session=False,
        properties=KEEP,
        will_topic=f"w/{n}",
        will_payload=b"w" * 900,
        will_properties=WILL,
        expect_code=expect_code,
    )
    return client


def _will_bytes(gw: RunningGateway) -> int:
    return gw.call(lambda: gw.broker.stats().will_bytes)  # edgebus_will_bytes


@pytest.mark.gateway_config("mqtt:\n  max_will_bytes_total: 2000\n")
def test_pending_wills_are_bounded_in_bytes(gw: RunningGateway, clients: Clients) -> None:
    # Two clients with wills delayed an hour connect: their wills are held from the
    # CONNECT on (2 x 908 of 2000 bytes), and stay counted once pending. A third CONNECT
    # with a will has no room: refused, 0x97. Wills restored, replaced or given back
    # make room again.
    watcher = clients.raw_connect(5, "watcher")
    watcher.subscribe("w/#", 0)
    away = [_with_will(clients, n) for n in range(2)]
    assert _will_bytes(gw) == 2 * WILL_SIZE
    for n, client in enumerate(away):
        client.abort()  # type: ignore[attr-defined]
        wait_until(lambda n=n: gw.call(lambda: len(gw.broker.wills)) == n + 1, what="pending")
    assert _will_bytes(gw) == 2 * WILL_SIZE
    watcher.expect_no_packet(short_wait())  # both wait out their delay
    refused = _with_will(clients, 3, expect_code=0x97)
    assert refused.connack.reason_code == 0x97  # type: ignore[attr-defined]
    stats = gw.call(gw.broker.stats)
    assert (len(gw.broker.wills), stats.will_bytes) == (2, 2 * WILL_SIZE)
    assert stats.limit_hits["will_bytes_total"] == 1
    # No will is never refused; one coming back frees its room.
    clients.raw_connect(5, "no-will")
    back = clients.raw(5)
    back.do_connect("will-0", proto_ver=5, clean_session=False, properties=KEEP)
    assert back.connack.session_present is True
    assert _will_bytes(gw) == WILL_SIZE
    _with_will(clients, 4)
    assert _will_bytes(gw) == 2 * WILL_SIZE


WILL_PAYLOAD = b"c" * 900
CONNECTED_WILL_SIZE = len("c/0") + len(WILL_PAYLOAD)  # no properties


def _connected_will(clients: Clients, n: int, proto: int = 5, expect_code: int = 0) -> object:
    client = clients.raw(proto)
    client.do_connect(
        f"c-{n}",
        proto_ver=proto,
        will_topic=f"c/{n}",
        will_payload=WILL_PAYLOAD,
        expect_code=expect_code,
    )
    return client


@pytest.mark.gateway_config("mqtt:\n  max_will_bytes_total: 2000\n")
def test_wills_of_connected_clients_count_in_max_will_bytes_total(
    gw: RunningGateway, clients: Clients
) -> None:
    # A connected client's will is held in memory until its connection ends, delayed or
    # not, MQTT 5 or 3.1.1: max_will_bytes_total counts it from the CONNECT, and
    # edgebus_will_bytes shows it. Before, only pending (delayed) wills were counted:
    # every connected client could hold a will of any size.
    first = _connected_will(clients, 0)
    second = _connected_will(clients, 1, proto=4)
    assert _will_bytes(gw) == 2 * CONNECTED_WILL_SIZE
    assert gw.call(lambda: len(gw.broker.wills)) == 0  # none pending
    refused = _connected_will(clients, 2, expect_code=0x97)
    assert refused.connack.reason_code == 0x97  # type: ignore[attr-defined]
    refused.expect_closed(packet_type=None)  # type: ignore[attr-defined]
    refused_311 = _connected_will(clients, 3, proto=4, expect_code=3)  # Server unavailable
    refused_311.expect_closed(packet_type=None)  # type: ignore[attr-defined]
    assert hits_of(gw, "will_bytes_total") == 2
    clients.raw_connect(5, "no-will")  # a CONNECT without a will is not counted
    # The same client connecting again takes its connection over: the will it held is
    # counted as free (it goes out at the takeover), so the new one fits.
    again = _connected_will(clients, 0)
    assert _will_bytes(gw) == 2 * CONNECTED_WILL_SIZE
    first.expect_closed(reason_code=0x8E)  # type: ignore[attr-defined]
    # A normal DISCONNECT discards the will and gives its bytes back ...
    second.disconnect()  # type: ignore[attr-defined]
    wait_until(lambda: _will_bytes(gw) == CONNECTED_WILL_SIZE, what="will bytes given back")
    # ... so does a will published when its connection is lost.
    watcher = clients.raw_connect(5, "watcher")
    watcher.subscribe("c/#", 0)
    third = _connected_will(clients, 2)
    assert _will_bytes(gw) == 2 * CONNECTED_WILL_SIZE
    third.abort()  # type: ignore[attr-defined]
    assert watcher.recv_publish().topic == "c/2"
    wait_until(lambda: _will_bytes(gw) == CONNECTED_WILL_SIZE, what="will bytes given back")
    again.abort()  # type: ignore[attr-defined]
    assert watcher.recv_publish().topic == "c/0"
    wait_until(lambda: _will_bytes(gw) == 0, what="no will held")


def hits_of(gw: RunningGateway, limit: str) -> int:
    return gw.call(lambda: gw.broker.counters.limit_hits.get(limit, 0))
