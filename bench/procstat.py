"""Process and machine statistics from /proc: RSS, CPU time, machine-wide busy time.

The harness shares the machine with the broker it measures (and possibly with other
work); these readings let each run say how much CPU the broker, the load generator
and everything else used during the measurement window.
"""

from __future__ import annotations

import os
import time

from bench.errors import BrokerError

__all__ = ["cpu_seconds", "cpu_split", "machine_busy_seconds", "rss_kib", "wait_for_quiet"]

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (VmRSS in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BrokerError(f"no VmRSS for pid {pid}")


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU time consumed so far by a process (all its threads), seconds:
    its own code, and the kernel's work on its behalf (system calls, and the network
    stack's processing that runs in its context)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of proc(5)); utime and stime are fields 14 and 15.
    return int(fields[11]) / _CLOCK_TICKS, int(fields[12]) / _CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU time consumed so far by a process (all its threads)."""
    user, system = cpu_split(pid)
    return user + system


def machine_busy_seconds() -> float:
    """CPU time all cores spent neither idle nor waiting for I/O, since boot."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice, inside user/nice]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _CLOCK_TICKS


def wait_for_quiet(max_busy_cores: float, timeout_s: float, sample_s: float = 0.25) -> float:
    """Wait until the machine's busy CPU over ``sample_s`` drops below ``max_busy_cores``.

    Gives up after ``timeout_s``; returns the last busy reading, in cores.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        before = machine_busy_seconds()
        time.sleep(sample_s)
        busy = (machine_busy_seconds() - before) / sample_s
        if busy < max_busy_cores or time.monotonic() >= deadline:
            return busy
