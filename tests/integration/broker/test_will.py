"""Will messages: sent on an abnormal close, kept back by a normal DISCONNECT, sent on
MQTT 5 DISCONNECT 0x04, delayed by the Will Delay Interval, retained when asked."""

from __future__ import annotations

from broker_core.context import Context
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import (
    BOTH,
    Clients,
    PahoClient,
    connect_props,
    short_wait,
    wait_until,
    will_props,
)


def _will_client(
    clients: Clients,
    proto: int,
    client_id: str,
    *,
    retain: bool = False,
    delay: int | None = None,
    session_expiry: int | None = None,
) -> PahoClient:
    client = clients.paho(proto, client_id)
    properties = will_props(WillDelayInterval=delay) if delay is not None else None
    client.will_set("will/" + client_id, b"gone", 1, retain, properties)
    props = (
        connect_props(SessionExpiryInterval=session_expiry) if session_expiry is not None else None
    )
    client.connect(properties=props, clean_start=True)
    return client


def _publish_sentinel(gw: RunningGateway, topic: str) -> None:
    """Publishes through the broker itself: whatever it published before comes first."""
    gw.call(lambda: gw.broker.publish(Context(topic, b"sentinel", 1)))


def _session_gone(gw: RunningGateway, client_id: str) -> bool:
    return gw.call(lambda: gw.broker.sessions.get(client_id) is None)


@BOTH
def test_will_is_published_when_the_connection_drops(clients: Clients, proto: int) -> None:
    # [MQTT-3.1.2-8] (5.0) / [MQTT-3.1.2-8] (3.1.1): published when the Network Connection
    # is closed without a DISCONNECT.
    sub = clients.subscriber(proto, "will/#", 1)
    _will_client(clients, proto, "w1").abort()
    message = sub.expect_message()
    assert (message.topic, message.payload, message.qos, message.retain) == (
        "will/w1",
        b"gone",
        1,
        False,
    )


@BOTH
def test_will_is_not_published_after_a_normal_disconnect(
    clients: Clients, gw: RunningGateway, proto: int
) -> None:
    # [MQTT-3.1.2-10] (5.0) / [MQTT-3.1.2-10] (3.1.1): DISCONNECT deletes the Will.
    sub = clients.subscriber(proto, "will/#", 1)
    _will_client(clients, proto, "w3").disconnect()
    wait_until(lambda: _session_gone(gw, "w3"), what="session w3 ended")
    # Anything the broker published for w3 is out before this message (one publisher).
    _publish_sentinel(gw, "will/w3")
    assert sub.expect_message().payload == b"sentinel"


@BOTH
def test_a_will_goes_through_the_publish_policy_of_a_publish(
    clients: Clients, gw: RunningGateway, proto: int
) -> None:
    # $SYS belongs to the broker: a will there is refused with its CONNECT (0x87, 3.1.1:
    # 5), as a PUBLISH there is refused (MQTT 4.7.2), so nothing is published nor
    # retained (test_will_connect_refusals); a $delayed/ will is held back like a PUBLISH.
    sub = clients.subscriber(proto, "$SYS/spoofed", 1)
    client = clients.paho(proto, "w-sys")
    client.will_set("$SYS/spoofed", b"by a will", 1, True)
    connack = client.connect(clean_start=True, expect_success=False)
    assert connack.reason_code == 0x87  # paho's name for 3.1.1's 5 too
    client.close()
    wait_until(lambda: _session_gone(gw, "w-sys"), what="session w-sys ended")
    _publish_sentinel(gw, "$SYS/spoofed")  # the broker's own: it may publish there
    message = sub.expect_message()
    assert message.payload == b"sentinel"
    assert gw.call(lambda: gw.broker.retained.get("$SYS/spoofed")) is None
    later = clients.subscriber(proto, "will/later", 1)
    delayed = clients.paho(proto, "w-delayed")
    delayed.will_set("$delayed/1/will/later", b"a second on", 1, False)
    delayed.connect(clean_start=True)
    delayed.abort()
    wait_until(lambda: _session_gone(gw, "w-delayed"), what="session w-delayed ended")
    assert later.expect_message(unit(10)).payload == b"a second on"


def test_mqtt5_disconnect_with_will_message_publishes_the_will(clients: Clients) -> None:
    # 3.14.2.1: Reason Code 0x04 Disconnect with Will Message.
    sub = clients.subscriber(5, "will/#", 1)
    _will_client(clients, 5, "w4").disconnect(mb.ReasonCode.DISCONNECT_WITH_WILL_MESSAGE)
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("will/w4", b"gone")


