"""The fields a rule's result can hold, known from its statement, and the fields of an
action's templates that it never holds.

A result is what the SELECT gives (``gateway.rules.compiler``): ``AS name`` names a
field, an expression without ``AS`` is named by its text, and a field without ``AS``
keeps its path (``SELECT payload.a.b`` gives ``{"payload": {"a": {"b": ...}}}``).
``SELECT *`` gives every column of the row, whose names depend on the message or event
(``meta.<key>``, ``properties.user_properties.<key>``): with it any field may be there.

A value may be an object at run time (``SELECT payload.obj AS o``, ``SELECT meta``), so
a template's field below a selected one (``{o.x}``) may be there too, and so may one
above a selected path (``{payload.a}`` of ``SELECT payload.a.b``). A field is refused
only when no selected field is on its path: then every result lacks it, and a topic
template naming it fails the action on every result (``MappingError``), a payload
template renders it empty on every result.

Topic templates render as ``Republish.run`` does (``gateway.rules.actions``):
``{payload.x}`` and ``{key.x}`` also read into the result's ``payload`` field.
Payload templates as ``render_payload``: ``{a.b}`` and ``{list[0]}`` walk the result.
"""

from __future__ import annotations

import re
import string

from gateway.rules.fields import EVENT_COMMON_COLUMNS, EVENT_MESSAGE_COLUMNS, MESSAGE_COLUMNS
from gateway.rules.nodes import Field, Statement

__all__ = [
    "PLACEHOLDER",
    "case_clashes",
    "payload_fields",
    "result_columns",
    "result_fields",
    "sqlite_columns",
    "star_columns",
    "unselected_fields",
]

#: A payload template's placeholder: ``{field}``, ``{payload.a.b}``, ``{list[0]}``; other
#: braces (a JSON template's) stay as they are.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+|\[-?\d+\])*)\}")

Path = tuple[str, ...]


def result_fields(statement: Statement) -> tuple[Path, ...] | None:
    """The fields of the statement's results, each as its path (``("payload", "a", "b")``
    for ``SELECT payload.a.b``, ``("t",)`` for ``... AS t``); None for ``SELECT *``."""
    fields: list[Path] = []
    for item in statement.fields:
        if item.expr is None:
            return None
        if item.alias is not None:
            fields.append(tuple(item.alias.split(".")))
        else:
            assert isinstance(item.expr, Field)  # the parser names other expressions
            fields.append(tuple(str(part) for part in item.expr.path))
    return tuple(fields)


def result_columns(statement: Statement) -> tuple[str, ...] | None:
    """The top-level fields of the statement's results, in order, each once (the columns
    a ``sqlite`` action makes of them: ``t`` for ``... AS t``, ``payload`` for ``SELECT
    payload.a.b``); None for ``SELECT *``."""
    names: list[str] = []
    for item in statement.fields:
        if item.expr is None:
            return None
        if item.alias is not None:
            name = item.alias
        else:
            assert isinstance(item.expr, Field)  # the parser names other expressions
            name = str(item.expr.path[0])
        if name not in names:
            names.append(name)
    return tuple(names)




def star_columns(statement: Statement) -> tuple[str, ...]:
    """The columns ``SELECT *`` gives on a row of each of the statement's sources, that
    a row of the source always has: a message's (``topic``, ``clientid``, ``payload``,
    ...), an event's (``event``, ``timestamp``, ``clientid``, ...)."""
    names: list[str] = []
    for source in statement.sources:
        if not source.startswith("$events/") or source == "$events/message_publish":
            found: tuple[str, ...] = (*MESSAGE_COLUMNS, "node")
        elif source.startswith("$events/message_"):
            found = (*EVENT_COMMON_COLUMNS, *EVENT_MESSAGE_COLUMNS)
        else:
            found = EVENT_COMMON_COLUMNS
        names.extend(name for name in found if name not in names)
    return tuple(names)


def sqlite_columns(statement: Statement) -> tuple[str, ...]:
    """The columns a ``sqlite`` action makes of the statement's results: ``*``'s
    (``star_columns``) and the other top-level fields (``result_columns``)."""
    names: list[str] = []
    for item in statement.fields:
        if item.expr is None:
            found = star_columns(statement)
        elif item.alias is not None:
            found = (item.alias,)
        else:
            assert isinstance(item.expr, Field)  # the parser names other expressions
            found = (str(item.expr.path[0]),)
        names.extend(name for name in found if name not in names)
    return tuple(names)


def case_clashes(names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The groups of ``names`` that differ only in the case of ASCII letters (which
    SQLite takes as one column name: ``a`` and ``A``)."""
    groups: dict[bytes, list[str]] = {}
    for name in names:
        groups.setdefault(name.encode("utf-8", "surrogatepass").lower(), []).append(name)
    return [tuple(group) for group in groups.values() if len(group) > 1]


def payload_fields(template: str) -> tuple[str, ...]:
    """The fields a payload template's placeholders name, as written."""
    return tuple(match.group(1) for match in PLACEHOLDER.finditer(template))


def _split(field: str) -> Path:
    """``list[0].a`` -> ``("list", "0", "a")``."""
    return tuple(field.replace("[", ".").replace("]", "").split("."))


def _on_a_path(wanted: Path, selected: tuple[Path, ...]) -> bool:
    """True when a selected field is ``wanted``, above it or below it."""
    return any(wanted[: len(path)] == path or path[: len(wanted)] == wanted for path in selected)


def unselected_fields(statement: Statement, template: str, *, topic: bool) -> list[str]:
    """The fields ``template`` names that no result of ``statement`` holds, as written;
    ``topic``: a topic template (else a payload template). Empty for ``SELECT *``."""
    selected = result_fields(statement)
    if selected is None:
        return []
    if topic:
        named = [field for _, field, _, _ in string.Formatter().parse(template) if field]
    else:
        named = list(payload_fields(template))
    missing: list[str] = []
    for field in named:
        wanted = _split(field)
        if _on_a_path(wanted, selected):
            continue
        # a topic's {payload.x} / {key.x} also reads into the result's payload field
        into_payload = topic and wanted[0] in ("payload", "key") and len(wanted) > 1
        if into_payload and _on_a_path(("payload", *wanted[1:]), selected):
            continue
        if field not in missing:
            missing.append(field)
    return missing
