"""Topic ACL rules (broker_core.acl): who, which action, which topics, first match wins."""

from __future__ import annotations

from ipaddress import ip_network
from typing import Any

import pytest

from broker_core.acl import (
    PUBLISH,
    SUBSCRIBE,
    AclRule,
    RuleAcl,
    filter_covers,
    filters_overlap,
)
from broker_core.context import Origin

ALICE = Origin("mqtt", "alice-laptop", "10.1.2.3:5000", "alice")
BOB = Origin("mqtt", "bob-phone", "192.168.1.9:6000", "bob")
ANON = Origin("mqtt", "anon-1", "127.0.0.1:7000", None)
V6 = Origin("mqtt", "v6", "::1:7000", None)
DDS = Origin("dds", "vehicle", None, None)
SPOOF = Origin("mqtt", "dds:vehicle", "127.0.0.1:7001", None)  # an MQTT client id lookalike


def rule(permission: str, *topics: str, action: str = "all", **who: Any) -> AclRule:
    actions = {"publish": {PUBLISH}, "subscribe": {SUBSCRIBE}, "all": {PUBLISH, SUBSCRIBE}}
    return AclRule(
        allow=permission == "allow",
        topics=topics,
        actions=frozenset(actions[action]),
        **who,
    )


def split(text: str) -> list[str]:
    return text.split("/")


@pytest.mark.parametrize(
    ("rule_filter", "requested", "covered"),
    [
        ("#", "#", True),
        ("#", "a/b", True),
        ("#", "+/+", True),
        ("#", "$SYS/#", False),  # the rule's # does not reach $ topics
        ("$SYS/#", "$SYS/broker/+", True),
        ("sensors/#", "sensors/+/temp", True),
        ("sensors/#", "sensors", True),  # `sensors/#` matches its parent level too
        ("sensors/#", "sensors/#", True),
        ("sensors/#", "#", False),
        ("sensors/#", "+/temp", False),
        ("sensors/+/temp", "sensors/a/temp", True),
        ("sensors/+/temp", "sensors/+/temp", True),
        ("sensors/+/temp", "sensors/#", False),
        ("sensors/+/temp", "sensors/a", False),
        ("sensors/+", "sensors/a/b", False),
        ("a/b", "a/b", True),
        ("a/b", "a/+", False),
        ("a/+/#", "a/#", False),  # a/# also matches `a`
        ("+/+", "a/b", True),
        ("+", "$x", False),
    ],
)
def test_filter_covers(rule_filter: str, requested: str, covered: bool) -> None:
    assert filter_covers(split(rule_filter), split(requested)) == covered


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("secret/#", "#", True),
        ("secret/#", "+/x", True),
        ("secret/#", "secret", True),
        ("secret/#", "public/#", False),
        ("secret/+", "secret/a/b", False),
        ("secret/+", "+/a", True),
        ("a/b", "a/b/c", False),
        ("#", "$SYS/x", False),
        ("$SYS/#", "$SYS/+", True),
    ],
)
def test_filters_overlap(a: str, b: str, overlap: bool) -> None:
    assert filters_overlap(split(a), split(b)) == overlap
    assert filters_overlap(split(b), split(a)) == overlap


MATRIX_RULES = [
    rule("deny", "secret/#"),
    rule("allow", "sensors/#", action="publish"),
    rule("allow", "sensors/#", "cmd/+/set", action="subscribe"),
    rule("allow", "users/%u/#"),
    rule("allow", "devices/%c/#"),
    rule("allow", "eq all/#", action="subscribe"),
    rule("allow", "#", action="subscribe", username="bob"),
]