@BOTH
def test_will_retain_makes_the_will_a_retained_message(clients: Clients, proto: int) -> None:
    # [MQTT-3.1.2-17]: Will Retain 1: the Will is published as a retained message.
    live = clients.subscriber(proto, "will/#", 1)
    _will_client(clients, proto, "w5", retain=True).abort()
    message = live.expect_message()
    assert message.payload == b"gone"
    # To an existing subscription the retain flag is cleared (3.1.1 [MQTT-3.3.1-9]; 5.0
    # with Retain As Published 0 [MQTT-3.3.1-12]) ...
    assert message.retain is False
    # ... and a later subscriber gets it as a retained message.
    late = clients.subscriber(proto, "will/w5", 1)
    stored = late.expect_message()
    assert (stored.topic, stored.payload, stored.retain) == ("will/w5", b"gone", True)


def test_will_delay_interval_postpones_the_will(clients: Clients) -> None:
    # [MQTT-3.1.3-9]: not published before the Will Delay Interval has passed.
    sub = clients.subscriber(5, "will/#", 1)
    _will_client(clients, 5, "w6", delay=1, session_expiry=60).abort()
    sub.expect_no_message(short_wait())
    message = sub.expect_message(unit(3))
    assert (message.topic, message.payload) == ("will/w6", b"gone")
    # The Will Delay Interval is not forwarded with the message.
    assert getattr(message.properties, "WillDelayInterval", None) is None


def test_reconnecting_within_the_will_delay_cancels_the_will(
    clients: Clients, gw: RunningGateway
) -> None:
    # [MQTT-3.1.3-9]: a new Network Connection to the Session before the Will Delay
    # Interval has passed: the Server MUST NOT send the Will Message.
    sub = clients.subscriber(5, "will/#", 1)
    _will_client(clients, 5, "w7", delay=30, session_expiry=60).abort()
    wait_until(lambda: gw.call(lambda: len(gw.broker.wills)) == 1, what="will w7 pending")
    again = clients.paho(5, "w7")
    assert again.connect(
        clean_start=False, properties=connect_props(SessionExpiryInterval=60)
    ).session_present
    assert gw.call(lambda: len(gw.broker.wills)) == 0
    again.disconnect()
    _publish_sentinel(gw, "will/w7")
    assert sub.expect_message().payload == b"sentinel"


def test_a_clean_start_within_the_will_delay_ends_the_session_and_publishes_the_will(
    clients: Clients, gw: RunningGateway
) -> None:
    # 3.1.2.4: Clean Start 1 discards the existing Session, and 3.1.2.5: the will is
    # published "when the Session ends" if that comes before the Will Delay Interval
    # (mosquitto does the same). Only a reconnection that continues the session cancels it.
    sub = clients.subscriber(5, "will/#", 1)
    _will_client(clients, 5, "w7c", delay=30, session_expiry=60).abort()
    wait_until(lambda: gw.call(lambda: len(gw.broker.wills)) == 1, what="will w7c pending")
    again = clients.paho(5, "w7c")
    assert not again.connect(clean_start=True).session_present
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("will/w7c", b"gone")
    again.disconnect()


def test_a_takeover_within_the_will_delay_resuming_the_session_cancels_the_will(
    clients: Clients, gw: RunningGateway
) -> None:
    # A takeover of a connected client with a delayed will: the old connection ends, its
    # will's delay starts, and the new connection to the session with Clean Start 0 is
    # back within it [MQTT-3.1.3-9]: no will.
    sub = clients.subscriber(5, "will/#", 1)
    first = _will_client(clients, 5, "w7t", delay=30, session_expiry=60)
    again = clients.paho(5, "w7t")
    assert again.connect(
        clean_start=False, properties=connect_props(SessionExpiryInterval=60)
    ).session_present
    first.wait_disconnected()
    assert gw.call(lambda: len(gw.broker.wills)) == 0
    again.disconnect()
    _publish_sentinel(gw, "will/w7t")
    assert sub.expect_message().payload == b"sentinel"


