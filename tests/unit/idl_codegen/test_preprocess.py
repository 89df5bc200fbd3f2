"""The preprocessor: includes, macros, conditionals, comments and line origins."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from idl_codegen.diagnostics import Diagnostics
from idl_codegen.preprocess import Preprocessor, strip_comments


def run(paths: list[Path], include_dirs: list[Path] | None = None,
        defines: dict[str, str] | None = None) -> tuple[list[str], Diagnostics]:
    diagnostics = Diagnostics()
    source = Preprocessor(include_dirs or [], diagnostics, defines).run(paths)
    return [line for line in source.lines if line.strip()], diagnostics


def messages(diagnostics: Diagnostics) -> list[str]:
    return [str(error) for error in diagnostics.errors]


def test_comments_become_spaces_and_keep_columns() -> None:
    reported: list[tuple[int, int, str]] = []
    text = 'a /* x\n y */ b // c\n"// not a comment" \'/\''
    stripped = strip_comments(text, lambda *args: reported.append(args))
    assert stripped == 'a     \n      b     \n"// not a comment" \'/\''
    assert reported == []
    strip_comments("x /* open", lambda *args: reported.append(args))
    assert reported == [(1, 3, "unterminated comment")]


def test_include_searches_the_including_directory_then_include_dirs(
        write_idl: Callable[..., Path], tmp_path: Path) -> None:
    write_idl("struct FromHere {};", "main_dir/local.idl")
    write_idl("struct FromIncludeDir {};", "inc/pkg/remote.idl")
    main = write_idl('#include "local.idl"\n#include <pkg/remote.idl>\nstruct Main {};',
                     "main_dir/main.idl")
    lines, diagnostics = run([main], [tmp_path / "inc"])
    assert messages(diagnostics) == []
    assert lines == ["struct FromHere {};", "struct FromIncludeDir {};", "struct Main {};"]


def test_every_file_is_read_once(write_idl: Callable[..., Path]) -> None:
    write_idl("struct Shared {};", "shared.idl")
    first = write_idl('#include "shared.idl"\nstruct A {};', "a.idl")
    second = write_idl('#include "shared.idl"\n#include "a.idl"\nstruct B {};', "b.idl")
    lines, diagnostics = run([first, second])
    assert messages(diagnostics) == []
    assert lines == ["struct Shared {};", "struct A {};", "struct B {};"]


def test_origins_name_file_and_line_of_every_line(write_idl: Callable[..., Path]) -> None:
    write_idl("\n\nstruct Inc {};", "inc.idl")
    main = write_idl('// header\n#include "inc.idl"\nstruct Main {};', "main.idl")
    diagnostics = Diagnostics()
    source = Preprocessor([], diagnostics).run([main])
    located = {line.strip(): source.origins[index] for index, line in enumerate(source.lines)
               if line.strip()}
    assert located["struct Inc {};"][1] == 3
    assert located["struct Inc {};"][0].endswith("inc.idl")
    assert located["struct Main {};"] == (str(main), 3)


def test_object_macros_expand_outside_literals(write_idl: Callable[..., Path]) -> None:
    main = write_idl('#define N 4\n#define M (N * 2)\nconst long X = M; const string S = "M";\n'
                     "#undef N\nconst long Y = N;")
    lines, diagnostics = run([main])
    assert messages(diagnostics) == []
    assert lines == ['const long X = (4 * 2); const string S = "M";', "const long Y = N;"]


def test_command_line_defines(write_idl: Callable[..., Path]) -> None:
    main = write_idl("#ifdef FEATURE\nconst long F = FEATURE;\n#endif")
    lines, _ = run([main], defines={"FEATURE": "3"})
    assert lines == ["const long F = 3;"]


def test_conditionals(write_idl: Callable[..., Path]) -> None:
    main = write_idl(
        "#define A 2\n"
        "#if A > 1 && defined(A)\nconst long one = 1;\n#elif 1\nconst long no = 0;\n#endif\n"
        "#ifndef A\nconst long no2 = 0;\n#else\nconst long two = 2;\n#endif\n"
        "#if 0\n#if 1\nconst long no3 = 0;\n#endif\n#include \"missing.idl\"\n#endif\n"
        "#if (7 / 2 == 3) && (-7 % 2 == -1) && !0 && (1 << 3) == 8 && 010 == 8 && 0x10 == 16\n"
        "const long three = 3;\n#endif\n")
    lines, diagnostics = run([main])
    assert messages(diagnostics) == []
    assert lines == ["const long one = 1;", "const long two = 2;", "const long three = 3;"]


def test_include_guards(write_idl: Callable[..., Path]) -> None:
    write_idl("#ifndef GUARD\n#define GUARD\nstruct G {};\n#endif", "guarded.idl")
    main = write_idl('#include "guarded.idl"\nstruct Main {};')
    lines, _ = run([main])
    assert lines == ["struct G {};", "struct Main {};"]


def test_pragmas_reach_the_parser_except_once(write_idl: Callable[..., Path]) -> None:
    main = write_idl("#pragma once\n  #pragma keylist Msg id\n")
    lines, _ = run([main])
    assert lines == ["  #pragma keylist Msg id"]


def test_errors_name_file_line_and_column(write_idl: Callable[..., Path]) -> None:
    main = write_idl('#include "nope.idl"\n#define F(x) x\n#if\n#endif\n#elif 1\n#bogus\n'
                     "#error custom text\n#ifdef OPEN\n", "errors.idl")
    _, diagnostics = run([main])
    name = str(main)
    assert messages(diagnostics) == [
        f'{name}:1:1: cannot find include file "nope.idl"',
        f"{name}:2:1: function-like macro 'F' is not supported",
        f"{name}:3:1: invalid #if expression: empty expression",
        f"{name}:5:1: #elif without #if",
        f"{name}:6:1: unknown preprocessor directive '#bogus'",
        f"{name}:7:1: #error custom text",
        f"{name}:8:1: unterminated conditional directive",
    ]


def test_provenance_names_are_relative_to_include_dirs(
        write_idl: Callable[..., Path], tmp_path: Path) -> None:
    write_idl("struct R {};", "root/pkg/msg/R.idl")
    main = write_idl('#include "pkg/msg/R.idl"\nstruct M {};', "elsewhere/M.idl")
    source = Preprocessor([tmp_path / "root"], Diagnostics()).run([main])
    assert [file.provenance for file in source.files] == ["M.idl", "pkg/msg/R.idl"]


def test_unreadable_main_file_is_an_error(tmp_path: Path) -> None:
    _, diagnostics = run([tmp_path / "absent.idl"])
    assert len(diagnostics.errors) == 1
    assert "cannot read" in diagnostics.errors[0].message


def test_errors_after_a_macro_keep_the_columns_of_the_source(
    write_idl: Callable[..., Path], tmp_path: Path
) -> None:
    # The expansion is longer ("long long") or shorter ("long") than the macro's name:
    # an error later on the line names the column of the file, not of the expanded line;
    # one inside an expansion names the macro's column.
    from click.testing import CliRunner

    from idl_codegen.cli import main

    types = write_idl(
        "#define LONGTYPENAME long\n#define T long long\n"
        "module m {\n"
        "  struct S { LONGTYPENAME a; X b; };\n"
        "  struct U { T a; T b; Y c; };\n"
        "};\n",
        "types.idl",
    )
    syntax = write_idl("#define V 1 +\nmodule m {\n  const long C = V ;\n};\n", "syntax.idl")
    result = CliRunner().invoke(main, [str(types), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"{types}:4:30: unknown type 'X'" in result.stderr
    assert f"{types}:5:24: unknown type 'Y'" in result.stderr
    result = CliRunner().invoke(main, [str(syntax), "-o", str(tmp_path / "out")])
    assert f"{syntax}:3:20: expected a constant expression, got ';'" in result.stderr
    source = Preprocessor([], Diagnostics()).run([types])
    index = next(i for i, line in enumerate(source.lines) if "struct U" in line)
    line = source.lines[index]
    assert line == "  struct U { long long a; long long b; Y c; };"
    assert source.location(index, line.index("long long b") + 6).column == 19  # the 2nd T
