"""The code blocks of a Markdown document and the ``docs-test`` notes that say how to run them.

A fenced block whose info string is ``sh`` is a list of commands to run as printed. An
HTML comment on the line just before a fence (invisible when the Markdown is rendered)
says more, as ``;``-separated directives::

    <!-- docs-test: serves -->                  a long-running command (edgebus run)
    <!-- docs-test: file edgebus.yaml -->       the block's text is that file
    <!-- docs-test: exit 2; expect "OK" -->     exit status, text the output holds
    <!-- docs-test: stdin "pw\\npw\\n" -->        what the commands read
    <!-- docs-test: skip (reason) -->          not run, and why

``console`` blocks are transcripts (commands with their output, credentials left out)
and ``yaml``/``json``/``python`` blocks without a ``file`` note are illustrations:
neither is run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "blocks_of", "parse_note"]

_NOTE = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->$")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


@dataclass
class Block:
    """One fenced block, with what its note says."""

    path: Path
    line: int  # of the opening fence
    language: str
    text: str
    serves: bool = False
    file: str | None = None
    exit_status: int = 0
    expect: list[str] = field(default_factory=list)
    stdin: str = ""
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def _unescape(text: str) -> str:
    return text.encode("utf-8").decode("unicode_escape")


def parse_note(note: str, block: Block) -> None:
    """Applies the directives of a ``docs-test`` note to ``block``."""
    for directive in filter(None, (part.strip() for part in note.split(";"))):
        word, _, rest = directive.partition(" ")
        quoted = _QUOTED.search(rest)
        if word == "serves":
            block.serves = True
        elif word == "file":
            block.file = rest.strip()
        elif word == "exit":
            block.exit_status = int(rest)
        elif word == "expect" and quoted:
            block.expect.append(_unescape(quoted.group(1)))
        elif word == "stdin" and quoted:
            block.stdin = _unescape(quoted.group(1))
        elif word == "skip" and rest.strip():
            block.skip = rest.strip()
        else:
            raise ValueError(f"{block.where}: unknown docs-test directive {directive!r}")


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("```"):
            index += 1
            continue
        language = line[3:].strip()
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        block = Block(path, index + 1, language, "\n".join(lines[index + 1 : end]) + "\n")
        note = _NOTE.match(lines[index - 1].strip()) if index else None
        if note:
            parse_note(note.group(1), block)
        blocks.append(block)
        index = end + 1
    return blocks
