"""``edgebus check`` on a configuration written to a real file, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main
from tests.helpers.brokers import REPO_ROOT
from tests.helpers.timeouts import unit

__all__ = ["QUIET", "check", "check_idl_lightly"]

#: A listener on an ephemeral port and no HTTP API: a configuration that binds nothing fixed.
QUIET = 'listeners: [{type: tcp, bind: "127.0.0.1:0"}]\napi: {enabled: false}\n'


def check(tmp_path: Path, text: str, name: str = "edgebus.yaml") -> tuple[int, list[str]]:
    """Run `edgebus check` on ``text`` written to ``tmp_path/name``, in ``tmp_path``: its
    exit status and output lines."""
    config = tmp_path / name
    config.write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        result = CliRunner().invoke(main, ["check", name])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output.strip().splitlines()


def check_idl_lightly(config: Path) -> tuple[int, str]:
    """``edgebus check config`` in a child process run with ``-X importtime``: its exit
    status and output (without the import lines). Asserts that the check parsed IDL
    (``idl_codegen.frontend`` imported) and imported neither cyclonedds nor rclpy: a DDS
    or ROS 2 adapter's IDL is checked without the libraries it runs on."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gateway.cli", "check", str(config)],
        cwd=config.parent,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=unit(60),
        check=False,
    )
    imported = [
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "idl_codegen.frontend" in imported  # the IDL was parsed, in this process
    heavy = [name for name in imported if name.split(".")[0] in ("cyclonedds", "rclpy")]
    assert heavy == [], "check imported the DDS libraries"
    output = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if not line.startswith("import time:")
    ]
    return done.returncode, "\n".join(output)