def test_a_takeover_with_clean_start_publishes_the_delayed_will_at_once(
    clients: Clients, gw: RunningGateway
) -> None:
    # Clean Start 1 ends the old session (3.1.2.4), and the will is published when the
    # session ends if that comes before the Will Delay Interval (3.1.2.5).
    sub = clients.subscriber(5, "will/#", 1)
    first = _will_client(clients, 5, "w7u", delay=30, session_expiry=60)
    again = clients.paho(5, "w7u")
    assert not again.connect(clean_start=True).session_present
    first.wait_disconnected()
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("will/w7u", b"gone")
    assert gw.call(lambda: len(gw.broker.wills)) == 0
    again.disconnect()


def test_will_is_published_when_the_session_ends_before_the_will_delay(clients: Clients) -> None:
    # 3.1.2.5: published after the Will Delay Interval or when the Session ends,
    # whichever happens first.
    sub = clients.subscriber(5, "will/#", 1)
    _will_client(clients, 5, "w8", delay=300, session_expiry=1).abort()
    message = sub.expect_message(unit(4))
    assert (message.topic, message.payload) == ("will/w8", b"gone")


@BOTH
def test_will_is_published_when_the_connection_is_taken_over(clients: Clients, proto: int) -> None:
    # 5.0 3.1.4: "If the existing Client has a Will Message, that Will Message is published";
    # 3.1.1 [MQTT-3.1.2-8]: published when the Network Connection is closed, unless a
    # DISCONNECT deleted it.
    sub = clients.subscriber(proto, "will/#", 1)
    first = _will_client(clients, proto, "w9")
    clients.connect(proto, "w9")
    first.wait_disconnected()
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("will/w9", b"gone")


@BOTH
def test_will_is_published_when_the_server_closes_on_a_protocol_error(
    clients: Clients, proto: int
) -> None:
    # 3.1.1 3.1.2.5 / 5.0 3.1.2.5: the Server closes the connection because of a protocol
    # error: the Will is published.
    sub = clients.subscriber(proto, "will/#", 1)
    bad = clients.raw(proto)
    bad.do_connect("w10", proto_ver=proto, will_topic="will/w10", will_payload=b"broken")
    bad.send(mb.gen_publish("will/+", b"wildcard topic", proto_ver=proto))
    bad.expect_closed()
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("will/w10", b"broken")


def test_will_properties_are_forwarded(clients: Clients) -> None:
    # 3.1.3.2: the Will Properties go out with the Will Message (the Will Delay Interval
    # excepted); [MQTT-3.1.3-10]: User Properties in their order.
    sub = clients.subscriber(5, "will/#", 1)
    client = clients.paho(5, "wp")
    client.will_set(
        "will/wp",
        b"{}",
        1,
        False,
        will_props(
            ContentType="application/json",
            ResponseTopic="will/reply",
            CorrelationData=b"\x07",
            UserProperty=[("b", "2"), ("a", "1")],
            PayloadFormatIndicator=1,
            MessageExpiryInterval=100,
        ),
    )
    client.connect()
    client.abort()
    message = sub.expect_message()
    props = message.properties
    assert (props.ContentType, props.ResponseTopic, props.CorrelationData) == (
        "application/json",
        "will/reply",
        b"\x07",
    )
    assert props.UserProperty == [("b", "2"), ("a", "1")]
    assert props.PayloadFormatIndicator == 1
    assert 0 < props.MessageExpiryInterval <= 100


def test_will_message_expiry_starts_when_the_will_is_published(clients: Clients) -> None:
    # 3.1.3.2.4 Message Expiry Interval (Will Properties): "the lifetime of the Will Message
    # in seconds and is sent as the Publication Expiry Interval when the Server publishes
    # the Will Message" - the clock starts at publication, not at the disconnection, so a
    # Will Delay Interval as long as the expiry does not make the Will vanish.
    sub = clients.subscriber(5, "will/#", 1)
    client = clients.paho(5, "w13")
    client.will_set(
        "will/w13", b"late", 1, False, will_props(WillDelayInterval=1, MessageExpiryInterval=1)
    )
    client.connect(properties=connect_props(SessionExpiryInterval=60))
    client.abort()
    message = sub.expect_message(unit(4))
    assert (message.topic, message.payload) == ("will/w13", b"late")
    assert message.properties.MessageExpiryInterval == 1


def test_will_delay_longer_than_a_zero_session_expiry_publishes_at_once(clients: Clients) -> None:
    # Session Expiry 0: the Session ends with the connection, so the Will goes out then.
    sub = clients.subscriber(5, "will/#", 1)
    _will_client(clients, 5, "w14", delay=300, session_expiry=0).abort()
    message = sub.expect_message()
    assert (message.topic, message.payload) == ("will/w14", b"gone")
