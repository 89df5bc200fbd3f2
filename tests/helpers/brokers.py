"""Start MQTT brokers on loopback for tests: mosquitto (a reference peer) and edgebus.

Both launchers pick a free port (bind ``127.0.0.1:0``, read it back, close), run the broker in
the foreground with its output in files under ``tmp_path``, and wait, with a bounded timeout,
until an MQTT CONNECT on that port gets a CONNACK. A broker that exits or never answers raises
:class:`BrokerStartError` carrying the tail of its stderr.

In a test module or conftest::

    from tests.helpers.brokers import start_mosquitto

    @pytest.fixture
    def mosquitto(tmp_path):
        with start_mosquitto(tmp_path) as broker:
            yield broker          # broker.host, broker.port

The fixtures :func:`mosquitto_broker` and :func:`edgebus_broker` do exactly that; import them
into a conftest to use them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from tests.helpers import mqtt_builder as mb
from tests.helpers.timeouts import unit

__all__ = [
    "BrokerHandle",
    "BrokerStartError",
    "edgebus_broker",
    "free_port",
    "mosquitto_broker",
    "mosquitto_path",
    "start_edgebus",
    "start_mosquitto",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "127.0.0.1"


class BrokerStartError(RuntimeError):
    """A broker did not start, or did not answer MQTT on its port in time."""


@dataclass
class BrokerHandle:
    """A running broker process. ``stop()`` ends it; the handle is a context manager."""

    name: str
    host: str
    port: int
    process: subprocess.Popen[bytes]
    workdir: Path
    stderr_path: Path
    stdout_path: Path
    _files: list[IO[bytes]] = field(default_factory=list, repr=False)

    def __enter__(self) -> BrokerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def is_running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float | None = None) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout``) and close its logs."""
        wait = unit(5) if timeout is None else timeout
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(wait)
        for handle in self._files:
            handle.close()
        self._files.clear()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's stderr (and stdout, when it wrote any)."""
        parts = []
        for path in (self.stderr_path, self.stdout_path):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()
                if text:
                    parts.append(f"--- {path.name} (last {lines} lines) ---")
                    parts.extend(text[-lines:])
        return "\n".join(parts) if parts else "(no output)"


def free_port(host: str = LOOPBACK) -> int:
    """A port that was free a moment ago: bind port 0, read the port back, close."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def mosquitto_path() -> str | None:
    """The mosquitto binary: ``$MOSQUITTO``, then PATH, then /usr/sbin/mosquitto."""
    candidates = [os.environ.get("MOSQUITTO"), shutil.which("mosquitto"), "/usr/sbin/mosquitto"]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _mqtt_probe(host: str, port: int, timeout: float) -> bool:
    """True when a 3.1.1 CONNECT on ``host:port`` is answered by a CONNACK."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(mb.gen_connect("readinessprobe", keepalive=10))
            data = b""
            while len(data) < 4:
                chunk = sock.recv(4 - len(data))
                if not chunk:
                    return False
                data += chunk
            with contextlib.suppress(OSError):
                sock.sendall(mb.gen_disconnect())
            return data[0] == 0x20
    except OSError:
        return False


def _launch(
    name: str,
    argv: Sequence[str],
    workdir: Path,
    port: int,
    ready_timeout: float,
    env: dict[str, str] | None = None,
) -> BrokerHandle:
    stdout_path = workdir / f"{name}.stdout.log"
    stderr_path = workdir / f"{name}.stderr.log"
    stdout = stdout_path.open("wb")
    stderr = stderr_path.open("wb")
    try:
        process = subprocess.Popen(
            list(argv),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=env,
        )
    except OSError as exc:
        stdout.close()
        stderr.close()
        raise BrokerStartError(f"{name}: cannot run {argv[0]}: {exc}") from exc
    handle = BrokerHandle(
        name=name,
        host=LOOPBACK,
        port=port,
        process=process,
        workdir=workdir,
        stderr_path=stderr_path,
        stdout_path=stdout_path,
        _files=[stdout, stderr],
    )
    deadline = time.monotonic() + ready_timeout
    while True:
        code = process.poll()
        if code is not None:
            handle.stop()
            raise BrokerStartError(
                f"{name} exited with code {code} before serving MQTT on {LOOPBACK}:{port}\n"
                f"command: {' '.join(argv)}\n{handle.log_tail()}"
            )
        if _mqtt_probe(LOOPBACK, port, timeout=unit(1)):
            return handle
        if time.monotonic() > deadline:
            handle.stop()
            raise BrokerStartError(
                f"{name} did not answer MQTT on {LOOPBACK}:{port} within {ready_timeout:.1f}s\n"
                f"command: {' '.join(argv)}\n{handle.log_tail()}"
            )
        time.sleep(0.05)


