"""The downtime after a ``kill -9`` counts against the expiry of sessions that were
connected at the kill, as it does for sessions already offline.

MQTT 5.0 3.1.2.11.2: the Session Expiry Interval starts when the Network Connection is
closed; a kill closes every connection. The store keeps the time the broker last ran
(``SqliteStore.alive``, at most a few seconds stale, and with every session saved at a
CONNECT); at the next start, a session the store still holds as connected counts as
offline since then. (Before, its expiry started at the restart: a session with a 2 s
expiry was still there after 6 s of downtime.)
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.helpers.brokers import start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit

CONFIG = "persistence: sqlite\n"


def connect(host: str, port: int, client_id: str, expiry: int) -> tuple[RawClient, bool]:
    client = RawClient(host, port)
    connack = client.do_connect(
        client_id,
        proto_ver=5,
        clean_session=False,
        properties={"session_expiry_interval": expiry},
    )
    return client, bool(connack.session_present)


def wait_for_wall_time(moment: float) -> None:
    """Lets the wall clock pass ``moment`` (the downtime under test, not an assertion)."""
    while time.time() < moment:
        time.sleep(min(moment - time.time(), 0.1) + 0.001)


def test_sessions_connected_at_a_kill_count_the_downtime(tmp_path: Path) -> None:
    broker = start_edgebus(tmp_path, CONFIG)
    clients: list[RawClient] = []
    try:
        short, _ = connect(broker.host, broker.port, "k9-short", 2)
        long, _ = connect(broker.host, broker.port, "k9-long", 3600)
        clients += [short, long]
        # A QoS 1 PUBACK waits until what the store was handed before it is committed.
        long.publish("k9/barrier", b"", qos=1)
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait(unit(10))
        killed_at = time.time()
        broker.stop()
        for client in clients:
            client.close()
        clients.clear()
        wait_for_wall_time(killed_at + 6)  # down 6 s: past the short session's 2 s
        broker = start_edgebus(tmp_path, CONFIG)
        short, short_present = connect(broker.host, broker.port, "k9-short", 2)
        long, long_present = connect(broker.host, broker.port, "k9-long", 3600)
        clients += [short, long]
        assert (short_present, long_present) == (False, True)
    finally:
        for client in clients:
            client.close()
        broker.stop()
