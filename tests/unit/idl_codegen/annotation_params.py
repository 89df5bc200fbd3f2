"""Names in builtin annotation parameters (``@default(K)``, ``@id(K)``, ``@value(K)``):
what Cyclone's ``idlc`` (0.10.2) refuses and accepts, one small file each.

``idlc`` looks such names up from the global scope (where the builtin annotations are
declared), not from the scope the annotation is written in, and ``@default`` only sets
primitive and string members. ``test_annotation_params`` runs our command and loader on
these files; ``tests/interop/idl_codegen/test_idlc_annotation_params`` runs ``idlc`` on
the same files.

``error`` is our first error (``t.idl:line:col: message``), None when both accept the
file; ``defaults`` are then the generated defaults of struct ``S`` (in module ``M`` when
there is one), member by member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ANNOTATION_CASES", "AnnotationCase"]

_GLOBAL = "are looked up from the global scope, as Cyclone's idlc does"


@dataclass(frozen=True)
class AnnotationCase:
    name: str
    idl: str
    error: str | None
    defaults: dict[str, Any] = field(default_factory=dict)


ANNOTATION_CASES = [
    # -- accepted ------------------------------------------------------------------------
    AnnotationCase("a global constant",
                   "const long K = 5;\nstruct S { @default(K) long x; };", None, {"x": 5}),
    AnnotationCase("a module's constant, qualified",
                   "module M { const long K = 5;\n"
                   "  struct S { @default(M::K) long x; @default(::M::K) long y; }; };",
                   None, {"x": 5, "y": 5}),
    AnnotationCase("an expression of qualified constants",
                   "const long G = 3;\nmodule M { const long K = 5;\n"
                   "  struct S { @default(M::K * 2) long x; @default(G + M::K) short y; }; };",
                   None, {"x": 10, "y": 8}),
    AnnotationCase("a nested module's constant",
                   "module M { module N { const long K = 4; };\n"
                   "  struct S { @default(M::N::K << 1) long x; }; };", None, {"x": 8}),
    AnnotationCase("a global constant shadowed in the module",
                   "const long K = 7;\nmodule M { const long K = 5;\n"
                   "  struct S { @default(K) long x; }; };", None, {"x": 7}),
    AnnotationCase("an integer constant for a double",
                   "module M { const long K = 5;\n  struct S { @default(M::K) double x; }; };",
                   None, {"x": 5.0}),
    AnnotationCase("string, boolean and char constants",
                   "module M { const string T = \"hi\"; const boolean B = TRUE;\n"
                   "  const char C = 'z';\n"
                   "  struct S { @default(M::T) string t; @default(M::B) boolean b;"
                   " @default(M::C) char c; }; };",
                   None, {"t": "hi", "b": True, "c": "z"}),
    AnnotationCase("@id and @value with qualified constants",
                   "module M { const long K = 3; enum E { @value(M::K) A };\n"
                   "  struct S { @id(M::K) long x; E e; }; };", None, {"x": 0}),
    # -- refused: where idlc looks names up ----------------------------------------------
    AnnotationCase("a module's constant, unqualified",
                   "module M { const long K = 5;\n  struct S { @default(K) long x; }; };",
                   f"t.idl:2:23: 'K' cannot be resolved: names in @default {_GLOBAL}; "
                   "write 'M::K'"),
    AnnotationCase("an expression of a module's constant, unqualified",
                   "module M { const long K = 5;\n  struct S { @default(K * 2) long x; }; };",
                   f"t.idl:2:23: 'K' cannot be resolved: names in @default {_GLOBAL}; "
                   "write 'M::K'"),
    AnnotationCase("a nested module's constant, relative to the module",
                   "module M { module N { const long K = 4; };\n"
                   "  struct S { @default(N::K) long x; }; };",
                   f"t.idl:2:23: 'N::K' cannot be resolved: names in @default {_GLOBAL}; "
                   "write 'M::N::K'"),
    AnnotationCase("a global constant that does not fit, shadowed in the module",
                   "const long K = 100000;\nmodule M { const long K = 5;\n"
                   "  struct S { @default(K) short x; }; };",
                   "t.idl:3:23: 100000 does not fit in int16 (-32768..32767)"),
    AnnotationCase("an unknown constant",
                   "module M { const long K = 5;\n  struct S { @default(M::Q) long x; }; };",
                   "t.idl:2:23: unknown constant 'M::Q'"),
    AnnotationCase("a member's name",
                   "module M { struct S { long K;\n  @default(K) long x; }; };",
                   "t.idl:2:12: unknown constant 'K'"),
    AnnotationCase("@id with a module's constant, unqualified",
                   "module M { const long K = 3;\n  struct S { @id(K) long x; }; };",
                   f"t.idl:2:18: 'K' cannot be resolved: names in @id {_GLOBAL}; write 'M::K'"),
    AnnotationCase("@value with a module's constant, unqualified",
                   "module M { const long K = 3;\n  enum E { @value(K) A }; struct S { E e; }; };",
                   f"t.idl:2:19: 'K' cannot be resolved: names in @value {_GLOBAL}; "
                   "write 'M::K'"),
    # -- refused: what @default may set --------------------------------------------------
    AnnotationCase("a string constant for a long",
                   "module M { const string K = \"a\";\n  struct S { @default(M::K) long x; }; };",
                   "t.idl:2:23: expected an integer, got 'a'"),
    AnnotationCase("a double constant for a long",
                   "module M { const double K = 5.5;\n  struct S { @default(M::K) long x; }; };",
                   "t.idl:2:23: expected an integer, got 5.5"),
    AnnotationCase("an enumerator for an enum member",
                   "module M { enum Color { RED, GREEN, BLUE };\n"
                   "  struct S { @default(M::BLUE) Color c; }; };",
                   "t.idl:2:14: @default cannot be applied to a member of enum type 'M::Color' "
                   "(Cyclone's idlc refuses it); mark the enum's default literal "
                   "@default_literal instead"),
    AnnotationCase("an enum constant for an enum member",
                   "module M { enum Color { RED, GREEN, BLUE }; const Color C = GREEN;\n"
                   "  struct S { @default(M::C) Color c; }; };",
                   "t.idl:2:14: @default cannot be applied to a member of enum type 'M::Color' "
                   "(Cyclone's idlc refuses it); mark the enum's default literal "
                   "@default_literal instead"),
]
