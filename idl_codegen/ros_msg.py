"""ROS 2 interface files (``.msg``, ``.srv``) -> OMG IDL, in the shape ROS 2's DDS layer uses.

ROS 2 describes messages in ``.msg`` files and services in ``.srv`` files; on the wire
(rmw_cyclonedds, rmw_fastrtps) a message ``pkg/msg/T`` is the DDS type
``pkg::msg::dds_::T_`` and a service ``pkg/srv/S`` the pair ``pkg::srv::dds_::S_Request_``
and ``S_Response_``. This module writes that IDL, one file per interface at
``pkg/msg/dds_/T_.idl`` (``pkg/srv/dds_/S_.idl``), so that :func:`idl_codegen.load`
gives types whose DDS names and wire format are those of ROS 2 nodes:

- primitives as rosidl maps them: ``bool`` -> ``boolean``, ``byte`` -> ``octet``,
  ``char`` -> ``uint8``, ``float32``/``float64`` -> ``float``/``double``, integers by
  width (``int16`` -> ``short``, ...), ``string``/``wstring``, ``string<=N`` ->
  ``string<N>``;
- arrays ``T[N]`` -> ``T name[N]``, ``T[]`` -> ``sequence<T>``, ``T[<=N]`` ->
  ``sequence<T, N>``;
- other messages by ``pkg/T`` (or ``T`` of the same package, or ``Header`` for
  ``std_msgs/Header``), with an ``#include`` of their file;
- constants (``int32 X=5``) in a module ``T_Constants``; default values (``int32 x 5``)
  as ``@default``, checked against their type at the ``.msg`` line (range, a bounded
  string's length); an array's default (``int32[3] x [1, 2, 3]``) is checked (each
  element, the length) and kept as a comment only: IDL has no array defaults; a
  message without fields gets rosidl's ``uint8 structure_needs_at_least_one_member``.

``convert(paths, out_dir)`` converts files whose package is the directory above their
``msg``/``srv`` directory (``my_pkg/msg/Foo.msg``). Errors are ``IdlErrors`` naming file
and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from broker_core.errors import IdlError
from idl_codegen.diagnostics import IdlErrors
from idl_codegen.provenance import VERSION

__all__ = ["convert", "msg_to_idl", "srv_to_idl"]

PRIMITIVES = {
    "bool": "boolean", "byte": "octet", "char": "uint8", "float32": "float",
    "float64": "double", "int8": "int8", "uint8": "uint8", "int16": "short",
    "uint16": "unsigned short", "int32": "long", "uint32": "unsigned long",
    "int64": "long long", "uint64": "unsigned long long", "string": "string",
    "wstring": "wstring",
}
_INTEGER_TYPES = {"byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                  "int64", "uint64"}
_IDL_KEYWORDS = {
    "abstract", "any", "alias", "attribute", "bitfield", "bitmask", "bitset", "boolean",
    "case", "char", "component", "connector", "const", "consumes", "context", "custom",
    "default", "double", "exception", "emits", "enum", "eventtype", "factory", "false",
    "finder", "fixed", "float", "getraises", "getter", "home", "import", "in", "inout",
    "interface", "local", "long", "manages", "map", "mirrorport", "module", "multiple",
    "native", "object", "octet", "oneway", "out", "primarykey", "private", "port",
    "porttype", "provides", "public", "publishes", "raises", "readonly", "setraises",
    "setter", "sequence", "short", "string", "struct", "supports", "switch", "true",
    "truncatable", "typedef", "typeid", "typename", "typeprefix", "unsigned", "union",
    "uses", "valuebase", "valuetype", "void", "wchar", "wstring", "int8", "uint8",
    "int16", "int32", "int64", "uint16", "uint32", "uint64",
}
_FIELD = re.compile(
    r"^(?P<type>[A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*(<=\d+)?)"
    r"(?P<array>\[(<=)?\d*\])?\s+(?P<name>[A-Za-z][A-Za-z0-9_]*)"
    r"(?:\s*=\s*(?P<constant>.+)|\s+(?P<default>.+))?$"
)


@dataclass(frozen=True, slots=True)
class _Field:
    idl_type: str  # the element type in IDL
    array: str | None  # "[]", "[N]", "[<=N]" or None
    name: str
    default: str | None
    include: str | None  # the file of a referenced message
    line: int
    array_default: str | None = None  # an array's default: not in IDL, in a comment


@dataclass(frozen=True, slots=True)
class _Constant:
    idl_type: str
    name: str
    value: str


def _outside_quotes(text: str) -> Iterator[tuple[int, str]]:
    """The index and character of each character of ``text`` outside quoted text (a
    quote escaped with a backslash does not end the quoted text; the quotes are inside)."""
    quote = None
    escaped = False
    for index, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        else:
            yield index, char


def _strip_comment(line: str) -> str:
    """The line without its ``#`` comment (a ``#`` inside quotes stays)."""
    for index, char in _outside_quotes(line):
        if char == "#":
            return line[:index]
    return line


