"""The on-disk record batch of the stream log: Contexts in columns, one CRC per batch.

Pure: no I/O, no pyarrow. The writer encodes each group of Contexts it writes as one
batch (``encode_batch``); a reader decodes a batch's columns (``decode_batch``) and
hands them to Arrow without copying (the variable-size columns are laid out as Arrow's
``binary``/``utf8`` arrays: int32 offsets, then the bytes) or turns them into rows.

Layout, little endian::

    header   length u32    bytes after the first 8 (what the CRC covers)
             crc    u32    zlib.crc32 of those bytes
             first  u64    offset of the first record
             count  u32    records in the batch
             version u16   1
             flags  u16    0
             ts_max i64    the newest receive time in the batch (ns), for retention
    columns  id      int64[count]
             ts      int64[count]     receive time, ns since the epoch
             qos     uint8[count]
             retain  uint8[count]
             origin  uint16[count]    index into the batch's origins
    origins  k u32, then protocol and source: int32 offsets[k + 1], then the bytes
    columns  then for topic, content_type, payload, properties, meta:
                     int32 offsets[count + 1], then offsets[count] bytes
             every column padded to 8 bytes

The origins (protocol and source name) are a dictionary per batch: a batch holds the
messages of a few clients and adapters, so each is written once; the encoder finds them
as runs of one ``Origin`` object (a socket read holds one client's messages), compared
by identity in C, and looks each message up only when they interleave.

``content_type`` empty: none. ``properties``: the MQTT 5 property block of the message
(``Properties.encoded()``), empty when it has none. ``meta``: the metadata as a JSON
object, empty when there is none.

A batch is whole or it is not there: a reader that finds a short batch or a CRC that
does not match at the end of the last segment has found a torn tail (the process died
while writing it); it is cut back to the last whole batch (``segments``).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass
from itertools import accumulate, islice, repeat
from operator import is_, itemgetter
from typing import Any

from broker_core.context import EMPTY_META, Context
from broker_core.mqtt.properties import EMPTY

__all__ = [
    "HEADER",
    "PURE_PYTHON",
    "STRING_COLUMNS",
    "VERSION",
    "BatchHeader",
    "Columns",
    "CorruptBatch",
    "Encoded",
    "compiled_encode_columns",
    "decode_batch",
    "decode_header",
    "encode_batch",
    "encode_columns",
    "frame",
    "python_encode_columns",
]

HEADER = struct.Struct("<IIQIHHq")
_PREFIX = struct.Struct("<II")  # length, crc
_TAIL = struct.Struct("<QIHHq")  # first, count, version, flags, ts_max
VERSION = 1
STRING_COLUMNS = ("topic", "content_type", "payload", "properties", "meta")
_PAD = bytes(8)
#: ``frame`` computes a CRC in steps of at most this many bytes: ``zlib.crc32`` lets go
#: of the GIL above 5 KiB, and the log's writer thread taking it back from the busy loop
#: costs the broker more than the few microseconds of CRC it would run meanwhile.
_CRC_STEP = 4096


class CorruptBatch(ValueError):
    """Bytes that are not a whole, intact batch."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    length: int  # bytes after the first 8
    crc: int
    first: int
    count: int
    ts_max: int

    @property
    def size(self) -> int:
        """The whole batch's size on disk."""
        return 8 + self.length

    @property
    def end(self) -> int:
        """The offset after its last record."""
        return self.first + self.count


def _padded(parts: list[bytes], size: int) -> int:
    pad = -size % 8
    if pad:
        parts.append(_PAD[:pad])
    return size + pad


#: Compiled ``struct`` formats by (code, count), and offsets columns of equal-width values
#: by (count, width): at most ``_CACHE_LIMIT`` entries each (the offsets at most 2 MiB),
#: emptied when full.
_CACHE_LIMIT = 64
_STRUCTS: dict[tuple[str, int], Callable[..., bytes]] = {}
_EVEN: dict[tuple[int, int], bytes] = {}


def _packer(code: str, count: int) -> Callable[..., bytes]:
    """``pack(*values)`` of ``count`` little-endian numbers of struct ``code``: about half
    the time of ``array(code, values)`` (which converts and appends them one by one)."""
    pack = _STRUCTS.get((code, count))
    if pack is None:
        if len(_STRUCTS) >= _CACHE_LIMIT:
            _STRUCTS.clear()
        pack = _STRUCTS[code, count] = struct.Struct(f"<{count}{code}").pack
    return pack


