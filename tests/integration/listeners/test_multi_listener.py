"""Several listeners of every type in one gateway, clients on each talking to the others."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from gateway.config import parse_config
from tests.helpers.gateway import running_gateway
from tests.integration.listeners.pki import Pki
from tests.integration.listeners.support import ListenerClient, listener_client


def test_tcp_tls_ws_wss_listeners_exchange_messages(tmp_path: Path, pki: Pki) -> None:
    tls = {"certfile": str(pki.server.cert), "keyfile": str(pki.server.key)}
    mtls = {**tls, "cafile": str(pki.ca), "verify_peer": True, "fail_if_no_peer_cert": True}
    config = {
        "listeners": [
            {"type": "tcp", "name": "tcp", "bind": "127.0.0.1:0"},
            {"type": "tls", "name": "tls", "bind": "127.0.0.1:0", "tls": tls},
            {"type": "tls", "name": "mtls", "bind": "127.0.0.1:0", "tls": mtls},
            {"type": "ws", "name": "ws", "bind": "127.0.0.1:0"},
            {"type": "wss", "name": "wss", "bind": "127.0.0.1:0", "path": "/s", "tls": tls},
        ]
    }
    with running_gateway(tmp_path, json.dumps(config)) as gw:
        assert sorted(gw.gateway.addresses) == ["mtls", "tcp", "tls", "ws", "wss"]
        assert len({port for _, port in gw.gateway.addresses.values()}) == 5
        with contextlib.ExitStack() as stack:
            clients: dict[str, ListenerClient] = {
                "tcp": stack.enter_context(listener_client(gw, "tcp", 4)),
                "tls": stack.enter_context(listener_client(gw, "tls", 5, tls=pki.client_context())),
                "mtls": stack.enter_context(
                    listener_client(gw, "mtls", 4, tls=pki.client_context(pki.client("m")))
                ),
                "ws": stack.enter_context(listener_client(gw, "ws", 5, transport="websockets")),
                "wss": stack.enter_context(
                    listener_client(
                        gw, "wss", 4, transport="websockets", path="/s", tls=pki.client_context()
                    )
                ),
            }
            for client in clients.values():
                assert client.subscribe("multi/+", 1) == [1]
            for name, client in clients.items():
                client.publish(f"multi/{name}", f"from {name}".encode(), qos=1)
            expected = {(f"multi/{name}", f"from {name}".encode()) for name in clients}
            for name, client in clients.items():
                got = {(m.topic, m.payload) for m in client.expect_messages(len(clients))}
                assert (name, got) == (name, expected)
                client.expect_no_message()


def test_the_embedded_default_listeners_start(tmp_path: Path) -> None:
    """`edgebus run` without a configuration: tcp 1883 and ws 8083 /mqtt. Run here on
    port 0 with the same types and paths."""
    defaults = parse_config("", "defaults.yaml").listeners
    shape = [(listener.type, str(listener.bind), listener.path) for listener in defaults]
    assert shape == [("tcp", "127.0.0.1:1883", None), ("ws", "127.0.0.1:8083", "/mqtt")]
    listeners = [
        {"type": listener.type, "name": listener.type, "bind": "127.0.0.1:0"}
        for listener in defaults
    ]
    with (
        running_gateway(tmp_path, json.dumps({"listeners": listeners})) as gw,
        listener_client(gw, "tcp", 4) as tcp,
        listener_client(gw, "ws", 4, transport="websockets", path="/mqtt") as ws,
    ):
        assert ws.subscribe("defaults/t", 1) == [1]
        tcp.publish("defaults/t", b"tcp to ws", qos=1)
        assert ws.expect_message().payload == b"tcp to ws"
