"""MQTT frames for the load generator: encoded once, counted by their fixed headers.

The generator never decodes what it receives field by field. ``PacketCounter`` reads
only the fixed header (type byte and Remaining Length) of each packet, and for long
runs of same-shaped packets (the normal case under load: one topic, one payload size)
it checks the headers of the whole run with strided byte slices, which run at C speed.
For QoS 1 it also reads the Topic Name length to locate each Packet Identifier and
builds the PUBACKs for the run the same way.

Nothing here touches a socket or a clock; the tests in ``tests/unit/bench`` feed it
bytes directly. MQTT 3.1 (level 3), 3.1.1 (level 4) and 5.0 (level 5) are supported.
"""

from __future__ import annotations

__all__ = [
    "CONNACK",
    "PINGREQ",
    "PUBACK",
    "PUBLISH",
    "SUBACK",
    "PacketCounter",
    "StreamError",
    "encode_connect",
    "encode_disconnect",
    "encode_puback",
    "encode_publish",
    "encode_publish_run",
    "encode_remaining_length",
    "encode_subscribe",
    "split_packets",
]

# Control packet types (MQTT 3.1.1 section 2.2.1, MQTT 5.0 section 2.1.2).
CONNECT = 1
CONNACK = 2
PUBLISH = 3
PUBACK = 4
SUBSCRIBE = 8
SUBACK = 9
PINGREQ = 12
DISCONNECT = 14

_MAX_REMAINING_LENGTH = 268_435_455
_PROTOCOL_NAMES = {3: b"MQIsdp", 4: b"MQTT", 5: b"MQTT"}


class StreamError(ValueError):
    """The broker sent bytes that are not a sequence of MQTT control packets."""


def encode_remaining_length(n: int) -> bytes:
    """The Variable Byte Integer encoding of ``n`` (MQTT 3.1.1 section 2.2.3)."""
    if not 0 <= n <= _MAX_REMAINING_LENGTH:
        raise ValueError(f"remaining length out of range: {n}")
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _utf8(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def _frame(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte,)) + encode_remaining_length(len(body)) + body


def _check_level(level: int) -> None:
    if level not in _PROTOCOL_NAMES:
        raise ValueError(f"protocol level must be 3, 4 or 5, got {level}")


def encode_connect(client_id: str, level: int = 4, keepalive_s: int = 60) -> bytes:
    """A CONNECT with Clean Session (Clean Start) set, no will, no credentials."""
    _check_level(level)
    body = _utf8(_PROTOCOL_NAMES[level].decode()) + bytes((level, 0x02))
    body += keepalive_s.to_bytes(2, "big")
    if level == 5:
        body += b"\x00"  # no CONNECT properties
    body += _utf8(client_id)
    return _frame(CONNECT << 4, body)


def encode_subscribe(topic_filter: str, qos: int, packet_id: int = 1, level: int = 4) -> bytes:
    """A SUBSCRIBE to one filter at ``qos``."""
    _check_level(level)
    body = packet_id.to_bytes(2, "big")
    if level == 5:
        body += b"\x00"  # no SUBSCRIBE properties
    body += _utf8(topic_filter) + bytes((qos,))
    return _frame((SUBSCRIBE << 4) | 0x02, body)


def encode_publish(
    topic: str, payload: bytes, qos: int = 0, packet_id: int = 0, level: int = 4
) -> bytes:
    """One PUBLISH frame; ``packet_id`` is used only when ``qos`` > 0."""
    _check_level(level)
    if qos not in (0, 1, 2):
        raise ValueError(f"qos must be 0, 1 or 2, got {qos}")
    body = _utf8(topic)
    if qos:
        if not 1 <= packet_id <= 0xFFFF:
            raise ValueError(f"packet id must be 1..65535, got {packet_id}")
        body += packet_id.to_bytes(2, "big")
    if level == 5:
        body += b"\x00"  # no PUBLISH properties
    return _frame((PUBLISH << 4) | (qos << 1), body + payload)


def encode_publish_run(
    topic: str, payload: bytes, qos: int, first_id: int, count: int, level: int = 4
) -> bytes:
    """``count`` QoS > 0 PUBLISH frames with Packet Identifiers ``first_id``, +1, ...

    All frames have the same length, so the frame for identifier ``first_id + i``
    starts at ``i * len(frame)``: a publisher slices a window of frames out of the run
    instead of encoding anything per message.
    """
    if qos == 0:
        raise ValueError("a run of packet identifiers needs qos 1 or 2")
    if first_id < 1 or first_id + count - 1 > 0xFFFF:
        raise ValueError("packet identifiers must stay within 1..65535")
    template = encode_publish(topic, payload, qos, first_id, level)
    size = len(template)
    offset = _packet_id_offset(template)
    out = bytearray(template * count)
    ids = range(first_id, first_id + count)
    out[offset::size] = bytes(i >> 8 for i in ids)
    out[offset + 1 :: size] = bytes(i & 0xFF for i in ids)
    return bytes(out)


