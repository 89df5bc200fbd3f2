"""`edgebus run` refusing to start: a busy port is one clear line naming the listener
(or the API) and its configuration line, and nothing is written (no data directory,
database or API key)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.binding import BindError
from gateway.config import parse_config
from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import LOOPBACK, REPO_ROOT, EdgebusProcess, edgebus_command

BUSY = "the address is already in use (another edgebus or MQTT broker?)"


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, 0))
        sock.listen()
        yield sock.getsockname()[1]


def run_edgebus(workdir: Path, config: str) -> subprocess.CompletedProcess[str]:
    (workdir / "edgebus.yaml").write_text(config)
    return subprocess.run(
        [*edgebus_command(), "run", "-c", "edgebus.yaml"],
        cwd=workdir,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=unit(60),
        check=False,
    )


def test_a_busy_listener_port_names_the_listener_and_its_line(
    tmp_path: Path, busy_port: int
) -> None:
    config = (
        "# the plant's broker\n"
        "listeners:\n"
        "  - type: tcp\n"
        "    bind: 127.0.0.1:0\n"
        "  - type: tcp\n"
        "    name: plant\n"
        f"    bind: 127.0.0.1:{busy_port}\n"
        "api:\n  bind: 127.0.0.1:0\n"
    )
    done = run_edgebus(tmp_path, config)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"edgebus.yaml:7 listeners[1].bind: listener 'plant' cannot listen on"
        f" 127.0.0.1:{busy_port}: {BUSY}"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["edgebus.yaml"]


def test_a_busy_api_port_names_api_bind(tmp_path: Path, busy_port: int) -> None:
    config = f"listeners: []\napi:\n  bind: 127.0.0.1:{busy_port}\n"
    done = run_edgebus(tmp_path, config)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"edgebus.yaml:3 api.bind: the HTTP API cannot listen on 127.0.0.1:{busy_port}: {BUSY}"
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["edgebus.yaml"]


def test_a_port_taken_during_start_up_is_a_bind_error(tmp_path: Path, busy_port: int) -> None:
    """Between the CLI's try and the gateway's bind another program may take the port:
    the gateway reports it the same way."""
    config = parse_config(
        "listeners:\n"
        f"  - {{type: tcp, name: late, bind: '127.0.0.1:{busy_port}'}}\n"
        f"persistence: memory\ndata_dir: {tmp_path / 'data'}\napi: {{enabled: false}}\n"
    )
    errors: list[BindError] = []

    async def start() -> None:
        await Gateway(config).run()

    try:
        asyncio.run(start())
    except* BindError as group:
        errors.extend(e for e in group.exceptions if isinstance(e, BindError))
    message = f"listener 'late' cannot listen on 127.0.0.1:{busy_port}: {BUSY}"
    assert [(e.path, str(e)) for e in errors] == [(("listeners", 0, "bind"), message)]


def test_a_data_directory_in_use_refuses_a_second_gateway_until_the_first_ends(
    tmp_path: Path,
) -> None:
    """Two gateways on one data_dir would mix their store, queues and log: the second
    is refused, naming the directory and the first one's pid; once the first is gone
    (``kill -9`` too: the kernel drops its lock) a gateway starts there again."""
    (tmp_path / "first").mkdir()
    first = EdgebusProcess(tmp_path / "first")
    with first:
        assert first.process is not None
        second = tmp_path / "second"
        second.mkdir()
        config = (
            f"listeners:\n  - {{type: tcp, bind: '127.0.0.1:0'}}\n"
            f"data_dir: {tmp_path / 'first' / 'edgebus-data'}\napi: {{enabled: false}}\n"
        )
        done = run_edgebus(second, config)
        assert done.returncode == 1
        assert done.stderr.splitlines() == [
            f"edgebus.yaml:3 data_dir: {tmp_path / 'first' / 'edgebus-data'}: in use by"
            f" another edgebus (pid {first.process.pid}); give each gateway its own data_dir"
        ]
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(unit(10))
        again = EdgebusProcess(tmp_path / "first")
        with again:  # starts: it reached MQTT
            assert again.process is not None and again.process.poll() is None
