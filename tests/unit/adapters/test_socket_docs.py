"""The configuration examples of docs/adapters/zmq.md and nanomsg.md load as they are."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import parse_config

DOCS = Path(__file__).resolve().parents[3] / "docs" / "adapters"


def examples(name: str) -> list[str]:
    text = (DOCS / name).read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    return [block for block in blocks if block.startswith("adapters:")]


@pytest.mark.parametrize("name", ["zmq.md", "nanomsg.md"])
def test_the_examples_load(name: str) -> None:
    found = examples(name)
    assert found
    for block in found:
        config = parse_config(block, f"docs/adapters/{name}", env={})
        assert config.adapters
