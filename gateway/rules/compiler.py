"""``compile_statement(sql)``: a rule statement as Python closures over a ``Row``.

The syntax tree is turned once into nested closures, so evaluating a rule on a message
walks no tree and looks nothing up by name. Unknown functions, wrong argument counts,
bad topic filters and unknown ``$events/`` sources are ``RuleSyntaxError``-s naming
their position, found here, when the rule is created, not when a message arrives.
The rule engine's taps run a message through ``message``, the same WHERE and SELECT
generated as one Python function (``gateway.rules.codegen``); the closures evaluate
broker events and are what the generated code falls back on.

Semantics:

- a field that is missing (``payload.x`` of a non-JSON payload, an index past the end)
  is NULL (None); a comparison with NULL is NULL, and WHERE passes only a true value;
  ``IS NULL`` / ``IS NOT NULL`` test for it;
- a number compared with, or added to, a numeric string compares or adds as numbers;
  ``+`` with a non-numeric string concatenates, as does ``||``;
- ``/`` divides (a division by zero fails the rule), ``div`` divides integers,
  ``%`` / ``mod`` is the remainder;
- ``LIKE`` patterns: ``%`` any run of characters, ``_`` one character;
- ``topic =~ 't/#'``: the topic matches the filter (EMQX's ``=~``);
- ``SELECT payload.a.b`` without ``AS`` keeps the path (``{"payload": {"a": {"b": ..}}}``);
  an expression without ``AS`` is named by its text; ``*`` is every column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker_core.context import Context
from broker_core.mqtt.topics import filter_matches, topic_filter_problem
from broker_core.observe import EVENT_KINDS, BrokerEvent, MessagePublish
from gateway.rules.codegen import MessageProgram, message_program
from gateway.rules.fields import MESSAGE_COLUMNS, MessageRow, Row
from gateway.rules.functions import FUNCTIONS, RuleEvaluationError, to_number, to_text
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
    Literal,
    Statement,
    Unary,
    chain_operands,
)
from gateway.rules.parser import RuleSyntaxError, parse
from gateway.rules.values import (
    OPERATORS,
    add,
    arith,
    compare,
    like_pattern,
    nest,
    truthy,
    walk,
)

__all__ = ["EVENT_SOURCES", "CompiledStatement", "compile_statement"]

Getter = Callable[[Row], Any]

#: ``$events/<name>`` sources: every broker event but ``message.publish`` (which is
#: the plain topic filter), e.g. ``$events/client_connected``.
EVENT_SOURCES: dict[str, type[BrokerEvent]] = {
    "$events/" + kind.NAME.replace(".", "_"): kind
    for kind in EVENT_KINDS
    if kind is not MessagePublish
}


@dataclass(frozen=True, slots=True)
class CompiledStatement:
    sql: str
    statement: Statement
    topics: tuple[str, ...]  # topic filters of FROM
    events: tuple[type[BrokerEvent], ...]  # event kinds of FROM
    where: Getter | None
    select: Callable[[Row], dict[str, Any]]
    message: MessageProgram  # WHERE and SELECT on a message, compiled to one function

    def matches(self, row: Row) -> bool:
        return self.where is None or self.where(row) is True


def compile_statement(sql: str) -> CompiledStatement:
    """Parses and compiles ``sql``; ``RuleSyntaxError`` on any problem."""
    statement = parse(sql)
    compiler = _Compiler(sql)
    topics: list[str] = []
    events: list[type[BrokerEvent]] = []
    positions = statement.source_positions or (0,) * len(statement.sources)
    for source, pos in zip(statement.sources, positions, strict=True):
        if source.startswith("$events/"):
            kind = EVENT_SOURCES.get(source)
            if kind is None:
                known = ", ".join(sorted(EVENT_SOURCES))
                raise RuleSyntaxError(f"unknown event source {source!r} (one of {known})", sql,
                                      pos)  # fmt: skip
            events.append(kind)
            continue
        problem = topic_filter_problem(source)
        if problem is not None:
            raise RuleSyntaxError(f"bad topic filter {source!r}: {problem}", sql, pos)
        topics.append(source)
    where = None if statement.where is None else compiler.expr(statement.where)
    select = compiler.select(statement)

    def closures(context: Context, row: Row | None) -> dict[str, Any] | None:
        assert row is not None
        return select(row) if where is None or where(row) is True else None

    message = message_program(statement, compiler.expr, closures)
    return CompiledStatement(sql, statement, tuple(topics), tuple(events), where, select, message)


# -- comparisons and columns ---------------------------------------------------------------


def _compare_constant(op: str, left: Getter, constant: Any, column: _Column | None) -> Getter:
    """A comparison with a literal: values of the literal's own type (the usual case:
    ``payload.temp > 30``, ``clientid = 'a'``) compare at once, others as ``compare``;
    a message's column (``qos < 2``) is read straight from the Context."""
    direct = OPERATORS[op]
    numeric = isinstance(constant, int | float) and not isinstance(constant, bool)
    kinds = (int, float) if numeric else (type(constant),)
    if column is not None:
        head, read = column

        def compare_column(row: Row) -> bool | None:
            value = read(row.context) if type(row) is MessageRow else row.column(head)
            if type(value) in kinds:
                return bool(direct(value, constant))
            return compare(op, value, constant)

        return compare_column

    def compare_value(row: Row) -> bool | None:
        value = left(row)
        if type(value) in kinds:
            return bool(direct(value, constant))
        return compare(op, value, constant)

    return compare_value


