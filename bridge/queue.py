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

The loop keeps an index of the queue (``QueueIndex``: the size and arrival time of
every row, a few bytes each), so the queue's depth, bytes, oldest age and the
overflow decisions never wait for the disk.

``DiskQueue.open`` is quick and synchronous (the file, its schema, the last sequence
number), so a bridge taps the broker before its first ``await`` and nothing published
while it starts escapes it; the index of what an earlier run left is read by the
thread meanwhile (``await queue.loaded()``), and ``append`` works from the start.

A write that fails calls its barriers back with False (the publishers are disconnected
without a PUBACK and send again) and leaves ``error`` set: the bridge then fails and is
restarted, and its state is read back from the disk.
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
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.mapping import Queued
from broker_core.errors import BridgeError
from broker_core.mqtt.properties import EMPTY, PacketKind, decode_properties

__all__ = ["DiskQueue", "QueueIndex", "Queued"]

log = logging.getLogger(__name__)

#: 2 added ``queue.released``; a file of version 1 is brought to 2 when it opens (its
#: rows were never marked: the same as before).
SCHEMA_VERSION = 2

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
    seq INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    qos INTEGER NOT NULL,
    retain INTEGER NOT NULL,
    properties BLOB NOT NULL,
    received_at REAL NOT NULL,
    released INTEGER NOT NULL DEFAULT 0
);
"""
#: Columns an append binds (``released`` starts at its default, 0).
_COLUMNS = 7
#: Rows per INSERT statement, at most. A batch of rows is written with one statement of
#: exactly its size (and one of this size per 256 more): each statement is a step that
#: lets go of the interpreter lock and takes it back, a handover with the busy event
#: loop's thread that costs more than the SQL. Every size is prepared once and kept
#: (``_STATEMENTS``).
_MAX_ROWS = 256
_STATEMENTS = _MAX_ROWS + 32  # the connection's statement cache
_DELETE = "DELETE FROM queue WHERE seq BETWEEN ? AND ?"
_MARK = "UPDATE queue SET released = ? WHERE seq BETWEEN ? AND ?"
_NO_PROPERTIES = bytearray()  # bound, never changed
_READ = (
    "SELECT seq, topic, payload, qos, retain, properties, received_at, released FROM queue"
    " WHERE seq >= ? ORDER BY seq LIMIT ?"
)


def _queued(row: tuple[Any, ...]) -> Queued:
    seq, topic, payload, qos, retain, props, received_at, released = row
    properties = EMPTY
    if props:
        properties, _ = decode_properties(props, 0, len(props), PacketKind.PUBLISH)
    item = Queued.of(topic, bytes(payload), qos, bool(retain), properties, received_at, seq)
    item.released = bool(released)
    return item


@functools.cache
def _insert_sql(rows: int) -> str:
    return (
        "INSERT INTO queue (seq, topic, payload, qos, retain, properties, received_at) VALUES "
        + ",".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows)
    )


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

    def remove_many(self, seqs: list[int]) -> list[int]:
        """``remove`` of each of ``seqs`` (a run of acknowledgements); returns those
        that were there."""
        base, head, sizes = self.base, self.head, self.sizes
        end = len(sizes)
        gone: list[int] = []
        freed = 0
        for seq in seqs:
            position = seq - base
            if head <= position < end:
                size = sizes[position]
                if size >= 0:
                    sizes[position] = -1
                    freed += size
                    gone.append(seq)
        self.count -= len(gone)
        self.bytes -= freed
        if head < end and sizes[head] < 0:
            self._advance()
        return gone

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

    def __init__(self, conn: sqlite3.Connection, last: int, name: str) -> None:
        self.name = name
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
        conn, last = _open(path)
        return cls(conn, last, name)

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
        # here: the payload is copied into a bytearray, which costs less.
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
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
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
            ranges = _ranges(deletes) if deletes else []
            marked = _marked_ranges(marks) if marks else []
            statements = -(-len(inserts) // (_MAX_ROWS * _COLUMNS)) + len(ranges) + len(marked)
            if statements > 1:  # one statement is a transaction of its own
                conn.execute("BEGIN")
            if inserts:
                _insert_rows(conn, inserts)
            if marked:
                conn.executemany(_MARK, marked)
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
                _COMMIT_BYTES
                + 16 * (len(deletes) + len(marks))
                + 24 * rows
                + sum(map(len, inserts[2::_COLUMNS]))
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
        return functools.partial(self._index_loaded, index, error)

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
            items = [_queued(row) for row in conn.execute(_READ, (first, limit)).fetchall()]
        except sqlite3.Error as exc:
            log.error("%s: reading the queue failed: %s", self.name, exc)
            return functools.partial(self._read_failed, exc, callback)
        return functools.partial(self._read_done, callback, items, items[-1].seq if items else 0)

    def _read_done(self, callback: _ReadCallback, items: list[Queued], last: int) -> None:
        callback([item for item in items if self.index.contains(item.seq)], last)

    def _read_failed(self, error: BaseException, callback: _ReadCallback) -> None:
        self.error = error
        if self.on_error is not None:
            self.on_error(error)
        callback([], 0)

    def _checkpoint(self, conn: sqlite3.Connection) -> Callable[[], None]:
        """Copies the WAL into the database and syncs both (``synchronous=NORMAL``); the
        next commit starts the WAL over."""
        error: BaseException | None = None
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            error = exc
        return functools.partial(self._checkpointed, error)

    def _checkpointed(self, error: BaseException | None) -> None:
        self._checkpoint_asked = False
        self._written = 0
        self.checkpoints += 1
        if error is not None:
            log.warning("%s: checkpointing the queue failed: %s", self.name, error)


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


def _marked_ranges(marks: dict[int, int]) -> list[tuple[int, int, int]]:
    """``(released, first, last)`` for ``_MARK``: each value's rows as ``_ranges``."""
    by_value: dict[int, list[int]] = {}
    for seq, value in marks.items():
        by_value.setdefault(value, []).append(seq)
    return [
        (value, first, last) for value, seqs in by_value.items() for first, last in _ranges(seqs)
    ]


def _open(path: Path) -> tuple[sqlite3.Connection, int]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, cached_statements=_STATEMENTS
        )
    except (OSError, sqlite3.Error) as exc:
        raise BridgeError(f"{path}: cannot open the bridge queue: {exc}") from exc
    try:
        # One connection, this process's only: an exclusive lock (taken at the first
        # write, kept) instead of file locks and the shared-memory WAL index around
        # every transaction; another gateway opening the same queue is refused.
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # Commits write the WAL and never sync; checkpoints (the syncs) are the thread's.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.executescript(_DDL)
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        elif row[0] == "1":  # before ``released``: one column more, no row marked
            conn.executescript(
                "BEGIN;"
                " ALTER TABLE queue ADD COLUMN released INTEGER NOT NULL DEFAULT 0;"
                f" UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version';"
                " COMMIT;"
            )
        elif row[0] != str(SCHEMA_VERSION):
            raise BridgeError(
                f"{path}: bridge queue schema version {row[0]} is not {SCHEMA_VERSION};"
                " move the file away to start with an empty queue"
            )
        last = conn.execute("SELECT max(seq) FROM queue").fetchone()[0] or 0
    except sqlite3.Error as exc:
        conn.close()
        raise BridgeError(
            f"{path}: cannot read the bridge queue ({exc}); move it away to start with an"
            " empty queue"
        ) from exc
    except BridgeError:
        conn.close()
        raise
    return conn, last
