"""Hypothesis: the decoder's contract on arbitrary input, and round trips of packets."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.errors import ProtocolError
from broker_core.mqtt.codec import Decoder
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import (
    Connect,
    Disconnect,
    Puback,
    Publish,
    Subscribe,
    SubscriptionOptions,
    TopicSubscription,
    Unsubscribe,
    Will,
)
from broker_core.mqtt.properties import Properties

FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(
    data=st.binary(max_size=300), level=st.sampled_from([None, 3, 4, 5]), chunk=st.integers(1, 64)
)
def test_arbitrary_bytes_give_packets_or_a_protocol_error(
    data: bytes, level: int | None, chunk: int
) -> None:
    decoder = Decoder(max_packet_size=256, protocol_level=level)
    try:
        for start in range(0, len(data), chunk):
            decoder.feed(data[start : start + chunk])
    except ProtocolError as exc:
        assert 0x80 <= exc.reason_code <= 0xFF


# A valid packet with random bytes spliced in: the interesting inputs are near-valid.
@FUZZ
@given(
    packet=st.sampled_from(
        [
            encode(Connect("c", 5, properties=Properties(receive_maximum=5)), 5),
            encode(
                Publish(
                    "a/b",
                    b"x",
                    1,
                    packet_id=3,
                    properties=Properties(user_properties=(("k", "v"),)),
                ),
                5,
            ),
            encode(Subscribe(2, (TopicSubscription("a/+", SubscriptionOptions(1, True)),)), 5),
        ]
    ),
    position=st.integers(0, 40),
    noise=st.binary(min_size=1, max_size=4),
)
def test_mutated_packets_give_packets_or_a_protocol_error(
    packet: bytes, position: int, noise: bytes
) -> None:
    position = min(position, len(packet))
    data = packet[:position] + noise + packet[position + len(noise) :]
    decoder = Decoder(protocol_level=None if data[:1] == b"\x10" else 5)
    try:
        decoder.feed(data)
    except ProtocolError as exc:
        assert 0x80 <= exc.reason_code <= 0xFF


text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
topic_name = (
    st.lists(
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#/"), max_size=5
        ),
        min_size=1,
        max_size=4,
    )
    .map("/".join)
    .filter(bool)
)
user_properties = st.lists(st.tuples(text, text), max_size=3).map(tuple)

publish_properties = st.builds(
    Properties,
    payload_format_indicator=st.none() | st.sampled_from([0, 1]),
    message_expiry_interval=st.none() | st.integers(0, 2**32 - 1),
    content_type=st.none() | text,
    response_topic=st.none() | topic_name,
    correlation_data=st.none() | st.binary(max_size=10),
    subscription_identifiers=st.lists(st.integers(1, 268_435_455), max_size=2).map(tuple),
    topic_alias=st.none() | st.integers(1, 65535),
    user_properties=user_properties,
)


@st.composite
def publishes(draw: st.DrawFn, level: int) -> Publish:
    qos = draw(st.integers(0, 2))
    return Publish(
        draw(topic_name),
        draw(st.binary(max_size=200)),
        qos,
        draw(st.booleans()),
        draw(st.booleans()) if qos else False,
        draw(st.integers(1, 65535)) if qos else None,
        draw(publish_properties) if level == 5 else Properties(),
    )


@FUZZ
@given(
    st.sampled_from([3, 4, 5]).flatmap(
        lambda level: st.tuples(st.just(level), st.lists(publishes(level), min_size=1, max_size=5))
    )
)
def test_publish_round_trip(args: tuple[int, list[Publish]]) -> None:
    level, packets = args
    data = b"".join(encode(p, level) for p in packets)
    assert Decoder(protocol_level=level).feed(data) == packets


@FUZZ
@given(
    client_id=text,
    level=st.sampled_from([4, 5]),
    keep_alive=st.integers(0, 65535),
    clean=st.booleans(),
    username=st.none() | text,
    password=st.none() | st.binary(max_size=20),
    will=st.none()
    | st.builds(Will, topic_name, st.binary(max_size=20), st.integers(0, 2), st.booleans()),
)
def test_connect_round_trip(
    client_id: str,
    level: int,
    keep_alive: int,
    clean: bool,
    username: str | None,
    password: bytes | None,
    will: Will | None,
) -> None:
    if level == 4 and password is not None and username is None:
        username = "u"
    packet = Connect(client_id, level, clean, keep_alive, username, password, will)
    assert Decoder().feed(encode(packet, level)) == [packet]


@FUZZ
@given(
    level=st.sampled_from([4, 5]),
    filters=st.lists(
        st.one_of(topic_name, topic_name.map(lambda t: t + "/#"), st.just("+/x")),
        min_size=1,
        max_size=4,
    ),
    packet_id=st.integers(1, 65535),
)
def test_subscribe_and_unsubscribe_round_trip(
    level: int, filters: list[str], packet_id: int
) -> None:
    sub = Subscribe(
        packet_id,
        tuple(TopicSubscription(f, SubscriptionOptions(i % 3)) for i, f in enumerate(filters)),
    )
    unsub = Unsubscribe(packet_id, tuple(filters))
    decoder = Decoder(protocol_level=level)
    assert decoder.feed(
        encode(sub, level)
        + encode(unsub, level)
        + encode(Puback(packet_id), level)
        + encode(Disconnect(), level)
    ) == [
        sub,
        unsub,
        Puback(packet_id),
        Disconnect(),
    ]
