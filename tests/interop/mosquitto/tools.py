"""Driving Debian's ``mosquitto_pub`` / ``mosquitto_sub`` as subprocesses, with bounded waits.

``MosquittoSub`` runs ``mosquitto_sub -d -F 'MSG|%t|%q|%r|%C|%P|%R|%p'``: the debug lines
say when the SUBACK arrived, the formatted lines carry each message. A reader thread puts
every output line in a queue, so no wait ever blocks past its timeout.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.timeouts import unit

__all__ = [
    "LOOPBACK",
    "EdgebusProcess",
    "Message",
    "MosquittoSub",
    "edgebus_command",
    "free_port",
    "have_mosquitto_clients",
    "mosquitto_pub",
    "wait_for_mqtt",
]

LOOPBACK = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[3]
FORMAT = "MSG|%t|%q|%r|%C|%P|%R|%p"


def have_mosquitto_clients() -> bool:
    return bool(shutil.which("mosquitto_pub") and shutil.which("mosquitto_sub"))


def free_port() -> int:
    """A port that was free a moment ago (bind 127.0.0.1:0, read it back, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Message:
    """One message as mosquitto_sub printed it."""

    topic: str
    qos: int
    retain: bool
    content_type: str
    user_properties: str
    response_topic: str
    payload: str


def mosquitto_pub(host: str, port: int, *args: str, stdin: str | None = None) -> None:
    """Runs mosquitto_pub to completion (bounded) and asserts it succeeded."""
    argv = ["mosquitto_pub", "-h", host, "-p", str(port), *args]
    result = subprocess.run(
        argv, input=stdin, capture_output=True, text=True, timeout=unit(10), check=False
    )
    if result.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited with {result.returncode}: {result.stderr.strip()}"
        )


