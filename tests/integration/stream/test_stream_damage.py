"""A stream log whose files are damaged, lost or shared: never a silent gap, never an offset
that names another record, never damaged records served as good.

Each test runs real gateways (``running_gateway``), publishes with paho at QoS 1, damages
the log's files as a bad sector, a power loss or a second gateway would, and looks through
the HTTP API and the component's status. A log that cannot be opened refuses the QoS 1
and 2 messages it would record (``test_stream_hand_over``): what is checked here is that
such a log is refused, and why.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from gateway.components import SINK
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.api.support import KEY
from tests.integration.broker.support import Clients
from tests.integration.components.support import status_of, wait_for
from tests.integration.stream.support import http_of, offsets_of, records_of

SEGMENT = "00000000000000000000.log"


def _config(stream_path: Path, **stream: Any) -> str:
    settings = "".join(f"  {key}: {value}\n" for key, value in stream.items())
    return f'api:\n  keys: ["{KEY}"]\nstream:\n  enabled: true\n  path: {stream_path}\n{settings}'


def _state(gw: RunningGateway) -> dict[str, Any]:
    return status_of(gw, SINK, "stream")


def _publish(gw: RunningGateway, topic: str, count: int, size: int = 0) -> None:
    """``count`` QoS 1 messages, each acknowledged (so in the log) before the next."""
    clients = Clients(gw)
    try:
        pub = clients.connect(5, f"pub-{topic.replace('/', '-')}")
        for number in range(count):
            payload = str(number).encode().ljust(size, b".")
            assert pub.publish(topic, payload, qos=1) == 0x10  # no subscriber: accepted
    finally:
        clients.close_all()


def _assert_refused(gw: RunningGateway, topic: str) -> None:
    """A QoS 1 message the log would record gets no PUBACK: DISCONNECT 0x80."""
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.send(mb.gen_connect("refused", proto_ver=5))
    assert client.recv_packet().reason_code == 0
    client.send(mb.gen_publish(topic, b"x", qos=1, mid=1, proto_ver=5))
    closed = client.wait_for(lambda p: p.type != mb.PacketType.PUBACK)
    assert (closed.type, closed.reason_code) == (mb.PacketType.DISCONNECT, 0x80)


def _backing_off(gw: RunningGateway) -> str:
    state = wait_for(lambda: _state(gw), lambda s: s["state"] == "backing_off")
    error: str = state["last_error"]
    return error


def test_damage_in_the_middle_of_the_last_segment_is_refused_never_cut(tmp_path: Path) -> None:
    """1 KiB zeroed at byte 5120 of the last segment, whole batches after it: not a torn
    tail. The log is refused with the file and the byte named; nothing is cut, and no
    offset is given again."""
    stream = tmp_path / "stream"
    with running_gateway(tmp_path, _config(stream)) as gw:
        wait_for(lambda: _state(gw)["state"], lambda s: s == "running")
        _publish(gw, "q/x", 220)
        assert offsets_of(http_of(gw))["end"] == 220
    segment = stream / SEGMENT
    size = segment.stat().st_size
    assert size > 8 * 1024
    with segment.open("r+b") as file:
        file.seek(5120)
        file.write(bytes(1024))
    damaged = segment.read_bytes()

    with running_gateway(tmp_path, _config(stream)) as gw:
        error = _backing_off(gw)
        assert str(segment) in error
        assert "is damaged at byte" in error
        assert "a whole batch follows" in error
        assert "nothing is cut" in error
        _assert_refused(gw, "new/after")
        assert http_of(gw).get("/api/v1/stream/offsets").status == 404
    assert segment.read_bytes() == damaged  # not a byte cut


def test_a_torn_tail_after_a_crash_is_still_cut(tmp_path: Path) -> None:
    """What the fix must keep: a short last batch with nothing after it (a crash while
    writing it; the log had given no more than the batches before it) is cut, and the
    log goes on from the last whole batch."""
    stream = tmp_path / "stream"
    with running_gateway(tmp_path, _config(stream)) as gw:
        wait_for(lambda: _state(gw)["state"], lambda s: s == "running")
        _publish(gw, "t/x", 10)
    segment = stream / SEGMENT
    whole = segment.stat().st_size
    with segment.open("ab") as file:
        file.write(segment.read_bytes()[:40])  # the start of a batch, as a crash leaves it
    with running_gateway(tmp_path, _config(stream)) as gw:
        wait_for(lambda: _state(gw)["state"], lambda s: s == "running")
        assert segment.stat().st_size == whole
        assert _state(gw)["component_stats"]["truncated_bytes"] == 40
        _publish(gw, "t/y", 1)
        assert [row["offset"] for row in records_of(http_of(gw))] == list(range(11))


@pytest.mark.parametrize("loss", ["truncated", "deleted"])
def test_a_log_whose_last_segment_was_lost_is_refused(tmp_path: Path, loss: str) -> None:
    """The only segment cut to 0 bytes or deleted: the log had given offsets 0 to 219;
    it does not give them again to other records under the same id."""
    stream = tmp_path / "stream"
    with running_gateway(tmp_path, _config(stream)) as gw:
        wait_for(lambda: _state(gw)["state"], lambda s: s == "running")
        _publish(gw, "q/x", 220)
        log_id = offsets_of(http_of(gw))["log"]
    segment = stream / SEGMENT
    if loss == "truncated":
        segment.write_bytes(b"")
    else:
        segment.unlink()

    with running_gateway(tmp_path, _config(stream)) as gw:
        error = _backing_off(gw)
        assert "offsets 0 to 219 are missing" in error
        assert str(stream) in error
        _assert_refused(gw, "other/topic")
        assert http_of(gw).get("/api/v1/stream/offsets").status == 404

        # Moved away, as the error says: a new log, with a new id, from offset 0.
        stream.rename(tmp_path / "stream.lost")
        http = http_of(gw)
        assert http.post("/api/v1/components/sink/stream/restart").status == 200
        wait_for(lambda: _state(gw)["state"], lambda s: s == "running")
        _publish(gw, "new/log", 1)
        offsets = offsets_of(http)
        assert (offsets["start"], offsets["end"]) == (0, 1)
        assert offsets["log"] != log_id


def test_two_gateways_never_write_one_stream_path(tmp_path: Path) -> None:
    """Two gateways, their own data_dir, one stream.path: the second's log is refused
    (its QoS 1 publishers are not acknowledged), the first records alone. Once the first
    stops, the second opens the log and goes on after its records."""
    stream = tmp_path / "shared"
    with contextlib.ExitStack() as one:
        first = one.enter_context(running_gateway(tmp_path / "one", _config(stream)))
        wait_for(lambda: _state(first)["state"], lambda s: s == "running")
        with running_gateway(tmp_path / "two", _config(stream)) as second:
            error = _backing_off(second)
            assert "in use by another writer" in error
            assert str(stream) in error
            _publish(first, "a/b", 50)
            _assert_refused(second, "c/d")
            assert offsets_of(http_of(first))["end"] == 50
            one.close()  # the first gateway stops: its log is closed, the lock let go
            http = http_of(second)
            assert http.post("/api/v1/components/sink/stream/restart").status == 200
            wait_for(lambda: _state(second)["state"], lambda s: s == "running")
            _publish(second, "c/d", 50)
            rows = records_of(http)
    assert [row["offset"] for row in rows] == list(range(100))
    assert [row["topic"] for row in rows] == ["a/b"] * 50 + ["c/d"] * 50


def test_a_damaged_batch_of_a_sealed_segment_is_an_error_never_served(tmp_path: Path) -> None:
    """16 bytes overwritten inside a batch of a sealed segment (bit rot): a read of it is
    a 500 naming the segment, the byte and the offsets, counted and logged; the other
    segments read as before."""
    stream = tmp_path / "stream"
    with running_gateway(tmp_path, _config(stream, segment_bytes="4KiB")) as gw:
        wait_for(lambda: _state(gw)["state"], lambda s: s == "running")
        _publish(gw, "s/x", 120, size=100)
        http = http_of(gw)
        assert _state(gw)["component_stats"]["segments"] > 2
        intact = records_of(http, start=0, limit=1)[0]
        segment = stream / SEGMENT
        with segment.open("r+b") as file:
            file.seek(200)
            file.write(b"CORRUPTCORRUPT!!")

        for fmt in ("jsonl", "arrow"):
            reply = http.get(f"/api/v1/stream/records?start=0&limit=1&format={fmt}")
            assert reply.status == 500, reply.text
            detail = reply.json()["detail"]
            assert str(segment) in detail
            assert "is damaged at byte" in detail
            assert "the batch of offsets 0 to" in detail
        # With a topic filter, the range's end is found by reading: the same error.
        reply = http.get("/api/v1/stream/records?start=0&limit=1&topic=s/%23")
        assert reply.status == 500, reply.text
        assert _state(gw)["component_stats"]["damaged_batches"] >= 3
        # What is intact reads as before.
        later = offsets_of(http)["end"] - 1
        assert [row["offset"] for row in records_of(http, start=later)] == [later]
    assert intact["offset"] == 0
