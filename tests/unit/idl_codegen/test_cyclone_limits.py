"""``cyclone_misreads``: the unions Cyclone's C core misreads (a short discriminator, a
negative label and a default case), found through typedefs, sequences, arrays, bases
and nested unions; the shapes measured intact are not flagged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from idl_codegen.cyclone_limits import cyclone_misreads
from idl_codegen.frontend import compile_idl

BAD = "union U switch (short) { case -1: long long neg; default: boolean flag; };"


@pytest.mark.parametrize(("idl", "root", "union"), [
    (f"module m {{ {BAD} struct S {{ long id; octet o; U u; }}; }};", "m::S", "m::U"),
    (f"module m {{ {BAD} }};", "m::U", "m::U"),
    ("module m { typedef short D; union U switch (D) { case -3: long v; default: "
     "string s; }; struct S { sequence<U> us; }; };", "m::S", "m::U"),
    (f"module m {{ {BAD} typedef U T[2]; struct B {{ T t; }}; struct S : B {{ long x; }}; "
     f"}};", "m::S", "m::U"),
    (f"module m {{ {BAD} union O switch (long) {{ case 1: U u; }}; struct S {{ O o; }}; }};",
     "m::S", "m::U"),
], ids=["member", "root", "typedef-discriminator-in-sequence", "array-in-base", "nested"])
def test_misread_unions_are_named(write_idl: Callable[..., Path], idl: str, root: str,
                                  union: str) -> None:
    schema = compile_idl([write_idl(idl)]).schema
    problem = cyclone_misreads(schema, root)
    assert problem is not None
    assert problem.startswith(f"union '{union}'")
    assert "Use a long discriminator, non-negative labels, or no default case" in problem


@pytest.mark.parametrize("union", [
    "union U switch (short) { case -1: long long neg; case 2: boolean flag; };",
    "union U switch (long) { case -1: long long neg; default: boolean flag; };",
    "union U switch (int8) { case -1: long long neg; default: boolean flag; };",
    "union U switch (short) { case 1: long long neg; default: boolean flag; };",
    "union U switch (unsigned short) { case 1: long long neg; default: boolean flag; };",
], ids=["no-default", "long", "int8", "positive-labels", "unsigned"])
def test_shapes_measured_intact_pass(write_idl: Callable[..., Path], union: str) -> None:
    schema = compile_idl([write_idl(f"module m {{ {union} struct S {{ octet o; U u; }}; }};")]
                         ).schema
    assert cyclone_misreads(schema, "m::S") is None
