"""YAML text -> plain data, a line for every path, and ``${ENV}`` interpolation.

PyYAML composes the node tree (which keeps every node's position); this module builds
the data from it, recording the line of every mapping key and list item under its
path, so a validation error at ``listeners[0].bind`` can name line 4.

On the way it

- substitutes ``${NAME}`` and ``${NAME:-default}`` in string values (never in keys);
  the default applies when the variable is unset or empty; ``$${`` is a literal ``${``.
  A string is substituted once: a value containing ``${`` is not expanded again.
- reports duplicate keys (PyYAML silently keeps the last one), keys that are not plain
  scalars, unsupported tags and recursive aliases;
- resolves ``<<`` merge keys.

Problems found while building are collected, not raised, so the loader can report them
together with the schema's problems. A YAML syntax error stops everything: it raises
``ConfigError`` naming file, line and column.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from broker_core.errors import ConfigError
from gateway.config.errors import Problem
from gateway.config.introspect import Loc
from gateway.config.shown import line_of

__all__ = ["YamlDocument", "interpolate", "read_yaml"]

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_REFERENCE_SHAPE = "${NAME} or ${NAME:-default}"


@dataclass
class YamlDocument:
    """A parsed file: its data, the line of every path, and the problems found."""

    filename: str
    data: object
    lines: dict[Loc, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: paths whose value had an unresolved ``${VAR}`` (replaced by ""): a schema error
    #: there only restates the problem already reported
    unresolved: set[Loc] = field(default_factory=set)

    def line_of(self, path: Loc) -> int:
        """The line of ``path``, or of its nearest ancestor present in the file."""
        return line_of(self.lines, path)


def interpolate(text: str, env: Mapping[str, str]) -> tuple[str, list[str]]:
    """Substitute ``${NAME}`` / ``${NAME:-default}`` in ``text`` from ``env``.

    Returns the new text and one message per reference that could not be resolved
    (an unset variable without default, or a malformed reference).
    """
    out: list[str] = []
    problems: list[str] = []
    position = 0
    while (start := text.find("${", position)) != -1:
        if start > 0 and text[start - 1] == "$":
            out.append(text[position : start - 1])
            out.append("${")
            position = start + 2
            continue
        out.append(text[position:start])
        match = _REFERENCE.match(text, start)
        if match is None:
            end = text.find("}", start)
            shown = text[start : end + 1] if end != -1 else text[start:]
            problems.append(f"malformed reference {shown!r}; expected {_REFERENCE_SHAPE}")
            position = len(text) if end == -1 else end + 1
            continue
        name, default = match.group(1), match.group(2)
        value = env.get(name)
        if default is not None and not value:
            value = default
        if value is None:
            problems.append(
                f"environment variable {name} is not set"
                f" (write ${{{name}:-default}} to give a default)"
            )
            value = ""
        out.append(value)
        position = match.end()
    out.append(text[position:])
    return "".join(out), problems


class _Builder:
    """Builds plain data from a composed node tree, recording lines and problems."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.lines: dict[Loc, int] = {}
        self.problems: list[Problem] = []
        self.unresolved: set[Loc] = set()
        self._constructor = SafeConstructor()
        self._active: set[int] = set()

    def problem(self, path: Loc, node: Node, message: str) -> None:
        self.problems.append(Problem(path, node.start_mark.line + 1, message))

    def value(self, node: Node, path: Loc) -> object:
        if id(node) in self._active:
            self.problem(path, node, "recursive alias; an anchor cannot contain itself")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                if node.tag != _MAP_TAG:
                    self.problem(path, node, f"unsupported YAML tag {node.tag!r}")
                return self.mapping(node, path)
            if isinstance(node, SequenceNode):
                if node.tag != _SEQ_TAG:
                    self.problem(path, node, f"unsupported YAML tag {node.tag!r}")
                items = []
                for index, item in enumerate(node.value):
                    self.lines[(*path, index)] = item.start_mark.line + 1
                    items.append(self.value(item, (*path, index)))
                return items
            return self.scalar(node, path)
        finally:
            self._active.discard(id(node))

    def scalar(self, node: Node, path: Loc) -> object:
        if node.tag == _STR_TAG:
            text, problems = interpolate(str(node.value), self.env)
            for message in problems:
                self.problem(path, node, message)
            if problems:
                self.unresolved.add(path)
            return text
        try:
            return self._constructor.construct_object(node, deep=True)
        except ConstructorError:
            self.problem(path, node, f"unsupported YAML tag {node.tag!r}")
            return None

    def mapping(self, node: MappingNode, path: Loc) -> dict[str, object]:
        result: dict[str, object] = {}
        own: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                for source in self._merge_sources(key_node, value_node, path):
                    result.update(self.mapping(source, path))
            else:
                own.append((key_node, value_node))
        first_seen: dict[str, int] = {}
        for key_node, value_node in own:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                self.problem(path, key_node, "a key must be a plain string, not a collection")
                continue
            key = str(key_node.value)
            if key in first_seen:
                self.problem(
                    (*path, key), key_node, f"duplicate key (first given on line {first_seen[key]})"
                )
            first_seen[key] = line
            self.lines[(*path, key)] = line
            result[key] = self.value(value_node, (*path, key))
        return result

    def _merge_sources(self, key: Node, node: Node, path: Loc) -> list[MappingNode]:
        """Mappings named by a ``<<`` key, lowest precedence first."""
        if isinstance(node, MappingNode):
            sources = [node]
        elif isinstance(node, SequenceNode) and all(
            isinstance(item, MappingNode) for item in node.value
        ):
            sources = list(reversed(node.value))
        else:
            self.problem(path, key, "a '<<' merge key needs a mapping or a list of mappings")
            return []
        if any(id(source) in self._active for source in sources):
            self.problem(path, key, "recursive alias; an anchor cannot contain itself")
            return []
        return sources