def _offsets(values: Sequence[Sized]) -> bytes:
    """The int32 offsets column of ``values``: ``count + 1`` running sums of their sizes.

    Values of one size (fixed-size records, topics of one pattern) take a cached column:
    the running sums make a new int object per value, which costs more than the rest."""
    count = len(values)
    if count and len(values[0]) != len(values[-1]):  # not of one size: no list to count
        return _packer("i", count + 1)(*accumulate(map(len, values), initial=0))
    lengths = list(map(len, values))
    width = lengths[0] if count else 0
    if lengths.count(width) == count:
        even = _EVEN.get((count, width))
        if even is None:
            if len(_EVEN) >= _CACHE_LIMIT:
                _EVEN.clear()
            sums = range(0, (count + 1) * width, width) if width else [0] * (count + 1)
            even = _EVEN[count, width] = _packer("i", count + 1)(*sums)
        return even
    return _packer("i", count + 1)(*accumulate(lengths, initial=0))


def _strings(values: list[str], parts: list[bytes], joined: str | None = None) -> int:
    """Appends offsets and UTF-8 bytes of ``values`` (``joined``: them joined, when the
    caller has it); returns the bytes appended."""
    if joined is None:
        joined = "".join(values)
    if joined.isascii():
        return _var(joined.encode("ascii"), values, parts)
    encoded = [value.encode("utf-8", "surrogatepass") for value in values]
    return _var(b"".join(encoded), encoded, parts)


def _var(data: bytes, values: Sequence[Sized], parts: list[bytes]) -> int:
    """Appends the offsets of ``values`` (their lengths summed: ``data`` is them joined)
    and ``data``; returns the bytes appended."""
    raw = _offsets(values)
    parts.append(raw)
    parts.append(data)
    return _padded(parts, len(raw) + len(data))


def _empty(count: int, parts: list[bytes]) -> int:
    """A column of ``count`` empty values."""
    parts.append(bytes(4 * (count + 1)))
    return _padded(parts, 4 * (count + 1))


def _meta_json(meta: Any) -> str:
    return json.dumps(dict(meta), separators=(",", ":"), default=str, ensure_ascii=False)


def _block(properties: Any) -> bytes:
    encoded: bytes = properties.encoded()
    return b"" if encoded == b"\x00" else encoded


_ONE_INDEX = struct.Struct("<H").pack
#: Runs of one origin per batch past which ``_origin_index`` keys every message instead.
_MAX_RUNS = 32


def _origin_index(origins: list[Any], count: int) -> tuple[bytes, list[Any]]:
    """The origin column (uint16 indexes) and the batch's origins, in order of first
    appearance. Origins are told apart by identity: the Contexts of one client share its
    ``Origin`` object (two equal ones are written twice, which reads the same).

    A batch is mostly runs of one origin (a socket read holds one client's messages):
    consecutive ones are compared by identity in C (never ``Origin.__eq__``, a Python
    call), and each run written as one repeated index; ``id`` of every message (a new
    int each) only past ``_MAX_RUNS``."""
    if count <= 1 or all(map(is_, repeat(origins[0]), origins)):  # identity only, in C
        return bytes(2 * count), origins[:1]
    if origins[0] is not origins[1] and origins[-2] is not origins[-1]:
        return _keyed_index(origins, count)  # interleaved at both ends: not in runs
    same = list(map(is_, origins, islice(origins, 1, None)))  # same[i]: i and i + 1
    breaks = count - 1 - same.count(True)
    if not breaks:
        return bytes(2 * count), origins[:1]
    if breaks < _MAX_RUNS:
        codes: dict[int, bytes] = {}
        names: list[Any] = []
        chunks: list[bytes] = []
        start = 0
        for _ in range(breaks + 1):
            end = same.index(False, start) + 1 if len(chunks) < breaks else count
            origin = origins[start]
            code = codes.get(id(origin))
            if code is None:
                code = codes[id(origin)] = _ONE_INDEX(len(names))
                names.append(origin)
            chunks.append(code * (end - start))
            start = end
        return b"".join(chunks), names
    return _keyed_index(origins, count)


def _keyed_index(origins: list[Any], count: int) -> tuple[bytes, list[Any]]:
    """``_origin_index`` of origins not in runs: each message's looked up by ``id``."""
    keys = list(map(id, origins))
    unique = dict(zip(keys, origins, strict=True))
    numbers = {key: at for at, key in enumerate(unique)}
    return _packer("H", count)(*itemgetter(*keys)(numbers)), list(unique.values())


