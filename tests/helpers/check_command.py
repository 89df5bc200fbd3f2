"""``edgebus check`` on a configuration written to a real file, as a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main

__all__ = ["QUIET", "check"]

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
