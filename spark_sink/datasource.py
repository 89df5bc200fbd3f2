"""The ``edgebus`` PySpark data source: the stream log as a streaming and a batch source.

    from spark_sink.datasource import EdgebusDataSource
    spark.dataSource.register(EdgebusDataSource)
    df = (spark.readStream.format("edgebus")
          .option("gateway", "http://127.0.0.1:8081").option("apiKey", key).load())

PySpark 4's Python data source API (``pyspark.sql.datasource``). Offsets are the log's
own: ``{"offset": N}`` means "everything before N"; a micro-batch reads ``[start, end)``
over HTTP (``/api/v1/stream/records``, Arrow IPC), split into partitions of
``partitionRows`` offsets that Spark's workers read in parallel. The same range always
gives the same records, so a query restarted from its checkpoint replays a batch exactly
and a checkpointed sink (Parquet's ``_spark_metadata``) writes every record once.

- ``latestOffset(start, limit)`` (Spark 4.2+; ``latestOffset()`` on older ones) asks the
  gateway for its end and caps it by ``maxRowsPerBatch`` (``ReadMaxRows``) and, under
  ``Trigger.AvailableNow``, by the end seen when the query started
  (``SupportsTriggerAvailableNow``).
- A streaming offset names its log too, ``{"offset": N, "log": id}`` (the id of
  ``/stream/offsets``). A log with another id, or an end below the query's offset, was
  replaced or reset: ``DataLossError``, or with ``failOnDataLoss=false`` a warning and a
  batch ``{"offset": end, "log": id, "from": start}`` that reads the new log from its
  start. ``startingOffsets`` beyond the log's end: likewise an error, or its end.
- ``commit(end)`` does nothing: the log keeps records by its own retention, and Spark
  calls it only when the next batch is planned.
- A gateway without pyarrow answers ``format=arrow`` with 406; the source then reads
  JSON lines and builds the Arrow batches itself.

This module imports pyspark and, in ``read``, pyarrow: it runs only in Spark. Options:
``spark_sink.options``; schema: ``spark_sink.schema``.
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

from spark_sink.client import GatewayClient, GatewayError
from spark_sink.options import SourceOptions
from spark_sink.schema import SPARK_SCHEMA

try:  # Spark 4.2+
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1
    ReadLimit = ReadAllAvailable = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


__all__ = ["DataLossError", "EdgebusDataSource", "OffsetRange"]

log = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Records of a range were deleted by the gateway's retention before Spark read them."""


