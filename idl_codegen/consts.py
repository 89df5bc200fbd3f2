"""Constant expressions: evaluation and conversion to the type they are assigned to.

Integer arithmetic is exact (Python integers) and checked against the range of the
target type at the end; ``/`` and ``%`` truncate toward zero as in C; ``~`` on an
unsigned target complements within its width. Floating-point operands allow ``+ - * /``.
Names refer to constants or enumerators.

Names in the parameters of builtin annotations (``@default(K)``, ``@id(K)``,
``@value(K)``) are looked up from the global scope, where IDL declares the builtin
annotations: Cyclone's ``idlc`` resolves an annotation parameter in the scope of the
annotation's declaration, not where the annotation is applied. So inside ``module M``,
``@default(K)`` does not find ``M::K`` (``idlc``: "Scoped name 'K' cannot be resolved"),
``@default(M::K)`` does, and a global ``K`` is found even when ``M`` has its own.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

from idl_codegen.diagnostics import Diagnostics, Location
from idl_codegen.model import (
    FLOAT_KINDS,
    INTEGER_RANGES,
    EnumType,
    PrimitiveType,
    Schema,
    StringType,
    TypeRef,
    Value,
)
from idl_codegen.scope import NameCaseError, Scope
from idl_codegen.syntax import Binary, Expr, Literal, NameRef, Unary

__all__ = ["ConstEvaluator", "EnumValue", "describe_type"]

_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_UINT32_MAX = 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class EnumValue:
    enum: str
    literal: str


_Raw = int | float | bool | str | EnumValue


class _EvalError(Exception):
    def __init__(self, location: Location, message: str) -> None:
        super().__init__(message)
        self.location = location
        self.message = message


def describe_type(target: TypeRef | EnumType | object) -> str:
    """How error messages name a type: ``octet``, ``string<8>``, ``enum 'M::E'``."""
    if isinstance(target, PrimitiveType):
        return target.kind
    if isinstance(target, StringType):
        word = "wstring" if target.wide else "string"
        return f"{word}<{target.bound}>" if target.bound else word
    if isinstance(target, EnumType):
        return f"enum '{target.name}'"
    return type(target).__name__


def _show(value: _Raw) -> str:
    if isinstance(value, EnumValue):
        return f"'{value.literal}'"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _start(expr: Expr) -> Location:
    """Where an expression starts (a binary expression's own location is its operator)."""
    while isinstance(expr, Binary):
        expr = expr.left
    return expr.location


@dataclass(frozen=True, slots=True)
class _AnnotationScope:
    """Where a builtin annotation's parameter is evaluated: from the global scope, with
    ``applied_in``, the scope the annotation is written in, only to explain a miss."""

    applied_in: Scope
    annotation: str

    def root(self) -> Scope:
        return self.applied_in.root()

    def unresolved(self, expr: NameRef) -> str:
        """The message for a name the global scope does not resolve."""
        try:
            nearer = self.applied_in.lookup(expr.name, introduce=False)
        except NameCaseError:
            nearer = None
        if nearer is None or nearer.kind not in ("const", "enumerator"):
            return f"unknown constant '{expr.name}'"
        return (f"'{expr.name}' cannot be resolved: names in @{self.annotation} are looked up "
                f"from the global scope, as Cyclone's idlc does; write '{nearer.qualified}'")


class ConstEvaluator:
    """Evaluates constant expressions in a scope and converts them to a target type."""

    def __init__(self, schema: Schema, diagnostics: Diagnostics,
                 constant_enum: Callable[[str], str | None]) -> None:
        self._schema = schema
        self._diag = diagnostics
        self._constant_enum = constant_enum

    def evaluate(self, expr: Expr, target: TypeRef, scope: Scope,
                 annotation: str | None = None) -> Value | None:
        """The value of ``expr`` as ``target`` (typedefs allowed), or None after an error.

        ``annotation``: the name of the builtin annotation whose parameter ``expr`` is,
        applied in ``scope``; its names are then looked up from the global scope.
        """
        resolved = self._schema.resolve(target)
        try:
            raw = self._eval(expr, _AnnotationScope(scope, annotation) if annotation else scope,
                             resolved)
            return self._convert(raw, resolved, _start(expr))
        except _EvalError as error:
            self._diag.error(error.location, error.message)
            return None

    def positive_integer(self, expr: Expr, scope: Scope, what: str) -> int | None:
        """An array dimension or a bound: an integer constant 1..2**32-1."""
        try:
            raw = self._eval(expr, scope, PrimitiveType("uint32"))
        except _EvalError as error:
            self._diag.error(error.location, error.message)
            return None
        if not isinstance(raw, int) or isinstance(raw, bool) or raw <= 0:
            self._diag.error(_start(expr), f"{what} must be a positive integer, got {_show(raw)}")
            return None
        if raw > _UINT32_MAX:  # idlc: "Integer expression overflows"; Cyclone's are 32-bit
            self._diag.error(_start(expr), f"{what} of {raw} overflows: at most {_UINT32_MAX}")
            return None
        return raw

    # -- evaluation --------------------------------------------------------------------

    def _eval(self, expr: Expr, scope: Scope | _AnnotationScope, target: object) -> _Raw:
        if isinstance(expr, Literal):
            value = expr.value
            assert isinstance(value, int | float | str | bool)
            return self._in_float_context(value, target, expr.location)
        if isinstance(expr, NameRef):
            return self._in_float_context(self._name(expr, scope), target, expr.location)
        if isinstance(expr, Unary):
            operand = self._eval(expr.operand, scope, target)
            return self._unary(expr, operand, target)
        assert isinstance(expr, Binary)
        left = self._eval(expr.left, scope, target)
        right = self._eval(expr.right, scope, target)
        return self._binary(expr, left, right)

    @staticmethod
    def _in_float_context(value: _Raw, target: object, where: Location) -> _Raw:
        """An integer operand of a floating-point constant is a float, as in idlc, so
        ``1/2`` for a double is 0.5 (integer division would give 0)."""
        if type(value) is int and isinstance(target, PrimitiveType) \
                and target.kind in FLOAT_KINDS:
            try:
                return float(value)
            except OverflowError:
                raise _EvalError(where, "floating point expression overflows") from None
        return value

    def _name(self, expr: NameRef, scope: Scope | _AnnotationScope) -> _Raw:
        lookup = scope.root() if isinstance(scope, _AnnotationScope) else scope
        try:
            symbol = lookup.lookup(expr.name, introduce=False)
        except NameCaseError as error:
            raise _EvalError(expr.location, error.message) from None
        if symbol is None:
            if isinstance(scope, _AnnotationScope):
                raise _EvalError(expr.location, scope.unresolved(expr))
            raise _EvalError(expr.location, f"unknown constant '{expr.name}'")
        if symbol.kind == "enumerator":
            assert symbol.enum is not None and isinstance(symbol.value, str)
            return EnumValue(symbol.enum, symbol.value)
        if symbol.kind != "const":
            raise _EvalError(expr.location, f"'{expr.name}' is a {symbol.kind}, not a constant")
        if symbol.value is None:
            raise _EvalError(expr.location, f"constant '{expr.name}' has no valid value")
        enum = self._constant_enum(symbol.qualified)
        if enum is not None:
            assert isinstance(symbol.value, str)
            return EnumValue(enum, symbol.value)
        return symbol.value

    def _unary(self, expr: Unary, operand: _Raw, target: object) -> _Raw:
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise _EvalError(expr.location, f"operator '{expr.op}' needs a number, got "
                                            f"{_show(operand)}")
        if expr.op == "-":
            return -operand
        if expr.op == "+":
            return operand
        if not isinstance(operand, int):
            raise _EvalError(expr.location, "operator '~' needs an integer")
        if isinstance(target, PrimitiveType) and target.kind in INTEGER_RANGES \
                and INTEGER_RANGES[target.kind][0] == 0:
            return ~operand & INTEGER_RANGES[target.kind][1]
        return ~operand

    def _binary(self, expr: Binary, left: _Raw, right: _Raw) -> _Raw:
        op = expr.op
        for side in (left, right):
            if isinstance(side, bool) or not isinstance(side, int | float):
                raise _EvalError(expr.location, f"operator '{op}' needs numbers, got {_show(side)}")
        assert isinstance(left, int | float) and isinstance(right, int | float)
        if isinstance(left, int) and isinstance(right, int):
            return self._integer_binary(expr, left, right)
        if op not in "+-*/":
            raise _EvalError(expr.location, f"operator '{op}' needs integers")
        if op == "/" and right == 0:
            raise _EvalError(expr.location, "division by zero")
        try:
            results = {"+": left + right, "-": left - right, "*": left * right}
            return results[op] if op != "/" else left / right
        except OverflowError:  # a huge integer with a float
            raise _EvalError(expr.location, "floating point expression overflows") from None

    def _integer_binary(self, expr: Binary, left: int, right: int) -> int:
        op = expr.op
        if op in ("/", "%") and right == 0:
            raise _EvalError(expr.location, "division by zero")
        if op in ("<<", ">>") and not 0 <= right < 64:
            raise _EvalError(expr.location, f"shift count {right} is out of range (0..63)")
        if op == "/":
            quotient = abs(left) // abs(right)
            return quotient if (left < 0) == (right < 0) else -quotient
        if op == "%":
            quotient = abs(left) // abs(right)
            quotient = quotient if (left < 0) == (right < 0) else -quotient
            return left - right * quotient
        operations: dict[str, Callable[[int, int], int]] = {
            "|": lambda a, b: a | b, "^": lambda a, b: a ^ b, "&": lambda a, b: a & b,
            "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
            "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
        }
        return operations[op](left, right)

    # -- conversion --------------------------------------------------------------------

    def _convert(self, raw: _Raw, target: object, where: Location) -> Value:
        name = describe_type(target)
        if isinstance(target, EnumType):
            if not isinstance(raw, EnumValue) or raw.enum != target.name:
                raise _EvalError(where, f"expected a literal of {name}, got {_show(raw)}")
            return raw.literal
        if isinstance(raw, EnumValue):
            raise _EvalError(where, f"expected a value of type {name}, got enumerator {_show(raw)}")
        if isinstance(target, StringType):
            if not isinstance(raw, str):
                raise _EvalError(where, f"expected a string, got {_show(raw)}")
            if target.bound is not None and len(raw.encode("utf-8")) > target.bound:
                raise _EvalError(where, f"string of {len(raw.encode('utf-8'))} bytes is longer "
                                        f"than the bound of {name}")
            return raw
        if not isinstance(target, PrimitiveType):
            raise _EvalError(where, f"a constant cannot have type {name}")
        kind = target.kind
        if kind == "boolean":
            if not isinstance(raw, bool):
                raise _EvalError(where, f"expected TRUE or FALSE, got {_show(raw)}")
            return raw
        if kind in ("char", "wchar"):
            if not isinstance(raw, str) or len(raw) != 1:
                raise _EvalError(where, f"expected a character literal, got {_show(raw)}")
            limit = 0xFF if kind == "char" else 0xFFFF
            if ord(raw) > limit:
                raise _EvalError(where, f"character {raw!r} does not fit in {kind}")
            return raw
        if kind in FLOAT_KINDS:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                raise _EvalError(where, f"expected a number, got {_show(raw)}")
            try:
                value = float(raw)
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):  # idlc: "Floating point expression overflows"
                raise _EvalError(where, "floating point expression overflows")
            if kind == "float32" and abs(value) > _FLOAT32_MAX:
                raise _EvalError(where, f"{value} does not fit in float32")
            return value
        low, high = INTEGER_RANGES[kind]
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise _EvalError(where, f"expected an integer, got {_show(raw)}")
        if not low <= raw <= high:
            raise _EvalError(where, f"{raw} does not fit in {kind} ({low}..{high})")
        return raw
