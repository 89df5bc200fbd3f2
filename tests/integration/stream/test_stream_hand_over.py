"""The stream log across restarts of its component: nothing acknowledged is lost.

A restart on request (``POST /components/sink/stream/restart``), an update of the
``stream`` section (a reload: the same ``path`` with other settings, or another
``path``) and the restart after a failure each end a run of the component and start
another. Every message a QoS 1 publisher saw acknowledged meanwhile must be in the log,
once, at its place in the order. A log that no run could open refuses QoS 1 and 2
messages of its topics (no PUBACK), as a failed write does.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.components import SINK
from spark_sink.segments import StreamLog
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.api.support import KEY, Http
from tests.integration.bridge.support import StreamPublisher
from tests.integration.components.support import status_of, wait_for
from tests.integration.stream.support import http_of, offsets_of, records_of

COUNT = 12_000
RATE = 4000.0  # messages per second: the stream lasts 3 s, restarts fall inside it


def _config(data: Path, **stream: Any) -> str:
    """A whole configuration (what ``running_gateway`` adds included), for a reload."""
    config = {
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
        "data_dir": str(data),
        "persistence": "memory",
        "sys": {"interval": 0},
        "api": {"bind": "127.0.0.1:0", "keys": [KEY]},
        "stream": {"enabled": True, "topics": ["gap/#"], **stream},
    }
    return yaml.safe_dump(config)


def _state(gw: RunningGateway) -> str:
    state: str = status_of(gw, SINK, "stream")["state"]
    return state


def _numbers(http: Http) -> list[int]:
    """The numbers in the log, in offset order; the offsets must have no gap."""
    rows = records_of(http)
    start = offsets_of(http)["start"]
    assert [row["offset"] for row in rows] == list(range(start, start + len(rows)))
    return [int(row["payload_json"]) for row in rows]


def _numbers_on_disk(directory: Path) -> list[int]:
    """The numbers in a log no gateway writes any more, read from its files."""
    stream_log = StreamLog(directory, fsync="never")
    stream_log.open()
    try:
        bounds = stream_log.bounds()
        return [
            int(columns.binary("payload", row))
            for columns, lo, hi in stream_log.slices(bounds.start, bounds.end)
            for row in range(lo, hi)
        ]
    finally:
        stream_log.close()


def _append_flags(directory: Path) -> list[int]:
    """The flags of this process's descriptors open for writing on files in
    ``directory`` (the in-process gateway's segment being appended to)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue  # closed meanwhile
        flags = int(info.split("flags:")[1].split()[0], 8)
        if Path(target).parent == directory and flags & os.O_WRONLY:
            found.append(flags)
    return found


def _reload(gw: RunningGateway, http: Http, file: Path, text: str, then: str = "running") -> None:
    """Reloads ``text`` as the configuration file; returns once the stream's next run
    reached the state ``then`` (the status reads the last run's until it stops)."""
    before = status_of(gw, SINK, "stream")["since"]
    file.write_text(text)
    gw.call(lambda: setattr(gw.gateway, "config_path", file))
    reply = http.post("/api/v1/reload")
    assert reply.status == 200, reply.text
    assert "sink: restarted stream" in reply.json()["reloaded"]
    wait_for(
        lambda: status_of(gw, SINK, "stream"),
        lambda s: s["state"] == then and s["since"] != before,
    )


def _restart_three_times(gw: RunningGateway, publisher: StreamPublisher, restart: Any) -> None:
    """``restart(round)`` three times while ``publisher`` streams, each once the
    component runs again."""
    for round_, after in enumerate((2000, 5000, 8000)):
        wait_for(lambda: len(publisher.acked), lambda n, a=after: n >= a)  # type: ignore[misc]
        restart(round_)
        assert len(publisher.acked) < COUNT  # mid-stream
        wait_for(lambda: _state(gw), lambda s: s == "running")


def test_restarts_on_request_lose_no_acknowledged_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_gateway(tmp_path, _config(data)) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "running")
        publisher = StreamPublisher(gw.port, "gap/restart", COUNT, rate=RATE)
        publisher.start()

        def restart(_: int) -> None:
            reply = http.post("/api/v1/components/sink/stream/restart")
            assert reply.status == 200, reply.text

        _restart_three_times(gw, publisher, restart)
        acked = publisher.done(60)
        assert acked == list(range(1, COUNT + 1))
        assert _numbers(http) == acked  # each once, in order
        assert status_of(gw, SINK, "stream")["restarts"] == 3