@pytest.mark.parametrize(
    ("origin", "action", "topic", "allowed"),
    [
        (ALICE, PUBLISH, "sensors/a/temp", True),
        (ALICE, PUBLISH, "sensors", True),
        (ALICE, PUBLISH, "cmd/a/set", False),  # subscribe-only rule
        (ALICE, SUBSCRIBE, "cmd/a/set", True),
        (ALICE, SUBSCRIBE, "cmd/+/set", True),
        (ALICE, SUBSCRIBE, "cmd/#", False),
        (ALICE, SUBSCRIBE, "sensors/+/temp", True),
        (ALICE, SUBSCRIBE, "#", False),
        (ALICE, PUBLISH, "secret/x", False),
        (ALICE, PUBLISH, "users/alice/inbox", True),
        (ALICE, PUBLISH, "users/bob/inbox", False),
        (ALICE, SUBSCRIBE, "users/alice/#", True),
        (ALICE, SUBSCRIBE, "users/+/#", False),
        (ALICE, PUBLISH, "devices/alice-laptop/state", True),
        (ALICE, PUBLISH, "devices/bob-phone/state", False),
        (ANON, PUBLISH, "users/anon-1/x", False),  # %u: no username, no match
        (ANON, PUBLISH, "devices/anon-1/x", True),
        (ALICE, SUBSCRIBE, "all/#", True),  # eq: the literal filter
        (ALICE, SUBSCRIBE, "all/x", False),
        (ALICE, PUBLISH, "all/#", False),
        (BOB, SUBSCRIBE, "#", False),  # overlaps the deny rule before it
        (BOB, SUBSCRIBE, "secret/#", False),
        (BOB, SUBSCRIBE, "+/x", False),  # ...and overlaps
        (BOB, SUBSCRIBE, "public/#", True),
        (BOB, SUBSCRIBE, "$share/g/sensors/#", True),
        (ALICE, SUBSCRIBE, "$share/g/sensors/#", True),
        (ALICE, SUBSCRIBE, "$share/g/#", False),
        (BOB, SUBSCRIBE, "$SYS/#", False),  # `#` does not cover $ topics
    ],
)
def test_matrix(origin: Origin, action: str, topic: str, allowed: bool) -> None:
    acl = RuleAcl(MATRIX_RULES, default_allow=False)
    assert acl.allows(origin, action, topic) == allowed  # type: ignore[arg-type]
    assert acl.allows(origin, action, topic) == allowed  # type: ignore[arg-type]  # cached


def test_a_deny_rule_refuses_overlapping_subscriptions_only_when_first() -> None:
    deny_first = RuleAcl([rule("deny", "secret/#"), rule("allow", "#")], default_allow=False)
    allow_first = RuleAcl([rule("allow", "#"), rule("deny", "secret/#")], default_allow=False)
    assert deny_first.allows(BOB, SUBSCRIBE, "#") is False
    assert deny_first.allows(BOB, SUBSCRIBE, "public/#") is True
    assert deny_first.allows(BOB, PUBLISH, "public/x") is True
    assert allow_first.allows(BOB, SUBSCRIBE, "#") is True
    assert allow_first.allows(BOB, SUBSCRIBE, "secret/#") is True


def test_default_decides_when_no_rule_matches() -> None:
    rules = [rule("deny", "secret/#")]
    assert RuleAcl(rules, default_allow=True).allows(ALICE, PUBLISH, "x") is True
    assert RuleAcl(rules, default_allow=False).allows(ALICE, PUBLISH, "x") is False
    assert RuleAcl(rules, default_allow=True).allows(ALICE, PUBLISH, "secret/x") is False


def test_first_match_wins() -> None:
    allow_first = [rule("allow", "a/#"), rule("deny", "a/b")]
    deny_first = [rule("deny", "a/b"), rule("allow", "a/#")]
    assert RuleAcl(allow_first, False).allows(ALICE, PUBLISH, "a/b") is True
    assert RuleAcl(deny_first, False).allows(ALICE, PUBLISH, "a/b") is False
    assert RuleAcl(deny_first, False).allows(ALICE, PUBLISH, "a/c") is True


@pytest.mark.parametrize(
    ("who", "origin", "applies"),
    [
        ({"username": "alice"}, ALICE, True),
        ({"username": "alice"}, BOB, False),
        ({"username": "alice"}, ANON, False),
        ({"clientid": "bob-phone"}, BOB, True),
        ({"clientid": "bob-phone"}, ALICE, False),
        ({"network": ip_network("10.0.0.0/8")}, ALICE, True),
        ({"network": ip_network("10.0.0.0/8")}, BOB, False),
        ({"network": ip_network("192.168.1.9/32")}, BOB, True),
        ({"network": ip_network("::1/128")}, V6, True),
        ({"network": ip_network("::1/128")}, ANON, False),
        ({"network": ip_network("10.0.0.0/8")}, DDS, False),  # no peer address
        ({"username": "alice", "network": ip_network("10.0.0.0/8")}, ALICE, True),
        ({"username": "alice", "network": ip_network("192.168.0.0/16")}, ALICE, False),
        # adapters and bridges: clientid `<protocol>:<name>`
        ({"clientid": "dds:vehicle"}, DDS, True),
        ({"clientid": "dds:vehicle"}, SPOOF, False),
        ({"clientid": "vehicle"}, DDS, False),
        ({"clientid": "foo:bar"}, Origin("mqtt", "foo:bar"), True),  # not a protocol
    ],
)
def test_who(who: dict[str, Any], origin: Origin, applies: bool) -> None:
    acl = RuleAcl([rule("allow", "t", **who)], default_allow=False)
    assert acl.allows(origin, PUBLISH, "t") == applies


