"""bench.connect_code's probe does the same work in one function or in many, interpreted
or compiled by mypyc, and its server answers the connect load while making those calls;
bench.connect_compiled's copy of the broker core imports its compiled modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.connect_code import CALLS, MODES, calls, write_probe
from bench.connect_compiled import compile_with_mypyc, compiled_core, core_first
from bench.connects import run_connects
from bench.servers import serving


def _results(directory: Path, module: str) -> dict[str, list[int]]:
    return {mode: [f(3) for f in calls(str(directory), module, mode)] for mode in MODES}


def test_same_and_distinct_make_as_many_calls_interpreted_and_compiled(tmp_path: Path) -> None:
    write_probe(tmp_path, "probe_interpreted")
    write_probe(tmp_path, "probe_compiled")
    compile_with_mypyc(tmp_path, ["probe_compiled.py"])
    interpreted = _results(tmp_path, "probe_interpreted")
    compiled = _results(tmp_path, "probe_compiled")
    assert sys.modules["probe_compiled"].__file__.endswith(".so")  # type: ignore[union-attr]
    assert compiled == interpreted
    assert len(set(calls(str(tmp_path), "probe_interpreted", "distinct"))) == CALLS
    assert len(set(calls(str(tmp_path), "probe_interpreted", "same"))) == 1
    assert interpreted["same"] == [4] * CALLS
    assert interpreted["distinct"] == [4 + i for i in range(CALLS)]


def test_the_probe_server_answers_the_load_while_calling(tmp_path: Path) -> None:
    write_probe(tmp_path, "probe_served")
    with serving("bench.connect_code", args=(str(tmp_path), "probe_served", "distinct")) as (
        port,
        pids,
    ):
        result = run_connects(port, pids[0], lambda: None, warmup_s=0.2, duration_s=0.5)
    assert result.connects > 0 and result.failures == 0


def test_the_compiled_core_is_what_a_process_imports_first() -> None:
    with compiled_core(("broker_core/mqtt/wire.py",)) as core:
        completed = subprocess.run(
            [sys.executable, "-P", "-c", "import broker_core.mqtt.wire as m; print(m.__file__)"],
            env=core_first(core),
            capture_output=True,
            text=True,
            check=True,
        )
        imported = Path(completed.stdout.strip())
        assert imported.parent == core / "broker_core" / "mqtt"
        assert imported.suffix == ".so"
    assert not core.exists()
