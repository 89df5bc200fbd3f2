"""The ``zmq`` adapter's pure conversions: frame layouts, envelopes, XPUB demand."""

from __future__ import annotations

import pytest

from adapters.zmq.codec import (
    OnDemand,
    decode,
    encode,
    filter_intersection,
    parse_subscription,
    split_envelope,
    subscription_filter,
)
from gateway.mapping import MappingError


@pytest.mark.parametrize(
    ("layout", "frames", "topic", "payload"),
    [
        ("multipart", [b"sensors/t", b"21.5"], b"sensors/t", b"21.5"),
        ("prefix", [b"sensors/t 21.5"], b"sensors/t", b"21.5"),
        ("raw", [b"21.5"], None, b"21.5"),
    ],
)
def test_layouts_both_ways(
    layout: str, frames: list[bytes], topic: bytes | None, payload: bytes
) -> None:
    assert decode(frames, layout, b" ", ()) == (topic, payload)
    assert encode(topic or b"ignored", payload, layout, b" ") == frames


@pytest.mark.parametrize(
    ("layout", "frames"),
    [
        ("multipart", [b"only-one"]),
        ("multipart", [b"a", b"b", b"c"]),
        ("prefix", [b"a b", b"extra"]),
        ("raw", [b"a", b"b"]),
        ("prefix", [b"no-delimiter"]),
    ],
)
def test_frames_that_do_not_fit_the_layout(layout: str, frames: list[bytes]) -> None:
    with pytest.raises(MappingError):
        decode(frames, layout, b" ", ())


def test_envelopes() -> None:
    assert split_envelope([b"id", b"", b"body"]) == ([b"id", b""], [b"body"])
    assert split_envelope([b"r1", b"r2", b"", b"a", b"b"]) == ([b"r1", b"r2", b""], [b"a", b"b"])
    with pytest.raises(MappingError):
        split_envelope([b"id", b"body"])


def test_subscription_frames() -> None:
    assert parse_subscription(b"\x01robots/") == (True, b"robots/")
    assert parse_subscription(b"\x00robots/") == (False, b"robots/")
    assert parse_subscription(b"\x01") == (True, b"")
    assert parse_subscription(b"hello") is None


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("#", "robots/#", "robots/#"),
        ("robots/#", "#", "robots/#"),
        ("sensors/#", "+/kitchen", "sensors/kitchen"),
        ("sensors/#", "sensors", "sensors"),  # a/# matches a itself
        ("a/+/c", "+/b/#", "a/b/c"),
        ("+/#", "a", "a"),
        ("a/b", "a/b", "a/b"),
        ("a/b", "a/c", None),
        ("a", "a/b", None),
        ("robots/r1/#", "robots/+/pose", "robots/r1/pose"),
        ("#", "#", "#"),
    ],
)
def test_filter_intersection(a: str, b: str, expected: str | None) -> None:
    assert filter_intersection(a, b) == expected
    assert filter_intersection(b, a) == expected


@pytest.mark.parametrize(
    ("prefix", "head", "from_filter", "expected"),
    [
        (b"", "", "robots/#", "robots/#"),
        (b"robots/r1/", "", "robots/#", "robots/r1/#"),
        (b"robots/r1/po", "", "robots/#", "robots/r1/#"),  # ZeroMQ filters the rest
        (b"rob", "", "robots/#", "robots/#"),
        (b"cars/", "", "robots/#", None),
        (b"ros/robots/r1/", "ros/", "robots/#", "robots/r1/#"),  # topic: ros/{mqtt.topic}
        (b"ro", "ros/", "robots/#", "robots/#"),
        (b"zz", "ros/", "robots/#", None),
        (b"a/+/b", "", "#", None),  # no MQTT topic has a '+' level
        (b"robots/a\x00b/", "", "robots/#", None),  # nor a NUL (an invalid filter before)
        (b"robots/" + b"x" * 70_000 + b"/", "", "robots/#", None),  # nor 65 535+ bytes
        (b"robots/a\x00", "", "robots/#", "robots/#"),  # an incomplete level: ZeroMQ filters
        (b"caf\xc3", "", "#", "#"),  # cut inside a UTF-8 sequence
    ],
)
def test_subscription_filter(
    prefix: bytes, head: str, from_filter: str, expected: str | None
) -> None:
    assert subscription_filter(prefix, head, from_filter, True) == expected


def test_raw_messages_need_the_whole_filter() -> None:
    assert subscription_filter(b"anything", "", "robots/#", False) == "robots/#"


def test_on_demand_counts_subscribers() -> None:
    demand = OnDemand("", "robots/#", True)
    assert demand.subscribe(b"robots/r1/") == "robots/r1/#"
    assert demand.subscribe(b"robots/r1/") is None  # a second subscriber
    assert demand.subscribe(b"robots/r1/pose") is None  # same MQTT filter, other prefix
    assert demand.subscribe(b"cars/") is None  # nothing in from_mqtt
    assert demand.filters == ["robots/r1/#"]
    assert demand.unsubscribe(b"robots/r1/") is None
    assert demand.unsubscribe(b"robots/r1/") is None  # robots/r1/pose still needs it
    assert demand.unsubscribe(b"robots/r1/pose") == "robots/r1/#"
    assert demand.unsubscribe(b"cars/") is None
    assert demand.unsubscribe(b"never/") is None
    assert demand.filters == []