@dataclass(frozen=True, slots=True)
class Encoded:
    """The columns of a batch, encoded (``encode_columns``); ``frame`` gives the header
    once its first offset is known."""

    parts: list[bytes]
    count: int
    ts_max: int
    size: int  # bytes of ``parts``


def python_encode_columns(
    contexts: Sequence[Context],
    topics: list[str] | None = None,
    joined: str | None = None,
    payloads: list[bytes] | None = None,
    offset: int = 0,
) -> Encoded:
    """The columns of ``contexts`` (the batch without its header); ``topics`` (and
    ``joined``, them joined) and ``payloads``: theirs, when the caller has them already.
    ``offset``: ns added to every ``received_at`` (on the broker's clock), the record's
    time: ``broker_core.clock.wall_offset_ns()`` read once for the batch, so the stream
    records wall-clock times (``segments.encode_chunks``).

    It runs on the broker's loop for every message recorded: one pass per field, each a
    comprehension or a C call, and numbers packed with ``struct`` (see ``_packer``)."""
    count = len(contexts)
    parts: list[bytes] = []
    ts = [c.received_at + offset for c in contexts]
    parts.append(_packer("q", count)(*[c.id for c in contexts]))
    parts.append(_packer("q", count)(*ts))
    if [c.qos or c.retain for c in contexts].count(0) == count:  # the common case
        flags = bytes(2 * count)
    else:
        flags = bytes([c.qos for c in contexts] + [c.retain for c in contexts])
    parts.append(flags)
    index, names = _origin_index([c.origin for c in contexts], count)
    parts.append(index)
    size = _padded(parts, 16 * count + len(flags) + len(index))
    parts.append(struct.pack("<Q", len(names)))
    size += 8
    size += _strings([o.protocol for o in names], parts)
    size += _strings([o.name for o in names], parts)
    if topics is None:
        topics = [c.topic for c in contexts]
    size += _strings(topics, parts, joined)
    properties = [c.properties for c in contexts]
    plain = properties.count(EMPTY) == count  # the common case: no MQTT 5 properties
    if plain:
        size += _empty(count, parts)
    else:
        size += _strings([p.content_type or "" for p in properties], parts)
    if payloads is None:
        payloads = [c.payload for c in contexts]
    size += _var(b"".join(payloads), payloads, parts)
    if plain:
        size += _empty(count, parts)
    else:
        blocks = [b"" if p is EMPTY else _block(p) for p in properties]
        size += _var(b"".join(blocks), blocks, parts)
    metas = [c.meta for c in contexts]
    if metas.count(EMPTY_META) == count:
        size += _empty(count, parts)
    else:
        size += _strings([_meta_json(m) if m else "" for m in metas], parts)
    return Encoded(parts, count, max(ts, default=0), size)


def frame(first: int, encoded: Encoded) -> bytes:
    """The header of ``encoded`` with offsets from ``first`` (its CRC covers it all)."""
    tail = _TAIL.pack(first, encoded.count, VERSION, 0, encoded.ts_max)
    crc = zlib.crc32(tail)
    crc32 = zlib.crc32
    for part in encoded.parts:
        if len(part) <= _CRC_STEP:
            crc = crc32(part, crc)
            continue
        view = memoryview(part)
        for at in range(0, len(view), _CRC_STEP):
            crc = crc32(view[at : at + _CRC_STEP], crc)
    return _PREFIX.pack(len(tail) + encoded.size, crc) + tail


def encode_batch(first: int, contexts: Sequence[Context]) -> list[bytes]:
    """The whole batch of ``contexts`` with offsets from ``first``: the buffers to write
    in order (``os.writev``), the header first."""
    encoded = encode_columns(contexts)
    return [frame(first, encoded), *encoded.parts]


def decode_header(data: bytes | memoryview) -> BatchHeader:
    """The header at the start of ``data`` (at least ``HEADER.size`` bytes)."""
    length, crc, first, count, version, _flags, ts_max = HEADER.unpack_from(data)
    if version != VERSION or length < HEADER.size - 8:
        raise CorruptBatch(f"not a batch header (version {version}, length {length})")
    return BatchHeader(length, crc, first, count, ts_max)


def check_crc(header: BatchHeader, data: bytes | memoryview) -> None:
    """Raises ``CorruptBatch`` unless ``data`` (the whole batch) matches its CRC."""
    if len(data) != header.size:
        raise CorruptBatch(f"batch at offset {header.first}: short ({len(data)} bytes)")
    if zlib.crc32(memoryview(data)[8:]) != header.crc:
        raise CorruptBatch(f"batch at offset {header.first}: CRC mismatch")


