"""A protocol-error close that waits for a persistent session's acknowledgements held for
the store's commit (``Session.acks_due``) is bounded by that commit: when it fails, no
SUBACK comes, and the DISCONNECT 0x81 of the malformed packet and the close follow at
once, the connection not left open.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


@pytest.mark.timeout(60)
def test_a_failed_commit_ends_the_wait_of_a_protocol_error_close(tmp_path: Path) -> None:
    gateway = start_edgebus(tmp_path, "persistence: sqlite\n")
    db = sqlite3.connect(tmp_path / "data" / "edgebus.db", timeout=unit(10))
    db.isolation_level = None
    try:
        client = RawClient(gateway.host, gateway.port, protocol_level=5)
        client.do_connect(
            "ef-sub",
            proto_ver=5,
            clean_session=False,
            properties={"session_expiry_interval": 3600},
        )
        # The gateway's writer cannot commit meanwhile (it waits up to 5 s, then fails).
        db.execute("BEGIN IMMEDIATE")
        try:
            client.send(mb.gen_subscribe(1, "ef/#", 1, proto_ver=5) + b"\x36\x02\x00\x00")
            client.expect_closed(unit(20), reason_code=0x81, require_reason=True)
        finally:
            db.execute("ROLLBACK")
    finally:
        db.close()
        gateway.stop()
