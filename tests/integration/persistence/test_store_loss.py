"""A store whose files were lost is refused loudly; one never created starts fresh.

Real gateway processes (``persistence: sqlite``) on real files:

- everything the store holds is in ``edgebus.db`` itself soon after it was written (the
  schema at once, data once the writer falls idle), so a ``kill -9`` followed by the loss
  of the write-ahead log ``edgebus.db-wal`` loses at most the last seconds, not the
  store; and that loss is not silent: the log missing after a stop that was not clean is
  refused, until an empty log is put there on purpose;
- a database without the schema while the marker ``edgebus.db.created`` says a store was
  created (its log, which held the schema, deleted or its header damaged: what a
  ``kill -9`` in a store's first ~1000 pages left before the store checkpointed) is
  refused in one line naming the files and what to do, and the files are left as found;
- a first start on a full disk fails in one line saying the disk is full and leaves no
  store file behind: once space is freed the gateway starts with a new store.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.brokers import BrokerHandle, start_edgebus
from tests.helpers.raw_client import RawClient
from tests.helpers.small_fs import fill, small_filesystem
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY
from tests.integration.components.support import wait_for
from tests.integration.operations.test_store_integrity import (
    CONFIG,
    queued_after_restart,
    refusal,
)

#: The store's files alone in the data directory (no API key file written there).
KEYED = f"{CONFIG}api:\n  bind: 127.0.0.1:0\n  keys: ['{KEY}']\n"


def store_session(broker: BrokerHandle, queued: int) -> None:
    """A persistent session ``keeper`` on ``kept/#`` with ``queued`` QoS 1 messages queued
    (each PUBACK says the store committed it)."""
    sub = RawClient(broker.host, broker.port, protocol_level=5)
    sub.do_connect("keeper", proto_ver=5, properties={"session_expiry_interval": 3600})
    assert sub.subscribe([("kept/#", 1)]).reason_codes == [1]
    sub.disconnect()
    pub = RawClient(broker.host, broker.port, protocol_level=5)
    pub.do_connect("filler", proto_ver=5)
    for i in range(queued):
        pub.publish(f"kept/{i}", b"queued", qos=1)
    pub.disconnect()


def kill(broker: BrokerHandle) -> None:
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(unit(10))
    broker.stop()


def file_alone(database: Path, scratch: Path, sql: str) -> list[tuple[object, ...]]:
    """``sql`` on a copy of the database file without its write-ahead log: what is left
    when the log is lost."""
    scratch.mkdir(exist_ok=True)
    copy = scratch / "alone.db"
    for stale in scratch.iterdir():
        stale.unlink()
    shutil.copyfile(database, copy)
    conn = sqlite3.connect(copy)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


@pytest.mark.timeout(120)
def test_the_database_file_holds_the_store_without_its_log(tmp_path: Path) -> None:
    database = tmp_path / "data" / "edgebus.db"
    broker = start_edgebus(tmp_path, CONFIG)
    try:
        # The schema is in the file from the first start on.
        tables = {name for (name,) in file_alone(database, tmp_path / "copy", TABLES)}
        assert {"meta", "sessions", "deliveries", "messages", "retained"} <= tables
        store_session(broker, 20)
        # The writer checkpoints once idle: the queued messages reach the file too.
        wait_for(
            lambda: file_alone(database, tmp_path / "copy", "SELECT count(*) FROM deliveries"),
            lambda rows: rows == [(20,)],
            seconds=30,
        )
    finally:
        kill(broker)
    wal = database.with_name("edgebus.db-wal")
    for log in database.parent.glob("edgebus.db-*"):  # the log lost after the kill
        log.unlink()
    # A log missing after a stop that was not clean is refused, the files left as found.
    before = sorted(path.name for path in database.parent.iterdir())
    line = refusal(tmp_path)
    assert f"{database}: its write-ahead log {wal} is missing" in line
    assert "did not stop cleanly" in line
    assert f"touch {wal}" in line
    assert sorted(path.name for path in database.parent.iterdir()) == before
    wal.touch()  # on purpose, as the line says: what the file holds is everything
    assert queued_after_restart(tmp_path) == 20


def test_a_clean_stop_leaves_everything_in_the_database_file(tmp_path: Path) -> None:
    database = tmp_path / "data" / "edgebus.db"
    with start_edgebus(tmp_path, CONFIG) as broker:
        store_session(broker, 5)
    assert not database.with_name("edgebus.db-wal").exists()
    assert file_alone(database, tmp_path / "copy", "SELECT count(*) FROM deliveries") == [(5,)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("loss", ["log_deleted", "log_header_zeroed"])
def test_a_store_without_its_schema_is_refused_while_the_marker_exists(
    tmp_path: Path, loss: str
) -> None:
    database = tmp_path / "data" / "edgebus.db"
    wal = database.with_name("edgebus.db-wal")
    marker = database.with_name("edgebus.db.created")
    broker = start_edgebus(tmp_path, CONFIG)
    store_session(broker, 20)
    kill(broker)
    assert marker.exists()
    # What a kill -9 left before the store checkpointed: the database file one page
    # without tables, everything in the log; then the log is lost.
    log = wal.read_bytes()
    for path in database.parent.glob("edgebus.db*"):
        if path != marker:
            path.unlink()
    empty = sqlite3.connect(database)
    empty.execute("PRAGMA journal_mode=WAL")
    empty.close()
    assert database.stat().st_size == 4096
    if loss == "log_header_zeroed":
        wal.write_bytes(b"\0" * 32 + log[32:])
    before = {path.name: path.read_bytes() for path in database.parent.glob("edgebus.db*")}

    line = refusal(tmp_path)
    assert str(database) in line
    assert "has no tables" in line
    assert f"{marker} says it was created" in line
    assert str(wal) in line
    assert f"delete {database}, {wal} and {marker}" in line
    after = {path.name: path.read_bytes() for path in database.parent.glob("edgebus.db*")}
    assert after.keys() >= before.keys()  # nothing deleted (a reader may add -shm)
    assert {name: after[name] for name in before} == before  # nor changed

    for path in (database, wal, marker):  # on purpose, as the line says
        path.unlink(missing_ok=True)
    assert queued_after_restart(tmp_path) == -1  # a new, empty store
    assert marker.exists()


def test_a_zero_byte_file_without_a_marker_is_a_new_store(tmp_path: Path) -> None:
    """No marker: no store was ever created here (the marker is written once one is)."""
    database = tmp_path / "data" / "edgebus.db"
    database.parent.mkdir()
    database.write_bytes(b"")
    assert queued_after_restart(tmp_path) == -1
    assert database.with_name("edgebus.db.created").exists()


@pytest.mark.timeout(120)
def test_a_first_start_on_a_full_disk_leaves_no_store_behind(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "data", 1 << 20) as data:
        filler = fill(data, leave=4096)  # room for the lock file, not for the store
        line = refusal(tmp_path, KEYED)
        assert str(data / "edgebus.db") in line
        assert "disk is full" in line
        assert "backup" not in line
        assert sorted(path.name for path in data.iterdir() if path != filler) == ["edgebus.lock"]
        filler.unlink()  # space freed: a first start again
        assert queued_after_restart(tmp_path, KEYED) == -1
        assert (data / "edgebus.db.created").exists()


@pytest.mark.timeout(120)
def test_a_clean_stop_on_a_full_disk_starts_again(tmp_path: Path) -> None:
    """The stop cannot record that it was clean (no room), but its close checkpoints
    everything into the database file: the next start, with space freed, is not refused."""
    with small_filesystem(tmp_path / "data", 2 << 20) as data:
        with start_edgebus(tmp_path, KEYED) as broker:
            store_session(broker, 20)
            filler = fill(data)
        filler.unlink()
        assert queued_after_restart(tmp_path, KEYED) == 20