def test_an_update_on_the_same_path_applies_new_settings_and_loses_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    changes = [
        {"fsync": "interval", "fsync_interval": "200ms", "queue_size": 5000},
        {"fsync": "never", "segment_bytes": "64KB", "max_bytes": "1GB", "retention": "1h"},
        {"fsync": "always", "segment_bytes": "32KB", "queue_size": 100000},
    ]
    with running_gateway(tmp_path, _config(data)) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "running")
        publisher = StreamPublisher(gw.port, "gap/update", COUNT, rate=RATE)
        publisher.start()

        directory = data / "sink" / "stream"
        assert [f & os.O_DSYNC for f in _append_flags(directory)] == [os.O_DSYNC]
        dsync: list[list[int]] = []

        def update(round_: int) -> None:
            _reload(gw, http, tmp_path / "edgebus.yaml", _config(data, **changes[round_]))
            dsync.append([f & os.O_DSYNC for f in _append_flags(directory)])

        _restart_three_times(gw, publisher, update)
        # fsync: always writes through O_DSYNC, interval does not: the open file follows.
        assert dsync == [[0], [0], [os.O_DSYNC]]
        acked = publisher.done(60)
        assert acked == list(range(1, COUNT + 1))
        assert _numbers(http) == acked
        # The last settings hold: 32 KB segments from the last update on.
        segments = sorted((data / "sink" / "stream").glob("*.log"))
        assert len(segments) > 3
        assert all(path.stat().st_size < 40 * 1024 for path in segments[-3:-1])
        assert offsets_of(http)["segments"] == len(segments)


def test_an_update_to_another_path_records_every_message_in_one_of_the_logs(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    paths = [tmp_path / "second", tmp_path / "third", data / "sink" / "stream"]
    with running_gateway(tmp_path, _config(data)) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "running")
        publisher = StreamPublisher(gw.port, "gap/move", COUNT, rate=RATE)
        publisher.start()

        def move(round_: int) -> None:
            _reload(gw, http, tmp_path / "edgebus.yaml", _config(data, path=str(paths[round_])))

        _restart_three_times(gw, publisher, move)
        acked = publisher.done(60)
        assert acked == list(range(1, COUNT + 1))
        first = _numbers(http)  # the first log, written again after the last update
    second, third = _numbers_on_disk(paths[0]), _numbers_on_disk(paths[1])
    assert second and third
    # One after the other: the first log, the second, the third, the first again.
    before = len([n for n in first if n < second[0]])
    assert first[:before] + second + third + first[before:] == acked


def test_a_new_path_that_cannot_be_opened_leaves_the_old_log_recording(tmp_path: Path) -> None:
    data = tmp_path / "data"
    blocked = tmp_path / "blocked"
    blocked.write_text("in the way")
    with running_gateway(tmp_path, _config(data)) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "running")
        publisher = StreamPublisher(gw.port, "gap/blocked", COUNT, rate=RATE)
        publisher.start()
        wait_for(lambda: len(publisher.acked), lambda n: n >= 2000)
        _reload(
            gw, http, tmp_path / "edgebus.yaml", _config(data, path=str(blocked)), "backing_off"
        )
        assert "blocked" in status_of(gw, SINK, "stream")["last_error"]
        wait_for(lambda: len(publisher.acked), lambda n: n >= 5000)
        # Backing off, the old log records, and reads over HTTP, what is acknowledged.
        acked_so_far = len(publisher.acked)
        assert _numbers(http)[:acked_so_far] == list(range(1, acked_so_far + 1))
        assert acked_so_far < COUNT
        blocked.unlink()
        assert http.post("/api/v1/components/sink/stream/restart").status == 200
        wait_for(lambda: _state(gw), lambda s: s == "running")
        acked = publisher.done(60)
        assert acked == list(range(1, COUNT + 1))
        moved = _numbers(http)  # the new log
    assert moved
    assert _numbers_on_disk(data / "sink" / "stream") + moved == acked


