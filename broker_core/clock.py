"""The broker's clock: wall-clock seconds that a wall-clock step does not move.

``now()`` is the wall-clock time (``time.time()``) read once, when this module is
imported (the process's start), plus the time elapsed since on a monotonic clock
(``monotonic()``: Linux's CLOCK_BOOTTIME, elsewhere ``time.monotonic()``). Everything
the broker times in memory reads it: keep alive and the CONNECT timeout, message and
session expiry, will delays, ``$delayed`` messages, the throttles; a message's
``received_at`` (``Context``, in ns), from which its Message Expiry Interval counts, is
on this clock too.
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

Times a user sees (a stream record's time, a rule's ``timestamp`` and
``publish_received_at``, the API's ``received_at``, ``connected_at``, ...) are not
shown on this clock: they are converted to the wall clock when they leave the broker
(``to_wall``, ``to_wall_ns``), with the offset between the two clocks at the moment
of the conversion (``wall_offset_ns``). So they follow the corrected wall clock after
a step, even a time stamped before it: a message received while the wall clock was a
day behind (a device booted without a real-time clock, before NTP set it) and read or
recorded after the step shows the corrected time it was received at, not a day off.
A time converted before a step (a record already written) keeps the offset of then.

Time suspended counts: on Linux ``monotonic()`` reads CLOCK_BOOTTIME, which runs on
while the machine is suspended, where CLOCK_MONOTONIC (``time.monotonic()``) stops. So
after a suspend, keep alive and every expiry have seen the time go by, as the wall
clock and the clients have: a client silent across a suspend longer than its keep
alive is closed, a message past its expiry interval is not delivered. Elsewhere (no
CLOCK_BOOTTIME) it is ``time.monotonic()``, whatever that counts (macOS's does not
count sleep). ``CLOCK_NAME`` says which.

Every deadline the broker compares is on this clock. The event loop's own clock
(``loop.time()``, CLOCK_MONOTONIC) only serves relative delays (``call_later(deadline
- now)``, the sweep's ``asyncio.sleep``): a timer due during a suspend runs late by
the suspend, after which the time it reads is this clock's, so the deadline it checks
has passed and is acted on then. No deadline is computed on the loop's clock.

Hot paths add the two parts inline (``BASE + monotonic()``) rather than call ``now()``:
a C call and an addition. CLOCK_BOOTTIME costs a little more to read than
``time.monotonic()`` (``time.clock_gettime`` parses its clock's id: about 15 ns a read;
the kernel's side, a vDSO read, is the same; docs/broker.md, Clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

__all__ = [
    "BASE",
    "BASE_NS",
    "CLOCK_NAME",
    "monotonic",
    "monotonic_ns",
    "now",
    "now_ns",
    "to_wall",
    "to_wall_ns",
    "wall_offset",
    "wall_offset_ns",
]


def _pick() -> tuple[str, Callable[[], float], Callable[[], int]]:
    """CLOCK_BOOTTIME when this system has it and it reads, else ``time.monotonic``."""
    boottime: int | None = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        try:
            time.clock_gettime(boottime)
        except OSError:  # defined but refused (an old kernel, a seccomp sandbox)
            pass
        else:
            # Bound to its argument in C: one call, no Python frame.
            return (
                "CLOCK_BOOTTIME",
                partial(time.clock_gettime, boottime),
                partial(time.clock_gettime_ns, boottime),
            )
    return "monotonic", time.monotonic, time.monotonic_ns


#: The clock ``monotonic()`` reads: ``"CLOCK_BOOTTIME"`` (Linux) or ``"monotonic"``.
CLOCK_NAME: str
monotonic: Callable[[], float]
monotonic_ns: Callable[[], int]
CLOCK_NAME, monotonic, monotonic_ns = _pick()


def _base_ns() -> int:
    """The wall-clock time, in ns, at which the monotonic clock read 0: the wall clock
    read between two monotonic reads, of the closest of a few tries. One pair of reads
    is off by however long the process was preempted between them (ms on a loaded
    machine), and each process would then carry its own error: a will stored with its
    due time by one run would fall due early or late in the next by the difference."""
    best_gap, best = -1, 0
    for _ in range(5):
        before = monotonic_ns()
        wall = time.time_ns()
        after = monotonic_ns()
        if best_gap < 0 or after - before < best_gap:
            best_gap, best = after - before, wall - (before + after) // 2
    return best


#: The wall-clock time, in ns, at which the monotonic clock read 0.
BASE_NS: int = _base_ns()
#: The same in seconds: ``now() == BASE + monotonic()``.
BASE: float = BASE_NS / 1e9

_MS = 1_000_000
_HALF_MS = _MS // 2


def now() -> float:
    """The broker's time: Unix seconds, moved by the monotonic clock only (suspend
    included where the system can tell: ``CLOCK_NAME``)."""
    return BASE + monotonic()


def now_ns() -> int:
    """``now()`` in ns: a message's ``received_at`` (``Context``)."""
    return BASE_NS + monotonic_ns()


def wall_offset_ns() -> int:
    """The wall clock minus the broker's clock, now, in ns, rounded to the ms: 0 until
    the wall clock is stepped, the step after it (and the time spent suspended, where
    ``monotonic()`` does not count it).

    Added to a broker-clock time it gives that time on the wall clock as it reads now:
    a time stamped before a step comes out corrected by the step. Read it once for
    many times (a batch of stream records) and add it to each.

    The two clocks run at the same rate (NTP slews both alike); only a step moves one
    against the other (or a suspend, where ``monotonic()`` does not count it). Reading
    both, here and at the start, leaves µs of noise: rounded away, so that without a
    step a time converts to itself, exactly, and times converted apart keep their
    order."""
    raw = time.time_ns() - (BASE_NS + monotonic_ns())
    return (raw + _HALF_MS) // _MS * _MS


def wall_offset() -> float:
    """``wall_offset_ns()`` in seconds."""
    return wall_offset_ns() / 1e9


def to_wall_ns(t: int) -> int:
    """The broker-clock time ``t`` (ns, a ``received_at``) on the wall clock as it reads
    now (``wall_offset_ns``): the time a user is shown."""
    return t + wall_offset_ns()


def to_wall(t: float) -> float:
    """The broker-clock time ``t`` (seconds) on the wall clock as it reads now
    (``wall_offset``): the time a user is shown."""
    return t + wall_offset()
