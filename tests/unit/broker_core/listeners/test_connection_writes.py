"""When ``MqttConnection`` writes: a session's answers at the end of the input that
caused them (no flush left for later in the loop's turn), deliveries once per turn."""

from __future__ import annotations

import asyncio
import socket

from broker_core.broker import Broker
from broker_core.listeners.connection import MqttConnection
from broker_core.listeners.settings import ListenerSettings
from tests.helpers import mqtt_builder as mb


class RecordingSocket:
    """The socket of a ``RecordingTransport``: records the options set on it."""

    def __init__(self) -> None:
        self.options: list[tuple[int, int, int]] = []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append((level, option, value))


class RecordingTransport:
    """The transport methods a connection calls, recording its writes."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.socket = RecordingSocket()

    def get_extra_info(self, name: str, default: object = None) -> object:
        if name == "socket":
            return self.socket
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def can_write_eof(self) -> bool:
        return False  # closes at once (no lingering close, listeners.linger)

    def close(self) -> None:
        self.closing = True


def test_answers_leave_at_the_end_of_their_input_and_deliveries_once_per_turn() -> None:
    async def scenario() -> None:
        broker = Broker()
        loop = asyncio.get_running_loop()
        connections = []
        for client_id in ("sub", "pub"):
            conn = MqttConnection(broker, ListenerSettings(), loop)
            transport = RecordingTransport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            conn.data_received(mb.gen_connect(client_id, proto_ver=4))
            assert transport.writes == [mb.gen_connack()]  # before any loop turn
            connections.append((conn, transport))
        (sub, sub_out), (pub, pub_out) = connections
        sub.data_received(mb.gen_subscribe(1, "t/#", 1))
        assert sub_out.writes[1:] == [mb.gen_suback(1, 1)]
        pub.data_received(mb.gen_publish("t/a", b"1", qos=1, mid=7) + mb.gen_publish("t/b", b"2"))
        assert pub_out.writes[1:] == [mb.gen_puback(7)]  # one write for the input
        assert len(sub_out.writes) == 2  # the deliveries wait for the turn's flush
        await asyncio.sleep(0)
        assert len(sub_out.writes) == 3  # both in one write
        pub.data_received(mb.gen_disconnect())
        assert pub_out.closing

    asyncio.run(scenario())


QUICKACK = (socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


def test_acknowledgements_answered_by_nothing_are_acked_by_tcp_at_once() -> None:
    # A client subscribed to what it publishes gets its QoS 1 message back with the
    # PUBACK and acknowledges the copy. Nothing answers that acknowledgement, so the
    # kernel would delay its TCP ACK, and a client with Nagle's algorithm on (paho) would
    # hold its next PUBLISH for it (~40 ms): the connection asks for the ACK at once.
    # A publisher's input (QoS 0, or answered by a PUBACK) never costs the system call.
    async def scenario() -> None:
        broker = Broker()
        conn = MqttConnection(broker, ListenerSettings(), asyncio.get_running_loop())
        transport = RecordingTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(mb.gen_connect("echo", proto_ver=4))
        conn.data_received(mb.gen_subscribe(1, "echo/#", 1))
        conn.data_received(mb.gen_publish("other/t", b"q0"))  # QoS 0, nothing to answer
        conn.data_received(mb.gen_publish("echo/t", b"x", qos=1, mid=7))
        assert transport.socket.options == []
        written = b"".join(transport.writes)
        assert mb.gen_puback(7) in written  # and the copy, packet identifier 1
        assert mb.gen_publish("echo/t", b"x", qos=1, mid=1) in written
        conn.data_received(mb.gen_puback(1))  # the copy acknowledged: nothing to answer
        assert transport.socket.options == [QUICKACK]
        conn.data_received(mb.gen_publish("other/t", b"q0"))
        assert transport.socket.options == [QUICKACK]  # only after acknowledgements

    asyncio.run(scenario())
