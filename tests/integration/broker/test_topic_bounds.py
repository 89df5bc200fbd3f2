"""Bounds on what a topic costs the broker's tries and caches, over real sockets.

- ``mqtt.max_topic_levels`` (128): a deeper SUBSCRIBE filter gets SUBACK 0x8F (3.1.1:
  0x80), a deeper PUBLISH PUBACK 0x90 and is neither routed nor retained, a CONNECT with
  a deeper will is refused (CONNACK 0x90; 3.1.1: 3), a component's deeper publish is
  refused (0x90); each counted in
  limit ``topic_levels``. (Without it one client's
  filters of 65,000 levels took 16 MB each.)
- ``mqtt.max_retained_bytes`` counts each level of a retained topic (``LEVEL_BYTES``):
  a deep topic cannot hold 230 times what it counts.
- The router's match cache stays within its byte bound however long the topics
  published (it held 8,192 topics of 65 KB: 0.5 GB).
"""

from __future__ import annotations

from functools import partial

import pytest

from broker_core import retained as retained_store
from broker_core import router as router_cache
from tests.helpers.gateway import RunningGateway
from tests.integration.broker.support import Clients, wait_until

TOPIC_FILTER_INVALID = 0x8F
TOPIC_NAME_INVALID = 0x90
QUOTA_EXCEEDED = 0x97
ACCEPTED = (0x00, 0x10)  # Success, No matching subscribers
LEVELS = 128  # the default of mqtt.max_topic_levels
LEVEL_BYTES = 240  # what a retained topic level counts (broker_core.retained.LEVEL_BYTES)


def deep(first: str, levels: int) -> str:
    """A topic of ``levels`` levels: ``first`` and empty ones."""
    return first + "/" * (levels - 1)


def hits(gw: RunningGateway, limit: str) -> int:
    return gw.call(lambda: gw.broker.counters.limit_hits.get(limit, 0))


def test_a_filter_deeper_than_max_topic_levels_is_refused(
    gw: RunningGateway, clients: Clients
) -> None:
    v5 = clients.raw_connect(5, "deep-v5")
    suback = v5.subscribe(
        [
            (deep("x", LEVELS), 0),
            (deep("y", LEVELS + 1), 0),
            ("$share/g/" + deep("z", LEVELS + 1), 0),
            (deep("w", 65_000), 0),
        ]
    )
    assert suback.reason_codes == [0, TOPIC_FILTER_INVALID, TOPIC_FILTER_INVALID,
                                   TOPIC_FILTER_INVALID]  # fmt: skip
    v311 = clients.raw_connect(4, "deep-v311")
    assert v311.subscribe([(deep("y", LEVELS + 1), 1)]).reason_codes == [0x80]
    assert gw.call(lambda: gw.broker.router.count) == 1  # only the 128-level filter
    assert hits(gw, "topic_levels") == 4


def test_a_topic_deeper_than_max_topic_levels_is_not_published(
    gw: RunningGateway, clients: Clients
) -> None:
    reader = clients.raw_connect(5, "reader")
    assert reader.subscribe([("#", 1)]).reason_codes == [1]
    publisher = clients.raw_connect(5, "publisher")
    refused = publisher.publish(deep("a", LEVELS + 1), b"deep", qos=1, retain=True)
    assert refused is not None and refused.reason_code == TOPIC_NAME_INVALID
    refused = publisher.publish(deep("b", 65_000), b"deeper", qos=2, retain=True)
    assert refused is not None and refused.reason_code == TOPIC_NAME_INVALID
    publisher.publish(deep("c", LEVELS + 1), b"qos0")  # no acknowledgement: dropped
    ok = publisher.publish(deep("d", LEVELS), b"fits", qos=1, retain=True)
    assert ok is not None and ok.reason_code in ACCEPTED
    # Messages from one publisher arrive in order: the refused ones would come first.
    received = reader.recv_publish()
    assert (received.topic, received.payload) == (deep("d", LEVELS), b"fits")
    assert gw.call(lambda: [c.topic for c in gw.broker.retained]) == [deep("d", LEVELS)]
    assert hits(gw, "topic_levels") == 3


