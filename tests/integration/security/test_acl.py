"""Topic ACL on the wire: the allow / deny matrix for PUBLISH and SUBSCRIBE, MQTT 3.1.1
and 5.0, with both deny actions (ignore: 0x87 in acks; disconnect: DISCONNECT 0x87)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway
from tests.helpers.mqtt_builder import PacketType
from tests.helpers.raw_client import RawClient
from tests.integration.broker.support import wait_until
from tests.integration.security.support import connect_raw, security_gateway

BOTH = pytest.mark.parametrize("proto", [4, 5], ids=["v311", "v5"])

RULES = [
    {"permission": "allow", "clientid": "observer", "action": "subscribe", "topics": ["#"]},
    {"permission": "deny", "topics": ["secret/#"]},
    {"permission": "allow", "action": "publish", "topics": ["pub/#", "users/%u/#"]},
    {"permission": "allow", "action": "subscribe", "topics": ["sub/#", "users/%u/#", "eq lit/#"]},
]

PUBLISH_MATRIX = [
    ("pub/a", True),
    ("pub", True),
    ("users/alice/x", True),
    ("users/bob/x", False),
    ("sub/a", False),  # a subscribe-only rule
    ("secret/x", False),
    ("other", False),  # the default
]

SUBSCRIBE_MATRIX = [
    ("sub/#", True),
    ("sub/+/x", True),
    ("users/alice/#", True),
    ("lit/#", True),
    ("lit/x", False),  # `eq lit/#` is that filter only
    ("users/+/x", False),
    ("#", False),
    ("pub/a", False),  # a publish-only rule
    ("secret/#", False),
    ("$share/g/sub/x", True),
]

_ids = itertools.count(1)


def cid() -> str:
    return f"acl{next(_ids)}"


def acl_gateway(
    tmp_path_factory: pytest.TempPathFactory, action: str
) -> contextlib.AbstractContextManager[RunningGateway]:
    config = {"acl": {"default": "deny", "deny_action": action, "rules": RULES}}
    return security_gateway(tmp_path_factory.mktemp(f"acl-{action}"), config)


@pytest.fixture(scope="module")
def ignoring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """deny_action: ignore"""
    with acl_gateway(tmp_path_factory, "ignore") as gateway:
        yield gateway


@pytest.fixture(scope="module")
def disconnecting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """deny_action: disconnect"""
    with acl_gateway(tmp_path_factory, "disconnect") as gateway:
        yield gateway


@contextlib.contextmanager
def observing(gw: RunningGateway) -> Iterator[RawClient]:
    """A client the rules let subscribe to everything."""
    client, _ = connect_raw(gw, 5, "observer")
    assert client.subscribe("#", 2).reason_codes == [2]
    try:
        yield client
    finally:
        client.disconnect()


def alice(gw: RunningGateway, proto: int) -> RawClient:
    client, _ = connect_raw(gw, proto, cid(), username="alice", password="any")
    return client


def observed_until(observer: RawClient, marker: str) -> list[str]:
    """Topics the observer receives, up to and including ``marker``."""
    topics: list[str] = []
    while not topics or topics[-1] != marker:
        topics.append(str(observer.recv_publish().topic))
    return topics


@BOTH
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_matrix(ignoring: RunningGateway, proto: int, qos: int) -> None:
    with observing(ignoring) as observer, contextlib.closing(alice(ignoring, proto)) as client:
        for topic, allowed in PUBLISH_MATRIX:
            ack = client.publish(topic, b"x", qos=qos)
            if qos and proto == 5:
                assert ack is not None
                assert (topic, ack.reason_code) == (topic, 0 if allowed else 0x87)
            elif qos:
                assert ack is not None  # 3.1.1: a positive ack [MQTT-3.3.5-2]
                assert ack.reason_code in (None, 0)
        client.publish("pub/end", b"x", qos=1)
        expected = [topic for topic, allowed in PUBLISH_MATRIX if allowed] + ["pub/end"]
        assert observed_until(observer, "pub/end") == expected


@BOTH
def test_subscribe_matrix(ignoring: RunningGateway, proto: int) -> None:
    with contextlib.closing(alice(ignoring, proto)) as client:
        refused = 0x87 if proto == 5 else 0x80
        for topic_filter, allowed in SUBSCRIBE_MATRIX:
            suback = client.subscribe(topic_filter, 1)
            assert (topic_filter, suback.reason_codes) == (
                topic_filter,
                [1 if allowed else refused],
            )
        # one SUBSCRIBE with several filters: each gets its own code
        suback = client.subscribe([("sub/y", 0), ("#", 0), ("users/alice/y", 2)])
        assert suback.reason_codes == [0, refused, 2]


@BOTH
@pytest.mark.parametrize(("topic", "allowed"), PUBLISH_MATRIX[:1] + PUBLISH_MATRIX[3:])
def test_denied_publish_disconnects(
    disconnecting: RunningGateway, proto: int, topic: str, allowed: bool
) -> None:
    gw = disconnecting
    with observing(gw) as observer:
        check_publish_denied_with_disconnect(gw, observer, proto, topic, allowed)


def check_publish_denied_with_disconnect(
    gw: RunningGateway, observer: RawClient, proto: int, topic: str, allowed: bool
) -> None:
    client = alice(gw, proto)
    client.send(mb.gen_publish(topic, b"x", qos=1, mid=1, proto_ver=proto))
    if allowed:
        client.expect_packet(PacketType.PUBACK, packet_id=1)
        client.disconnect()
    elif proto == 5:
        client.expect_closed(reason_code=0x87, require_reason=True)
    else:
        client.expect_closed(packet_type=None)  # 3.1.1: close the network connection
    marker, _ = connect_raw(gw, 4, cid())
    marker.publish("pub/end", b"x", qos=1)
    marker.disconnect()
    assert observed_until(observer, "pub/end") == ([topic] if allowed else []) + ["pub/end"]


@BOTH
@pytest.mark.parametrize(("topic_filter", "allowed"), SUBSCRIBE_MATRIX[:1] + SUBSCRIBE_MATRIX[4:])
def test_denied_subscribe_disconnects(
    disconnecting: RunningGateway, proto: int, topic_filter: str, allowed: bool
) -> None:
    client = alice(disconnecting, proto)
    client.send(mb.gen_subscribe(1, topic_filter, 1, proto_ver=proto))
    if allowed:
        assert client.expect_packet(PacketType.SUBACK).reason_codes == [1]
        client.disconnect()
    elif proto == 5:
        client.expect_closed(reason_code=0x87, require_reason=True)
    else:
        client.expect_closed(packet_type=None)


@BOTH
def test_a_denied_will_is_not_published(ignoring: RunningGateway, proto: int) -> None:
    gw = ignoring
    with observing(gw) as observer:
        publish_wills(gw, observer, proto)


def publish_wills(gw: RunningGateway, observer: RawClient, proto: int) -> None:
    # A will the ACL denies refuses its CONNECT (0x87; 3.1.1: 5): never published.
    for will_topic in ("secret/will", "pub/will"):
        name = cid()
        denied = will_topic == "secret/will"
        code = (0x87 if proto == 5 else 5) if denied else 0
        client, _ = connect_raw(
            gw, proto, name, username="alice", password="x", will_topic=will_topic,
            expect_code=code,
        )  # fmt: skip
        if denied:
            client.expect_closed(packet_type=None)
        client.abort()
        wait_until(
            lambda: gw.call(
                lambda: all(c.session.origin.name != name for c in gw.broker.connections)  # noqa: B023
            ),
            what=f"{name} gone",
        )
    assert observed_until(observer, "pub/will") == ["pub/will"]
