"""What readers get: the derived fields, JSON lines and the Arrow stream, from one log."""

from __future__ import annotations

import base64
import datetime
import json
from pathlib import Path

import pyarrow as pa
import pytest

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from spark_sink.arrow import SCHEMA, arrow_stream
from spark_sink.fields import TopicMatcher, meta_map, payload_json, properties_map
from spark_sink.jsonl import json_lines
from spark_sink.schema import COLUMNS
from spark_sink.segments import StreamLog

PROPS = Properties(
    payload_format_indicator=1,
    message_expiry_interval=60,
    content_type="application/json",
    response_topic="reply/me",
    correlation_data=b"\x00\x01",
    user_properties=(("unit", "C"), ("unit", "K"), ("site", "lyon")),
)


def test_payload_json_is_the_text_of_a_json_document() -> None:
    assert payload_json(b'{"t": 21.5}') == '{"t": 21.5}'
    assert payload_json(b"[1, 2]") == "[1, 2]"
    assert payload_json(b"21.5") == "21.5"
    assert payload_json('"é"'.encode()) == '"é"'
    for not_json in (b"", b"hello", b"{broken", b"\xff\xfe", b"[" * 100_000):
        assert payload_json(not_json) is None


def test_properties_become_string_pairs() -> None:
    assert properties_map(b"") == []
    assert dict(properties_map(PROPS.encoded())) == {
        "payload_format_indicator": "1",
        "message_expiry_interval": "60",
        "response_topic": "reply/me",
        "correlation_data": base64.b64encode(b"\x00\x01").decode(),
        "unit": "K",  # a repeated user property keeps its last value
        "site": "lyon",
    }
    assert properties_map(b"\x05\x26\x00") == []  # not a property block: nothing


def test_meta_becomes_string_pairs() -> None:
    assert meta_map("") == []
    assert meta_map('{"dds.type": "gw.Reading", "someip.service_id": 4660, "x": [1]}') == [
        ("dds.type", "gw.Reading"),
        ("someip.service_id", "4660"),
        ("x", "[1]"),
    ]


def test_the_topic_matcher_follows_mqtt_rules() -> None:
    matches = TopicMatcher("sensors/+/temp")
    assert matches("sensors/a/temp") and not matches("sensors/a/b/temp")
    assert not TopicMatcher("#")("$SYS/broker/uptime")


@pytest.fixture
def log(tmp_path: Path) -> StreamLog:
    log = StreamLog(tmp_path, fsync="never")
    log.open()
    log.append(
        [
            Context("sensors/a/temp", b'{"t": 1}', 1, True, PROPS, Origin("mqtt", "dev-1")),
            Context(
                "robots/r1/odom",
                b"\x00\xff",
                0,
                False,
                origin=Origin("loopback", "units"),
                meta={"loopback.source": "raw/r1", "n": 2},
                received_at=1_700_000_000_123_456_789,
            ),
        ]
    )
    log.append(
        [
            Context(f"sensors/{n}/temp", b"%d" % n, 0, False, origin=Origin("mqtt", "d"))
            for n in range(100)
        ]
    )
    return log


def test_json_lines(log: StreamLog) -> None:
    lines = b"".join(json_lines(log.slices(0, 102), 1000)).decode().splitlines()
    assert len(lines) == 102
    first, second = json.loads(lines[0]), json.loads(lines[1])
    assert list(first) == [name for name, _ in COLUMNS]
    assert first["offset"] == 0 and first["qos"] == 1 and first["retain"] is True
    assert (first["protocol"], first["source"], first["topic"]) == (
        "mqtt",
        "dev-1",
        "sensors/a/temp",
    )
    assert first["content_type"] == "application/json"
    assert first["payload_json"] == '{"t": 1}'
    assert first["properties"]["site"] == "lyon"
    assert second["ts"] == "2023-11-14T22:13:20.123456Z"
    assert base64.b64decode(second["payload"]) == b"\x00\xff"
    assert second["payload_json"] is None and second["content_type"] is None
    assert second["meta"] == {"loopback.source": "raw/r1", "n": "2"}
    # limit and topic filter
    limited = b"".join(json_lines(log.slices(0, 102), 3, TopicMatcher("sensors/#")))
    assert [json.loads(line)["offset"] for line in limited.splitlines()] == [0, 2, 3]