@pytest.mark.parametrize(
    "will_topic",
    [
        deep("w", LEVELS + 1),
        deep("w", 65_000),
        "$delayed/10/" + deep("w", LEVELS + 1),  # the topic it names counts
        "$delayed/soon/w/x",  # no valid $delayed/ topic
        "$delayed/10/",
    ],
    ids=["129-levels", "65000-levels", "delayed-129-levels", "delayed-bad-delay", "delayed-empty"],
)
def test_a_will_that_could_not_be_published_refuses_the_connect(
    gw: RunningGateway, clients: Clients, will_topic: str
) -> None:
    # MQTT 5.0 3.2.2.2: 0x90 Topic Name invalid, "the Will Topic Name is not malformed,
    # but is not accepted by this Server". 3.1.1 has no such code (3.1.4: a CONNECT
    # failing further checks gets a non-zero return code): 3, Server unavailable, as for
    # the other MQTT 5 refusals it cannot say. Was: accepted, and the will refused only
    # when it was due, the client never told.
    v5 = clients.raw(5)
    connack = v5.do_connect("deep-will", proto_ver=5, will_topic=will_topic,
                            will_payload=b"gone", expect_code=TOPIC_NAME_INVALID)  # fmt: skip
    assert connack.session_present is False
    v5.expect_closed(packet_type=None)
    v311 = clients.raw(4)
    v311.do_connect("deep-will-311", proto_ver=4, will_topic=will_topic,
                    will_payload=b"gone", expect_code=3)  # fmt: skip
    v311.expect_closed(packet_type=None)
    assert gw.call(lambda: gw.broker.sessions.get("deep-will")) is None
    assert gw.call(lambda: gw.broker.stats().will_bytes) == 0
    if "soon" not in will_topic and not will_topic.endswith("/10/"):
        assert hits(gw, "topic_levels") == 2


def test_a_will_of_max_topic_levels_is_published(gw: RunningGateway, clients: Clients) -> None:
    reader = clients.raw_connect(5, "will-reader")
    assert reader.subscribe([("#", 0)]).reason_codes == [0]
    for proto in (5, 4):
        will = clients.raw(proto)
        will.do_connect(f"will-{proto}", proto_ver=proto, will_topic=deep("w", LEVELS),
                        will_payload=b"gone")  # fmt: skip
        will.abort()
        received = reader.recv_publish()
        assert (received.topic, received.payload) == (deep("w", LEVELS), b"gone")
    assert hits(gw, "topic_levels") == 0


def test_a_component_publish_deeper_than_max_topic_levels_is_refused(
    gw: RunningGateway, clients: Clients
) -> None:
    reader = clients.raw_connect(5, "hub-reader")
    assert reader.subscribe([("#", 0)]).reason_codes == [0]
    hub = gw.call(lambda: gw.gateway.hub.client("zmq", "deep"))
    codes: list[int] = []
    for topic in (deep("z", LEVELS + 1), deep("z", LEVELS)):
        context = hub.context(topic, b"1", 1, True)
        gw.call(partial(hub.publish, context, codes.append))
    wait_until(lambda: len(codes) == 2, what="both publishes decided")
    assert codes[0] == TOPIC_NAME_INVALID
    assert codes[1] in ACCEPTED
    assert "max_topic_levels" in hub.refusal
    assert hub.denied == 1
    received = reader.recv_publish()
    assert received.topic == deep("z", LEVELS)
    assert hits(gw, "topic_levels") == 1


@pytest.mark.gateway_config(f"mqtt:\n  max_retained_bytes: {20 * LEVEL_BYTES}\n")
def test_retained_bytes_count_the_levels_of_the_topic(gw: RunningGateway, clients: Clients) -> None:
    publisher = clients.raw_connect(5, "retainer")
    # 3 levels and 6 characters: counted 3 * LEVEL_BYTES + 6 + 1.
    ok = publisher.publish("r/a/b", b"1", qos=1, retain=True)
    assert ok is not None and ok.reason_code in ACCEPTED
    assert gw.call(lambda: gw.broker.stats().retained_bytes) == 3 * LEVEL_BYTES + 5 + 1
    # 20 levels of 40 characters: what its trie nodes cost passes the bound.
    refused = publisher.publish("r" + "/a" * 19, b"1", qos=1, retain=True)
    assert refused is not None and refused.reason_code == QUOTA_EXCEEDED
    assert hits(gw, "retained_bytes") == 1
    assert gw.call(lambda: len(gw.broker.retained)) == 1
    assert getattr(retained_store, "LEVEL_BYTES", None) == LEVEL_BYTES


def test_the_router_cache_stays_within_its_byte_bound(gw: RunningGateway, clients: Clients) -> None:
    """250 QoS 1 messages to distinct 60 KB topics nobody subscribed to: 15 MB of topic
    names, more than the cache may hold (8 MiB), so it is emptied on the way."""
    publisher = clients.raw_connect(5, "long-topics")
    for i in range(250):
        ack = publisher.publish(f"{i:04d}" + "t" * 60_000, b"", qos=1)
        assert ack is not None and ack.reason_code == 0x10

    def cache() -> tuple[int, int, int]:
        held = sum(len(topic) for topic in gw.broker.router._cache)
        assert held > 0
        stats = gw.broker.stats()
        return stats.router_cache_entries, stats.router_cache_bytes, held

    entries, estimated, held = gw.call(cache)
    assert 0 < entries <= router_cache._CACHE_LIMIT
    assert held <= estimated <= router_cache._CACHE_BYTES
    assert hits(gw, "router_cache") >= 1
    # A short topic's subscribers are still cached and found.
    reader = clients.raw_connect(5, "short-reader")
    assert reader.subscribe([("s/+", 0)]).reason_codes == [0]
    publisher.publish("s/1", b"x")
    assert reader.recv_publish().topic == "s/1"
    assert gw.call(lambda: "s/1" in gw.broker.router._cache)
