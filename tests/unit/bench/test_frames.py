"""bench.frames: frames encoded once, packets counted by their fixed headers.

Expected bytes are written out by hand from the MQTT 3.1.1 / 5.0 specifications.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.frames import (
    PUBACK,
    PUBLISH,
    PacketCounter,
    StreamError,
    encode_connect,
    encode_publish,
    encode_publish_run,
    encode_remaining_length,
    encode_subscribe,
    split_packets,
)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_remaining_length(n: int, expected: bytes) -> None:
    assert encode_remaining_length(n) == expected


def test_connect_311_and_5() -> None:
    assert encode_connect("c", 4, 60) == b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01c"
    assert encode_connect("c", 5, 60) == b"\x10\x0e\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x01c"
    assert encode_connect("c", 3, 60) == b"\x10\x0f\x00\x06MQIsdp\x03\x02\x00\x3c\x00\x01c"


def test_subscribe_311_and_5() -> None:
    assert encode_subscribe("a/+", 1, 7, 4) == b"\x82\x08\x00\x07\x00\x03a/+\x01"
    assert encode_subscribe("a/+", 1, 7, 5) == b"\x82\x09\x00\x07\x00\x00\x03a/+\x01"


def test_publish_qos0_and_qos1() -> None:
    assert encode_publish("t", b"xy", 0, level=4) == b"\x30\x05\x00\x01txy"
    assert encode_publish("t", b"xy", 1, 258, 4) == b"\x32\x07\x00\x01t\x01\x02xy"
    assert encode_publish("t", b"xy", 1, 258, 5) == b"\x32\x08\x00\x01t\x01\x02\x00xy"


@pytest.mark.parametrize("level", [4, 5])
def test_publish_run_slices_are_single_frames(level: int) -> None:
    run = encode_publish_run("a/b", b"0123", 1, 1, 300, level)
    size = len(run) // 300
    for packet_id in (1, 2, 255, 256, 300):
        start = (packet_id - 1) * size
        assert run[start : start + size] == encode_publish("a/b", b"0123", 1, packet_id, level)


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _stream() -> bytes:
    """Runs of same-shaped publishes broken by other packets and by other shapes."""
    frame = encode_publish("bench/in/0", bytes(16), 0)
    longer = encode_publish("bench/in/10", bytes(200), 0)  # two-byte remaining length
    suback = b"\x90\x03\x00\x01\x00"
    return frame * 50 + suback + frame * 3 + longer + frame * 40 + b"\xd0\x00" + longer * 2


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 29, 64, 1000, 100_000])
def test_counter_counts_across_any_split(chunk: int) -> None:
    counter = PacketCounter(PUBLISH)
    total = sum(counter.feed(part) for part in _chunks(_stream(), chunk))
    assert total == 96
    assert counter.counts[PUBLISH] == 96
    assert counter.counts[9] == 1  # SUBACK
    assert counter.counts[13] == 1  # PINGRESP


def test_counter_small_max_run_gives_same_count() -> None:
    counter = PacketCounter(PUBLISH, max_run=4)
    assert sum(counter.feed(part) for part in _chunks(_stream(), 333)) == 96


def test_counter_accepts_memoryview_and_keeps_partial_packet() -> None:
    frame = encode_publish("t", bytes(16), 0)
    counter = PacketCounter(PUBLISH)
    assert counter.feed(memoryview(frame * 2 + frame[:5])) == 2
    assert counter.feed(memoryview(frame[5:])) == 1


def test_counter_counts_pubacks_for_publishers() -> None:
    acks = b"".join(b"\x40\x02" + i.to_bytes(2, "big") for i in range(1, 101))
    acks += b"\x40\x03\x00\x65\x00"  # MQTT 5 PUBACK with a reason code
    counter = PacketCounter(PUBACK)
    assert sum(counter.feed(part) for part in _chunks(acks, 9)) == 101


@pytest.mark.parametrize("level", [4, 5])
@pytest.mark.parametrize("chunk", [1, 5, 31, 4096])
def test_counter_acks_qos1_publishes_in_order(level: int, chunk: int) -> None:
    ids = [*range(1, 120), 7, 65535]
    stream = b"".join(encode_publish("q/1", b"p" * 16, 1, i, level) for i in ids[:60])
    stream += encode_publish("q/other-topic", b"p", 1, 999, level)
    stream += encode_publish("q/0", b"p" * 16, 0, level=level)  # QoS 0: no PUBACK
    stream += b"".join(encode_publish("q/2", b"p" * 16, 1, i, level) for i in ids[60:])
    counter = PacketCounter(PUBLISH, ack_publishes=True)
    acks = b""
    for part in _chunks(stream, chunk):
        counter.feed(part)
        acks += counter.take_acks()
    expected = [*ids[:60], 999, *ids[60:]]
    assert acks == b"".join(b"\x40\x02" + i.to_bytes(2, "big") for i in expected)
    assert counter.counts[PUBLISH] == len(ids) + 2


def test_counter_rejects_reserved_type() -> None:
    with pytest.raises(StreamError):
        PacketCounter().feed(b"\x00\x00")


def test_split_packets_keeps_rest() -> None:
    frame = encode_publish("t", b"xy", 0)
    packets, rest = split_packets(frame + frame[:3])
    assert packets == [(0x30, b"\x00\x01txy")]
    assert rest == frame[:3]


_packets = st.lists(
    st.tuples(
        st.sampled_from(["a", "bench/in/1", "b" * 130]),
        st.integers(0, 300),
        st.sampled_from([0, 1]),
        st.integers(1, 0xFFFF),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    packets=_packets,
    cuts=st.lists(st.integers(0, 40_000), max_size=8),
    level=st.sampled_from([4, 5]),
)
def test_counter_matches_packet_list_for_any_split(
    packets: list[tuple[str, int, int, int]], cuts: list[int], level: int
) -> None:
    # Repeating each packet makes the runs the fast path is built for.
    frames = [
        encode_publish(topic, bytes(size), qos, packet_id, level)
        for topic, size, qos, packet_id in packets
        for _ in range(3)
    ]
    stream = b"".join(frames)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    counter = PacketCounter(PUBLISH, ack_publishes=True, max_run=5)
    total = 0
    acks = b""
    for lo, hi in itertools.pairwise(bounds):
        total += counter.feed(stream[lo:hi])
        acks += counter.take_acks()
    assert total == len(frames)
    assert acks == b"".join(
        b"\x40\x02" + packet_id.to_bytes(2, "big")
        for _, _, qos, packet_id in packets
        for _ in range(3)
        if qos == 1
    )
