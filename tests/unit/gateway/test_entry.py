"""The console script's reading of its command line (``gateway.entry``): a plain
``run [-c FILE]`` starts the gateway without click, anything else goes to the click CLI
(which then gives the same help, checks and errors as before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.entry import run_arguments


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run"], (True, None)),
        (["run", "-c", "edgebus.yaml"], (True, Path("edgebus.yaml"))),
        (["run", "--config", "edgebus.yaml"], (True, Path("edgebus.yaml"))),
        (["run", "--config=edgebus.yaml"], (True, Path("edgebus.yaml"))),
        ([], (False, None)),
        (["check", "edgebus.yaml"], (False, None)),
        (["run", "--help"], (False, None)),
        (["run", "-h"], (False, None)),
        (["run", "-c"], (False, None)),
        (["run", "-c", "--help"], (False, None)),
        (["run", "--config="], (False, None)),
        (["run", "-cedgebus.yaml"], (False, None)),
        (["run", "-c", "a.yaml", "-c", "b.yaml"], (False, None)),
        (["run", "extra"], (False, None)),
        (["--version"], (False, None)),
    ],
)
def test_only_a_plain_run_skips_click(args: list[str], expected: tuple[bool, Path | None]) -> None:
    assert run_arguments(args) == expected


def test_a_directory_is_left_to_click_which_refuses_it(tmp_path: Path) -> None:
    assert run_arguments(["run", "-c", str(tmp_path)]) == (False, None)
