"""Records as an Arrow IPC stream: what the PySpark source reads. Needs ``pyarrow``.

The gateway imports this module only when a client asks for ``format=arrow`` (the API
answers 406 naming the extra, ``arrow``, when pyarrow is missing); the base install serves JSON
lines without it.

A batch read from the log becomes Arrow arrays without copying its columns (they are
laid out as Arrow's: ``spark_sink.records``); slicing to the range, the topic filter
and joining small batches happen in Arrow; the derived columns (``payload_json``, the
``properties`` and ``meta`` maps) are computed once per outgoing batch. An outgoing
batch holds up to ``MAX_ROWS`` rows or about ``MAX_BYTES`` bytes, so memory stays
bounded whatever the range.

``SCHEMA`` is the Spark schema's Arrow form (``to_arrow_schema`` of
``spark_sink.schema.SPARK_SCHEMA`` with timezone UTC), so a PySpark worker passes the
batches on as they are.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from spark_sink.fields import meta_map, payload_json, properties_map
from spark_sink.records import Columns

__all__ = ["SCHEMA", "arrow_stream", "finish", "raw_batch"]

MAX_ROWS = 65_536
MAX_BYTES = 8 * 1024 * 1024

_MAP = pa.map_(pa.string(), pa.string())
SCHEMA = pa.schema(
    [
        ("offset", pa.int64()),
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("protocol", pa.string()),
        ("source", pa.string()),
        ("topic", pa.string()),
        ("qos", pa.int32()),
        ("retain", pa.bool_()),
        ("content_type", pa.string()),
        ("payload", pa.binary()),
        ("payload_json", pa.string()),
        ("properties", _MAP),
        ("meta", _MAP),
    ]
)

_RAW = pa.schema(
    [
        ("offset", pa.int64()),
        ("id", pa.int64()),
        ("ts", pa.timestamp("ns", tz="UTC")),
        ("protocol", pa.string()),
        ("source", pa.string()),
        ("topic", pa.string()),
        ("qos", pa.uint8()),
        ("retain", pa.uint8()),
        ("content_type", pa.string()),
        ("payload", pa.binary()),
        ("properties", pa.binary()),
        ("meta", pa.string()),
    ]
)


def raw_batch(columns: Columns) -> pa.RecordBatch:
    """The stored columns of a batch as Arrow arrays over its bytes (no copy)."""
    n = columns.count
    offsets = array("q", range(columns.first, columns.first + n))
    arrays = [
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.ids)]),
        pa.Array.from_buffers(_RAW.field("ts").type, n, [None, pa.py_buffer(columns.ts)]),
    ]
    index = pa.Array.from_buffers(pa.uint16(), n, [None, pa.py_buffer(columns.origin)])
    for at in (0, 1):  # protocol, source: from the batch's dictionary of origins
        names = pa.array([origin[at] for origin in columns.origins], pa.string())
        arrays.append(names.take(index))
    arrays.append(_var(pa.string(), n, columns, "topic"))
    arrays.append(pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(columns.qos)]))
    arrays.append(pa.Array.from_buffers(pa.uint8(), n, [None, pa.py_buffer(columns.retain)]))
    arrays.append(_var(pa.string(), n, columns, "content_type"))
    arrays.append(_var(pa.binary(), n, columns, "payload"))
    arrays.append(_var(pa.binary(), n, columns, "properties"))
    arrays.append(_var(pa.string(), n, columns, "meta"))
    return pa.RecordBatch.from_arrays(arrays, schema=_RAW)


def _var(kind: pa.DataType, n: int, columns: Columns, name: str) -> pa.Array:
    offsets, data = columns.strings[name]
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _maps(n: int, pairs_of: Callable[[int], list[tuple[str, str]]], rows: list[int]) -> pa.Array:
    """A map array of ``n`` rows: the pairs of ``rows``, empty maps elsewhere."""
    offsets = [0] * (n + 1)
    keys: list[str] = []
    values: list[str] = []
    at = 0
    for row in rows:
        pairs = pairs_of(row)
        for key, value in pairs:
            keys.append(key)
            values.append(value)
        offsets[row + 1] = len(pairs)
    for index in range(1, n + 1):
        at += offsets[index]
        offsets[index] = at
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(values, pa.string())
    )


def _nonempty(column: pa.Array) -> list[int]:
    return pc.indices_nonzero(pc.greater(pc.binary_length(column), 0)).to_pylist()


def finish(raw: pa.RecordBatch) -> pa.RecordBatch:
    """A raw batch (``raw_batch``, sliced, filtered, joined) in ``SCHEMA``."""
    n = raw.num_rows
    content_type = raw.column("content_type")
    payload = raw.column("payload")
    json_texts = [payload_json(value) for value in payload.to_pylist()]
    properties = raw.column("properties")
    meta = raw.column("meta")
    arrays = [
        raw.column("offset"),
        raw.column("id"),
        raw.column("ts").cast(SCHEMA.field("ts").type, safe=False),
        raw.column("protocol"),
        raw.column("source"),
        raw.column("topic"),
        raw.column("qos").cast(pa.int32()),
        pc.not_equal(raw.column("retain"), 0),
        pc.if_else(
            pc.equal(pc.binary_length(content_type), 0), pa.scalar(None, pa.string()), content_type
        ),
        payload,
        pa.array(json_texts, pa.string()),
        _maps(n, lambda row: properties_map(properties[row].as_py()), _nonempty(properties)),
        _maps(n, lambda row: meta_map(meta[row].as_py()), _nonempty(meta)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


class _Chunks:
    """The file an IPC writer writes to: keeps what was written until taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts = []
        return data


def arrow_stream(
    slices: Iterable[tuple[Columns, int, int]],
    limit: int,
    topic_filter: Callable[[str], bool] | None = None,
) -> Iterator[bytes]:
    """At most ``limit`` records of ``slices`` whose topic passes ``topic_filter``, as
    the chunks of one Arrow IPC stream (an empty range gives the schema only)."""
    chunks = _Chunks()
    writer = pa.ipc.new_stream(chunks, SCHEMA)
    yield chunks.take()
    pending: list[pa.RecordBatch] = []
    rows = size = 0
    left = limit
    for columns, lo, hi in slices:
        raw = raw_batch(columns).slice(lo, hi - lo)
        if topic_filter is not None:
            raw = _filtered(raw, topic_filter)
        if raw.num_rows > left:
            raw = raw.slice(0, left)
        if not raw.num_rows:
            continue
        pending.append(raw)
        rows += raw.num_rows
        size += raw.nbytes
        left -= raw.num_rows
        if rows >= MAX_ROWS or size >= MAX_BYTES or left == 0:
            writer.write_batch(finish(_joined(pending)))
            yield chunks.take()
            pending, rows, size = [], 0, 0
        if left == 0:
            break
    if pending:
        writer.write_batch(finish(_joined(pending)))
    writer.close()
    yield chunks.take()


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


def _filtered(raw: pa.RecordBatch, matches: Callable[[str], bool]) -> pa.RecordBatch:
    topics = raw.column("topic")
    wanted = [topic for topic in pc.unique(topics).to_pylist() if matches(topic)]
    if not wanted:
        return raw.slice(0, 0)
    return raw.filter(pc.is_in(topics, value_set=pa.array(wanted, pa.string())))
