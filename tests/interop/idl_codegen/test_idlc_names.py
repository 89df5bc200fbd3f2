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
from pathlib import Path

import pytest

from tests.interop.idl_codegen.idlc import POSITION, idlc_on, needs_idlc
from tests.unit.idl_codegen.name_cases import NAME_CASES, NameCase

pytestmark = [pytest.mark.interop, needs_idlc]


@pytest.mark.parametrize("case", NAME_CASES, ids=[case.name for case in NAME_CASES])
def test_idlc_refuses_what_we_refuse(tmp_path: Path, case: NameCase) -> None:
    result = idlc_on(tmp_path, case.idl)
    if case.error is None:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode != 0
    ours = POSITION.match(case.error)
    assert ours is not None
    theirs = POSITION.search(result.stderr)
    assert theirs is not None, result.stderr
    assert theirs.group(1) == ours.group(1), result.stderr
    assert re.search(r"collides with|clashes with|differs in case|Type id not found",
                     result.stderr), result.stderr