#: A message's column by name and its reader from the Context.
_Column = tuple[str, Callable[[Context], Any]]


def _column_of(node: Expr) -> _Column | None:
    """The message column ``node`` names (``topic``, ``qos``, ...), or None."""
    if isinstance(node, Field) and len(node.path) == 1:
        head = str(node.path[0])
        read = MESSAGE_COLUMNS.get(head)
        if read is not None:
            return head, read
    return None


def _select_columns(columns: list[tuple[str, _Column]]) -> Callable[[Row], dict[str, Any]]:
    readers = [(name, read) for name, (_, read) in columns]
    heads = [(name, head) for name, (head, _) in columns]

    def select_columns(row: Row) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if type(row) is MessageRow:
            context = row.context
            for name, read in readers:  # a loop: a comprehension is a call more
                out[name] = read(context)
        else:
            for name, head in heads:
                out[name] = row.column(head)
        return out

    return select_columns


# -- chains -------------------------------------------------------------------------------

#: Operators whose left-deep chains (``a + b - c``) are folded in a loop.
_FOLDED = frozenset({"+", "-", "*", "/", "%", "div", "||"})


def _fold_steps(node: Binary) -> tuple[Expr, list[tuple[str, Expr]]]:
    """A left-deep chain of ``_FOLDED`` operators as its first operand and the
    ``(operator, right operand)`` steps applied to it in order."""
    steps: list[tuple[str, Expr]] = []
    current: Expr = node
    while isinstance(current, Binary) and current.op in _FOLDED:
        steps.append((current.op, current.right))
        current = current.left
    steps.reverse()
    return current, steps


def _concat(a: Any, b: Any) -> Any:
    return None if a is None or b is None else to_text(a) + to_text(b)


def _apply_of(op: str) -> Callable[[Any, Any], Any]:
    if op == "+":
        return add
    if op == "||":
        return _concat
    return arith(op)


# -- compiler -----------------------------------------------------------------------------


