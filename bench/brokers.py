"""Broker launchers: a fresh mosquitto or edgebus on a free loopback port.

``launch(kind)`` is a context manager yielding a ``RunningBroker`` that is ready
(it completed an MQTT CONNECT/CONNACK) and is always stopped on exit: SIGTERM, then
SIGKILL after a grace period. Brokers also die with the harness when the harness
itself is killed with SIGKILL (``bench.lifetime``).

Each broker runs in the foreground with its own temporary directory holding its
config file and its log (stderr), which is shown when the broker fails to start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.client import mqtt_connect
from bench.errors import BrokerError
from bench.frames import encode_disconnect
from bench.lifetime import die_with_parent

__all__ = [
    "BROKER_KINDS",
    "STREAM_API_KEY",
    "RunningBroker",
    "edgebus_config",
    "free_port",
    "launch",
]

BROKER_KINDS = ("edgebus", "mosquitto", "edgebus-stream")
#: The API key of an ``edgebus-stream`` broker (its API binds a port of its own).
STREAM_API_KEY = "bench-stream-key-0123456789"
MOSQUITTO = os.environ.get("BENCH_MOSQUITTO", "/usr/sbin/mosquitto")
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class RunningBroker:
    kind: str
    port: int
    pid: int
    log_path: Path
    process: subprocess.Popen[bytes]
    api_port: int | None = None  # edgebus: its HTTP API (edgebus-stream: with STREAM_API_KEY)

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise BrokerError(f"{self.kind} exited with code {code}{_log_tail(self.log_path)}")


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    if not text:
        return " (empty log)"
    return "; log tail:\n    " + "\n    ".join(text.splitlines()[-lines:])


def _mosquitto_command(port: int, workdir: Path, extra_conf: str = "") -> list[str]:
    # max_queued_messages: the fan-out and QoS 1 runs keep up to e2e_window (32768) messages
    # queued per subscriber; mosquitto's default (1000) would drop QoS 0 beyond that.
    # Everything else is Debian's default. In particular set_tcp_nodelay stays false:
    # with Nagle on, the kernel coalesces mosquitto's one-write-per-message deliveries;
    # with it off, QoS 0 fan-in swung between 240k and 400k msg/s from run to run on
    # the 2-core dev machine, while p99 latency at 1000 msg/s was the same either way.
    # user root: started as root, mosquitto would switch to user "mosquitto", and that
    # credential change clears PR_SET_PDEATHSIG (see bench.lifetime).
    config = workdir / "mosquitto.conf"
    config.write_text(
        ("user root\n" if os.geteuid() == 0 else "") + f"listener {port} 127.0.0.1\n"
        "allow_anonymous true\n"
        "persistence false\n"
        "max_queued_messages 1000000\n"
        "max_queued_bytes 0\n"
        "log_dest stderr\n"
        "log_type error\n" + extra_conf
    )
    # Should mosquitto still switch users, it must be able to read its directory.
    workdir.chmod(0o755)
    config.chmod(0o644)
    return [MOSQUITTO, "-c", str(config)]


def _edgebus_stream_command(port: int, workdir: Path, api_port: int) -> list[str]:
    """edgebus with the stream log recording every message (``stream.topics: ["#"]``)."""
    return _edgebus_command(
        port,
        workdir,
        "stream:\n"
        "  enabled: true\n"
        '  topics: ["#"]\n'
        "api:\n"
        f"  bind: 127.0.0.1:{api_port}\n"
        f"  keys: [{STREAM_API_KEY}]\n",
    )


# ``make run``'s defaults (MQTT and WebSocket listeners, the HTTP API, the SQLite store),
# on ephemeral ports: the broker as it starts on a device with no configuration.
_DEFAULTS_PROFILE = (
    "listeners:\n"
    "  - type: tcp\n"
    "    bind: 127.0.0.1:{port}\n"
    "  - type: ws\n"
    "    bind: 127.0.0.1:0\n"
    "data_dir: {data_dir}\n"
    "api:\n"
    "  bind: 127.0.0.1:0\n"
)


def _edgebus_command(
    port: int, workdir: Path, extra_config: str = "", profile: str = "bench", api_port: int = 0
) -> list[str]:
    """edgebus on ``port`` with ``edgebus_config``'s configuration."""
    config = edgebus_config(port, workdir, extra_config, profile, api_port)
    script = Path(sys.executable).parent / "edgebus"
    if script.exists():
        return [str(script), "run", "-c", str(config)]
    return [sys.executable, "-m", "gateway.cli", "run", "-c", str(config)]