@dataclass(frozen=True, slots=True)
class Columns:
    """One batch's columns, as views into its bytes (nothing copied).

    ``strings[name]`` is ``(offsets, data)`` for each of ``STRING_COLUMNS``; ``offsets``
    holds ``count + 1`` int32 values.
    """

    first: int
    count: int
    ids: memoryview  # int64
    ts: memoryview  # int64
    qos: memoryview  # uint8
    retain: memoryview  # uint8
    origin: memoryview  # uint16, into ``origins``
    origins: list[tuple[str, str]]  # (protocol, source) of the batch's origins
    strings: dict[str, tuple[memoryview, memoryview]]

    def protocol(self, row: int) -> str:
        return self.origins[self.origin[row]][0]

    def source(self, row: int) -> str:
        return self.origins[self.origin[row]][1]

    def string(self, name: str, row: int) -> str:
        offsets, data = self.strings[name]
        return str(data[offsets[row] : offsets[row + 1]], "utf-8", "surrogatepass")

    def binary(self, name: str, row: int) -> bytes:
        offsets, data = self.strings[name]
        return bytes(data[offsets[row] : offsets[row + 1]])


def decode_batch(data: bytes | memoryview, verify: bool = True) -> Columns:
    """The columns of the whole batch ``data``; ``CorruptBatch`` if it is not intact."""
    header = decode_header(data)
    view = memoryview(data)
    if verify:
        check_crc(header, view)
    n = header.count
    pos = HEADER.size
    try:
        ids = view[pos : pos + 8 * n].cast("q")
        pos += 8 * n
        ts = view[pos : pos + 8 * n].cast("q")
        pos += 8 * n
        qos = view[pos : pos + n]
        retain = view[pos + n : pos + 2 * n]
        pos += 2 * n
        origin = view[pos : pos + 2 * n].cast("H")
        pos += 2 * n
        pos += -pos % 8
        (k,) = struct.unpack_from("<Q", view, pos)
        pos += 8
        names: list[list[str]] = []
        for _ in range(2):
            offsets = view[pos : pos + 4 * (k + 1)].cast("i")
            pos += 4 * (k + 1)
            data = view[pos : pos + offsets[k]]
            names.append([str(data[offsets[i] : offsets[i + 1]], "utf-8") for i in range(k)])
            pos += offsets[k]
            pos += -pos % 8
        origins = list(zip(names[0], names[1], strict=True))
        if any(index >= k for index in origin):
            raise CorruptBatch(f"batch at offset {header.first}: an origin out of range")
        strings: dict[str, tuple[memoryview, memoryview]] = {}
        for name in STRING_COLUMNS:
            offsets = view[pos : pos + 4 * (n + 1)].cast("i")
            pos += 4 * (n + 1)
            size = offsets[n]
            strings[name] = (offsets, view[pos : pos + size])
            pos += size
            pos += -pos % 8
    except (TypeError, IndexError, ValueError, struct.error) as exc:
        raise CorruptBatch(f"batch at offset {header.first}: bad columns ({exc})") from exc
    if pos != header.size:
        raise CorruptBatch(f"batch at offset {header.first}: {header.size - pos} bytes left over")
    return Columns(header.first, n, ids, ts, qos, retain, origin, origins, strings)


#: The ``API`` the compiled encoder must have (``_records.pyx``).
_COMPILED_API = 2


def _compiled() -> Callable[..., Encoded] | None:
    """The compiled ``encode_columns`` (``spark_sink/_records.pyx``), or None when it is
    not built (an install without a C compiler, or a big-endian machine) or was built
    from an older source (a checkout updated without ``make``: its arguments differ)."""
    try:
        from spark_sink import _records
    except ImportError:
        return None
    if getattr(_records, "API", 1) != _COMPILED_API:
        logging.getLogger(__name__).warning(
            "the compiled stream encoder was built from an older source; the Python one"
            " is used until it is rebuilt (make)"
        )
        return None
    encode: Callable[..., Encoded] = _records.encode_columns
    return encode


#: The compiled encoder, None when it is not built.
compiled_encode_columns = _compiled()
#: The one switch point: the compiled encoder when it is built and the environment does
#: not set ``EDGEBUS_PURE_PYTHON`` (to anything but ``0``), else the Python one. Both
#: write the same bytes (tests/unit/spark_sink/test_records.py).
PURE_PYTHON = os.environ.get("EDGEBUS_PURE_PYTHON", "") not in ("", "0")
encode_columns: Callable[..., Encoded] = (
    python_encode_columns
    if PURE_PYTHON or compiled_encode_columns is None
    else compiled_encode_columns
)
