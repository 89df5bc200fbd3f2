"""A republish topic rendered from the result, through a running gateway and paho
clients: NULL is no topic level (the action fails, counted and logged, nothing is
published on ``room/None``), a boolean renders as JSON has it, a ``+`` fails the same
way; payload templates keep rendering NULL as nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.integration.broker.support import wait_until
from tests.integration.rules.support import gateway_with_clients

CONFIG = """
rules:
  - name: rooms
    sql: 'SELECT payload.room AS room FROM "n/#"'
    actions:
      - {type: republish, topic: "room/{room}", qos: 1, payload: '[{room}]'}
  - name: plus
    sql: 'SELECT payload.room AS room FROM "p/#"'
    actions: [{type: republish, topic: "plus/{room}", qos: 1}]
"""


def _actions(gw: Any) -> dict[str, tuple[int, int]]:
    """(succeeded, failed) of each rule's one action."""
    statuses = gw.call(gw.gateway.rules.statuses)
    return {s["name"]: (s["actions"][0]["succeeded"], s["actions"][0]["failed"]) for s in statuses}


def test_null_is_no_topic_level_and_booleans_render_as_json(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="gateway.rules"),
        gateway_with_clients(tmp_path, CONFIG) as (gw, clients),
    ):
        watcher = clients.subscriber(5, ["room/#", "plus/#"], qos=1)
        device = clients.connect(5, "dev")
        device.publish("n/missing", json.dumps({"x": 1}), qos=1)  # room: NULL
        device.publish("n/text", b"not json", qos=1)  # payload.room: NULL
        device.publish("n/null", json.dumps({"room": None}), qos=1)
        device.publish("n/true", json.dumps({"room": True}), qos=1)
        device.publish("n/kitchen", json.dumps({"room": "kitchen"}), qos=1)
        device.publish("p/1", json.dumps({"room": "a+b"}), qos=1)
        counted = wait_until(
            lambda: (c := _actions(gw)) == {"rooms": (2, 3), "plus": (0, 1)} and c,
            what=f"every result acted on (last: {_actions(gw)})",
        )
        assert counted == {"rooms": (2, 3), "plus": (0, 1)}
        # Every action ran: what was published has been routed to the watcher.
        got = [(m.topic, m.payload) for m in watcher.expect_messages(2)]
        assert got == [("room/true", b"[true]"), ("room/kitchen", b"[kitchen]")]
        logged = [r.getMessage() for r in caplog.records if r.name == "gateway.rules.actions"]
        assert logged == [
            "rule rooms: action republish failed (1 so far): topic 'room/{room}':"
            " field 'room' is NULL: a topic level cannot be empty",
            "rule plus: action republish failed (1 so far): topic 'plus/{room}':"
            " field 'room' = 'a+b' cannot be a topic level",
        ]
