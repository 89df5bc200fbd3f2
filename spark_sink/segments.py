"""``StreamLog``: the stream log on disk, segment files of record batches with offsets.

The directory holds segment files named after the offset of their first record,
``00000000000000000000.log``; each is a sequence of record batches
(``spark_sink.records``). Offsets are global and gap-free: a segment starts where the
one before it ends. One thread writes (``append``, ``sync``, ``close``), any number of
threads read (``bounds``, ``read``); retention (``enforce_retention``) and new
settings (``configure``) may come from another thread. Two ``StreamLog`` objects must
never write one directory: whoever opens it owns it until ``close``.
The segment file format and its check at open are ``spark_sink.segment_files``; the
directory's other files (``writer.lock``, ``log-id``, ``log-end``), ``spark_sink.log_files``;
the errors, ``spark_sink.log_errors``.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker_core.clock import wall_offset_ns
from broker_core.context import Context
from spark_sink.log_errors import DamagedBatch, RecordsDeleted, StreamLogError
from spark_sink.log_files import (
    END_DIGITS,
    END_FILE,
    map_given_end,
    read_given_end,
    read_log_id,
    sync_directory,
    take_writer_lock,
)
from spark_sink.records import (
    HEADER,
    BatchHeader,
    Columns,
    CorruptBatch,
    Encoded,
    decode_batch,
    decode_header,
    encode_columns,
    frame,
)
from spark_sink.segment_files import SUFFIX, Segment, scan_segment, segment_name

__all__ = ["Bounds", "StreamLog", "encode_chunks"]

log = logging.getLogger(__name__)

#: The most records, and about the most payload bytes, in one batch on disk: bounds
#: what a reader holds in memory at a time.
MAX_BATCH_RECORDS = 8192
MAX_BATCH_BYTES = 4 * 1024 * 1024
#: The most buffers one ``os.writev`` takes (Linux: 1024).
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the log holds: offsets ``[start, end)``, in ``bytes`` of ``segments`` files."""

    start: int
    end: int
    bytes: int
    segments: int
    id: str = ""


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
        self._segments: list[Segment] = []
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
        self._lock_fd = take_writer_lock(self.directory)
        try:
            self._open()
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise

    def _open(self) -> None:
        paths = sorted(self.directory.glob(f"*{SUFFIX}"))
        segments: list[Segment] = []
        for index, path in enumerate(paths):
            try:
                base = int(path.stem)
            except ValueError:
                raise StreamLogError(f"stream log: unexpected file {path}") from None
            last = index == len(paths) - 1
            verify = index >= len(paths) - 2  # the last sealed segment too
            segment, cut = scan_segment(path, base, verify, last, self.directory)
            self.truncated_bytes += cut
            if segments and segments[-1].end != base:
                raise StreamLogError(
                    f"stream log: offsets {segments[-1].end} to {base - 1} are missing"
                    f" (before {path.name}); move the damaged files away to start a new log"
                )
            segments.append(segment)
        if not segments:
            segments.append(Segment(0, self.directory / segment_name(0), 0, 0))
        given = read_given_end(self.directory)
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
        self.id = read_log_id(self.directory)
        self._end_map = map_given_end(self.directory, given)
        self._given = given
        self._open_for_append(segments[-1])
        # What it holds may be in the page cache only (a crash of the process under
        # ``never``): the first ``checkpoint`` syncs it before recording its end.
        self._unsynced = segments[-1].size > 0

    def _mark(self, end: int) -> None:
        """``end``, whose records are on disk, into ``END_FILE`` (the page cache: a
        ``kill -9`` keeps it; ``_flush_given`` makes it survive a power loss). Under the
        write lock; no system call."""
        if end > self._given and self._end_map is not None:
            self._end_map[:END_DIGITS] = b"%0*d" % (END_DIGITS, end)
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

    def _open_for_append(self, segment: Segment) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        if self._dsync:
            flags |= os.O_DSYNC  # ``fsync: always``: every write is synced as it returns
        self._fd = os.open(segment.path, flags, 0o644)
        if segment.size == 0:
            sync_directory(self.directory)

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

    def _write(self, segment: Segment, buffers: list[bytes]) -> None:
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

    def _commit(self, segment: Segment, added: list[tuple[BatchHeader, int]]) -> None:
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

    def _roll(self, segment: Segment) -> Segment:
        """Closes the full segment and starts the next; then applies ``max_bytes``."""
        if self.fsync != "never" and (self._unsynced or not self._dsync):
            os.fsync(self._fd)
            self.fsyncs += 1
            self._unsynced = False
        os.close(self._fd)
        new = Segment(segment.end, self.directory / segment_name(segment.end), segment.end, 0)
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
        doomed: list[Segment] = []
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
        self, segment: Segment, index: int, position: int, exc: CorruptBatch
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

    def _locate(self, offset: int) -> tuple[Segment, int] | None:
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


def encode_chunks(
    contexts: Sequence[Context], topics: list[str] | None = None, joined: str | None = None
) -> list[Encoded]:
    """``contexts`` encoded in batches of at most ``MAX_BATCH_RECORDS`` records and about
    ``MAX_BATCH_BYTES`` of payload; ``topics`` and ``joined``: as for ``encode_columns``.

    A record's time is its ``received_at`` (the broker's clock) on the wall clock: the
    offset between the two (``broker_core.clock.wall_offset_ns``) is read once here and
    added to every record, so a message received before an NTP step and written after
    it is recorded at its corrected time."""
    count = len(contexts)
    if not count:
        return []
    offset = wall_offset_ns()
    if count <= MAX_BATCH_RECORDS:
        payloads = [c.payload for c in contexts]
        if sum(map(len, payloads)) <= MAX_BATCH_BYTES:  # the common case: one batch
            return [encode_columns(contexts, topics, joined, payloads, offset)]
    lengths = [len(c.payload) for c in contexts]
    batches = []
    start = 0
    size = 0
    for index, length in enumerate(lengths):
        size += length
        if size >= MAX_BATCH_BYTES or index - start + 1 >= MAX_BATCH_RECORDS:
            batches.append(encode_columns(contexts[start : index + 1], offset=offset))
            start = index + 1
            size = 0
    if start < count:
        batches.append(encode_columns(contexts[start:], offset=offset))
    return batches
