"""The stream log on disk: offsets, segments, torn tails, retention, concurrent readers."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path

import pytest

from broker_core.context import Context, Origin
from spark_sink import records
from spark_sink import segments as segments_module
from spark_sink.log_errors import DamagedBatch, RecordsDeleted, StreamLogError
from spark_sink.log_files import END_FILE
from spark_sink.records import Encoded
from spark_sink.segments import StreamLog

#: Every test here runs with each encoder (conftest.py).
pytestmark = pytest.mark.usefixtures("encoder")

ORIGIN = Origin("mqtt", "pub")


def _batch(first: int, count: int, size: int = 10) -> list[Context]:
    return [
        Context(f"t/{n % 7}", str(n).encode().ljust(size, b"."), 1, False, origin=ORIGIN)
        for n in range(first, first + count)
    ]


def _read(log: StreamLog, start: int | None = None, end: int = 2**62) -> list[tuple[int, bytes]]:
    out = []
    if start is None:
        start = log.bounds().start
    for columns, lo, hi in log.slices(start, end):
        out += [(columns.first + row, columns.binary("payload", row)) for row in range(lo, hi)]
    return out


def _numbers(records: list[tuple[int, bytes]]) -> list[int]:
    return [int(payload.rstrip(b".")) for _, payload in records]


def _open(path: Path, **kw: object) -> StreamLog:
    log = StreamLog(path, **{"fsync": "never", **kw})  # type: ignore[arg-type]
    log.open()
    return log


def _torn_after(path: Path, end: int) -> None:
    """As a crash during the write of the batches after ``end`` leaves it: the log had
    given (``log-end``) no more than ``end`` (a clean close recorded the whole end)."""
    (path / END_FILE).write_text(f"{end}\n")


def _given(path: Path) -> int:
    """What ``log-end`` holds."""
    return int((path / END_FILE).read_text())


def test_offsets_are_global_and_survive_a_reopen(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096)
    for first in range(0, 600, 30):
        assert log.append(_batch(first, 30)) == first + 30
    bounds = log.bounds()
    assert (bounds.start, bounds.end) == (0, 600)
    assert bounds.segments > 3  # rolled several times
    log.close()
    log = _open(tmp_path, segment_bytes=4096)
    assert log.bounds().end == 600
    log.append(_batch(600, 5))
    records = _read(log)
    assert [offset for offset, _ in records] == list(range(605))
    assert _numbers(records) == list(range(605))
    # Any range, across segment boundaries.
    assert [o for o, _ in _read(log, 95, 437)] == list(range(95, 437))
    assert _read(log, 604, 2000) == [(604, b"604.......")]
    assert _read(log, 605, 2000) == []
    log.close()


def test_segment_files_are_named_after_their_first_offset(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096)
    for first in range(0, 300, 30):
        log.append(_batch(first, 30))
    log.close()
    names = sorted(p.name for p in tmp_path.glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    bases = [int(name.removesuffix(".log")) for name in names]
    assert bases == sorted(bases) and len(bases) > 1
    assert all(base % 30 == 0 for base in bases)  # a batch never spans two segments


@pytest.mark.parametrize("cut", [1, 8, 31, 32, 33, 100, -1])
def test_a_torn_tail_is_cut_back_to_the_last_whole_batch(tmp_path: Path, cut: int) -> None:
    log = _open(tmp_path)
    log.append(_batch(0, 10))
    size_before = log.bounds().bytes
    log.append(_batch(10, 10))
    log.close()
    _torn_after(tmp_path, 10)
    path = tmp_path / "00000000000000000000.log"
    whole = path.stat().st_size
    os.truncate(path, size_before + (cut if cut > 0 else whole - size_before + cut))
    log = _open(tmp_path)
    assert log.bounds().end == 10
    assert log.truncated_bytes > 0
    assert path.stat().st_size == size_before
    log.append(_batch(10, 3))  # the log goes on after the last whole batch
    assert _numbers(_read(log)) == list(range(13))
    log.close()


def test_a_damaged_last_batch_is_cut(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append(_batch(0, 10))
    log.append(_batch(10, 10))
    log.close()
    _torn_after(tmp_path, 10)
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-9] ^= 0x55  # inside the last batch's payloads: only its CRC tells
    path.write_bytes(bytes(data))
    log = _open(tmp_path)
    assert log.bounds().end == 10
    log.close()


def test_garbage_after_the_last_batch_is_cut(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append(_batch(0, 4))
    log.close()
    path = tmp_path / "00000000000000000000.log"
    with path.open("ab") as file:
        file.write(b"\xff" * 100)
    log = _open(tmp_path)
    assert (log.bounds().end, log.truncated_bytes) == (4, 100)
    log.close()


def test_a_missing_segment_is_an_error_not_a_gap(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096)
    for first in range(0, 300, 30):
        log.append(_batch(first, 30))
    log.close()
    files = sorted(tmp_path.iterdir())
    files[1].unlink()
    with pytest.raises(StreamLogError, match="missing"):
        _open(tmp_path, segment_bytes=4096)


def test_retention_by_bytes_deletes_the_oldest_whole_segments(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096, max_bytes=3 * 4096)
    for first in range(0, 3000, 30):
        log.append(_batch(first, 30))
    bounds = log.bounds()
    assert bounds.end == 3000
    assert bounds.start > 0 and bounds.start % 30 == 0
    assert bounds.bytes <= 3 * 4096 + 4096  # under max_bytes, plus the open segment
    assert log.deleted_segments > 0
    records = _read(log)
    assert [o for o, _ in records] == list(range(bounds.start, 3000))  # no gap
    with pytest.raises(RecordsDeleted, match=f"offsets 0 to {bounds.start - 1} were deleted"):
        _read(log, 0, bounds.start + 1)
    log.close()


def test_retention_by_age_keeps_the_segment_being_written(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096, retention_s=60.0)
    for first in range(0, 600, 30):
        log.append(_batch(first, 30))
    segments = log.bounds().segments
    assert log.enforce_retention() == 0  # nothing older than a minute
    far_future = 10**20
    assert log.enforce_retention(far_future) == segments - 1
    bounds = log.bounds()
    assert (bounds.segments, bounds.end) == (1, 600)
    assert [o for o, _ in _read(log)] == list(range(bounds.start, 600))
    log.close()
    log = _open(tmp_path, segment_bytes=4096)  # and it opens again where it was
    assert (log.bounds().start, log.bounds().end) == (bounds.start, 600)
    log.close()


def test_a_failed_write_leaves_nothing_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _open(tmp_path)
    log.append(_batch(0, 5))
    size = log.bounds().bytes
    real_writev = os.writev

    def full_disk(fd: int, buffers: list[bytes]) -> int:
        real_writev(fd, buffers[:1])  # a part reaches the file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segments_module.os, "writev", full_disk)
    with pytest.raises(OSError, match="No space"):
        log.append(_batch(5, 5))
    monkeypatch.setattr(segments_module.os, "writev", real_writev)
    assert (log.bounds().end, log.bounds().bytes) == (5, size)
    assert (tmp_path / "00000000000000000000.log").stat().st_size == size
    log.append(_batch(5, 5))
    assert _numbers(_read(log)) == list(range(10))
    log.close()


@pytest.mark.parametrize(("policy", "fsyncs"), [("always", 3), ("never", 0), ("interval", 0)])
def test_fsync_policies(tmp_path: Path, policy: str, fsyncs: int) -> None:
    log = _open(tmp_path, fsync=policy, fsync_interval_s=3600.0)
    for first in range(0, 30, 10):
        log.append(_batch(first, 10))
    assert log.fsyncs == fsyncs
    log.sync()  # the periodic sync of `interval`
    assert log.fsyncs == {"always": 3, "never": 0, "interval": 1}[policy]
    log.close()


def test_big_appends_are_split_into_bounded_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments_module, "MAX_BATCH_RECORDS", 100)
    monkeypatch.setattr(segments_module, "MAX_BATCH_BYTES", 5000)
    log = _open(tmp_path)
    log.append(_batch(0, 1000, size=10))  # split by count
    log.append([Context("big", bytes(3000), 0, False, origin=ORIGIN)] * 10)  # by bytes
    counts = [columns.count for columns in log.read(0, 2000)]
    assert sum(counts) == 1010
    assert max(counts) <= 100
    assert counts[-5:] == [2, 2, 2, 2, 2]
    log.close()


def test_readers_never_see_a_gap_while_the_writer_appends(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096, max_bytes=8 * 4096)
    done = threading.Event()
    problems: list[str] = []
    reads = deleted = 0

    def reader() -> None:
        nonlocal reads, deleted
        while not done.is_set():
            bounds = log.bounds()
            try:
                offsets = [o for o, _ in _read(log, bounds.start, bounds.end)]
            except RecordsDeleted:
                deleted += 1  # retention overtook this reader: it says so, it skips nothing
                continue
            reads += 1
            if not offsets:
                continue
            if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
                problems.append(f"gap in {offsets[0]}..{offsets[-1]}")
            if offsets[-1] >= bounds.end:
                problems.append(f"read {offsets[-1]} past the committed end {bounds.end}")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for first in range(0, 20_000, 50):
            log.append(_batch(first, 50))
    finally:
        done.set()
        thread.join()
    assert problems == []
    assert reads > 0
    log.close()


def _encoded(first: int, batches: int, count: int) -> list[Encoded]:
    return [records.encode_columns(_batch(first + b * count, count)) for b in range(batches)]


def test_one_append_is_one_write_whatever_its_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call that lets go of the GIL makes the writer thread take it back from the
    broker's loop: an append of many batches writes them in one ``writev``."""
    log = _open(tmp_path)
    calls: list[int] = []
    real_writev = os.writev

    def counted(fd: int, buffers: list[bytes]) -> int:
        calls.append(len(buffers))
        return real_writev(fd, buffers)

    monkeypatch.setattr(segments_module.os, "writev", counted)
    assert log.append_encoded(_encoded(0, 5, 7)) == 35
    assert len(calls) == 1
    assert _numbers(_read(log)) == list(range(35))
    log.close()


