"""The ``ws`` and ``wss`` listeners: MQTT over WebSocket (paho and a raw client)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.frames import CloseCode

from broker_core.mqtt.reason_codes import ReasonCode
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import BOTH, wait_until
from tests.integration.listeners.pki import Pki
from tests.integration.listeners.support import RawWebSocket, client_usernames, listener_client


def ws_config(name: str = "ws", **listener: Any) -> str:
    """YAML (JSON is YAML) for one ws listener on 127.0.0.1:0; ``mqtt`` goes to ``mqtt:``."""
    mqtt = listener.pop("mqtt", None)
    config: dict[str, Any] = {
        "listeners": [{"type": "ws", "name": name, "bind": "127.0.0.1:0", **listener}]
    }
    if mqtt:
        config["mqtt"] = mqtt
    return json.dumps(config)


def wss_config(pki: Pki) -> str:
    tls = {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key)}
    return ws_config("wss", type="wss", tls=tls)


def uri(gw: RunningGateway, listener: str = "ws", path: str = "/mqtt", scheme: str = "ws") -> str:
    host, port = gw.address(listener)
    return f"{scheme}://{host}:{port}{path}"


def connections(gw: RunningGateway) -> int:
    return gw.call(lambda: len(gw.broker.connections))


# -- paho ----------------------------------------------------------------------------------


@BOTH
def test_paho_over_ws(tmp_path: Path, proto: int) -> None:
    with (
        running_gateway(tmp_path, ws_config()) as gw,  # path: the default, /mqtt
        listener_client(gw, "ws", proto, transport="websockets") as sub,
        listener_client(gw, "ws", proto, transport="websockets") as pub,
    ):
        assert sub.subscribe("ws/+", 1) == [1]
        pub.publish("ws/a", b"over websocket", qos=1)
        message = sub.expect_message()
        assert (message.topic, message.payload) == ("ws/a", b"over websocket")


@BOTH
def test_paho_over_wss(tmp_path: Path, pki: Pki, proto: int) -> None:
    with (
        running_gateway(tmp_path, wss_config(pki)) as gw,
        listener_client(gw, "wss", proto, transport="websockets", tls=pki.client_context()) as sub,
        listener_client(gw, "wss", proto, transport="websockets", tls=pki.client_context()) as pub,
    ):
        assert sub.subscribe("wss/+", 2) == [2]
        pub.publish("wss/a", b"over secure websocket", qos=2)
        message = sub.expect_message()
        assert (message.topic, message.payload) == ("wss/a", b"over secure websocket")


def test_wss_client_certificate_cn_is_the_username(tmp_path: Path, pki: Pki) -> None:
    tls = {
        "certfile": str(pki.server.cert),
        "keyfile": str(pki.server.key),
        "cafile": str(pki.ca),
        "verify_peer": True,
        "fail_if_no_peer_cert": True,
        "use_identity_as_username": True,
    }
    config = ws_config("wss", type="wss", tls=tls, allow_anonymous=False)
    context = pki.client_context(pki.client("browser-3"))
    with (
        running_gateway(tmp_path, config) as gw,
        listener_client(
            gw, "wss", 5, client_id="wss-cn", transport="websockets", tls=context
        ) as client,
    ):
        assert client.connack is not None
        assert client.connack.reason_code == 0
        assert client_usernames(gw) == {"wss-cn": "browser-3"}


def test_paho_on_a_configured_path(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, ws_config(path="/broker/v1")) as gw,
        listener_client(gw, "ws", 5, transport="websockets", path="/broker/v1") as client,
    ):
        assert client.subscribe("p/t", 0) == [0]
        client.publish("p/t", b"x")
        assert client.expect_message().payload == b"x"


# -- handshake ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/other", "/", "/mqtt/extra"])
def test_other_paths_get_http_404(tmp_path: Path, path: str) -> None:
    with running_gateway(tmp_path, ws_config()) as gw:
        with pytest.raises(InvalidStatus) as caught:
            RawWebSocket(uri(gw, path=path))
        assert caught.value.response.status_code == 404
        assert connections(gw) == 0


@pytest.mark.parametrize("version", ["8", None])
def test_unsupported_version_is_told_the_supported_one(tmp_path: Path, version: str | None) -> None:
    """RFC 6455 4.2.2 / 4.4: a handshake whose Sec-WebSocket-Version the server does not
    speak (or that has none) is refused with the version(s) it does speak."""
    head = (
        "GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Protocol: mqtt\r\n"
    )
    if version is not None:
        head += f"Sec-WebSocket-Version: {version}\r\n"
    with running_gateway(tmp_path, ws_config()) as gw:
        with socket.create_connection(gw.address("ws"), timeout=unit(5)) as sock:
            sock.sendall((head + "\r\n").encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(4096)
                assert chunk, f"closed before a whole response: {answer!r}"
                answer += chunk
        status, *lines = answer.partition(b"\r\n\r\n")[0].decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
        assert status.split()[1] == "400"
        assert headers.get("sec-websocket-version") == "13"
        assert connections(gw) == 0


def test_query_string_is_ignored(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        RawWebSocket(uri(gw, path="/mqtt?token=abc")) as raw,
    ):
        raw.do_connect("query")


@pytest.mark.parametrize(
    ("offered", "selected", "proto"),
    [
        (["mqtt"], "mqtt", 4),
        (["mqttv3.1"], "mqttv3.1", 3),
        (["mqttv3.1", "mqtt"], "mqtt", 4),
        (None, None, 4),
        (["chat"], None, 5),
    ],
    ids=["mqtt", "mqttv3.1", "both", "none", "other"],
)
def test_subprotocols(
    tmp_path: Path, offered: list[str] | None, selected: str | None, proto: int
) -> None:
    """``mqtt`` preferred, ``mqttv3.1`` accepted; a client offering neither, or nothing,
    is accepted without a subprotocol (as NanoMQ and EMQX do)."""
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        RawWebSocket(uri(gw), subprotocols=offered) as raw,
    ):
        assert raw.subprotocol == selected
        raw.do_connect("sp", proto_ver=proto)
        raw.subscribe("sp/t", 0)
        raw.send(mb.gen_publish("sp/t", b"hello", proto_ver=proto))
        packet = raw.recv_packet()
        assert (packet.name, packet.topic, packet.payload) == ("PUBLISH", "sp/t", b"hello")


# -- framing -------------------------------------------------------------------------------


def test_text_frame_closes_the_connection(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        RawWebSocket(uri(gw)) as raw,
    ):
        raw.do_connect("texter")
        assert connections(gw) == 1
        raw.send_text("not MQTT")
        closed = raw.expect_closed()
        assert closed.rcvd is not None
        assert closed.rcvd.code == CloseCode.UNSUPPORTED_DATA
        wait_until(lambda: connections(gw) == 0, what="the session ended")


def test_large_message_split_over_many_frames(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 2400  # 614400 bytes, under the 1 MB default packet size
    packet = mb.gen_publish("big/t", payload, qos=1, mid=7)
    chunk = 16 * 1024
    fragments = [packet[i : i + chunk] for i in range(0, len(packet), chunk)]
    assert len(fragments) == 38
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        listener_client(gw, "ws", 4, transport="websockets") as sub,
        RawWebSocket(uri(gw)) as pub,
    ):
        assert sub.subscribe("big/t", 1) == [1]
        pub.do_connect("big-pub")
        pub.send(fragments)  # one WebSocket message in 38 frames
        puback = pub.recv_packet()
        assert (puback.name, puback.packet_id) == ("PUBACK", 7)
        message = sub.expect_message(unit(5))
        assert message.topic == "big/t"
        assert message.payload == payload


def test_packets_span_messages_and_share_messages(tmp_path: Path) -> None:
    """The session's decoder keeps partial input: a WebSocket message may end inside a
    packet, and one message may hold several packets."""
    connect = mb.gen_connect("spanner")
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        RawWebSocket(uri(gw)) as raw,
    ):
        for start in range(0, len(connect), 5):  # CONNECT over several messages
            raw.send(connect[start : start + 5])
        connack = raw.recv_packet()
        assert (connack.name, connack.reason_code) == ("CONNACK", 0)
        both = mb.gen_subscribe(1, "span/t", 1) + mb.gen_publish("span/t", b"one", qos=1, mid=2)
        publish_two = mb.gen_publish("span/t", b"two", qos=1, mid=3)
        raw.send(both + publish_two[:4])  # SUBSCRIBE, PUBLISH and part of another
        raw.send(publish_two[4:])
        got = [raw.recv_packet() for _ in range(5)]
        names = sorted(p.name for p in got)
        assert names == ["PUBACK", "PUBACK", "PUBLISH", "PUBLISH", "SUBACK"]
        payloads = [p.payload for p in got if p.name == "PUBLISH"]
        assert payloads == [b"one", b"two"]


def test_message_far_above_max_packet_size_closes_with_1009(tmp_path: Path) -> None:
    config = ws_config(mqtt={"max_packet_size": 10_000})
    with (
        running_gateway(tmp_path, config) as gw,
        RawWebSocket(uri(gw)) as raw,
    ):
        raw.do_connect("huge")
        raw.send(mb.gen_publish("huge/t", bytes(200_000)))
        closed = raw.expect_closed()
        assert closed.rcvd is not None
        assert closed.rcvd.code == CloseCode.MESSAGE_TOO_BIG
        wait_until(lambda: connections(gw) == 0, what="the session ended")


def test_packet_just_above_max_packet_size_gets_the_mqtt_reason_code(tmp_path: Path) -> None:
    config = ws_config(mqtt={"max_packet_size": 10_000})
    with (
        running_gateway(tmp_path, config) as gw,
        RawWebSocket(uri(gw)) as raw,
    ):
        raw.do_connect("large", proto_ver=5)
        raw.send(mb.gen_publish("large/t", bytes(10_100), proto_ver=5))
        packet = raw.recv_packet()
        assert (packet.name, packet.reason_code) == ("DISCONNECT", ReasonCode.PACKET_TOO_LARGE)
        closed = raw.expect_closed()
        assert closed.rcvd is not None
        assert closed.rcvd.code == CloseCode.NORMAL_CLOSURE


# -- closing ---------------------------------------------------------------------------------


def test_takeover_sends_disconnect_then_a_close_frame(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        RawWebSocket(uri(gw)) as first,
        RawWebSocket(uri(gw)) as second,
    ):
        first.do_connect("same-id", proto_ver=5)
        second.do_connect("same-id", proto_ver=5)
        packet = first.recv_packet()
        assert (packet.name, packet.reason_code) == ("DISCONNECT", ReasonCode.SESSION_TAKEN_OVER)
        closed = first.expect_closed()
        assert closed.rcvd is not None
        assert closed.rcvd.code == CloseCode.NORMAL_CLOSURE
        wait_until(lambda: connections(gw) == 1, what="only the new connection left")


def test_dropped_tcp_connection_publishes_the_will(tmp_path: Path) -> None:
    with (
        running_gateway(tmp_path, ws_config()) as gw,
        listener_client(gw, "ws", 4, transport="websockets") as watcher,
        RawWebSocket(uri(gw)) as raw,
    ):
        assert watcher.subscribe("will/t", 0) == [0]
        raw.do_connect("mortal", will_topic="will/t", will_payload=b"gone")
        raw.ws.socket.shutdown(socket.SHUT_RDWR)  # no close frame, no DISCONNECT
        message = watcher.expect_message(unit(3))
        assert (message.topic, message.payload) == ("will/t", b"gone")


def test_gateway_shutdown_disconnects_websocket_clients(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        gw = stack.enter_context(running_gateway(tmp_path, ws_config()))
        raw = RawWebSocket(uri(gw))
        raw.do_connect("stay", proto_ver=5)
    try:
        packet = raw.recv_packet()
        assert (packet.name, packet.reason_code) == ("DISCONNECT", ReasonCode.SERVER_SHUTTING_DOWN)
        closed = raw.expect_closed()
        assert closed.rcvd is not None
        assert closed.rcvd.code == CloseCode.NORMAL_CLOSURE
    finally:
        raw.close()


# -- flow control ------------------------------------------------------------------------------


def test_a_subscriber_that_stops_reading_pauses_delivery(tmp_path: Path) -> None:
    """The TCP transport's high-water mark pauses the session (it queues instead of
    writing); once the client reads again, delivery resumes and nothing is lost."""
    config = ws_config(mqtt={"write_high_water": "64KB"})
    payload = bytes(32 * 1024)
    with (
        running_gateway(tmp_path, config) as gw,
        listener_client(gw, "ws", 4, client_id="slow", transport="websockets") as slow,
        listener_client(gw, "ws", 4, transport="websockets") as pub,
    ):
        assert slow.subscribe("flow/t", 0) == [0]

        def slow_writable() -> bool:
            return gw.call(
                lambda: next(
                    c.session.writable
                    for c in gw.broker.connections
                    if c.session.origin.name == "slow"
                )
            )

        slow.client.loop_stop()  # paho reads nothing any more
        sent = 0
        deadline = time.monotonic() + unit(10)
        while slow_writable():
            assert time.monotonic() < deadline, f"never paused after {sent} messages"
            for _ in range(20):
                pub.publish("flow/t", payload)
                sent += 1
        slow.client.loop_start()  # reads again
        wait_until(slow_writable, timeout=unit(5), what="delivery resumed")
        got = slow.expect_messages(sent, timeout=unit(10))
        assert len(got) == sent
        assert {m.payload for m in got} == {payload}


def test_publish_rate_pauses_and_resumes_reading(tmp_path: Path) -> None:
    """Over ``publish_rate`` the session pauses reading (here: the WebSocket handler's
    receive loop) and resumes when the bucket refills; nothing is lost or reordered."""
    config = ws_config(mqtt={"publish_rate": 200, "publish_burst": 10})
    count = 60
    with (
        running_gateway(tmp_path, config) as gw,
        listener_client(gw, "ws", 4, transport="websockets") as sub,
        RawWebSocket(uri(gw)) as pub,
    ):
        assert sub.subscribe("rate/t", 0) == [0]
        pub.do_connect("fast")
        burst = b"".join(mb.gen_publish("rate/t", str(i).encode()) for i in range(count))
        pub.send(burst)  # one message, 60 PUBLISH packets
        got = sub.expect_messages(count, timeout=unit(5))
        assert [m.payload for m in got] == [str(i).encode() for i in range(count)]
        pub.send(mb.gen_pingreq())
        assert pub.recv_packet().name == "PINGRESP"


def test_connections_are_not_logged_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """websockets logged ``connection open`` / ``connection closed`` at INFO for every
    connection under its own logger name (``websockets.server``), naming neither the
    listener nor the peer, while a TCP connection logs nothing at INFO: those lines are
    DEBUG, under the listener's logger."""
    caplog.set_level(logging.DEBUG)
    with running_gateway(tmp_path, ws_config()) as gw:
        for proto in (4, 5):
            with listener_client(gw, "ws", proto, transport="websockets") as client:
                assert client.subscribe("ws/log", 0) == [0]
        wait_until(lambda: connections(gw) == 0, what="the clients gone")
    said = ("connection open", "connection closed")
    protocol_lines = [r for r in caplog.records if r.getMessage() in said]
    assert protocol_lines, "websockets' own lines were not logged at all"
    assert {(r.name, r.levelno) for r in protocol_lines} == {

        ("broker_core.listeners.websocket", logging.DEBUG)
    }
