"""Values in rule statements: what every way of evaluating a statement shares.

NULL (None) propagates through comparisons and arithmetic; numbers and numeric strings
compare and add as numbers (see ``gateway.rules.compiler`` for the whole semantics).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from gateway.rules.functions import RuleEvaluationError, remainder, to_number, to_text

__all__ = [
    "OPERATORS",
    "add",
    "arith",
    "compare",
    "integer_division",
    "like_pattern",
    "nest",
    "truthy",
    "walk",
]


def walk(node: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        if isinstance(node, dict):
            node = node.get(part if isinstance(part, str) else str(part))
        elif isinstance(node, list) and isinstance(part, int):
            node = node[part] if -len(node) <= part < len(node) else None
        else:
            return None
        if node is None:
            return None
    return node


def _pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Numbers and numeric strings compare as numbers."""
    a_num = isinstance(a, int | float)
    b_num = isinstance(b, int | float)
    if a_num and isinstance(b, str):
        try:
            return a, to_number(b)
        except RuleEvaluationError:
            return str(a), b
    if b_num and isinstance(a, str):
        try:
            return to_number(a), b
        except RuleEvaluationError:
            return a, str(b)
    if isinstance(a, bytes) and isinstance(b, str):
        return to_text(a), b
    if isinstance(b, bytes) and isinstance(a, str):
        return a, to_text(b)
    return a, b


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _compare_bool(op: str, a: Any, b: Any) -> bool | None:
    """A comparison where one side is a boolean, as EMQX's: a boolean is no number
    (``true = 1`` is false) and compares with text as ``'true'`` / ``'false'``
    (``true = 'true'`` is true); with a number, a list or an object it is only unequal
    (ordering it is NULL)."""
    if type(a) is bool and type(b) is bool:
        return bool(OPERATORS[op](a, b))
    if isinstance(a, str | bytes):
        a, b = to_text(a), "true" if b else "false"
    elif isinstance(b, str | bytes):
        a, b = "true" if a else "false", to_text(b)
    elif op in ("=", "!="):
        return op == "!="
    else:
        return None
    return bool(OPERATORS[op](a, b))


def compare(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    if type(a) is bool or type(b) is bool:
        return _compare_bool(op, a, b)
    a, b = _pair(a, b)
    if op == "=":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    try:
        return bool(_ORDER[op](a, b))
    except TypeError:
        return None


OPERATORS = {**_ORDER, "=": operator.eq, "!=": operator.ne}


def add(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if isinstance(a, str | bytes) or isinstance(b, str | bytes):
        try:
            return to_number(a) + to_number(b)
        except RuleEvaluationError:
            return to_text(a) + to_text(b)
    if type(a) is bool or type(b) is bool:  # no number (EMQX's): true + 1 fails
        to_number(a)
        to_number(b)
    return a + b


def integer_division(x: int | float, y: int | float) -> int:
    """``x DIV y``: Erlang's ``div`` on integers, truncated toward zero (``-7 DIV 2`` is
    -3); a float fails as a division by zero does."""
    if not (isinstance(x, int) and isinstance(y, int)):
        raise RuleEvaluationError(f"DIV takes integers, got {x!r} DIV {y!r}")
    if y == 0:
        raise RuleEvaluationError("division by zero")
    quotient = abs(x) // abs(y)
    return -quotient if (x < 0) != (y < 0) else quotient


def arith(op: str) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        if a is None or b is None:
            return None
        x, y = to_number(a), to_number(b)
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        if op == "div":
            return integer_division(x, y)
        if op == "%":
            return remainder(x, y)
        if y == 0:
            raise RuleEvaluationError("division by zero")
        # "/": integers that divide evenly: exact, however large
        if isinstance(x, int) and isinstance(y, int) and x % y == 0:
            return x // y
        return x / y

    return apply


@lru_cache(maxsize=256)
def like_pattern(pattern: str) -> re.Pattern[str]:
    parts = []
    for char in pattern:
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def truthy(value: Any) -> bool:
    return value is True or (value is not None and value is not False and bool(value))


def nest(out: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node = out
    keys = [part if isinstance(part, str) else str(part) for part in path]
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value