def test_an_append_of_more_buffers_than_one_writev_takes(tmp_path: Path) -> None:
    """Past the system's limit of buffers per ``writev`` (IOV_MAX, 1024 on Linux) an
    append writes in several calls; the log reads back whole, also after a reopen."""
    log = _open(tmp_path)
    batches = _encoded(0, 200, 3)  # ~15 buffers each: ~3,000 buffers
    assert sum(1 + len(batch.parts) for batch in batches) > 1024
    assert log.append_encoded(batches) == 600
    log.close()
    log = _open(tmp_path)
    assert (log.bounds().end, log.truncated_bytes) == (600, 0)
    assert _numbers(_read(log)) == list(range(600))
    log.close()


def test_an_append_that_fills_segments_rolls_them_in_its_call(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=4096)
    assert log.append_encoded(_encoded(0, 40, 30)) == 1200
    assert log.bounds().segments > 3
    assert _numbers(_read(log)) == list(range(1200))
    log.close()
    log = _open(tmp_path, segment_bytes=4096)
    assert _numbers(_read(log, 500, 700)) == list(range(500, 700))
    log.close()


@pytest.mark.skipif(not hasattr(os, "O_DSYNC"), reason="no O_DSYNC on this system")
def test_fsync_always_writes_synchronously_in_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fsync: always``: the segment is open with O_DSYNC, so the write returns once its
    data is on disk, and no separate fsync follows it (one GIL hand-over less)."""
    log = _open(tmp_path, fsync="always")
    fsynced: list[int] = []
    monkeypatch.setattr(segments_module.os, "fsync", fsynced.append)
    log.append_encoded(_encoded(0, 3, 10))
    assert (log.fsyncs, fsynced) == (1, [])
    flags = fcntl.fcntl(log._fd, fcntl.F_GETFL)  # the open file's own flags
    assert flags & os.O_DSYNC == os.O_DSYNC
    log.close()


def test_damage_followed_by_whole_batches_is_refused_and_nothing_is_cut(tmp_path: Path) -> None:
    log = _open(tmp_path)
    for first in range(0, 100, 10):
        log.append(_batch(first, 10))
    log.close()
    _torn_after(tmp_path, 0)  # not what tells it: the whole batches after the damage do
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[300:400] = bytes(100)
    path.write_bytes(bytes(data))
    with pytest.raises(StreamLogError, match=r"damaged at byte \d+ .*a whole batch follows"):
        _open(tmp_path)
    assert path.read_bytes() == bytes(data)


def test_a_log_that_lost_what_it_had_given_is_refused(tmp_path: Path) -> None:
    log = _open(tmp_path, segment_bytes=1024)
    for first in range(0, 200, 20):
        log.append(_batch(first, 20))
    log.close()
    assert int((tmp_path / END_FILE).read_text()) == 200
    last = sorted(tmp_path.glob("*.log"))[-1]
    base = int(last.stem)
    last.unlink()
    with pytest.raises(StreamLogError, match=f"offsets {base} to 199 are missing"):
        _open(tmp_path)


def test_the_end_is_recorded_once_on_disk(tmp_path: Path) -> None:
    log = _open(tmp_path, fsync="never")
    log.append(_batch(0, 5))
    fsyncs = log.fsyncs
    log.checkpoint()  # under never too, what was written is synced before its end is recorded
    assert (log.fsyncs, _given(tmp_path)) == (fsyncs + 1, 5)
    log.checkpoint()  # nothing new: nothing written
    assert log.fsyncs == fsyncs + 1
    log.close()


def test_one_writer_per_directory(tmp_path: Path) -> None:
    first = _open(tmp_path)
    with pytest.raises(StreamLogError, match=rf"in use by another writer \(pid {os.getpid()},"):
        _open(tmp_path)
    first.append(_batch(0, 3))
    first.close()
    second = _open(tmp_path)  # closed: the lock is free
    assert second.bounds().end == 3
    second.close()


def test_a_damaged_batch_is_never_read_as_good(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append(_batch(0, 10))
    log.append(_batch(10, 10))
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x55  # a payload byte of the second batch
    path.write_bytes(bytes(data))
    assert _numbers(_read(log, 0, 10)) == list(range(10))
    with pytest.raises(DamagedBatch, match=r"batch of offsets 10 to 19"):
        _read(log, 5, 20)
    assert log.damaged_batches == 1
    log.close()


def test_every_append_under_always_records_its_end_before_it_returns(tmp_path: Path) -> None:
    """``fsync: always``: what an append returned (what the broker acknowledges) is in
    ``log-end`` at once, in the file's pages (a ``kill -9`` keeps them), no checkpoint."""
    log = _open(tmp_path, fsync="always", segment_bytes=10**9)
    assert log.append(_batch(0, 20)) == 20
    assert _given(tmp_path) == 20
    assert log.append(_batch(20, 3)) == 23
    assert _given(tmp_path) == 23
    log.close()


