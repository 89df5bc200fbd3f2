"""JSON conversion of single values: numbers, characters, strings, octets, arrays.

The building blocks :mod:`idl_codegen.json_codec` composes into a codec per type: each
is a pair (encode Python -> JSON, decode JSON -> Python) of closures that validate as
they convert and raise :class:`IdlValueError`, whose path the enclosing members extend.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from collections.abc import Callable
from typing import Any

from idl_codegen.model import INTEGER_RANGES

__all__ = [
    "FLOAT32_MAX",
    "Decode",
    "Encode",
    "IdlValueError",
    "each",
    "each_decode",
    "fixed_list",
    "float_pair",
    "octets",
    "primitive",
    "show",
    "string",
]

FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
NON_FINITE_IN = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

Encode = Callable[[Any], Any]
Decode = Callable[[Any, bool], Any]


class IdlValueError(ValueError):
    """A value does not fit its IDL type; ``path`` names the member (``$.a.b[2]``)."""

    def __init__(self, reason: str, path: str = "$") -> None:
        super().__init__(f"{path}: {reason}")
        self.reason = reason
        self.path = path

    def within(self, step: str) -> IdlValueError:
        """The same error one level further out (``step`` is ``.name`` or ``[3]``)."""
        return IdlValueError(self.reason, "$" + step + self.path[1:])


def show(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) \
        else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."



def each(values: Any, encode_one: Encode) -> list[Any]:
    out: list[Any] = []
    for index, item in enumerate(values):
        try:
            out.append(encode_one(item))
        except IdlValueError as error:
            raise error.within(f"[{index}]") from None
    return out


def each_decode(values: list[Any], decode_one: Decode, strict: bool) -> list[Any]:
    out: list[Any] = []
    for index, item in enumerate(values):
        try:
            out.append(decode_one(item, strict))
        except IdlValueError as error:
            raise error.within(f"[{index}]") from None
    return out


def fixed_list(size: int, encode_one: Encode, decode_one: Decode) -> tuple[Encode, Decode]:
    def encode(value: Any) -> Any:
        if not isinstance(value, list | tuple | bytes | bytearray):
            raise IdlValueError(f"expected an array, got {show(value)}")
        if len(value) != size:
            raise IdlValueError(f"array needs {size} elements, got {len(value)}")
        return each(value, encode_one)

    def decode(value: Any, strict: bool) -> Any:
        if not isinstance(value, list):
            raise IdlValueError(f"expected an array, got {show(value)}")
        if len(value) != size:
            raise IdlValueError(f"array needs {size} elements, got {len(value)}")
        return each_decode(value, decode_one, strict)

    return encode, decode


def octets(bound: int | None, exact: int | None, as_bytes: bool) -> tuple[Encode, Decode]:
    """Octet sequences and arrays: base64 in JSON; list (sequence) or bytes (array) in Python."""

    def check(length: int) -> None:
        if exact is not None and length != exact:
            raise IdlValueError(f"needs {exact} octets, got {length}")
        if bound is not None and length > bound:
            raise IdlValueError(f"{length} octets exceed the bound {bound}")

    def encode(value: Any) -> Any:
        if isinstance(value, list | tuple):
            try:
                value = bytes(value)
            except (ValueError, TypeError) as exc:
                raise IdlValueError(f"octets must be integers 0..255: {exc}") from None
        if not isinstance(value, bytes | bytearray | memoryview):
            raise IdlValueError(f"expected octets, got {show(value)}")
        check(len(value))
        return base64.b64encode(value).decode("ascii")

    def decode(value: Any, strict: bool) -> Any:
        if isinstance(value, str):
            try:
                data = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise IdlValueError("expected base64 text") from None
        elif isinstance(value, list) and all(type(v) is int and 0 <= v <= 255 for v in value):
            data = bytes(value)
        else:
            raise IdlValueError(f"expected base64 text, got {show(value)}")
        check(len(data))
        return data if as_bytes else list(data)

    return encode, decode


def string(bound: int | None) -> tuple[Encode, Decode]:
    def check(value: Any) -> Any:
        if type(value) is not str:
            raise IdlValueError(f"expected a string, got {show(value)}")
        if "\x00" in value:
            raise IdlValueError("strings cannot contain NUL characters")
        if value.isascii():
            size = len(value)
        else:
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise IdlValueError("string is not valid Unicode (lone surrogate)") from None
        if bound is not None and size > bound:
            raise IdlValueError(f"string of {size} bytes exceeds the bound {bound}")
        return value

    return check, lambda value, strict: check(value)


def primitive(kind: str) -> tuple[Encode, Decode]:
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]

        def integer(value: Any) -> Any:
            if type(value) is not int:
                if isinstance(value, int) and not isinstance(value, bool):
                    value = int(value)
                else:
                    raise IdlValueError(f"expected an integer ({kind}), got {show(value)}")
            if value < low or value > high:
                raise IdlValueError(f"{value} is out of range for {kind} ({low}..{high})")
            return value

        return integer, lambda value, strict: integer(value)
    if kind in ("float32", "float64"):
        return float_pair(kind == "float32")
    if kind == "boolean":
        def boolean(value: Any) -> Any:
            if type(value) is not bool:
                raise IdlValueError(f"expected true or false, got {show(value)}")
            return value

        return boolean, lambda value, strict: boolean(value)
    if kind == "char":
        def char(value: Any) -> Any:
            if type(value) is not str or len(value) != 1 or ord(value) > 127:
                raise IdlValueError(f"expected one ASCII character, got {show(value)}")
            return value

        return char, lambda value, strict: char(value)
    assert kind == "wchar"

    def valid(code: int) -> bool:
        return 0 <= code <= 0x7FFF and not 0xD800 <= code <= 0xDFFF

    def wchar_out(value: Any) -> Any:
        if type(value) is not int or not valid(value):
            raise IdlValueError(f"expected a wchar code 0..32767, got {show(value)}")
        return chr(value)

    def wchar_in(value: Any, strict: bool) -> Any:
        if type(value) is not str or len(value) != 1 or not valid(ord(value)):
            raise IdlValueError(f"expected one character (code below 32768), got {show(value)}")
        return ord(value)

    return wchar_out, wchar_in


def float_pair(single: bool) -> tuple[Encode, Decode]:
    kind = "float32" if single else "float64"

    def encode(value: Any) -> Any:
        if type(value) is not float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                value = _to_float(value, kind)
            else:
                raise IdlValueError(f"expected a number ({kind}), got {show(value)}")
        if value - value != 0.0:  # not finite
            if math.isnan(value):
                return "NaN"
            return "Infinity" if value > 0 else "-Infinity"
        if single and abs(value) > FLOAT32_MAX:
            raise IdlValueError(f"{value} is out of range for float32")
        return value

    def decode(value: Any, strict: bool) -> Any:
        if type(value) is float:
            if value - value != 0.0:  # 1e400 in JSON text parses as inf
                raise IdlValueError(f"number out of range for {kind} (non-finite values "
                                    'are written "NaN", "Infinity", "-Infinity")')
        elif type(value) is int:
            value = _to_float(value, kind)
        elif isinstance(value, str) and value in NON_FINITE_IN:
            return NON_FINITE_IN[value]
        else:
            raise IdlValueError(f"expected a number ({kind}), got {show(value)}")
        if single and abs(value) > FLOAT32_MAX:
            raise IdlValueError(f"{value} is out of range for float32")
        return value

    return encode, decode


def _to_float(value: int | float, kind: str) -> float:
    try:
        return float(value)
    except OverflowError:
        raise IdlValueError(f"{show(value)} is out of range for {kind}") from None
