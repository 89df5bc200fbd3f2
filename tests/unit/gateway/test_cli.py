"""The ``edgebus`` command: check, the tools it carries (idl-codegen, passwd)."""

from __future__ import annotations

import contextlib
import gc
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import GC_GEN0_THRESHOLD, collect_less, main

REPO = Path(__file__).resolve().parents[3]
HELLO = REPO / "tests" / "golden" / "idl_codegen" / "idl" / "hello" / "HelloWorldData.idl"


def test_check_names_the_files_the_example_needs() -> None:
    """The annotated example is valid, but names certificates and a password file that
    a fresh machine does not have: `run` would refuse it (or run its AWS bridge
    degraded), so `check` does too."""
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
        f"{example}:{line_of('certfile: ./certs')} bridges[1].tls.certfile",
        f"{example}:{line_of('keyfile: ./certs')} bridges[1].tls.keyfile",
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


# -- check and run validate the same things, before anything is written ---------------------

TLS_AND_PASSWORDS = """\
listeners:
  - type: tcp
    bind: 127.0.0.1:0
  - type: tls
    bind: 127.0.0.1:0
    tls:
      certfile: server.pem
      keyfile: server.key
      cafile: ca.pem
      verify_peer: true
data_dir: ./edgebus-data
auth:
  password_file: ./passwd
"""

MISSING = {
    "certfile": "edgebus.yaml:7 listeners[1].tls.certfile: cannot read 'server.pem':"
    " No such file or directory",
    "keyfile": "edgebus.yaml:8 listeners[1].tls.keyfile: cannot read 'server.key':"
    " No such file or directory",
    "cafile": "edgebus.yaml:9 listeners[1].tls.cafile: cannot read 'ca.pem':"
    " No such file or directory",
    "password_file": "edgebus.yaml:13 auth.password_file: passwd: cannot read the password"
    " file: No such file or directory",
}


def invoke_in(directory: Path, files: dict[str, str], *args: str) -> tuple[int, list[str]]:
    """Writes ``files`` in ``directory`` and runs ``edgebus ARGS`` there; returns the exit
    code and the lines printed, after checking that nothing else was written."""
    for name, text in files.items():
        (directory / name).write_text(text)
    with contextlib.chdir(directory):
        result = CliRunner().invoke(main, list(args), prog_name="edgebus")
    written = sorted(path.name for path in directory.iterdir() if path.name not in files)
    assert written == []  # no data directory, database, API key or log
    return result.exit_code, result.output.splitlines()


def test_check_and_run_report_every_missing_file_at_once(tmp_path: Path) -> None:
    files = {"edgebus.yaml": TLS_AND_PASSWORDS}
    for command in (["check", "edgebus.yaml"], ["check", "-c", "edgebus.yaml"]):
        assert invoke_in(tmp_path, files, *command) == (2, list(MISSING.values()))
    assert invoke_in(tmp_path, files, "run", "-c", "edgebus.yaml") == (2, list(MISSING.values()))


@pytest.mark.parametrize("missing", list(MISSING))
def test_each_missing_file_is_named_with_line_and_path(tmp_path: Path, missing: str) -> None:
    files = {"edgebus.yaml": TLS_AND_PASSWORDS}
    present = {"certfile": "server.pem", "keyfile": "server.key", "cafile": "ca.pem"}
    for key, name in present.items():
        if key != missing:
            files[name] = "not PEM\n"
    if missing != "password_file":
        files["passwd"] = ""
    code, lines = invoke_in(tmp_path, files, "check", "edgebus.yaml")
    assert code == 2
    assert MISSING[missing] in lines
    assert not [line for line in lines if not line.startswith("edgebus.yaml:")]


