from __future__ import annotations

import pytest

from broker_core.errors import MalformedPacket, ProtocolViolation
from broker_core.mqtt.topics import (
    filter_matches,
    parse_shared,
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
