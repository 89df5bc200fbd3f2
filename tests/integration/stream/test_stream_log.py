"""The stream log in a running gateway: what enters, when it is acknowledged, how it is read."""

from __future__ import annotations

import base64
import errno
import os
import sys
import threading
from pathlib import Path

import pytest

from gateway.components import SINK
from spark_sink import segments as segments_module
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.integration.api.support import KEY, PASSWORD, USER, Http, api_key, basic, bearer
from tests.integration.broker.support import Clients, publish_props
from tests.integration.components.support import status_of, wait_for
from tests.integration.stream.support import (
    LOOPBACK,
    STREAM,
    arrow_of,
    header,
    http_of,
    offsets_of,
    records_of,
)


def _running_log(gw: RunningGateway) -> Http:
    """The API of ``gw`` once its stream log runs."""
    wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
    return http_of(gw)


def _raw(port: int, client_id: str) -> RawClient:
    client = RawClient("127.0.0.1", port, protocol_level=5)
    client.send(mb.gen_connect(client_id, proto_ver=5))
    assert client.recv_packet().reason_code == 0
    return client


def test_every_acknowledged_message_is_in_the_log_at_its_puback(tmp_path: Path) -> None:
    with running_gateway(tmp_path, STREAM) as gw:
        http = _running_log(gw)
        pub = _raw(gw.port, "acked")
        for number in range(1, 31):
            pub.send(mb.gen_publish("acked/n", str(number), qos=1, mid=number, proto_ver=5))
            ack = pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
            # 0x10: accepted, no subscriber (the log is not one); acknowledged, so committed
            assert (ack.packet_id, ack.reason_code) == (number, 0x10)
            # Acknowledged, so committed: the next read has it, at the next offset.
            last = records_of(http, start=number - 1)
            assert [(r["offset"], r["payload_json"]) for r in last] == [(number - 1, str(number))]
        # QoS 2 too, and QoS 0 enters the log without waiting for anything.
        pub.send(mb.gen_publish("acked/two", b"2", qos=2, mid=100, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBREC).packet_id == 100
        assert records_of(http, start=30)[-1]["topic"] == "acked/two"
        pub.send(mb.gen_publish("acked/zero", b"0", qos=0, proto_ver=5))
        wait_for(lambda: offsets_of(http)["end"], lambda end: end == 32)
        stats = status_of(gw, SINK, "stream")["component_stats"]
        assert (stats["recorded"], stats["end_offset"], stats["dropped"]) == (32, 32, 0)


def test_records_carry_every_field(tmp_path: Path) -> None:
    with running_gateway(tmp_path, STREAM + LOOPBACK) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
            pub = clients.connect(5, "fields-pub")
            props = publish_props(
                ContentType="application/json",
                UserProperty=[("unit", "C")],
                ResponseTopic="reply/here",
            )
            pub.publish("sensors/a", b'{"t": 21.5}', qos=1, retain=True, properties=props)
            pub.publish("bin/b", b"\x00\xff", qos=1)
            pub.publish("raw/kitchen", b'{"t": 19}', qos=1)  # the loopback adapter republishes
            wait_for(lambda: offsets_of(http)["end"], lambda end: end == 4)
        finally:
            clients.close_all()
        rows = records_of(http)
    by_topic = {row["topic"]: row for row in rows}
    first = by_topic["sensors/a"]
    assert (first["protocol"], first["source"], first["qos"], first["retain"]) == (
        "mqtt",
        "fields-pub",
        1,
        True,
    )
    assert first["content_type"] == "application/json"
    assert first["payload_json"] == '{"t": 21.5}'
    assert first["properties"] == {"unit": "C", "response_topic": "reply/here"}
    assert base64.b64decode(by_topic["bin/b"]["payload"]) == b"\x00\xff"
    assert by_topic["bin/b"]["payload_json"] is None
    adapted = by_topic["rooms/kitchen"]
    assert (adapted["protocol"], adapted["source"]) == ("loopback", "units")
    assert adapted["meta"] == {"loopback.source": "raw/kitchen"}
    assert [row["offset"] for row in rows] == [0, 1, 2, 3]


def test_the_log_records_every_publisher_in_publish_order(tmp_path: Path) -> None:
    """MQTT, an adapter, the API, a delayed message, a will, and ``$SYS`` when a filter
    asks for it (``#`` alone does not match ``$SYS/...``)."""
    config = STREAM + "  topics: ['#', '$SYS/brokers/+/clients/#']\n" + LOOPBACK
    with running_gateway(tmp_path, config) as gw:
        http = _running_log(gw)
        pub = _raw(gw.port, "every-pub")
        pub.send(mb.gen_publish("raw/hall", b"1", qos=1, mid=1, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 1
        wait_for(lambda: [r["topic"] for r in records_of(http)], lambda t: "rooms/hall" in t)
        for topic in ("api/now", "$delayed/1/api/later"):
            reply = http.post("/api/v1/publish", {"topic": topic, "payload": "x", "qos": 1})
            assert reply.status == 200, reply.text
        will = RawClient("127.0.0.1", gw.port, protocol_level=5)
        will.send(mb.gen_connect("will-pub", proto_ver=5, will_topic="wills/gone", will_qos=1))
        assert will.recv_packet().reason_code == 0
        will.abort()  # no DISCONNECT: the will is published
        wait_for(
            lambda: {r["topic"] for r in records_of(http)},
            lambda t: {"api/later", "wills/gone"} <= t,
        )
        pub.close()
        rows = records_of(http)
    seen = [(row["topic"], row["protocol"], row["source"]) for row in rows]
    assert [row["offset"] for row in rows] == list(range(len(rows)))
    sys_events = [topic for topic, protocol, _ in seen if topic.startswith("$SYS/")]
    assert sys_events[0].endswith("/clients/every-pub/connected")
    assert any(topic.endswith("/clients/will-pub/disconnected") for topic in sys_events)
    assert {protocol for topic, protocol, _ in seen if topic.startswith("$SYS/")} == {"sys"}
    mine = [(topic, protocol, source) for topic, protocol, source in seen if topic[0] != "$"]
    assert mine[:3] == [
        ("raw/hall", "mqtt", "every-pub"),
        ("rooms/hall", "loopback", "units"),  # the adapter's, after the message it maps
        ("api/now", "api", "key-0"),
    ]
    # The delayed message is recorded when it comes due, the will when the client dies.
    assert sorted(mine[3:]) == [("api/later", "api", "key-0"), ("wills/gone", "mqtt", "will-pub")]


def test_topics_and_origins_select_what_enters(tmp_path: Path) -> None:
    config = STREAM + "  topics: ['rooms/#', 'keep/#']\n  origins: [loopback]\n" + LOOPBACK
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
            pub = clients.connect(5, "origins-pub")
            pub.publish("keep/mqtt", b"not from loopback", qos=1)  # topic yes, origin no
            pub.publish("raw/hall", b"1", qos=1)  # topic no: but its republication is
            pub.publish("other", b"2", qos=1)
            wait_for(lambda: offsets_of(http)["end"], lambda end: end >= 1)
            pub.publish("raw/attic", b"3", qos=1)
            wait_for(lambda: offsets_of(http)["end"], lambda end: end == 2)
        finally:
            clients.close_all()
        rows = records_of(http)
        stats = status_of(gw, SINK, "stream")["component_stats"]
    assert [(r["topic"], r["protocol"]) for r in rows] == [
        ("rooms/hall", "loopback"),
        ("rooms/attic", "loopback"),
    ]
    assert stats["filtered"] == 1


def test_reading_ranges_limits_topics_and_formats(tmp_path: Path) -> None:
    with running_gateway(tmp_path, STREAM) as gw:
        http = http_of(gw)
        clients = Clients(gw)
        try:
            wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
            pub = clients.connect(5, "ranges-pub")
            for n in range(50):
                pub.publish(f"r/{n % 5}", str(n).encode(), qos=1)
        finally:
            clients.close_all()
        assert offsets_of(http) == {
            "start": 0,
            "end": 50,
            "records": 50,
            "bytes": offsets_of(http)["bytes"],
            "segments": 1,
            "log": offsets_of(http)["log"],
        }
        assert [r["offset"] for r in records_of(http, start=10, end=14)] == [10, 11, 12, 13]
        assert [r["offset"] for r in records_of(http, start=10, limit=3)] == [10, 11, 12]
        assert [r["offset"] for r in records_of(http, topic="r/3")] == list(range(3, 50, 5))
        assert records_of(http, start=50) == []
        assert len(records_of(http, end=10**12)) == 50  # cut to the log's end
        assert len(http.get("/api/v1/stream/records").text.splitlines()) == 50  # limit 1000
        reply, table = arrow_of(http, start=5, end=45, topic="r/%2B")
        assert (header(reply, "x-edgebus-start"), header(reply, "x-edgebus-end")) == ("5", "45")
        assert table.column("offset").to_pylist() == list(range(5, 45))
        assert table.column("payload_json").to_pylist() == [str(n) for n in range(5, 45)]
        for bad, status in [
            ("topic=a/%23/b", 400),
            ("start=-1", 422),
            ("limit=0", 422),
            ("format=csv", 422),
            ("end=x", 422),
        ]:
            assert http.get(f"/api/v1/stream/records?{bad}").status == status, bad


def test_the_api_wants_credentials(tmp_path: Path) -> None:
    users = f"  users: [{{username: {USER}, password: {PASSWORD}}}]\n"
    config = STREAM.replace("api:\n", "api:\n" + users)
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        for path in ("/api/v1/stream/offsets", "/api/v1/stream/records?format=arrow"):
            assert http.get(path, auth=None).status == 401
            assert http.get(path, auth=bearer("wrong-key-0123456789")).status == 401
            assert http.get(path, auth=basic(USER, "wrong")).status == 401
            reply = http.get(path, auth=None)
            assert "Bearer" in header(reply, "www-authenticate")
            assert reply.body.startswith(b'{"detail"')
            for good in (bearer(KEY), api_key(KEY), basic(USER, PASSWORD)):
                assert http.get(path, auth=good).status == 200


def test_without_a_stream_the_broker_pays_nothing(tmp_path: Path) -> None:
    config = f"api:\n  keys: ['{KEY}']\n"
    with running_gateway(tmp_path, config) as gw:
        assert gw.call(lambda: gw.gateway.components.status(SINK, "stream")) is None
        assert gw.call(lambda: dict(gw.broker.acks.participants)) == {}
        assert gw.call(lambda: gw.broker.observers.message_hooks) == ()
        reply = http_of(gw).get("/api/v1/stream/offsets")
        assert reply.status == 404
        assert "stream.enabled" in reply.json()["detail"]
    with running_gateway(tmp_path, STREAM) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        assert gw.call(lambda: len(gw.broker.acks.participants)) == 1  # the log's writer
        assert gw.call(lambda: len(gw.broker.observers.message_hooks)) == 1  # its hook


def test_retention_keeps_whole_recent_segments_and_never_a_gap(tmp_path: Path) -> None:
    config = STREAM + "  segment_bytes: 4096\n  max_bytes: 16384\n"
    with running_gateway(tmp_path, config) as gw:
        http = _running_log(gw)
        pub = _raw(gw.port, "retained-pub")
        acked = []
        for first in range(1, 401, 10):  # windows of 10: batches far smaller than a segment
            for number in range(first, first + 10):
                payload = str(number).rjust(60)
                pub.send(mb.gen_publish("ret/n", payload, qos=1, mid=number, proto_ver=5))
            for _ in range(10):
                acked.append(pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id)
        assert acked == list(range(1, 401))
        offsets = offsets_of(http)
        assert offsets["end"] == 400
        assert offsets["start"] > 0
        assert offsets["bytes"] <= 16384 + 4096
        assert sorted(p.name for p in (tmp_path / "data" / "sink" / "stream").iterdir())[0] == (
            f"{offsets['start']:020d}.log"
        )
        rows = records_of(http, start=0)  # from before the start: what is left
        assert [row["offset"] for row in rows] == list(range(offsets["start"], 400))
        assert [int(row["payload_json"]) for row in rows] == list(range(offsets["start"] + 1, 401))
        reply, table = arrow_of(http, start=0, end=400)
        assert header(reply, "x-edgebus-start") == str(offsets["start"])
        assert table.num_rows == 400 - offsets["start"]


def test_no_reader_ever_sees_a_gap_while_messages_pour_in(tmp_path: Path) -> None:
    with running_gateway(tmp_path, STREAM) as gw:
        http = _running_log(gw)
        done = threading.Event()
        total = 20_000

        def publish() -> None:
            pub = _raw(gw.port, "pour")
            for first in range(0, total, 500):
                pub.send(
                    b"".join(
                        mb.gen_publish(f"pour/{n % 3}", str(n), qos=0, proto_ver=5)
                        for n in range(first, first + 500)
                    )
                )
            pub.send(mb.gen_publish("pour/end", b"end", qos=1, mid=1, proto_ver=5))
            pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
            done.set()

        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        seen: list[int] = []
        reads = 0
        while not done.is_set() or len(seen) < total + 1:
            rows = records_of(http, start=len(seen), limit=3000)
            reads += 1
            offsets = [row["offset"] for row in rows]
            assert offsets == list(range(len(seen), len(seen) + len(offsets)))
            seen += offsets
            assert reads < 10_000
        thread.join()
    assert seen == list(range(total + 1))


def test_offsets_go_on_after_a_restart(tmp_path: Path) -> None:
    config = STREAM + "persistence: sqlite\n"
    for round_ in range(2):
        with running_gateway(tmp_path, config) as gw:
            http = _running_log(gw)
            pub = _raw(gw.port, f"restart-{round_}")
            for n in range(5):
                pub.send(mb.gen_publish("again", f"{round_}-{n}", qos=1, mid=n + 1, proto_ver=5))
                pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
            rows = records_of(http)
    assert [row["offset"] for row in rows] == list(range(10))
    assert [base64.b64decode(row["payload"]).decode() for row in rows] == [
        f"{r}-{n}" for r in range(2) for n in range(5)
    ]


def test_without_pyarrow_arrow_is_refused_clearly_and_json_lines_still_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "spark_sink.arrow", None)  # as if pyarrow were missing
    with running_gateway(tmp_path, STREAM) as gw:
        http = _running_log(gw)
        reply = http.get("/api/v1/stream/records?format=arrow")
        assert reply.status == 406
        assert "pip install 'edgebus[arrow]'" in reply.json()["detail"]
        assert http.get("/api/v1/stream/records").status == 200


def test_a_failing_disk_refuses_the_puback_and_degrades_until_it_writes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_writev = os.writev
    failing = threading.Event()

    def writev(fd: int, buffers: list[bytes]) -> int:
        if failing.is_set():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_writev(fd, buffers)

    monkeypatch.setattr(segments_module.os, "writev", writev)
    with running_gateway(tmp_path, STREAM) as gw:
        http = _running_log(gw)
        pub = _raw(gw.port, "full-disk")
        pub.send(mb.gen_publish("disk/ok", b"1", qos=1, mid=1, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 1
        failing.set()
        pub.send(mb.gen_publish("disk/full", b"2", qos=1, mid=2, proto_ver=5))
        # No PUBACK: the publisher is disconnected and will send the message again.
        closed = pub.wait_for(lambda p: p.type == mb.PacketType.DISCONNECT)
        assert closed.reason_code == 0x80
        status = wait_for(lambda: status_of(gw, SINK, "stream"), lambda s: s["state"] == "degraded")
        assert "No space left on device" in status["reason"]
        failing.clear()
        again = _raw(gw.port, "full-disk")
        again.send(mb.gen_publish("disk/full", b"2", qos=1, mid=2, proto_ver=5))
        assert again.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 2
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        rows = records_of(http)
    assert [(row["offset"], row["topic"]) for row in rows] == [(0, "disk/ok"), (1, "disk/full")]
