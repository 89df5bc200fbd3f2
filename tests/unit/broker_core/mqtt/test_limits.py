"""The bounds the sans-I/O layer enforces: properties per packet, the read budget, and
the topic alias memory (issue 8.3, 8.4)."""

from __future__ import annotations

import pytest

from broker_core.mqtt.codec import Decoder
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.packets import Publish
from broker_core.mqtt.properties import PropertyLimitExceeded, PropertyLimits
from broker_core.mqtt.session_state import Counters, SessionState
from tests.helpers import mqtt_builder as mb
from tests.unit.broker_core.mqtt.test_session import T0, connected, parse_all

USER = ("user_property", ("k", "v"))


def publish_with(count: int) -> bytes:
    return mb.gen_publish("t", b"x", proto_ver=5, properties=mb.props(*[USER] * count))


def test_property_count_and_size_bounds() -> None:
    decoder = Decoder(protocol_level=5, property_limits=PropertyLimits(count=3, size=1000))
    assert len(decoder.feed(publish_with(3))) == 1
    with pytest.raises(PropertyLimitExceeded) as count:
        decoder.feed(publish_with(4))
    assert count.value.reason_code == 0x97
    small = Decoder(protocol_level=5, property_limits=PropertyLimits(count=100, size=20))
    with pytest.raises(PropertyLimitExceeded):
        small.feed(publish_with(5))  # 35 bytes of properties


def test_a_session_over_the_property_bound_disconnects_with_quota_exceeded() -> None:
    counters = Counters()
    limits = ServerLimits(max_packet_properties=2)
    session = connected(5, limits, state=SessionState("c", limits, counters))
    session.receive_data(publish_with(3), T0)
    [disconnect] = parse_all(session.data_to_send(), 5)
    assert (disconnect.type, disconnect.reason_code) == (mb.PacketType.DISCONNECT, 0x97)
    assert counters.limit_hits["packet_properties"] == 1


def test_the_read_budget_hands_out_the_same_packets_in_slices() -> None:
    stream = b"".join(mb.gen_publish(f"t/{n}", b"p" * n) for n in range(40))
    everything = Decoder(protocol_level=4).feed(stream)
    budgeted = Decoder(protocol_level=4, read_budget=64)
    got = budgeted.feed(stream)
    turns = 1
    while budgeted.input_pending:
        got += budgeted.feed(b"")
        turns += 1
    assert [p.topic for p in got if isinstance(p, Publish)] == [
        p.topic for p in everything if isinstance(p, Publish)
    ]
    assert turns > 10
    one = Decoder(protocol_level=4, read_budget=1)  # at least one packet per feed
    assert len(one.feed(stream)) == 1


def test_topic_alias_memory_is_bounded_and_given_back() -> None:
    counters = Counters()
    limits = ServerLimits(max_topic_alias_bytes=30)
    session = connected(5, limits, state=SessionState("c", limits, counters))
    for alias, topic in ((1, "a" * 20), (1, "b" * 25), (2, "c" * 5)):
        session.receive_data(
            mb.gen_publish(topic, b"", proto_ver=5, properties={"topic_alias": alias}), T0
        )
    assert counters.topic_alias_bytes == 30
    session.receive_data(mb.gen_publish("d", b"", proto_ver=5, properties={"topic_alias": 3}), T0)
    [disconnect] = parse_all(session.data_to_send(), 5)
    assert (disconnect.type, disconnect.reason_code) == (mb.PacketType.DISCONNECT, 0x97)
    assert counters.limit_hits["topic_alias_bytes"] == 1
    assert counters.topic_alias_bytes == 0  # released with the connection
