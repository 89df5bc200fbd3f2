"""``parse(sql)``: a rule statement to its syntax tree, by recursive descent.

Grammar (keywords in any case)::

    statement  := SELECT items FROM source ("," source)* [WHERE expr] [";"]
    items      := item ("," item)*
    item       := "*" | expr [[AS] name]
    source     := '"filter"' | "'filter'"          (a topic filter or $events/<name>)
    expr       := or
    or         := and (OR and)*
    and        := not (AND not)*
    not        := NOT not | comparison
    comparison := concat [op concat | [NOT] IN list | [NOT] LIKE concat | IS [NOT] NULL]
                  op: = == != <> < <= > >= =~ (a topic matches a filter)
    concat     := additive ("||" additive)*
    additive   := term (("+" | "-") term)*
    term       := unary (("*" | "/" | "%" | DIV | MOD) unary)*
    unary      := "-" unary | primary
    primary    := number | string | TRUE | FALSE | NULL | field | call | "(" expr ")"
                | "[" [expr ("," expr)*] "]" | CASE ...
    field      := name ("." name | "[" integer "]")*
    call       := name "(" [expr ("," expr)*] ")"        (MOD too: ``mod(7, 2)``)

Strings take single or double quotes (``''`` inside doubles a quote); names may be
quoted with backquotes. Names keep their case (``payload.deviceId`` reads the key
``deviceId``, ``AS Temp`` names ``Temp``), as in EMQX; keywords and function names are
in any case. A syntax error is a ``RuleSyntaxError`` naming the offset, line
and column where the statement stops making sense.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from broker_core.errors import EdgebusError
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
    SelectItem,
    Statement,
    Unary,
)

__all__ = ["MAX_DEPTH", "RuleSyntaxError", "parse", "parse_expression"]

#: Deepest nesting of expressions (parentheses, NOT, CASE, calls) a statement may have.
MAX_DEPTH = 64


class RuleSyntaxError(EdgebusError, ValueError):
    """A rule statement that does not parse, or names something unknown.

    ``pos`` is the 0-based offset in the statement; ``line`` and ``column`` are 1-based.
    """

    def __init__(self, message: str, sql: str, pos: int) -> None:
        self.reason = message
        self.sql = sql
        self.pos = pos
        self.line = sql.count("\n", 0, pos) + 1
        self.column = pos - (sql.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} at position {pos} (line {self.line}, column {self.column})")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # num, str, name, qname (backquoted), op, end
    text: str
    value: object
    pos: int


_KEYWORDS = {
    "select", "from", "where", "as", "and", "or", "not", "in", "like", "is", "null",
    "true", "false", "case", "when", "then", "else", "end", "div", "mod",
}  # fmt: skip

# Keywords that cannot be a field name after a dot (``payload.null`` is a field).
_STRUCTURE = {"from", "where", "as", "and", "or", "not", "in", "like", "is", "when", "then",
              "else", "end"}  # fmt: skip

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<qname>`[^`]+`)
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|!=|<=|>=|==|=~|\|\||[-+*/%=<>(),.\[\];])
    """,
    re.VERBOSE,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


def _unquote(text: str) -> str:
    quote, body = text[0], text[1:-1]
    body = body.replace(quote * 2, quote)
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


def tokenize(sql: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        if match is None:
            char = sql[pos]
            if char in "'\"`":
                raise RuleSyntaxError("unterminated quoted text", sql, pos)
            raise RuleSyntaxError(f"unexpected character {char!r}", sql, pos)
        kind = match.lastgroup
        text = match.group()
        assert kind is not None
        if kind == "num":
            value: object = float(text) if any(c in text for c in ".eE") else int(text)
            tokens.append(Token(kind, text, value, pos))
        elif kind == "str":
            tokens.append(Token(kind, text, _unquote(text), pos))
        elif kind == "qname":
            tokens.append(Token("name", text, text[1:-1], pos))
        elif kind == "name":  # a name keeps its case; keywords are in any case
            lower = text.lower()
            if lower in _KEYWORDS:
                tokens.append(Token("kw", text, lower, pos))
            else:
                tokens.append(Token(kind, text, text, pos))
        elif kind == "op":
            tokens.append(Token(kind, text, text, pos))
        pos = match.end()
    tokens.append(Token("end", "", None, len(sql)))
    return tokens


_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">"}
_COMPARISONS[">="] = ">="
_COMPARISONS["=~"] = "=~"  # a topic matches a filter (EMQX's): topic =~ 't/#'


