"""The IDL preprocessor: comments, ``#include``, ``#define`` and conditionals.

It turns a set of main IDL files into one text for the lexer, together with the
origin (file and line) of every output line, so that every later error can name the
file, line and column it comes from.

What it does, per main file (one translation unit):

- comments (``//`` and ``/* */``) become spaces, so columns stay true;
- ``#include "f"`` searches the including file's directory, then the include
  directories in order; ``#include <f>`` searches the include directories, then the
  including file's directory. Every file is read at most once per run (as if each had
  ``#pragma once``): IDL definitions cannot legally be repeated, and rosidl-generated
  IDL has no include guards;
- object-like ``#define NAME value`` and ``#undef``; ``NAME`` is then replaced in the
  text; function-like macros are reported as unsupported;
- ``#ifdef``, ``#ifndef``, ``#if`` (``defined``, integer arithmetic, comparisons and
  logic), ``#elif``, ``#else``, ``#endif``;
- ``#error`` and ``#warning``; ``#line`` is ignored; ``#pragma once`` is honoured and
  every other ``#pragma`` line is passed to the parser (which knows ``keylist``).
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from idl_codegen.diagnostics import Diagnostics, Location

__all__ = ["PreprocessedSource", "Preprocessor", "SourceFile", "is_macro_name", "strip_comments"]

_MAX_INCLUDE_DEPTH = 64
_IDENT_OR_LITERAL = re.compile(
    r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|\d[\w.]*|[A-Za-z_]\w*'
)
_DIRECTIVE = re.compile(r"\s*#\s*([A-Za-z_]\w*)?(.*)$")
_MACRO_NAME = re.compile(r"[A-Za-z_]\w*")


def is_macro_name(name: str) -> bool:
    """True when ``name`` can be defined as a macro (an ASCII identifier)."""
    return name.isascii() and _MACRO_NAME.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class SourceFile:
    """An IDL file that was read: where it is, how errors name it, how provenance names it."""

    path: Path
    display: str
    provenance: str


@dataclass(slots=True)
class PreprocessedSource:
    """The preprocessed text of all main files and the origin of each of its lines."""

    lines: list[str] = field(default_factory=list)
    origins: list[tuple[str, int]] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)
    #: Lines where macros expanded, by index: where each stretch of the output line
    #: starts, where its source starts, and whether it is an expansion (every column of
    #: which is its macro name's column), so that errors keep the source's columns.
    expanded: dict[int, list[tuple[int, int, bool]]] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def location(self, line_index: int, column: int) -> Location:
        """The location of 0-based output line ``line_index`` and 1-based ``column``."""
        if not self.origins:
            return Location("<input>", 1, column)
        index = min(max(line_index, 0), len(self.origins) - 1)
        file, line = self.origins[index]
        stretches = self.expanded.get(index)
        if stretches is not None:
            offset = column - 1
            found = bisect.bisect_right(stretches, (offset, sys.maxsize, True)) - 1
            if found >= 0:
                start, source_start, expansion = stretches[found]
                column = source_start + 1 + (0 if expansion else offset - start)
        return Location(file, line, column)


def strip_comments(text: str, report: Callable[[int, int, str], None]) -> str:
    """Replace every comment by spaces (keeping newlines), outside string and char literals.

    ``report(line, column, message)`` receives an unterminated block comment.
    """
    out: list[str] = []
    i = 0
    n = len(text)
    line = 1
    line_start = 0
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            i += 1
            line += 1
            line_start = i
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                report(line, i - line_start + 1, "unterminated comment")
                end = n
            else:
                end += 2
            chunk = text[i:end]
            out.append("".join("\n" if ch == "\n" else " " for ch in chunk))
            newlines = chunk.count("\n")
            if newlines:
                line += newlines
                line_start = i + chunk.rfind("\n") + 1
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n) if j < n and text[j] == c else j
            out.append(text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


@dataclass(slots=True)
class _Conditional:
    parent_active: bool
    active: bool
    taken: bool
    seen_else: bool
    location: Location


class Preprocessor:
    """Preprocesses main IDL files into one :class:`PreprocessedSource`."""

    def __init__(
        self,
        include_dirs: Sequence[str | Path],
        diagnostics: Diagnostics,
        defines: dict[str, str] | None = None,
    ) -> None:
        self._include_dirs = [Path(d) for d in include_dirs]
        self._diag = diagnostics
        self._initial_defines = dict(defines or {})
        for name in self._initial_defines:
            if not is_macro_name(name):
                raise ValueError(f"{name!r} is not a macro name (a letter or '_', then letters, "
                                 "digits or '_')")
        self._macros: dict[str, str] = {}
        self._once: set[Path] = set()
        self._out = PreprocessedSource()

    def run(self, main_files: Sequence[str | Path]) -> PreprocessedSource:
        for main in main_files:
            path = Path(main)
            self._macros = dict(self._initial_defines)
            display = str(main)
            self._include(path, display, self._provenance_name(path), None, 0)
        return self._out

    # -- files -------------------------------------------------------------------------

    def _provenance_name(self, path: Path) -> str:
        resolved = path.resolve()
        for directory in self._include_dirs:
            try:
                return resolved.relative_to(directory.resolve()).as_posix()
            except ValueError:
                continue
        return path.name

    def _include(
        self,
        path: Path,
        display: str,
        provenance: str,
        where: Location | None,
        depth: int,
    ) -> None:
        resolved = path.resolve()
        if resolved in self._once:
            return
        self._once.add(resolved)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            self._diag.error(where or Location(display, 1, 1), f"cannot read {display}: {reason}")
            return
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        self._out.files.append(SourceFile(path, display, provenance))
        self._process(text.replace("\r\n", "\n").replace("\r", "\n"), path, display, depth)

    def _find_include(self, name: str, quoted: bool, current: Path) -> Path | None:
        here = [current.parent]
        candidates = here + self._include_dirs if quoted else self._include_dirs + here
        for directory in candidates:
            candidate = directory / name
            if candidate.is_file():
                return candidate
        return None

    # -- lines -------------------------------------------------------------------------

    def _emit(self, text: str, display: str, line: int) -> None:
        self._out.lines.append(text)
        self._out.origins.append((display, line))

    def _process(self, text: str, path: Path, display: str, depth: int) -> None:
        def report(line: int, column: int, message: str) -> None:
            self._diag.error(Location(display, line, column), message)

        lines = strip_comments(text, report).split("\n")
        stack: list[_Conditional] = []
        index = 0
        while index < len(lines):
            line = lines[index]
            lineno = index + 1
            index += 1
            match = _DIRECTIVE.match(line)
            active = not stack or stack[-1].active
            if match is None:
                self._emit(self._expand_line(line) if active else "", display, lineno)
                continue
            # join continuation lines of a directive
            continued = 0
            while line.endswith("\\") and index < len(lines):
                line = line[:-1] + " " + lines[index]
                index += 1
                continued += 1
            match = _DIRECTIVE.match(line)
            assert match is not None
            name = match.group(1) or ""
            rest = match.group(2).strip()
            column = line.index("#") + 1
            where = Location(display, lineno, column)
            self._emit("", display, lineno)
            self._directive(name, rest, where, stack, active, path, depth)
            for extra in range(continued):
                self._emit("", display, lineno + extra + 1)
        for open_conditional in stack:
            self._diag.error(open_conditional.location, "unterminated conditional directive")

    def _directive(
        self,
        name: str,
        rest: str,
        where: Location,
        stack: list[_Conditional],
        active: bool,
        path: Path,
        depth: int,
    ) -> None:
        if name in ("ifdef", "ifndef", "if"):
            if not active:
                stack.append(_Conditional(False, False, True, False, where))
                return
            if name == "if":
                value = self._evaluate(rest, where)
            else:
                macro = self._macro_name(rest, name, where)
                value = (macro in self._macros) == (name == "ifdef")
            stack.append(_Conditional(True, value, value, False, where))
            return
        if name in ("elif", "else", "endif"):
            if not stack:
                self._diag.error(where, f"#{name} without #if")
                return
            top = stack[-1]
            if name == "endif":
                stack.pop()
            elif top.seen_else:
                self._diag.error(where, f"#{name} after #else")
            elif name == "else":
                top.seen_else = True
                top.active = top.parent_active and not top.taken
                top.taken = True
            else:
                value = (
                    top.parent_active and not top.taken and self._evaluate(rest, where)
                )
                top.active = value
                top.taken = top.taken or value
            return
        if not active:
            return
        if name == "include":
            self._directive_include(rest, where, path, depth)
        elif name == "define":
            self._define(rest, where)
        elif name == "undef":
            self._macros.pop(self._macro_name(rest, name, where), None)
        elif name == "pragma":
            if rest.split()[:1] == ["once"]:
                return
            indent = " " * (where.column - 1)  # so the parser reports the right column
            self._out.lines[-1] = indent + "#pragma " + self._expand(rest)
        elif name == "error":
            self._diag.error(where, f"#error {rest}".rstrip())
        elif name == "warning":
            self._diag.warn(where, f"#warning {rest}".rstrip())
        elif name == "line" or name == "":
            return
        else:
            self._diag.error(where, f"unknown preprocessor directive '#{name}'")

    def _directive_include(self, rest: str, where: Location, path: Path, depth: int) -> None:
        text = self._expand(rest) if not rest.startswith(("<", '"')) else rest
        match = re.fullmatch(r'"([^"]+)"|<([^>]+)>', text.strip())
        if match is None:
            self._diag.error(where, 'expected "FILE" or <FILE> after #include')
            return
        quoted = match.group(1) is not None
        name = match.group(1) or match.group(2)
        if depth >= _MAX_INCLUDE_DEPTH:
            self._diag.error(where, "#include nested too deeply")
            return
        found = self._find_include(name, quoted, path)
        if found is None:
            self._diag.error(where, f'cannot find include file "{name}"')
            return
        display = found.as_posix() if found.is_absolute() else str(found)
        self._include(found, display, self._provenance_name(found), where, depth + 1)

    def _macro_name(self, rest: str, directive: str, where: Location) -> str:
        match = _MACRO_NAME.match(rest)
        if match is None:
            self._diag.error(where, f"expected a macro name after #{directive}")
            return ""
        return match.group(0)

    def _define(self, rest: str, where: Location) -> None:
        match = _MACRO_NAME.match(rest)
        if match is None:
            self._diag.error(where, "expected a macro name after #define")
            return
        name = match.group(0)
        body = rest[match.end():]
        if body.startswith("("):
            self._diag.error(where, f"function-like macro '{name}' is not supported")
            return
        self._macros[name] = body.strip()

    # -- macro expansion ---------------------------------------------------------------

    def _expand_line(self, text: str) -> str:
        """``text`` with its macros expanded, and where the columns moved recorded."""
        if not self._macros:
            return text
        parts: list[str] = []
        stretches: list[tuple[int, int, bool]] = []
        done = 0  # of text
        length = 0  # of the output so far
        for match in _IDENT_OR_LITERAL.finditer(text):
            name = match.group(0)
            if name not in self._macros:
                continue
            start, end = match.span()
            parts.append(text[done:start])
            length += start - done
            expansion = self._expand(self._macros[name], frozenset({name}))
            stretches.append((length, start, True))
            parts.append(expansion)
            length += len(expansion)
            stretches.append((length, end, False))
            done = end
        if not stretches:
            return text
        parts.append(text[done:])
        self._out.expanded[len(self._out.lines)] = stretches
        return "".join(parts)

    def _expand(self, text: str, active: frozenset[str] = frozenset()) -> str:
        if not self._macros:
            return text

        def replace(match: re.Match[str]) -> str:
            token = match.group(0)
            if token in self._macros and token not in active:
                return self._expand(self._macros[token], active | {token})
            return token

        return _IDENT_OR_LITERAL.sub(replace, text)

    # -- #if expressions ---------------------------------------------------------------

    def _evaluate(self, expression: str, where: Location) -> bool:
        def defined(match: re.Match[str]) -> str:
            return "1" if match.group(1) in self._macros else "0"

        text = re.sub(r"\bdefined\s*\(\s*([A-Za-z_]\w*)\s*\)", defined, expression)
        text = re.sub(r"\bdefined\s+([A-Za-z_]\w*)", defined, text)
        text = self._expand(text)
        try:
            return _ConditionParser(text).parse() != 0
        except ValueError as exc:
            self._diag.error(where, f"invalid #if expression: {exc}")
            return False


_COND_TOKEN = re.compile(
    r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|([A-Za-z_]\w*)"
    r"|(&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%()!<>~&|^]))"
)
_BINARY_PRECEDENCE = {
    "||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
    "<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9,
    "*": 10, "/": 10, "%": 10,
}


class _ConditionParser:
    """Integer expressions of ``#if`` lines, by precedence climbing."""

    def __init__(self, text: str) -> None:
        self._tokens: list[tuple[str, int | str]] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            match = _COND_TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"unexpected {text[pos:].strip()!r}")
            if match.group(1) is not None:
                self._tokens.append(("num", _c_integer(match.group(1))))
            elif match.group(2) is not None:
                self._tokens.append(("num", 0))  # an undefined identifier is 0
            else:
                self._tokens.append(("op", match.group(3)))
            pos = match.end()
        self._pos = 0

    def parse(self) -> int:
        if not self._tokens:
            raise ValueError("empty expression")
        value = self._binary(1)
        if self._pos != len(self._tokens):
            raise ValueError(f"unexpected {self._tokens[self._pos][1]!r}")
        return value

    def _next(self) -> tuple[str, int | str]:
        if self._pos >= len(self._tokens):
            raise ValueError("unexpected end of expression")
        token = self._tokens[self._pos]
        self._pos += 1
        return token

    def _unary(self) -> int:
        kind, value = self._next()
        if kind == "num":
            assert isinstance(value, int)
            return value
        if value == "(":
            inner = self._binary(1)
            if self._next() != ("op", ")"):
                raise ValueError("expected ')'")
            return inner
        if value == "!":
            return int(not self._unary())
        if value == "-":
            return -self._unary()
        if value == "+":
            return self._unary()
        if value == "~":
            return ~self._unary()
        raise ValueError(f"unexpected {value!r}")

    def _binary(self, min_precedence: int) -> int:
        left = self._unary()
        while self._pos < len(self._tokens):
            kind, op = self._tokens[self._pos]
            precedence = _BINARY_PRECEDENCE.get(str(op), 0) if kind == "op" else 0
            if precedence < min_precedence or precedence == 0:
                break
            self._pos += 1
            right = self._binary(precedence + 1)
            left = _apply(str(op), left, right)
        return left


def _c_integer(text: str) -> int:
    """A C integer literal without suffix: decimal, ``0x`` hexadecimal or ``0`` octal."""
    if text[:2].lower() == "0x":
        return int(text[2:], 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text)


def _apply(op: str, left: int, right: int) -> int:
    if op in ("/", "%") and right == 0:
        raise ValueError("division by zero")
    results: dict[str, Callable[[int, int], int]] = {
        "||": lambda a, b: int(bool(a) or bool(b)),
        "&&": lambda a, b: int(bool(a) and bool(b)),
        "|": lambda a, b: a | b,
        "^": lambda a, b: a ^ b,
        "&": lambda a, b: a & b,
        "==": lambda a, b: int(a == b),
        "!=": lambda a, b: int(a != b),
        "<": lambda a, b: int(a < b),
        ">": lambda a, b: int(a > b),
        "<=": lambda a, b: int(a <= b),
        ">=": lambda a, b: int(a >= b),
        "<<": lambda a, b: a << b,
        ">>": lambda a, b: a >> b,
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: int(a / b),
        "%": lambda a, b: a - b * int(a / b),
    }
    return results[op](left, right)
