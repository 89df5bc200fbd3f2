"""The ``edgebus`` command: check, the tools it carries (idl-codegen, passwd)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gateway.cli import main

REPO = Path(__file__).resolve().parents[3]
HELLO = REPO / "tests" / "golden" / "idl_codegen" / "idl" / "hello" / "HelloWorldData.idl"


def test_check_names_the_files_the_example_needs() -> None:
    """The annotated example is valid, but names certificates and a password file that
    a fresh machine does not have: `run` would refuse it, so `check` does too."""
    example = REPO / "examples" / "edgebus.yaml"
    text = example.read_text().splitlines()

    def line_of(start: str) -> int:
        return next(n for n, line in enumerate(text, 1) if line.lstrip().startswith(start))

    result = CliRunner().invoke(main, ["check", str(example)])
    assert result.exit_code == 2
    assert [line.split(": ", 1)[0] for line in result.output.splitlines()] == [
        f"{example}:{line_of('certfile: /etc')} listeners[1].tls.certfile",
        f"{example}:{line_of('keyfile: /etc')} listeners[1].tls.keyfile",
        f"{example}:{line_of('cafile: /etc')} listeners[1].tls.cafile",
        f"{example}:{line_of('password_file:')} auth.password_file",
    ]


def test_check_reports_every_problem_with_file_line_and_path(tmp_path: Path) -> None:
    config = tmp_path / "edgebus.yaml"
    config.write_text("listeners:\n  - type: tpc\n    bind: nowhere\nmqtt:\n  max_qos: 3\n")
    result = CliRunner().invoke(main, ["check", "-c", str(config)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [
        f"{config}:2 listeners[0].type: expected one of tcp, tls, ws, wss, got 'tpc'",
        f"{config}:3 listeners[0].bind: expected 'host:port' like 127.0.0.1:1883 or [::1]:1883,"
        " got 'nowhere'",
        f"{config}:5 mqtt.max_qos: expected 0, 1 or 2, got 3",
    ]


def test_idl_codegen_is_an_edgebus_command(tmp_path: Path) -> None:
    out = tmp_path / "generated"
    result = CliRunner().invoke(main, ["idl-codegen", str(HELLO), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.rglob("*.py"))
    check = CliRunner().invoke(main, ["idl-codegen", str(HELLO), "-o", str(out), "--check"])
    assert check.exit_code == 0
