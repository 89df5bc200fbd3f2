"""Issue 8.2: sockets that never send CONNECT cannot keep real clients out.

Idle sockets count against their own bound (``max_pending_connections``), not against
``max_connections``; past that bound the oldest idle socket is closed for the new one.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


def connack_code(gw: RunningGateway, client_id: str) -> int:
    with contextlib.closing(RawClient("127.0.0.1", gw.port, protocol_level=5)) as client:
        # Generous: in the flood test the attacker thread shares this process (and its
        # interpreter) with the gateway, on a machine that may be loaded besides.
        connack = client.do_connect(client_id, proto_ver=5, expect_code=None, timeout=unit(15))
        return int(connack.reason_code)


@contextlib.contextmanager
def idle_sockets(gw: RunningGateway, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connected sockets that send nothing."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * count + 256  # both ends live in this process
    if soft < wanted and (hard == resource.RLIM_INFINITY or hard >= wanted):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    sockets = [
        socket.create_connection(("127.0.0.1", gw.port), timeout=unit(5)) for _ in range(count)
    ]
    try:
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(unit(5))
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_sockets_do_not_count_against_max_connections(tmp_path: Path) -> None:
    """The issue's setup: max_connections 50 and 200 silent sockets."""
    config = "listeners:\n  - type: tcp\n    bind: 127.0.0.1:0\n    max_connections: 50\n"
    with running_gateway(tmp_path, config) as gw, idle_sockets(gw, 200):
        assert [connack_code(gw, f"real{i}") for i in range(5)] == [0] * 5
        assert gw.call(lambda: len(gw.broker.connections.pending)) == 200


def test_the_oldest_idle_socket_makes_room(tmp_path: Path) -> None:
    config = (
        "listeners:\n  - type: tcp\n    bind: 127.0.0.1:0\n"
        "    max_connections: 50\n    max_pending_connections: 100\n"
    )
    with running_gateway(tmp_path, config) as gw, idle_sockets(gw, 300) as sockets:
        assert connack_code(gw, "real") == 0
        assert closed_by_server(sockets[0])  # the oldest went first
        assert gw.call(lambda: len(gw.broker.connections.pending)) <= 100
        hits = gw.call(lambda: gw.broker.counters.limit_hits["pending_connections"])
        assert hits >= 200


def test_clients_connect_while_empty_sockets_are_reopened_all_the_time(tmp_path: Path) -> None:
    """An attacker opening empty sockets as fast as it can, for as long as the test runs."""
    config = (
        "listeners:\n  - type: tcp\n    bind: 127.0.0.1:0\n"
        "    max_connections: 50\n    max_pending_connections: 50\n"
    )
    with running_gateway(tmp_path, config) as gw:
        stop = threading.Event()
        opened = [0]

        def flood() -> None:
            held: list[socket.socket] = []
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    held.append(socket.create_connection(("127.0.0.1", gw.port), timeout=1))
                    opened[0] += 1
                if len(held) > 200:
                    held.pop(0).close()
            for sock in held:
                sock.close()

        attacker = threading.Thread(target=flood, daemon=True)
        attacker.start()
        try:
            deadline = time.monotonic() + unit(5)
            while opened[0] < 300:
                assert time.monotonic() < deadline, "the flood did not start"
                time.sleep(0.01)
            codes = [connack_code(gw, f"through{i}") for i in range(10)]
        finally:
            stop.set()
            attacker.join(unit(5))
        assert codes == [0] * 10
        client = RawClient("127.0.0.1", gw.port, protocol_level=4)
        client.send(mb.gen_connect("last"))
        assert client.recv_packet(unit(15)).reason_code == 0
        client.close()
