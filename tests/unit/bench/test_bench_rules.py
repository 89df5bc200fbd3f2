"""The rule bench's configuration is a valid ``rules:`` section with the rules it says:
the publishers' topics divided among the rules, each message reaching one rule."""

from __future__ import annotations

import yaml

from bench.bench_rules import PUBLISHERS, rules_config
from gateway.config import parse_config


def test_rules_config_is_valid_and_divides_the_traffic() -> None:
    assert rules_config(0) == ""
    topics = [f"bench/in/{k:02d}" for k in range(PUBLISHERS)]
    for count in (10, 100):
        config = parse_config(rules_config(count))
        assert len(config.rules) == count
        sources = [rule.sources() for rule in config.rules]
        assert sorted(s for rule in sources for s in rule) == topics  # each topic once
        assert {len(rule) for rule in sources} == {PUBLISHERS // count}
    assert [rule.sources() for rule in parse_config(rules_config(10)).rules][1] == [
        f"bench/in/{k}" for k in range(10, 20)
    ]
    assert yaml.safe_load(rules_config(10))["rules"][9]["actions"] == [
        {"type": "log", "level": "debug"}
    ]
