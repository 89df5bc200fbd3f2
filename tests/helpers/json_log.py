"""The gateway's JSON log file (``logging: {format: json, file: PATH}``), as tests read it."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.helpers.timeouts import unit

__all__ = ["entries", "logged", "wait_logged"]


def entries(path: Path) -> list[dict[str, Any]]:
    """The entries written whole so far (the gateway may be writing the last line; a
    line that is not JSON, such as a traceback on stderr, is left out); none before
    the file exists."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line[:1] == "{"]


def logged(path: Path, text: str) -> list[dict[str, Any]]:
    """The entries whose message holds ``text``."""
    return [entry for entry in entries(path) if text in entry["message"]]


def wait_logged(
    path: Path,
    text: str,
    count: int = 1,
    timeout: float = unit(10),
    process: subprocess.Popen[Any] | None = None,
) -> list[dict[str, Any]]:
    """The entries whose message holds ``text``, once there are ``count`` of them, within
    ``timeout``; fails at once when ``process`` (the gateway) has ended."""
    deadline = time.monotonic() + timeout
    while True:
        found = logged(path, text)
        if len(found) >= count:
            return found
        if process is not None:
            assert process.poll() is None, f"edgebus ended: {entries(path)[-5:]}"
        assert time.monotonic() < deadline, (
            f"{text!r} logged {len(found)} of {count} time(s): {entries(path)[-5:]}"
        )
        time.sleep(0.05)
