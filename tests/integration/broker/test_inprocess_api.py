"""The in-process API: ``Broker.publish(Context)`` reaches MQTT subscribers and
``Broker.subscribe(origin, filters)`` gives a ``LocalSubscription`` that receives what
MQTT clients publish. Broker calls run on the gateway's loop (``gw.call``)."""

from __future__ import annotations

import asyncio

import pytest

from broker_core.context import Context, Origin
from broker_core.local import LocalSubscription
from broker_core.mqtt.properties import Properties
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import (
    BOTH,
    Clients,
    connect_props,
    publish_props,
    wait_until,
)

API = Origin("api", "t")


def _next(gw: RunningGateway, sub: LocalSubscription) -> Context:
    """The next Context the local subscription received (bounded wait)."""
    return wait_until(lambda: gw.call(sub.get_nowait), what="a local delivery")


def _subscribe(gw: RunningGateway, filters: list[str], **options: object) -> LocalSubscription:
    return gw.call(lambda: gw.broker.subscribe(API, filters, **options))  # type: ignore[arg-type]


@BOTH
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_api_publish_reaches_mqtt_subscribers(
    clients: Clients, gw: RunningGateway, proto: int, qos: int
) -> None:
    sub = clients.subscriber(proto, "api/#", qos)
    other = clients.subscriber(proto, "elsewhere/#", qos)
    reached = gw.call(lambda: gw.broker.publish(Context("api/out", b"from the api", 2)))
    assert reached == 1
    message = sub.expect_message()
    assert (message.topic, message.payload, message.qos, message.retain) == (
        "api/out",
        b"from the api",
        qos,
        False,
    )
    gw.call(lambda: gw.broker.publish(Context("elsewhere/x", b"sentinel", 2)))
    assert other.expect_message().payload == b"sentinel"


def test_api_publish_carries_mqtt5_properties(clients: Clients, gw: RunningGateway) -> None:
    sub = clients.subscriber(5, "api/#", 1)
    props = Properties(
        content_type="text/plain",
        response_topic="api/reply",
        correlation_data=b"\x01\x02",
        user_properties=(("origin", "api"), ("k", "v")),
        message_expiry_interval=120,
    )
    gw.call(lambda: gw.broker.publish(Context("api/p", b"x", 1, False, props)))
    message = sub.expect_message()
    assert message.properties.ContentType == "text/plain"
    assert message.properties.ResponseTopic == "api/reply"
    assert message.properties.CorrelationData == b"\x01\x02"
    assert message.properties.UserProperty == [("origin", "api"), ("k", "v")]
    assert message.properties.MessageExpiryInterval in (119, 120)


@BOTH
def test_api_retained_publish_is_kept_for_later_mqtt_subscribers(
    clients: Clients, gw: RunningGateway, proto: int
) -> None:
    assert gw.call(lambda: gw.broker.publish(Context("api/state", b"on", 1, True))) == 0
    message = clients.subscriber(proto, "api/+", 1).expect_message()
    assert (message.topic, message.payload, message.retain) == ("api/state", b"on", True)


@BOTH
def test_local_subscription_receives_what_mqtt_clients_publish(
    clients: Clients, gw: RunningGateway, proto: int
) -> None:
    local = _subscribe(gw, ["a/#"])
    pub = clients.connect(proto, "publisher")
    pub.publish("a/b", b"to the api", 1)
    pub.publish("b/c", b"not for it", 1)
    pub.publish("a/c/d", b"deeper", 2)
    first = _next(gw, local)
    assert (first.topic, first.payload, first.qos, first.retain) == ("a/b", b"to the api", 1, False)
    assert (first.origin.protocol, first.origin.name) == ("mqtt", "publisher")
    second = _next(gw, local)
    assert (second.topic, second.payload, second.qos) == ("a/c/d", b"deeper", 2)
    assert gw.call(local.get_nowait) is None


def test_local_subscription_sees_mqtt5_properties(clients: Clients, gw: RunningGateway) -> None:
    local = _subscribe(gw, ["p/#"])
    pub = clients.connect(5)
    props = publish_props(ContentType="application/json", UserProperty=[("a", "1"), ("b", "2")])
    pub.publish("p/t", b"{}", 1, properties=props)
    context = _next(gw, local)
    assert context.properties.content_type == "application/json"
    assert context.properties.user_properties == (("a", "1"), ("b", "2"))


