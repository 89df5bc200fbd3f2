"""A prototype for the multi-core design note (docs/performance.md): connects served by
broker processes sharing one listening port (``SO_REUSEPORT``).

Each worker process runs the broker core (``broker_core.broker.Broker`` with the
listener's ``MqttConnection``, on uvloop, with the gateway's garbage-collector settings)
on its own socket bound with ``SO_REUSEPORT`` to the same port; the kernel spreads new
connections over them. Nothing is shared between the workers (no routing between them,
no shared session table): enough for connects, which the ``connect`` scenario's clients
make with a fresh client identifier each time, and the part of option 1 of the note
that parallelises without sharing.

``python -m bench.reuseport_prototype [--rounds N]`` runs the ``connect`` scenario's load
(``bench.connects``) against 1 and 2 workers and against mosquitto, interleaved, and
prints the medians; the server CPU is the sum over the workers.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from dataclasses import dataclass

from bench.brokers import launch
from bench.connects import run_connects
from bench.procstat import cpu_seconds
from bench.servers import main, serve_protocol, serving

__all__ = ["run"]


async def _serve(port: int) -> None:
    from broker_core.broker import Broker
    from broker_core.listeners.connection import MqttConnection
    from broker_core.listeners.settings import ListenerSettings
    from gateway.serve import collect_less

    broker = Broker()
    settings = ListenerSettings()
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    collect_less()
    await serve_protocol(lambda: MqttConnection(broker, settings, loop), sock=sock)


@dataclass(frozen=True)
class _Result:
    rate: float
    server_cores: float  # CPU of the server processes over the window, in cores
    cpu_per_connect_ms: float


def _measure(port: int, pids: list[int], warmup_s: float, duration_s: float) -> _Result:
    """The connect load, and the CPU of every server process over its window (the load
    calls ``check`` once when its window opens and once when it closes)."""
    marks: list[tuple[float, float]] = []

    def check() -> None:
        marks.append((time.monotonic(), sum(cpu_seconds(pid) for pid in pids)))

    result = run_connects(port, pids[0], check, warmup_s, duration_s)
    (t0, cpu0), (t1, cpu1) = marks[0], marks[-1]
    cores = (cpu1 - cpu0) / (t1 - t0)
    return _Result(result.rate, cores, cores / max(result.rate, 1.0) * 1000)


def run(rounds: int = 3, warmup_s: float = 1.0, duration_s: float = 5.0) -> list[str]:
    kinds = ("1 worker", "2 workers", "mosquitto")
    results: dict[str, list[_Result]] = {kind: [] for kind in kinds}
    for number in range(1, rounds + 1):
        for kind in kinds:
            if kind == "mosquitto":
                with launch("mosquitto") as broker:
                    r = run_connects(
                        broker.port, broker.pid, broker.check_alive, warmup_s, duration_s
                    )
                result = _Result(r.rate, r.broker_cpu, r.cpu_per_connect_ms)
            else:
                with serving("bench.reuseport_prototype", int(kind[0])) as (port, pids):
                    result = _measure(port, pids, warmup_s, duration_s)
            results[kind].append(result)
            print(
                f"round {number} {kind:<10} {result.rate:8,.0f} connects/s, server"
                f" {result.server_cores:.2f} cores, {result.cpu_per_connect_ms:.3f} ms per connect",
                flush=True,
            )
    lines = [f"connects, medians of {rounds} rounds   connects/s  / mosquitto   server cores"]
    mosquitto = statistics.median(r.rate for r in results["mosquitto"])
    for kind in kinds:
        rate = statistics.median(r.rate for r in results[kind])
        cores = statistics.median(r.server_cores for r in results[kind])
        lines.append(f"  {kind:<33}{rate:>10,.0f}  {rate / mosquitto:>10.2f}x   {cores:.2f}")
    return lines


if __name__ == "__main__":
    main(__doc__ or "", run, _serve)
