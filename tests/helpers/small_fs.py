"""A small file system for full-disk tests: a tmpfs mounted on a test's directory.

``small_filesystem(path, size)`` mounts a tmpfs of ``size`` bytes on ``path`` (created)
and unmounts it after, lazily when a process still holds it; the test is skipped where
mounting is not allowed (not root, no ``mount``). Nothing is written to the real disk.
``fill(path, leave)`` fills the file system of ``path`` until ``leave`` bytes are free.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "small_filesystem"]


@contextlib.contextmanager
def small_filesystem(path: Path, size: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("a full-disk test mounts a tmpfs: needs root and mount")
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs on {path}: {done.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(path: Path, leave: int = 0, name: str = "filler") -> Path:
    """Writes a file under ``path`` until its file system has ``leave`` bytes free (or
    less); returns the file, to delete when the space is wanted back."""
    filler = path / name
    stats = os.statvfs(path)
    free = stats.f_bavail * stats.f_frsize - leave
    with open(filler, "ab", buffering=0) as file:
        chunk = b"\0" * 65536
        while free > 0:
            try:
                free -= file.write(chunk[: min(len(chunk), free)])
            except OSError:  # full
                break
    return filler