_RANGES = {
    "byte": (0, 255), "char": (0, 255), "int8": (-(1 << 7), (1 << 7) - 1), "uint8": (0, 255),
    "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1), "uint64": (0, (1 << 64) - 1),
}
_FLOAT32_MAX = 3.4028234663852886e38


def _idl_literal(ros_type: str, text: str) -> str:
    """The IDL literal of a default or constant value of ``ros_type`` (``string<=N``
    included); ``ValueError`` when it is not one or does not fit the type."""
    text = text.strip()
    if ros_type.startswith(("string<=", "wstring<=")):
        literal = _idl_literal(ros_type.partition("<=")[0], text)
        bound = int(ros_type.partition("<=")[2])
        unquoted = _unescape_idl(literal)
        size = len(unquoted.encode("utf-8"))
        if size > bound:  # as the IDL bound counts (rosidl counts characters: fewer or as many)
            raise ValueError(f"the value {unquoted!r} ({size} bytes in UTF-8) is longer than"
                             f" the bound of {ros_type}")
        return literal
    if ros_type in ("string", "wstring"):
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            # as rosidl: the outer quotes go, an inner one must be escaped, and only
            # the escaped quote loses its backslash
            quote = text[0]
            text = text[1:-1]
            if re.search(rf"(?<!\\){quote}", text):
                raise ValueError(f"the quote {quote} inside the string is not escaped")
            text = text.replace("\\" + quote, quote)
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if ros_type == "bool":
        lowered = text.lower()
        if lowered in ("true", "1"):
            return "TRUE"
        if lowered in ("false", "0"):
            return "FALSE"
        raise ValueError(f"expected true or false, got {text!r}")
    if ros_type in _INTEGER_TYPES:
        try:  # as rosidl: decimal (leading zeros too), else with a 0x/0o/0b prefix
            number = _ros_int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
        low, high = _RANGES[ros_type]
        if not low <= number <= high:
            raise ValueError(f"{number} does not fit in {ros_type} ({low}..{high})")
        return str(number)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"expected a finite number, got {text!r}")
    if ros_type == "float32" and abs(value) > _FLOAT32_MAX:
        raise ValueError(f"{text} does not fit in float32")
    return repr(value) if "." in repr(value) or "e" in repr(value) else f"{value!r}.0"


def _unescape_idl(literal: str) -> str:
    """The text of an IDL string literal made by ``_idl_literal``."""
    return literal[1:-1].replace('\\"', '"').replace("\\\\", "\\")


def _array_values(text: str) -> list[str]:
    """The elements of an array default (``[1, 2, 3]``, ``['a', "b,c"]``) as written."""
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"expected an array default like [1, 2, 3], got {text!r}")
    inner = text[1:-1].strip()
    if not inner:
        return []
    values: list[str] = []
    start = 0
    for index, char in _outside_quotes(inner):
        if char == ",":
            values.append(inner[start:index].strip())
            start = index + 1
    values.append(inner[start:].strip())
    if any(not value for value in values):
        raise ValueError(f"an empty element in the array default {text!r}")
    return values


def _ros_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return int(text, 0)