def test_interval_and_never_record_only_what_was_synced(tmp_path: Path) -> None:
    """Never an end past what is on disk: a power loss would then refuse an intact log."""
    log = _open(tmp_path / "i", fsync="interval", fsync_interval_s=3600.0)
    log.append(_batch(0, 10))
    log.append(_batch(10, 10))  # not synced: the interval has not passed
    assert _given(tmp_path / "i") == 0
    log.sync()  # the periodic fsync
    assert _given(tmp_path / "i") == 20
    log.fsync_interval_s = 0.0
    log.append(_batch(20, 5))  # an append whose fsync came: its end with it
    assert _given(tmp_path / "i") == 25
    log.close()
    log = _open(tmp_path / "n", fsync="never")
    log.append(_batch(0, 10))
    assert _given(tmp_path / "n") == 0
    log.checkpoint()
    assert _given(tmp_path / "n") == 10
    log.close()


def test_a_log_end_of_before_is_read_and_kept(tmp_path: Path) -> None:
    log = _open(tmp_path)
    log.append(_batch(0, 7))
    log.close()
    (tmp_path / END_FILE).write_text("7\n")  # as the log wrote it before
    log = _open(tmp_path)
    assert (log.bounds().end, _given(tmp_path)) == (7, 7)
    log.close()
    (tmp_path / END_FILE).write_text("9\n")
    with pytest.raises(StreamLogError, match="offsets 7 to 8 are missing"):
        _open(tmp_path)


