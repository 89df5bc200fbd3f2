"""The per-bridge store-and-forward queue: SQLite in the bridge's data directory.

Every QoS 1/2 message a bridge forwards is a row here before its local publisher is
acknowledged, and leaves only once the remote broker acknowledged it:

- ``append`` (on the loop, from the bridge's durable tap) gives the message the next
  sequence number, its place in the order; a thread of the queue's own inserts it.
  ``DiskQueue`` is a durable participant of the broker's acknowledgements
  (``broker_core.acks``): ``pending`` counts the rows appended and not yet committed,
  and ``barrier(callback)`` calls back once they are. Deleting a row does not count
  as pending: nobody waits for a delete.
- ``remove(seq)`` deletes a row (the remote acknowledged it, or it was dropped).
- ``read(first, limit, callback)`` loads rows from disk, in order, for a backlog that
  does not fit in memory.
- The writer thread takes whatever was asked in one event-loop turn (or while it was
  busy) as one transaction: inserts, deletes, one commit, then the reads. WAL mode with
  ``synchronous=NORMAL``: a commit survives ``kill -9`` of the process (a power loss may
  take the last ones).

The loop keeps an index of the queue (``QueueIndex``: the size and arrival time of
every row, a few bytes each), so the queue's depth, bytes, oldest age and the
overflow decisions never wait for the disk.

``DiskQueue.open`` is quick and synchronous (the file, its schema, the last sequence
number), so a bridge taps the broker before its first ``await`` and nothing published
while it starts escapes it; the index of what an earlier run left is read by the
writer thread meanwhile (``await queue.loaded()``), and ``append`` works from the start.

A write that fails calls its barriers back with False (the publishers are disconnected
without a PUBACK and send again) and leaves ``error`` set: the bridge then fails and is
restarted, and its state is read back from the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import queue as thread_queue
import sqlite3
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.mapping import Queued
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import EMPTY, PacketKind, decode_properties

__all__ = ["DiskQueue", "QueueIndex", "Queued"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    received_at REAL NOT NULL
);
"""
_COLUMNS = 7
#: Rows per INSERT statement, at most. A batch of rows is written with one statement of
#: exactly its size (and one of this size per 256 more): each statement is a step that
#: lets go of the interpreter lock and takes it back, a handover with the busy event
#: loop's thread that costs more than the SQL. Every size is prepared once and kept
#: (``_STATEMENTS``).
_MAX_ROWS = 256
_STATEMENTS = _MAX_ROWS + 32  # the connection's statement cache
_DELETE = "DELETE FROM queue WHERE seq BETWEEN ? AND ?"
_READ = "SELECT * FROM queue WHERE seq >= ? ORDER BY seq LIMIT ?"


def _queued(row: tuple[Any, ...]) -> Queued:
    seq, topic, payload, qos, retain, props, received_at = row
    properties = EMPTY
    if props:
        properties, _ = decode_properties(props, 0, len(props), PacketKind.PUBLISH)
    return Queued.of(topic, bytes(payload), qos, bool(retain), properties, received_at, seq)


@functools.cache
def _insert_sql(rows: int) -> str:
    return "INSERT INTO queue VALUES " + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)


