"""Where edgebus's part of a connect goes in the running broker, phase by phase.

``bench.connect_floor`` measures the gap between edgebus and the bare event loop; this
bench splits it. Each server process runs a gateway (the bench profile of
``bench.brokers``) and serves the floor's protocol (``bench.connect_floor``) to the
``connect`` scenario's load. On every accepted connection it also drives ``count`` of
the gateway's own MQTT connections (``MqttConnection`` on the gateway's broker) through
a transport that keeps nothing, up to a phase:

- ``accept``: ``connection_made``, then ``connection_lost``: no CONNECT;
- ``connect``: with a CONNECT (a new clean session; the CONNACK written);
- ``disconnect``: with the DISCONNECT too, the whole exchange of the load.

The server CPU per connect over the floor alone in the same gateway (count 0) is what
those connections cost in the running broker, with the caches the load's clients and
the kernel leave behind; the same cycles timed in a loop in one process (warm) are
printed beside (docs/performance.md, "Connects: the floor", sixth pass).

``python -m bench.connect_phases [--rounds N]`` prints the table (about 3 minutes).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.brokers import edgebus_config, free_port
from bench.connect_floor import FloorProtocol
from bench.connects import ConnectResult, run_connects
from bench.frames import encode_connect, encode_disconnect
from bench.servers import main, serve_protocol, serving

__all__ = ["CONNECT", "PHASES", "bench_gateway", "drive", "run", "warm_us"]

PHASES = ("accept", "connect", "disconnect")
# (phase, connections driven per accepted one), in the order measured; count 0: the floor.
_VARIANTS = (
    ("accept", 0),
    ("accept", 1),
    ("connect", 1),
    ("disconnect", 1),
    ("disconnect", 2),
    ("disconnect", 4),
)
_DISCONNECT = encode_disconnect()
_WARM_CYCLES = 20_000


class _Sink:
    """A transport that keeps only what was written (``MqttConnection`` uses these)."""

    __slots__ = ("closing", "written")

    def __init__(self) -> None:
        self.closing = False
        self.written = bytearray()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def can_write_eof(self) -> bool:
        return True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


#: The CONNECT of every driven connection: one client identifier will do, each session
#: ends (clean) with its connection.
CONNECT = encode_connect("driven", 4)


def drive(broker: Any, settings: Any, loop: asyncio.AbstractEventLoop, phase: str) -> bytes:
    """One of the gateway's MQTT connections, from its accept to its end, up to
    ``phase``; returns what it wrote."""
    from broker_core.listeners.connection import MqttConnection

    connection = MqttConnection(broker, settings, loop)
    transport = _Sink()
    connection.connection_made(transport)  # type: ignore[arg-type]
    if phase != "accept":
        connection.data_received(CONNECT)
        if phase == "disconnect":
            connection.data_received(_DISCONNECT)
    connection.connection_lost(None)
    return bytes(transport.written)


@asynccontextmanager
async def bench_gateway() -> AsyncIterator[Any]:
    """A gateway in this process and loop, in the bench profile, until exit."""
    from gateway.app import Gateway
    from gateway.config.light import validate_for_run
    from gateway.serve import collect_less

    workdir = Path(tempfile.mkdtemp(prefix="edgebus-phases-"))
    path = edgebus_config(free_port(), workdir)
    gateway = Gateway(validate_for_run(path).config, path)
    running = asyncio.get_running_loop().create_task(gateway.run())
    try:
        await gateway.ready.wait()
        collect_less()  # as `edgebus run` does
        logging.getLogger().setLevel(logging.WARNING)
        yield gateway
    finally:
        gateway.stop()
        await running
        shutil.rmtree(workdir, ignore_errors=True)


async def _serve(port: int, phase: str = "accept", count: str = "0") -> None:
    """The floor on ``port`` inside a running gateway, driving ``count`` of its
    connections up to ``phase`` on each accept."""
    from broker_core.listeners.settings import ListenerSettings

    loop = asyncio.get_running_loop()
    async with bench_gateway() as gateway:
        broker, settings, driven = gateway.broker, ListenerSettings(name="tcp"), int(count)

        class Floor(FloorProtocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                super().connection_made(transport)
                for _ in range(driven):
                    drive(broker, settings, loop, phase)

        await serve_protocol(Floor, port)


def warm_us(phase: str, cycles: int = _WARM_CYCLES) -> float:
    """µs per ``drive`` up to ``phase`` in a loop in this process, warm: the best of 5
    runs of ``cycles`` after one to warm up."""
    from broker_core.listeners.settings import ListenerSettings

    async def measure() -> float:
        loop = asyncio.get_running_loop()
        settings = ListenerSettings(name="tcp")
        best = float("inf")
        async with bench_gateway() as gateway:
            for attempt in range(6):
                started = time.perf_counter()
                for _ in range(cycles):
                    drive(gateway.broker, settings, loop, phase)
                if attempt:
                    best = min(best, (time.perf_counter() - started) / cycles * 1e6)
        return best

    import uvloop

    return uvloop.run(measure())


def _once(phase: str, count: int, warmup_s: float, duration_s: float) -> ConnectResult:
    with serving("bench.connect_phases", args=(phase, str(count))) as (port, pids):
        return run_connects(port, pids[0], lambda: None, warmup_s, duration_s)


def run(rounds: int = 3, warmup_s: float = 1.0, duration_s: float = 5.0) -> list[str]:
    cpu: dict[tuple[str, int], list[float]] = {variant: [] for variant in _VARIANTS}
    for number in range(1, rounds + 1):
        for phase, count in _VARIANTS:
            result = _once(phase, count, warmup_s, duration_s)
            cpu[(phase, count)].append(result.cpu_per_connect_ms * 1000)
            print(
                f"round {number} {phase:<10} x{count}  {result.rate:8,.0f} connects/s, "
                f"{result.cpu_per_connect_ms * 1000:.1f} µs of server CPU per connect",
                flush=True,
            )
    floor = statistics.median(cpu[("accept", 0)])
    warm = {phase: warm_us(phase) for phase in PHASES}
    lines = [
        f"connects, medians of {rounds} rounds: server CPU per connect over the floor in the "
        f"same gateway ({floor:.1f} µs), and the same cycles warm in one process",
        "  phase        driven   in the running broker   warm",
    ]
    for phase, count in _VARIANTS[1:]:
        extra = statistics.median(cpu[(phase, count)]) - floor
        lines.append(
            f"  {phase:<12} {count:>6}   {extra:>10.1f} µs{'':<11}{warm[phase] * count:6.1f} µs"
        )
    return lines


if __name__ == "__main__":
    main(__doc__ or "", run, _serve)
