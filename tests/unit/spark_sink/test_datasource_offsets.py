"""The streaming source's offsets when the gateway's log is replaced or reset
(``spark_sink.datasource``), against a fake gateway: no Spark session, no sockets.

A query that read offsets ``[0, 30)`` of one log, then finds another log (a reload
changed ``stream.path``, ``data_dir`` was wiped) must not go on at offset 30 of it: that
skips the new log's ``[0, 30)`` without a word.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark_sink import datasource
from spark_sink.datasource import DataLossError, EdgebusStreamReader, OffsetRange
from spark_sink.options import SourceOptions
from spark_sink.segments import StreamLog


class FakeGateway:
    def __init__(self, start: int, end: int, log: str = "") -> None:
        self.bounds = {"start": start, "end": end, "records": end - start, "log": log}

    def offsets(self) -> dict[str, Any]:
        return dict(self.bounds)


def _reader(
    monkeypatch: pytest.MonkeyPatch, gateway: FakeGateway, **options: str
) -> EdgebusStreamReader:
    monkeypatch.setattr(datasource, "_client", lambda options: gateway)
    parsed = SourceOptions.parse({"gateway": "http://127.0.0.1:1", **options})
    return EdgebusStreamReader(parsed, None)  # type: ignore[arg-type]


def _ranges(reader: EdgebusStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list:
    parts = reader.partitions(start, end)
    return [(p.start, p.end) for p in parts if isinstance(p, OffsetRange)]


def test_the_same_log_goes_on_where_the_query_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = _reader(monkeypatch, FakeGateway(0, 50, "a"))
    start = {"offset": 30, "log": "a"}
    end = reader.latestOffset(start, None)
    assert end == {"offset": 50, "log": "a"}
    assert _ranges(reader, start, end) == [(30, 50)]


@pytest.mark.parametrize("new_end", [20, 50])  # below the checkpoint, past it
def test_another_log_fails_the_query_by_default(
    monkeypatch: pytest.MonkeyPatch, new_end: int
) -> None:
    reader = _reader(monkeypatch, FakeGateway(0, new_end, "b"))
    with pytest.raises(DataLossError, match="the log was replaced or reset") as caught:
        reader.latestOffset({"offset": 30, "log": "a"}, None)
    assert "start a new checkpoint or set failOnDataLoss=false" in str(caught.value)


def test_an_end_below_the_checkpoint_fails_even_without_a_log_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = _reader(monkeypatch, FakeGateway(0, 20))
    with pytest.raises(
        DataLossError, match="the log's end offset 20 is below the query's offset 30"
    ):
        reader.latestOffset({"offset": 30}, None)  # a checkpoint of before log ids


@pytest.mark.parametrize("new_end", [20, 50])
def test_without_fail_on_data_loss_the_new_log_is_read_from_its_start(
    monkeypatch: pytest.MonkeyPatch, new_end: int
) -> None:
    reader = _reader(monkeypatch, FakeGateway(0, new_end, "b"), failOnDataLoss="false")
    start = {"offset": 30, "log": "a"}
    end = reader.latestOffset(start, None)
    assert end == {"offset": new_end, "log": "b", "from": 0}
    assert _ranges(reader, start, end) == [(0, new_end)]
    follows = reader.latestOffset(end, None)  # the next batch: the new log as usual
    assert follows == {"offset": new_end, "log": "b"}
    assert _ranges(reader, end, follows) == []


def test_a_starting_offset_beyond_the_end_fails_unless_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = _reader(monkeypatch, FakeGateway(0, 10, "a"), startingOffsets="25")
    with pytest.raises(DataLossError, match="startingOffsets 25 is beyond the log's end offset"):
        reader.initialOffset()
    reader = _reader(
        monkeypatch, FakeGateway(0, 10, "a"), startingOffsets="25", failOnDataLoss="false"
    )
    assert reader.initialOffset() == {"offset": 10, "log": "a"}
    reader = _reader(monkeypatch, FakeGateway(0, 10, "a"), startingOffsets="10")
    assert reader.initialOffset() == {"offset": 10, "log": "a"}


def test_a_log_keeps_its_id_and_another_directory_gets_another(tmp_path: Any) -> None:
    ids = []
    for directory in ("a", "a", "b"):
        log = StreamLog(tmp_path / directory, fsync="never")
        log.open()
        ids.append(log.bounds().id)
        log.close()
    assert ids[0] == ids[1] != ids[2]
    assert len(ids[0]) == 32