def test_a_failed_run_hands_its_open_log_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that fails with its log open (here its retention cannot delete a file)
    leaves the log recording while the component backs off."""
    data = tmp_path / "data"
    failures = [0]
    real = StreamLog.enforce_retention

    def enforce_retention(self: StreamLog, now_ns: int | None = None) -> int:
        if failures[0] < 1 and self.bounds().end > 3000:
            failures[0] += 1
            raise OSError(errno.EIO, "Input/output error")
        return real(self, now_ns)

    monkeypatch.setattr(StreamLog, "enforce_retention", enforce_retention)
    # retention 2s: the component's housekeeping runs every 0.5 s
    with running_gateway(tmp_path, _config(data, retention="2s")) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "running")
        publisher = StreamPublisher(gw.port, "gap/fail", COUNT, rate=RATE)
        publisher.start()
        wait_for(lambda: _state(gw), lambda s: s == "backing_off")
        during = len(publisher.acked)
        wait_for(lambda: _state(gw), lambda s: s == "running")
        acked = publisher.done(60)
        assert during < COUNT
        assert acked == list(range(1, COUNT + 1))
        status = status_of(gw, SINK, "stream")
        assert "Input/output error" in status["last_error"]
        assert status["restarts"] == 1
        # Retention (2 s) may have deleted old segments: what is left is the tail.
        numbers = _numbers(http)
        assert numbers == acked[len(acked) - len(numbers) :]


def _connect(port: int, client_id: str) -> RawClient:
    client = RawClient("127.0.0.1", port, protocol_level=5)
    client.send(mb.gen_connect(client_id, proto_ver=5))
    assert client.recv_packet().reason_code == 0
    return client


def test_a_log_no_run_could_open_refuses_what_it_would_record(tmp_path: Path) -> None:
    """Its directory cannot be created (a file is in the way): QoS 1 and 2 messages of
    its topics get no PUBACK / PUBREC, their publishers are disconnected to send them
    again; other topics and QoS 0 go on. Paused, it refuses nothing."""
    data = tmp_path / "data"
    blocked = tmp_path / "log-here"
    blocked.write_text("not a directory")
    with running_gateway(tmp_path, _config(data, path=str(blocked))) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "backing_off")
        assert "log-here" in status_of(gw, SINK, "stream")["last_error"]
        pub = _connect(gw.port, "refused")
        pub.send(mb.gen_publish("other/topic", b"1", qos=1, mid=1, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 1
        pub.send(mb.gen_publish("gap/zero", b"0", qos=0, proto_ver=5))
        for qos, mid in ((1, 2), (2, 3)):
            pub.send(mb.gen_publish("gap/one", b"2", qos=qos, mid=mid, proto_ver=5))
            closed = pub.wait_for(lambda p: p.type != mb.PacketType.PUBACK)
            assert (closed.type, closed.reason_code) == (mb.PacketType.DISCONNECT, 0x80)
            pub = _connect(gw.port, "refused")
        stats = status_of(gw, SINK, "stream")["component_stats"]
        assert stats["refused"] == 2
        assert http.get("/api/v1/stream/offsets").status == 404

        # Paused: the log is switched off on purpose, nothing is refused.
        assert http.post("/api/v1/components/sink/stream/pause").status == 200
        wait_for(lambda: _state(gw), lambda s: s == "paused")
        pub.send(mb.gen_publish("gap/paused", b"3", qos=1, mid=4, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 4

        # The directory can be made: the next run opens the log and records again.
        blocked.unlink()
        assert http.post("/api/v1/components/sink/stream/resume").status == 200
        wait_for(lambda: _state(gw), lambda s: s == "running")
        pub.send(mb.gen_publish("gap/one", b"2", qos=1, mid=5, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 5
        assert [row["payload_json"] for row in records_of(http)] == ["2"]
    shutil.rmtree(blocked)


def test_a_refusing_log_lets_through_once_a_run_opens_it(tmp_path: Path) -> None:
    """Backing off, then restarted on request once the directory can be made: no
    refusal is left behind, and the log records."""
    data = tmp_path / "data"
    blocked = tmp_path / "later"
    blocked.write_text("not yet")
    with running_gateway(tmp_path, _config(data, path=str(blocked))) as gw:
        http = http_of(gw)
        wait_for(lambda: _state(gw), lambda s: s == "backing_off")
        assert gw.call(lambda: len(gw.broker.acks.participants)) == 1  # the refusal
        blocked.unlink()
        assert http.post("/api/v1/components/sink/stream/restart").status == 200
        wait_for(lambda: _state(gw), lambda s: s == "running")
        assert gw.call(lambda: len(gw.broker.acks.participants)) == 1  # the log's writer
        assert gw.call(lambda: len(gw.broker.observers.message_hooks)) == 1
        pub = _connect(gw.port, "after")
        pub.send(mb.gen_publish("gap/x", b"7", qos=1, mid=1, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 1
        assert [row["payload_json"] for row in records_of(http)] == ["7"]
        assert http.post("/api/v1/components/sink/stream/pause").status == 200
        wait_for(lambda: _state(gw), lambda s: s == "paused")
        assert gw.call(lambda: len(gw.broker.acks.participants)) == 0
        assert gw.call(lambda: len(gw.broker.observers.message_hooks)) == 0
