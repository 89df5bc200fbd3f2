"""broker_core/mqtt is sans-I/O: it imports no asyncio, socket, selectors or clock."""

from __future__ import annotations

import ast
from pathlib import Path

import broker_core.mqtt

FORBIDDEN = {"asyncio", "socket", "selectors", "time", "threading", "ssl", "datetime"}


def test_mqtt_package_imports_no_io_or_clock() -> None:
    root = Path(broker_core.mqtt.__file__).parent
    offenders = []
    for path in sorted(root.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module.split(".")[0]]
            else:
                continue
            offenders += [f"{path.name}:{node.lineno} {m}" for m in mods if m in FORBIDDEN]
    assert offenders == []


def test_broker_core_imports_nothing_from_the_layers_above() -> None:
    root = Path(broker_core.mqtt.__file__).parents[1]
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                if top in {"gateway", "adapters", "bridge", "spark_sink", "idl_codegen"}:
                    offenders.append(f"{path}:{node.lineno} {node.module}")
    assert offenders == []
