"""Python emitter: a :class:`~idl_codegen.model.Schema` -> cyclonedds-python sources.

Layout: one package per IDL module (``a::b`` -> ``a/b/__init__.py``), which re-exports
its types and holds its constants; each type lives in a private file of its package
(``a/b/_Point.py``). Types that refer to each other (a recursive group) share one
file, so the imports between files never form a cycle and importing any package in
any order works.

The classes are ordinary cyclonedds ``IdlStruct`` / ``IdlUnion`` / ``IdlEnum`` classes
with their fully qualified IDL name as ``typename``. Field annotations use the
``typing.Annotated`` form cyclonedds builds internally (``Annotated[Sequence[int],
types.sequence(types.int32, 8)]``), which type-checks without a mypy plugin. Every
struct member has a default (``@default`` or the IDL zero value), so ``Msg()`` is a
valid sample. Generator imports use ``_``-prefixed names, which no IDL name can clash
with. The class body is a scope of its own, where a member named like a builtin the
generated code uses (``str: str = ""``) hides it from the lines after it: in such a class
those builtins are written ``_builtins.str``, ``_builtins.list``, ...

Here: the options, the plan (which file and package each type goes to) and the
packages' ``__init__.py``; the type files are ``idl_codegen.emit_python_types``.
"""

from __future__ import annotations

from dataclasses import dataclass

from idl_codegen.emit_python_types import TypeFileRenderer, python_value
from idl_codegen.graph import components
from idl_codegen.model import EnumType, Schema
from idl_codegen.naming import ENUM_RESERVED, python_name, python_package_path
from idl_codegen.provenance import provenance
from idl_codegen.pysource import (
    docstring_lines,
    import_blocks,
    isort_name_key,
    python_literal,
    wrap_all,
)

__all__ = ["PythonEmitter", "PythonOptions", "emit_python"]


@dataclass(frozen=True, slots=True)
class PythonOptions:
    """``package``: a dotted package to generate into (empty: top level);
    ``global_package``: the package for types declared outside any module."""

    package: str = ""
    global_package: str = "idl_global"


def emit_python(schema: Schema, options: PythonOptions | None = None) -> dict[str, str]:
    """The generated files, as ``{relative posix path: content}``."""
    return PythonEmitter(schema, options or PythonOptions()).emit()


@dataclass(slots=True)
class Placement:
    package: str
    module: str
    name: str


class PythonEmitter:
    """Plans where every type goes (``placement``: IDL name -> module and Python name)
    and renders the files."""

    def __init__(self, schema: Schema, options: PythonOptions) -> None:
        self.schema = schema
        self.options = options
        self.placement: dict[str, Placement] = {}
        self.files: list[tuple[str, list[str]]] = []
        self._plan()

    # -- planning ----------------------------------------------------------------------

    def package_of(self, qualified: str) -> str:
        scope = qualified.rsplit("::", 1)[0] if "::" in qualified else ""
        if not scope:
            return python_package_path(self.options.global_package, self.options.package)
        return python_package_path(scope, self.options.package)

    def _plan(self) -> None:
        used: dict[str, set[str]] = {}
        for name in self.schema.types:
            package = self.package_of(name)
            taken = used.setdefault(package, set())
            simple = python_name(name.rsplit("::", 1)[-1], taken)
            taken.add(simple)
            self.placement[name] = Placement(package, "", simple)
        for component in components(self.schema):
            first = self.placement[component[0]]
            module = f"{first.package}._{first.name}"
            for name in component:
                self.placement[name].module = module
            self.files.append((module, component))

    def packages(self) -> list[str]:
        """Every package to write, parents before children, in first-seen order."""
        found: dict[str, None] = {}
        prefix_depth = len(self.options.package.split(".")) if self.options.package else 0
        scopes = list(self.schema.modules)
        scopes += [name.rsplit("::", 1)[0] if "::" in name else ""
                   for name in [*self.schema.types, *self.schema.constants]]
        for scope in scopes:
            package = self.package_of(scope + "::x") if scope else self.package_of("x")
            parts = package.split(".")
            for depth in range(prefix_depth + 1, len(parts) + 1):
                found[".".join(parts[:depth])] = None
        return list(found)

    # -- output ------------------------------------------------------------------------

    def emit(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for module, component in self.files:
            renderer = TypeFileRenderer(self, module, component)
            out[module.replace(".", "/") + ".py"] = renderer.render()
        for package in self.packages():
            out[package.replace(".", "/") + "/__init__.py"] = self._render_package(package)
        return dict(sorted(out.items()))

    def _render_package(self, package: str) -> str:
        types = [name for name in self.schema.types if self.placement[name].package == package]
        constants = [name for name in self.schema.constants
                     if self.package_of(name) == package]
        children = sorted({p for p in self.packages()
                           if p.rsplit(".", 1)[0] == package and p != package})
        scope = self._scope_of_package(package)
        sources = [self.schema.origins.get(name, "") for name in types + constants]
        title = f"IDL module ``{scope}``." if scope else "IDL types declared outside any module."
        lines = [f'"""{title}', "", *docstring_lines(provenance(s for s in sources if s)),
                 '"""', ""]
        entries: list[tuple[str, str, str | None]] = []
        exported: list[str] = []
        for child in children:
            leaf = child.rsplit(".", 1)[-1]
            entries.append((package, leaf, leaf))
            exported.append(leaf)
        for name in types:
            placement = self.placement[name]
            entries.append((placement.module, placement.name, None))
            exported.append(placement.name)
        const_lines: list[str] = []
        for name in constants:
            constant = self.schema.constants[name]
            const_name = python_name(name.rsplit("::", 1)[-1], set(exported))
            resolved = self.schema.resolve(constant.type)
            if isinstance(resolved, EnumType):
                placement = self.placement[resolved.name]
                if (placement.module, placement.name, None) not in entries:
                    entries.append((placement.module, placement.name, None))
                literal = python_name(str(constant.value), ENUM_RESERVED)
                const_lines.append(f"{const_name}: {placement.name} = {placement.name}.{literal}")
            else:
                value = python_value(constant.value, resolved)
                const_lines.append(f"{const_name}: {type(value).__name__} = "
                                   f"{python_literal(value)}")
            exported.append(const_name)
        imports = import_blocks([], entries, package.split(".")[0])
        lines += imports
        if const_lines:
            lines += ([""] if imports else []) + const_lines
        if lines[-1] != "":
            lines.append("")
        ordered = sorted(exported, key=isort_name_key)
        lines.append("__all__ = [" + ", ".join(f'"{n}"' for n in ordered) + "]")
        return "\n".join(wrap_all(lines)) + "\n"

    def _scope_of_package(self, package: str) -> str:
        prefix = self.options.package
        rest = package[len(prefix) + 1:] if prefix else package
        if rest == python_package_path(self.options.global_package):
            return ""
        for scope in self.schema.modules:
            if python_package_path(scope) == rest:
                return scope
        return rest.replace(".", "::")