def test_adapter_placeholders_use_the_instance_name() -> None:
    acl = RuleAcl([rule("allow", "adapters/%c/#")], default_allow=False)
    assert acl.allows(DDS, PUBLISH, "adapters/vehicle/speed") is True
    assert acl.allows(DDS, PUBLISH, "adapters/other/speed") is False


def test_placeholders_are_substituted_verbatim() -> None:
    # As mosquitto's pattern lines: a value with "/" fills several levels.
    acl = RuleAcl([rule("allow", "users/%u/#", "dev/%c/#")], default_allow=False)
    origin = Origin("mqtt", "c1/x", None, "a/b")
    assert acl.allows(origin, PUBLISH, "users/a/b/x") is True
    assert acl.allows(origin, PUBLISH, "users/a/x") is False
    assert acl.allows(origin, SUBSCRIBE, "dev/c1/x/#") is True
    assert acl.allows(origin, SUBSCRIBE, "dev/c1/#") is False


@pytest.mark.parametrize("username", ["a+", "#", "a/#"])
def test_a_placeholder_value_with_a_wildcard_denies_from_its_topic_on(username: str) -> None:
    # mosquitto denies a client with + or # in its username or client id every pattern.
    rules = [
        rule("allow", "early/#"),
        rule("allow", "mid/#", "users/%u/#"),
        rule("allow", "#"),
        rule("allow", "$SYS/#"),
    ]
    acl = RuleAcl(rules, default_allow=True)
    origin = Origin("mqtt", "c", None, username)
    assert acl.allows(origin, PUBLISH, "early/x") is True  # decided before
    assert acl.allows(origin, PUBLISH, "mid/x") is True  # a topic before it in its rule
    assert acl.allows(origin, PUBLISH, "users/a/x") is False
    assert acl.allows(origin, PUBLISH, "other") is False  # rules after it are not reached
    assert acl.allows(origin, PUBLISH, "$SYS/x") is False
    assert acl.allows(origin, SUBSCRIBE, "users/+/x") is False
    assert acl.allows(origin, SUBSCRIBE, "other/#") is False
    other = Origin("mqtt", "c", None, "alice")
    assert acl.allows(other, PUBLISH, "other") is True


def test_a_placeholder_without_a_value_does_not_match() -> None:
    acl = RuleAcl([rule("allow", "users/%u/#"), rule("allow", "x")], default_allow=False)
    for username in (None, ""):
        origin = Origin("mqtt", "c", None, username)
        assert acl.allows(origin, SUBSCRIBE, "users/+/x") is False
        assert acl.allows(origin, PUBLISH, "x") is True  # the next rule still decides


def test_publish_wildcards_and_dollar_topics() -> None:
    acl = RuleAcl([rule("allow", "#"), rule("allow", "$SYS/+/x")], default_allow=False)
    assert acl.allows(ALICE, PUBLISH, "a/b/c") is True
    assert acl.allows(ALICE, PUBLISH, "$SYS/a/x") is True
    assert acl.allows(ALICE, PUBLISH, "$SYS/a/y") is False


def test_reload_replaces_rules_and_forgets_decisions() -> None:
    acl = RuleAcl([rule("allow", "a")], default_allow=False)
    assert acl.allows(ALICE, PUBLISH, "a") is True
    acl.reload([rule("deny", "a")], default_allow=True)
    assert acl.allows(ALICE, PUBLISH, "a") is False
    assert acl.allows(ALICE, PUBLISH, "b") is True


def test_caches_are_bounded() -> None:
    acl = RuleAcl([rule("allow", "t/#")], default_allow=False, cache_size=8)
    for i in range(100):
        assert acl.allows(Origin("mqtt", f"c{i}"), PUBLISH, f"t/{i}") is True
    assert len(acl._decisions) <= 8
    assert len(acl._per_origin) <= 8