def test_arrow_stream(log: StreamLog) -> None:
    table = pa.ipc.open_stream(b"".join(arrow_stream(log.slices(0, 102), 1000))).read_all()
    assert table.schema.equals(SCHEMA)
    assert table.column_names == [name for name, _ in COLUMNS]
    assert table.num_rows == 102
    rows = table.to_pylist()
    assert rows[0]["offset"] == 0 and rows[0]["retain"] is True and rows[0]["qos"] == 1
    assert rows[0]["payload_json"] == '{"t": 1}'
    assert dict(rows[0]["properties"])["unit"] == "K"
    assert rows[1]["ts"] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=datetime.UTC)
    assert (rows[1]["protocol"], rows[1]["payload"]) == ("loopback", b"\x00\xff")
    assert dict(rows[1]["meta"]) == {"loopback.source": "raw/r1", "n": "2"}
    assert rows[1]["content_type"] is None and rows[1]["payload_json"] is None
    assert [r["offset"] for r in rows] == list(range(102))
    # JSON lines and Arrow say the same
    lines = b"".join(json_lines(log.slices(0, 102), 1000)).decode().splitlines()
    assert [json.loads(line)["payload_json"] for line in lines] == [r["payload_json"] for r in rows]


def test_arrow_ranges_limits_and_filters(log: StreamLog) -> None:
    def offsets(start: int, end: int, limit: int, topic: str | None = None) -> list[int]:
        matcher = TopicMatcher(topic) if topic else None
        data = b"".join(arrow_stream(log.slices(start, end), limit, matcher))
        return pa.ipc.open_stream(data).read_all().column("offset").to_pylist()  # type: ignore[no-any-return]

    assert offsets(1, 5, 1000) == [1, 2, 3, 4]
    assert offsets(0, 102, 3) == [0, 1, 2]
    assert offsets(0, 102, 1000, "sensors/7/#") == [9]
    assert offsets(0, 102, 1000, "robots/#") == [1]
    assert offsets(0, 102, 1000, "nothing/#") == []
    assert offsets(50, 50, 1000) == []  # an empty range: the schema only


def test_the_spark_source_reads_json_lines_as_it_reads_arrow(log: StreamLog) -> None:
    """A gateway without pyarrow serves JSON lines only: the source builds the same
    Arrow batches from them."""
    from spark_sink.datasource import _from_json_lines

    lines = b"".join(json_lines(log.slices(0, 102), 1000)).splitlines(keepends=True)
    from_lines = pa.Table.from_batches(list(_from_json_lines(iter(lines), SCHEMA, 40)))
    from_arrow = pa.ipc.open_stream(b"".join(arrow_stream(log.slices(0, 102), 1000))).read_all()
    assert from_lines.to_pylist() == from_arrow.to_pylist()


NOT_RFC_8259 = (b"NaN", b'{"value": NaN}', b"-Infinity", b"[1, Infinity]")


def test_payload_json_refuses_what_rfc_8259_does_not_allow() -> None:
    for payload in NOT_RFC_8259:
        assert payload_json(payload) is None, payload
    assert payload_json(b'{"value": "NaN"}') == '{"value": "NaN"}'  # a string is fine


def test_no_payload_json_for_nan_or_infinity_in_either_format(tmp_path: Path) -> None:
    log = StreamLog(tmp_path / "log", fsync="never")
    log.open()
    log.append(
        [Context("t", payload, 0, False, origin=Origin("mqtt", "d")) for payload in NOT_RFC_8259]
    )
    lines = b"".join(json_lines(log.slices(0, 4), 10)).decode().splitlines()
    assert [json.loads(line)["payload_json"] for line in lines] == [None] * 4
    table = pa.ipc.open_stream(b"".join(arrow_stream(log.slices(0, 4), 10))).read_all()
    assert table.column("payload_json").to_pylist() == [None] * 4
    log.close()
