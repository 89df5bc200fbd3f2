"""Routing: `+` and `#`, `$` topics, overlapping subscriptions, shared subscriptions
(round-robin among live members), retained messages."""

from __future__ import annotations

import queue
import time
from collections import Counter

import pytest

from tests.helpers.timeouts import unit
from tests.integration.broker.support import BOTH, Clients, PahoClient, connect_props

SENTINEL = "sentinel/t"

MATCHES = [
    ("a/+", "a/b", True),
    ("a/+", "a/b/c", False),
    ("a/+", "a", False),
    ("a/+", "a/", True),  # an empty level is a level
    ("a/+/c", "a/b/c", True),
    ("a/+/c", "a/b/d", False),
    ("+/+", "a/b", True),
    ("+/+", "/b", True),
    ("+", "/a", False),
    ("/+", "/a", True),
    ("a/#", "a", True),  # "#" also matches the parent level [MQTT-4.7.1-2]
    ("a/#", "a/b/c/d", True),
    ("a/#", "ab/c", False),
    ("#", "x/y/z", True),
    ("+/b/#", "x/b", True),
    ("+/b/#", "x/c/b", False),
    ("a/b", "a/b/", False),
    ("A/b", "a/b", False),  # case sensitive [MQTT-4.7.3-4]
    ("a b/+", "a b/c d", True),  # spaces are ordinary characters
]


def _matched(clients: Clients, proto: int, topic_filter: str, topic: str) -> bool:
    """Subscribes ``topic_filter``, publishes ``topic`` then a sentinel; True if it arrived."""
    sub = clients.connect(proto)
    assert sub.subscribe([(topic_filter, 1), (SENTINEL, 1)]) == [1, 1]
    pub = clients.connect(proto)
    pub.publish(topic, b"probe", 1)
    pub.publish(SENTINEL, b"end", 1)
    first = sub.expect_message()
    if first.topic == SENTINEL:
        return False
    assert first.topic == topic
    assert sub.expect_message().topic == SENTINEL
    return True


@BOTH
@pytest.mark.parametrize(("topic_filter", "topic", "expected"), MATCHES)
def test_wildcard_matching(
    clients: Clients, proto: int, topic_filter: str, topic: str, expected: bool
) -> None:
    # 4.7.1: "+" matches exactly one level, "#" any number of levels (including the parent).
    assert _matched(clients, proto, topic_filter, topic) is expected


@BOTH
@pytest.mark.parametrize(
    ("topic_filter", "expected"),
    [("#", False), ("+/status", False), ("+/#", False), ("$app/#", True), ("$app/+", True)],
)
def test_dollar_topics_are_not_matched_by_a_leading_wildcard(
    clients: Clients, proto: int, topic_filter: str, expected: bool
) -> None:
    # [MQTT-4.7.2-1]: a filter starting with a wildcard does not match a topic starting
    # with "$".
    assert _matched(clients, proto, topic_filter, "$app/status") is expected


@BOTH
def test_overlapping_subscriptions_give_one_message_at_the_maximum_qos(
    clients: Clients, proto: int
) -> None:
    # 5.0 [MQTT-3.3.4-2]: the message goes out respecting the maximum QoS of all matching
    # subscriptions (5.0: one message); 3.1.1 [MQTT-3.3.5-1] says the same and MAY send
    # further copies: edgebus sends one.
    sub = clients.connect(proto)
    assert sub.subscribe([("ov/#", 0), ("ov/t", 2), ("+/t", 1)]) == [0, 2, 1]
    pub = clients.connect(proto)
    pub.publish("ov/t", b"once", 2)
    pub.publish("ov/t", b"next", 2)
    first, second = sub.expect_messages(2)
    assert (first.payload, first.qos) == (b"once", 2)
    assert second.payload == b"next"


# --------------------------------------------------------------------------------------------
# Shared subscriptions (5.0 4.8.2; offered to 3.1.1 clients too)
# --------------------------------------------------------------------------------------------


