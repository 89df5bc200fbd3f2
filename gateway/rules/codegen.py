"""``message_program``: a statement's WHERE and SELECT on a message, as one Python function.

The rule engine's taps run a rule on every message its FROM matches, in the broker's
path, so this is the code that costs the broker speed. The statement is turned once,
when the rule is created, into the source of one function; ``WHERE qos < 2 AND topic
LIKE 'bench/%'`` with ``SELECT topic, qos, clientid`` becomes (``_k..`` are constants)::

    def run(c, row):  # c: the Context; row: its MessageRow, or None
        if not (((v1 < _k6 if type(v1 := c.qos) in _k5 else compare('<', v1, _k6))
                 is True) and ((v2.startswith(_k7) if type(v2 := c.topic) is str
                 else like_value(v2, _k8, False)) is True)):
            return None  # WHERE is not true
        return {'topic': c.topic, 'qos': c.qos, 'clientid': c.origin.name}

and the same WHERE and SELECT apart, as ``passes(c, row)`` (True or False) and
``select(c, row)``: the taps run ``passes`` while the message is routed and the rule
engine's action worker runs ``select`` later, for the results it acts on (each says
whether it reads the row). All three are
compiled with ``compile()``: a message runs no loop over a tree of closures, and a
statement that reads only message columns reads them straight from the Context
(``row`` is None: no row is built, the payload is not decoded). A tree too deep for
Python's own parser (deeper than the rule parser allows) runs on the closures.

It means exactly what ``gateway.rules.compiler``'s closures mean (the unit tests run
both on a table of statements and on generated WHERE clauses): a comparison with a
literal of the value's own type is Python's, any other goes through ``values.compare``;
a ``LIKE`` pattern without ``_`` whose ``%`` are at its ends is ``startswith`` /
``endswith`` / ``in`` / ``==`` on text. Every other expression (arithmetic, functions,
``CASE``, ``IN``, ``meta.*``, ``node``) is the compiler's closure, called with the row
(``needs_row``): generated code stays small and the compiler stays the one definition
of those. Errors in a statement were
reported with their position by the compiler, before any code is generated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker_core.clock import wall_offset_ns
from broker_core.context import Context
from gateway.rules.fields import MESSAGE_COLUMNS, Row
from gateway.rules.functions import to_text
from gateway.rules.nodes import (
    Binary,
    Expr,
    Field,
    IsNull,
    Like,
    Literal,
    Statement,
    Unary,
    chain_operands,
)
from gateway.rules.values import compare, like_pattern, nest, truthy, walk

__all__ = ["MessageProgram", "message_program"]

Getter = Callable[[Row], Any]
#: ``run(context, row)``: the SELECT output, or None when WHERE is not true; raises
#: what evaluating the statement raises.
Run = Callable[[Context, Row | None], dict[str, Any] | None]

#: Message columns read from the Context by the generated code itself (as
#: ``fields.MESSAGE_COLUMNS`` reads them); the others call their reader.
_CONTEXT_COLUMNS = {
    "id": "c.id",
    "topic": "c.topic",
    "qos": "c.qos",
    "retain": "c.retain",
    "clientid": "c.origin.name",
    "origin": "c.origin.protocol",
    # received_at is on the broker's clock: shown on the wall clock (broker_core.clock)
    "timestamp": "(c.received_at + wall_offset_ns()) // 1000000",
    "publish_received_at": "(c.received_at + wall_offset_ns()) // 1000000",
}

_PYTHON_OPERATORS = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


#: ``passes(context, row)``: whether WHERE is true (True when there is no WHERE).
Passes = Callable[[Context, Row | None], bool]
#: ``select(context, row)``: the SELECT output (of a message that passed WHERE).
Select = Callable[[Context, Row | None], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class MessageProgram:
    run: Run
    needs_row: bool  # run reads the row (the payload, a closure): pass one
    source: str  # the generated functions, for reading and debugging
    #: WHERE and SELECT apart (the taps decide on the broker's path, the action worker
    #: builds the output), each with whether it reads the row.
    passes: Passes | None = None  # None: there is no WHERE
    passes_needs_row: bool = False
    select: Select | None = None
    select_needs_row: bool = True


def _like_value(value: Any, test: Callable[[str], bool], negated: bool) -> bool | None:
    """``LIKE`` on a value that is not text (as the compiler's ``like_constant``)."""
    if value is None:
        return None
    return test(value if type(value) is str else to_text(value)) != negated


#: What a piece of generated code gives: always True or False; True, False or NULL;
#: any value.
BOOL, NULLABLE_BOOL, ANY = "bool", "bool or NULL", "any"


@dataclass(frozen=True, slots=True)
class _Code:
    source: str
    kind: str = ANY


class _Generator:
    def __init__(self, closure: Callable[[Expr], Getter]) -> None:
        self.closure = closure
        self.names: dict[str, Any] = {
            "compare": compare,
            "nest": nest,
            "truthy": truthy,
            "walk": walk,
            "like_value": _like_value,
            "wall_offset_ns": wall_offset_ns,
        }
        self.needs_row = False
        self._temps = 0

    def constant(self, value: Any) -> str:
        name = f"_k{len(self.names)}"
        self.names[name] = value
        return name

    def temp(self) -> str:
        self._temps += 1
        return f"v{self._temps}"

    def fallback(self, node: Expr) -> _Code:
        """The compiler's closure for ``node``, called with the row."""
        self.needs_row = True
        return _Code(f"{self.constant(self.closure(node))}(row)")

    def truth(self, code: _Code) -> str:
        """``code`` as True or False (a condition of AND, OR, NOT, WHERE)."""
        if code.kind == BOOL:
            return code.source
        if code.kind == NULLABLE_BOOL:
            return f"({code.source} is True)"
        v = self.temp()
        return f"(({v} := {code.source}) is True or truthy({v}))"

    def expr(self, node: Expr) -> _Code:
        if isinstance(node, Literal):
            value = node.value
            if value is None or isinstance(value, bool):
                return _Code(repr(value), BOOL if isinstance(value, bool) else ANY)
            return _Code(self.constant(value))
        if isinstance(node, Field):
            return self.field(node)
        if isinstance(node, Binary) and node.op in ("AND", "OR"):  # flat: no recursion
            tests = [self.truth(self.expr(operand)) for operand in chain_operands(node)]
            return _Code("(" + f" {node.op.lower()} ".join(tests) + ")", BOOL)
        if isinstance(node, Binary) and node.op in _PYTHON_OPERATORS:
            return self.comparison(node)
        if isinstance(node, Unary) and node.op == "NOT":
            return _Code(f"(not {self.truth(self.expr(node.operand))})", BOOL)
        if isinstance(node, IsNull):
            test = "is not" if node.negated else "is"
            return _Code(f"({self.expr(node.value).source} {test} None)", BOOL)
        pattern = (
            node.pattern.value
            if isinstance(node, Like) and isinstance(node.pattern, Literal)
            else None
        )
        if isinstance(node, Like) and isinstance(pattern, str):
            return self.like(node, pattern)
        return self.fallback(node)

    def field(self, node: Field) -> _Code:
        head, rest = str(node.path[0]), node.path[1:]
        if head == "payload" and rest:
            self.needs_row = True
            return _Code(f"walk(row.json(), {self.constant(rest)})")
        if rest:
            return self.fallback(node)
        inline = _CONTEXT_COLUMNS.get(head)
        if inline is not None:
            return _Code(inline)
        read = MESSAGE_COLUMNS.get(head)
        if read is not None:
            return _Code(f"{self.constant(read)}(c)")
        return self.fallback(node)  # node, or no such column (NULL)

    def comparison(self, node: Binary) -> _Code:
        left = self.expr(node.left)
        op = node.op
        if not (isinstance(node.right, Literal) and node.right.value is not None):
            right = self.expr(node.right)
            return _Code(f"compare({op!r}, {left.source}, {right.source})", NULLABLE_BOOL)
        constant = node.right.value
        numeric = isinstance(constant, int | float) and not isinstance(constant, bool)
        kinds = self.constant((int, float) if numeric else (type(constant),))
        value, k = self.temp(), self.constant(constant)
        direct = f"{value} {_PYTHON_OPERATORS[op]} {k}"
        slow = f"compare({op!r}, {value}, {k})"
        source = f"({direct} if type({value} := {left.source}) in {kinds} else {slow})"
        return _Code(source, NULLABLE_BOOL)

    def like(self, node: Like, pattern: str) -> _Code:
        """``LIKE`` with a literal pattern: on text, a string method where the pattern
        has only ``%`` at its ends, else the pattern's regular expression."""
        value = self.temp()
        test = _text_test(pattern)
        inner = pattern.strip("%")
        if "%" in inner or "_" in inner:
            on_text = f"{self.constant(test)}({value})"
        else:
            starts, ends, k = pattern.startswith("%"), pattern.endswith("%"), self.constant(inner)
            on_text = (
                f"({k} in {value})" if starts and ends
                else f"{value}.startswith({k})" if ends
                else f"{value}.endswith({k})" if starts
                else f"({value} == {k})"
            )  # fmt: skip
        if node.negated:
            on_text = f"(not {on_text})"
        otherwise = f"like_value({value}, {self.constant(test)}, {node.negated})"
        source = self.expr(node.value).source
        source = f"({on_text} if type({value} := {source}) is str else {otherwise})"
        return _Code(source, NULLABLE_BOOL)

    def select(self, statement: Statement) -> list[str]:
        """The lines returning the SELECT output (names as ``compiler.select``)."""
        items: list[tuple[str, str, tuple[str | int, ...] | None]] = []  # name, code, path
        for item in statement.fields:
            if item.expr is None:
                self.needs_row = True
                items.append(("*", "", None))
            elif item.alias is not None:
                items.append((item.alias, self.expr(item.expr).source, ()))
            else:
                assert isinstance(item.expr, Field)  # others are named by their text
                field_path = item.expr.path
                code = self.expr(item.expr).source
                nested = field_path if len(field_path) > 1 else ()
                items.append((str(field_path[0]), code, nested))
        if all(path == () for _, _, path in items):
            pairs = ", ".join(f"{name!r}: {code}" for name, code, _ in items)
            return [f"return {{{pairs}}}"]
        lines = ["out = {}"]
        for name, code, path in items:
            if path is None:
                lines.append("out.update(row.as_dict())")
            elif path:
                lines.append(f"nest(out, {self.constant(path)}, {code})")
            else:
                lines.append(f"out[{name!r}] = {code}")
        return [*lines, "return out"]


def _text_test(pattern: str) -> Callable[[str], bool]:
    """Whether a text matches a ``LIKE`` pattern (``%`` any run, ``_`` one character)."""
    match = like_pattern(pattern).fullmatch
    return lambda text: match(text) is not None


def message_program(
    statement: Statement, closure: Callable[[Expr], Getter], closures: Run
) -> MessageProgram:
    """The statement's WHERE and SELECT on a message as one compiled function;
    ``closure(node)`` is the compiler's closure of an expression (the fallback for
    what is not inlined), ``closures`` the whole statement as closures (for a statement
    nested too deep for Python's own parser)."""
    generator = _Generator(closure)
    lines = ["def run(c, row):"]
    apart: list[str] = []
    if statement.where is not None:
        where = generator.expr(statement.where)
        test = f"not {where.source}" if where.kind == BOOL else f"{where.source} is not True"
        lines += [f"    if {test}:", "        return None"]
        true = where.source if where.kind == BOOL else f"({where.source} is True)"
        apart += ["def passes(c, row):", f"    return {true}"]
    where_row, generator.needs_row = generator.needs_row, False
    select = ["    " + line for line in generator.select(statement)]
    select_row = generator.needs_row
    lines += select
    lines += apart
    lines += ["def select(c, row):", *select]
    source = "\n".join(lines) + "\n"
    try:
        code = compile(source, "<rule statement>", "exec")
    except (SyntaxError, RecursionError, MemoryError):  # too many nested parentheses
        test_where = None if statement.where is None else closure(statement.where)

        def passes(c: Context, row: Row | None) -> bool:
            assert test_where is not None and row is not None
            return test_where(row) is True

        def output(c: Context, row: Row | None) -> dict[str, Any]:
            out = closures(c, row)  # WHERE again: only for a tree this deep
            assert out is not None
            return out

        where_passes = None if test_where is None else passes
        return MessageProgram(closures, True, "", where_passes, True, output, True)
    namespace = dict(generator.names)
    exec(code, namespace)
    return MessageProgram(
        namespace["run"],
        where_row or select_row,
        source,
        namespace.get("passes"),
        where_row,
        namespace["select"],
        select_row,
    )
