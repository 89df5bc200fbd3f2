"""Where a connect's CPU goes: edgebus and mosquitto beside the event loop's floor.

The ``connect`` scenario's load (``bench.connects``: 2 processes, each in a loop: TCP
connect, CONNECT, CONNACK, DISCONNECT, read until the broker closes) against five
servers, in interleaved rounds on fresh processes, medians:

- ``edgebus`` (the bench profile of ``bench.brokers``);
- ``mosquitto`` (the same);
- ``uvloop floor``: a bare ``asyncio.Protocol`` on uvloop, the loop ``edgebus run``
  uses, that answers any first read with a fixed CONNACK and closes on the next read
  (or at once when the first read holds the DISCONNECT too). No MQTT, no session: what
  the event loop and the kernel cost per connect, the part of edgebus's figure that no
  change to its Python can remove;
- ``lean Python``: ``bench.connect_lean``, one protocol class that parses the CONNECT,
  keeps a table of connected client identifiers, answers and closes, and nothing else:
  what the least Python an MQTT connect needs adds to the floor;
- ``lean on the registry``: the same protocol inside a running gateway, on the
  broker's own listener bounds, authenticator and session registry
  (``bench.connect_lean.OnRegistry``): what those cost a connect when nothing else of
  edgebus is on its path.

Each server's CPU per connect is split into its own code's (user mode) and the
kernel's on its behalf (system mode: its system calls, and the loopback network
stack's work that runs in its context): a broker's own code is what it can change.

``python -m bench.connect_floor [--rounds N]`` prints the table (docs/performance.md,
"Connects: the floor").
"""

from __future__ import annotations

import asyncio
import statistics

from bench.brokers import launch
from bench.connects import ConnectResult, run_connects
from bench.frames import encode_disconnect
from bench.servers import main, serve_protocol, serving

__all__ = ["FloorProtocol", "run"]

_CONNACK = b"\x20\x02\x00\x00"
_DISCONNECT = encode_disconnect()


class FloorProtocol(asyncio.Protocol):
    __slots__ = ("answered", "transport")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.answered = False

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        if self.answered or data.endswith(_DISCONNECT):
            if not self.answered:
                transport.write(_CONNACK)  # type: ignore[attr-defined]
            transport.close()
            return
        self.answered = True
        transport.write(_CONNACK)  # type: ignore[attr-defined]


async def _serve(port: int) -> None:
    await serve_protocol(FloorProtocol, port)


# The servers in processes of their own (``bench.servers``), by the name they report:
# (module, its serve arguments).
_SERVERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "uvloop floor": ("bench.connect_floor", ()),
    "lean Python": ("bench.connect_lean", ()),
    "lean on the registry": ("bench.connect_lean", ("registry",)),
}


def _once(kind: str, warmup_s: float, duration_s: float) -> ConnectResult:
    if kind in _SERVERS:
        module, args = _SERVERS[kind]
        with serving(module, args=args) as (port, pids):
            return run_connects(port, pids[0], lambda: None, warmup_s, duration_s)
    with launch(kind) as broker:
        return run_connects(broker.port, broker.pid, broker.check_alive, warmup_s, duration_s)


def run(rounds: int = 3, warmup_s: float = 1.0, duration_s: float = 5.0) -> list[str]:
    kinds = ("edgebus", "mosquitto", *_SERVERS)
    results: dict[str, list[ConnectResult]] = {kind: [] for kind in kinds}
    for number in range(1, rounds + 1):
        for kind in kinds:
            result = _once(kind, warmup_s, duration_s)
            results[kind].append(result)
            print(
                f"round {number} {kind:<13} {result.rate:8,.0f} connects/s, "
                f"{result.cpu_per_connect_ms:.3f} ms of server CPU per connect "
                f"({result.user_per_connect_ms * 1000:.0f} µs its own code)",
                flush=True,
            )
    rate = {kind: statistics.median(r.rate for r in results[kind]) for kind in kinds}
    cpu = {kind: statistics.median(r.cpu_per_connect_ms for r in results[kind]) for kind in kinds}
    user = {kind: statistics.median(r.user_per_connect_ms for r in results[kind]) for kind in kinds}
    lines = [
        f"connects, medians of {rounds} rounds   connects/s  / mosquitto   server CPU per connect"
        "   its own code / the kernel's",
    ]
    for kind in kinds:
        lines.append(
            f"  {kind:<33}{rate[kind]:>10,.0f}  {rate[kind] / rate['mosquitto']:>10.2f}x"
            f"   {cpu[kind]:.3f} ms{user[kind] * 1000:>21.0f} µs /"
            f" {(cpu[kind] - user[kind]) * 1000:.0f} µs"
        )
    lines.append(
        "  edgebus's own share (edgebus - floor): "
        f"{(cpu['edgebus'] - cpu['uvloop floor']) * 1000:.0f} µs of CPU per connect; "
        f"the lean Python's: {(cpu['lean Python'] - cpu['uvloop floor']) * 1000:.0f} µs; "
        "on the registry: "
        f"{(cpu['lean on the registry'] - cpu['uvloop floor']) * 1000:.0f} µs"
    )
    return lines


if __name__ == "__main__":
    main(__doc__ or "", run, _serve)