def _sealed(tmp_path: Path) -> list[Path]:
    """A log of several segments, closed; its segment files."""
    log = _open(tmp_path, segment_bytes=1024)
    for first in range(0, 200, 20):
        log.append(_batch(first, 20))
    log.close()
    paths = sorted(tmp_path.glob("*.log"))
    assert len(paths) > 3
    return paths


def _flip_payload_byte(path: Path) -> int:
    """A byte of the last record's payload of ``path`` flipped (its header intact);
    returns where its batch starts."""
    data = bytearray(path.read_bytes())
    position = 0
    while True:
        header = records.decode_header(bytes(data[position : position + records.HEADER.size]))
        if position + header.size >= len(data):
            break
        position += header.size
    data[-3] ^= 0x55  # in the payloads' column, the last record's
    path.write_bytes(bytes(data))
    return position


def test_a_damaged_batch_of_the_last_sealed_segment_is_refused_at_open(tmp_path: Path) -> None:
    """Its headers intact, only its CRC tells: checked at open, as the last segment's."""
    paths = _sealed(tmp_path)
    position = _flip_payload_byte(paths[-2])
    with pytest.raises(StreamLogError) as refused:
        _open(tmp_path)
    message = str(refused.value)
    assert f"{paths[-2]} is damaged at byte {position}" in message
    assert "CRC mismatch" in message
    assert "\n" not in message
    assert paths[-2].stat().st_size > position  # nothing cut


def test_older_sealed_segments_have_their_headers_checked_at_open_and_crcs_on_read(
    tmp_path: Path,
) -> None:
    paths = _sealed(tmp_path)
    _flip_payload_byte(paths[0])
    log = _open(tmp_path)  # its headers are whole: opened; a read of it is refused
    with pytest.raises(DamagedBatch, match=str(paths[0])):
        _read(log, 0, 200)
    log.close()


def test_a_log_end_of_the_fixed_width_is_mapped_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reopened, the log writes no new ``log-end``: a full disk does not stop it."""
    log = _open(tmp_path)
    log.append(_batch(0, 4))
    log.close()
    inode = (tmp_path / END_FILE).stat().st_ino
    real_open = os.open

    def full_disk(path: object, flags: int, *args: int) -> int:
        if str(path).endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(segments_module.os, "open", full_disk)
    log = _open(tmp_path, fsync="always")
    assert (tmp_path / END_FILE).stat().st_ino == inode
    log.append(_batch(4, 2))
    assert _given(tmp_path) == 6
    log.close()
