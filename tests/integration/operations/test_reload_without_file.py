"""SIGHUP to ``edgebus run`` without ``-c`` (``make run``: the embedded defaults) logs
one INFO line saying what it re-read (password file, ACL caches, TLS files), as a
reload from a file logs ``configuration reloaded from ...``. Before, it logged nothing.

The embedded defaults bind fixed ports (1883, 8083, 8081), which a test cannot change
without a file: the process runs in a network namespace of its own (``unshare -rn``),
where those ports are its alone; the test is skipped where that is not allowed."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import edgebus_command


def _own_network() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare")
    probe = subprocess.run(
        [unshare, "-rn", "true"], capture_output=True, timeout=unit(10), check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"unshare -rn not allowed: {probe.stderr!r}")
    # lo starts down in a new network namespace: brought up where `ip` exists (binding
    # 127.0.0.1 works either way).
    return [unshare, "-rn", "sh", "-c", 'ip link set lo up 2>/dev/null; exec "$@"', "sh"]


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + unit(30)
    while time.monotonic() < deadline:
        found = log.read_text()
        if text in found:
            return found
        if process.poll() is not None:
            raise AssertionError(f"edgebus ended ({process.returncode}):\n{found}")
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} in:\n{log.read_text()}")


def test_sighup_without_a_file_logs_what_it_reread(tmp_path: Path) -> None:
    log = tmp_path / "edgebus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*_own_network(), *edgebus_command(), "run"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for(log, "ready in", process)
        process.send_signal(signal.SIGHUP)
        text = _wait_for(log, "configuration reloaded without a file", process)
        [line] = [line for line in text.splitlines() if "reloaded without a file" in line]
        assert " INFO " in line, line
        assert "password file none; ACL caches emptied; TLS files:" in line, line
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(unit(20))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(unit(10))
    assert process.returncode == 0, log.read_text()
