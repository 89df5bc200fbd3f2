"""``StreamLog``: the stream log on disk, segment files of record batches with offsets.

The directory holds segment files named after the offset of their first record,
``00000000000000000000.log``; each is a sequence of record batches
(``spark_sink.records``). Offsets are global and gap-free: a segment starts where the
one before it ends. One thread writes (``append``, ``sync``, ``close``), any number of
threads read (``bounds``, ``read``); retention (``enforce_retention``) and new
settings (``configure``) may come from another thread. Two ``StreamLog`` objects must
never write one directory: whoever opens it owns it until ``close``.

- **Commit.** ``append`` writes the batches (one ``writev`` per call and segment), fsyncs
  them when the policy says so (``always``: every call, by opening the segment with
  ``O_DSYNC`` so that the write itself returns once the data is on disk; ``interval``:
  at most every ``fsync_interval_s``; ``never``), and only then moves the committed
  end. Readers see up to the committed end only, so no reader ever sees an offset
  before it is written, nor a gap.
- **Recovery.** ``open`` reads every segment's batch headers into an in-memory index
  (first offset and file position of each batch) and checks the CRC of every batch of
  the last two segments (the one being written and the last sealed one: a crash near a
  roll leaves its damage there; checking every sealed segment would read the whole log:
  1 GB opens in 0.39 s from disk, 2.0 s with every CRC checked). A damaged batch in a
  sealed segment is ``StreamLogError`` naming the file and the byte; damage in older
  sealed segments' batches (not their headers) is found by ``read``. A torn tail (a
  short or damaged batch at the end of the last segment, with no whole batch after it:
  left by a crash during a write) is cut off; the log then continues after the last
  whole batch. Damage followed by a whole batch is not a torn tail but damage in the
  middle of acknowledged records: ``StreamLogError`` naming the file and the byte, and
  nothing is cut. A segment whose first offset does not follow the one before it means
  files were lost: ``StreamLogError``.
- **What was given.** The file ``log-end`` records the end the log had given once that
  end is on disk: a fixed-width number the log keeps mapped (``mmap``), so recording it
  is a store into the page cache, no system call. Under ``fsync: always`` every append
  records its end as it returns (before the acknowledgement); under ``interval`` each
  fsync records the end it synced; under ``never``, ``checkpoint`` (an fsync first).
  A ``kill -9`` keeps what was stored (the page cache is the kernel's); ``checkpoint``
  (the sink's housekeeping, every few seconds), a full segment and ``close`` also
  ``msync`` it, so a power loss keeps an end no older than that. The end recorded is
  never past what is on disk, so a log intact after a crash is never refused. A log
  whose segments end below it lost records (its last segment truncated or deleted):
  ``open`` refuses it (``StreamLogError``) rather than give those offsets to other
  records.
- **One writer.** ``open`` takes an exclusive ``flock`` on ``writer.lock`` in the
  directory, held until ``close``: a second ``StreamLog`` (another gateway sharing
  ``stream.path``) is refused with ``StreamLogError``.
- **Reading.** ``read`` checks the CRC of every batch it returns: a damaged batch is
  ``DamagedBatch`` (naming the segment, the byte and the offsets), never served.
- **Retention.** Whole segments go, oldest first, while the newest record of the oldest
  one is older than ``retention_s``, or while the log holds more than ``max_bytes``. The
  segment being written is never deleted; a new one starts past ``segment_bytes``.
- **Identity.** ``open`` gives a new log a random id (file ``log-id``), kept for its
  life: a reader that sees another id knows the log was replaced (another path, a wiped
  directory) and its offsets started again from 0.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import mmap
import os
import threading
import time
import uuid
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from broker_core.context import Context
from broker_core.errors import EdgebusError
from gateway.data_lock import LockHeld, lock_file
from spark_sink.records import (
    HEADER,
    BatchHeader,
    Columns,
    CorruptBatch,
    Encoded,
    check_crc,
    decode_batch,
    decode_header,
    encode_columns,
    frame,
)

__all__ = [
    "Bounds",
    "DamagedBatch",
    "RecordsDeleted",
    "StreamLog",
    "StreamLogError",
    "encode_chunks",
]

log = logging.getLogger(__name__)

SUFFIX = ".log"
ID_FILE = "log-id"  # a random id the log gets when created: readers tell a new log from it
END_FILE = "log-end"  # the end the log had given, once on disk: lost records are noticed
#: ``END_FILE``'s content: an offset of fixed width (stored in place, through ``mmap``).
_END_DIGITS = 20
_END_SIZE = _END_DIGITS + 1  # and a newline
LOCK_FILE = "writer.lock"  # flock-ed by the one StreamLog that writes the directory
#: A batch header's version and flags (``records.HEADER``: bytes 20 to 23), what
#: ``_whole_batch_after`` looks for past damage.
_VERSION_FLAGS = HEADER.pack(0, 0, 0, 0, 1, 0, 0)[20:24]
#: The most records, and about the most payload bytes, in one batch on disk: bounds
#: what a reader holds in memory at a time.
MAX_BATCH_RECORDS = 8192
MAX_BATCH_BYTES = 4 * 1024 * 1024
#: The most buffers one ``os.writev`` takes (Linux: 1024).
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16


class StreamLogError(EdgebusError):
    """The stream log cannot be opened or written (its files are damaged or missing)."""


class RecordsDeleted(StreamLogError):
    """Records a reader asked for were deleted by retention (before or while reading)."""


class DamagedBatch(StreamLogError):
    """A batch a reader asked for is damaged on disk (its CRC does not match)."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the log holds: offsets ``[start, end)``, in ``bytes`` of ``segments`` files."""

    start: int
    end: int
    bytes: int
    segments: int
    id: str = ""