class _Parser:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.i = 0
        self.depth = 0

    # -- tokens ---------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def advance(self) -> Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def is_kw(self, *words: str) -> bool:
        return self.tok.kind == "kw" and self.tok.value in words

    def is_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.value in ops

    def error(self, expected: str, token: Token | None = None) -> RuleSyntaxError:
        token = token or self.tok
        got = "the end of the statement" if token.kind == "end" else repr(token.text)
        return RuleSyntaxError(f"expected {expected}, got {got}", self.sql, token.pos)

    def expect_kw(self, word: str) -> Token:
        if not self.is_kw(word):
            raise self.error(word.upper())
        return self.advance()

    def expect_op(self, op: str) -> Token:
        if not self.is_op(op):
            raise self.error(repr(op))
        return self.advance()

    # -- statement ------------------------------------------------------------------------

    def statement(self) -> Statement:
        self.expect_kw("select")
        items = [self.item()]
        while self.is_op(","):
            self.advance()
            items.append(self.item())
        self.expect_kw("from")
        positions = [self.tok.pos]
        sources = [self.source()]
        while self.is_op(","):
            self.advance()
            positions.append(self.tok.pos)
            sources.append(self.source())
        where = None
        if self.is_kw("where"):
            self.advance()
            where = self.expr()
        if self.is_op(";"):
            self.advance()
        if self.tok.kind != "end":
            raise self.error("WHERE or the end of the statement" if where is None else
                             "an operator or the end of the statement")  # fmt: skip
        return Statement(tuple(items), tuple(sources), where, tuple(positions))

    def item(self) -> SelectItem:
        start = self.tok.pos
        if self.is_op("*"):
            self.advance()
            return SelectItem(None, None, start)
        if self.tok.kind == "end" or self.is_kw("from"):
            raise self.error("a field or an expression")
        expr = self.expr()
        alias = None
        if self.is_kw("as"):
            self.advance()
            if self.tok.kind not in ("name", "str"):
                raise self.error("a name after AS")
            alias = str(self.advance().value)
        elif self.tok.kind == "name":
            alias = str(self.advance().value)
        elif not isinstance(expr, Field):  # named by its text, as EMQX does
            alias = self.sql[start : self.tok.pos].strip()
        return SelectItem(expr, alias, start)

    def source(self) -> str:
        if self.tok.kind != "str":
            raise self.error('a quoted topic filter, e.g. "sensors/#"')
        token = self.advance()
        value = str(token.value)
        if not value:
            raise RuleSyntaxError("the topic filter is empty", self.sql, token.pos)
        return value

    # -- expressions ----------------------------------------------------------------------

    def expr(self) -> Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise RuleSyntaxError(f"expressions nested deeper than {MAX_DEPTH}", self.sql,
                                  self.tok.pos)  # fmt: skip
        try:
            return self.or_()
        finally:
            self.depth -= 1

    def or_(self) -> Expr:
        left = self.and_()
        while self.is_kw("or"):
            pos = self.advance().pos
            left = Binary("OR", left, self.and_(), pos)
        return left

    def and_(self) -> Expr:
        left = self.not_()
        while self.is_kw("and"):
            pos = self.advance().pos
            left = Binary("AND", left, self.not_(), pos)
        return left

    def not_(self) -> Expr:
        if self.is_kw("not"):
            pos = self.advance().pos
            return Unary("NOT", self.expr_at(self.not_), pos)
        return self.comparison()

    def expr_at(self, parse: Callable[[], Expr]) -> Expr:
        """``parse()`` one level deeper (``NOT NOT ...``, ``- - ...`` count as nesting)."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise RuleSyntaxError(f"expressions nested deeper than {MAX_DEPTH}", self.sql,
                                  self.tok.pos)  # fmt: skip
        try:
            return parse()
        finally:
            self.depth -= 1

    def comparison(self) -> Expr:
        left = self.concat()
        token = self.tok
        if token.kind == "op" and token.value in _COMPARISONS:
            self.advance()
            return Binary(_COMPARISONS[str(token.value)], left, self.concat(), token.pos)
        negated = False
        if self.is_kw("not"):
            following = self.tokens[self.i + 1]
            if following.kind == "kw" and following.value in ("in", "like"):
                self.advance()
                negated = True
            else:
                raise self.error("IN or LIKE after NOT", following)
        if self.is_kw("in"):
            pos = self.advance().pos
            return InList(left, self.in_options(), negated, pos)
        if self.is_kw("like"):
            pos = self.advance().pos
            return Like(left, self.concat(), negated, pos)
        if self.is_kw("is"):
            pos = self.advance().pos
            is_not = False
            if self.is_kw("not"):
                self.advance()
                is_not = True
            self.expect_kw("null")
            return IsNull(left, is_not, pos)
        return left

    def in_options(self) -> Expr:
        if self.is_op("("):
            pos = self.advance().pos
            items = [self.expr()]
            while self.is_op(","):
                self.advance()
                items.append(self.expr())
            self.expect_op(")")
            return ListLiteral(tuple(items), pos)
        if self.tok.kind == "name" or self.is_op("["):
            return self.primary()  # a field or function giving a list
        raise self.error("a list after IN, e.g. (1, 2, 3)")

    def concat(self) -> Expr:
        left = self.additive()
        while self.is_op("||"):
            pos = self.advance().pos
            left = Binary("||", left, self.additive(), pos)
        return left

    def additive(self) -> Expr:
        left = self.term()
        while self.is_op("+", "-"):
            token = self.advance()
            left = Binary(str(token.value), left, self.term(), token.pos)
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self.is_op("*", "/", "%") or self.is_kw("div", "mod"):
            token = self.advance()
            op = {"div": "div", "mod": "%"}.get(str(token.value), str(token.value))
            left = Binary(op, left, self.unary(), token.pos)
        return left

    def unary(self) -> Expr:
        if self.is_op("-"):
            pos = self.advance().pos
            operand = self.expr_at(self.unary)
            value = operand.value if isinstance(operand, Literal) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                return Literal(-value, pos)
            return Unary("-", operand, pos)
        if self.is_op("+"):
            self.advance()
            return self.expr_at(self.unary)
        return self.primary()

    def primary(self) -> Expr:
        token = self.tok
        if token.kind in ("num", "str"):
            self.advance()
            return Literal(token.value, token.pos)
        if token.kind == "kw":
            if token.value in ("true", "false"):
                self.advance()
                return Literal(token.value == "true", token.pos)
            if token.value == "null":
                self.advance()
                return Literal(None, token.pos)
            if token.value == "case":
                return self.case()
            following = self.tokens[self.i + 1]
            if token.value == "mod" and following.kind == "op" and following.value == "(":
                self.advance()  # mod(x, y): the function; x MOD y stays the operator
                return self.call(token)
            raise self.error("a value, a field or a function")
        if self.is_op("("):
            self.advance()
            inner = self.expr()
            self.expect_op(")")
            return inner
        if self.is_op("["):
            pos = self.advance().pos
            items: list[Expr] = []
            if not self.is_op("]"):
                items.append(self.expr())
                while self.is_op(","):
                    self.advance()
                    items.append(self.expr())
            self.expect_op("]")
            return ListLiteral(tuple(items), pos)
        if token.kind == "name":
            self.advance()
            if self.is_op("(") and not token.text.startswith("`"):
                return self.call(token)
            return self.field(token)
        raise self.error("a value, a field or a function")

    def call(self, name: Token) -> Call:
        self.expect_op("(")
        args: list[Expr] = []
        if not self.is_op(")"):
            if self.is_op("*"):  # count(*)-style: no argument
                self.advance()
            else:
                args.append(self.expr())
                while self.is_op(","):
                    self.advance()
                    args.append(self.expr())
        self.expect_op(")")
        return Call(str(name.value).lower(), tuple(args), name.pos)

    def field(self, first: Token) -> Field:
        path: list[str | int] = [str(first.value)]
        while True:
            if self.is_op("."):
                self.advance()
                token = self.tok
                if (
                    token.kind == "name"
                    or (token.kind == "kw" and token.value not in _STRUCTURE)
                    or (token.kind == "num" and isinstance(token.value, int))
                ):
                    self.advance()
                    part = token.text if token.kind == "kw" else token.value
                    path.append(part if isinstance(part, str) else str(part))
                else:
                    raise self.error("a field name after '.'")
            elif self.is_op("["):
                self.advance()
                token = self.tok
                if token.kind == "num" and isinstance(token.value, int):
                    path.append(token.value)
                elif token.kind == "str":
                    path.append(str(token.value))
                else:
                    raise self.error("an index, e.g. [0]")
                self.advance()
                self.expect_op("]")
            else:
                return Field(tuple(path), first.pos)

    def case(self) -> Case:
        pos = self.expect_kw("case").pos
        if self.is_kw("end"):
            raise self.error("WHEN")
        subject = None if self.is_kw("when") else self.expr()
        branches: list[tuple[Expr, Expr]] = []
        while self.is_kw("when"):
            self.advance()
            condition = self.expr()
            self.expect_kw("then")
            branches.append((condition, self.expr()))
        if not branches:
            raise self.error("WHEN")
        default = None
        if self.is_kw("else"):
            self.advance()
            default = self.expr()
        self.expect_kw("end")
        return Case(subject, tuple(branches), default, pos)


def parse(sql: str) -> Statement:
    """The syntax tree of ``sql``; ``RuleSyntaxError`` names where it goes wrong."""
    return _Parser(sql).statement()


def parse_expression(text: str) -> Expr:
    """One expression (the tests and the API's ``test`` endpoint use it)."""
    parser = _Parser(text)
    expr = parser.expr()
    if parser.tok.kind != "end":
        raise parser.error("an operator or the end of the expression")
    return expr