def _collect(members: list[PahoClient], total: int) -> list[list[bytes]]:
    """Payloads each member received, until ``total`` arrived between them (bounded)."""
    got: list[list[bytes]] = [[] for _ in members]
    deadline = time.monotonic() + unit(3)
    while sum(map(len, got)) < total:
        if time.monotonic() > deadline:
            raise AssertionError(f"{sum(map(len, got))} of {total} shared messages: {got}")
        idle = True
        for index, member in enumerate(members):
            try:
                got[index].append(member.messages.get_nowait().payload)
                idle = False
            except queue.Empty:
                pass
        if idle:
            time.sleep(0.005)
    return got


@pytest.mark.parametrize("protos", [(4, 4, 4), (5, 5, 5), (4, 5, 4)], ids=["v311", "v5", "mixed"])
def test_shared_subscription_round_robin_among_live_members(
    clients: Clients, protos: tuple[int, ...]
) -> None:
    # 4.8.2: each message goes to one member of the group; edgebus picks live members in
    # turn, so N members get about 1/N each, and one that leaves stops receiving.
    members = [clients.connect(p) for p in protos]
    for member in members:
        assert member.subscribe("$share/g/sh/#", 1) == [1]
    plain = clients.subscriber(5, "sh/#", 1)
    pub = clients.connect(5)
    for i in range(30):
        pub.publish(f"sh/{i % 4}", f"{i}", 1)
    got = _collect(members, 30)
    assert sorted(int(p) for share in got for p in share) == list(range(30))
    assert [len(share) for share in got] == [10, 10, 10]
    assert len(plain.expect_messages(30)) == 30  # a normal subscription gets every one
    members[0].disconnect()
    for i in range(30, 50):
        pub.publish("sh/x", f"{i}", 1)
    rest = _collect(members[1:], 20)
    assert sorted(int(p) for share in rest for p in share) == list(range(30, 50))
    assert [len(share) for share in rest] == [10, 10]
    for member in members[1:]:
        member.expect_no_message()


@BOTH
def test_each_share_group_gets_its_own_copy(clients: Clients, proto: int) -> None:
    a1, a2, b1 = (clients.connect(proto) for _ in range(3))
    for client, share in ((a1, "a"), (a2, "a"), (b1, "b")):
        assert client.subscribe(f"$share/{share}/grp/t", 1) == [1]
    pub = clients.connect(proto)
    for i in range(6):
        pub.publish("grp/t", f"{i}", 1)
    group_a = _collect([a1, a2], 6)
    assert sorted(p for share in group_a for p in share) == [f"{i}".encode() for i in range(6)]
    assert [m.payload for m in b1.expect_messages(6)] == [f"{i}".encode() for i in range(6)]


@BOTH
def test_unsubscribed_member_leaves_the_group(clients: Clients, proto: int) -> None:
    stays, leaves = clients.connect(proto), clients.connect(proto)
    for member in (stays, leaves):
        assert member.subscribe("$share/g/u/t", 1) == [1]
    leaves.unsubscribe("$share/g/u/t")
    pub = clients.connect(proto)
    for i in range(4):
        pub.publish("u/t", f"{i}", 1)
    assert [m.payload for m in stays.expect_messages(4)] == [b"0", b"1", b"2", b"3"]
    leaves.expect_no_message()


@BOTH
def test_offline_member_of_a_persistent_session_does_not_take_turns(
    clients: Clients, proto: int
) -> None:
    # Live members first: a member whose client is offline gets nothing while another is
    # connected (messages are not parked in its queue).
    live = clients.connect(proto)
    away = clients.paho(proto, "away", clean_session=False)
    props = connect_props(SessionExpiryInterval=60) if proto == 5 else None
    away.connect(clean_start=False, properties=props)
    for member in (live, away):
        assert member.subscribe("$share/g/off/t", 1) == [1]
    away.disconnect()
    pub = clients.connect(proto)
    for i in range(4):
        pub.publish("off/t", f"{i}", 1)
    assert [m.payload for m in live.expect_messages(4)] == [b"0", b"1", b"2", b"3"]
    back = clients.paho(proto, "away", clean_session=False)
    assert back.connect(clean_start=False, properties=props).session_present is True
    pub.publish("off/t", b"after", 1)
    # Whoever's turn it is gets "after"; "away" got nothing queued from before.
    got = _collect([live, back], 1)
    assert [p for share in got for p in share] == [b"after"]
    back.expect_no_message()


