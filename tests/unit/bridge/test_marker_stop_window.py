"""A process killed between closing its database and marking the stop clean: the close
removed the write-ahead log after its checkpoint, the marker still says the run was
going. The ``closing`` mark written before the close says that the log was removed by
it, so the next start opens with every row instead of refusing a log it takes for lost.
The kill is a real one (``os._exit`` in a child process, at the ``closed`` mark)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.queue import DiskQueue
from bridge.queue_file import marker_path
from broker_core.store import schema

_QUEUE = """
import asyncio, os, sys
from pathlib import Path
import bridge.queue
from bridge.mapping import Queued
from bridge.queue import DiskQueue
from broker_core.mqtt.properties import Properties

bridge.queue.mark_closed = lambda path: os._exit(9)  # killed at the closed mark

async def main():
    queue = DiskQueue.open(Path(sys.argv[1]), "q")
    await queue.loaded()
    for number in range(5):
        queue.append(Queued.of(f"t/{number}", b"x", 1, False, Properties(), 1000.0))
    done = asyncio.get_running_loop().create_future()
    queue.barrier(done.set_result)
    await done
    queue.close()

asyncio.run(main())
"""

_STORE = """
import os, sys
from pathlib import Path
from broker_core.store import marker, schema

real_mark = marker.mark

def mark(path, state, note):
    if state == marker.CLOSED:
        os._exit(9)  # killed at the closed mark
    real_mark(path, state, note)

schema.mark = mark
path = Path(sys.argv[1])
conn = schema.connect(path)
conn.execute("INSERT INTO meta (key, value) VALUES ('probe', 'kept')")
schema.close(conn, path)
"""


def _killed_at_the_closed_mark(script: str, path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, timeout=60
    )
    assert done.returncode == 9, done.stderr.decode()
    assert not path.with_name(path.name + "-wal").exists()  # the close removed it
    assert marker_path(path).read_text().endswith("state: closing\n")


def test_a_queue_killed_between_its_close_and_its_mark_opens_with_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "queue.db"
    _killed_at_the_closed_mark(_QUEUE, path)

    async def main() -> int:
        queue = DiskQueue.open(path, "q")
        await queue.loaded()
        count = queue.index.count
        queue.close()
        return count

    assert asyncio.run(main()) == 5


def test_a_store_killed_between_its_close_and_its_mark_opens_with_its_data(
    tmp_path: Path,
) -> None:
    path = tmp_path / "edgebus.db"
    _killed_at_the_closed_mark(_STORE, path)
    conn = schema.connect(path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone()
    finally:
        schema.close(conn, path)
    assert row == ("kept",)


def test_a_log_missing_after_a_run_still_going_is_still_refused(tmp_path: Path) -> None:
    """The ``closing`` mark changes nothing for a run killed before its close."""
    path = tmp_path / "edgebus.db"
    _killed_at_the_closed_mark(_STORE, path)
    marker = marker_path(path)
    marker.write_text(marker.read_text().replace("state: closing", "state: open"))
    with pytest.raises(schema.StoreError, match="is missing, but the gateway did not stop"):
        schema.connect(path)
