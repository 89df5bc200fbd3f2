"""Fixtures of the idl_codegen unit tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def write_idl(tmp_path: Path) -> Callable[..., Path]:
    """Write IDL text to ``tmp_path/name`` and return the path."""

    def write(text: str, name: str = "test.idl") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write
