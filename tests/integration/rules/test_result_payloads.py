"""What a rule's republish sends: a payload template's ``{payload}`` is the message's
payload bytes as they are (a binary payload too, spliced among the template's text)."""

from __future__ import annotations

from pathlib import Path

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
