"""The IDL lexer: preprocessed text -> tokens, each with its file, line and column.

Identifiers keep their spelling; a leading underscore (IDL's escape for names that
clash with keywords) is removed and the token is marked ``escaped``. ``#pragma`` lines
left by the preprocessor become one ``PRAGMA`` token holding the rest of the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from idl_codegen.diagnostics import Diagnostics, Location
from idl_codegen.preprocess import PreprocessedSource

__all__ = ["Token", "TokenKind", "tokenize"]


class TokenKind(Enum):
    IDENT = "identifier"
    INT = "integer literal"
    FLOAT = "floating-point literal"
    CHAR = "character literal"
    WCHAR = "wide character literal"
    STRING = "string literal"
    WSTRING = "wide string literal"
    PUNCT = "punctuation"
    PRAGMA = "#pragma"
    EOF = "end of input"


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str
    value: object
    location: Location
    escaped: bool = False

    def describe(self) -> str:
        """How an error message names this token: ``'}'``, ``identifier 'x'``, ..."""
        if self.kind is TokenKind.PUNCT:
            return f"'{self.text}'"
        if self.kind is TokenKind.EOF:
            return "end of input"
        if self.kind is TokenKind.IDENT:
            return f"'{self.text}'"
        if self.kind is TokenKind.PRAGMA:
            return "#pragma"
        return f"{self.kind.value} {self.text}"


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[dDfF]?|\d+[eE][+-]?\d+[dDfF]?|\d+[dD])
  | (?P<int>0[xX][0-9a-fA-F]+|\d+)
  | (?P<wchar>L'(?:\\.|[^'\\])*')
  | (?P<wstring>L"(?:\\.|[^"\\])*")
  | (?P<char>'(?:\\.|[^'\\])*')
  | (?P<string>"(?:\\.|[^"\\])*")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>::|<<|>>|[{}()\[\]<>;,:=+\-*/%~|^&@])
    """,
    re.VERBOSE,
)
_SIMPLE_ESCAPES = {
    "n": "\n", "t": "\t", "v": "\v", "b": "\b", "r": "\r", "f": "\f", "a": "\a",
    "\\": "\\", "?": "?", "'": "'", '"': '"',
}
_ESCAPE = re.compile(
    r"\\(?:([ntvbrfa\\?'\"])|([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|(.))"
)


def _unescape(body: str, report: list[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        simple, octal, hexa, uni, other = match.groups()
        if simple is not None:
            return _SIMPLE_ESCAPES[simple]
        if octal is not None:
            return chr(int(octal, 8))
        if hexa is not None:
            return chr(int(hexa, 16))
        if uni is not None:
            return chr(int(uni, 16))
        report.append(f"unknown escape sequence '\\{other}'")
        return str(other)

    return _ESCAPE.sub(replace, body)


def _integer(text: str) -> int:
    if text[:2].lower() == "0x":
        return int(text[2:], 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text)


def tokenize(source: PreprocessedSource, diagnostics: Diagnostics) -> list[Token]:
    """All tokens of ``source``, ending with one ``EOF`` token."""
    tokens: list[Token] = []
    for index, line in enumerate(source.lines):
        stripped = line.lstrip()
        if stripped.startswith("#"):
            column = len(line) - len(stripped) + 1
            rest = stripped[1:].strip()
            if rest.startswith("pragma"):
                rest = rest[len("pragma"):].strip()
            tokens.append(Token(TokenKind.PRAGMA, rest, rest, source.location(index, column)))
            continue
        _tokenize_line(line, index, source, diagnostics, tokens)
    last = len(source.lines) - 1
    end_column = len(source.lines[last]) + 1 if source.lines else 1
    tokens.append(Token(TokenKind.EOF, "", None, source.location(last, end_column)))
    return tokens


def _tokenize_line(
    line: str,
    index: int,
    source: PreprocessedSource,
    diagnostics: Diagnostics,
    tokens: list[Token],
) -> None:
    pos = 0
    while pos < len(line):
        match = _TOKEN.match(line, pos)
        where = source.location(index, pos + 1)
        if match is None:
            char = line[pos]
            if char in "\"'":
                diagnostics.error(where, "unterminated " + (
                    "string literal" if char == '"' else "character literal"))
                return
            diagnostics.error(where, f"unexpected character {char!r}")
            pos += 1
            continue
        kind = match.lastgroup
        text = match.group(0)
        end = match.end()
        if kind == "ws":
            pos = end
            continue
        glued = end < len(line) and (line[end].isalnum() or line[end] == "_")
        if kind in ("int", "float") and glued:
            tail = re.match(r"\w*", line[end:])
            bad = text + (tail.group(0) if tail else "")
            diagnostics.error(where, f"invalid number '{bad}'")
            pos = end + (len(bad) - len(text))
            continue
        problems: list[str] = []
        if kind == "int":
            try:
                tokens.append(Token(TokenKind.INT, text, _integer(text), where))
            except ValueError:
                diagnostics.error(where, f"invalid number '{text}'")
        elif kind == "float":
            tokens.append(Token(TokenKind.FLOAT, text, float(text.rstrip("dDfF")), where))
        elif kind in ("char", "wchar"):
            body = _unescape(text[2:-1] if kind == "wchar" else text[1:-1], problems)
            if len(body) != 1:
                problems.append("a character literal holds exactly one character")
            token_kind = TokenKind.CHAR if kind == "char" else TokenKind.WCHAR
            tokens.append(Token(token_kind, text, body[:1], where))
        elif kind in ("string", "wstring"):
            body = _unescape(text[2:-1] if kind == "wstring" else text[1:-1], problems)
            token_kind = TokenKind.STRING if kind == "string" else TokenKind.WSTRING
            tokens.append(Token(token_kind, text, body, where))
        elif kind == "ident":
            if text.startswith("_") and len(text) > 1:
                tokens.append(Token(TokenKind.IDENT, text[1:], text[1:], where, escaped=True))
            else:
                tokens.append(Token(TokenKind.IDENT, text, text, where))
        else:
            tokens.append(Token(TokenKind.PUNCT, text, text, where))
        for problem in problems:
            diagnostics.error(where, problem)
        pos = end
