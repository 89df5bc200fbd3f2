"""The record batch codec: what is written is what is read, and damage is detected."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from spark_sink.records import (
    _CACHE_LIMIT,
    _EVEN,
    _STRUCTS,
    HEADER,
    CorruptBatch,
    decode_batch,
    decode_header,
    encode_batch,
)

#: Every test here runs with each encoder (conftest.py).
pytestmark = pytest.mark.usefixtures("encoder")

ORIGIN = Origin("mqtt", "client-1")


def _contexts() -> list[Context]:
    return [
        Context("plain/topic", b"\x00\x01binary", 0, False, origin=ORIGIN),
        Context(
            "sensors/température",
            b'{"t": 21.5}',
            1,
            True,
            Properties(
                content_type="application/json",
                user_properties=(("unit", "C"), ("site", "lyon")),
                response_topic="reply/1",
                correlation_data=b"\x01\x02",
            ),
            origin=Origin("loopback", "units"),
            meta={"loopback.source": "raw/1", "dds.count": 3},
        ),
        Context("empty", b"", 2, False, origin=ORIGIN),
    ]


def test_a_batch_reads_back_as_written() -> None:
    contexts = _contexts()
    data = b"".join(encode_batch(41, contexts))
    header = decode_header(data)
    assert (header.first, header.count, header.end, header.size) == (41, 3, 44, len(data))
    assert header.ts_max == max(c.received_at for c in contexts)
    columns = decode_batch(data)
    assert (columns.first, columns.count) == (41, 3)
    assert list(columns.ids) == [c.id for c in contexts]
    assert list(columns.ts) == [c.received_at for c in contexts]
    assert list(columns.qos) == [0, 1, 2]
    assert list(columns.retain) == [0, 1, 0]
    assert [columns.string("topic", r) for r in range(3)] == [c.topic for c in contexts]
    assert [columns.protocol(r) for r in range(3)] == ["mqtt", "loopback", "mqtt"]
    assert [columns.source(r) for r in range(3)] == ["client-1", "units", "client-1"]
    assert columns.origins == [("mqtt", "client-1"), ("loopback", "units")]  # once each
    assert [columns.binary("payload", r) for r in range(3)] == [c.payload for c in contexts]
    assert [columns.string("content_type", r) for r in range(3)] == ["", "application/json", ""]
    assert columns.binary("properties", 0) == b""
    assert columns.binary("properties", 1) == contexts[1].properties.encoded()
    assert json.loads(columns.string("meta", 1)) == {"loopback.source": "raw/1", "dds.count": 3}
    assert columns.string("meta", 0) == ""


def test_plain_messages_store_no_properties_and_no_meta() -> None:
    contexts = [Context(f"t/{i}", b"x", 0, False, origin=ORIGIN) for i in range(5)]
    columns = decode_batch(b"".join(encode_batch(0, contexts)))
    for name in ("content_type", "properties", "meta"):
        offsets, data = columns.strings[name]
        assert (list(offsets), bytes(data)) == ([0] * 6, b"")


def test_columns_are_padded_to_eight_bytes() -> None:
    """Arrow wants 8-byte aligned buffers: the header and every column are padded."""
    parts = encode_batch(0, _contexts())
    assert len(parts[0]) == HEADER.size == 32
    assert sum(len(part) for part in parts) % 8 == 0


def test_an_empty_batch() -> None:
    columns = decode_batch(b"".join(encode_batch(7, [])))
    assert (columns.first, columns.count) == (7, 0)


def test_damage_is_detected() -> None:
    data = bytearray(b"".join(encode_batch(0, _contexts())))
    with pytest.raises(CorruptBatch, match="short"):
        decode_batch(bytes(data[:-1]))
    data[-20] ^= 0xFF
    with pytest.raises(CorruptBatch, match="CRC"):
        decode_batch(bytes(data))


def test_a_header_of_another_version_is_refused() -> None:
    data = bytearray(b"".join(encode_batch(0, _contexts())))
    struct.pack_into("<H", data, 20, 9)
    struct.pack_into("<I", data, 4, zlib.crc32(bytes(data[8:])))
    with pytest.raises(CorruptBatch, match="version 9"):
        decode_header(bytes(data))


def test_the_crc_of_large_columns_is_the_crc_of_the_whole_batch() -> None:
    """``frame`` computes the CRC of columns past 4 KiB in steps (``zlib.crc32`` would let
    go of the GIL): the result is the CRC of the bytes, as a reader checks it."""
    contexts = [
        Context(f"t/{n}", bytes([n % 251]) * (3000 + n), 0, False, origin=Origin("mqtt", "c"))
        for n in range(7)
    ]
    data = b"".join(encode_batch(5, contexts))
    assert decode_header(data).crc == zlib.crc32(data[8:])
    columns = decode_batch(data)  # verifies the CRC
    assert [columns.binary("payload", r) for r in range(7)] == [c.payload for c in contexts]


def _origins_in(layout: str, count: int) -> list[Origin]:
    """Origins of ``count`` messages: ``one``, ``runs`` (three clients, a few runs, one
    client twice), ``interleaved`` (every message its own turn), ``copies`` (an equal
    origin per message), ``many-runs`` (more runs than the encoder follows one by one)."""
    clients = [Origin("mqtt", f"client-{n}") for n in range(3)]
    if layout == "one":
        return [clients[0]] * count
    if layout == "runs":
        return [clients[0]] * 10 + [clients[1]] * 7 + [clients[0]] * 3 + [clients[2]] * (count - 20)
    if layout == "interleaved":
        return [clients[n % 3] for n in range(count)]
    if layout == "copies":  # equal, not the same object: one per message
        return [Origin("mqtt", "client-0") for _ in range(count)]
    return [clients[(n // 2) % 3] for n in range(count)]  # many-runs: runs of two


@pytest.mark.parametrize("layout", ["one", "runs", "interleaved", "copies", "many-runs"])
@pytest.mark.parametrize("sizes", ["equal", "varied", "empty"])
def test_origins_and_sizes_of_every_layout_read_back(layout: str, sizes: str) -> None:
    """The encoder's shortcuts (origins in runs, values of one size) read back as the
    general case does."""
    count = 120
    origins = _origins_in(layout, count)

    def payload(n: int) -> bytes:
        return {"equal": b"%04d" % n, "varied": b"p" * (n % 5), "empty": b""}[sizes]

    def topic(n: int) -> str:
        return {"equal": f"t/{n % 10}", "varied": f"t/{n}/é", "empty": "x"}[sizes]

    contexts = [
        Context(topic(n), payload(n), n % 3, n % 2 == 0, origin=origins[n]) for n in range(count)
    ]
    for _ in range(2):  # the second time from the caches
        columns = decode_batch(b"".join(encode_batch(5, contexts)))
        assert [columns.source(r) for r in range(count)] == [o.name for o in origins]
        assert len(columns.origins) == len({id(origin) for origin in origins})
        assert [columns.string("topic", r) for r in range(count)] == [c.topic for c in contexts]
        assert [columns.binary("payload", r) for r in range(count)] == [c.payload for c in contexts]
        assert list(columns.qos) == [c.qos for c in contexts]
        assert list(columns.retain) == [c.retain for c in contexts]


def test_the_encoders_caches_are_bounded_and_refilled() -> None:
    """More batch sizes than the caches hold: each still reads back (a cache emptied when
    full is filled again)."""
    for count in range(1, 3 * _CACHE_LIMIT):
        contexts = [Context("t/1", b"%03d" % n, origin=ORIGIN) for n in range(count)]
        columns = decode_batch(b"".join(encode_batch(0, contexts)))
        assert columns.binary("payload", count - 1) == contexts[-1].payload
        assert columns.string("topic", 0) == "t/1"
    assert len(_EVEN) <= _CACHE_LIMIT and len(_STRUCTS) <= _CACHE_LIMIT
