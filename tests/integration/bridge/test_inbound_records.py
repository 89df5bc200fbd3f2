"""A bridge's inbound QoS 2 records (the remote's Packet Identifiers between PUBLISH and
PUBREL, in the store's ``incoming`` table under ``"\\0bridge/<name>/<client id>"``) go
with the bridge (docs/bridges.md, "Inbound QoS 2"; ``bridge/records.py``):

- ``DELETE /api/v1/bridges/<name>``: its records are removed (a pause and resume
  keeps them);
- a reload (``POST /api/v1/reload``) that renames a bridge, or changes its client id:
  the old name's / old client id's records are removed;
- a gateway started without a bridge that left records: they are removed, those of a
  configured bridge stay;
- ``inbound_qos2_pending`` in the bridge's stats counts them.

A real gateway (SQLite store, its HTTP API); the remote is a fake MQTT 5 server on a
socket that sends QoS 2 PUBLISHes to a bridge's first connection and never sends their
PUBREL, so the bridge's records stay until it goes. The store file is read with sqlite3.
Before, every record stayed in the store for good: one per message in flight when the
bridge went, for each name and client id ever used.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker_core.mqtt.codec import Decoder
from broker_core.mqtt.encoder import encode
from broker_core.mqtt.packets import (
    Connack,
    Connect,
    Pingreq,
    Pingresp,
    Publish,
    Pubrec,
    Suback,
    Subscribe,
)
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.support import KEY
from tests.integration.bridge.support import wait_until
from tests.integration.components.support import http_of

PREFIX = "\0bridge/"


class FakeRemote:
    """An MQTT 5 server: CONNACK (session present), SUBACK, then to the first connection
    of each client id in ``sends`` QoS 2 PUBLISHes with those Packet Identifiers; records
    the PUBRECs it gets by client id; never sends PUBREL."""

    def __init__(self, sends: dict[str, list[int]]) -> None:
        self.sends = dict(sends)
        self.pubrecs: dict[str, list[int]] = {}
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            conn.settimeout(60)
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = Decoder()
        client_id = ""
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                for packet in decoder.feed(data):
                    if isinstance(packet, Connect):
                        client_id = packet.client_id
                        conn.sendall(encode(Connack(session_present=True), 5))
                    elif isinstance(packet, Subscribe):
                        codes = tuple(s.options.qos for s in packet.subscriptions)
                        conn.sendall(encode(Suback(packet.packet_id, codes), 5))
                        with self.lock:
                            mids = self.sends.pop(client_id, [])
                        for mid in mids:
                            conn.sendall(
                                encode(Publish("in/x", b"%d" % mid, 2, False, False, mid), 5)
                            )
                    elif isinstance(packet, Pubrec):
                        with self.lock:
                            self.pubrecs.setdefault(client_id, []).append(packet.packet_id)
                    elif isinstance(packet, Pingreq):
                        conn.sendall(encode(Pingresp(), 5))
        except OSError:
            return

    def acknowledged(self, client_id: str) -> list[int]:
        with self.lock:
            return sorted(self.pubrecs.get(client_id, []))

    def close(self) -> None:
        self.closed = True
        self.server.close()
        with self.lock:
            for conn in self.conns:
                conn.close()


def _bridge(name: str, client_id: str, port: int) -> dict[str, Any]:
    return {
        "name": name,
        "server": f"127.0.0.1:{port}",
        "protocol_version": "5",
        "client_id": client_id,
        "clean_start": False,
        "connect_properties": {"session_expiry_interval": 3600},
        "reconnect_backoff": "100ms",
        "reconnect_backoff_max": "200ms",
        "subscriptions": [{"remote": "in/#", "qos": 2}],
    }


def _config(*bridges: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {"persistence": "sqlite", "api": {"keys": [KEY]}, "bridges": list(bridges)}
    )


def _records(gw: RunningGateway) -> list[tuple[str, int]]:
    """The bridges' records committed in the store file."""
    path = gw.gateway.config.data_dir / "edgebus.db"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute(
            "SELECT client_id, packet_id FROM incoming WHERE client_id >= ? AND client_id < ?",
            (PREFIX, "\0bridge0"),
        )
        return sorted((str(key), int(mid)) for key, mid in rows)
    finally:
        conn.close()


def _key(name: str, client_id: str) -> str:
    return f"{PREFIX}{name}/{client_id}"


def _pending(gw: RunningGateway, name: str) -> int:
    reply = http_of(gw).get(f"/api/v1/bridges/{name}")
    assert reply.status == 200, reply.text
    return int(reply.json()["stats"].get("inbound_qos2_pending", -1))


@pytest.fixture
def remote() -> Any:
    fake = FakeRemote({"c-one": [1, 2, 3], "c-two": [4, 5], "c-kept": [6, 7]})
    yield fake
    fake.close()


