"""Records as JSON lines, for people (``curl``, ``jq``): one object per line.

Each line holds the fields of the Spark schema: ``offset``, ``id``, ``ts`` (ISO 8601,
UTC, microseconds), ``protocol``, ``source``, ``topic``, ``qos``, ``retain``,
``content_type``, ``payload`` (base64), ``payload_json`` (the payload as text when it
is JSON, else null), ``properties`` and ``meta`` (objects of strings).

Pure Python: serving JSON lines needs nothing beyond the base install.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable, Iterable, Iterator

from spark_sink.fields import meta_map, payload_json, properties_map
from spark_sink.records import Columns

__all__ = ["MEDIA_TYPE", "json_lines", "record_of"]

MEDIA_TYPE = "application/x-ndjson"

#: Lines gathered into one chunk of the response.
_CHUNK_ROWS = 1000

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _iso(ts_ns: int) -> str:
    moment = _EPOCH + datetime.timedelta(microseconds=ts_ns // 1000)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_of(columns: Columns, row: int) -> dict[str, object]:
    """Row ``row`` of ``columns`` as a JSON-ready dict."""
    payload = columns.binary("payload", row)
    content_type = columns.string("content_type", row)
    return {
        "offset": columns.first + row,
        "id": columns.ids[row],
        "ts": _iso(columns.ts[row]),
        "protocol": columns.protocol(row),
        "source": columns.source(row),
        "topic": columns.string("topic", row),
        "qos": columns.qos[row],
        "retain": bool(columns.retain[row]),
        "content_type": content_type or None,
        "payload": base64.b64encode(payload).decode("ascii"),
        "payload_json": payload_json(payload),
        "properties": dict(properties_map(columns.binary("properties", row))),
        "meta": dict(meta_map(columns.string("meta", row))),
    }


def json_lines(
    slices: Iterable[tuple[Columns, int, int]],
    limit: int,
    matches: Callable[[str], bool] | None = None,
) -> Iterator[bytes]:
    """At most ``limit`` records of ``slices`` whose topic ``matches``, as chunks of
    JSON lines."""
    lines: list[str] = []
    left = limit
    for columns, lo, hi in slices:
        for row in range(lo, hi):
            if matches is not None and not matches(columns.string("topic", row)):
                continue
            lines.append(json.dumps(record_of(columns, row), ensure_ascii=False))
            left -= 1
            if left == 0 or len(lines) >= _CHUNK_ROWS:
                yield ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
                lines = []
            if left == 0:
                return
    if lines:
        yield ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