def test_a_bad_password_file_line_is_named_file_and_line(tmp_path: Path) -> None:
    files = {
        "edgebus.yaml": "auth:\n  password_file: passwd\napi:\n  enabled: false\n",
        "passwd": "# users\nalice\nbob:secret\n",
        "edgebus-data": "a file where the data directory goes",
    }
    code, lines = invoke_in(tmp_path, files, "check", "edgebus.yaml")
    assert code == 2
    assert lines == [
        "edgebus.yaml: data_dir (default): 'edgebus-data' exists and is not a directory",
        "edgebus.yaml:2 auth.password_file: passwd:2: expected user:hash",
        "edgebus.yaml:2 auth.password_file: passwd:3: not a password hash (a plain-text"
        " password? `mosquitto_passwd -U` or `edgebus passwd` hashes it)",
    ]


def test_an_unusable_api_key_file_is_a_problem(tmp_path: Path) -> None:
    files = {"edgebus.yaml": "api:\n  key_file: key.txt\npersistence: memory\n", "key.txt": "x\n"}
    code, lines = invoke_in(tmp_path, files, "check", "edgebus.yaml")
    assert (code, len(lines)) == (2, 1)
    assert lines[0].startswith("edgebus.yaml:2 api.key_file: the API key file: 'key.txt' holds")


def test_a_log_file_in_a_missing_directory_is_a_problem(tmp_path: Path) -> None:
    config = "logging:\n  file: nowhere/edgebus.log\npersistence: memory\napi: {enabled: false}\n"
    code, lines = invoke_in(tmp_path, {"edgebus.yaml": config}, "check", "edgebus.yaml")
    assert code == 2
    assert lines[0].startswith("edgebus.yaml:2 logging.file: the directory ")
    assert lines[0].endswith("nowhere' does not exist")


def test_sections_this_release_runs_are_not_warned_about(tmp_path: Path) -> None:
    config = """\
persistence: memory
api: {enabled: false}
bridges:
  - name: cloud
    server: broker.example.com:8883
    forwards: [{local: "a/#"}]
rules:
  - name: hot
    sql: 'SELECT * FROM "t/#"'
    actions: [{type: republish, topic: out}]
webhooks:
  - {name: ops, url: "http://127.0.0.1:9/hook", events: [client.connected]}
stream:
  enabled: true
"""
    code, lines = invoke_in(tmp_path, {"edgebus.yaml": config}, "check", "edgebus.yaml")
    assert code == 0
    assert lines == ["edgebus.yaml: OK"]  # bridges, the stream log, rules, webhooks run


def test_yaml_indentation_errors_give_line_column_and_a_hint(tmp_path: Path) -> None:
    config = "mqtt:\n  max_qos: 1\n   max_inflight: 2\n"
    code, lines = invoke_in(tmp_path, {"edgebus.yaml": config}, "check", "edgebus.yaml")
    assert code == 2
    assert lines == [
        "edgebus.yaml:3:16: YAML syntax error: mapping values are not allowed here. Hint:"
        " line 3 is indented more than line 2, so YAML reads it as part of that line's"
        " value: indent the keys of one mapping alike"
    ]


# -- conventions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [[], ["run"], ["check"], ["passwd"], ["idl-codegen"]],
    ids=lambda command: command[0] if command else "edgebus",
)
def test_every_command_takes_dash_h(command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "-h"], prog_name="edgebus")
    assert result.exit_code == 0
    assert result.output.startswith(f"Usage: edgebus {' '.join(command)}".rstrip())


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"], prog_name="edgebus")
    assert (result.exit_code, result.output) == (0, f"edgebus {version('edgebus')}\n")


def test_check_needs_one_file(tmp_path: Path) -> None:
    assert CliRunner().invoke(main, ["check"]).exit_code == 2
    result = CliRunner().invoke(main, ["check", "a.yaml", "-c", "b.yaml"])
    assert result.exit_code == 2
    assert "give the file once" in result.output


def test_a_ready_gateway_freezes_its_start_up_heap_and_collects_less_often() -> None:
    """``edgebus run`` sets the garbage collector once the gateway is ready (the one place
    it is set): the start-up objects frozen, a young collection per 10,000 allocations."""
    threshold = gc.get_threshold()
    try:
        collect_less()
        assert gc.get_freeze_count() > 1000
        assert gc.get_threshold() == (GC_GEN0_THRESHOLD, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
