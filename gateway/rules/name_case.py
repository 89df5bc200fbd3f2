"""Names of a rule that differ only by case from a column: warnings, not errors.

Names keep their case (docs/rules.md, "Upgrading"): before, unquoted names were
lower-cased, so ``Topic`` meant the column ``topic``; now it is a field no row has, NULL
on every message, and a rule written for the old behaviour runs without a word. A
top-level name of the SELECT or WHERE (``Topic``, ``ClientId.x``) that is not a column of
the statement's sources but is one in another case is reported, and so is a template's
(``{Topic}``) after ``SELECT *``, whose results hold the columns as they are named (a
template naming no field of an explicit SELECT is refused on its own:
``config.models.rules.template_problems``). ``edgebus check`` prints them as warnings
and the engine logs them when it installs the rule (start, reload, the API).
"""

from __future__ import annotations

import string
from collections.abc import Iterable

from gateway.rules.fields import EVENT_COLUMNS, MESSAGE_COLUMNS
from gateway.rules.nodes import (
    Binary,
    Call,
    Case,
    Expr,
    Field,
    InList,
    IsNull,
    Like,
    ListLiteral,
    Statement,
    Unary,
)
from gateway.rules.selected import PLACEHOLDER

__all__ = ["case_slips", "case_warnings", "template_case_slips"]

_MESSAGE = (*MESSAGE_COLUMNS, "node")


def _fold(name: str) -> str:
    return name.encode("utf-8", "surrogatepass").lower().decode("utf-8", "surrogatepass")


def _columns(statement: Statement) -> dict[str, str]:
    """The columns of the statement's sources, by their folded name."""
    events = any(source.startswith("$events/") for source in statement.sources)
    messages = any(not source.startswith("$events/") for source in statement.sources)
    names = (*(_MESSAGE if messages else ()), *(EVENT_COLUMNS if events else ()))
    return {_fold(name): name for name in names}


def _heads(expr: Expr | None) -> Iterable[str]:
    """The first part of each field of ``expr`` (without recursion: nesting is bounded
    by the parser, chains of AND / OR are not)."""
    pending: list[Expr] = [] if expr is None else [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, Field):
            if node.path and isinstance(node.path[0], str):
                yield node.path[0]
        elif isinstance(node, Binary):
            pending += (node.right, node.left)
        elif isinstance(node, Unary):
            pending.append(node.operand)
        elif isinstance(node, Call | ListLiteral):
            pending += reversed(node.args if isinstance(node, Call) else node.items)
        elif isinstance(node, InList):
            pending += (node.options, node.value)
        elif isinstance(node, Like):
            pending += (node.pattern, node.value)
        elif isinstance(node, IsNull):
            pending.append(node.value)
        elif isinstance(node, Case):
            for when, then in reversed(node.branches):
                pending += (then, when)
            pending += [e for e in (node.default, node.subject) if e is not None]


def _aliases(statement: Statement) -> set[str]:
    return {item.alias.split(".")[0] for item in statement.fields if item.alias is not None}


def case_slips(statement: Statement) -> list[tuple[str, str]]:
    """``(name, column)`` for each top-level name of the SELECT and WHERE that is not a
    column (nor an alias of the SELECT) but differs only by case from one, in order."""
    columns = _columns(statement)
    aliases = _aliases(statement)
    found: list[tuple[str, str]] = []
    exprs = [item.expr for item in statement.fields]
    for expr in [*exprs, statement.where]:
        for name in _heads(expr):
            column = columns.get(_fold(name))
            if column is None or name == column or name in aliases:
                continue
            if (name, column) not in found:
                found.append((name, column))
    return found


def template_case_slips(
    statement: Statement, template: str, *, topic: bool
) -> list[tuple[str, str]]:
    """``(name, column)`` for each top-level name of ``template`` (a topic template, else
    a payload template) that differs only by case from a column ``SELECT *`` gives and
    is no other field of the result; nothing without ``*``."""
    if all(item.expr is not None for item in statement.fields):
        return []
    columns = _columns(statement)
    given = _aliases(statement) | {
        str(item.expr.path[0])
        for item in statement.fields
        if isinstance(item.expr, Field) and item.alias is None
    }
    if topic:
        named = [field for _, field, _, _ in string.Formatter().parse(template) if field]
    else:
        named = [match.group(1) for match in PLACEHOLDER.finditer(template)]
    found: list[tuple[str, str]] = []
    for field in named:
        name = field.replace("[", ".").split(".")[0]
        column = columns.get(_fold(name))
        if column is None or name == column or name in given:
            continue
        if (name, column) not in found:
            found.append((name, column))
    return found


def case_warnings(
    rule: str, statement: Statement, actions: Iterable[object]
) -> list[tuple[tuple[str | int, ...], str]]:
    """The warnings of ``case_slips`` and ``template_case_slips`` for rule ``rule``,
    each with its path relative to the rule (``("sql",)``, ``("actions", 0, "topic")``)."""
    warnings: list[tuple[tuple[str | int, ...], str]] = [
        (
            ("sql",),
            f"rule {rule!r}: {name!r} is not a column, NULL on every row (names keep their"
            f" case); did you mean {column!r}?",
        )
        for name, column in case_slips(statement)
    ]
    for index, action in enumerate(actions):
        for key in ("topic", "payload"):
            template = getattr(action, key, None)
            if not isinstance(template, str):
                continue
            for name, column in template_case_slips(statement, template, topic=key == "topic"):
                warnings.append((
                    ("actions", index, key),
                    f"rule {rule!r}: {key} template {template!r} names {name!r}, which is"
                    f" no field of the result (names keep their case); did you mean"
                    f" {column!r}?",
                ))  # fmt: skip
    return warnings
