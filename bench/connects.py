"""Connection set-up: how many MQTT connections a broker accepts per second, and at
what CPU cost.

``procs`` processes each repeat, for the whole run: TCP connect, CONNECT (clean
session, a fresh client identifier), wait for CONNACK, DISCONNECT, read until the
broker closes, close. Connections completed in the measurement window are counted in
shared memory; the broker's CPU over the same window gives the CPU per connect, which
does not depend on how busy the clients kept it.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.sharedctypes import RawArray, RawValue
from typing import Any

from bench.client import mqtt_connect
from bench.errors import LoadError
from bench.frames import encode_disconnect
from bench.lifetime import die_with_parent
from bench.procstat import cpu_seconds, cpu_split, machine_busy_seconds

__all__ = ["ConnectResult", "run_connects"]


@dataclass(frozen=True)
class ConnectResult:
    connects: int
    duration_s: float
    broker_cpu: float  # cores over the window
    broker_user_cpu: float  # the part of broker_cpu in its own code (user mode)
    generator_cpu: float
    other_cpu: float
    failures: int

    @property
    def rate(self) -> float:
        return self.connects / self.duration_s

    @property
    def cpu_per_connect_ms(self) -> float:
        return self._per_connect_ms(self.broker_cpu)

    @property
    def user_per_connect_ms(self) -> float:
        """The broker's own code's part of ``cpu_per_connect_ms``; the rest is the
        kernel's, on its behalf."""
        return self._per_connect_ms(self.broker_user_cpu)

    def _per_connect_ms(self, cores: float) -> float:
        """CPU time per connect, ms, of ``cores`` used over the window."""
        if not self.connects:
            return float("nan")
        return cores * self.duration_s / self.connects * 1000


def _client(port: int, index: int, level: int, counts: Any, failures: Any, stop: Any) -> None:
    """One connecting process; ``counts``, ``failures`` and ``stop`` are shared ctypes."""
    die_with_parent()
    disconnect = encode_disconnect()
    n = 0
    while not stop.value:
        try:
            sock = mqtt_connect(port, f"bench-c{index}-{n}", level, timeout_s=10.0)
            with sock:
                sock.sendall(disconnect)
                while sock.recv(256):  # until the broker closes: its work is done
                    pass
        except OSError:
            failures[index] += 1
            time.sleep(0.01)
            continue
        n += 1
        counts[index] = n


def run_connects(
    port: int,
    broker_pid: int,
    check_broker: Callable[[], None],
    warmup_s: float,
    duration_s: float,
    level: int = 4,
    procs: int = 2,
) -> ConnectResult:
    ctx = multiprocessing.get_context("fork")
    counts = RawArray("q", procs)
    failures = RawArray("q", procs)
    stop = RawValue("b", 0)
    workers = [
        ctx.Process(target=_client, args=(port, i, level, counts, failures, stop), daemon=True)
        for i in range(procs)
    ]
    for proc in workers:
        proc.start()
    try:
        time.sleep(warmup_s)
        check_broker()

        def sample() -> tuple[float, int, tuple[float, float], float, float]:
            generator = sum(cpu_seconds(p.pid) for p in workers if p.pid) + cpu_seconds(os.getpid())
            return (
                time.monotonic(),
                sum(counts),
                cpu_split(broker_pid),
                generator,
                machine_busy_seconds(),
            )

        t0, n0, (u0, s0), g0, m0 = sample()
        time.sleep(duration_s)
        t1, n1, (u1, s1), g1, m1 = sample()
        check_broker()
    finally:
        stop.value = 1
        for proc in workers:
            proc.join(15)
            if proc.is_alive():
                proc.kill()
                proc.join()
    elapsed = t1 - t0
    if n1 == n0:
        raise LoadError(f"no connection completed in {elapsed:.1f} s ({sum(failures)} failed)")
    broker, generator = (u1 + s1 - u0 - s0) / elapsed, (g1 - g0) / elapsed
    return ConnectResult(
        connects=n1 - n0,
        duration_s=elapsed,
        broker_cpu=broker,
        broker_user_cpu=(u1 - u0) / elapsed,
        generator_cpu=generator,
        other_cpu=max(0.0, (m1 - m0) / elapsed - broker - generator),
        failures=sum(failures),
    )
