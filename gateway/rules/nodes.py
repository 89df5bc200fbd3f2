"""The syntax tree of a rule statement: what ``parser.parse`` returns.

Every node is a frozen dataclass carrying ``pos``, its offset in the statement (0-based),
so the compiler can name where a problem is (an unknown function, a wrong argument count).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Binary",
    "Call",
    "Case",
    "Expr",
    "Field",
    "InList",
    "IsNull",
    "Like",
    "ListLiteral",
    "Literal",
    "SelectItem",
    "Statement",
    "Unary",
    "chain_operands",
]


@dataclass(frozen=True, slots=True)
class Literal:
    value: object  # str, int, float, bool or None
    pos: int


@dataclass(frozen=True, slots=True)
class Field:
    """A column path: ``payload.a.b`` is ``("payload", "a", "b")``, ``payload.list[0]``
    is ``("payload", "list", 0)``."""

    path: tuple[str | int, ...]
    pos: int

    @property
    def text(self) -> str:
        out = ""
        for part in self.path:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out


@dataclass(frozen=True, slots=True)
class ListLiteral:
    items: tuple[Expr, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-", "NOT"
    operand: Expr
    pos: int


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # + - * / % = != < <= > >= AND OR ||
    left: Expr
    right: Expr
    pos: int


@dataclass(frozen=True, slots=True)
class InList:
    value: Expr
    options: Expr  # a ListLiteral, or any expression giving a list
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class Like:
    value: Expr
    pattern: Expr
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class IsNull:
    value: Expr
    negated: bool
    pos: int


@dataclass(frozen=True, slots=True)
class Case:
    """``CASE [subject] WHEN a THEN b ... [ELSE c] END``."""

    subject: Expr | None
    branches: tuple[tuple[Expr, Expr], ...]
    default: Expr | None
    pos: int


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # lower case
    args: tuple[Expr, ...]
    pos: int


Expr = Literal | Field | ListLiteral | Unary | Binary | InList | Like | IsNull | Case | Call


@dataclass(frozen=True, slots=True)
class SelectItem:
    """One item of the SELECT list: ``*`` (``expr`` None) or an expression and its name."""

    expr: Expr | None
    alias: str | None
    pos: int


@dataclass(frozen=True, slots=True)
class Statement:
    fields: tuple[SelectItem, ...]
    sources: tuple[str, ...]  # topic filters and $events/... names, as written
    where: Expr | None
    source_positions: tuple[int, ...] = ()  # offset of each source in the statement


def chain_operands(node: Binary) -> list[Expr]:
    """The operands of a chain of ``node``'s operator (``a AND b AND c``, however it
    nests), in order, found without recursion: a flat chain of thousands of terms
    compiles as well as a short one (only nesting is bounded: ``parser.MAX_DEPTH``)."""
    op = node.op
    operands: list[Expr] = []
    pending: list[Expr] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, Binary) and current.op == op:
            pending.append(current.right)
            pending.append(current.left)
        else:
            operands.append(current)
    return operands
