"""``edgebus spark run --help`` lists the job's options (docs/spark.md) whether or not
pyspark is installed: only running the job needs it. Without pyspark, a run still
answers the install hint. Here pyspark is made unimportable by a module of that name,
first on the path, that raises ``ModuleNotFoundError`` as a missing one does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import REPO_ROOT, edgebus_command


def _edgebus(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    blocker = tmp_path / "no_pyspark"
    blocker.mkdir(exist_ok=True)
    (blocker / "pyspark.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pyspark'\", name='pyspark')\n"
    )
    return subprocess.run(
        [*edgebus_command(), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=unit(60),
        check=False,
    )


def test_help_lists_the_options_without_pyspark(tmp_path: Path) -> None:
    done = _edgebus(tmp_path, "spark", "run", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: edgebus spark run"), done.stdout
    for option in (
        "--gateway",
        "--out",
        "--checkpoint",
        "--trigger",
        "--master",
        "--topic",
        "--starting-offsets",
        "--max-rows-per-batch",
        "--partition-rows",
        "--username",
        "--password",
    ):
        assert option in done.stdout, option

    done = _edgebus(
        tmp_path, "spark", "run", "--gateway", "http://127.0.0.1:1", "--out", "o",
        "--checkpoint", "c",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "edgebus spark needs pyspark: pip install 'edgebus[spark]'" in done.stderr