def _indent(line: str) -> int:
    """The column where ``line``'s content starts (after spaces and a list's ``- ``)."""
    stripped = line.lstrip(" ")
    while stripped.startswith("- "):
        stripped = stripped[2:].lstrip(" ")
    return len(line) - len(stripped)


def _previous_line(lines: list[str], index: int) -> int | None:
    """The index of the last line before ``index`` with content (not blank, not a comment)."""
    for before in range(min(index, len(lines)) - 1, -1, -1):
        content = lines[before].strip()
        if content and not content.startswith("#"):
            return before
    return None


def _mapping_value_hint(lines: list[str], line: int, column: int) -> str:
    """Why "mapping values are not allowed here" at ``line`` (0-based), for people."""
    here = lines[line] if line < len(lines) else ""
    if ": " in here[:column].strip():
        return "a value that holds ': ' must be quoted, like \"a: b\""
    previous = _previous_line(lines, line)
    if previous is not None and previous != line:
        above = lines[previous]
        if ":" not in above and not above.strip().startswith("-"):
            return f"line {previous + 1} has no ':' after its key"
        if _indent(here) > _indent(above) and not above.rstrip().endswith(":"):
            return (
                f"line {line + 1} is indented more than line {previous + 1}, so YAML reads it"
                f" as part of that line's value: indent the keys of one mapping alike"
            )
    return "check this line's indentation, and quote a value that holds ': '"


def _hint(exc: yaml.MarkedYAMLError, text: str) -> str | None:
    """A sentence telling a person what usually causes ``exc``, or None."""
    problem, context = exc.problem or "", exc.context or ""
    mark = exc.problem_mark
    assert mark is not None
    opened = "" if exc.context_mark is None else f" on line {exc.context_mark.line + 1}"
    if "'\\t'" in problem:
        return "YAML indents with spaces, never with tabs"
    if "quoted scalar" in context:
        return f"the quote opened{opened} is not closed"
    if "flow sequence" in context:
        return f"the '[' opened{opened} is not closed, or a ',' is missing between items"
    if "flow mapping" in context:
        return f"the '{{' opened{opened} is not closed, or a ',' is missing between items"
    if "another document" in problem:
        return "a configuration file holds one YAML document: remove the '---' line"
    if problem == "mapping values are not allowed here":
        return _mapping_value_hint(text.splitlines(), mark.line, mark.column)
    if problem.startswith("expected <block end>") or "expected ':'" in problem:
        return (
            f"line {mark.line + 1} does not line up with the lines above it: the keys of one"
            " mapping start in the same column, each with ':' after it"
        )
    return None


def _syntax_error(exc: yaml.YAMLError, filename: str, text: str) -> ConfigError:
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[: exc.position]
        line_number = before.count("\n") + 1
        column = exc.position - (before.rfind("\n") + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        message = f"YAML syntax error: character U+{code:04X} is not allowed"
        problem = Problem((), line_number, message, column)
        rendered = problem.render(filename)
        return ConfigError(rendered, [rendered])
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        message = exc.problem or "invalid YAML"
        context = exc.context or ""
        if context and exc.context_mark is not None and exc.context_mark.line != mark.line:
            context += f" started on line {exc.context_mark.line + 1}"
        if context and message.startswith("but "):  # "expected a single document, but..."
            message = f"{context}, {message}"
        elif context:
            message = f"{message} ({context})"
        hint = _hint(exc, text)
        if hint is not None:
            message = f"{message}. Hint: {hint}"
        problem = Problem((), mark.line + 1, f"YAML syntax error: {message}", mark.column + 1)
        line = problem.render(filename)
        return ConfigError(line, [line])
    line = f"{filename}: YAML syntax error: {exc}"
    return ConfigError(line, [line])


def read_yaml(text: str, filename: str, env: Mapping[str, str]) -> YamlDocument:
    """Parse ``text`` (named ``filename`` in messages) into a :class:`YamlDocument`.

    Raises ``ConfigError`` for a YAML syntax error; every other problem is collected
    in the document's ``problems``.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, filename, text) from exc
    if root is None:
        return YamlDocument(filename, None, {(): 1})
    builder = _Builder(env)
    builder.lines[()] = root.start_mark.line + 1
    data = builder.value(root, ())
    return YamlDocument(filename, data, builder.lines, builder.problems, builder.unresolved)
