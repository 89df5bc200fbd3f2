"""How IDL names become Python names, and back.

An IDL name that Python cannot use as is (a keyword, or a name the generated code
itself needs in that place) gets ``_`` appended until it is free: member ``from``
becomes attribute ``from_``. Struct and union members keep their IDL name on the wire
and in JSON through cyclonedds' ``member_name`` annotation; an enumerator's IDL name is
its Python name with the added ``_`` removed.
"""

from __future__ import annotations

import keyword
from collections.abc import Collection

__all__ = [
    "ENUM_RESERVED",
    "STRUCT_RESERVED",
    "UNION_RESERVED",
    "enumerator_idl_name",
    "python_name",
    "python_package_path",
]

_KEYWORDS = frozenset(keyword.kwlist)
STRUCT_RESERVED = frozenset({"serialize", "deserialize", "serialize_key", "deserialize_key"})
UNION_RESERVED = frozenset({"discriminator", "value", "get", "set", "serialize", "deserialize",
                            "deserialize_key"})
ENUM_RESERVED = frozenset({"mro"})


def python_name(name: str, reserved: Collection[str] = ()) -> str:
    """``name`` as a Python identifier that is no keyword and not in ``reserved``."""
    candidate = name
    while candidate in _KEYWORDS or candidate in reserved:
        candidate += "_"
    return candidate


def enumerator_idl_name(python: str) -> str:
    """The IDL name of an enumerator from its Python member name (undoes ``python_name``)."""
    candidate = python
    while candidate.endswith("_"):
        shorter = candidate[:-1]
        if shorter in _KEYWORDS or shorter in ENUM_RESERVED:
            candidate = shorter
        else:
            break
    return candidate


def python_package_path(idl_scope: str, prefix: str = "") -> str:
    """The dotted Python package of IDL scope ``a::b`` (``prefix.a.b``)."""
    parts = [python_name(part) for part in idl_scope.split("::") if part]
    if prefix:
        parts.insert(0, prefix)
    return ".".join(parts)