class OffsetRange(InputPartition):
    """One Spark partition: the records of offsets ``[start, end)``."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end


def _client(options: SourceOptions) -> GatewayClient:
    return GatewayClient(
        options.gateway, options.api_key, options.username, options.password, options.timeout_s
    )


def _split(start: int, end: int, size: int) -> list[OffsetRange]:
    return [OffsetRange(at, min(at + size, end)) for at in range(start, end, size)]


class EdgebusDataSource(DataSource):
    """``format("edgebus")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "edgebus"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return EdgebusBatchReader(SourceOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return EdgebusStreamReader(SourceOptions.parse(self.options), schema)


def _read(options: SourceOptions, schema: StructType, part: OffsetRange) -> Iterator[Any]:
    """The Arrow record batches of ``part``, in ``schema``'s Arrow form."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema, timezone="UTC")
    client = _client(options)
    try:
        response = client.records(part.start, part.end, options.topic, "arrow")
    except GatewayError as exc:
        if exc.status != 406:
            raise
        response = client.records(part.start, part.end, options.topic, "jsonl")
    try:
        if response.start > part.start:
            message = (
                f"offsets {part.start} to {response.start - 1} were deleted by the gateway's"
                " retention before Spark read them"
            )
            if options.fail_on_data_loss:
                raise DataLossError(message + " (option failOnDataLoss=false goes on)")
            log.warning("%s", message)
        if response.media_type.startswith("application/x-ndjson"):
            yield from _from_json_lines(response.body, target)
            return
        reader = pa.ipc.open_stream(response.body)
        for batch in reader:
            if batch.num_rows:
                yield batch if batch.schema.equals(target) else batch.cast(target)
    finally:
        response.close()


def _from_json_lines(body: Any, target: Any, rows_per_batch: int = 10_000) -> Iterator[Any]:
    """Arrow batches built from the JSON lines of ``body``."""
    import pyarrow as pa

    rows: list[dict[str, Any]] = []
    for line in body:
        if not line.strip():
            continue
        record = json.loads(line)
        record["ts"] = datetime.datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
        record["payload"] = base64.b64decode(record["payload"])
        record["properties"] = list(record["properties"].items())
        record["meta"] = list(record["meta"].items())
        rows.append(record)
        if len(rows) >= rows_per_batch:
            yield pa.RecordBatch.from_pylist(rows, schema=target)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=target)


def _offset(offset: int, bounds: dict[str, Any]) -> dict[str, Any]:
    """A streaming offset: ``offset`` in the log whose id ``bounds`` gives."""
    found: dict[str, Any] = {"offset": offset}
    if bounds.get("log"):
        found["log"] = bounds["log"]
    return found


def _replaced(start: dict[str, Any], bounds: dict[str, Any]) -> str | None:
    """Why the log ``bounds`` describes is not the one the query read up to ``start``
    (replaced or reset: its offsets started again from 0), or None when it is."""
    begin = int(start["offset"])
    advice = (
        "the log was replaced or reset; records may have been missed; start a new"
        " checkpoint or set failOnDataLoss=false"
    )
    if int(bounds["end"]) < begin:
        return f"the log's end offset {bounds['end']} is below the query's offset {begin}: {advice}"
    if start.get("log") and bounds.get("log") and start["log"] != bounds["log"]:
        return (
            f"the gateway's stream log {bounds['log']} is not the log {start['log']} the query"
            f" read up to offset {begin}: {advice}"
        )
    return None


class EdgebusBatchReader(DataSourceReader):
    """``spark.read.format("edgebus")``: offsets ``[startOffset, endOffset)``."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        start, end = options.start_offset, options.end_offset
        if start is None or end is None:
            bounds = _client(options).offsets()
            start = bounds["start"] if start is None else start
            end = bounds["end"] if end is None else end
        return _split(start, end, options.partition_rows) or [OffsetRange(start, start)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        if partition.start < partition.end:
            yield from _read(self.options, self.schema, partition)


class EdgebusStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("edgebus")``: see the module docstring."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._target: int | None = None  # Trigger.AvailableNow: the end to stop at
        self._last: dict[str, Any] | None = None  # the end last planned (Spark < 4.2)

    def _bounds(self) -> dict[str, Any]:
        return _client(self.options).offsets()

    def _end(self) -> int:
        return int(self._bounds()["end"])

    def initialOffset(self) -> dict[str, Any]:
        starting = self.options.starting
        bounds = self._bounds()
        begin = bounds["start"] if starting == "earliest" else bounds["end"]
        if isinstance(starting, int):
            begin = starting
            if starting > bounds["end"]:
                message = (
                    f"option startingOffsets {starting} is beyond the log's end offset"
                    f" {bounds['end']}: this log never held it"
                )
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        message + "; give an offset the log holds (GET /api/v1/stream/offsets),"
                        " or set failOnDataLoss=false to start at the log's end"
                    )
                log.warning("%s; starting at the log's end (failOnDataLoss=false)", message)
                begin = bounds["end"]
        return _offset(begin, bounds)

    def getDefaultReadLimit(self) -> Any:
        rows = self.options.max_rows_per_batch
        if rows is None or ReadMaxRows is None:
            return ReadAllAvailable() if ReadAllAvailable is not None else None
        return ReadMaxRows(rows)

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        bounds = self._bounds()
        end = int(bounds["end"])
        if self._target is not None:
            end = min(end, self._target)
        if start is None:  # Spark < 4.2: no admission control from the engine
            start = self._last
            rows = self.options.max_rows_per_batch
        else:
            rows = (
                limit.max_rows
                if ReadMaxRows is not None and isinstance(limit, ReadMaxRows)
                else None
            )
        if start is None:
            latest = _offset(end, bounds)
        else:
            begin = int(start["offset"])
            replaced = _replaced(start, bounds)
            if replaced is not None:
                if self.options.fail_on_data_loss:
                    raise DataLossError(replaced)
                log.warning(
                    "%s; reading the new log from its start, offset %d (failOnDataLoss=false)",
                    replaced,
                    bounds["start"],
                )
                begin = int(bounds["start"])
                end = int(bounds["end"])
            if rows is not None:
                end = min(end, begin + rows)
            latest = _offset(max(end, begin), bounds)
            if replaced is not None:
                latest["from"] = begin
        self._last = latest
        return latest

    def reportLatestOffset(self) -> dict[str, int]:
        return {"offset": self._end()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._end()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = int(end.get("from", start["offset"]))  # "from": a replaced log's start
        return _split(begin, int(end["offset"]), self.options.partition_rows)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, OffsetRange)
        yield from _read(self.options, self.schema, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the gateway's retention decides what the log keeps."""
