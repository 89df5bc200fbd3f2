"""Every command of README.md and docs/ runs as printed, from a copy of the checkout
after ``make run``.

Each document's ``sh`` blocks run in order, in one working directory (a copy of the
checkout whose ``.venv`` is this environment's), with a plain ``PATH`` that does not hold
``.venv/bin``: a bare ``edgebus`` fails as it would for a newcomer. A block noted
``serves`` (``make run``, ``edgebus run -c FILE``) runs in the background until the next
one or the end of the document. The default ports (1883, 8083, 8081, 8883, 8884, 8084)
are rewritten, in commands and configuration files alike, to free ports, and
``0.0.0.0`` to ``127.0.0.1``: the test binds loopback only and never a fixed port.
tests/docs/blocks.py describes the notes that say how to run a block.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.docs.blocks import Block, blocks_of
from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, REPO_ROOT, free_port

pytestmark = pytest.mark.slow

RUNNABLE = {"sh", "bash", "shell"}
DEFAULT_PORTS = (1883, 8083, 8081, 8883, 8884, 8084)
DOCUMENTS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
WITH_COMMANDS = [path for path in DOCUMENTS if any(b.language in RUNNABLE for b in blocks_of(path))]

#: What a fresh clone holds beside the sources that the copy leaves out.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    "edgebus-data", "generated", "certs", "tests", "bench",
)  # fmt: skip


class Session:
    """The working directory, the port map and the gateway a document has started."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "checkout"
        shutil.copytree(REPO_ROOT, self.root, ignore=NOT_COPIED)
        (self.root / ".venv").symlink_to(Path(sys.executable).parents[1])
        self.scratch = tmp_path / "scratch"
        self.scratch.mkdir()
        home = tmp_path / "home"
        home.mkdir()
        self.env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
        self.ports = {port: free_port() for port in DEFAULT_PORTS}
        self.server: subprocess.Popen[bytes] | None = None
        self.server_log = self.scratch / "server.log"

    def rewrite(self, text: str) -> str:
        """The default ports replaced by this session's, wildcard addresses by loopback."""
        text = re.sub(
            r"(?<!\d)(" + "|".join(map(str, DEFAULT_PORTS)) + r")(?!\d)",
            lambda match: str(self.ports[int(match.group(1))]),
            text,
        )
        return text.replace("0.0.0.0", LOOPBACK).replace("[::]", LOOPBACK)

    def config_file(self, text: str) -> str:
        """A configuration file as written, with the defaults it relies on (listeners, the
        API's address) appended on this session's ports; line numbers do not move."""
        data = yaml.safe_load(text) or {}
        if "listeners" not in data:
            text += (
                "listeners:\n  - {type: tcp, bind: '127.0.0.1:1883'}\n"
                "  - {type: ws, bind: '127.0.0.1:8083'}\n"
            )
        api = data.get("api") or {}
        if api.get("enabled", True) and "bind" not in api:
            assert "api" not in data, "give `api.bind` in a docs configuration with `api:`"
            text += "api:\n  bind: '127.0.0.1:8081'\n"
        return self.rewrite(text)

    def write(self, block: Block) -> None:
        assert block.file is not None
        text = block.text
        if block.file.endswith(".yaml"):
            text = self.config_file(text)
        (self.root / block.file).write_text(text)

    def serve(self, block: Block) -> None:
        """Starts the block's one long-running command; returns once the gateway is ready."""
        self.stop()
        [command] = [
            line.split("#")[0].strip() for line in block.text.splitlines() if line.strip()
        ]
        if command == "make run":
            planned = subprocess.run(
                ["make", "--dry-run", "--no-print-directory", "run"],
                cwd=self.root,
                env=self.env,  # not this test's: under `make test` MAKEFLAGS are set
                capture_output=True,
                text=True,
                check=True,
            )
            assert planned.stdout.splitlines()[-1].strip() == ".venv/bin/edgebus run"
            defaults = self.scratch / "defaults.yaml"
            defaults.write_text(self.config_file(""))
            argv = [".venv/bin/edgebus", "run", "-c", str(defaults)]
        else:
            argv = shlex.split(self.rewrite(command))
        with self.server_log.open("wb") as log:
            self.server = subprocess.Popen(
                argv, cwd=self.root, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        deadline = time.monotonic() + unit(30)
        while " ready in " not in self.server_log.read_text(errors="replace"):
            if self.server.poll() is not None or time.monotonic() > deadline:
                log_text = self.server_log.read_text(errors="replace")
                self.stop()
                raise AssertionError(f"{block.where}: {command!r} did not start:\n{log_text}")
            time.sleep(0.05)

    def run(self, block: Block) -> None:
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + self.rewrite(block.text)],
            cwd=self.root,
            env=self.env,
            input=block.stdin.encode(),
            capture_output=True,
            timeout=unit(90),
            check=False,
        )
        output = (done.stdout + done.stderr).decode(errors="replace")
        status = done.returncode
        assert status == block.exit_status, f"{block.where} exited {status}:\n{output}"
        for text in block.expect:
            assert self.rewrite(text) in output, f"{block.where}: no {text!r} in:\n{output}"

    def stop(self) -> None:
        """SIGTERM to the running gateway, which must exit cleanly."""
        server, self.server = self.server, None
        if server is None:
            return
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(unit(15))
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(unit(5))
        log_text = self.server_log.read_text(errors="replace")
        assert server.returncode == 0, f"the gateway exited {server.returncode}:\n{log_text}"


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    started = Session(tmp_path)
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("document", WITH_COMMANDS, ids=lambda path: path.name)
def test_the_commands_run_as_printed(document: Path, session: Session) -> None:
    for block in blocks_of(document):
        if block.skip is not None:
            continue
        if block.file is not None:
            session.write(block)
        elif block.serves:
            session.serve(block)
        elif block.language in RUNNABLE:
            session.run(block)
    session.stop()


def test_every_command_block_is_run_or_says_why_not() -> None:
    """Nothing is left out silently: a skipped block names its reason, a note is on a
    block that means something to run."""
    skipped = []
    for document in DOCUMENTS:
        for block in blocks_of(document):
            if block.skip is not None:
                assert block.skip.startswith("(") and block.skip.endswith(")"), block.where
                commands = [line for line in block.text.splitlines() if line[:1] not in "#"]
                skipped.append((document.name, commands[0]))
            if block.serves or block.expect or block.stdin:
                assert block.language in RUNNABLE, block.where
    assert skipped == [
        ("README.md", "make test    # installs what the tests need (Debian packages included),"
         " runs the whole suite"),
        ("README.md", ".venv/bin/pip wheel --no-deps -w dist ."),
        ("bridges.md", 'API=http://127.0.0.1:8081/api/v1; AUTH="Authorization: Bearer $KEY"'),
        ("conformance.md", ".venv/bin/python -m pytest tests/conformance"),
        ("performance.md", "make bench                                    # edgebus vs"
         " mosquitto, all scenarios, ~5 min"),
        ("spark.md", "spark-submit --master spark://spark-master:7077 \\"),
    ]  # fmt: skip