class _Parser:
    """Parses the fields and constants of one message body."""

    def __init__(self, package: str, source: str) -> None:
        self.package = package
        self.source = source
        self.errors: list[IdlError] = []

    def parse(self, lines: Iterable[tuple[int, str]]) -> tuple[list[_Field], list[_Constant]]:
        fields: list[_Field] = []
        constants: list[_Constant] = []
        seen: set[str] = set()
        for number, raw in lines:
            line = _strip_comment(raw).strip()
            if not line:
                continue
            match = _FIELD.match(line)
            if match is None:
                self._error(number, f"cannot read {line!r} as 'TYPE NAME'")
                continue
            name = match["name"]
            if name in seen:
                self._error(number, f"duplicate name {name!r}")
                continue
            seen.add(name)
            try:
                if match["constant"] is not None:
                    constants.append(self._constant(match))
                else:
                    fields.append(self._field(match, number))
            except ValueError as exc:
                self._error(number, str(exc))
        return fields, constants

    def _error(self, line: int, message: str) -> None:
        self.errors.append(IdlError(message, self.source, line, 1))

    def _element(self, ros_type: str) -> tuple[str, str | None]:
        """The IDL type of a ROS element type, and the file it needs included."""
        bound = None
        if "<=" in ros_type:
            ros_type, _, bound = ros_type.partition("<=")
            if ros_type not in ("string", "wstring"):
                raise ValueError(f"only strings can be bounded ({ros_type}<=...)")
        if ros_type in PRIMITIVES:
            idl = PRIMITIVES[ros_type]
            return (f"{idl}<{bound}>" if bound else idl), None
        if ros_type == "Header":
            ros_type = "std_msgs/Header"
        parts = ros_type.split("/")
        if len(parts) == 1:
            package, name = self.package, parts[0]
        elif len(parts) == 2:
            package, name = parts
        elif len(parts) == 3 and parts[1] == "msg":
            package, name = parts[0], parts[2]
        else:
            raise ValueError(f"cannot read the type {ros_type!r}")
        return f"{package}::msg::dds_::{name}_", f"{package}/msg/dds_/{name}_.idl"

    def _field(self, match: re.Match[str], number: int) -> _Field:
        ros_type = match["type"]
        idl_type, include = self._element(ros_type)
        array = match["array"]
        default = None
        array_default = None
        if match["default"] is not None:
            if include is not None:
                default = None  # rosidl keeps no IDL default for messages
            elif array is not None:
                # checked as rosidl does (each element, the length), then kept as a
                # comment: IDL has no array defaults
                values = _array_values(match["default"])
                literals = [_idl_literal(ros_type, value) for value in values]
                size = array[1:-1]
                if size.startswith("<=") and len(values) > int(size[2:]):
                    raise ValueError(f"the array default has {len(values)} elements, more than"
                                     f" the bound {size[2:]}")
                if size.isdigit() and len(values) != int(size):
                    raise ValueError(f"the array default has {len(values)} elements, the"
                                     f" array {array} has {size}")
                array_default = "[" + ", ".join(literals) + "]"
            else:
                default = _idl_literal(ros_type, match["default"])
        return _Field(idl_type, array, _escape(match["name"]), default, include, number,
                      array_default)

    def _constant(self, match: re.Match[str]) -> _Constant:
        ros_type = match["type"]
        if match["array"] is not None:
            raise ValueError("a constant cannot be an array")
        idl_type, include = self._element(ros_type)
        if include is not None:
            raise ValueError("a constant must be a primitive or a string")
        value = _idl_literal(ros_type, match["constant"])
        return _Constant(idl_type, match["name"], value)


def _escape(name: str) -> str:
    """An IDL identifier: names that are IDL keywords get a leading ``_``."""
    return f"_{name}" if name.lower() in _IDL_KEYWORDS else name


def _declaration(field: _Field) -> str:
    array = field.array
    if array is None:
        return f"{field.idl_type} {field.name};"
    if array == "[]":
        return f"sequence<{field.idl_type}> {field.name};"
    if array.startswith("[<="):
        return f"sequence<{field.idl_type}, {array[3:-1]}> {field.name};"
    return f"{field.idl_type} {field.name}{array};"


def _struct(name: str, fields: list[_Field], constants: list[_Constant]) -> list[str]:
    out: list[str] = []
    if constants:
        out.append(f"module {name}_Constants {{")
        out += [f"  const {c.idl_type} {c.name} = {c.value};" for c in constants]
        out.append("};")
    out.append(f"struct {name}_ {{")
    if not fields:
        out.append("  uint8 structure_needs_at_least_one_member;")
    for field in fields:
        if field.default is not None:
            out.append(f"  @default (value={field.default})")
        if field.array_default is not None:
            out.append(f"  // default {field.array_default}: not applied (IDL has no array"
                       " defaults)")
        out.append(f"  {_declaration(field)}")
    out.append("};")
    return out