def _insert_rows(conn: sqlite3.Connection, values: list[Any]) -> None:
    """Inserts the rows whose columns follow each other in ``values`` (``_COLUMNS`` a
    row), ``_MAX_ROWS`` a statement at most."""
    width = _MAX_ROWS * _COLUMNS
    for start in range(0, len(values), width):
        chunk = values[start : start + width]
        conn.execute(_insert_sql(len(chunk) // _COLUMNS), chunk)


class QueueIndex:
    """The size and arrival time of every queued row, by sequence number, in order.

    Two compact arrays indexed by ``seq - base`` (a removed row has size -1), so a
    million queued messages cost about 12 MB here and every question is answered
    without the disk.
    """

    def __init__(self) -> None:
        self.base = 1  # seq of position 0
        self.head = 0  # first position that may be live
        self.sizes = array("q")
        self.times = array("d")
        self.count = 0
        self.bytes = 0

    @property
    def last(self) -> int:
        """The highest sequence number ever added (``base - 1`` when none)."""
        return self.base + len(self.sizes) - 1

    def add(self, seq: int, size: int, received_at: float) -> None:
        sizes = self.sizes
        if sizes and seq == self.base + len(sizes):  # the next one: the usual case
            sizes.append(size)
            self.times.append(received_at)
            self.count += 1
            self.bytes += size
            return
        gap = seq - self.last - 1
        if gap < 0:
            raise ValueError(f"sequence {seq} is not after {self.last}")
        if not self.sizes:
            self.base, self.head = seq, 0
        else:
            for _ in range(gap):
                self.sizes.append(-1)
                self.times.append(0.0)
        self.sizes.append(size)
        self.times.append(received_at)
        self.count += 1
        self.bytes += size

    def contains(self, seq: int) -> bool:
        position = seq - self.base
        return self.head <= position < len(self.sizes) and self.sizes[position] >= 0

    def remove(self, seq: int) -> int:
        """Forgets ``seq``; returns its size, or -1 when it was not there."""
        position = seq - self.base
        if not (self.head <= position < len(self.sizes)):
            return -1
        size = self.sizes[position]
        if size < 0:
            return -1
        self.sizes[position] = -1
        self.count -= 1
        self.bytes -= size
        if position == self.head:
            self._advance()
        return size

    def first(self, at_least: int = 0) -> int | None:
        """The lowest live sequence number that is ``>= at_least``; None if none."""
        position = max(self.head, at_least - self.base)
        sizes = self.sizes
        while position < len(sizes):
            if sizes[position] >= 0:
                return self.base + position
            position += 1
        return None

    def oldest_time(self) -> float | None:
        first = self.first()
        return None if first is None else self.times[first - self.base]

    def nth(self, n: int) -> int | None:
        """The sequence number of the ``n``-th live row (0 = the oldest)."""
        position = self.head
        sizes = self.sizes
        while position < len(sizes):
            if sizes[position] >= 0:
                if n == 0:
                    return self.base + position
                n -= 1
            position += 1
        return None

    def _advance(self) -> None:
        sizes = self.sizes
        head = self.head
        while head < len(sizes) and sizes[head] < 0:
            head += 1
        self.head = head
        if head >= 4096 and head * 2 >= len(sizes):  # drop the dead prefix
            del sizes[:head]
            del self.times[:head]
            self.base += head
            self.head = 0


_ReadCallback = Callable[[list[Queued], int], None]  # (items, last seq read)
_Read = tuple[int, int, _ReadCallback]  # first, limit, callback
_Barrier = Callable[[bool], None]  # called back with True once committed, False if not

#: Checkpoints. The loop's connection never checkpoints (``wal_autocheckpoint=0``): the
#: writer thread runs a passive checkpoint (it copies the WAL into the database and
#: syncs both, while the loop goes on committing) each time about ``CHECKPOINT_BYTES``
#: were written since the last one. Under a steady stream the WAL never empties that
#: way (a WAL starts over only when a commit finds it wholly copied), so once it holds
#: more than ``WAL_LIMIT`` bytes the loop holds its commits (the publishers' PUBACKs
#: wait meanwhile, nothing blocks) while the thread copies the rest and restarts it.
CHECKPOINT_BYTES = 4 * 1024 * 1024
WAL_LIMIT = 32 * 1024 * 1024
#: What a commit adds to the WAL besides its rows' bytes: a few pages (the last leaf of
#: the table, the pages its deletes touched), about.
_COMMIT_BYTES = 2 * 4096

_PASSIVE = "PASSIVE"
_RESTART = "RESTART"


class DiskQueue:
    """See the module docstring. Build it with ``DiskQueue.open(path, name)``."""

    def __init__(
        self, conn: sqlite3.Connection, last: int, name: str, path: Path, lock: int
    ) -> None:
        self.name = name
        self.path = path
        self.index = QueueIndex()  # what is appended until the earlier rows are read
        self.index.base = last + 1
        self.error: BaseException | None = None
        self.on_commit: Callable[[int], None] | None = None  # called with the seq committed
        self.on_error: Callable[[BaseException], None] | None = None  # a write failed
        self.committed = last  # every seq <= this is on disk
        self.checkpoints = 0  # checkpoints the thread ran (passive and restarting)
        self.held_s = 0.0  # how long commits waited for restarting checkpoints, in all
        self._last_at_open = last
        self._conn = conn
        self._lock = lock  # the file descriptor holding the queue's lock
        self._page_size: int = conn.execute("PRAGMA page_size").fetchone()[0]
        self._loop = asyncio.get_running_loop()
        self._loaded: asyncio.Future[None] = self._loop.create_future()
        self._seq = last
        self._inserts: list[Any] = []  # the columns of the rows to insert, one after another
        self._deletes: list[int] = []
        self._barriers: list[_Barrier] = []
        self._reads: list[_Read] = []  # handed to the thread after the next commit
        self._flush_scheduled = False
        #: Rows appended and not yet committed (a plain attribute: the broker reads it
        #: for every message it acknowledges).
        self.pending = 0
        self._written = 0  # bytes written to the WAL since the last checkpoint, about
        self._checkpointing = False  # a checkpoint is under way in the thread
        self._held_since: float | None = None  # commits wait for a restarting checkpoint
        self._jobs: thread_queue.SimpleQueue[tuple[Any, ...] | None] = thread_queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"edgebus-{name}", daemon=True)
        self._thread.start()
        self._closed = False

    @classmethod
    def open(cls, path: Path, name: str) -> DiskQueue:
        """Opens (creating) the queue at ``path``; ``BridgeError`` when the file is not a
        queue this edgebus can use, or another process has it open. Call on the loop;
        then ``await loaded()``."""
        conn, last, lock = _open(path)
        return cls(conn, last, name, path, lock)

    async def loaded(self) -> None:
        """Until the index holds the rows of earlier runs too."""
        await asyncio.shield(self._loaded)
        if self.error is not None:
            raise BridgeError(f"{self.name}: cannot read the queue: {self.error}")

    # -- what the bridge asks, on the loop ----------------------------------------------

    @property
    def pending_deletes(self) -> int:
        """Rows removed whose delete is not committed yet (after a crash they are back)."""
        return len(self._deletes)

    @property
    def last(self) -> int:
        """The last sequence number given out."""
        return self._seq

    def append(self, item: Queued) -> Queued:
        """Queues a message: gives it the next sequence number; it is on disk at the next
        commit."""
        if self._closed:
            raise BridgeError(f"{self.name}: the queue is closed")
        self._seq = seq = self._seq + 1
        item.seq = seq
        self.pending += 1
        self.index.add(seq, item.size, item.received_at)
        props = item.properties
        self._inserts += (
            seq,
            item.topic,
            item.payload,
            item.qos,
            item.retain,
            b"" if props is EMPTY else props.encoded(),
            item.received_at,
        )
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)
        return item

    def remove(self, seq: int) -> int:
        """Deletes the row ``seq``; returns its size, -1 when it was not queued."""
        size = self.index.remove(seq)
        if size >= 0 and not self._closed:
            self._deletes.append(seq)
            self._schedule()
        return size

    def remove_many(self, seqs: list[int]) -> int:
        """``remove`` of each of ``seqs``; returns how many were queued."""
        remove = self.index.remove
        gone = [seq for seq in seqs if remove(seq) >= 0]
        if gone and not self._closed:
            self._deletes += gone
            self._schedule()
        return len(gone)

    def read(self, first: int, limit: int, callback: _ReadCallback) -> None:
        """Loads up to ``limit`` rows with ``seq >= first``, in order, after every write
        asked before; ``callback(items, last_seq_read)`` on the loop (rows removed
        meanwhile are left out; ``last_seq_read`` is 0 when none was found)."""
        self._reads.append((first, limit, callback))
        self._schedule()

    def barrier(self, callback: Callable[[bool], None]) -> None:
        if not self.pending:
            callback(self.error is None)
            return
        self._barriers.append(callback)
        self._schedule()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stops the thread, commits what was asked and closes the file."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("%s: the queue's thread did not finish within %.0f s", self.name, timeout_s)
        self._held_since = None
        self._commit()
        with contextlib.suppress(sqlite3.Error):
            # The last connection to close checkpoints the WAL into the database (an
            # fsync, on the loop, once, when the bridge stops) and removes it.
            self._conn.close()
        os.close(self._lock)

    # -- commits, on the loop --------------------------------------------------------------

    def _schedule(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Once per loop turn: commits what that turn asked (group commit)."""
        self._flush_scheduled = False
        if self._held_since is None and not self._closed:
            self._commit()

    def _commit(self) -> None:
        """One transaction: the rows appended, the rows removed; then the barriers, and
        the reads go to the thread (which reads what is committed)."""
        inserts, deletes, barriers = self._inserts, self._deletes, self._barriers
        if inserts or deletes or barriers:
            self._inserts, self._deletes, self._barriers = [], [], []
            self._write(inserts, deletes, barriers)
        if self._reads:
            for first, limit, callback in self._reads:
                self._jobs.put(("read", first, limit, callback))
            self._reads = []

    def _write(self, inserts: list[Any], deletes: list[int], barriers: list[_Barrier]) -> None:
        error: BaseException | None = None
        conn = self._conn
        try:
            ranges = _ranges(deletes) if deletes else []
            statements = -(-len(inserts) // (_MAX_ROWS * _COLUMNS)) + len(ranges)
            if statements > 1:  # one statement is a transaction of its own
                conn.execute("BEGIN")
            if inserts:
                _insert_rows(conn, inserts)
            if ranges:
                conn.executemany(_DELETE, ranges)
            if statements > 1:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            error = exc
            log.error("%s: writing the queue failed: %s", self.name, exc)
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        rows = len(inserts) // _COLUMNS
        self.pending -= rows
        if error is not None:
            self.error = error
            if self.on_error is not None:
                self.on_error(error)
        else:
            self.committed = self._seq - self.pending
            self._written += (
                _COMMIT_BYTES + 16 * len(deletes) + 24 * rows + sum(map(len, inserts[2::_COLUMNS]))
            )
            if self._written >= CHECKPOINT_BYTES and not self._checkpointing and not self._closed:
                self._checkpoint(_PASSIVE)
        ok = error is None
        for barrier in barriers:
            barrier(ok)
        if ok and self.on_commit is not None:
            self.on_commit(self.committed)

    def _checkpoint(self, mode: str) -> None:
        self._checkpointing = True
        self._written = 0
        self._jobs.put(("checkpoint", mode))

    def _checkpointed(self, mode: str, wal_bytes: int, error: BaseException | None) -> None:
        """The thread's answer: how many bytes the WAL holds after a checkpoint."""
        self._checkpointing = False
        self.checkpoints += 1
        if error is not None:
            log.warning("%s: checkpointing the queue failed: %s", self.name, error)
        if self._held_since is not None:
            self.held_s += time.monotonic() - self._held_since
            self._held_since = None
            self._schedule()  # what waited
        elif mode == _PASSIVE and wal_bytes > WAL_LIMIT and error is None and not self._closed:
            self._held_since = time.monotonic()
            self._commit()  # what this turn asked goes first
            self._checkpoint(_RESTART)

    # -- the thread: reads and checkpoints -------------------------------------------------

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous=NORMAL")  # a checkpoint syncs the WAL, then the file
        except sqlite3.Error as exc:
            self._answer(self._index_loaded, QueueIndex(), exc)
            return
        try:
            self._load(conn)
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                if job[0] == "read":
                    self._read(conn, *job[1:])
                else:
                    self._run_checkpoint(conn, job[1])
        finally:
            # Not the last connection (the loop's closes after this one): no checkpoint.
            conn.close()

    def _answer(self, callback: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self._loop.call_soon_threadsafe(callback, *args)

    def _load(self, conn: sqlite3.Connection) -> None:
        index = QueueIndex()
        error: BaseException | None = None
        try:
            rows = conn.execute(
                "SELECT seq, length(topic) + length(payload), received_at FROM queue"
                " WHERE seq < ? ORDER BY seq",
                (self._last_at_open + 1,),
            )
            for seq, size, received_at in rows:
                index.add(seq, size, received_at)
        except sqlite3.Error as exc:
            error = exc
        self._answer(self._index_loaded, index, error)

    def _index_loaded(self, index: QueueIndex, error: BaseException | None) -> None:
        if error is not None:
            self.error = error
        new = self.index
        for position, size in enumerate(new.sizes):
            if size >= 0:
                index.add(new.base + position, size, new.times[position])
        self.index = index
        if not self._loaded.done():
            self._loaded.set_result(None)

    def _read(
        self, conn: sqlite3.Connection, first: int, limit: int, callback: _ReadCallback
    ) -> None:
        try:
            items = [_queued(row) for row in conn.execute(_READ, (first, limit)).fetchall()]
        except sqlite3.Error as exc:
            log.error("%s: reading the queue failed: %s", self.name, exc)
            self._answer(self._read_failed, exc, callback)
            return
        self._answer(self._read_done, callback, items, items[-1].seq if items else 0)

    def _read_done(self, callback: _ReadCallback, items: list[Queued], last: int) -> None:
        callback([item for item in items if self.index.contains(item.seq)], last)

    def _read_failed(self, error: BaseException, callback: _ReadCallback) -> None:
        self.error = error
        if self.on_error is not None:
            self.on_error(error)
        callback([], 0)

    def _run_checkpoint(self, conn: sqlite3.Connection, mode: str) -> None:
        error: BaseException | None = None
        wal_bytes = 0
        try:
            busy, frames, copied = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            wal_bytes = max(frames, 0) * self._page_size
        except sqlite3.Error as exc:
            error = exc
        self._answer(self._checkpointed, mode, wal_bytes, error)


def _ranges(seqs: list[int]) -> list[tuple[int, int]]:
    """Sequence numbers as inclusive runs: acknowledgements come mostly in order, so a
    few ``BETWEEN`` deletes do the work of many."""
    seqs.sort()
    out: list[tuple[int, int]] = []
    first = last = seqs[0]
    for seq in seqs[1:]:
        if seq != last + 1:
            out.append((first, last))
            first = seq
        last = seq
    out.append((first, last))
    return out


def _open(path: Path) -> tuple[sqlite3.Connection, int, int]:
    """The loop's connection, the last sequence number, the lock's file descriptor."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc}") from exc
    try:
        # One process at a time: the kernel lets go of the lock when the process ends,
        # however it ends.
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(lock)
        raise BridgeError(
            f"{path}: the bridge queue is in use by another process ({exc.strerror})"
        ) from exc
    try:
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, cached_statements=_STATEMENTS
        )
    except (OSError, sqlite3.Error) as exc:
        os.close(lock)
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc}") from exc
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints (the only syncs) are the thread's, on its own connection.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
        conn.executescript(_DDL)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif row[0] != str(SCHEMA_VERSION):
            raise BridgeError(
                f"{path}: bridge queue schema version {row[0]} is not {SCHEMA_VERSION};"
                " move the file away to start with an empty queue"
            )
        last = conn.execute("SELECT max(seq) FROM queue").fetchone()[0] or 0
    except sqlite3.Error as exc:
        conn.close()
        os.close(lock)
        raise BridgeError(
            f"{path}: cannot read the bridge queue ({exc}); move it away to start with an"
            " empty queue"
        ) from exc
    except BridgeError:
        conn.close()
        os.close(lock)
        raise
    return conn, last, lock