def edgebus_config(
    port: int, workdir: Path, extra_config: str = "", profile: str = "bench", api_port: int = 0
) -> Path:
    """The configuration file of edgebus on ``port``, written in ``workdir`` (with its
    data directory); ``extra_config``: YAML sections added (adapters, a bridge, the
    stream log; the HTTP API on an ephemeral port unless it has its own ``api:``);
    ``profile``: ``bench`` or ``defaults`` (``launch``)."""
    data_dir = workdir / "data"
    data_dir.mkdir()
    config = workdir / "edgebus.yaml"
    if profile == "defaults":
        config.write_text(_DEFAULTS_PROFILE.format(port=port, data_dir=data_dir))
    else:
        config.write_text(
            "listeners:\n"
            "  - type: tcp\n"
            f"    bind: 127.0.0.1:{port}\n"
            f"data_dir: {data_dir}\n"
            "persistence: memory\n"
            # The same queue bounds as the mosquitto config above.
            "mqtt:\n"
            "  max_queued_messages: 1000000\n"
            "  max_queued_bytes: 2GB\n"
            # The load generator's QoS 1 publishers keep --window (100) PUBLISH
            # unacknowledged and do not read the CONNACK's Receive Maximum: at --protocol 5
            # the default (32) would end them with DISCONNECT 0x93 (MQTT 5.0 3.3.4). Only
            # MQTT 5 QoS 1 and QoS 2 publishers are bounded by it.
            "  receive_maximum: 65535\n"
            # Errors only, as mosquitto's "log_type error" above: edgebus logs a line per
            # connect and per disconnect at INFO (about 0.1 ms of a connect's CPU here).
            "logging:\n"
            "  level: warning\n"
            # The HTTP API on an ephemeral port, out of the way of anything on 8081.
            + ("" if _has_api(extra_config) else f"api:\n  bind: 127.0.0.1:{api_port}\n")
            + extra_config
        )
    return config


def _has_api(extra_config: str) -> bool:
    return "\napi:" in "\n" + extra_config


def _wait_ready(broker: RunningBroker, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        broker.check_alive()
        try:
            sock = mqtt_connect(broker.port, "bench-ready", timeout_s=1.0)
        except OSError as exc:
            last_error = exc
            time.sleep(0.05)
            continue
        with sock:
            sock.sendall(encode_disconnect())
        return
    raise BrokerError(
        f"{broker.kind} not ready on port {broker.port} after {timeout_s:.0f}s "
        f"({last_error}){_log_tail(broker.log_path)}"
    )


def _stop(process: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def launch(
    kind: str,
    ready_timeout_s: float = 30.0,
    extra_config: str = "",
    *,
    port: int | None = None,
    mosquitto_conf: str = "",
    profile: str = "bench",
) -> Iterator[RunningBroker]:
    """Start a fresh broker of ``kind`` ("mosquitto", "edgebus", or "edgebus-stream":
    edgebus with the stream log recording every message); stop it on exit.
    ``extra_config``: YAML sections added to edgebus's configuration (adapters, a bridge);
    ``mosquitto_conf``: lines added to mosquitto's (a bridge's ``connection``); ``port``:
    that port instead of a free one (a broker started again where it was); ``profile``:
    ``bench`` (the configuration of docs/performance.md) or ``defaults`` (edgebus with
    ``make run``'s listeners, API and store; mosquitto is the same either way)."""
    if kind not in BROKER_KINDS:
        raise ValueError(f"unknown broker {kind!r}; expected one of {BROKER_KINDS}")
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    try:
        port = port or free_port()
        api_port = None
        if kind == "mosquitto":
            command = _mosquitto_command(port, workdir, mosquitto_conf)
        elif kind == "edgebus":
            if profile == "bench" and not _has_api(extra_config):
                api_port = free_port()  # known, for benches that read the API
            command = _edgebus_command(port, workdir, extra_config, profile, api_port or 0)
        else:
            api_port = free_port()
            command = _edgebus_stream_command(port, workdir, api_port)
        log_path = workdir / "broker.log"
        with open(log_path, "wb") as log:
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=REPO_ROOT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
            except OSError as exc:
                raise BrokerError(f"cannot start {kind}: {command[0]}: {exc}") from exc
        try:
            broker = RunningBroker(kind, port, process.pid, log_path, process, api_port)
            _wait_ready(broker, ready_timeout_s)
            yield broker
        finally:
            _stop(process)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
