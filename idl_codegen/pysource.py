"""Python source text for the emitter: literals, import blocks, wrapping, lint markers.

Generated files must pass ruff with the project's rules, so imports are laid out as
ruff's isort does (standard library, third party, then the file's own top-level
package; names in isort order), long annotations are broken at their brackets, and the
few rules a generated name has to break (a member called ``l``, ``typing.Optional``
that cyclonedds requires, an unbreakable long line) carry a ``noqa`` for that rule only.
"""

from __future__ import annotations

import math
import re
import textwrap

from idl_codegen.model import Value

__all__ = [
    "LIMIT",
    "LINE",
    "docstring_lines",
    "import_blocks",
    "isort_name_key",
    "noqa",
    "noqa_long",
    "python_literal",
    "wrap",
    "wrap_all",
]

LINE = 99
LIMIT = 100  # the line length ruff checks; longer lines get a noqa comment for E501


def python_literal(value: Value) -> str:
    """A deterministic Python literal for ``value`` (strings in double quotes)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else 'float("-inf")'
        return repr(value)
    text = repr(value)
    if text.startswith("'") and '"' not in value:
        text = '"' + text[1:-1].replace("\\'", "'") + '"'
    return text



def wrap_all(lines: list[str]) -> list[str]:
    if len(lines[-1]) <= LINE:
        return lines
    names = lines[-1][len("__all__ = ["):-1].split(", ")
    return lines[:-1] + ["__all__ = ["] + [f"    {name}," for name in names] + ["]"]



_STDLIB = frozenset({"builtins", "collections", "dataclasses", "typing"})


def natural(text: str) -> tuple[str | int, ...]:
    return tuple(int(part) if index % 2 else part
                 for index, part in enumerate(re.split(r"(\d+)", text)))


def isort_name_key(name: str) -> tuple[int, tuple[str | int, ...]]:
    """ruff's isort-style order: CONSTANTS, then Classes, then everything else."""
    if len(name) > 1 and name.upper() == name and any(c.isalpha() for c in name):
        category = 0
    elif name[:1].isupper():
        category = 1
    else:
        category = 2
    return category, natural(name)


def import_blocks(plain: list[str], entries: list[tuple[str, str, str | None]],
                   root: str) -> list[str]:
    """Import lines as ruff's isort lays them out: standard library, third party, then
    the file's own top-level package (first party), each block sorted."""
    sections: dict[int, list[tuple[tuple[int, tuple[str | int, ...]], str]]] = {}

    def add(section: int, module: str, straight: bool, line: str) -> None:
        key = (0 if straight else 1, natural(module.lower()))
        sections.setdefault(section, []).append((key, line))

    def section_of(module: str) -> int:
        top = module.split(".")[0]
        return 0 if top in _STDLIB else 2 if top == root else 1

    for line in plain:
        module = line.split()[1]
        add(section_of(module), module, True, line)
    grouped: dict[str, list[str]] = {}
    for module, name, alias in entries:
        if alias is None:
            grouped.setdefault(module, [])
            if name not in grouped[module]:
                grouped[module].append(name)
        else:
            add(section_of(module), module + "\x01" + name, False,
                f"from {module} import {name} as {alias}")
    for module, names in grouped.items():
        names = sorted(names, key=isort_name_key)
        line = f"from {module} import {', '.join(names)}"
        if len(line) > LIMIT:
            line = "\n".join([f"from {module} import ("] + [f"    {n}," for n in names] + [")"])
        add(section_of(module), module, False, line)
    out: list[str] = []
    for section in sorted(sections):
        if out:
            out.append("")
        out += [line for _, line in sorted(sections[section], key=lambda item: item[0])]
    return out


def docstring_lines(text: str) -> list[str]:
    return textwrap.wrap(text, width=LINE, break_long_words=False, break_on_hyphens=False)


_AMBIGUOUS = frozenset({"l", "O", "I"})  # ruff E741


def noqa(lines: list[str], name: str, codes: list[str]) -> list[str]:
    """Mark the first of ``lines`` with the ruff rules a generated name has to break."""
    codes = codes + (["E741"] if name in _AMBIGUOUS else [])
    if codes:
        lines = [lines[0] + "  # noqa: " + ", ".join(codes), *lines[1:]]
    return lines


def noqa_long(line: str) -> str:
    """Mark a line ruff would find too long (it does not count pragma comments)."""
    code = line
    for pragma in ("  # type: ignore", "  # noqa"):
        if pragma in code:
            code = code[: code.index(pragma)]
    if len(code) <= LIMIT or len(code.split()) == 1:  # ruff lets a single long word pass
        return line
    if "  # noqa: " in line:
        return line + ", E501"
    return line + "  # noqa: E501"



def wrap(line: str, indent: str) -> list[str]:
    """Break an over-long ``name: Annotated[A, B] = default`` line at its brackets."""
    if len(line) <= LINE or "_typing.Annotated[" not in line:
        return [line]
    head, _, rest = line.partition("_typing.Annotated[")
    depth = 0
    split_at = -1
    end = -1
    for index, char in enumerate(rest):
        if char in "([":
            depth += 1
        elif char in ")]":
            if depth == 0:
                end = index
                break
            depth -= 1
        elif char == "," and depth == 0 and split_at < 0:
            split_at = index
    if split_at < 0 or end < 0:
        return [line]
    first = rest[:split_at].strip()
    second = rest[split_at + 1:end].strip()
    tail = rest[end + 1:]
    return [f"{head}_typing.Annotated[", f"{indent}    {first},", f"{indent}    {second},",
            f"{indent}]{tail}"]
