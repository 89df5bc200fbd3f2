"""Salvaging a damaged bridge queue: its readable rows into a fresh ``queue.db``.

A ``queue.db`` whose pages were damaged (overwritten, cut short) holds rows that were
acknowledged to their publishers: the bridge does not leave them stranded until a human
acts. ``salvage(path)`` (run on a thread, with the queue closed and its ``forwards``
refused meanwhile, ``bridge.bridge``):

1. reads every row it can of the damaged file, as it stands with its write-ahead log,
   through SQLite in read-only mode (``_readable_rows``): a scan in ``seq`` order that,
   when it meets a damaged page, seeks past it (``seq >= after + 1, + 2, + 4, ...``,
   each seek reading a whole row, so a row whose own pages are damaged is skipped too)
   and reads the rows it jumped over one by one, keeping each that reads; a row whose
   values are not a queue row's (a damaged cell that still parses) is left out;
2. when the scan met damage, adds the rows of the intact leaf pages that the b-tree
   cannot reach (below a damaged interior page, the table's root included), read page
   by page (``bridge.queue_pages``) from the file mapped, or with a log from its image
   (``Connection.serialize``; not over ``IMAGE_MAX_BYTES``, read into memory);
3. writes them, with their sequence numbers (their order) and QoS 2 ``released`` marks,
   into ``queue.db.salvage`` as they are read (``_Sink``: no row is held longer than
   its statement, so a queue larger than memory is salvaged), synced;
4. moves the damaged file aside, never deleting it: ``queue.db.damaged-<UTC time>``
   (and its log, ``...-wal``, beside it, so the pair still opens together), then the
   salvaged file to ``queue.db``, the marker saying the queue was closed.

What cannot be salvaged at all (SQLite cannot open the file; no row can be read
through the table nor from its pages) raises ``BridgeError`` and leaves every file as
it was: the bridge goes on refusing.

Why not the ``sqlite3`` shell's ``.recover``: Debian 12's shell (3.40.1) answers "SQL
logic error" on every file, a sound one included (it needs the ``sqlite_dbpage``
table, which its library is built without; measured: nothing recovered from 4 damaged
queues), and a bridge cannot count on a shell being installed. Measured on queues of
2701 rows with 3 random pages of 116-1313 overwritten: the scan alone kept 2647-2696
rows, and none when the table's root page was one of them; with the page pass, 2647-2699
in every case. The rows of the damaged pages are lost. A damaged payload that still
parses as one (an overflow page overwritten, its chain intact) cannot be told from a
good one: SQLite keeps no checksum of the rows (2 of 2699 in one of those files).
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.queue_file import (
    SCHEMA_VERSION,
    create_schema,
    is_damage,
    mark_closed,
    marker_path,
    queued_row,
)
from bridge.queue_pages import leaf_rows
from broker_core.errors import BridgeError, ProtocolError
from broker_core.store.marker import wal_path

__all__ = ["Salvaged", "salvage"]

#: The columns read of each row, ``released`` last (0 for a queue of schema 1).
_COLUMNS = "seq, topic, payload, qos, retain, properties, received_at"
#: Rows per INSERT into the salvaged file.
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Salvaged:
    """What ``salvage`` did: ``rows`` kept (``first`` to ``last`` by sequence number),
    ``skipped``: the damaged places it skipped (the rows there are lost: a damaged page,
    a row that read as garbage), and where the damaged file is kept."""

    rows: int
    first: int
    last: int
    skipped: int
    kept: Path


def salvage(path: Path) -> Salvaged:
    """Salvages the damaged queue at ``path`` (see the module docstring); ``BridgeError``
    when nothing of it can be read (the files left as they were) or a file cannot be
    written or moved."""
    fresh = path.with_name(path.name + ".salvage")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    kept = path.with_name(f"{path.name}.damaged-{stamp}")
    number = 1
    while kept.exists() or wal_path(kept).exists():
        number += 1
        kept = path.with_name(f"{path.name}.damaged-{stamp}-{number}")
    try:
        try:
            sink, skipped = _copy(path, fresh)
        except BaseException:
            _remove(fresh)
            raise
        # Closed: the salvaged file has no log, and one missing is no loss. Written before
        # the moves: a crash between them finds the damaged file again (and salvages it
        # again), or no ``queue.db`` at all (refused, naming it), never an empty queue.
        mark_closed(path)
        wal = wal_path(path)
        os.rename(path, kept)
        if wal.exists():
            os.rename(wal, wal_path(kept))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path.with_name(path.name + "-shm"))  # SQLite's, rebuilt from the log
        os.rename(fresh, path)
        _sync_directory(path.parent)
    except OSError as exc:
        raise BridgeError(
            f"{path}: cannot salvage the damaged bridge queue: {exc.strerror or exc}"
            f" ({exc.filename}); move it away, and {marker_path(path)}, to start with an"
            " empty queue"
        ) from exc
    return Salvaged(sink.count, sink.first, sink.last, skipped, kept)


def _remove(fresh: Path) -> None:
    for leftover in (fresh, fresh.with_name(fresh.name + "-journal"), wal_path(fresh)):
        with contextlib.suppress(OSError):
            leftover.unlink(missing_ok=True)


def _copy(path: Path, fresh: Path) -> tuple[_Sink, int]:
    """The readable rows of ``path`` written into a new queue file at ``fresh`` as they
    are read (``_Sink``), synced; the sink and the damaged places skipped. ``OSError``
    when ``fresh`` cannot be written (a full disk)."""
    _remove(fresh)
    try:
        conn = sqlite3.connect(fresh, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN")
            create_schema(conn)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            sink = _Sink(conn)
            skipped = _rows_of(path, sink)
            sink.flush()
            conn.execute("COMMIT")
        finally:
            conn.close()
    except (sqlite3.Error, _WriteFailed) as exc:
        cause = exc.__cause__ if isinstance(exc, _WriteFailed) else exc
        raise OSError(0, f"writing the salvaged queue failed: {cause}", str(fresh)) from exc
    with open(fresh, "rb") as file:
        os.fsync(file.fileno())
    return sink, skipped


class _ReadFailed(BridgeError):
    """Reading the damaged file failed for another reason than its damage (an I/O error):
    the salvage stops, the files as they were."""


class _WriteFailed(Exception):
    """Writing the salvaged file failed (its ``__cause__``): not the damaged file's error,
    which the scan handles."""


class _Sink:
    """Rows written into the salvaged file as the scan reads them, ``_CHUNK`` an INSERT,
    so that a queue larger than memory is salvaged; the sequence numbers written are kept
    as runs (the scan reads them in order) to leave out a row read twice."""

    _INSERT = (
        "INSERT INTO queue (seq, topic, payload, qos, retain, properties, received_at,"
        " released) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.count = 0
        self.first = 0
        self.last = 0
        self._pending: list[tuple[Any, ...]] = []
        self._starts: list[int] = []  # runs of consecutive seqs written, in order
        self._ends: list[int] = []
        self._others: set[int] = set()  # seqs written out of order (the page pass's)

    def __contains__(self, seq: int) -> bool:
        if seq in self._others:
            return True
        at = bisect.bisect_right(self._starts, seq) - 1
        return at >= 0 and seq <= self._ends[at]

    def append(self, row: tuple[Any, ...]) -> None:
        seq = row[0]
        if seq in self:
            return
        if self._ends and seq == self._ends[-1] + 1:
            self._ends[-1] = seq
        elif not self._ends or seq > self._ends[-1]:
            self._starts.append(seq)
            self._ends.append(seq)
        else:
            self._others.add(seq)
        self.first = seq if not self.count else min(self.first, seq)
        self.last = max(self.last, seq)
        self.count += 1
        self._pending.append((seq, row[1].decode(), *row[2:]))
        if len(self._pending) >= _CHUNK:
            self.flush()

    def flush(self) -> None:
        try:
            self.conn.executemany(self._INSERT, self._pending)
        except sqlite3.Error as exc:
            raise _WriteFailed from exc
        self._pending = []


def _rows_of(path: Path, sink: _Sink) -> int:
    """Every readable row of the queue at ``path`` into ``sink``; the damaged places
    skipped: the rows SQLite's b-tree reaches (``_readable_rows``) and, when it met
    damage, those of intact leaf pages it cannot reach (``bridge.queue_pages``)."""
    if wal_path(path).exists():
        uri = f"{path.resolve().as_uri()}?mode=ro"
    else:
        uri = f"{path.resolve().as_uri()}?immutable=1"  # creates nothing beside it
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise (_nothing(path, exc) if is_damage(exc) else _read_failed(path, exc)) from exc
    conn.text_factory = bytes  # a damaged topic is bytes that are not UTF-8: checked here
    try:
        failure: BridgeError | None = None
        try:
            skipped = _tree_rows(path, conn, sink)
        except _ReadFailed:
            raise  # not the damage: nothing is salvaged, the files stay
        except BridgeError as exc:  # nothing of the table reads: maybe its pages do
            skipped, failure = 1, exc
        if skipped:
            for row in _unreached_rows(path, conn, sink):
                sink.append(row)
        if failure is not None and not sink.count:
            raise failure
        return skipped
    finally:
        conn.close()


def _tree_rows(path: Path, conn: sqlite3.Connection, sink: _Sink) -> int:
    try:
        names = [row[1] for row in conn.execute("PRAGMA table_info(queue)")]
    except sqlite3.DatabaseError as exc:
        # Locked (another connection holds the file), an I/O error: not the damage, and
        # no reason to give the file up.
        raise (_nothing(path, exc) if is_damage(exc) else _read_failed(path, exc)) from exc
    if not names:
        raise _nothing(path, "it has no readable queue table")
    released = b"released" in names or "released" in names
    select = f"SELECT {_COLUMNS}, {'released' if released else '0'} FROM queue"
    return _readable_rows(path, conn, select, sink)


#: The largest database with a log whose pages are read for rows the b-tree does not
#: reach: its image (the file with the log applied) is read into memory. A file without
#: a log is mapped, whatever its size.
IMAGE_MAX_BYTES = 256 * 1024 * 1024


def _unreached_rows(path: Path, conn: sqlite3.Connection, seqs: _Sink) -> list[tuple[Any, ...]]:
    """The valid rows of leaf pages (``queue_pages.leaf_rows``) whose ``seq`` is not in
    ``seqs``; none when the image cannot be read (a file with a log over
    ``IMAGE_MAX_BYTES``) or its freelist cannot."""
    if not wal_path(path).exists():  # the file is the image: mapped, not read into memory
        try:
            with (
                open(path, "rb") as file,
                mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as image,
            ):
                found = leaf_rows(image, lambda seq: seq not in seqs)
        except (OSError, ValueError):
            return []
    else:
        size = path.stat().st_size + wal_path(path).stat().st_size
        if size > IMAGE_MAX_BYTES:
            return []
        try:
            found = leaf_rows(conn.serialize(), lambda seq: seq not in seqs)
        except (sqlite3.Error, MemoryError):
            return []
    return [row for row in found or [] if _valid(row)]


def _readable_rows(path: Path, conn: sqlite3.Connection, select: str, rows: _Sink) -> int:
    """The scan of the module docstring: the rows of ``select`` (a ``queue`` row and its
    ``released``) that read whole and are valid, in order, into ``rows``; returns the
    damaged places it skipped: each place the scan failed, each row that read but was
    not valid."""
    failed = 0
    after: int | None = None  # every row with seq <= after was read (None: none yet)
    while True:
        low = _FIRST if after is None else after
        try:
            for row in conn.execute(f"{select} WHERE seq > ? ORDER BY seq", (low,)):
                after = row[0]
                if _valid(row):
                    rows.append(row)
                else:
                    failed += 1
            return failed
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise _read_failed(path, exc) from exc
            failed += 1
            damage = exc
        found = _seek(path, conn, select, after)
        if found is None and after is None:
            raise _nothing(path, damage)
        # The rows jumped over, one by one: an intact page between damaged ones.
        start = _FIRST if after is None else after
        stop = found[0] if found is not None else start + _ROW_BY_ROW
        for seq in range(max(start + 1, stop - _ROW_BY_ROW), stop):
            try:
                row = conn.execute(f"{select} WHERE seq = ?", (seq,)).fetchone()
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise _read_failed(path, exc) from exc
                continue  # a row (or none) on a damaged page
            if row is None:
                continue
            if _valid(row):
                rows.append(row)
            else:
                failed += 1
        if found is None:
            return failed
        # The row found, then the scan goes on after it (the scan that failed may not
        # have yielded a row that reads: sqlite3 steps to the next row before it yields).
        if _valid(found):
            rows.append(found)
        else:
            failed += 1
        after = found[0]


#: Below every sequence number.
_FIRST = -(2**63)
#: Rows read one by one at most before the row a seek found past a damaged page.
_ROW_BY_ROW = 65536


def _seek(
    path: Path, conn: sqlite3.Connection, select: str, after: int | None
) -> tuple[Any, ...] | None:
    """The first row past a damaged page that reads whole: seeks ``seq >= after + 1, +
    2, + 4, ...`` (from 0 when nothing was read yet); None when one reads past the last
    row, or none can be made."""
    base = 0 if after is None else after
    step = 1
    while base + step < 2**63:
        try:
            row: tuple[Any, ...] | None = conn.execute(
                f"{select} WHERE seq >= ? ORDER BY seq LIMIT 1", (base + step,)
            ).fetchone()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise _read_failed(path, exc) from exc
            step *= 2
            continue
        return row
    return None


def _valid(row: tuple[Any, ...]) -> bool:
    """A row with a queue row's values (``queue_file.queued_row`` reads it back)."""
    seq, topic, payload, qos, retain, properties, received_at, released = row
    if not (isinstance(seq, int) and isinstance(topic, bytes) and isinstance(payload, bytes)):
        return False
    if qos not in (0, 1, 2) or retain not in (0, 1) or released not in (0, 1):
        return False
    if not isinstance(properties, bytes) or not isinstance(received_at, int | float):
        return False
    try:
        text = topic.decode()
        queued_row((seq, text, payload, qos, retain, properties, received_at, released))
    except (UnicodeDecodeError, ValueError, ProtocolError):
        return False  # garbage that parsed as a row: what a damaged cell looks like
    return True


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_failed(path: Path, exc: sqlite3.Error) -> _ReadFailed:
    return _ReadFailed(
        f"{path}: cannot read the damaged bridge queue to salvage it ({exc}); its files"
        " are left as they were, and the bridge tries again when it restarts"
    )


def _nothing(path: Path, why: object) -> BridgeError:
    return BridgeError(
        f"{path}: cannot read the bridge queue ({why}), and nothing of it can be salvaged;"
        f" edgebus will not start the bridge on it: move it away, and {marker_path(path)},"
        " to start with an empty queue"
    )
