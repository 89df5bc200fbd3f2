"""Checks of the harness itself (launchers and raw client), independent of any target.

These use a scripted loopback peer instead of a broker, so they run once per session.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conformance import statements
from tests.helpers import brokers
from tests.helpers import mqtt_builder as mb
from tests.helpers.raw_client import ConnectionClosedError, RawClient
from tests.helpers.timeouts import unit

Script = Callable[[socket.socket], None]
PeerFactory = Callable[[Script], RawClient]


class ScriptedPeer:
    """A one-connection loopback server running ``script(conn)`` in a thread."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
        self.thread.start()

    def _serve(self, script: Callable[[socket.socket], None]) -> None:
        conn, _ = self.listener.accept()
        with conn:
            script(conn)

    def close(self) -> None:
        self.thread.join(unit(5))
        self.listener.close()


@pytest.fixture
def peer() -> Iterator[PeerFactory]:
    peers: list[ScriptedPeer] = []
    clients: list[RawClient] = []

    def start(script: Script) -> RawClient:
        server = ScriptedPeer(script)
        peers.append(server)
        client = RawClient("127.0.0.1", server.port, protocol_level=5)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()
    for server in peers:
        server.close()


def test_packets_split_across_reads_are_reassembled(peer: PeerFactory) -> None:
    data = mb.gen_publish("t", b"x" * 300, qos=1, mid=1, proto_ver=5) + mb.gen_pingresp()

    def script(conn: socket.socket) -> None:
        for i in range(0, len(data), 7):
            conn.sendall(data[i : i + 7])
            time.sleep(0.001)
        conn.recv(1)

    client = peer(script)
    assert client.recv_packet().payload == b"x" * 300
    client.expect(mb.gen_pingresp())


def test_expect_closed_accepts_an_optional_disconnect(peer: PeerFactory) -> None:
    client = peer(lambda conn: conn.sendall(mb.gen_disconnect(0x81, proto_ver=5)))
    packet = client.expect_closed(reason_code={0x81, 0x82})
    assert packet is not None
    assert packet.reason_code == 0x81


def test_expect_closed_rejects_a_wrong_reason_code(peer: PeerFactory) -> None:
    client = peer(lambda conn: conn.sendall(mb.gen_disconnect(0x80, proto_ver=5)))
    with pytest.raises(AssertionError, match="reason code 0x80"):
        client.expect_closed(reason_code=0x81)


def test_expect_closed_requires_the_packet_when_asked(peer: PeerFactory) -> None:
    client = peer(lambda conn: None)
    with pytest.raises(AssertionError, match="closed without"):
        client.expect_closed(require_reason=True)


def test_expect_closed_fails_on_other_packets(peer: PeerFactory) -> None:
    client = peer(lambda conn: conn.sendall(mb.gen_pingresp()))
    with pytest.raises(AssertionError, match="PINGRESP"):
        client.expect_closed()


def test_expect_closed_times_out_on_an_open_connection(peer: PeerFactory) -> None:
    client = peer(lambda conn: conn.recv(1))
    with pytest.raises(AssertionError, match="still open"):
        client.expect_closed(timeout=0.2)
    client.close()


def test_reset_counts_as_closed(peer: PeerFactory) -> None:
    def script(conn: socket.socket) -> None:
        time.sleep(0.1)  # let the client's connect() complete first
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")

    client = peer(script)
    assert client.expect_closed() is None
    with pytest.raises(ConnectionClosedError):
        client.recv_packet(timeout=0.2)


def test_wait_for_keeps_other_packets_in_order(peer: PeerFactory) -> None:
    def script(conn: socket.socket) -> None:
        conn.sendall(
            mb.gen_publish("a", b"1", proto_ver=5)
            + mb.gen_publish("b", b"2", proto_ver=5)
            + mb.gen_puback(4, proto_ver=5)
        )
        conn.recv(1)

    client = peer(script)
    client.protocol_level = 5
    ack = client.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
    assert ack.packet_id == 4
    assert [client.recv_packet().topic, client.recv_packet().topic] == ["a", "b"]


def test_start_failure_reports_exit_code_and_stderr(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('boom: no broker here\\n'); sys.exit(3)"
    started = time.monotonic()
    with pytest.raises(brokers.BrokerStartError) as info:
        brokers._launch(
            "fake", [sys.executable, "-c", script], tmp_path, brokers.free_port(), unit(10)
        )
    assert time.monotonic() - started < unit(5)
    assert "exited with code 3" in str(info.value)
    assert "boom: no broker here" in str(info.value)


def test_start_timeout_reports_stderr(tmp_path: Path) -> None:
    script = (
        "import sys, time; sys.stderr.write('starting...\\n'); sys.stderr.flush(); time.sleep(60)"
    )
    with pytest.raises(brokers.BrokerStartError) as info:
        brokers._launch("fake", [sys.executable, "-c", script], tmp_path, brokers.free_port(), 0.5)
    assert "did not answer MQTT" in str(info.value)
    assert "starting..." in str(info.value)


DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_docs_statement_tables_are_current() -> None:
    """docs/conformance.md carries the tables built from the tests' docstrings (regenerate
    with ``python -m tests.conformance.statements``)."""
    text = DOC.read_text()
    begin, end = "<!-- statements:begin -->\n", "<!-- statements:end -->"
    current = text[text.index(begin) + len(begin) : text.index(end)]
    assert current == statements.render_tables()


def test_docs_name_every_conformance_test() -> None:
    text = DOC.read_text()
    names = [n.name for nodes in statements.suite_functions().values() for n in nodes]
    assert [name for name in names if f"`{name}`" not in text] == []
