"""``edgebus run`` killed with ``kill -9``: what ``log-end`` records (docs/spark.md, "On
disk").

- Under ``fsync: always`` every acknowledged record is within ``log-end`` as its PUBACK
  goes: records acknowledged just before the kill, then lost from the last segment (cut
  short, as a power loss or a wrong ``truncate`` would), are refused at the next start
  with one line naming the log and the segment, never silently given again. Before,
  ``log-end`` was written every 5 s, so the loss of what the last 5 s wrote went
  unnoticed.
- A log left intact by a ``kill -9``, rolled segments and all, or by a clean stop, opens
  with every acknowledged record, under each fsync policy: no false refusal.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest

from spark_sink.records import HEADER, decode_header
from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY, Http, bearer
from tests.integration.components.support import wait_for

API_LINE = re.compile(r"HTTP API listening on http://127\.0\.0\.1:(\d+)/api/v1")


def _start(tmp_path: Path, stream: Path, fsync: str, segment: str) -> tuple[BrokerHandle, Http]:
    config = (
        f"persistence: sqlite\napi:\n  bind: 127.0.0.1:0\n  keys: ['{KEY}']\n"
        f"stream:\n  enabled: true\n  path: {stream}\n  fsync: {fsync}\n"
        f"  segment_bytes: {segment}\n"
    )
    gateway = start_edgebus(tmp_path, config)

    def api_port() -> int | None:
        found = API_LINE.search(gateway.stderr_path.read_text(errors="replace"))
        return int(found.group(1)) if found else None

    port = wait_for(api_port, lambda p: p is not None)
    return gateway, Http(f"http://127.0.0.1:{port}", bearer(KEY))


def _state(http: Http) -> dict[str, Any]:
    reply = http.get("/api/v1/components/sink/stream")
    assert reply.status == 200, reply.text
    state: dict[str, Any] = reply.json()
    return state


def _settled(http: Http) -> dict[str, Any]:
    """The component's state once its first run opened the log or failed to."""
    return wait_for(lambda: _state(http), lambda s: s["state"] != "starting")


def _publish(gateway: BrokerHandle, count: int, start: int = 0) -> None:
    """``count`` QoS 1 messages, each acknowledged (so in the log) before the next."""
    client = RawClient("127.0.0.1", gateway.port, protocol_level=5)
    try:
        client.send(mb.gen_connect(f"pub{start}", proto_ver=5))
        assert client.recv_packet().reason_code == 0
        for number in range(start, start + count):
            client.send(mb.gen_publish("le/x", str(number), qos=1, mid=1, proto_ver=5))
            ack = client.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
            assert ack.reason_code == 0x10  # no subscriber: accepted, and in the log
    finally:
        client.close()


def _kill(gateway: BrokerHandle) -> None:
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(unit(10))
    gateway.stop()


def _batch_at(segment: Path, offset: int) -> int:
    """The byte where the batch of ``segment`` whose first record is ``offset`` starts."""
    data = segment.read_bytes()
    position = 0
    while position < len(data):
        header = decode_header(data[position : position + HEADER.size])
        if header.first == offset:
            return position
        position += header.size
    raise AssertionError(f"no batch starts at offset {offset} in {segment}")


@pytest.mark.timeout(120)
def test_acknowledged_records_lost_after_a_kill_are_refused(tmp_path: Path) -> None:
    stream = tmp_path / "stream"
    gateway, http = _start(tmp_path, stream, "always", "64MB")
    try:
        wait_for(lambda: _state(http)["state"], lambda s: s == "running")
        _publish(gateway, 40)
    finally:
        _kill(gateway)
    segment = stream / "00000000000000000000.log"
    with segment.open("r+b") as file:  # the last 10 acknowledged records lost
        file.truncate(_batch_at(segment, 30))
    left = segment.read_bytes()

    gateway, http = _start(tmp_path, stream, "always", "64MB")
    try:
        state = wait_for(lambda: _state(http), lambda s: s["state"] == "backing_off")
        error = state["last_error"]
        assert "offsets 30 to 39 are missing" in error
        assert str(stream) in error
        assert segment.name in error
        assert "\n" not in error
        assert http.get("/api/v1/stream/offsets").status == 404  # never opened
        assert segment.read_bytes() == left  # nothing cut, nothing written
        client = RawClient("127.0.0.1", gateway.port, protocol_level=5)
        client.send(mb.gen_connect("refused", proto_ver=5))
        assert client.recv_packet().reason_code == 0
        client.send(mb.gen_publish("le/y", b"y", qos=1, mid=1, proto_ver=5))
        closed = client.wait_for(lambda p: p.type != mb.PacketType.PUBACK)
        assert (closed.type, closed.reason_code) == (mb.PacketType.DISCONNECT, 0x80)
        client.close()
    finally:
        gateway.stop()
    assert "offsets 30 to 39 are missing" in gateway.stderr_path.read_text(errors="replace")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("fsync", ["always", "interval", "never"])
def test_an_intact_log_opens_after_a_kill_and_after_a_clean_stop(
    tmp_path: Path, fsync: str
) -> None:
    stream = tmp_path / "stream"
    gateway, http = _start(tmp_path, stream, fsync, "4KiB")  # a roll every ~60 records
    try:
        wait_for(lambda: _state(http)["state"], lambda s: s == "running")
        _publish(gateway, 300)
    finally:
        _kill(gateway)
    assert len(list(stream.glob("*.log"))) > 3

    for count, stop in ((300, "clean"), (350, "kill")):
        gateway, http = _start(tmp_path, stream, fsync, "4KiB")
        try:
            state = _settled(http)
            assert state["state"] == "running", state
            offsets = http.get("/api/v1/stream/offsets").json()
            assert (offsets["start"], offsets["end"]) == (0, count)
            _publish(gateway, 50, start=count)
        finally:
            if stop == "kill":
                _kill(gateway)
            else:
                gateway.stop()  # SIGTERM: a clean stop

    gateway, http = _start(tmp_path, stream, fsync, "4KiB")
    try:
        state = _settled(http)
        assert state["state"] == "running", state
        assert http.get("/api/v1/stream/offsets").json()["end"] == 400
        rows = http.get("/api/v1/stream/records?limit=1000").text.splitlines()
        assert len(rows) == 400
    finally:
        gateway.stop()
