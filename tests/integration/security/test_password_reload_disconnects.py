"""A reload of the password file (``SIGHUP``) disconnects the clients whose entry it
removed or changed, as mosquitto 2.0 does on ``SIGHUP``; the others stay connected.

Through a real ``edgebus run`` process and paho clients of three users: alice's password
changes, bob is deleted, carol is left as she was. After ``SIGHUP`` alice and bob are
disconnected (MQTT 5: DISCONNECT 0x87 Not authorized, sent by the server; MQTT 3.1.1:
the connection closes), carol still publishes and receives, alice's persistent session
is still there when she comes back with her new password, the reload's INFO line counts
two clients and ``/metrics`` counts them in ``edgebus_credentials_revoked_total``.
Before, the three stayed connected (docs/security.md said so).
"""

from __future__ import annotations

import re
import signal
import urllib.request
import uuid
from pathlib import Path

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from broker_core.passwords import hash_password, read_password_file, write_password_file
from tests.helpers.timeouts import unit
from tests.integration.broker.support import PahoClient, wait_until
from tests.integration.security.support import FAST, connect_raw, password_file, security_gateway
from tests.integration.security.test_scram import scram_connect
from tests.interop.mosquitto.tools import LOOPBACK, EdgebusProcess

NOT_AUTHORIZED = 0x87
KEY = "reload-disconnects-test-key-0123456789abcdef"


def _client(gw: EdgebusProcess, proto: int, client_id: str, user: str, password: str) -> PahoClient:
    """MQTT 3.1.1 clients ask for a persistent session (clean session 0)."""
    client = PahoClient(LOOPBACK, gw.port, proto, client_id, clean_session=False)
    client.client.username_pw_set(user, password)
    return client


def _api_metrics(gw: EdgebusProcess) -> str:
    found = re.search(r"HTTP API listening on http://([\d.]+:\d+)/", gw.stderr_path.read_text())
    assert found is not None, gw.log_tail()
    request = urllib.request.Request(f"http://{found.group(1)}/metrics", headers={"X-API-Key": KEY})
    with urllib.request.urlopen(request, timeout=unit(10)) as reply:
        body: bytes = reply.read()
    return body.decode()


@pytest.mark.parametrize("proto", [5, 4])
def test_sighup_disconnects_clients_whose_password_entry_changed(
    tmp_path: Path, proto: int
) -> None:
    passwd = password_file(tmp_path / "passwd", {"alice": "old", "bob": "bob1", "carol": "carol1"})
    config = (
        f"auth: {{password_file: '{passwd}', login_throttle: {{enabled: false}}}}\n"
        "mqtt: {max_session_expiry: 3600}\n"
        "logging: {level: info}\n"
        f"api: {{bind: '{LOOPBACK}:0', keys: ['{KEY}']}}\n"
    )
    expiry = Properties(PacketTypes.CONNECT)
    expiry.SessionExpiryInterval = 3600
    with EdgebusProcess(tmp_path, config) as gw:
        assert gw.process is not None
        run = uuid.uuid4().hex[:8]
        alice = _client(gw, proto, f"alice-{run}", "alice", "old")
        bob = _client(gw, proto, f"bob-{run}", "bob", "bob1")
        carol = _client(gw, proto, f"carol-{run}", "carol", "carol1")
        try:
            alice.connect(clean_start=False, properties=expiry if proto == 5 else None)
            assert alice.subscribe("kept/#", 1) == [1]
            bob.connect()
            carol.connect()
            assert carol.subscribe("echo/carol", 1) == [1]

            users = read_password_file(passwd)
            users["alice"] = hash_password("new", FAST)
            del users["bob"]
            write_password_file(passwd, users)
            gw.process.send_signal(signal.SIGHUP)

            for gone in (alice, bob):
                info = gone.wait_disconnected(unit(10))
                if proto == 5:
                    assert info.from_server
                    assert info.reason_code == NOT_AUTHORIZED
            # carol was left alone: her connection publishes and receives
            assert carol.is_connected
            assert carol.publish("echo/carol", b"still here", 1) == 0
            assert carol.expect_message().payload == b"still here"
            assert carol.disconnect_info is None

            wait_until(
                lambda: "2 client(s) disconnected" in gw.stderr_path.read_text(),
                unit(10),
                "the reload's INFO line",
            )
            log = gw.stderr_path.read_text()
            assert "INFO gateway.security: password file" in re.sub(r" +", " ", log)
            assert re.search(r"^edgebus_credentials_revoked_total 2\.0$", _api_metrics(gw), re.M)

            # alice's old password is refused now; her new one finds her session
            again = _client(gw, proto, f"alice-old-{run}", "alice", "old")
            assert again.connect(expect_success=False).reason_code == 0x86
            again.close()
            back = _client(gw, proto, alice.client_id, "alice", "new")
            connack = back.connect(clean_start=False, properties=expiry if proto == 5 else None)
            assert connack.session_present
            back.close()
        finally:
            for client in (alice, bob, carol):
                client.close()


def test_reload_judges_scram_logins_and_leaves_other_logins_alone(tmp_path: Path) -> None:
    """SCRAM proves an entry of the same file: a changed one disconnects its client too
    (DISCONNECT 0x87). A password login whose entry is unchanged, and an anonymous client
    of a listener that allows them, stay connected."""
    passwd = password_file(tmp_path / "passwd", {"alice": "wonderland", "bob": "builder"})
    config = {
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0", "allow_anonymous": True}],
        "auth": {"password_file": str(passwd)},
    }
    with security_gateway(tmp_path, config) as gw:
        scram = scram_connect(gw, "alice", "wonderland")
        bob, _ = connect_raw(gw, 5, "bob-raw", username="bob", password=b"builder")
        anonymous, _ = connect_raw(gw, 4, "anonymous-raw")
        try:
            users = read_password_file(passwd)
            users["alice"] = hash_password("looking-glass", FAST)
            write_password_file(passwd, users)
            gw.call(gw.gateway.reload)
            scram.expect_closed(unit(10), reason_code=NOT_AUTHORIZED, require_reason=True)
            bob.ping()
            anonymous.ping()
            assert gw.gateway.security.revoked_disconnects == 1
        finally:
            for client in (scram, bob, anonymous):
                client.close()
