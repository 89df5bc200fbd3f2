"""Running Debian's ``idlc`` (``cyclonedds-tools``, 0.10.2) on one IDL text, for the
tests that compare what it accepts and refuses with what we do."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.timeouts import unit

__all__ = ["POSITION", "idlc_on", "needs_idlc"]

#: ``t.idl:<line>:<column>: `` in idlc's messages and in ours
POSITION = re.compile(r"t\.idl:(\d+):(\d+): ")

needs_idlc = pytest.mark.skipif(
    shutil.which("idlc") is None, reason="needs idlc (apt-get install cyclonedds-tools)"
)


def idlc_on(tmp_path: Path, idl: str) -> subprocess.CompletedProcess[str]:
    """idlc's run on ``idl`` written as ``t.idl`` in ``tmp_path`` (output in ``out``)."""
    (tmp_path / "t.idl").write_text(idl + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    return subprocess.run(["idlc", "-x", "final", "-o", str(out), "t.idl"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=unit(30))
