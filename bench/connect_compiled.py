"""Would a compiled connect path reach mosquitto? edgebus with the modules a connect
runs through compiled by mypyc, beside the same edgebus interpreted and mosquitto.

Issue 17 accepts a compiled accelerator (mypyc or Cython) with the pure-Python path kept
as the fallback. This bench measures what one would give before it is built: it copies
``broker_core`` into a temporary directory, compiles ``CONNECT_PATH`` there with mypyc
(the code is annotated and passes mypy, so it compiles as it is), and runs the
``connect`` scenario's load (``bench.connects``) against the bench profile of edgebus
(``bench.brokers``) importing that copy, against the interpreted edgebus and against
mosquitto, in interleaved rounds on fresh processes, medians. Beside them, the same
connect driven warm in one process (``bench.connect_phases.warm_us``), for both.

``python -m bench.connect_compiled [--rounds N]`` prints the table (docs/performance.md,
"Connects: the floor", tenth pass). It needs mypy's mypyc and a C compiler (``make
test`` installs both) and takes about 3 minutes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench.brokers import REPO_ROOT, launch
from bench.connects import ConnectResult, run_connects
from bench.servers import main

__all__ = ["CONNECT_PATH", "compile_with_mypyc", "compiled_core", "core_first", "run"]

#: The modules a connect spends its Python in (docs/performance.md, "Connects: the
#: floor", fifth pass): the listener's connection and bounds, the session, its codec,
#: state and outgoing flow, the CONNECT policy and the session registry.
CONNECT_PATH = (
    "broker_core/listeners/connection.py",
    "broker_core/listeners/connections.py",
    "broker_core/listeners/pending.py",
    "broker_core/mqtt/session.py",
    "broker_core/mqtt/codec.py",
    "broker_core/mqtt/wire.py",
    "broker_core/mqtt/session_state.py",
    "broker_core/mqtt/outgoing.py",
    "broker_core/connect.py",
    "broker_core/sessions.py",
)
_WARM_CYCLES = 10_000


def compile_with_mypyc(directory: Path, sources: Sequence[str]) -> None:
    """Compiles ``sources`` (paths relative to ``directory``) in place: each gets its
    extension module beside it, which Python imports instead of the source."""
    completed = subprocess.run(
        [sys.executable, "-m", "mypyc", *sources],
        cwd=directory,  # mypyc's build reads a pyproject.toml in its directory: none here
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"mypyc failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")


@contextlib.contextmanager
def compiled_core(modules: Sequence[str] = CONNECT_PATH) -> Iterator[Path]:
    """A copy of ``broker_core`` with ``modules`` compiled, in a directory to put first on
    ``PYTHONPATH`` (the other packages still come from the checkout); removed on exit."""
    directory = Path(tempfile.mkdtemp(prefix="edgebus-compiled-"))
    try:
        shutil.copytree(
            REPO_ROOT / "broker_core",
            directory / "broker_core",
            ignore=shutil.ignore_patterns("__pycache__", "*.so"),
        )
        compile_with_mypyc(directory, modules)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def _python_path(directory: Path | None) -> Iterator[None]:
    """``directory`` first on ``PYTHONPATH`` for the processes started meanwhile."""
    before = os.environ.get("PYTHONPATH")
    if directory is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(directory), before)))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def core_first(core: Path | None) -> dict[str, str]:
    """The environment of a process started with ``python -P`` that imports ``core``'s
    ``broker_core`` (none: the checkout's) and the rest (``bench`` too) from the
    checkout."""
    path = [str(core)] if core is not None else []
    return {**os.environ, "PYTHONPATH": os.pathsep.join((*path, str(REPO_ROOT)))}


def _once(kind: str, core: Path | None, warmup_s: float, duration_s: float) -> ConnectResult:
    with _python_path(core), launch(kind) as broker:
        return run_connects(broker.port, broker.pid, broker.check_alive, warmup_s, duration_s)


def _warm_us(core: Path | None) -> float:
    """µs per connect driven warm in a process of its own that imports ``core``."""
    code = (
        "from bench.connect_phases import warm_us\n"
        f"print(warm_us('disconnect', {_WARM_CYCLES}))\n"
    )
    # -P: the checkout (for ``bench``) after ``core`` on the path, not before it.
    completed = subprocess.run(
        [sys.executable, "-P", "-c", code],
        cwd=REPO_ROOT,
        env=core_first(core),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(completed.stdout.split()[-1])


def run(rounds: int = 5, warmup_s: float = 1.0, duration_s: float = 5.0) -> list[str]:
    with compiled_core() as core:
        servers: dict[str, tuple[str, Path | None]] = {
            "edgebus": ("edgebus", None),
            "edgebus, compiled": ("edgebus", core),
            "mosquitto": ("mosquitto", None),
        }
        results: dict[str, list[ConnectResult]] = {name: [] for name in servers}
        for number in range(1, rounds + 1):
            for name, (kind, path) in servers.items():
                result = _once(kind, path, warmup_s, duration_s)
                results[name].append(result)
                print(
                    f"round {number} {name:<18} {result.rate:8,.0f} connects/s, "
                    f"{result.cpu_per_connect_ms * 1000:.0f} µs of server CPU per connect "
                    f"({result.user_per_connect_ms * 1000:.0f} µs its own code)",
                    flush=True,
                )
        warm = {"edgebus": _warm_us(None), "edgebus, compiled": _warm_us(core)}
    rate = {name: statistics.median(r.rate for r in rs) for name, rs in results.items()}
    lines = [
        f"connects, the path compiled by mypyc ({len(CONNECT_PATH)} modules), medians of "
        f"{rounds} rounds",
        "  server               connects/s  / mosquitto   CPU per connect   its own code"
        "   warm, in process",
    ]
    for name, rs in results.items():
        cpu = statistics.median(r.cpu_per_connect_ms for r in rs) * 1000
        user = statistics.median(r.user_per_connect_ms for r in rs) * 1000
        in_process = f"{warm[name]:10.1f} µs" if name in warm else ""
        lines.append(
            f"  {name:<19}{rate[name]:>12,.0f}  {rate[name] / rate['mosquitto']:>10.2f}x"
            f"   {cpu:10.0f} µs   {user:9.0f} µs   {in_process}"
        )
    return lines


if __name__ == "__main__":
    main(__doc__ or "", run)
