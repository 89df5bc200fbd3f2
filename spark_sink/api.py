"""``/stream``: the stream log over the HTTP API, behind its authentication.

- ``GET /api/v1/stream/offsets``: what the log holds, offsets ``[start, end)``; ``end``
  is the offset the next record gets (the latest offset is ``end - 1``).
- ``GET /api/v1/stream/records?start=&end=&limit=&topic=&format=``: the records of
  ``[start, end)`` (``end`` defaults to the log's end, and is cut to it), at most
  ``limit``, whose topic matches ``topic``, as JSON lines (``format=jsonl``, the
  default) or as an Arrow IPC stream (``format=arrow``, what Spark reads; needs pyarrow on
  the gateway, else 406). The response streams, one batch at a time: memory stays
  bounded whatever the range. Its headers ``X-Edgebus-Start`` and ``X-Edgebus-End`` give
  the range ``[start, end)`` it covers (``_covered``): every record of it whose topic
  matches is in the answer, and the next read goes on at ``end``. A start past the one
  asked for means retention deleted those records; an end before the one asked for, that
  the answer holds ``limit`` records or the log ends there. ``end`` below ``start``: 422.
  A damaged batch on disk (its CRC does not match) is a 500 naming the segment and the
  offsets when it is the first of the answer; further on, it cuts the answer off.

Only committed records are served: a reader never sees an offset that is not written,
nor a gap.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from broker_core.mqtt.topics import topic_filter_problem
from gateway.api.deps import MAX_QUERY, Components, Responses
from gateway.components import SINK
from spark_sink.fields import TopicMatcher
from spark_sink.jsonl import MEDIA_TYPE as JSONL
from spark_sink.jsonl import json_lines
from spark_sink.log_errors import DamagedBatch
from spark_sink.records import Columns
from spark_sink.segments import StreamLog
from spark_sink.sink import StreamSink

__all__ = ["StreamOffsets", "router"]

router = APIRouter(tags=["stream"])

ARROW = "application/vnd.apache.arrow.stream"
MAX_OFFSET = 2**63 - 1
MAX_LIMIT = 1_000_000_000

Slice = tuple[Columns, int, int]

_NOT_RUNNING: Responses = {404: {"description": "The stream log is not running"}}


class StreamOffsets(BaseModel):
    start: int = Field(description="The oldest offset still held.")
    end: int = Field(description="The offset the next record gets: the latest is `end - 1`.")
    records: int = Field(description="Records held: `end - start`.")
    bytes: int = Field(description="Bytes of the segment files.")
    segments: int = Field(description="Segment files.")
    log: str = Field(
        description="The log's id: another one means the log was replaced (another"
        " `stream.path`, a wiped `data_dir`) and its offsets started again from 0."
    )


def _covered(
    stream_log: StreamLog,
    first: int,
    last: int,
    limit: int,
    matches: TopicMatcher | None,
) -> int:
    """The end of what an answer of ``[first, last)`` holding at most ``limit`` records
    whose topic ``matches`` covers: after its ``limit``-th record, or ``last``. Without a
    filter that is arithmetic (offsets have no gaps); with one, the topics are read up
    to the ``limit``-th match."""
    if last - first <= limit:
        return last
    if matches is None:
        return first + limit
    left = limit
    for columns, lo, hi in stream_log.slices(first, last):
        for row in range(lo, hi):
            if matches(columns.string("topic", row)):
                left -= 1
                if left == 0:
                    return columns.first + row + 1
    return last


def _checked(stream_log: StreamLog, first: int, last: int) -> Iterator[Slice]:
    """``stream_log.slices(first, last)``, its first batch read already: a damaged one is
    a 500 naming the segment and the offsets rather than an answer cut off. (A damaged
    batch further on cuts the answer off with that error: never damaged records.)"""
    slices = stream_log.slices(first, last)
    try:
        head = next(slices, None)
    except DamagedBatch as exc:
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, str(exc)) from exc
    if head is None:
        return iter(())
    return itertools.chain((head,), slices)


def _stream_log(supervisor: Components) -> StreamLog:
    sink = supervisor.instance(SINK, "stream")
    if not isinstance(sink, StreamSink) or sink.log is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            "the stream log is not running (stream.enabled: true starts it; see docs/spark.md)",
        )
    return sink.log


@router.get("/stream/offsets", summary="The offsets the stream log holds", responses=_NOT_RUNNING)
async def stream_offsets(supervisor: Components) -> StreamOffsets:
    bounds = _stream_log(supervisor).bounds()
    return StreamOffsets(
        start=bounds.start,
        end=bounds.end,
        records=bounds.end - bounds.start,
        bytes=bounds.bytes,
        segments=bounds.segments,
        log=bounds.id,
    )


@router.get(
    "/stream/records",
    summary="A range of records, as JSON lines or Arrow IPC",
    response_class=StreamingResponse,
    responses={
        **_NOT_RUNNING,
        200: {
            "description": "The records, streamed",
            "content": {JSONL: {}, ARROW: {}},
        },
        400: {"description": "Not a valid topic filter"},
        422: {"description": "A query parameter out of range, or `end` below `start`"},
        406: {"description": "format=arrow, and the gateway has no pyarrow"},
        500: {"description": "A batch of the range is damaged on disk (named in the detail)"},
    },
)
async def stream_records(
    supervisor: Components,
    start: Annotated[
        int, Query(ge=0, le=MAX_OFFSET, description="First offset; default: the oldest held.")
    ] = 0,
    end: Annotated[
        int | None,
        Query(ge=0, le=MAX_OFFSET, description="Offset after the last; default: the log's end."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Most records.")] = 1000,
    topic: Annotated[
        str | None,
        Query(max_length=MAX_QUERY, description="A topic filter (`sensors/#`); none: all."),
    ] = None,
    format: Annotated[
        Literal["jsonl", "arrow"],
        Query(description="`jsonl`: JSON lines; `arrow`: an Arrow IPC stream."),
    ] = "jsonl",
) -> StreamingResponse:
    if end is not None and end < start:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"end ({end}) is below start ({start}): the range is [start, end), the offset"
            " after the last; end >= start, or no end for the log's end",
        )
    stream_log = _stream_log(supervisor)
    matches = None
    if topic is not None:
        problem = topic_filter_problem(topic)
        if problem is not None:
            raise HTTPException(status.HTTP_400_BAD_REQUEST, f"topic: {problem}")
        if topic != "#":
            matches = TopicMatcher(topic)
    bounds = stream_log.bounds()
    first = max(start, bounds.start)
    last = bounds.end if end is None else min(end, bounds.end)
    last = max(first, last)
    try:
        last = await run_in_threadpool(_covered, stream_log, first, last, limit, matches)
    except DamagedBatch as exc:
        raise HTTPException(status.HTTP_500_INTERNAL_SERVER_ERROR, str(exc)) from exc
    headers = {"X-Edgebus-Start": str(first), "X-Edgebus-End": str(last)}
    slices = await run_in_threadpool(_checked, stream_log, first, last)
    if format == "jsonl":
        return StreamingResponse(json_lines(slices, limit, matches), 200, headers, JSONL)
    try:
        from spark_sink.arrow import arrow_stream
    except ImportError:
        raise HTTPException(
            status.HTTP_406_NOT_ACCEPTABLE,
            "format=arrow needs pyarrow on the gateway: pip install 'edgebus[arrow]' there;"
            " format=jsonl needs nothing",
        ) from None
    return StreamingResponse(arrow_stream(slices, limit, matches), 200, headers, ARROW)
