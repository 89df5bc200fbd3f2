"""What a rule's republish sends: a payload template's ``{payload}`` is the message's
payload bytes as they are (a binary payload too, spliced among the template's text), and
a result as JSON is valid JSON (null for a number that is not finite)."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import generate_latest

from gateway.api.metrics import new_registry, snapshot
from tests.helpers.http_sink import HttpSink
from tests.integration.broker.support import wait_until
from tests.integration.rules.support import gateway_with_clients

BINARY = b"\xff\x00\xfe\x80raw\xc3"


def test_a_payload_template_passes_binary_payload_bytes_through(tmp_path: Path) -> None:
    config = """
rules:
  - name: binary
    sql: 'SELECT payload, topic FROM "bin/#"'
    actions:
      - {type: republish, topic: "out/raw", payload: "{payload}"}
      - {type: republish, topic: "out/mixed", payload: "é<{topic}>{payload}</{topic}>"}
"""
    with gateway_with_clients(tmp_path, config) as (_gw, clients):
        watcher = clients.subscriber(5, "out/#", qos=1)
        device = clients.connect(5, "dev-1")
        device.publish("bin/1", BINARY, qos=1)
        device.publish("bin/2", "text é", qos=1)
        got = [(m.topic, m.payload) for m in watcher.expect_messages(4)]
        assert sorted(got) == sorted([
            ("out/raw", BINARY),
            ("out/mixed", "é<bin/1>".encode() + BINARY + b"</bin/1>"),
            ("out/raw", "text é".encode()),
            ("out/mixed", "é<bin/2>text é</bin/2>".encode()),
        ])  # fmt: skip


def test_results_as_json_hold_null_for_numbers_that_are_not_finite(tmp_path: Path) -> None:
    """1e308 * 10 is inf, inf - inf NaN: JSON has no word for them (Python would write
    ``Infinity``, ``NaN``, which JSON parsers refuse); the republished result and the
    webhook body hold null instead, as ``/rules/test`` shows them."""
    with HttpSink() as sink:
        config = f"""
rules:
  - name: huge
    sql: >-
      SELECT payload.big * 10 AS inf, payload.big * 10 - payload.big * 10 AS nan,
      [payload.big * -10, 2] AS list, payload.ok AS ok FROM "num/#"
    actions:
      - {{type: republish, topic: "out/json"}}
      - {{type: webhook, webhook: results}}
webhooks:
  - {{name: results, url: "{sink.url("/results")}"}}
"""
        with gateway_with_clients(tmp_path, config) as (_gw, clients):
            watcher = clients.subscriber(5, "out/#", qos=1)
            clients.connect(5, "dev-1").publish("num/1", '{"big": 1e308, "ok": 1.5}', qos=1)
            expected = {"inf": None, "nan": None, "list": [None, 2], "ok": 1.5}
            assert _strict_json(watcher.expect_message().payload) == expected
            assert _strict_json(sink.wait_for(1, "/results")[0].body) == expected


def _strict_json(data: bytes | bytearray) -> object:
    """``data`` parsed as JSON refusing ``Infinity`` and ``NaN``, as other parsers do."""

    def refuse(word: str) -> object:
        raise AssertionError(f"not JSON: {word} in {data!r}")

    return json.loads(data, parse_constant=refuse)


def test_a_republish_over_max_packet_size_is_counted_as_dropped_too_large(
    tmp_path: Path,
) -> None:
    """The rule's republish doubles a 1500-byte payload over mqtt.max_packet_size (2KB):
    refused, counted as the action's failure and in the broker's dropped too_large (the
    API's stats, /metrics), as configuration.md says."""
    config = """
mqtt: {max_packet_size: 2KB}
rules:
  - name: doubled
    sql: 'SELECT payload FROM "big/#"'
    actions: [{type: republish, topic: "out/doubled", payload: "{payload}{payload}"}]
"""
    with gateway_with_clients(tmp_path, config) as (gw, clients):
        watcher = clients.subscriber(5, ["out/#", "big/#"], qos=1)
        clients.connect(5, "dev-1").publish("big/1", b"x" * 1500, qos=1)
        assert watcher.expect_message().topic == "big/1"
        engine = gw.gateway.rules
        status = wait_until(
            lambda: (s := gw.call(engine.statuses)[0])["actions"][0]["failed"] == 1 and s,
            what="the republish counted failed",
        )
        assert status["actions"][0]["succeeded"] == 0
        assert gw.call(lambda: snapshot(gw.gateway).messages.dropped["too_large"]) == 1
        scraped = gw.call(lambda: generate_latest(new_registry(gw.gateway)).decode())
        assert 'edgebus_messages_dropped_total{reason="too_large"} 1.0' in scraped
        watcher.expect_no_message()
