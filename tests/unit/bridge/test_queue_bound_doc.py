"""docs/broker.md's table of bounds has the bridge queue's bound, with the defaults and
the overflow policy of the configuration model, and says what a full queue does to
acknowledged messages; docs/bridges.md says it too."""

from __future__ import annotations

from pathlib import Path

from gateway.config.models.bridges import BridgeQueueConfig

ROOT = Path(__file__).resolve().parents[3]


def _row() -> str:
    text = (ROOT / "docs" / "broker.md").read_text(encoding="utf-8")
    (row,) = [
        line
        for line in text.splitlines()
        if line.startswith("| ") and "`bridges[].queue.max_messages`" in line
    ]
    return row


def test_the_table_of_bounds_has_the_bridge_queue() -> None:
    row = _row()
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    assert len(cells) == 6, cells  # bound, key, default, when reached, reason code, metric
    defaults = BridgeQueueConfig()
    assert defaults.max_messages == 1_000_000 and "1,000,000 messages" in cells[2]
    assert defaults.max_bytes == 1024**3 and "1 GiB" in cells[2]
    assert defaults.overflow == "drop_oldest" and "`drop_oldest` (default)" in cells[3]
    assert "`drop_new`" in cells[3] and "acknowledged" in cells[3]
    assert 'stat="dropped_overflow"' in cells[5]


def test_bridges_md_says_a_full_queue_drops_acknowledged_messages() -> None:
    text = " ".join((ROOT / "docs" / "bridges.md").read_text(encoding="utf-8").split())
    assert "So a full queue loses messages that were acknowledged" in text


def test_the_table_of_bounds_has_the_bridge_inbound_qos2_records() -> None:
    text = (ROOT / "docs" / "broker.md").read_text(encoding="utf-8")
    (row,) = [
        line
        for line in text.splitlines()
        if line.startswith("| ") and "inbound QoS 2 records" in line
    ]
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    assert len(cells) == 6, cells  # bound, key, default, when reached, reason code, metric
    assert "`bridges[].connect_properties.receive_maximum`" in cells[1]
    assert "65,535" in cells[2]
    assert 'stat="inbound_qos2_pending"' in cells[5]