class MosquittoSub:
    """A running mosquitto_sub; ``stop()`` ends it (the ``with`` block does too)."""

    def __init__(self, host: str, port: int, *args: str, client_id: str = "msub") -> None:
        self.client_id = client_id
        # mosquitto_sub block-buffers a piped stdout: stdbuf makes it line-buffered.
        self.argv = [
            *(["stdbuf", "-oL"] if shutil.which("stdbuf") else []),
            "mosquitto_sub",
            "-h",
            host,
            "-p",
            str(port),
            "-i",
            client_id,
            "-d",
            "-F",
            FORMAT,
            *args,
        ]
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def __enter__(self) -> MosquittoSub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_line(self, deadline: float, what: str) -> str | None:
        remaining = deadline - time.monotonic()
        try:
            line = self.lines.get(timeout=max(remaining, 0.001))
        except queue.Empty:
            raise AssertionError(
                f"mosquitto_sub {self.client_id}: no {what} in time; output so far:\n"
                + "\n".join(self.log[-20:])
            ) from None
        if line is not None:
            self.log.append(line)
        return line

    def wait_subscribed(self, timeout: float | None = None) -> None:
        """Waits for the SUBACK (debug output)."""
        deadline = time.monotonic() + (unit(5) if timeout is None else timeout)
        while True:
            line = self._next_line(deadline, "SUBACK")
            if line is None:
                raise AssertionError(
                    "mosquitto_sub exited before its SUBACK:\n" + "\n".join(self.log)
                )
            if "received SUBACK" in line:
                return

    def expect_message(self, timeout: float | None = None) -> Message:
        deadline = time.monotonic() + (unit(5) if timeout is None else timeout)
        while True:
            line = self._next_line(deadline, "message")
            if line is None:
                raise AssertionError("mosquitto_sub exited:\n" + "\n".join(self.log))
            if line.startswith("MSG|"):
                _, topic, qos, retain, ctype, users, response, payload = line.split("|", 7)
                return Message(topic, int(qos), retain == "1", ctype, users, response, payload)

    def expect_messages(self, count: int, timeout: float | None = None) -> list[Message]:
        deadline = time.monotonic() + (unit(5) if timeout is None else timeout)
        return [self.expect_message(max(deadline - time.monotonic(), 0.001)) for _ in range(count)]

    def wait_exit(self, timeout: float | None = None) -> int:
        """Waits for mosquitto_sub to exit on its own; returns its status."""
        try:
            return self.process.wait(unit(5) if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"mosquitto_sub {self.client_id} still running:\n" + "\n".join(self.log[-20:])
            ) from None

    def kill(self) -> None:
        """SIGKILL: the connection drops without DISCONNECT."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(unit(5))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(unit(5))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(unit(5))
        self._reader.join(unit(2))


def wait_for_mqtt(host: str, port: int, timeout: float | None = None) -> None:
    """Until a 3.1.1 CONNECT on ``host:port`` gets a CONNACK (bounded)."""
    wait = unit(15) if timeout is None else timeout
    deadline = time.monotonic() + wait
    while True:
        with (
            contextlib.suppress(OSError),
            socket.create_connection((host, port), timeout=unit(1)) as sock,
        ):
            sock.sendall(mb.gen_connect("probe"))
            if sock.recv(4)[:1] == b"\x20":
                sock.sendall(mb.gen_disconnect())
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing served MQTT on {host}:{port} within {wait:.1f}s")
        time.sleep(0.05)


def edgebus_command() -> list[str]:
    """The ``edgebus`` console script next to this Python, else ``python -m gateway.cli``."""
    script = Path(sys.executable).with_name("edgebus")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "gateway.cli"]


def run_edgebus(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``edgebus ARGS`` run to its end in ``cwd`` (this checkout first on the path),
    its output captured as text; bounded by ``unit(60)``."""
    return subprocess.run(
        [*edgebus_command(), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=unit(60),
        check=False,
    )


class EdgebusProcess:
    """``edgebus run -c FILE`` with the minimal configuration on a free loopback port,
    plus ``extra_config`` (YAML of other sections); ``command`` replaces the ``edgebus``
    of this environment (an installed wheel's, say). The HTTP API, on by default, takes
    an ephemeral port unless ``extra_config`` has an ``api:`` section: its default
    8081 may be taken on the machine (another gateway, another run of the suite)."""

    def __init__(
        self, workdir: Path, extra_config: str = "", command: Sequence[str] | None = None
    ) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.command = list(command) if command is not None else edgebus_command()
        self.config = workdir / "edgebus.yaml"
        self.config.write_text(
            "listeners:\n"
            "  - type: tcp\n"
            f"    bind: {LOOPBACK}:{self.port}\n"
            f"data_dir: {workdir / 'edgebus-data'}\n"
            + ("" if _has_api(extra_config) else f"api:\n  bind: {LOOPBACK}:0\n")
            + extra_config
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr_path = workdir / "edgebus.stderr.log"

    def start(self) -> EdgebusProcess:
        env = dict(os.environ)
        if self.command == edgebus_command():
            env["PYTHONPATH"] = os.pathsep.join(
                [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
            )
        else:  # another installation: nothing of this checkout on its path
            env.pop("PYTHONPATH", None)
        with self.stderr_path.open("ab") as stderr:
            self.process = subprocess.Popen(
                [*self.command, "run", "-c", str(self.config)],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                env=env,
            )
        try:
            wait_for_mqtt(LOOPBACK, self.port)
        except AssertionError:
            self.stop()
            raise AssertionError(f"edgebus did not start:\n{self.log_tail()}") from None
        return self

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-30:])
        return "(no log)"

    def signal_and_wait(self, signum: int, timeout: float | None = None) -> int:
        """Sends ``signum`` and returns the exit status (fails if it takes too long)."""
        assert self.process is not None
        self.process.send_signal(signum)
        try:
            return self.process.wait(unit(5) if timeout is None else timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"edgebus still running after signal {signum}:\n{self.log_tail()}"
            ) from None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(unit(5))

    def __enter__(self) -> EdgebusProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_args(version: str, qos: int) -> Sequence[str]:
    """Common mosquitto_pub / mosquitto_sub arguments: protocol version and QoS."""
    return ["-V", version, "-q", str(qos)]


__all__ += ["run_args"]


def _has_api(extra_config: str) -> bool:
    return any(line.startswith("api:") for line in extra_config.splitlines())
