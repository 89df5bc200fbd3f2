"""The generated Python: layout, naming, and code that passes ruff and mypy and imports."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from idl_codegen.emit_python import PythonOptions, emit_python
from idl_codegen.frontend import compile_idl
from idl_codegen.pysource import python_literal
from tests.helpers.timeouts import unit
from tests.unit.idl_codegen.corpus import CASES, generate_case

ROOT = Path(__file__).resolve().parents[3]
Write = Callable[..., Path]


def write_tree(files: dict[str, str], root: Path) -> Path:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return root


def python_of(write_idl: Write, text: str, options: PythonOptions | None = None
              ) -> dict[str, str]:
    return emit_python(compile_idl([write_idl(text)]).schema, options)


def run_python(code: str, path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=path, capture_output=True,
                          text=True, timeout=unit(60), check=False)
    assert done.stderr == ""
    return done.stdout


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_code_passes_ruff(case: str, tmp_path: Path) -> None:
    out = write_tree(generate_case(case, ("python",)).files, tmp_path / case)
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(out)],
                          capture_output=True, text=True, timeout=unit(60), check=False)
    assert done.stdout + done.stderr == "All checks passed!\n"


def test_generated_code_passes_mypy_strict(tmp_path: Path) -> None:
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\npython_version = 3.11\nstrict = True\nwarn_unused_ignores = True\n"
                      "disallow_untyped_calls = False\n")
    for case in sorted(CASES):
        out = write_tree(generate_case(case, ("python",)).files, tmp_path / case)
        packages = sorted(path.name for path in out.iterdir())
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir",
             str(tmp_path / ".mypy_cache"), *(arg for p in packages for arg in ("-p", p))],
            cwd=out, capture_output=True, text=True, timeout=unit(120), check=False)
        assert done.stdout.startswith("Success: no issues found in "), done.stdout
        checked = int(done.stdout.split(" in ")[1].split()[0])
        assert checked == len(generate_case(case, ("python",)).files)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_generated_module_imports_first(case: str, tmp_path: Path) -> None:
    """Each module can be the first one imported: imports between files never cycle."""
    files = generate_case(case, ("python",)).files
    out = write_tree(files, tmp_path / case)
    modules = [relative[:-3].replace("/", ".").removesuffix(".__init__") for relative in files]
    roots = sorted({module.split(".")[0] for module in modules})
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n"
            f"    for loaded in [m for m in sys.modules if m.split('.')[0] in {roots!r}]:\n"
            "        del sys.modules[loaded]\n"
            "    importlib.import_module(name)\n"
            "print(len(sys.modules) > 0)\n")
    assert run_python(code, out) == "True\n"


def test_samples_default_to_idl_zero_values_and_defaults(tmp_path: Path) -> None:
    out = write_tree(generate_case("ros2", ("python",)).files, tmp_path)
    code = ("from geometry_msgs.msg.dds_ import Quaternion_\n"
            "from sensor_msgs.msg.dds_ import NavSatFix_, NavSatStatus_Constants\n"
            "q = Quaternion_()\nprint(q.x, q.w)\n"
            "fix = NavSatFix_()\nprint(fix.status.status, len(fix.position_covariance))\n"
            "print(NavSatStatus_Constants.STATUS_NO_FIX)\n"
            "print(NavSatFix_.deserialize(fix.serialize()) == fix)\n"
            "print(NavSatFix_.__idl_typename__)\n")
    assert run_python(code, out) == ("0.0 1.0\n-2 9\n-1\nTrue\n"
                                     "sensor_msgs::msg::dds_::NavSatFix_\n")


def test_python_keywords_become_attributes_with_an_underscore(write_idl: Write) -> None:
    files = python_of(write_idl, "module m { struct S { long from; long value; };\n"
                                 "union U switch (long) { case 1: long value; case 2: long get; };"
                                 "\nenum E { None, mro }; };")
    struct = files["m/_S.py"]
    assert '    from_: _types.int32 = 0\n    _annotate.member_name("from_", "from")\n' in struct
    assert "    value: _types.int32 = 0\n" in struct
    union = files["m/_U.py"]
    member = ('    value_: _typing.Annotated[int | None, _types.case(1, _types.int32)]\n'
              '    _annotate.member_name("value_", "value")\n')
    assert member in union
    assert '_annotate.member_name("get_", "get")' in union
    assert "    None_ = 0\n    mro_ = 1\n" in files["m/_E.py"]


def test_recursive_types_share_one_file(write_idl: Write) -> None:
    files = python_of(write_idl, """module m {
        struct B; struct A { sequence<B> bs; }; struct B { sequence<A> as_; };
        struct C { A a; };
    };""")
    assert sorted(files) == ["m/_A.py", "m/_C.py", "m/__init__.py"]
    assert '_types.sequence("m._A.B")' in files["m/_A.py"]
    assert "from m._A import A\n" in files["m/_C.py"]


def test_package_option_and_global_scope(write_idl: Write) -> None:
    files = python_of(write_idl, "struct G { long v; };\nmodule m { struct S { G g; }; };",
                      PythonOptions(package="gen.idl", global_package="top"))
    assert sorted(files) == ["gen/idl/m/_S.py", "gen/idl/m/__init__.py",
                             "gen/idl/top/_G.py", "gen/idl/top/__init__.py"]
    assert "from gen.idl.top._G import G\n" in files["gen/idl/m/_S.py"]


def test_same_simple_names_from_two_modules_are_aliased(write_idl: Write) -> None:
    files = python_of(write_idl, """module a { struct T { long x; }; };
        module b { struct T { long y; }; struct U { a::T at; T bt; }; };""")
    source = files["b/_U.py"]
    assert "from a._T import T\n" in source
    assert "from b._T import T as _b_T\n" in source
    assert "    at: T = _field(default_factory=T)\n" in source
    assert "    bt: _b_T = _field(default_factory=_b_T)\n" in source


def test_derived_structs_restate_inherited_factory_defaults(write_idl: Write, tmp_path: Path
                                                          ) -> None:
    files = python_of(write_idl, """module m { struct P { long x; };
        struct Base { P p; sequence<long> s; long n; };
        struct D : Base { long e; }; };""")
    assert "    p: P = _field(default_factory=P)  # inherited\n" in files["m/_D.py"]
    out = write_tree(files, tmp_path / "out")
    assert run_python("from m import D\nprint(D(e=1))", out) == \
        "D(p=P(x=0), s=[], n=0, e=1)\n"


@pytest.mark.parametrize(("value", "text"), [
    (True, "True"), (3, "3"), (-1.5, "-1.5"), (float("inf"), 'float("inf")'),
    (float("-inf"), 'float("-inf")'), (float("nan"), 'float("nan")'), ("a\"b", "'a\"b'"),
    ("it's", '"it\'s"'), ("\x00", '"\\x00"'),
])
def test_python_literals(value: object, text: str) -> None:
    assert python_literal(value) == text  # type: ignore[arg-type]


def _builtin_member_names() -> list[str]:
    """Every public Python builtin name, once per spelling IDL tells apart (case-blind)."""
    import builtins
    import keyword

    seen: dict[str, str] = {}
    for name in dir(builtins):
        if not name.startswith("_") and not keyword.iskeyword(name):
            seen.setdefault(name.lower(), name)
    return sorted(seen.values())


# members of every kind whose annotation or default names a builtin in the class body
_EVERY_KIND = ("typedef string<4> Short; typedef long Longs[2];\n"
               "struct Inner { long x; };\n"
               "struct S { @optional long before; %s\n"
               "  boolean flag; string text; string<8> bounded; char c; double d; long n;\n"
               "  @default(1.5) double half; Short short4; Longs arr; sequence<long> items;\n"
               "  octet raw[2]; long grid[2][3]; octet blobs[2][2]; Inner inner;\n"
               "  @optional string maybe; @optional double mf; };\n"
               "union U switch (long) { %s\n"
               "  case 1001: boolean flag; case 1002: string text; case 1003: double d;\n"
               "  case 1004: long n; case 1005: Short short4; case 1006: sequence<long> items;\n"
               "  case 1007: octet raw[2]; default: Inner inner; };")


def test_members_named_like_builtins_keep_their_names_and_import(write_idl: Write,
                                                                  tmp_path: Path) -> None:
    """``struct Msg { string str; string<8> name; }``: member ``str`` hides the builtin in
    the class body, so the generated class refers to ``_builtins.str`` instead."""
    names = _builtin_member_names()
    struct_members = " ".join(f"long _{name};" for name in names)
    union_cases = " ".join(f"case {i}: long _{name};" for i, name in enumerate(names))
    text = "module m { " + _EVERY_KIND % (struct_members, union_cases) + " };"
    files = python_of(write_idl, text)
    assert '    str: _types.int32 = 0\n' in files["m/_S.py"]
    assert '    text: _builtins.str = ""\n' in files["m/_S.py"]
    out = write_tree(files, tmp_path / "out")
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(out)],
                          capture_output=True, text=True, timeout=unit(60), check=False)
    assert lint.stdout + lint.stderr == "All checks passed!\n"
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\npython_version = 3.11\nstrict = True\nwarn_unused_ignores = True\n"
                      "disallow_untyped_calls = False\n")
    typed = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                            "--cache-dir", str(tmp_path / ".mypy_cache"), "-p", "m"],
                           cwd=out, capture_output=True, text=True, timeout=unit(120),
                           check=False)
    assert typed.stdout.startswith("Success: no issues found in "), typed.stdout
    code = ("from m import S, U\ns = S()\n"
            "print(S.deserialize(s.serialize()) == s, s.str, s.text, s.items, s.raw, s.half)\n"
            "u = U(text='x')\nprint(U.deserialize(u.serialize()) == u)\n")
    assert run_python(code, out) == "True 0  [] b'\\x00\\x00' 1.5\nTrue\n"


def test_loaded_builtin_member_names_round_trip_in_json(write_idl: Write) -> None:
    import idl_codegen

    schema = idl_codegen.load(write_idl(
        "module m { struct Msg { string str; string<8> name; };\n"
        "struct Flags { boolean bool; boolean enabled; long list; sequence<long> items;\n"
        "  long bytes; octet raw[2]; long range; long grid[2][2]; double _float;\n"
        "  @default(2.5) double half; };\n"
        "union V switch (long) { case 1: string str; case 2: string text; }; };"))
    codec = schema.codec("m::Msg")
    sample = schema["m::Msg"](str="a", name="b")
    assert codec.dumps(sample) == b'{"str":"a","name":"b"}'
    assert codec.loads(b'{"str":"a","name":"b"}') == sample
    flags = schema.codec("m::Flags")
    value = flags.to_json(schema["m::Flags"]())
    assert list(value) == ["bool", "enabled", "list", "items", "bytes", "raw", "range", "grid",
                           "float", "half"]
    assert flags.from_json(value) == schema["m::Flags"]()
    union = schema.codec("m::V")
    assert union.loads(b'{"discriminator":1,"str":"s"}') == schema["m::V"](str="s")