def start_mosquitto(
    tmp_path: Path,
    extra_conf: str = "",
    *,
    ready_timeout: float | None = None,
    port: int | None = None,
    head_conf: str = "",
    log_type: str = "all",
) -> BrokerHandle:
    """Run mosquitto on a free loopback port with anonymous access; ``extra_conf`` is appended.

    ``port``: that port instead of a free one (a broker restarted where it was);
    ``head_conf``: lines before the first listener (``per_listener_settings true``);
    ``log_type``: what it logs (``all`` includes a line per message).

    As root, mosquitto would drop to user ``mosquitto``, which cannot read ``tmp_path``; the
    config says ``user root`` instead (ignored when not root).
    """
    binary = mosquitto_path()
    if binary is None:
        raise BrokerStartError("mosquitto is not installed (apt-get install mosquitto)")
    workdir = Path(tmp_path)
    workdir.mkdir(parents=True, exist_ok=True)
    attempts = 1 if port is not None else 3
    fixed = port
    for attempt in range(attempts):
        port = fixed or free_port()
        config = workdir / "mosquitto.conf"
        lines = [
            *head_conf.splitlines(),
            f"listener {port} {LOOPBACK}",
            "allow_anonymous true",
            "log_dest stderr",
            *(f"log_type {kind}" for kind in log_type.split()),
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            lines.append("user root")
        config.write_text("\n".join(lines) + "\n" + extra_conf + "\n")
        try:
            return _launch(
                "mosquitto",
                [binary, "-c", str(config)],
                workdir,
                port,
                unit(10) if ready_timeout is None else ready_timeout,
            )
        except BrokerStartError as exc:
            # Another process may have taken the port between free_port() and the bind.
            if "Address already in use" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def start_edgebus(
    tmp_path: Path,
    config_yaml_extra: str = "",
    *,
    ready_timeout: float | None = None,
    main: str = "gateway.cli",
) -> BrokerHandle:
    """Run ``python -m gateway.cli run -c cfg.yaml`` with one TCP listener on a free port.

    ``config_yaml_extra`` is appended to the YAML (top-level keys). ``main``: another
    module with the CLI's arguments (``tests.helpers.component_gateway``).
    """
    workdir = Path(tmp_path)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = workdir / "cfg.yaml"
    # The HTTP API would bind its default port: give it an ephemeral one instead.
    api = "" if "\napi:" in f"\n{config_yaml_extra}" else f"api:\n  bind: {LOOPBACK}:0\n"
    config.write_text(
        "listeners:\n"
        "  - type: tcp\n"
        f"    bind: {LOOPBACK}:{port}\n"
        f"data_dir: {workdir / 'data'}\n" + api + config_yaml_extra + "\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return _launch(
        "edgebus",
        [sys.executable, "-m", main, "run", "-c", str(config)],
        workdir,
        port,
        unit(15) if ready_timeout is None else ready_timeout,
        env=env,
    )


@pytest.fixture
def mosquitto_broker(tmp_path: Path) -> Iterator[BrokerHandle]:
    """A mosquitto broker for one test."""
    try:
        broker = start_mosquitto(tmp_path / "mosquitto")
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    with broker:
        yield broker


@pytest.fixture
def edgebus_broker(tmp_path: Path) -> Iterator[BrokerHandle]:
    """An edgebus gateway (its MQTT listener only) for one test."""
    try:
        broker = start_edgebus(tmp_path / "edgebus")
    except BrokerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    with broker:
        yield broker