def test_local_subscription_downgrades_qos_and_gets_retained_messages(
    clients: Clients, gw: RunningGateway
) -> None:
    pub = clients.connect(5)
    pub.publish("r/kept", b"retained", 2, retain=True)
    local = _subscribe(gw, ["r/#"], qos=1)
    retained = _next(gw, local)
    assert (retained.topic, retained.payload, retained.qos, retained.retain) == (
        "r/kept",
        b"retained",
        1,
        True,
    )
    pub.publish("r/live", b"live", 2)
    live = _next(gw, local)
    assert (live.payload, live.qos) == (b"live", 1)


def test_local_subscriber_counts_as_a_matching_subscriber(
    clients: Clients, gw: RunningGateway
) -> None:
    # MQTT 5 PUBACK: 0x00 when the local subscription matched, 0x10 once it is closed.
    local = _subscribe(gw, ["m/#"])
    pub = clients.raw_connect(5)
    assert pub.publish("m/t", b"x", qos=1).reason_code in (None, 0)  # type: ignore[union-attr]
    gw.call(local.close)
    ack = pub.publish("m/t", b"y", qos=1)
    assert ack is not None
    assert ack.reason_code == mb.ReasonCode.NO_MATCHING_SUBSCRIBERS


def test_local_subscription_can_be_read_with_async_for(
    clients: Clients, gw: RunningGateway
) -> None:
    local = _subscribe(gw, ["it/#"])

    async def read_two() -> list[bytes]:
        got = []
        async with asyncio.timeout(unit(3)):
            async for context in local:
                got.append(context.payload)
                if len(got) == 2:
                    return got
        return got

    future = asyncio.run_coroutine_threadsafe(read_two(), gw.loop)
    pub = clients.connect(4)
    pub.publish("it/1", b"one", 1)
    pub.publish("it/2", b"two", 0)
    assert future.result(unit(4)) == [b"one", b"two"]


def test_local_subscription_in_a_shared_group_takes_turns(
    clients: Clients, gw: RunningGateway
) -> None:
    local = _subscribe(gw, ["$share/g/sh/t"])
    member = clients.subscriber(5, "$share/g/sh/t", 1)
    pub = clients.connect(5)
    for i in range(4):
        pub.publish("sh/t", f"{i}", 1)
    mqtt_got = [m.payload for m in member.expect_messages(2)]
    local_got = [_next(gw, local).payload for _ in range(2)]
    assert sorted(mqtt_got + local_got) == [b"0", b"1", b"2", b"3"]


def test_api_publish_with_sender_skips_its_own_local_subscription(gw: RunningGateway) -> None:
    # no_local (the default for local subscriptions) works by identity of the sender.
    local = _subscribe(gw, ["self/#"])
    other = _subscribe(gw, ["self/#"])
    reached = gw.call(lambda: gw.broker.publish(Context("self/t", b"x", 1), local))
    assert reached == 1
    assert _next(gw, other).payload == b"x"
    assert gw.call(local.get_nowait) is None


@pytest.mark.parametrize(
    ("overflow", "kept"), [("drop_oldest", [b"2", b"3", b"4"]), ("drop_new", [b"0", b"1", b"2"])]
)
def test_local_subscription_queue_is_bounded(
    clients: Clients, gw: RunningGateway, overflow: str, kept: list[bytes]
) -> None:
    local = _subscribe(gw, ["lb/#"], maxsize=3, overflow=overflow)
    pub = clients.connect(5)
    for i in range(5):
        pub.publish("lb/t", f"{i}", 1)
    assert gw.call(lambda: local.dropped) == 2
    assert [_next(gw, local).payload for _ in range(3)] == kept
    assert gw.call(local.get_nowait) is None


@BOTH
def test_api_publish_is_queued_for_an_offline_persistent_session(
    clients: Clients, gw: RunningGateway, proto: int
) -> None:
    props = connect_props(SessionExpiryInterval=60) if proto == 5 else None
    sub = clients.paho(proto, "offline-api", clean_session=False)
    sub.connect(clean_start=False, properties=props)
    assert sub.subscribe("q/#", 1) == [1]
    sub.disconnect()
    assert gw.call(lambda: gw.broker.publish(Context("q/t", b"while away", 1))) == 1
    again = clients.paho(proto, "offline-api", clean_session=False)
    assert again.connect(clean_start=False, properties=props).session_present is True
    assert again.expect_message().payload == b"while away"
