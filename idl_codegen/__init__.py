"""OMG IDL -> cyclonedds-python types, JSON and JSON Schema; a runtime loader and a CLI.

Public API:

- :func:`load` (``load(path, include_dirs=...)`` -> :class:`LoadedSchema`): the types,
  constants and JSON codecs of IDL files, in process, without writing files;
- :func:`codec_for` (``codec_for(cls)`` -> :class:`TypeCodec`): the JSON codec of any
  cyclonedds class (generated, loaded, hand-written or discovered at run time), with
  ``to_json`` / ``from_json`` / ``dumps`` / ``loads`` / ``json_schema``;
- :func:`generate`: what the ``idl-codegen`` command writes, as ``{path: text}``;
- errors: :class:`IdlErrors` (an ``IdlError`` with every problem of a schema) and
  :class:`IdlValueError` (a value that does not fit its type, with the member path).

Code generation needs no cyclonedds; :func:`load` and the codec do, so those names are
imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from idl_codegen.diagnostics import IdlErrors, IdlWarning
from idl_codegen.generate import Generated, generate
from idl_codegen.provenance import VERSION

if TYPE_CHECKING:
    from idl_codegen.json_codec import IdlValueError, TypeCodec, codec_for
    from idl_codegen.loader import LoadedSchema, load

__all__ = [
    "VERSION",
    "Generated",
    "IdlErrors",
    "IdlValueError",
    "IdlWarning",
    "LoadedSchema",
    "TypeCodec",
    "codec_for",
    "generate",
    "load",
]

_LAZY = {
    "IdlValueError": "idl_codegen.json_codec",
    "TypeCodec": "idl_codegen.json_codec",
    "codec_for": "idl_codegen.json_codec",
    "LoadedSchema": "idl_codegen.loader",
    "load": "idl_codegen.loader",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'idl_codegen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