def _packet_id_offset(frame: bytes) -> int:
    """Where the Packet Identifier of a QoS > 0 PUBLISH starts."""
    pos = 1
    while frame[pos] & 0x80:
        pos += 1
    pos += 1
    return pos + 2 + int.from_bytes(frame[pos : pos + 2], "big")


def encode_disconnect() -> bytes:
    """DISCONNECT; for MQTT 5 the empty body means reason Normal disconnection."""
    return bytes((DISCONNECT << 4, 0))


def encode_puback(packet_id: int) -> bytes:
    """A PUBACK with no reason code (success in every protocol level)."""
    return bytes((PUBACK << 4, 2)) + packet_id.to_bytes(2, "big")


def _read_header(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """(start of variable header, remaining length) at ``pos``, or None if incomplete."""
    length = 0
    shift = 0
    i = pos + 1
    while True:
        if i >= end:
            return None
        byte = data[i]
        length |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return i, length
        shift += 7
        if shift > 21:
            raise StreamError(f"remaining length longer than 4 bytes at offset {pos}")


def split_packets(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """Whole packets in ``data`` as (first byte, body), and the incomplete rest.

    The slow, general path: used for handshakes and the 1000 msg/s latency probe.
    """
    packets = []
    pos = 0
    end = len(data)
    while pos < end:
        header = _read_header(data, pos, end)
        if header is None:
            break
        body_start, length = header
        if body_start + length > end:
            break
        packets.append((data[pos], data[body_start : body_start + length]))
        pos = body_start + length
    return packets, data[pos:]


def _leading_run(column: bytes, limit: int) -> int:
    """How many leading bytes of ``column`` equal its first byte, at most ``limit``."""
    return min(limit, len(column) - len(column.lstrip(column[:1])))


class PacketCounter:
    """Counts packets of one type in a byte stream split anywhere into chunks.

    ``feed(chunk)`` returns how many complete packets of ``packet_type`` the chunk
    completed; ``counts[t]`` holds the running total for every type ``t``. With
    ``ack_publishes``, every QoS 1 PUBLISH adds a PUBACK to the bytes returned by
    ``take_acks()``.
    """

    __slots__ = ("_acks", "_pending", "ack_publishes", "counts", "max_run", "packet_type")

    def __init__(
        self, packet_type: int = PUBLISH, ack_publishes: bool = False, max_run: int = 8192
    ) -> None:
        self.packet_type = packet_type
        self.ack_publishes = ack_publishes
        self.max_run = max_run
        self.counts = [0] * 16
        self._pending = b""
        self._acks = bytearray()

    def take_acks(self) -> bytes:
        """The PUBACKs owed for the publishes fed so far, once."""
        acks = bytes(self._acks)
        self._acks.clear()
        return acks

    def feed(self, chunk: bytes | bytearray | memoryview) -> int:
        data = self._pending + chunk if self._pending else bytes(chunk)
        end = len(data)
        pos = 0
        counts = self.counts
        wanted = self.packet_type
        found = 0
        while pos < end:
            if pos + 1 >= end:
                break
            first = data[pos]
            length = data[pos + 1]
            if length < 0x80 and pos + 2 + length <= end:
                # Fast path: a run of packets with this same two-byte fixed header.
                size = length + 2
                run = min((end - pos) // size, self.max_run)
                stop = pos + run * size
                run = _leading_run(data[pos:stop:size], run)
                if run > 1:
                    run = _leading_run(data[pos + 1 : stop : size], run)
                kind = first >> 4
                if kind == 0:
                    raise StreamError(f"reserved packet type 0 at offset {pos}")
                if kind == PUBLISH and (first & 0x06) == 0x02 and self.ack_publishes:
                    run = self._ack_run(data, pos, size, run)
                counts[kind] += run
                if kind == wanted:
                    found += run
                pos += run * size
                continue
            header = _read_header(data, pos, end)
            if header is None:
                break
            body_start, length = header
            if body_start + length > end:
                break
            kind = first >> 4
            if kind == 0:
                raise StreamError(f"reserved packet type 0 at offset {pos}")
            if kind == PUBLISH and (first & 0x06) == 0x02 and self.ack_publishes:
                topic_len = int.from_bytes(data[body_start : body_start + 2], "big")
                at = body_start + 2 + topic_len
                self._acks += b"\x40\x02" + data[at : at + 2]
            counts[kind] += 1
            if kind == wanted:
                found += 1
            pos = body_start + length
        self._pending = data[pos:]
        return found

    def _ack_run(self, data: bytes, pos: int, size: int, run: int) -> int:
        """PUBACKs for the leading packets of a run that share one topic length."""
        stop = pos + run * size
        run = _leading_run(data[pos + 2 : stop : size], run)
        run = _leading_run(data[pos + 3 : stop : size], run)
        at = pos + 4 + int.from_bytes(data[pos + 2 : pos + 4], "big")
        stop = pos + run * size
        acks = bytearray(4 * run)
        acks[0::4] = b"\x40" * run
        acks[1::4] = b"\x02" * run
        acks[2::4] = data[at:stop:size]
        acks[3::4] = data[at + 1 : stop : size]
        self._acks += acks
        return run
