from __future__ import annotations

import pytest

from broker_core.errors import MalformedPacket, ProtocolViolation
from broker_core.mqtt.topics import (
    filter_matches,
    parse_shared,
    topic_name_problem,
    validate_topic_filter,
    validate_topic_name,
)


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("sport/tennis/player1/#", "sport/tennis/player1", True),
        ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
        ("sport/#", "sport", True),
        ("#", "anything/at/all", True),
        ("sport/tennis/+", "sport/tennis/player1", True),
        ("sport/tennis/+", "sport/tennis/player1/ranking", False),
        ("sport/+", "sport", False),
        ("sport/+", "sport/", True),
        ("+/+", "/finance", True),
        ("/+", "/finance", True),
        ("+", "/finance", False),
        ("#", "$SYS/uptime", False),
        ("+/monitor/Clients", "$SYS/monitor/Clients", False),
        ("$SYS/#", "$SYS/monitor/Clients", True),
        ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
        ("a/b", "a/b", True),
        ("a/b", "A/b", False),
    ],
)
def test_filter_matches_spec_examples(topic_filter: str, topic: str, expected: bool) -> None:
    assert filter_matches(topic_filter, topic) is expected


@pytest.mark.parametrize(
    "topic_filter", ["#", "a/#", "+", "+/+/#", "a/+/b", "/", "$SYS/#", "a b/c"]
)
def test_valid_filters(topic_filter: str) -> None:
    validate_topic_filter(topic_filter)


@pytest.mark.parametrize("topic_filter", ["", "a/#/b", "a#", "#a", "a/b+", "+a/b", "##"])
def test_invalid_filters(topic_filter: str) -> None:
    with pytest.raises(MalformedPacket):
        validate_topic_filter(topic_filter)


@pytest.mark.parametrize("topic", ["a/+", "#", "a/#"])
def test_wildcards_in_topic_names(topic: str) -> None:
    with pytest.raises(ProtocolViolation):
        validate_topic_name(topic)


def test_shared_subscription_parsing() -> None:
    assert parse_shared("a/b") is None
    assert parse_shared("$share/g1/a/+") == ("g1", "a/+")
    for bad in ("$share/", "$share/g", "$share//a", "$share/g#/a", "$share/g/a/#/b"):
        with pytest.raises(MalformedPacket):
            parse_shared(bad)


@pytest.mark.parametrize(
    "topic",
    [
        "a",
        "/",
        "a/b",
        "$SYS/x",
        "é" * 32767 + "a",
        "a" * 65535,
        "日本/温度",
        "😀",
        "$share",
        "$shared/x",
    ],
)
def test_valid_topic_names(topic: str) -> None:
    assert topic_name_problem(topic) is None


@pytest.mark.parametrize(
    ("topic", "problem"),
    [
        ("", "empty"),
        ("a" * 65536, "at most 65535 bytes of UTF-8 (this one has 65536)"),
        ("é" * 32768, "at most 65535 bytes of UTF-8 (this one has 65536)"),  # 2 bytes each
        ("a/\ud800", "well-formed UTF-8"),  # a lone surrogate: UTF-8 cannot encode it
        ("a/\0", "NUL"),
        ("a/+", "wildcards"),
        ("a/#", "wildcards"),
        ("$share/g/x", "$share/"),  # a shared subscription's form (4.8.2)
        ("$share/", "$share/"),
    ],
)
def test_invalid_topic_names(topic: str, problem: str) -> None:
    found = topic_name_problem(topic)
    assert found is not None
    assert problem in found
