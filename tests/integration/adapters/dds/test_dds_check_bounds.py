"""A bound or array dimension above 2**32-1 is an IDL error (file, line, column) for
``edgebus check``, as ``idlc``'s "Integer expression overflows". Before, the check said OK
and the dds adapter then failed at start, over and over (cyclonedds' bounds are 32-bit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.check_command import QUIET, check

CASES = {
    "string<5000000000> a;": ("2:34", "a string bound of 5000000000 overflows: at most 4294967295"),
    "sequence<long, 4294967296> a;": (
        "2:42", "a sequence bound of 4294967296 overflows: at most 4294967295"),
    "long a[0x100000000];": (
        "2:34", "an array dimension of 4294967296 overflows: at most 4294967295"),
}


def _check(tmp_path: Path, member: str) -> tuple[int, list[str]]:
    """``edgebus check`` of a dds adapter whose IDL type has ``member``."""
    idl = tmp_path / "big.idl"
    idl.write_text(f"module m {{\n  struct S {{ @key long k; {member} }};\n}};\n")
    return check(tmp_path, f"""\
data_dir: {tmp_path / "data"}
{QUIET}adapters:
  - type: dds
    name: d
    idl_files: [{idl}]
    dds_to_mqtt:
      - from_dds: t
        type: m::S
        to_mqtt: a
""")


@pytest.mark.parametrize("member", sorted(CASES))
def test_check_reports_a_bound_above_uint32_max(tmp_path: Path, member: str) -> None:
    status, lines = _check(tmp_path, member)
    where, message = CASES[member]
    assert status != 0, lines
    assert any(f"big.idl:{where}: {message}" in line for line in lines), lines


def test_check_accepts_the_largest_bound(tmp_path: Path) -> None:
    status, lines = _check(tmp_path, "string<4294967295> a;")
    assert status == 0, lines