def _render(package: str, kind: str, source: str,
            structs: Sequence[tuple[str, list[_Field], list[_Constant]]]) -> str:
    includes = sorted({f.include for _, fields, _ in structs for f in fields if f.include})
    lines = [f"// Generated by edgebus idl-codegen {VERSION} (ros_msg) from {source}.",
             "// Do not edit.", ""]
    lines += [f'#include "{include}"' for include in includes]
    if includes:
        lines.append("")
    lines += [f"module {package} {{", f"  module {kind} {{", "    module dds_ {"]
    for name, fields, constants in structs:
        lines += ["      " + line for line in _struct(name, fields, constants)]
    lines += ["    };", "  };", "};", ""]
    return "\n".join(lines)


def _check(package: str, name: str, source: str) -> None:
    problems = []
    if not re.match(r"^[a-z][a-z0-9_]*$", package):
        problems.append(f"package {package!r}: expected lower case letters, digits and '_'")
    if not re.match(r"^[A-Z][A-Za-z0-9]*$", name):
        problems.append(f"interface {name!r}: expected a CamelCase name")
    if problems:
        raise IdlErrors([IdlError(problem, source, 1, 1) for problem in problems])


def msg_to_idl(text: str, package: str, name: str, *, source: str | None = None) -> str:
    """The IDL of message ``package/msg/name`` given the text of its ``.msg`` file."""
    source = source or f"{package}/msg/{name}.msg"
    _check(package, name, source)
    parser = _Parser(package, source)
    fields, constants = parser.parse(enumerate(text.splitlines(), start=1))
    if parser.errors:
        raise IdlErrors(parser.errors)
    return _render(package, "msg", source, [(name, fields, constants)])


def srv_to_idl(text: str, package: str, name: str, *, source: str | None = None) -> str:
    """The IDL of service ``package/srv/name`` (its ``_Request_`` and ``_Response_``)."""
    source = source or f"{package}/srv/{name}.srv"
    _check(package, name, source)
    lines = list(enumerate(text.splitlines(), start=1))
    separators = [i for i, (_, line) in enumerate(lines) if _strip_comment(line).strip() == "---"]
    if len(separators) != 1:
        raise IdlErrors([IdlError("a service has one '---' between request and response",
                                  source, 1, 1)])
    parser = _Parser(package, source)
    request = parser.parse(lines[: separators[0]])
    response = parser.parse(lines[separators[0] + 1:])
    if parser.errors:
        raise IdlErrors(parser.errors)
    return _render(package, "srv", source,
                   [(f"{name}_Request", *request), (f"{name}_Response", *response)])


def convert(paths: Iterable[str | Path], out_dir: str | Path) -> list[Path]:
    """Converts ``.msg``/``.srv`` files into ``out_dir/pkg/{msg,srv}/dds_/Name_.idl``;
    returns the files written. The package of ``.../my_pkg/msg/Foo.msg`` is ``my_pkg``."""
    out = Path(out_dir)
    written: list[Path] = []
    errors: list[IdlError] = []
    for given in paths:
        path = Path(given)
        kind = path.suffix.lstrip(".")
        package = path.parent.parent.name
        if kind not in ("msg", "srv") or path.parent.name != kind:
            errors.append(IdlError("expected PACKAGE/msg/Name.msg or PACKAGE/srv/Name.srv",
                                   str(path), 1, 1))
            continue
        try:
            text = path.read_text(encoding="utf-8")
            convert_one = msg_to_idl if kind == "msg" else srv_to_idl
            idl = convert_one(text, package, path.stem, source=f"{package}/{kind}/{path.name}")
        except OSError as exc:
            errors.append(IdlError(str(exc.strerror or exc), str(path), 1, 1))
            continue
        except IdlErrors as exc:
            errors += exc.errors
            continue
        target = out / package / kind / "dds_" / f"{path.stem}_.idl"
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != idl:
            target.write_text(idl, encoding="utf-8")
        written.append(target)
    if errors:
        raise IdlErrors(errors)
    return written
