"""The small files beside a stream log's segments, each read or made at ``open``.

- ``writer.lock`` (``LOCK_FILE``): ``flock``-ed by the one ``StreamLog`` that writes the
  directory, from ``open`` to ``close`` (``take_writer_lock``).
- ``log-id`` (``ID_FILE``): a random id the log gets when created, kept for its life: a
  reader that sees another id knows the log was replaced (``read_log_id``).
- ``log-end`` (``END_FILE``): the end the log had given once that end is on disk, a
  number of fixed width (``END_DIGITS``) the log keeps mapped (``map_given_end``) and
  stores into in place (``StreamLog._mark``), so a log whose segments end below it is
  known to have lost records (``read_given_end``).

See ``spark_sink.segments`` for when each is written and what ``open`` does with it.
"""

from __future__ import annotations

import mmap
import os
import uuid
from pathlib import Path

from gateway.data_lock import LockHeld, lock_file
from spark_sink.log_errors import StreamLogError

__all__ = [
    "END_DIGITS",
    "END_FILE",
    "ID_FILE",
    "LOCK_FILE",
    "map_given_end",
    "read_given_end",
    "read_log_id",
    "sync_directory",
    "take_writer_lock",
]

ID_FILE = "log-id"  # a random id the log gets when created: readers tell a new log from it
END_FILE = "log-end"  # the end the log had given, once on disk: lost records are noticed
#: ``END_FILE``'s content: an offset of fixed width (stored in place, through ``mmap``).
END_DIGITS = 20
_END_SIZE = END_DIGITS + 1  # and a newline
LOCK_FILE = "writer.lock"  # flock-ed by the one StreamLog that writes the directory


def take_writer_lock(directory: Path) -> int:
    """``LOCK_FILE``'s descriptor, ``flock``-ed (``gateway.data_lock``: the kernel lets
    go when the process ends, ``kill -9`` too)."""
    try:
        return lock_file(directory / LOCK_FILE)
    except LockHeld as exc:
        raise StreamLogError(
            f"stream log {directory}: in use by another writer (pid {exc.holder},"
            f" {LOCK_FILE}): one writer, ever, writes a log's directory; give each"
            " gateway its own stream.path"
        ) from None


def read_given_end(directory: Path) -> int:
    """The end ``END_FILE`` holds; 0 when there is none (a new log, or one of before
    the file)."""
    path = directory / END_FILE
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


def map_given_end(directory: Path, given: int) -> mmap.mmap:
    """``END_FILE`` mapped for ``StreamLog._mark``: in place when it holds ``given`` at
    its fixed width (nothing to allocate: a full disk does not stop the log opening),
    else first written anew (a new file fsync-ed, then renamed: a log of before, or
    none)."""
    path = directory / END_FILE
    record = b"%0*d\n" % (END_DIGITS, given)
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
            sync_directory(directory)
        except BaseException:
            os.close(fd)
            raise
    try:
        return mmap.mmap(fd, _END_SIZE)
    finally:
        os.close(fd)


def read_log_id(directory: Path) -> str:
    """The log's id (``ID_FILE``), made when the log has none: a log at another path,
    or a wiped one, has another, so a reader can tell it restarted at offset 0."""
    path = directory / ID_FILE
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


def sync_directory(directory: Path) -> None:
    """Fsyncs ``directory``: the names of files made or renamed in it are on disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
