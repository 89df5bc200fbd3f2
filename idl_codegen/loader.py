"""The runtime loader: IDL files -> cyclonedds classes and JSON codecs, in process.

:func:`load` runs the same pipeline as the ``idl-codegen`` command and imports the
generated Python modules from memory (an import finder serves them under a private
package, ``_edgebus_idl_<n>``), so a loaded type is exactly the type the command would
generate, with no file written and no build step.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import itertools
import linecache
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from broker_core.errors import IdlError
from idl_codegen.diagnostics import IdlErrors, IdlWarning
from idl_codegen.emit_jsonschema import json_schema
from idl_codegen.emit_python import PythonEmitter, PythonOptions
from idl_codegen.frontend import compile_idl
from idl_codegen.json_codec import TypeCodec, codec_for
from idl_codegen.model import EnumType, Schema, StructType, TypedefType, UnionType
from idl_codegen.naming import ENUM_RESERVED, python_name

__all__ = ["LoadedSchema", "load"]

_counter = itertools.count(1)
_lock = threading.Lock()


class _MemoryFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves generated sources, by module name, from memory."""

    def __init__(self) -> None:
        self.sources: dict[str, tuple[str, bool]] = {}  # module -> (source, is_package)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        entry = self.sources.get(fullname)
        if entry is None:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=entry[1])
        if entry[1]:
            spec.submodule_search_locations = []
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        source, _ = self.sources[module.__name__]
        filename = f"<idl_codegen {module.__name__}>"
        lines = source.splitlines(keepends=True)
        linecache.cache[filename] = (len(source), None, lines, filename)  # for tracebacks
        # dont_inherit: this module's "from __future__ import annotations" would turn the
        # annotations cyclonedds reads into strings
        exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)


_finder = _MemoryFinder()


def _install() -> None:
    if _finder not in sys.meta_path:
        sys.meta_path.append(_finder)


@dataclass(slots=True)
class LoadedSchema:
    """Types and constants of loaded IDL files.

    ``types`` maps fully qualified IDL names (``HelloWorldData::Msg``) to the cyclonedds
    class of every struct, union and enum; ``typedefs`` to the cyclonedds typedef objects;
    ``constants`` to Python values (enum constants as enum members). Lookups accept
    ``a::b::T`` and ``a.b.T``.
    """

    description: Schema
    types: dict[str, type] = field(default_factory=dict)
    typedefs: dict[str, Any] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, ModuleType] = field(default_factory=dict)
    warnings: list[IdlWarning] = field(default_factory=list)

    def __getitem__(self, name: str) -> type:
        return self.types[_canonical(name)]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and _canonical(name) in self.types

    @property
    def topic_types(self) -> list[str]:
        """Structs that can be topic types: every struct not annotated ``@nested``."""
        return [name for name, declared in self.description.types.items()
                if isinstance(declared, StructType) and not declared.nested]

    def codec(self, name: str) -> TypeCodec:
        """The JSON codec of struct, union or enum ``name``."""
        return codec_for(self[name])

    def json_schema(self, name: str) -> dict[str, Any]:
        """The JSON Schema (2020-12) of type ``name``."""
        canonical = _canonical(name)
        if canonical not in self.description.types:
            raise KeyError(name)
        return json_schema(self.description, canonical)

    def module(self, scope: str) -> ModuleType:
        """The Python module of IDL module ``scope`` (``a::b``), with its types and constants."""
        return self.modules[_canonical(scope)]


def _canonical(name: str) -> str:
    return name.replace(".", "::") if "::" not in name else name


def load(
    path: str | Path | Sequence[str | Path],
    include_dirs: Sequence[str | Path] = (),
    *,
    defines: Mapping[str, str] | None = None,
) -> LoadedSchema:
    """Load IDL file(s) ``path``: the types, constants and codecs, without writing files.

    Raises :class:`~broker_core.errors.IdlError` (an ``IdlErrors`` listing every problem)
    when the IDL is wrong.
    """
    paths = [path] if isinstance(path, str | Path) else list(path)
    compiled = compile_idl(paths, include_dirs, dict(defines or {}))
    schema = compiled.schema
    prefix = f"_edgebus_idl_{next(_counter)}"
    emitter = PythonEmitter(schema, PythonOptions(package=prefix))
    files = emitter.emit()
    with _lock:
        _install()
        _finder.sources[prefix] = ("", True)
        for relative, source in files.items():
            module = relative[: -len(".py")].replace("/", ".")
            is_package = module.endswith(".__init__")
            if is_package:
                module = module[: -len(".__init__")]
            _finder.sources[module] = (source, is_package)
    loaded = LoadedSchema(schema, warnings=list(compiled.warnings))
    for name, declared in schema.types.items():
        placement = emitter.placement[name]
        try:
            value = getattr(importlib.import_module(placement.module), placement.name)
        except Exception as exc:
            # an IDL that compiles but whose class cyclonedds-python refuses: still an
            # IdlError for callers (the adapters report those), chained to the cause
            origin = schema.origins.get(name) or str(paths[0])
            raise IdlErrors([IdlError(
                f"cyclonedds-python cannot build {name} from the generated code "
                f"({type(exc).__name__}: {exc})", origin, 0, 0)]) from exc
        if isinstance(declared, StructType | UnionType | EnumType):
            loaded.types[name] = value
        elif isinstance(declared, TypedefType):
            loaded.typedefs[name] = value
    for scope in schema.modules:
        loaded.modules[scope] = importlib.import_module(emitter.package_of(scope + "::x"))
    for name, constant in schema.constants.items():
        resolved = schema.resolve(constant.type)
        if isinstance(resolved, EnumType):
            enum_class: Any = loaded.types[resolved.name]
            loaded.constants[name] = enum_class[python_name(str(constant.value), ENUM_RESERVED)]
        else:
            package = importlib.import_module(emitter.package_of(name))
            loaded.constants[name] = getattr(
                package, python_name(name.rsplit("::", 1)[-1], set()), constant.value)
    return loaded
