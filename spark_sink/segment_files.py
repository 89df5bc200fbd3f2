"""One segment file of the stream log: its name, its index, and reading it back at open.

A segment file, ``00000000000000000000.log`` (``segment_name``: the offset of its first
record, 20 digits), is a sequence of record batches (``spark_sink.records``) with
gap-free offsets from its name on. ``Segment`` is what the log keeps in memory of one:
the first offset and file position of each batch, its end, size and newest record.

``scan_segment`` builds that index when the log opens: it reads every batch header, and
with ``verify`` checks every batch's CRC too. A short or damaged batch at the end of the
last segment with no whole batch after it (``whole_batch_after`` finds none) is a torn
tail, left by a crash during a write: it is cut off. Any other damage is
``StreamLogError`` naming the file and the byte, and nothing is cut. Which segments
are verified, and what the log does with the result, is ``StreamLog.open``'s
(``spark_sink.segments``).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from spark_sink.log_errors import StreamLogError
from spark_sink.records import HEADER, BatchHeader, CorruptBatch, check_crc, decode_header

__all__ = ["SUFFIX", "Segment", "scan_segment", "segment_name", "whole_batch_after"]

log = logging.getLogger(__name__)

SUFFIX = ".log"
#: A batch header's version and flags (``records.HEADER``: bytes 20 to 23), what
#: ``whole_batch_after`` looks for past damage.
_VERSION_FLAGS = HEADER.pack(0, 0, 0, 0, 1, 0, 0)[20:24]


@dataclass
class Segment:
    """One segment file's index: where each of its batches starts, and what it holds
    (offsets ``[base, end)`` in ``size`` bytes, the newest record at ``ts_max``)."""

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


def segment_name(base: int) -> str:
    """The file name of the segment whose first offset is ``base``."""
    return f"{base:020d}{SUFFIX}"


def scan_segment(
    path: Path, base: int, verify: bool, torn_tail: bool, directory: Path
) -> tuple[Segment, int]:
    """The segment at ``path`` (of the log in ``directory``) with its index, and how
    many bytes of a torn tail were cut off; ``verify``: every batch's CRC checked too;
    ``torn_tail`` (the last segment): a torn tail is cut off (else damage there is
    ``StreamLogError``, as damage followed by a whole batch always is)."""
    segment = Segment(base, path, base, 0)
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
                        f" {directory} away to start a new log"
                    ) from exc
                found = whole_batch_after(file, position, size, expected)
                if found is not None:
                    raise StreamLogError(
                        f"stream log: {path} is damaged at byte {position} (after offset"
                        f" {expected - 1}: {exc}), and a whole batch follows at byte"
                        f" {found}: not a torn tail left by a crash but damage in the"
                        " middle of acknowledged records, so nothing is cut. Restore the"
                        f" file from a copy, or move {directory} away (keep it: the"
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
        return segment, size - segment.size
    return segment, 0


def whole_batch_after(file: BinaryIO, damaged: int, size: int, expected: int) -> int | None:
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
