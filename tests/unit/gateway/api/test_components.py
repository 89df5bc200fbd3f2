"""Adapters, bridges and rules as the API sees them, with and without their managers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gateway.api.components import (
    adapter_stat,
    adapter_statuses,
    bridge_infos,
    is_up,
    rule_infos,
    supervisor_of,
)


class Source:
    def __init__(self, statuses: list[dict[str, Any]]) -> None:
        self._statuses = statuses

    def statuses(self) -> list[dict[str, Any]]:
        return self._statuses


def test_nothing_there_is_empty() -> None:
    bare = SimpleNamespace(config=SimpleNamespace())
    assert (adapter_statuses(bare), bridge_infos(bare), rule_infos(bare)) == ([], [], [])
    assert supervisor_of(SimpleNamespace(adapters=object()), "adapters") is None


def test_adapter_statuses_keep_extra_fields_as_details() -> None:
    gateway = SimpleNamespace(
        adapters=Source(
            [
                {
                    "name": "a",
                    "type": "zmq",
                    "state": "running",
                    "last_error": "old",
                    "restarts": 1,
                    "since": 5.0,
                    "stats": {"published": 3, "flag": True},
                },
                {"name": "b"},
            ]
        )
    )
    first, second = adapter_statuses(gateway)
    assert (first.name, first.type, first.state, first.last_error, first.restarts) == (
        "a",
        "zmq",
        "running",
        "old",
        1,
    )
    assert first.details == {"since": 5.0, "stats": {"published": 3, "flag": True}}
    assert adapter_stat(first, "published") == 3
    assert adapter_stat(first, "flag") == 0
    assert adapter_stat(second, "published") == 0
    assert (second.state, second.type) == ("unknown", None)
    assert [is_up(s.state) for s in (first, second)] == [True, False]


def test_bridges_and_rules_from_the_configuration() -> None:
    item = SimpleNamespace(model_dump=lambda mode: {"name": "cloud", "type": "emqx"})
    gateway = SimpleNamespace(config=SimpleNamespace(bridges=(item,), rules=(item,)))
    [bridge] = bridge_infos(gateway)
    assert (bridge.name, bridge.type, bridge.state) == ("cloud", "emqx", "configured")
    [rule] = rule_infos(gateway)
    assert (rule.name, rule.state, rule.hits, rule.details) == (
        "cloud",
        "configured",
        None,
        {"type": "emqx"},
    )


def test_rules_from_their_engine() -> None:
    gateway = SimpleNamespace(rules=Source([{"name": "r1", "state": "running", "hits": 9}]))
    [rule] = rule_infos(gateway)
    assert (rule.name, rule.hits) == ("r1", 9)
