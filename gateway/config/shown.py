"""How a YAML path and a value are written in a problem's message, in a module that
imports no pydantic (the running gateway names paths in its bind errors)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePath

__all__ = ["format_path", "line_of", "show_value"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def format_path(path: Sequence[str | int]) -> str:
    """``("bridges", 0, "forwards", 2, "qos")`` -> ``bridges[0].forwards[2].qos``."""
    out: list[str] = []
    for element in path:
        if isinstance(element, int):
            out.append(f"[{element}]")
        elif _IDENTIFIER.fullmatch(element):
            out.append(f".{element}" if out else element)
        else:
            out.append(f"[{element!r}]")
    return "".join(out)


def show_value(value: object) -> str:
    """A value as the user wrote it in YAML: ``'abc'``, ``3``, ``true``, ``null``."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, PurePath):
        return repr(str(value))
    return str(value)


def line_of(lines: Mapping[tuple[str | int, ...], int], path: Sequence[str | int]) -> int:
    """The line of ``path`` in ``lines`` (a file's line per path), or of its nearest
    ancestor there; 1 when none is."""
    for end in range(len(path), -1, -1):
        line = lines.get(tuple(path[:end]))
        if line is not None:
            return line
    return 1
