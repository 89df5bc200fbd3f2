"""Cyclone's idlc on the files of ``tests/unit/idl_codegen/name_cases``: it refuses
exactly those we refuse, at the line we name.

Needs Debian's ``cyclonedds-tools`` (``idlc``, 0.10.2). idlc's column is that of the
declaration (``struct`` of ``struct point``) where ours is that of the identifier, so
only lines are compared. Its messages: "Declaration 'point' collides with earlier an
declaration of 'Point'", "Member name x clashes with declaration in inheritance",
"Scoped name matched up to 'A', but identifier differs in case from 'a'"; for a forward
declaration used before a definition spelled otherwise, its C backend fails ("Type id
not found for type point").
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.timeouts import unit
from tests.unit.idl_codegen.name_cases import NAME_CASES, NameCase

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("idlc") is None,
                       reason="needs idlc (apt-get install cyclonedds-tools)"),
]

_POSITION = re.compile(r"t\.idl:(\d+):(\d+): ")


@pytest.mark.parametrize("case", NAME_CASES, ids=[case.name for case in NAME_CASES])
def test_idlc_refuses_what_we_refuse(tmp_path: Path, case: NameCase) -> None:
    (tmp_path / "t.idl").write_text(case.idl + "\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run(["idlc", "-x", "final", "-o", str(out), "t.idl"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=unit(30))
    if case.error is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0
    ours = _POSITION.match(case.error)
    assert ours is not None
    theirs = _POSITION.search(result.stderr)
    assert theirs is not None, result.stderr
    assert theirs.group(1) == ours.group(1), result.stderr
    assert re.search(r"collides with|clashes with|differs in case|Type id not found",
                     result.stderr), result.stderr
