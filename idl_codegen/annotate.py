"""Which IDL annotations apply where, and reading their parameters.

The builtin annotations the generator understands are listed per place they may be
written. A known annotation in the wrong place is an error; documentation-only ones
(``@verbatim``, ``@unit``, ``@range``...) are ignored silently; known but unsupported
ones and unknown ones are ignored with a warning, as IDL 4 allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from idl_codegen.diagnostics import Diagnostics
from idl_codegen.syntax import Annotation, Expr, Literal, NameRef

__all__ = ["AnnotationReader", "Applied"]

ALLOWED: dict[str, frozenset[str]] = {
    "struct": frozenset({"final", "appendable", "mutable", "extensibility", "topic", "nested",
                         "autoid"}),
    "union": frozenset({"final", "appendable", "mutable", "extensibility", "topic", "nested"}),
    "member": frozenset({"key", "optional", "id", "default"}),
    "union member": frozenset({"id"}),
    "enum": frozenset(),
    "enumerator": frozenset({"value", "default_literal"}),
    "discriminator": frozenset({"key"}),
    "module": frozenset(),
    "typedef": frozenset(),
    "const": frozenset(),
}
_KNOWN = frozenset().union(*ALLOWED.values())
_DOCUMENTATION = frozenset({
    "verbatim", "unit", "range", "min", "max", "try_construct", "service", "oneway", "ami",
})
# these change the types' meaning (@default_nested: which types are topic types;
# @data_representation: XCDR1 or XCDR2 on the wire), so ignoring them is warned about
_UNSUPPORTED = frozenset({"must_understand", "external", "non_serialized", "hashid", "bit_bound",
                          "position", "ignore_literal_names", "default_nested",
                          "data_representation"})


@dataclass(frozen=True, slots=True)
class Applied:
    """The annotations that apply to one declaration, by name (last one wins)."""

    by_name: dict[str, Annotation]

    def __contains__(self, name: str) -> bool:
        return name in self.by_name

    def get(self, name: str) -> Annotation | None:
        return self.by_name.get(name)


class AnnotationReader:
    def __init__(self, diagnostics: Diagnostics) -> None:
        self._diag = diagnostics

    def applied(self, annotations: list[Annotation], place: str) -> Applied:
        """Check ``annotations`` written on a ``place`` (a key of ``ALLOWED``)."""
        found: dict[str, Annotation] = {}
        allowed = ALLOWED[place]
        for annotation in annotations:
            name = annotation.name
            if name in allowed:
                found[name] = annotation
            elif name in _KNOWN:
                self._diag.error(annotation.location, f"@{name} cannot be applied to a {place}")
            elif name in _UNSUPPORTED:
                self._diag.warn(annotation.location, f"@{name} is not supported; ignored")
            elif name not in _DOCUMENTATION:
                self._diag.warn(annotation.location, f"unknown annotation '@{name}' ignored")
        return Applied(found)

    def single_param(self, annotation: Annotation, key: str = "value") -> Expr | None:
        """The one parameter of ``@name(x)`` or ``@name(value=x)``; None when absent."""
        params = annotation.params
        if not params:
            return None
        if len(params) == 1 and params[0][0] in (None, key):
            return params[0][1]
        self._diag.error(annotation.location,
                         f"@{annotation.name} takes one parameter")
        return None

    def flag(self, annotation: Annotation | None) -> bool:
        """``@key`` / ``@key(TRUE)`` is True, ``@key(FALSE)`` and absence are False."""
        if annotation is None:
            return False
        param = self.single_param(annotation)
        if param is None:
            return True
        if isinstance(param, Literal) and param.kind == "boolean":
            return bool(param.value)
        self._diag.error(param.location, f"@{annotation.name} takes TRUE or FALSE")
        return False

    def word(self, annotation: Annotation, choices: tuple[str, ...]) -> str | None:
        """A word parameter such as ``@extensibility(APPENDABLE)``, lower-cased."""
        param = self.single_param(annotation, "kind")
        if isinstance(param, NameRef) and len(param.name.parts) == 1:
            word = param.name.parts[0].lower()
            if word in choices:
                return word
        where = param.location if param is not None else annotation.location
        options = ", ".join(choice.upper() for choice in choices)
        self._diag.error(where, f"@{annotation.name} takes one of {options}")
        return None
