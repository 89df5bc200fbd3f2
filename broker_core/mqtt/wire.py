"""Primitive data representations of MQTT (MQTT 5.0 section 1.5, 3.1.1 section 1.5).

Readers take ``(buf, pos, end)`` and return ``(value, new_pos)``; they raise
``MalformedPacket`` when the bytes run out before ``end`` or break an encoding rule.
Writers return ``bytes``.
"""

from __future__ import annotations

import struct

from broker_core.errors import MalformedPacket

__all__ = [
    "MAX_VARINT",
    "encode_binary",
    "encode_utf8",
    "encode_varint",
    "read_binary",
    "read_u8",
    "read_u16",
    "read_u32",
    "read_utf8",
    "read_varint",
    "validate_utf8_text",
]

MAX_VARINT = 268_435_455

_U16 = struct.Struct("!H")
_U32 = struct.Struct("!I")


def encode_varint(value: int) -> bytes:
    """Variable Byte Integer (MQTT 5.0 1.5.5): 1 to 4 bytes, 7 bits each, LSB first."""
    if value < 128:
        return bytes((value,))
    if not 0 <= value <= MAX_VARINT:
        raise ValueError(f"variable byte integer out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Reads a Variable Byte Integer of MQTT 5 (properties); more than 4 bytes, or more
    than the value needs, is malformed [MQTT-1.5.5-1]. The Remaining Length, the one
    such integer of MQTT 3.1 / 3.1.1 (2.2.3, no minimal-encoding rule), is read by the
    decoder (``codec.Decoder.feed``), minimal for MQTT 5 only."""
    value = 0
    shift = 0
    for i in range(4):
        if pos >= end:
            raise MalformedPacket("variable byte integer runs past the end of the packet")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if i and byte == 0:
                # An encoding using more bytes than needed is not the minimal form the
                # spec mandates ("MUST use the minimum number of bytes" [MQTT-1.5.5-1]).
                raise MalformedPacket("variable byte integer is not minimally encoded")
            return value, pos
        shift += 7
    raise MalformedPacket("variable byte integer longer than 4 bytes")


def read_u8(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos >= end:
        raise MalformedPacket("packet ends before a byte field")
    return buf[pos], pos + 1


def read_u16(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 2 > end:
        raise MalformedPacket("packet ends before a two byte integer")
    return (buf[pos] << 8) | buf[pos + 1], pos + 2


def read_u32(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    if pos + 4 > end:
        raise MalformedPacket("packet ends before a four byte integer")
    return _U32.unpack_from(buf, pos)[0], pos + 4


def read_binary(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    """Binary Data: a two byte length then that many bytes."""
    if pos + 2 > end:
        raise MalformedPacket("packet ends before a binary field's length")
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    if pos + n > end:
        raise MalformedPacket("binary field runs past the end of the packet")
    return bytes(buf[pos : pos + n]), pos + n


def read_utf8(buf: bytes, pos: int, end: int) -> tuple[str, int]:
    """UTF-8 Encoded String: well-formed UTF-8 without U+0000 [MQTT-1.5.4-1, -2]."""
    if pos + 2 > end:
        raise MalformedPacket("packet ends before a string's length")
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    stop = pos + n
    if stop > end:
        raise MalformedPacket("string runs past the end of the packet")
    raw = buf[pos:stop]
    try:
        # Python's strict decoder rejects overlong forms and encoded surrogates.
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedPacket(f"string is not well-formed UTF-8: {exc.reason}") from exc
    if "\x00" in text:
        raise MalformedPacket("string contains U+0000")
    return text, stop


def validate_utf8_text(text: str) -> None:
    """Raises ``ValueError`` when ``text`` cannot be sent as an MQTT string (our misuse)."""
    if "\x00" in text:
        raise ValueError("MQTT strings must not contain U+0000")


def encode_utf8(text: str) -> bytes:
    data = text.encode("utf-8")
    n = len(data)
    if n > 0xFFFF:
        raise ValueError("MQTT string longer than 65535 bytes")
    return _U16.pack(n) + data


def encode_binary(data: bytes) -> bytes:
    n = len(data)
    if n > 0xFFFF:
        raise ValueError("MQTT binary field longer than 65535 bytes")
    return _U16.pack(n) + data
