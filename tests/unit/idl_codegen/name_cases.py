"""IDL names that differ only in case: what Cyclone's ``idlc`` (0.10.2) refuses and
accepts, one small file each. ``test_names`` checks our errors against ``error``;
``tests/interop/idl_codegen/test_idlc_names`` runs ``idlc`` on the same files.

``error`` is our first error (``t.idl:line:col: message``), None when both accept the
file. The offending identifier is always on the last line of ``idl``, which is also
where ``idlc`` reports it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NAME_CASES", "NameCase"]

_CASE = "(IDL names must differ in more than case)"
_SPELL = "(IDL names must be written as declared)"


@dataclass(frozen=True)
class NameCase:
    name: str
    idl: str
    error: str | None


NAME_CASES = [
    # -- refused: two declarations in one scope --------------------------------------------
    NameCase("members of one struct",
             "module m { struct S {\n  long value;\n  long Value; }; };",
             "t.idl:3:8: 'Value' collides with member 'value' of struct 'm::S' declared at "
             "t.idl:2:8"),
    NameCase("two types in one module",
             "module m {\n  struct Point { long x; };\n  struct point { long y; }; };",
             f"t.idl:3:10: 'point' collides with 'Point' declared at t.idl:2:10 {_CASE}"),
    NameCase("a typedef and a struct",
             "module m {\n  struct Point { long x; };\n  typedef long point; };",
             f"t.idl:3:16: 'point' collides with 'Point' declared at t.idl:2:10 {_CASE}"),
    NameCase("a member and its struct",
             "module m { struct Point {\n  long point; }; };",
             "t.idl:2:8: 'point' collides with 'Point' declared at t.idl:1:19, the struct it "
             "is declared in"),
    NameCase("a member spelled as its struct",
             "module m { struct Point {\n  long Point; }; };",
             "t.idl:2:8: 'Point' collides with 'Point' declared at t.idl:1:19, the struct it "
             "is declared in"),
    NameCase("a member spelled as an inherited one",
             "module m { struct A { long x; };\n  struct B : A { long x; }; };",
             "t.idl:2:23: 'x' collides with member 'x' inherited from 'm::A' declared at "
             "t.idl:1:28"),
    NameCase("members of a derived struct",
             "module m { struct A { long ab; };\n  struct B : A { long Ab;\n  long aB; }; };",
             "t.idl:3:8: 'aB' collides with member 'Ab' of struct 'm::B' declared at "
             "t.idl:2:23"),
    NameCase("enumerators of one enum",
             "module m { enum E { RED,\n  red }; };",
             f"t.idl:2:3: 'red' collides with 'RED' declared at t.idl:1:21 {_CASE}"),
    NameCase("enumerators of two enums",
             "module m { enum E { RED };\n  enum F { red }; };",
             f"t.idl:2:12: 'red' collides with 'RED' declared at t.idl:1:21 {_CASE}"),
    NameCase("an enumerator and a type",
             "module m { enum E { POINT };\n  struct point { long x; }; };",
             f"t.idl:2:10: 'point' collides with 'POINT' declared at t.idl:1:21 {_CASE}"),
    NameCase("an enumerator and its module",
             "module m {\n  enum E { M }; };",
             "t.idl:2:12: 'M' collides with 'm' declared at t.idl:1:1, the module it is "
             "declared in"),
    NameCase("union branches",
             "module m { union U switch (long) {\n  case 1: long v;\n  case 2: long V; }; };",
             "t.idl:3:16: 'V' collides with member 'v' of union 'm::U' declared at t.idl:2:16"),
    NameCase("a branch and its union",
             "module m { union U switch (long) {\n  case 1: long u; }; };",
             "t.idl:2:16: 'u' collides with 'U' declared at t.idl:1:18, the union it is "
             "declared in"),
    NameCase("a module and a type",
             "module m {\n  module Point { struct A { long x; }; };\n"
             "  struct point { long y; }; };",
             f"t.idl:3:10: 'point' collides with 'Point' declared at t.idl:2:3 {_CASE}"),
    NameCase("a top-level module and type",
             "module m { struct A { long x; }; };\nstruct M { long y; };",
             f"t.idl:2:8: 'M' collides with 'm' declared at t.idl:1:1 {_CASE}"),
    NameCase("a type and its module",
             "module m {\n  struct M { long x; }; };",
             "t.idl:2:10: 'M' collides with 'm' declared at t.idl:1:1, the module it is "
             "declared in"),
    NameCase("a module inside its namesake",
             "module m {\n  module m { struct A { long x; }; }; };",
             "t.idl:2:3: 'm' collides with 'm' declared at t.idl:1:1, the module it is "
             "declared in"),
    # -- refused: a name used in a scope, then a declaration differing in case (7.5.3) ---
    NameCase("a type used, then declared again",
             "module m { struct Point { long x; };\n  module n { typedef Point T;\n"
             "  struct point { long y; }; }; };",
             "t.idl:3:10: 'point' collides with 'Point' used at t.idl:2:22 for struct "
             "'m::Point' (IDL 4: a name used in a scope cannot be declared in it again)"),
    # -- refused: a reference that matches only when case is ignored -------------------
    NameCase("a reference to a type, spelled otherwise",
             "module m { struct Point { long x; };\n  struct S { point p; }; };",
             f"t.idl:2:14: 'point' differs in case from struct 'Point' declared at t.idl:1:19 "
             f"{_SPELL}"),
    NameCase("a type hidden by a member",
             "module m { typedef long A;\n  struct S { long a;\n  A other; }; };",
             f"t.idl:3:3: 'A' differs in case from member 'a' declared at t.idl:2:19 {_SPELL}"),
    NameCase("a constant hidden by a member",
             "module m { const long N = 2;\n  struct S { long n;\n  long a[N]; }; };",
             f"t.idl:3:10: 'N' differs in case from member 'n' declared at t.idl:2:19 {_SPELL}"),
    NameCase("a type hidden by an inherited member",
             "module m { typedef long T; struct A { long t; };\n  struct B : A { T x; }; };",
             f"t.idl:2:18: 'T' differs in case from member 't' declared at t.idl:1:44 {_SPELL}"),
    NameCase("a case label hidden by a branch",
             "module m { enum E { A, B };\n  union U switch (E) { case A: long b;\n"
             "  case B: long c; }; };",
             f"t.idl:3:8: 'B' differs in case from member 'b' declared at t.idl:2:37 {_SPELL}"),
    NameCase("a module hidden by a member",
             "module m { struct S { long x; }; };\nmodule n { struct T { long M;\n"
             "  m::S s; }; };",
             f"t.idl:3:3: 'm' differs in case from member 'M' declared at t.idl:2:28 {_SPELL}"),
    NameCase("an outer type hidden by a nearer one",
             "module m { struct Point { long x; };\n  module n { struct point { long y; };\n"
             "  struct S { Point p; }; }; };",
             f"t.idl:3:14: 'Point' differs in case from struct 'point' declared at t.idl:2:21 "
             f"{_SPELL}"),
    NameCase("a scoped name spelled otherwise",
             "module m { struct A { long x; }; };\nmodule n {\n  struct S { M::A a; }; };",
             f"t.idl:3:14: 'M' differs in case from module 'm' declared at t.idl:1:1 {_SPELL}"),
    NameCase("an enumerator spelled otherwise",
             "module m { enum E { A, B };\n  const E c = a; };",
             f"t.idl:2:15: 'a' differs in case from enumerator 'A' declared at t.idl:1:21 "
             f"{_SPELL}"),
    NameCase("a forward declaration used, then defined in another case",
             "module m { struct Point;\n  struct S { sequence<Point> p; };\n"
             "  struct point { long x; }; };",
             "t.idl:3:10: 'point' defines struct 'Point' declared forward at t.idl:1:19, which "
             "is used under that spelling before; spell them alike"),
    # -- refused: a typedef, enum or forward declaration is not introduced by its use, so a
    #    member named like it hides it from the members after (idlc introduces only names
    #    of modules, structs and unions: scope.c idl_resolve) ------------------------------
    NameCase("a typedef used by a member named like it",
             "typedef long A; struct S { A a;\n  A other; };",
             f"t.idl:2:3: 'A' differs in case from member 'a' declared at t.idl:1:30 {_SPELL}"),
    NameCase("an enum used by a member named like it",
             "enum E { R }; struct S { E e; long x;\n  E f; };",
             f"t.idl:2:3: 'E' differs in case from member 'e' declared at t.idl:1:28 {_SPELL}"),
    NameCase("an enum in a sequence after a member named like it",
             "module m { enum Color { RED }; struct S { Color color;\n  sequence<Color> colors; };"
             " };",
             f"t.idl:2:12: 'Color' differs in case from member 'color' declared at t.idl:1:49 "
             f"{_SPELL}"),
    NameCase("a typedef of a struct used by a member named like it",
             "struct P { long x; }; typedef P Q; struct S { Q q;\n  Q r; };",
             f"t.idl:2:3: 'Q' differs in case from member 'q' declared at t.idl:1:49 {_SPELL}"),
    NameCase("a struct only declared forward, used by a member named like it",
             "struct F; struct S { sequence<F> f;\n  sequence<F> g; }; struct F { long x; };",
             f"t.idl:2:12: 'F' differs in case from member 'f' declared at t.idl:1:34 {_SPELL}"),
    NameCase("a typedef in a union branch named like it",
             "typedef long A; union U switch (long) { case 1: A a;\n  case 2: A b; };",
             f"t.idl:2:11: 'A' differs in case from member 'a' declared at t.idl:1:51 {_SPELL}"),
    NameCase("an enum discriminator hidden by a branch",
             "enum E { R, Q }; union U switch (E) { case R: long e;\n  case E::Q: long f; };",
             f"t.idl:2:8: 'E' differs in case from member 'e' declared at t.idl:1:52 {_SPELL}"),
    NameCase("a module's typedef, then a member named like the module",
             "module n { typedef long T; }; struct S { n::T t; long N;\n  n::T u; };",
             f"t.idl:2:3: 'n' differs in case from member 'N' declared at t.idl:1:55 {_SPELL}"),
    NameCase("a module's enum, then a member named like the module",
             "module n { enum T { A }; }; struct S { n::T t; long N;\n  n::T u; };",
             f"t.idl:2:3: 'n' differs in case from member 'N' declared at t.idl:1:53 {_SPELL}"),
    NameCase("a module's struct used in a module, then declared again",
             "module n { struct T { long x; }; }; module m { typedef n::T U;\n"
             "  typedef short N; };",
             "t.idl:2:17: 'N' collides with 'n' used at t.idl:1:56 for module 'n' (IDL 4: a "
             "name used in a scope cannot be declared in it again)"),
    # -- accepted by both -------------------------------------------------------------------
    NameCase("the same name in different scopes",
             "module a { struct S { long x; }; };\nmodule b { struct s { long x; }; };", None),
    NameCase("a reopened module",
             "module m { struct A { long x; }; };\nmodule m { struct B { A a; }; };", None),
    NameCase("modules differing in case",
             "module m { struct A { long x; }; };\nmodule M { struct a { long y; }; };", None),
    NameCase("a member named like a type of the module",
             "module m { struct Point { long x; };\n  struct S { long point; }; };", None),
    NameCase("a member named like the type it uses",
             "module m { struct Point { long x; };\n  struct S { Point point; Point other; }; };",
             None),
    NameCase("a member named like its module",
             "module m {\n  struct S { long M; }; struct T { long m; }; };", None),
    NameCase("a type named like a module two levels out",
             "module m { module n {\n  struct M { long x; }; }; };", None),
    NameCase("an enumerator named like a member",
             "module m { enum E { A, B };\n  struct S { E a; }; };", None),
    NameCase("an inherited member differing in case",
             "module m { struct A { long x; };\n  struct B : A { long X; }; };", None),
    NameCase("a member named like the base struct",
             "module m { struct A { long x; };\n  struct B : A { long a; }; };", None),
    NameCase("a constant used, then a declaration differing in case",
             "module m { const long K = 1; module n {\n  const long J = K; struct k { long y; }; };"
             " };", None),
    NameCase("a forward declaration defined in another case",
             "module m { struct Point;\n  struct point { long x; };\n"
             "  struct S { sequence<point> p; }; };", None),
    NameCase("a forward declaration after the definition, in another case",
             "module m { struct Point { long x; };\n  struct point; };", None),
    NameCase("a member named like the union it uses",
             "union U switch (long) { case 1: long x; };\n  struct S { U u; U v; };", None),
    NameCase("a member named like the module of the struct it uses",
             "module n { struct T { long x; }; };\n  struct S { n::T t; long N; n::T u; };", None),
    NameCase("a typedef used in a module, then declared again there",
             "typedef long T; module m { typedef T U;\n  typedef short T; };", None),
    NameCase("an enum used in a module, then a declaration differing in case",
             "enum T { A }; module m { typedef T U;\n  typedef short t; };", None),
    NameCase("a module's typedef used in a module, then a declaration differing in case",
             "module n { typedef long T; }; module m { typedef n::T U;\n  typedef short N; };",
             None),
]
