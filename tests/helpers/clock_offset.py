"""An ``edgebus run`` whose wall clock is offset, as an NTP step moves it.

Run as a module (``python -m tests.helpers.clock_offset run -c cfg.yaml``; give
``start_edgebus`` ``main=CLOCK_OFFSET_MAIN``) it is the CLI whose ``time.time()`` /
``time.time_ns()`` (the wall clock, CLOCK_REALTIME) carry the offset, in seconds, read
from the file named by ``$EDGEBUS_TEST_CLOCK_OFFSET_FILE``: once before anything of the
gateway is imported (the broker's clock reads the wall clock at its import, as at a
real process start), then every 20 ms from a thread. ``time.monotonic()``, which
asyncio's timers and the broker's clock use, is untouched, as in a real step.
``ClockStep`` writes that file from the test.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

__all__ = ["CLOCK_OFFSET_MAIN", "OFFSET_ENV", "ClockStep"]

OFFSET_ENV = "EDGEBUS_TEST_CLOCK_OFFSET_FILE"
CLOCK_OFFSET_MAIN = "tests.helpers.clock_offset"


class ClockStep:
    """The wall-clock offset of the broker's process, in seconds (``OFFSET_ENV``)."""

    def __init__(self, path: Path, offset: float = 0.0) -> None:
        self.path = path
        self.set(offset)

    def set(self, offset: float) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(repr(offset))
        tmp.replace(self.path)
        # The broker's process polls the file every 20 ms: wait past a few polls.
        time.sleep(0.2)


def _read(path: str) -> float | None:
    try:
        with open(path) as handle:
            return float(handle.read().strip() or 0)
    except (OSError, ValueError):
        return None


def _run_with_offset() -> None:
    """``edgebus`` with the wall clock offset by the number in $EDGEBUS_TEST_CLOCK_OFFSET_FILE."""
    path = os.environ[OFFSET_ENV]
    real_time, real_time_ns, real_sleep = time.time, time.time_ns, time.sleep
    offset = [_read(path) or 0.0]  # before the gateway's imports: its start time

    def poll() -> None:
        while True:
            found = _read(path)
            if found is not None:
                offset[0] = found
            real_sleep(0.02)

    threading.Thread(target=poll, name="clock-offset", daemon=True).start()
    time.time = lambda: real_time() + offset[0]
    time.time_ns = lambda: real_time_ns() + int(offset[0] * 1e9)

    from gateway.cli import main

    main()


if __name__ == "__main__":
    _run_with_offset()
