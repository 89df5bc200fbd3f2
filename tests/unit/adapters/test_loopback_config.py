"""The loopback adapter's configuration, checked by ``edgebus check`` as ``run`` does."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET
from tests.helpers.check_command import check as check_file


def check(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    """``edgebus check`` on ``text`` after a quiet listener section."""
    return check_file(tmp_path, QUIET + text)


def test_a_target_field_the_source_does_not_capture_is_refused(tmp_path: Path) -> None:
    """Refused as the bridges refuse it, instead of dropping every message at run time
    with "field 'q' is not available here"."""
    code, lines = check(
        tmp_path,
        "adapters:\n"
        "  - type: loopback\n"
        "    name: x\n"
        "    mappings:\n"
        '      - {source: "a/{r}", target: "b/{r}"}\n'
        '      - {source: "a/{r}", target: "b/{q}/{payload.id}/{z}"}\n',
    )
    assert code == 2
    assert lines == [
        "edgebus.yaml:8 adapters[0].mappings[1]: {q}, {z} is not captured by the `source`"
        " filter 'a/{r}'"
    ]


def test_captures_and_payload_fields_are_accepted(tmp_path: Path) -> None:
    code, lines = check(
        tmp_path,
        "adapters:\n"
        "  - type: loopback\n"
        "    name: x\n"
        "    mappings:\n"
        '      - {source: "s/{room}/{rest#}", target: "t/{room}/{rest}/{payload.id}/{key.k}"}\n'
        '      - {source: "raw/#", target: "fixed"}\n',
    )
    assert (code, lines) == (0, ["edgebus.yaml: OK"])
