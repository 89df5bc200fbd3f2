"""The rule bench's configuration is a valid ``rules:`` section with the rules it says."""

from __future__ import annotations

import yaml

from bench.bench_rules import rules_config
from gateway.config import parse_config


def test_rules_config_is_valid_and_shares_the_traffic() -> None:
    assert rules_config(0) == ""
    config = parse_config(rules_config(100))
    assert len(config.rules) == 100
    sources = [rule.sources() for rule in config.rules]
    assert sources[:5] == [["bench/in/0"], ["bench/in/1"], ["bench/in/2"], ["bench/in/3"],
                           ["bench/in/0"]]  # fmt: skip
    assert yaml.safe_load(rules_config(10))["rules"][9]["actions"] == [
        {"type": "log", "level": "debug"}
    ]