@pytest.mark.timeout(60)
def test_delete_through_the_api_removes_the_bridges_records(
    tmp_path: Path, remote: FakeRemote
) -> None:
    config = _config(_bridge("one", "c-one", remote.port), _bridge("kept", "c-kept", remote.port))
    with running_gateway(tmp_path, config) as gw:
        # PUBREC goes once the record is committed: then it is in the file.
        wait_until(lambda: remote.acknowledged("c-one"), lambda got: got == [1, 2, 3])
        wait_until(lambda: remote.acknowledged("c-kept"), lambda got: got == [6, 7])
        kept = [(_key("kept", "c-kept"), 6), (_key("kept", "c-kept"), 7)]
        one = [(_key("one", "c-one"), mid) for mid in (1, 2, 3)]
        assert _records(gw) == sorted(kept + one)
        assert _pending(gw, "one") == 3
        assert _pending(gw, "kept") == 2

        # A pause keeps them: the resumed bridge reads them back.
        http = http_of(gw)
        assert http.post("/api/v1/bridges/one/pause").status == 200
        wait_until(lambda: http.get("/api/v1/bridges/one").json()["state"], "paused".__eq__)
        assert http.post("/api/v1/bridges/one/resume").status == 200
        wait_until(
            lambda: http.get("/api/v1/bridges/one").json()["link"]["link"], "connected".__eq__
        )
        assert _pending(gw, "one") == 3
        assert _records(gw) == sorted(kept + one)

        reply = http_of(gw).delete("/api/v1/bridges/one")
        assert reply.status == 204, reply.text
        # Removed once its link closed; the other bridge's stay.
        wait_until(lambda: _records(gw), lambda rows: rows == kept)
        assert _pending(gw, "kept") == 2


@pytest.mark.timeout(60)
def test_a_reload_renaming_a_bridge_or_changing_its_client_id_removes_the_old_records(
    tmp_path: Path, remote: FakeRemote
) -> None:
    bridges = [_bridge("one", "c-one", remote.port), _bridge("two", "c-two", remote.port)]
    kept = _bridge("kept", "c-kept", remote.port)
    with running_gateway(tmp_path, _config(*bridges, kept)) as gw:
        wait_until(lambda: remote.acknowledged("c-one"), lambda got: got == [1, 2, 3])
        wait_until(lambda: remote.acknowledged("c-two"), lambda got: got == [4, 5])
        wait_until(lambda: remote.acknowledged("c-kept"), lambda got: got == [6, 7])
        assert {key for key, _ in _records(gw)} == {
            _key("one", "c-one"),
            _key("two", "c-two"),
            _key("kept", "c-kept"),
        }
        # "one" renamed "uno" (same client id), "two" with another client id.
        renamed = {**bridges[0], "name": "uno"}
        other_id = {**bridges[1], "client_id": "c-two-b"}
        data = yaml.safe_load(_config(renamed, other_id, kept))
        data.update(
            {
                "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
                "data_dir": str(gw.gateway.config.data_dir),
                "sys": {"interval": 0},
            }
        )
        data["api"]["bind"] = "127.0.0.1:0"
        path = tmp_path / "edgebus.yaml"
        path.write_text(yaml.safe_dump(data))
        gw.call(lambda: setattr(gw.gateway, "config_path", path))
        reply = http_of(gw).post("/api/v1/reload")
        assert reply.status == 200, reply.text
        kept_rows = [(_key("kept", "c-kept"), 6), (_key("kept", "c-kept"), 7)]
        wait_until(lambda: _records(gw), lambda rows: rows == kept_rows)
        assert _pending(gw, "kept") == 2


@pytest.mark.timeout(60)
def test_a_gateway_started_without_a_bridge_removes_its_records(
    tmp_path: Path, remote: FakeRemote
) -> None:
    one, kept = _bridge("one", "c-one", remote.port), _bridge("kept", "c-kept", remote.port)
    with running_gateway(tmp_path, _config(one, kept)) as gw:
        wait_until(lambda: remote.acknowledged("c-one"), lambda got: got == [1, 2, 3])
        wait_until(lambda: remote.acknowledged("c-kept"), lambda got: got == [6, 7])
        assert len(_records(gw)) == 5
    # Stopped; started again with "one" no longer in the file.
    with running_gateway(tmp_path, _config(kept)) as gw:
        kept_rows = [(_key("kept", "c-kept"), 6), (_key("kept", "c-kept"), 7)]
        wait_until(lambda: _records(gw), lambda rows: rows == kept_rows)
        # The kept bridge read its own back.
        wait_until(lambda: _pending(gw, "kept"), lambda n: n == 2)
