"""Issue 8.5: a store that existed and is now empty, missing or corrupt is refused.

A real gateway process (``persistence: sqlite``) stores a persistent session with queued
messages and retained messages and stops. Its database file is then truncated to 0
bytes (what a power loss leaves on some file systems), deleted, or overwritten: the
gateway refuses to start, with one line naming the file and saying how to start with an
empty store on purpose; doing what that line says starts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.brokers import BrokerStartError, start_edgebus
from tests.helpers.raw_client import RawClient

CONFIG = "persistence: sqlite\n"


def fill_store(tmp_path: Path) -> Path:
    """Runs a gateway that stores a session, 20 queued and 5 retained messages; returns
    the database file."""
    with start_edgebus(tmp_path, CONFIG) as broker:
        sub = RawClient(broker.host, broker.port, protocol_level=5)
        sub.do_connect("keeper", proto_ver=5, properties={"session_expiry_interval": 3600})
        assert sub.subscribe([("kept/#", 1)]).reason_codes == [1]
        sub.disconnect()
        pub = RawClient(broker.host, broker.port, protocol_level=5)
        pub.do_connect("filler", proto_ver=5)
        for i in range(20):
            pub.publish(f"kept/{i}", b"queued", qos=1)
        for i in range(5):
            pub.publish(f"retained/{i}", b"kept", qos=1, retain=True)
        pub.disconnect()
    database = tmp_path / "data" / "edgebus.db"
    assert database.stat().st_size > 0
    return database


def refusal(tmp_path: Path, config: str = CONFIG) -> str:
    """Starts the gateway, which must exit; returns its one error line."""
    try:
        started = start_edgebus(tmp_path, config)
    except BrokerStartError:
        pass
    else:
        started.stop()  # no gateway left running when it starts, as it did before a fix
        pytest.fail("the gateway started")
    stderr = (tmp_path / "edgebus.stderr.log").read_text()
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("edgebus:")]
    assert len(errors) == 1, stderr
    return errors[0]


def queued_after_restart(tmp_path: Path, config: str = CONFIG) -> int:
    with start_edgebus(tmp_path, config) as broker:
        sub = RawClient(broker.host, broker.port, protocol_level=5)
        connack = sub.do_connect(
            "keeper", proto_ver=5, clean_session=False, properties={"session_expiry_interval": 0}
        )
        count = len([p for p in sub.collect() if p.type == mb.PacketType.PUBLISH])
        sub.close()
        return count if connack.session_present else -1


def test_an_emptied_store_is_refused_until_removed_on_purpose(tmp_path: Path) -> None:
    database = fill_store(tmp_path)
    marker = database.with_name("edgebus.db.created")
    assert marker.exists()
    database.write_bytes(b"")  # what a power loss leaves
    line = refusal(tmp_path)
    assert str(database) in line
    assert "empty (0 bytes)" in line
    assert f"delete {database} and {marker}" in line
    assert database.stat().st_size == 0  # nothing was touched

    database.unlink()
    line = refusal(tmp_path)
    assert "missing" in line
    assert f"delete {marker}" in line

    marker.unlink()  # on purpose, as the line says
    assert queued_after_restart(tmp_path) == -1  # a new, empty store
    assert marker.exists()


def test_the_store_survives_a_clean_restart(tmp_path: Path) -> None:
    fill_store(tmp_path)
    assert queued_after_restart(tmp_path) == 20


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: b"not a database at all" + data[21:], id="header"),
        pytest.param(lambda data: data[:4096] + b"\xff" * (len(data) - 4096), id="pages"),
    ],
)
def test_a_corrupt_store_is_refused_in_one_line(tmp_path: Path, damage: object) -> None:
    database = fill_store(tmp_path)
    for leftover in database.parent.glob("edgebus.db-*"):  # -wal, -shm of a clean stop
        leftover.unlink()
    assert callable(damage)
    database.write_bytes(damage(database.read_bytes()))
    line = refusal(tmp_path)
    assert str(database) in line
    assert "to start with an empty store on purpose" in line
