"""``queue.max_bytes`` counts each queued message's remote topic and payload, and the
configuration reference (generated from the model's description) says so."""

from __future__ import annotations

from pathlib import Path

from bridge.mapping import Outbound
from broker_core.context import Context
from gateway.config.docgen import render_reference
from gateway.config.models.bridges import BridgeConfig

ROOT = Path(__file__).resolve().parents[3]


def _row(text: str) -> str:
    (row,) = [
        line for line in text.splitlines() if line.startswith("| `bridges[].queue.max_bytes`")
    ]
    return row


def test_the_reference_says_max_bytes_counts_the_topic_and_the_payload() -> None:
    row = _row(render_reference())
    assert "Bytes of payload" not in row
    assert "topic" in row and "payload" in row
    assert _row((ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")) == row


def test_a_queued_message_counts_its_remote_topic_and_its_payload() -> None:
    config = BridgeConfig.model_validate(
        {
            "name": "cloud",
            "server": "127.0.0.1:1883",
            "forwards": [{"local": "a/{rest#}", "remote": "remote/longer/{rest}", "qos": 1}],
        }
    )
    queued = Outbound(config).route(Context("a/b", b"12345", 1, False))
    assert queued is not None
    assert queued.topic == "remote/longer/b"
    assert queued.size == len("remote/longer/b") + 5
