"""What code costs a connect in a running server: the same code run again, or more
code, interpreted or compiled.

The floor's protocol (``bench.connect_floor``: a fixed CONNACK, a close after the
DISCONNECT) on uvloop, which on each CONNECT also makes ``CALLS`` calls, each building
one small slotted object and reading it back (about 25 bytecodes):

- ``same``: one function and one class, ``CALLS`` times;
- ``distinct``: ``CALLS`` functions and classes, each once: the same work, in
  ``CALLS`` times as much code;
- both again from the same source compiled by mypyc (``bench.connect_compiled``).

The ``connect`` scenario's load (``bench.connects``) runs against each and against the
floor alone, in interleaved rounds on fresh processes; beside each, the same calls timed
warm in a loop in one process. What a server's CPU per connect grows by over the floor,
against the warm time of the same calls, tells how the running server pays for its code
(docs/performance.md, "Connects: the floor", tenth pass).

``python -m bench.connect_code [--rounds N]`` prints the table (about 2 minutes; the
compiled rows need mypyc and a C compiler, which ``make test`` installs).
"""

from __future__ import annotations

import importlib
import shutil
import statistics
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

from bench.connect_compiled import compile_with_mypyc
from bench.connect_floor import FloorProtocol
from bench.connects import ConnectResult, run_connects
from bench.servers import main, serve_protocol, serving

__all__ = ["CALLS", "MODES", "calls", "write_probe"]

CALLS = 60
MODES = ("same", "distinct")
#: The probe module's two copies: interpreted, and compiled by mypyc.
INTERPRETED, COMPILED = "code_probe", "code_probe_compiled"


def write_probe(directory: Path, name: str) -> None:
    """``directory/name.py``: ``CALLS`` classes and functions, and the two lists of
    ``MODES`` (``same``: the first function ``CALLS`` times; ``distinct``: each once)."""
    parts = ["from typing import Optional\n"]
    for i in range(CALLS):
        parts.append(
            f"\n\nclass C{i}:\n"
            '    __slots__ = ("a", "b", "c")\n\n'
            "    def __init__(self, a: int) -> None:\n"
            "        self.a = a\n"
            "        self.b = a + 1\n"
            "        self.c: Optional[int] = None\n\n\n"
            f"def f{i}(x: int) -> int:\n"
            f"    o = C{i}(x)\n"
            "    if o.b > o.a and o.c is None:\n"
            f"        return o.b + {i}\n"
            "    return 0\n"
        )
    parts.append(f"\n\nsame = [f0] * {CALLS}\n")
    parts.append("distinct = [" + ", ".join(f"f{i}" for i in range(CALLS)) + "]\n")
    (directory / f"{name}.py").write_text("".join(parts))


def calls(directory: str, module: str, mode: str) -> list[Callable[[int], int]]:
    """The functions of ``mode`` in the probe ``module`` of ``directory``."""
    if directory not in sys.path:
        sys.path.insert(0, directory)
    probe = importlib.import_module(module)
    functions: list[Callable[[int], int]] = getattr(probe, mode)
    return functions


async def _serve(port: int, directory: str = "", module: str = "", mode: str = "") -> None:
    """The floor on ``port``, making the probe's calls of ``mode`` on each CONNECT (none
    without arguments)."""
    functions = calls(directory, module, mode) if mode else []

    class Probe(FloorProtocol):
        def data_received(self, data: bytes) -> None:
            if not self.answered:
                for function in functions:
                    function(3)
            super().data_received(data)

    await serve_protocol(Probe, port)


def _warm_us(directory: str, module: str, mode: str) -> float:
    functions = calls(directory, module, mode)

    def once() -> None:
        for function in functions:
            function(3)

    return min(timeit.repeat(once, number=20_000, repeat=5)) / 20_000 * 1e6


def _once(args: tuple[str, ...], warmup_s: float, duration_s: float) -> ConnectResult:
    with serving("bench.connect_code", args=args) as (port, pids):
        return run_connects(port, pids[0], lambda: None, warmup_s, duration_s)


def run(rounds: int = 3, warmup_s: float = 1.0, duration_s: float = 4.0) -> list[str]:
    directory = Path(tempfile.mkdtemp(prefix="edgebus-code-"))
    try:
        write_probe(directory, INTERPRETED)
        write_probe(directory, COMPILED)
        compile_with_mypyc(directory, [f"{COMPILED}.py"])
        variants: dict[str, tuple[str, ...]] = {"floor": ()}
        for module, label in ((INTERPRETED, "interpreted"), (COMPILED, "compiled")):
            for mode in MODES:
                variants[f"{label}, {mode}"] = (str(directory), module, mode)
        results: dict[str, list[ConnectResult]] = {name: [] for name in variants}
        for number in range(1, rounds + 1):
            for name, args in variants.items():
                result = _once(args, warmup_s, duration_s)
                results[name].append(result)
                print(
                    f"round {number} {name:<22} {result.rate:8,.0f} connects/s, "
                    f"{result.cpu_per_connect_ms * 1000:.1f} µs of server CPU per connect",
                    flush=True,
                )
        warm = {name: _warm_us(*args) for name, args in variants.items() if args}
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    cpu = {
        name: statistics.median(r.cpu_per_connect_ms for r in rs) * 1000
        for name, rs in results.items()
    }
    lines = [
        f"{CALLS} calls on each connect, medians of {rounds} rounds: the server's CPU per "
        f"connect over the floor alone ({cpu['floor']:.1f} µs), against the same calls warm",
        "  calls                    connects/s   over the floor   warm, in process",
    ]
    for name, rs in results.items():
        rate = statistics.median(r.rate for r in rs)
        over = "" if name == "floor" else f"{cpu[name] - cpu['floor']:>10.1f} µs"
        in_process = f"{warm[name]:>11.1f} µs" if name in warm else ""
        lines.append(f"  {name:<22}{rate:>12,.0f}   {over:>13}   {in_process}")
    return lines


if __name__ == "__main__":
    main(__doc__ or "", run, _serve)
