"""The per-bridge store-and-forward queue: SQLite in the bridge's data directory.

Every QoS 1/2 message a bridge forwards is a row here before its local publisher is
acknowledged, and leaves only once the remote broker acknowledged it:

- ``append`` (on the loop, from the bridge's durable tap) gives the message the next
  sequence number, its place in the order. ``DiskQueue`` is a durable participant of
  the broker's acknowledgements (``broker_core.acks``): ``pending`` counts the rows
  appended and not yet committed, ``barrier(callback)`` calls back once they are, and
  ``batch`` numbers the commits (the barriers of one publisher's messages in one
  commit are one). Deleting a row does not count as pending: nobody waits for a
  delete.
- ``remove(seq)`` deletes a row (the remote acknowledged it, or it was dropped).
- ``release(seq)`` marks a QoS 2 row *released* (the remote sent PUBREC): from then on
  the remote owns the message and the bridge sends it PUBREL, never the PUBLISH again
  in that session. The mark rides the next commit like a delete (``UPDATE ...
  BETWEEN`` ranges, only QoS 2 pays for it); the forwarder sends the PUBREL once that
  commit is made (``on_commit``), so that a restart finds every PUBREL that went out
  on disk. ``unrelease(seq)`` undoes it (a new session: the PUBLISH goes again).
- ``read(first, limit, callback)`` loads rows from disk, in order, for a backlog that
  does not fit in memory.

**Commits run on the event loop** (group commit), at most ``COMMIT_DELAY_S`` (1 ms)
after the first row asked for one: the rows appended and the rows removed meanwhile,
over as many loop turns, go in one transaction, then its barriers are called back, so
the local PUBACKs go out after the commit that made their messages durable. Waiting
the millisecond rather than committing every loop turn makes one commit carry several
turns' rows: 12-14 µs of CPU per forwarded message instead of 19-23 on the quiet
machine (docs/bridges.md, "Performance"), for at most 1 ms more before a PUBACK. A
commit writes the WAL and does not sync it (WAL mode, ``synchronous=NORMAL``), a few
tens of µs; handing the statements to a thread cost more than running them (the
hand-over, the wake-ups, the interpreter lock).

**Durability.** A committed row is in the WAL file, in the operating system's page
cache: it survives ``kill -9`` of the gateway, or any crash of the process (the
project's contract), and SQLite replays the WAL at the next open. A power loss or a
kernel crash may take what was committed since the last checkpoint: only a checkpoint
syncs (the WAL, then the database). Checkpoints are off on the commits
(``wal_autocheckpoint=0``); the queue's thread runs one each time about
``CHECKPOINT_BYTES`` went into the WAL, so no sync ever runs on the loop (but the
last, when the queue closes).

**The thread** does what may take long: reading the index of an earlier run at open,
backlog reads, checkpoints. The connection is the process's only one, in exclusive
locking mode (no file locks, no shared-memory WAL index per transaction; another
gateway opening the same queue is refused), so the loop *lends* it to the thread with
the jobs asked so far and commits nothing until the thread gives it back; appends,
removes and barriers asked meanwhile wait for the next commit (the publishers'
PUBACKs wait a few ms during a checkpoint, nothing blocks the loop).

The loop keeps an index of the queue (``QueueIndex``, in ``bridge.queue_index``: the
size and arrival time of every row, a few bytes each), so the queue's depth, bytes,
oldest age and the overflow decisions never wait for the disk.

This module decides when the disk is written and read; the file itself, its schema (and
the migration of an older one) and the SQL run on it are ``bridge.queue_file``.

``DiskQueue.open`` is quick and synchronous (the file, its schema, the last sequence
number), so a bridge taps the broker before its first ``await`` and nothing published
while it starts escapes it; the index of what an earlier run left is read by the
thread meanwhile (``await queue.loaded()``), and ``append`` works from the start.

A write that fails calls its barriers back with False (the publishers are disconnected
without a PUBACK and send again) and leaves ``error`` set: the bridge then fails and is
restarted, and its state is read back from the disk. A read, write or index load that
finds the file damaged (SQLite: malformed, not a database) leaves ``QueueDamaged``: the
restarted bridge salvages the file first (``bridge.queue_salvage``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue as thread_queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.mapping import Queued
from bridge.queue_file import (
    COLUMNS,
    QueueDamaged,
    checkpoint,
    index_rows,
    is_damage,
    mark_closed,
    mark_closing,
    marker_path,
    open_file,
    read_rows,
    unreadable,
    write_rows,
)
from bridge.queue_index import QueueIndex
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import EMPTY

__all__ = ["DiskQueue", "Queued"]

log = logging.getLogger(__name__)

_NO_PROPERTIES = bytearray()  # bound, never changed
_ReadCallback = Callable[[list[Queued], int], None]  # (items, last seq read)
_Barrier = Callable[[bool], None]  # called back with True once committed, False if not
_Job = tuple[Any, ...]  # ("load",) | ("read", first, limit, callback) | ("checkpoint",)

#: The loop's commits never checkpoint (``wal_autocheckpoint=0``): the thread does, with
#: the connection lent to it, each time about this many bytes went into the WAL.
CHECKPOINT_BYTES = 8 * 1024 * 1024
#: Seconds appended and deleted rows (and the PUBACKs waiting for them) wait at most for
#: their commit, so one commit carries what several loop turns asked; a read is served
#: in the loop turn that asked.
COMMIT_DELAY_S = 0.001
#: What a commit adds to the WAL besides its rows' bytes: a few pages (the last leaf of
#: the table, the pages its deletes touched), about.
_COMMIT_BYTES = 2 * 4096


class DiskQueue:
    """See the module docstring. Build it with ``DiskQueue.open(path, name)``."""

    def __init__(
        self, conn: sqlite3.Connection, last: int, name: str, path: Path | None = None
    ) -> None:
        self.name = name
        self.path = path
        self.index = QueueIndex()  # what is appended until the earlier rows are read
        self.index.base = last + 1
        self.error: BaseException | None = None
        self.on_commit: Callable[[int], None] | None = None  # called with the seq committed
        self.on_error: Callable[[BaseException], None] | None = None  # a write failed
        self.committed = last  # every seq <= this is on disk
        self.checkpoints = 0
        #: How long the connection was lent to the thread (commits waited), seconds.
        self.lent_s = 0.0
        self._last_at_open = last
        self._conn = conn
        self._loop = asyncio.get_running_loop()
        self._loaded: asyncio.Future[None] = self._loop.create_future()
        self._seq = last
        self._inserts: list[Any] = []  # the columns of the rows to insert, one after another
        self._deletes: list[int] = []
        self._marks: dict[int, int] = {}  # seq -> released (1) or not (0), the last asked
        self._barriers: list[_Barrier] = []
        self._flush_timer: asyncio.TimerHandle | None = None
        #: Rows appended and not yet committed (a plain attribute: the broker reads it
        #: for every message it acknowledges).
        self.pending = 0
        #: The commit the next write goes into (``broker_core.acks``: the barriers asked
        #: while it stays the same are called back together).
        self.batch = 0
        self._written = 0  # bytes into the WAL since the last checkpoint, about
        self._checkpoint_asked = False
        self._jobs: list[_Job] = [("load",)]  # for the thread, at the next lending
        self._lent_at: float | None = None  # the thread has the connection since
        self._to_thread: thread_queue.SimpleQueue[list[_Job] | None] = thread_queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"edgebus-{name}", daemon=True)
        self._thread.start()
        self._closed = False
        self._lend()

    @classmethod
    def open(cls, path: Path, name: str) -> DiskQueue:
        """Opens (creating) the queue at ``path``; ``BridgeError`` when the file is not a
        queue this edgebus can use. Call on the loop; then ``await loaded()``."""
        conn, last = open_file(path)
        return cls(conn, last, name, path)

    async def loaded(self) -> None:
        """Until the index holds the rows of earlier runs too."""
        await asyncio.shield(self._loaded)
        error = self.error
        if isinstance(error, BridgeError):
            raise error
        if isinstance(error, sqlite3.Error):
            raise unreadable(self.path or Path(self.name), error, f", and {self._marker()},")
        if error is not None:
            raise BridgeError(
                f"{self.path or self.name}: cannot read the bridge queue ({error}); move it"
                f" away, and {self._marker()}, to start with an empty queue"
            )

    def _marker(self) -> str:
        return "its marker" if self.path is None else str(marker_path(self.path))

    # -- what the bridge asks, on the loop ----------------------------------------------

    @property
    def pending_deletes(self) -> int:
        """Rows removed whose delete is not committed yet (after a crash they are back)."""
        return len(self._deletes)

    @property
    def pending_releases(self) -> int:
        """Rows marked (or unmarked) released, not committed yet."""
        return len(self._marks)

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
        # Exactly int, float, str and bytearray are bound as they are; anything else
        # (bytes, bool) goes through sqlite3's adapter lookups first, about 1 µs a value
        # here: the payload is copied into a bytearray, which costs less. The columns
        # are ``queue_file.COLUMNS``, in its order.
        self._inserts += (
            seq,
            item.topic,
            bytearray(item.payload),
            item.qos,
            1 if item.retain else 0,
            _NO_PROPERTIES if props is EMPTY else bytearray(props.encoded()),
            item.received_at,
        )
        self._schedule(COMMIT_DELAY_S)
        return item

    def remove(self, seq: int) -> int:
        """Deletes the row ``seq``; returns its size, -1 when it was not queued."""
        size = self.index.remove(seq)
        if size >= 0 and not self._closed:
            self._deletes.append(seq)
            self._schedule(COMMIT_DELAY_S)
        return size

    def remove_many(self, seqs: list[int]) -> int:
        """``remove`` of each of ``seqs``; returns how many were queued."""
        gone = self.index.remove_many(seqs)
        if gone and not self._closed:
            self._deletes += gone
            self._schedule(COMMIT_DELAY_S)
        return len(gone)

    def release(self, seq: int) -> bool:
        """Marks the QoS 2 row ``seq`` released (the remote sent PUBREC), at the next
        commit (``on_commit`` then); False when it is not queued."""
        return self._mark(seq, 1)

    def unrelease(self, seq: int) -> bool:
        """Undoes ``release(seq)`` at the next commit; False when it is not queued."""
        return self._mark(seq, 0)

    def _mark(self, seq: int, released: int) -> bool:
        if self._closed or not self.index.contains(seq):
            return False
        self._marks[seq] = released
        self._schedule(COMMIT_DELAY_S)
        return True

    def commit_now(self) -> None:
        """Commits what was asked now rather than within ``COMMIT_DELAY_S`` (when the
        thread gives the connection back, if it has it): the caller waits on it."""
        self._flush()

    def read(self, first: int, limit: int, callback: _ReadCallback) -> None:
        """Loads up to ``limit`` rows with ``seq >= first``, in order, after every write
        asked before; ``callback(items, last_seq_read)`` on the loop (rows removed
        meanwhile are left out; ``last_seq_read`` is 0 when none was found)."""
        self._jobs.append(("read", first, limit, callback))
        self._schedule()

    def barrier(self, callback: Callable[[bool], None]) -> None:
        if not self.pending:
            callback(self.error is None)
            return
        self._barriers.append(callback)
        self._schedule(COMMIT_DELAY_S)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stops the thread, commits what was asked and closes the file (which
        checkpoints the WAL into it: the one sync on the loop, when the bridge stops)."""
        if self._closed:
            return
        self._closed = True
        self._to_thread.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("%s: the queue's thread did not finish within %.0f s", self.name, timeout_s)
            return  # it still has the connection: what was not committed is asked again
        self._lent_at = None
        self._commit()
        if self.path is not None:
            try:
                mark_closing(self.path)
            except BridgeError as exc:
                log.warning("%s", exc)
        checkpointed = closed = False
        try:
            # Into the database file, synced, and the WAL emptied; closing removes it.
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            checkpointed = True
        except sqlite3.Error as exc:
            # A full disk: the WAL keeps every row (a checkpoint copies it into the file,
            # it never moves it), and the next open reads it.
            log.warning("%s: checkpointing the queue as it closes failed: %s", self.name, exc)
        try:
            # Closed whatever the checkpoint did: the connection holds the file's
            # exclusive lock, which would refuse every later open in this process
            # ("database is locked"), the next run's too, until the gateway restarts.
            self._conn.close()
            closed = True
        except sqlite3.Error as exc:
            log.warning("%s: closing the queue failed: %s", self.name, exc)
        if checkpointed and closed and self.path is not None:
            try:
                mark_closed(self.path)
            except BridgeError as exc:
                log.warning("%s", exc)
        log.debug(
            "%s: %d checkpoints, commits waited %.3f s for the thread in all",
            self.name,
            self.checkpoints,
            self.lent_s,
        )

    # -- commits, on the loop ------------------------------------------------------------

    def _schedule(self, delay_s: float = 0.0) -> None:
        """A commit ``delay_s`` from now at the latest (0: this loop turn)."""
        timer = self._flush_timer
        if timer is not None:
            if delay_s or timer.when() <= self._loop.time():
                return
            timer.cancel()  # sooner than the one scheduled
        self._flush_timer = (
            self._loop.call_later(delay_s, self._flush)
            if delay_s
            else self._loop.call_at(self._loop.time(), self._flush)
        )

    def _flush(self) -> None:
        """Commits what was asked since the last commit (group commit), then lends the
        connection to the thread if it has work."""
        timer, self._flush_timer = self._flush_timer, None
        if timer is not None:
            timer.cancel()  # called before its time (the thread gave the connection back)
        if self._lent_at is not None or self._closed:
            return  # ``_returned`` comes back here
        self._commit()
        if self._jobs:
            self._lend()

    def _commit(self) -> None:
        """One transaction: the rows appended, the rows released, the rows removed; then
        the barriers."""
        inserts, deletes, barriers = self._inserts, self._deletes, self._barriers
        marks = self._marks
        if not (inserts or deletes or barriers or marks):
            return
        self._inserts, self._deletes, self._barriers = [], [], []
        if marks:
            self._marks = {}
        self.batch += 1
        error: BaseException | None = None
        conn = self._conn
        try:
            write_rows(conn, inserts, deletes, marks)
        except sqlite3.Error as exc:
            error = self._as_damaged(exc)
            log.error("%s: writing the queue failed: %s", self.name, exc)
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        rows = len(inserts) // COLUMNS
        self.pending -= rows
        if error is not None:
            self.error = error
            if self.on_error is not None:
                self.on_error(error)
        else:
            self.committed = self._seq - self.pending
            self._written += (
                _COMMIT_BYTES
                + 16 * (len(deletes) + len(marks))
                + 24 * rows
                + sum(map(len, inserts[2::COLUMNS]))
            )
            if self._written >= CHECKPOINT_BYTES and not self._checkpoint_asked:
                self._checkpoint_asked = True
                self._jobs.append(("checkpoint",))
        ok = error is None
        for barrier in barriers:
            barrier(ok)
        if ok and self.on_commit is not None:
            self.on_commit(self.committed)

    # -- the thread: reads and checkpoints, with the connection lent to it ---------------

    def _lend(self) -> None:
        """Hands the connection and the jobs asked so far to the thread; commits wait
        until ``_returned``."""
        jobs, self._jobs = self._jobs, []
        self._lent_at = time.monotonic()
        self._to_thread.put(jobs)

    def _returned(self, answers: list[Callable[[], None]]) -> None:
        """The thread is done with the connection: its answers, then what waited."""
        if self._lent_at is not None:
            self.lent_s += time.monotonic() - self._lent_at
            self._lent_at = None
        for answer in answers:
            answer()
        if not self._closed:
            self._flush()

    def _run(self) -> None:
        conn = self._conn
        while True:
            jobs = self._to_thread.get()
            if jobs is None:
                return
            answers: list[Callable[[], None]] = []
            for job in jobs:
                kind = job[0]
                try:
                    if kind == "read":
                        answers.append(self._read(conn, *job[1:]))
                    elif kind == "checkpoint":
                        answers.append(self._checkpoint(conn))
                    else:
                        answers.append(self._load(conn))
                except Exception as exc:  # the connection goes back to the loop, whatever
                    log.exception("%s: the queue's thread failed", self.name)
                    answers.append(functools.partial(self._failed, exc, job))
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                self._loop.call_soon_threadsafe(self._returned, answers)

    def _failed(self, error: BaseException, job: _Job) -> None:
        if job[0] == "read":
            self._read_failed(error, job[3])
        elif job[0] == "load":
            self._index_loaded(QueueIndex(), error)
        else:
            self._checkpointed(error)

    def _load(self, conn: sqlite3.Connection) -> Callable[[], None]:
        index = QueueIndex()
        error: BaseException | None = None
        last = 0
        try:
            for seq, size, received_at in index_rows(conn, self._last_at_open):
                if seq is None or seq <= last or size is None or received_at is None:
                    error = self._damaged(f"a row numbered {seq} after {last} is not readable")
                    break
                index.add(seq, size, received_at)
                last = seq
        except sqlite3.Error as exc:
            error = self._as_damaged(exc)
        return functools.partial(self._index_loaded, index, error)

    def _damaged(self, what: object) -> QueueDamaged:
        """The error of a queue file whose rows cannot all be read (a page overwritten, a
        torn last page): the bridge's next run salvages its readable rows."""
        return QueueDamaged(
            f"{self.path or self.name}: the bridge queue is damaged ({what}: its file was cut"
            " short or overwritten); the bridge's next start salvages its readable rows"
        )

    def _as_damaged(self, exc: sqlite3.Error) -> BaseException:
        """``exc`` of a read or a write, as ``QueueDamaged`` when it says the file is."""
        return self._damaged(exc) if is_damage(exc) else exc

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
    ) -> Callable[[], None]:
        try:
            items = read_rows(conn, first, limit)
        except sqlite3.Error as exc:
            log.error("%s: reading the queue failed: %s", self.name, exc)
            return functools.partial(self._read_failed, self._as_damaged(exc), callback)
        return functools.partial(self._read_done, callback, items, items[-1].seq if items else 0)

    def _read_done(self, callback: _ReadCallback, items: list[Queued], last: int) -> None:
        callback([item for item in items if self.index.contains(item.seq)], last)

    def _read_failed(self, error: BaseException, callback: _ReadCallback) -> None:
        self.error = error
        if self.on_error is not None:
            self.on_error(error)
        callback([], 0)

    def _checkpoint(self, conn: sqlite3.Connection) -> Callable[[], None]:
        """Checkpoints the WAL (``queue_file.checkpoint``)."""
        error: BaseException | None = None
        try:
            checkpoint(conn)
        except sqlite3.Error as exc:
            error = exc
        return functools.partial(self._checkpointed, error)

    def _checkpointed(self, error: BaseException | None) -> None:
        self._checkpoint_asked = False
        self._written = 0
        self.checkpoints += 1
        if error is not None:
            log.warning("%s: checkpointing the queue failed: %s", self.name, error)
