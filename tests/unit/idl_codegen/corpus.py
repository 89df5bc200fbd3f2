"""The IDL corpus the idl_codegen tests share, and small helpers around it."""

from __future__ import annotations

import os
from pathlib import Path

from idl_codegen.generate import Generated, generate

__all__ = ["CASES", "ERRORS", "EXPECTED", "IDL", "UPDATE_GOLDEN", "generate_case"]

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "idl_codegen"
IDL = GOLDEN / "idl"
EXPECTED = GOLDEN / "expected"
ERRORS = GOLDEN / "errors"
UPDATE_GOLDEN = os.environ.get("EDGEBUS_UPDATE_GOLDEN") == "1"

# case name -> (main IDL files, include directories)
CASES: dict[str, tuple[list[Path], list[Path]]] = {
    "hello": ([IDL / "hello" / "HelloWorldData.idl"], []),
    "hello_key": ([IDL / "hello_key" / "HelloWorldData.idl"], []),
    "vehicle": ([IDL / "vehicle" / "signals.idl"], []),
    "kitchen": ([IDL / "kitchen" / "kitchen.idl"], []),
    "edge": ([IDL / "edge" / "edge.idl"], []),
    "ros2": (sorted((IDL / "ros2").rglob("*.idl")), [IDL / "ros2"]),
}


def generate_case(name: str, targets: tuple[str, ...] = ("python", "jsonschema")) -> Generated:
    files, include_dirs = CASES[name]
    return generate(files, include_dirs, targets)
