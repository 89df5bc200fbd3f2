"""A data directory whose store marker is in the format of edgebus before the shared
marker (``broker_core.store.marker``) opens as it did, and is refused as it was.

That edgebus wrote ``edgebus.db.created`` once, one line without a ``state``, and
recorded whether the gateway stopped cleanly inside the database (``meta``
``stopped_cleanly``: ``0`` from each open, checkpointed into ``edgebus.db``; ``1`` at a
clean close). The data directories here are written by a real gateway and then given
that marker and that record, as the edgebus before wrote them; a real gateway process
then starts on them:

- a clean stop: the store opens with everything, and its marker is rewritten with a
  ``state``;
- a ``kill -9``, the log kept: the store opens with everything;
- a stop that was not clean and the log lost: refused in one line, as before, until the
  log is created empty on purpose.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.brokers import start_edgebus
from tests.helpers.timeouts import unit
from tests.integration.operations.test_store_integrity import (
    CONFIG,
    queued_after_restart,
    refusal,
)
from tests.integration.persistence.test_store_loss import kill, store_session

#: What that edgebus wrote into the marker (its ``_write_marker``), a time stamp in it.
OLD_MARKER = (
    "edgebus.db created 2026-11-01T08:00:00Z; while this file exists edgebus refuses to"
    " start when the store is missing or empty. Delete it to start with an empty store.\n"
)
RECORD = "INSERT OR REPLACE INTO meta (key, value) VALUES ('stopped_cleanly', ?)"


def _old_marker(database: Path) -> Path:
    marker = database.with_name("edgebus.db.created")
    assert "state: " in marker.read_text()  # the format this edgebus writes
    marker.write_text(OLD_MARKER)
    return marker


def _record_and_close(database: Path, value: str) -> None:
    """The record written as that edgebus did; closing checkpoints it into the file and
    deletes the log."""
    conn = sqlite3.connect(database)
    with conn:
        conn.execute(RECORD, (value,))
    conn.close()


@pytest.mark.timeout(120)
def test_an_old_marker_after_a_clean_stop_opens(tmp_path: Path) -> None:
    database = tmp_path / "data" / "edgebus.db"
    with start_edgebus(tmp_path, CONFIG) as broker:
        store_session(broker, 20)
    marker = _old_marker(database)
    _record_and_close(database, "1")
    assert not database.with_name("edgebus.db-wal").exists()
    assert queued_after_restart(tmp_path) == 20
    assert marker.read_text().endswith("state: closed\n")  # rewritten, in the new format


@pytest.mark.timeout(120)
def test_an_old_marker_after_a_kill_with_its_log_opens(tmp_path: Path) -> None:
    database = tmp_path / "data" / "edgebus.db"
    wal = database.with_name("edgebus.db-wal")
    broker = start_edgebus(tmp_path, CONFIG)
    store_session(broker, 20)
    kill(broker)
    _old_marker(database)
    # The record "0" as a process that did not close the store leaves it: in the log,
    # which stays (the process exits without closing its connection).
    script = (
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1])\n"
        f"conn.execute({RECORD!r}, ('0',))\n"
        "conn.commit()\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(database)], check=True, timeout=unit(10))
    assert wal.stat().st_size > 0
    assert queued_after_restart(tmp_path) == 20


@pytest.mark.timeout(120)
def test_an_old_marker_after_a_stop_that_was_not_clean_without_its_log_is_refused(
    tmp_path: Path,
) -> None:
    database = tmp_path / "data" / "edgebus.db"
    wal = database.with_name("edgebus.db-wal")
    with start_edgebus(tmp_path, CONFIG) as broker:
        store_session(broker, 20)
    _old_marker(database)
    # What that edgebus left when killed, its log then lost: "0" in the file, no log.
    _record_and_close(database, "0")
    assert not wal.exists()
    line = refusal(tmp_path)
    assert f"{database}: its write-ahead log {wal} is missing" in line
    assert "did not stop cleanly" in line
    assert f"touch {wal}" in line
    wal.touch()  # on purpose, as the line says
    assert queued_after_restart(tmp_path) == 20