@dataclass
class _Segment:
    base: int
    path: Path
    end: int  # offset after the last committed record
    size: int  # committed bytes
    ts_max: int = 0  # newest record, ns
    firsts: array[int] = field(default_factory=lambda: array("q"))  # per batch
    positions: array[int] = field(default_factory=lambda: array("q"))

    def add(self, header: BatchHeader, position: int) -> None:
        self.firsts.append(header.first)
        self.positions.append(position)
        self.end = header.end
        self.size = position + header.size
        self.ts_max = max(self.ts_max, header.ts_max)


def _name(base: int) -> str:
    return f"{base:020d}{SUFFIX}"


class StreamLog:
    def __init__(
        self,
        directory: Path,
        segment_bytes: int = 64 * 1024**2,
        max_bytes: int = 1024**3,
        retention_s: float = 7 * 24 * 3600.0,
        fsync: str = "always",
        fsync_interval_s: float = 1.0,
    ) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.max_bytes = max_bytes
        self.retention_s = retention_s
        self.fsync = fsync
        self.fsync_interval_s = fsync_interval_s
        self.truncated_bytes = 0  # cut off a torn tail when opened
        self.deleted_segments = 0
        self.fsyncs = 0
        self.damaged_batches = 0  # reads that found a damaged batch
        self._lock_fd = -1  # LOCK_FILE's, held from open to close
        self._given = 0  # the end END_FILE holds
        self._end_map: mmap.mmap | None = None  # END_FILE, mapped while open
        self._end_lock = threading.Lock()  # END_FILE's msync and unmapping
        self._lock = threading.Lock()  # the segment list and the committed state
        self._write_lock = threading.Lock()  # the file being appended to
        self._segments: list[_Segment] = []
        self.id = ""  # ID_FILE's, read by open()
        self._fd = -1  # the last segment's, for appending
        self._closed = False
        self._synced_at = time.monotonic()
        self._unsynced = False
        self._dsync = fsync == "always" and hasattr(os, "O_DSYNC")

    # -- opening ---------------------------------------------------------------------------

    def open(self) -> None:
        """Takes the directory's lock, reads it, cuts a torn tail, and gets ready to
        append. Raises ``StreamLogError`` (or ``OSError``) and holds nothing then."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self._take_lock()
        try:
            self._open()
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise

    def _take_lock(self) -> int:
        """``LOCK_FILE``'s descriptor, ``flock``-ed (``gateway.data_lock``: the kernel lets
        go when the process ends, ``kill -9`` too)."""
        try:
            return lock_file(self.directory / LOCK_FILE)
        except LockHeld as exc:
            raise StreamLogError(
                f"stream log {self.directory}: in use by another writer (pid {exc.holder},"
                f" {LOCK_FILE}): one writer, ever, writes a log's directory; give each"
                " gateway its own stream.path"
            ) from None

    def _open(self) -> None:
        paths = sorted(self.directory.glob(f"*{SUFFIX}"))
        segments: list[_Segment] = []
        for index, path in enumerate(paths):
            try:
                base = int(path.stem)
            except ValueError:
                raise StreamLogError(f"stream log: unexpected file {path}") from None
            last = index == len(paths) - 1
            verify = index >= len(paths) - 2  # the last sealed segment too
            segment = self._scan(path, base, verify, torn_tail=last)
            if segments and segments[-1].end != base:
                raise StreamLogError(
                    f"stream log: offsets {segments[-1].end} to {base - 1} are missing"
                    f" (before {path.name}); move the damaged files away to start a new log"
                )
            segments.append(segment)
        if not segments:
            segments.append(_Segment(0, self.directory / _name(0), 0, 0))
        given = self._read_given()
        if given > segments[-1].end:
            raise StreamLogError(
                f"stream log {self.directory}: offsets {segments[-1].end} to {given - 1} are"
                f" missing: the log had given offsets up to {given - 1} ({END_FILE}), its"
                f" segments end at {segments[-1].end} ({segments[-1].path.name} was cut short"
                " or deleted); giving those offsets to other records would make them name"
                f" other records. Put the lost segment back, or move {self.directory} away"
                " (keep it: it holds what was not lost) to start a new log with a new id"
            )
        self._segments = segments
        self.id = self._read_id()
        self._map_given(given)
        self._open_for_append(segments[-1])
        # What it holds may be in the page cache only (a crash of the process under
        # ``never``): the first ``checkpoint`` syncs it before recording its end.
        self._unsynced = segments[-1].size > 0

    def _read_given(self) -> int:
        """The end ``END_FILE`` holds; 0 when there is none (a new log, or one of before
        the file)."""
        path = self.directory / END_FILE
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        try:
            return int(text)
        except ValueError:
            raise StreamLogError(
                f"stream log {path}: not an offset ({text[:40]!r}); it records the end the log"
                " had given: write that end into it, or move the directory away to start a"
                " new log"
            ) from None

    def _map_given(self, given: int) -> None:
        """``END_FILE`` mapped for ``_mark``: in place when it holds ``given`` at its
        fixed width (nothing to allocate: a full disk does not stop the log opening),
        else first written anew (a new file fsync-ed, then renamed: a log of before, or
        none)."""
        path = self.directory / END_FILE
        record = b"%0*d\n" % (_END_DIGITS, given)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            fd = -1
        if fd >= 0 and os.pread(fd, _END_SIZE + 1, 0) != record:
            os.close(fd)
            fd = -1
        if fd < 0:
            partial = path.with_name(END_FILE + ".tmp")
            fd = os.open(partial, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, record)
                os.fsync(fd)
                os.replace(partial, path)
                self._sync_directory()
            except BaseException:
                os.close(fd)
                raise
        try:
            self._end_map = mmap.mmap(fd, _END_SIZE)
        finally:
            os.close(fd)
        self._given = given

    def _mark(self, end: int) -> None:
        """``end``, whose records are on disk, into ``END_FILE`` (the page cache: a
        ``kill -9`` keeps it; ``_flush_given`` makes it survive a power loss). Under the
        write lock; no system call."""
        if end > self._given and self._end_map is not None:
            self._end_map[:_END_DIGITS] = b"%0*d" % (_END_DIGITS, end)
            self._given = end

    def _flush_given(self) -> None:
        """What ``_mark`` stored, onto the disk (``msync``)."""
        with self._end_lock:
            if self._end_map is not None:
                self._end_map.flush()

    def checkpoint(self) -> None:
        """Records the end the log has given (``END_FILE``) once it is on disk: what was
        written and not synced yet (``interval``, ``never``) is fsync-ed first. Any
        thread; appends wait for the fsync only."""
        with self._write_lock:
            if self._closed or self._fd < 0:
                return
            if self._unsynced:
                os.fsync(self._fd)
                self.fsyncs += 1
                self._synced_at = time.monotonic()
                self._unsynced = False
            self._mark(self._segments[-1].end)
        self._flush_given()

    def _read_id(self) -> str:
        """The log's id (``ID_FILE``), made when the log has none: a log at another path,
        or a wiped one, has another, so a reader can tell it restarted at offset 0."""
        path = self.directory / ID_FILE
        try:
            found = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            found = ""
        if found:
            return found
        made = uuid.uuid4().hex
        partial = path.with_name(ID_FILE + ".tmp")
        partial.write_text(made + "\n", encoding="ascii")
        os.replace(partial, path)
        return made

    def _scan(self, path: Path, base: int, verify: bool, torn_tail: bool) -> _Segment:
        """The segment at ``path`` with its index; ``verify``: every batch's CRC checked
        too; ``torn_tail`` (the last segment): a torn tail is cut off."""
        segment = _Segment(base, path, base, 0)
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            position = 0
            expected = base
            while position < size:
                file.seek(position)
                head = file.read(HEADER.size)
                try:
                    if len(head) < HEADER.size:
                        raise CorruptBatch("short header")
                    header = decode_header(head)
                    if header.first != expected or position + header.size > size:
                        raise CorruptBatch(f"batch at byte {position} does not fit")
                    if verify:
                        file.seek(position)
                        check_crc(header, file.read(header.size))
                except CorruptBatch as exc:
                    if not torn_tail:
                        raise StreamLogError(
                            f"stream log: {path} is damaged at byte {position} (after offset"
                            f" {expected - 1}): {exc}; restore it from a copy, or move"
                            f" {self.directory} away to start a new log"
                        ) from exc
                    found = _whole_batch_after(file, position, size, expected)
                    if found is not None:
                        raise StreamLogError(
                            f"stream log: {path} is damaged at byte {position} (after offset"
                            f" {expected - 1}: {exc}), and a whole batch follows at byte"
                            f" {found}: not a torn tail left by a crash but damage in the"
                            " middle of acknowledged records, so nothing is cut. Restore the"
                            f" file from a copy, or move {self.directory} away (keep it: the"
                            " records before and after the damage are in it) to start a new"
                            " log. (If the machine lost power during a write, the damage and what"
                            " follows may be that one write, never acknowledged: then cut the"
                            f" file there, truncate -s {position} {path}, to go on with the log)"
                        ) from exc
                    break
                segment.add(header, position)
                expected = header.end
                position += header.size
        if segment.size < size:
            log.warning(
                "stream log: %s: cutting a torn tail of %d bytes after offset %d",
                path.name,
                size - segment.size,
                segment.end - 1,
            )
            os.truncate(path, segment.size)
            self.truncated_bytes += size - segment.size
        return segment

    def _open_for_append(self, segment: _Segment) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        if self._dsync:
            flags |= os.O_DSYNC  # ``fsync: always``: every write is synced as it returns
        self._fd = os.open(segment.path, flags, 0o644)
        if segment.size == 0:
            self._sync_directory()

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- writing (one thread) --------------------------------------------------------------

    def append(self, contexts: Sequence[Context]) -> int:
        """Writes ``contexts`` with the next offsets; returns the new end once committed
        (``append_encoded`` of ``encode_chunks(contexts)``)."""
        return self.append_encoded(encode_chunks(contexts))

    def append_encoded(self, batches: Sequence[Encoded]) -> int:
        """Writes ``batches`` with the next offsets; returns the new end once committed.

        Raises ``OSError`` when the disk refuses; nothing of this call is then visible
        and the file is cut back to where it was.
        """
        with self._write_lock:
            return self._append(batches)

    def _append(self, batches: Sequence[Encoded]) -> int:
        segment = self._segments[-1]
        end, size = segment.end, segment.size
        added: list[tuple[BatchHeader, int]] = []
        buffers: list[bytes] = []
        try:
            for batch in batches:
                if size >= self.segment_bytes:
                    self._write(segment, buffers)
                    buffers = []
                    self._commit(segment, added)
                    added = []
                    segment = self._roll(segment)
                    end, size = segment.end, segment.size
                if len(buffers) + len(batch.parts) >= _IOV_MAX:
                    self._write(segment, buffers)
                    buffers = []
                head = frame(end, batch)
                buffers.append(head)
                buffers += batch.parts
                header = decode_header(head)
                added.append((header, size))
                end, size = header.end, size + len(head) + batch.size
            self._write(segment, buffers)
            self._maybe_sync()
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, segment.size)
            raise
        self._commit(segment, added)
        if not self._unsynced:  # on disk (``always``, or ``interval``'s fsync came now)
            self._mark(end)
        return end

    def _write(self, segment: _Segment, buffers: list[bytes]) -> None:
        """``buffers`` appended to ``segment`` in one call.

        One ``writev`` per ``append`` (not one per batch, nor a write then an fsync):
        each call that releases the GIL makes this thread take it back from the busy
        loop, and every such hand-over stalls the broker (``LogWriter``)."""
        if not buffers:
            return
        total = sum(map(len, buffers))
        written = os.writev(self._fd, buffers)
        if written != total:
            raise OSError(f"short write to {segment.path.name} ({written} of {total})")
        if self._dsync:
            self.fsyncs += 1  # O_DSYNC: the write was the fsync
        else:
            self._unsynced = True

    def _commit(self, segment: _Segment, added: list[tuple[BatchHeader, int]]) -> None:
        with self._lock:
            for header, position in added:
                segment.add(header, position)

    def _maybe_sync(self, force: bool = False) -> None:
        if not self._unsynced or self.fsync == "never":
            return
        now = time.monotonic()
        if force or self.fsync == "always" or now - self._synced_at >= self.fsync_interval_s:
            os.fsync(self._fd)
            self.fsyncs += 1
            self._synced_at = now
            self._unsynced = False

    def sync(self) -> None:
        """Fsyncs what was written (``interval``: the periodic fsync, and at close)."""
        with self._write_lock:
            if self._fd >= 0:
                self._maybe_sync(force=self.fsync != "never")
                if not self._unsynced:
                    self._mark(self._segments[-1].end)

    def _roll(self, segment: _Segment) -> _Segment:
        """Closes the full segment and starts the next; then applies ``max_bytes``."""
        if self.fsync != "never" and (self._unsynced or not self._dsync):
            os.fsync(self._fd)
            self.fsyncs += 1
            self._unsynced = False
        os.close(self._fd)
        new = _Segment(segment.end, self.directory / _name(segment.end), segment.end, 0)
        with self._lock:
            self._segments.append(new)
        self._open_for_append(new)
        if self.fsync != "never":  # synced above: the full segment's end is on disk
            self._mark(new.base)
            try:
                self._flush_given()
            except OSError as exc:  # what was written stands; the next checkpoint retries
                log.warning("stream log %s: cannot record its end: %s", self.directory, exc)
        self.enforce_retention()
        return new

    def configure(
        self,
        segment_bytes: int,
        max_bytes: int,
        retention_s: float,
        fsync: str,
        fsync_interval_s: float,
    ) -> None:
        """New settings for the open log (its configuration changed, its directory did
        not), from the next append on. What the old ``fsync`` policy left unsynced is
        synced first; the segment being appended to is opened again when ``O_DSYNC``
        comes or goes (``fsync: always``), and when an earlier attempt left it closed.
        Any thread: appends wait meanwhile."""
        with self._write_lock:
            if self._fd >= 0:
                self._maybe_sync(force=self.fsync != "never")
            self.segment_bytes = segment_bytes
            self.max_bytes = max_bytes
            self.retention_s = retention_s
            self.fsync = fsync
            self.fsync_interval_s = fsync_interval_s
            dsync = fsync == "always" and hasattr(os, "O_DSYNC")
            if self._closed or not self._segments or (dsync == self._dsync and self._fd >= 0):
                self._dsync = dsync
                return
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._dsync = dsync
            self._open_for_append(self._segments[-1])

    def close(self) -> None:
        """Syncs, records the end given (``checkpoint``), closes the files and lets go
        of the directory's lock."""
        try:
            self.checkpoint()
        finally:
            with self._write_lock, self._end_lock:
                self._closed = True
                if self._fd >= 0:
                    os.close(self._fd)
                    self._fd = -1
                if self._end_map is not None:
                    self._end_map.close()
                    self._end_map = None
                if self._lock_fd >= 0:
                    os.close(self._lock_fd)
                    self._lock_fd = -1

    # -- retention (any thread) ------------------------------------------------------------

    def enforce_retention(self, now_ns: int | None = None) -> int:
        """Deletes the segments past ``retention_s`` or ``max_bytes``; returns how many."""
        horizon = (time.time_ns() if now_ns is None else now_ns) - int(self.retention_s * 1e9)
        doomed: list[_Segment] = []
        with self._lock:
            total = sum(segment.size for segment in self._segments)
            while len(self._segments) > 1:
                oldest = self._segments[0]
                if total <= self.max_bytes and oldest.ts_max >= horizon:
                    break
                doomed.append(self._segments.pop(0))
                total -= oldest.size
        for segment in doomed:
            with contextlib.suppress(FileNotFoundError):
                segment.path.unlink()
            log.info(
                "stream log: deleted %s (offsets %d to %d)",
                segment.path.name,
                segment.base,
                segment.end - 1,
            )
        self.deleted_segments += len(doomed)
        return len(doomed)

    # -- reading (any thread) --------------------------------------------------------------

    def bounds(self) -> Bounds:
        with self._lock:
            segments = self._segments
            return Bounds(
                segments[0].base,
                segments[-1].end,
                sum(segment.size for segment in segments),
                len(segments),
                self.id,
            )

    def read(self, start: int, end: int) -> Iterator[Columns]:
        """The committed batches holding offsets in ``[start, end)``, in order (the first
        and last may hold records outside it: slice them), up to the committed end.

        Raises ``RecordsDeleted`` when a record of the range is no longer held (retention
        deleted it, possibly while this read went on): a reader never sees a gap."""
        offset = start
        while offset < end:
            with self._lock:
                found = self._locate(offset)
                if found is None:
                    return
                segment, index = found
                path = segment.path
                positions = segment.positions[index:].tolist()
                stop = segment.size
            try:
                file = open(path, "rb")  # noqa: SIM115 - closed below
            except FileNotFoundError:
                continue  # deleted by retention meanwhile: _locate says so
            with file:
                progressed = False
                for at, position in enumerate(positions):
                    if position >= stop:
                        break
                    file.seek(position)
                    head = file.read(HEADER.size)
                    try:
                        header = decode_header(head)
                        data = head + file.read(header.size - HEADER.size)
                        columns = decode_batch(data, True)
                    except CorruptBatch as exc:
                        raise self._damaged(segment, index + at, position, exc) from exc
                    offset = columns.first + columns.count
                    progressed = True
                    yield columns
                    if offset >= end:
                        return
            if not progressed:
                return

    def _damaged(
        self, segment: _Segment, index: int, position: int, exc: CorruptBatch
    ) -> DamagedBatch:
        """The error a reader gets for the damaged batch ``index`` of ``segment``
        (logged, counted)."""
        self.damaged_batches += 1
        with self._lock:
            first = segment.firsts[index]
            last = segment.firsts[index + 1] if index + 1 < len(segment.firsts) else segment.end
        message = (
            f"stream log: {segment.path} is damaged at byte {position}, the batch of offsets"
            f" {first} to {last - 1} ({exc}): its records cannot be served; restore the file"
            f" from a copy, or move {self.directory} away to start a new log"
        )
        log.error("%s", message)
        return DamagedBatch(message)

    def slices(self, start: int, end: int) -> Iterator[tuple[Columns, int, int]]:
        """``read``, with the rows of each batch inside ``[start, end)``: ``(columns,
        lo, hi)``, rows ``lo`` to ``hi - 1``."""
        for columns in self.read(start, end):
            lo = max(0, start - columns.first)
            hi = min(columns.count, end - columns.first)
            if lo < hi:
                yield columns, lo, hi

    def _locate(self, offset: int) -> tuple[_Segment, int] | None:
        """The segment and batch index holding ``offset``; None past the committed end;
        ``RecordsDeleted`` when retention deleted it. Call under the lock."""
        segments = self._segments
        if offset >= segments[-1].end:
            return None
        if offset < segments[0].base:
            raise RecordsDeleted(
                f"stream log: offsets {offset} to {segments[0].base - 1} were deleted by retention"
            )
        at = bisect.bisect_right([s.base for s in segments], offset) - 1
        segment = segments[at]
        while offset >= segment.end:  # an empty segment (only the last can be)
            at += 1
            if at >= len(segments):
                return None
            segment = segments[at]
        index = bisect.bisect_right(segment.firsts, offset) - 1
        return segment, max(index, 0)