class _Compiler:
    def __init__(self, sql: str) -> None:
        self.sql = sql

    def select(self, statement: Statement) -> Callable[[Row], dict[str, Any]]:
        # (getter, name, path): name for "AS name" and one-level fields, path for
        # "payload.a.b" kept nested; no getter: "*".
        items: list[tuple[Getter | None, str, tuple[str | int, ...]]] = []
        for item in statement.fields:
            if item.expr is None:
                items.append((None, "*", ()))
            elif item.alias is not None:
                items.append((self.expr(item.expr), item.alias, ()))
            else:
                assert isinstance(item.expr, Field)  # others are named by their text
                path = item.expr.path
                nested = path if len(path) > 1 else ()
                items.append((self.expr(item.expr), str(path[0]), nested))
        columns = [
            (name, column)
            for item, (_, name, path) in zip(statement.fields, items, strict=True)
            if item.expr is not None and not path and (column := _column_of(item.expr))
        ]
        if len(columns) == len(items):  # only message columns: read from the Context
            return _select_columns(columns)

        def select(row: Row) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for getter, name, path in items:
                if getter is None:
                    out.update(row.as_dict())
                elif path:
                    nest(out, path, getter(row))
                else:
                    out[name] = getter(row)
            return out

        return select

    def expr(self, node: Expr) -> Getter:
        if isinstance(node, Literal):
            value = node.value
            return lambda row: value
        if isinstance(node, Field):
            return self.field(node)
        if isinstance(node, ListLiteral):
            items = [self.expr(item) for item in node.items]
            return lambda row: [item(row) for item in items]
        if isinstance(node, Unary):
            operand = self.expr(node.operand)
            if node.op == "NOT":
                return lambda row: not truthy(operand(row))
            return lambda row: None if (v := operand(row)) is None else -to_number(v)
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, InList):
            return self.in_list(node)
        if isinstance(node, Like):
            return self.like(node)
        if isinstance(node, IsNull):
            value_of = self.expr(node.value)
            if node.negated:
                return lambda row: value_of(row) is not None
            return lambda row: value_of(row) is None
        if isinstance(node, Case):
            return self.case(node)
        return self.call(node)

    def field(self, node: Field) -> Getter:
        head, rest = str(node.path[0]), node.path[1:]
        if head == "payload" and rest:
            return lambda row: walk(row.json(), rest)
        if head == "meta" and rest:
            key = ".".join(str(part) for part in rest)

            def meta(row: Row) -> Any:
                found = row.meta(key)  # type: ignore[attr-defined]
                return found if found is not None else walk(row.column("meta"), rest)

            return meta
        column = MESSAGE_COLUMNS.get(head)
        if column is not None and not rest:  # a message's column straight from its Context

            def message_column(row: Row) -> Any:
                if type(row) is MessageRow:
                    return column(row.context)
                return row.column(head)

            return message_column
        if not rest:
            return lambda row: row.column(head)
        return lambda row: walk(row.column(head), rest)

    def binary(self, node: Binary) -> Getter:
        op = node.op
        if op in ("AND", "OR"):
            return self.boolean(op, [self.expr(operand) for operand in chain_operands(node)])
        first, steps = _fold_steps(node)
        if len(steps) > 1:  # ``a + b - c || d``: a left-deep chain, folded in a loop
            return self.fold(self.expr(first), [(op, self.expr(right)) for op, right in steps])
        left, right = self.expr(node.left), self.expr(node.right)
        if op == "=~":
            return self.topic_match(node, left, right)
        if op in ("=", "!=", "<", "<=", ">", ">="):
            if isinstance(node.right, Literal) and node.right.value is not None:
                return _compare_constant(op, left, node.right.value, _column_of(node.left))
            return lambda row: compare(op, left(row), right(row))
        if op == "+":
            return lambda row: add(left(row), right(row))
        if op == "||":

            def concat(row: Row) -> Any:
                a, b = left(row), right(row)
                return None if a is None or b is None else to_text(a) + to_text(b)

            return concat
        apply = arith(op)
        return lambda row: apply(left(row), right(row))

    def topic_match(self, node: Binary, left: Getter, right: Getter) -> Getter:
        """``topic =~ 't/#'``: whether the left side, a topic, matches the right, a topic
        filter (EMQX's ``=~``); NULL when either is NULL. A literal filter is checked
        here, when the rule is created."""
        if isinstance(node.right, Literal) and isinstance(node.right.value, str):
            topic_filter = node.right.value
            problem = topic_filter_problem(topic_filter)
            if problem is not None:
                raise RuleSyntaxError(f"bad topic filter {topic_filter!r} after =~: {problem}",
                                      self.sql, node.right.pos)  # fmt: skip

            def matches_literal(row: Row) -> bool | None:
                topic = left(row)
                return None if topic is None else filter_matches(topic_filter, to_text(topic))

            return matches_literal

        def matches(row: Row) -> bool | None:
            topic, found = left(row), right(row)
            if topic is None or found is None:
                return None
            text = to_text(found)
            problem = topic_filter_problem(text)
            if problem is not None:
                raise RuleEvaluationError(f"bad topic filter {text!r} after =~: {problem}")
            return filter_matches(text, to_text(topic))

        return matches

    @staticmethod
    def boolean(op: str, tests: list[Getter]) -> Getter:
        """``AND`` / ``OR`` of any number of operands, evaluated in order until one
        decides (True or False, as a pair of them gives)."""
        if len(tests) == 2:
            left, right = tests
            if op == "AND":
                return lambda row: (
                    ((a := left(row)) is True or truthy(a))
                    and ((b := right(row)) is True or truthy(b))
                )
            return lambda row: (
                ((a := left(row)) is True or truthy(a)) or ((b := right(row)) is True or truthy(b))
            )
        if op == "AND":

            def every(row: Row) -> bool:
                return all(truthy(test(row)) for test in tests)

            return every

        def any_of(row: Row) -> bool:
            return any(truthy(test(row)) for test in tests)

        return any_of

    @staticmethod
    def fold(first: Getter, steps: list[tuple[str, Getter]]) -> Getter:
        """A left-deep chain of arithmetic and ``||`` (``((a + b) - c) || d``) as one
        loop over its operands: the same values as the nested operators, with no
        recursion however long the chain."""
        applied = [(_apply_of(op), right) for op, right in steps]

        def folded(row: Row) -> Any:
            value = first(row)
            for apply, right in applied:
                value = apply(value, right(row))
            return value

        return folded

    def in_list(self, node: InList) -> Getter:
        value_of = self.expr(node.value)
        negated = node.negated
        options = node.options
        if isinstance(options, ListLiteral) and all(isinstance(i, Literal) for i in options.items):
            constants = [i.value for i in options.items]  # type: ignore[union-attr]

            def member(row: Row) -> bool | None:
                value = value_of(row)
                if value is None:
                    return None
                found = any(compare("=", value, c) for c in constants)
                return found != negated

            return member
        options_of = self.expr(options)

        def member_of(row: Row) -> bool | None:
            value, choices = value_of(row), options_of(row)
            if value is None or not isinstance(choices, list):
                return None
            return any(compare("=", value, c) for c in choices) != negated

        return member_of

    def like(self, node: Like) -> Getter:
        value_of = self.expr(node.value)
        negated = node.negated
        if isinstance(node.pattern, Literal) and isinstance(node.pattern.value, str):
            match = like_pattern(node.pattern.value).fullmatch
            column = _column_of(node.value)
            if column is not None and not negated:  # ``topic LIKE 'a/%'``: from the Context
                head, read = column

                def like_column(row: Row) -> bool | None:
                    value = read(row.context) if type(row) is MessageRow else row.column(head)
                    if value is None:
                        return None
                    text = value if type(value) is str else to_text(value)
                    return match(text) is not None

                return like_column

            def like_constant(row: Row) -> bool | None:
                value = value_of(row)
                if value is None:
                    return None
                return (match(value if type(value) is str else to_text(value)) is not None) != (
                    negated
                )

            return like_constant
        pattern_of = self.expr(node.pattern)

        def like(row: Row) -> bool | None:
            value, pattern = value_of(row), pattern_of(row)
            if value is None or pattern is None:
                return None
            return (like_pattern(to_text(pattern)).fullmatch(to_text(value)) is not None) != negated

        return like

    def case(self, node: Case) -> Getter:
        subject = None if node.subject is None else self.expr(node.subject)
        branches = [(self.expr(when), self.expr(then)) for when, then in node.branches]
        default = None if node.default is None else self.expr(node.default)

        def case(row: Row) -> Any:
            value = None if subject is None else subject(row)
            for when, then in branches:
                test = when(row)
                if (compare("=", value, test) if subject is not None else truthy(test)) is True:
                    return then(row)
            return None if default is None else default(row)

        return case

    def call(self, node: Call) -> Getter:
        found = FUNCTIONS.get(node.name)
        if found is None:
            raise RuleSyntaxError(f"unknown function {node.name!r}", self.sql, node.pos)
        function, least, most = found
        count = len(node.args)
        if count < least or (most is not None and count > most):
            wanted = str(least) if least == most else (
                f"{least} or more" if most is None else f"{least} to {most}")  # fmt: skip
            raise RuleSyntaxError(
                f"{node.name}() takes {wanted} argument{'s' if wanted != '1' else ''}, got {count}",
                self.sql,
                node.pos,
            )
        args = [self.expr(arg) for arg in node.args]
        if not args:
            return lambda row: function()
        if len(args) == 1:
            only = args[0]
            return lambda row: function(only(row))
        return lambda row: function(*(arg(row) for arg in args))