@BOTH
def test_shared_subscription_gets_no_retained_messages(clients: Clients, proto: int) -> None:
    # 4.8.2: retained messages are not sent to a shared subscription when it is made.
    pub = clients.connect(proto)
    pub.publish("sr/t", b"retained", 1, retain=True)
    member = clients.connect(proto)
    assert member.subscribe("$share/g/sr/t", 1) == [1]
    pub.publish("sr/t", b"live", 1)
    message = member.expect_message()
    assert (message.payload, message.retain) == (b"live", False)


# --------------------------------------------------------------------------------------------
# Retained messages (3.3.1.3)
# --------------------------------------------------------------------------------------------


@BOTH
def test_retained_message_set_replaced_and_cleared(clients: Clients, proto: int) -> None:
    # [MQTT-3.3.1-5] store (replacing), [MQTT-3.3.1-6..7] a zero-byte retained message
    # clears the topic and is not stored; [MQTT-3.3.1-8]: RETAIN 0 does not touch it.
    pub = clients.connect(proto)
    pub.publish("rt/a", b"v1", 1, retain=True)
    first = clients.subscriber(proto, "rt/a", 1).expect_message()
    assert (first.payload, first.retain) == (b"v1", True)
    pub.publish("rt/a", b"v2", 1, retain=True)
    pub.publish("rt/a", b"not retained", 1, retain=False)
    second = clients.subscriber(proto, "rt/a", 1).expect_message()
    assert (second.payload, second.retain) == (b"v2", True)
    existing = clients.subscriber(proto, "rt/a", 1)
    assert existing.expect_message().payload == b"v2"
    pub.publish("rt/a", b"", 1, retain=True)
    cleared = existing.expect_message()  # processed normally for existing subscribers
    assert (cleared.payload, cleared.retain) == (b"", False)
    late = clients.connect(proto)
    assert late.subscribe([("rt/a", 1), (SENTINEL, 1)]) == [1, 1]
    pub.publish(SENTINEL, b"end", 1)
    assert late.expect_message().topic == SENTINEL


@BOTH
@pytest.mark.parametrize(
    ("topic_filter", "expected"),
    [
        ("rw/#", {"rw/a", "rw/b/c", "rw"}),
        ("rw/+", {"rw/a"}),
        ("+/a", {"rw/a", "other/a"}),
        ("#", {"rw", "rw/a", "rw/b/c", "other/a"}),
        ("$app/#", {"$app/x"}),
    ],
)
def test_retained_messages_for_wildcard_filters(
    clients: Clients, proto: int, topic_filter: str, expected: set[str]
) -> None:
    # [MQTT-3.3.1-9] (5.0) / [MQTT-3.3.1-6] (3.1.1): matching retained messages are sent
    # on subscribe, with RETAIN 1; $ topics only to filters not starting with a wildcard.
    pub = clients.connect(proto)
    for topic in ("rw", "rw/a", "rw/b/c", "other/a", "$app/x"):
        pub.publish(topic, topic, 1, retain=True)
    sub = clients.connect(proto)
    assert sub.subscribe(topic_filter, 1) == [1]
    got = sub.expect_messages(len(expected))
    assert {m.topic for m in got} == expected
    assert all(m.retain and m.payload == m.topic.encode() for m in got)
    sub.expect_no_message()


@BOTH
def test_retained_message_is_delivered_at_the_granted_qos(clients: Clients, proto: int) -> None:
    pub = clients.connect(proto)
    pub.publish("rq/t", b"q2", 2, retain=True)
    message = clients.subscriber(proto, "rq/#", 1).expect_message()
    assert (message.payload, message.qos, message.retain) == (b"q2", 1, True)
    message = clients.subscriber(proto, "rq/#", 2).expect_message()
    assert (message.payload, message.qos, message.retain) == (b"q2", 2, True)


def test_retained_counter_counts_topics(clients: Clients) -> None:
    pub = clients.connect(5)
    for i in range(3):
        pub.publish(f"rc/{i}", b"x", 1, retain=True)
    pub.publish("rc/0", b"", 1, retain=True)
    assert clients.gw.call(lambda: len(clients.gw.broker.retained)) == 2
    assert Counter(m.topic for m in clients.subscriber(5, "rc/#", 1).expect_messages(2)) == {
        "rc/1": 1,
        "rc/2": 1,
    }