def _whole_batch_after(file: BinaryIO, damaged: int, size: int, expected: int) -> int | None:
    """The position of a whole batch (a header, offsets from ``expected`` on, a CRC that
    matches) past the damage at byte ``damaged`` of ``file`` (``size`` bytes), or None:
    the damage then runs to the end of the file, a torn tail. Looks for the header's
    version and flags bytes, so the bytes are read once (a zeroed tail matches nothing)."""
    if size - damaged <= HEADER.size:
        return None
    with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as data:
        at = data.find(_VERSION_FLAGS, damaged + 21)
        while at >= 0:
            position = at - 20
            header = None
            if position + HEADER.size <= size:
                with contextlib.suppress(CorruptBatch):
                    header = decode_header(data[position : position + HEADER.size])
            if (
                header is not None
                and header.first >= expected
                and header.count > 0
                and position + header.size <= size
            ):
                try:
                    check_crc(header, memoryview(data)[position : position + header.size])
                except CorruptBatch:
                    pass
                else:
                    return position
            at = data.find(_VERSION_FLAGS, at + 1)
    return None


def encode_chunks(
    contexts: Sequence[Context], topics: list[str] | None = None, joined: str | None = None
) -> list[Encoded]:
    """``contexts`` encoded in batches of at most ``MAX_BATCH_RECORDS`` records and about
    ``MAX_BATCH_BYTES`` of payload; ``topics`` and ``joined``: as for ``encode_columns``."""
    count = len(contexts)
    if not count:
        return []
    if count <= MAX_BATCH_RECORDS:
        payloads = [c.payload for c in contexts]
        if sum(map(len, payloads)) <= MAX_BATCH_BYTES:  # the common case: one batch
            return [encode_columns(contexts, topics, joined, payloads)]
    lengths = [len(c.payload) for c in contexts]
    batches = []
    start = 0
    size = 0
    for index, length in enumerate(lengths):
        size += length
        if size >= MAX_BATCH_BYTES or index - start + 1 >= MAX_BATCH_RECORDS:
            batches.append(encode_columns(contexts[start : index + 1]))
            start = index + 1
            size = 0
    if start < count:
        batches.append(encode_columns(contexts[start:]))
    return batches
