"""The broker's clock: wall-clock seconds that a wall-clock step does not move.

``now()`` is the wall-clock time (``time.time()``) read once, when this module is
imported (the process's start), plus the monotonic time (``time.monotonic()``) elapsed
since. Everything the broker times in memory reads it: keep alive and the CONNECT
timeout, message and session expiry, will delays, ``$delayed`` messages, the throttles;
a message's ``received_at`` (``Context``, in ns), from which its Message Expiry
Interval counts, is on this clock too.
An NTP step of the system clock while the broker runs (an edge device without a
real-time clock jumps years at boot) changes none of them: a healthy client is not
timed out by a step forward, a silent one is not kept alive by a step back.

Times the store keeps across a restart (session expiry, ``last_alive``, pending and
held wills, delayed and retained messages' due times) are written in this clock too;
it starts at the wall-clock time, so they stay comparable with the wall clock of the
next run. A step during a run is the one thing that shows: after it, this clock and
the wall clock differ by the step until the next start, so a time written after a
step of +1 h reads, after a restart, as written 1 h earlier than it was (a session
expires 1 h sooner), and after a step back 1 h later (docs/broker.md: Clock).

CLOCK_MONOTONIC does not count time suspended (Linux): after a suspend the broker's
clock runs behind the wall clock by the time suspended, as after a step back.

Hot paths add the two parts inline (``BASE + monotonic()``) rather than call ``now()``:
a C call and an addition, as cheap as ``time.time()``.
"""

from __future__ import annotations

import time

__all__ = ["BASE", "BASE_NS", "monotonic", "monotonic_ns", "now", "now_ns"]

monotonic = time.monotonic
monotonic_ns = time.monotonic_ns

#: The wall-clock time, in ns, at which the monotonic clock read 0.
BASE_NS: int = time.time_ns() - monotonic_ns()
#: The same in seconds: ``now() == BASE + monotonic()``.
BASE: float = BASE_NS / 1e9


def now() -> float:
    """The broker's time: Unix seconds, moved by the monotonic clock only."""
    return BASE + monotonic()


def now_ns() -> int:
    """``now()`` in ns: a message's ``received_at`` (``Context``)."""
    return BASE_NS + monotonic_ns()
