"""A peer program in its own process, speaking lines (JSON objects, for ours) on stdout.

    with PeerProcess([sys.executable, "zmq_peer.py", "pull", "--bind", url]) as peer:
        peer.expect("ready")                 # the first line with that key
        report = peer.expect("received", timeout=unit(30))

Its stdout is read by a thread into a queue, so waiting for a line has a deadline;
stderr goes to a file whose tail a failed wait reports. ``kill()`` ends it at once
(SIGKILL); leaving the block terminates it, then kills it.
"""

from __future__ import annotations

import json
import queue
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from tests.helpers.timeouts import unit

__all__ = ["PeerProcess"]


class PeerProcess:
    def __init__(self, argv: Sequence[str], cwd: Path | None = None) -> None:
        self.argv = list(argv)
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=cwd,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.put(raw.decode(errors="replace").rstrip("\n"))
        self._lines.put(None)

    def stderr_tail(self, size: int = 2000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-size:]

    def _next_line(self, timeout: float) -> str | None:
        """The next line of output, or None when none came within ``timeout``; fails at
        EOF."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            self._lines.put(None)  # EOF stays EOF
            raise AssertionError(
                f"peer {self.argv[:3]} ended ({self.process.wait()})\n{self.stderr_tail()}"
            )
        return line

    def line(self, timeout: float | None = None) -> str:
        """The next line of output; fails after ``timeout`` (default 10 units) or at EOF."""
        wait = unit(10) if timeout is None else timeout
        line = self._next_line(wait)
        if line is None:
            raise AssertionError(
                f"peer {self.argv[:3]}: nothing within {wait:.1f}s\n{self.stderr_tail()}"
            )
        return line

    def next(self, timeout: float | None = None) -> dict[str, Any]:
        """The next line, a JSON object."""
        found: dict[str, Any] = json.loads(self.line(timeout))
        return found

    def poll(self, timeout: float) -> dict[str, Any] | None:
        """The next line, a JSON object, or None when none came within ``timeout``."""
        line = self._next_line(timeout)
        if line is None:
            return None
        found: dict[str, Any] = json.loads(line)
        return found

    def expect(self, key: str, timeout: float | None = None) -> Any:
        """The value of ``key`` in the next line that has it (other lines are skipped)."""
        while True:
            line = self.next(timeout)
            if key in line:
                return line[key]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(unit(10))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(unit(5))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(unit(5))
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
