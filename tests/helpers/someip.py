"""someipy peers for tests and the bench: daemons and apps in processes of their own.

Each test gets its own service discovery network (``sd_net()``): a free UDP port for
discovery (instead of the fixed 30490) and a multicast group derived from it, so tests
running in parallel, by other engineers too, never hear each other. Sockets of daemons
live in short temporary directories (a Unix socket path has at most 107 bytes).

    net = sd_net()
    with SomeipDaemon.start("127.0.0.2", net) as daemon:
        with SomeipPeer.start(role="server", daemon=daemon, service=0x1234, ...) as server:
            server.wait("ready")
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.helpers.timeouts import unit

__all__ = ["SdNet", "SomeipDaemon", "SomeipPeer", "free_udp_port", "sd_net"]

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SdNet:
    sd_address: str
    sd_port: int


def free_udp_port(*hosts: str) -> int:
    """A UDP port free on every host a moment ago."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((hosts[0], 0))
            port = int(sock.getsockname()[1])
        ok = True
        for host in hosts[1:]:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
                try:
                    other.bind((host, port))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no free UDP port")


def sd_net(first_octet: int = 224) -> SdNet:
    """A discovery port and multicast group (``first_octet``.224.x.y) of this test's own."""
    port = free_udp_port("127.0.0.1", "127.0.0.2")
    return SdNet(f"{first_octet}.224.{port >> 8}.{port & 0xFF}", port)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class SomeipDaemon:
    """``python -m adapters.someip.daemon`` (someipyd with the workarounds)."""

    interface: str
    net: SdNet
    directory: Path
    process: subprocess.Popen[bytes]

    @property
    def socket_path(self) -> str:
        return str(self.directory / "d.sock")

    @classmethod
    def start(cls, interface: str, net: SdNet) -> SomeipDaemon:
        directory = Path(tempfile.mkdtemp(prefix="eb-sip-"))
        config = {
            "socket_path": str(directory / "d.sock"),
            "interface": interface,
            "sd_address": net.sd_address,
            "sd_port": net.sd_port,
            "log_level": "INFO",
            "log_path": str(directory / "someipyd.log"),
        }
        (directory / "d.json").write_text(json.dumps(config))
        with (directory / "stdout.log").open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "adapters.someip.daemon",
                    "--config",
                    str(directory / "d.json"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(),
            )
        daemon = cls(interface, net, directory, process)
        deadline = time.monotonic() + unit(10)
        while True:
            if process.poll() is not None:
                daemon.stop()
                raise RuntimeError(f"someipyd exited: {daemon.log_tail()}")
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(daemon.socket_path)
                    return daemon
                except OSError:
                    pass
            if time.monotonic() > deadline:
                daemon.stop()
                raise RuntimeError(f"someipyd did not start: {daemon.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        parts = []
        for name in ("stdout.log", "someipyd.log"):
            with contextlib.suppress(OSError):
                parts.extend((self.directory / name).read_text().splitlines()[-lines:])
        return "\n".join(parts)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(unit(5))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> SomeipDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class SomeipPeer:
    """A someipy app (tests/helpers/someip_peer.py) in its own process."""

    config: dict[str, Any]
    process: subprocess.Popen[str]
    lines: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    seen: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, daemon: SomeipDaemon, **config: Any) -> SomeipPeer:
        config = {"socket": daemon.socket_path, "interface": daemon.interface, **config}
        config.setdefault("port", free_udp_port(daemon.interface))
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.someip_peer", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=_env(),
        )
        peer = cls(config, process)
        threading.Thread(target=peer._read, daemon=True).start()
        peer.wait("ready")
        return peer

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(json.JSONDecodeError):
                self.lines.put(json.loads(line))

    def send(self, op: str, **fields: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.process.stdin.flush()

    def wait(
        self,
        ev: str,
        where: Callable[[dict[str, Any]], bool] = lambda _: True,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The first report ``ev`` (seen before or arriving) for which ``where`` holds."""
        for line in self.seen:
            if line.get("ev") == ev and where(line):
                self.seen.remove(line)
                return line
        deadline = time.monotonic() + (unit(10) if timeout is None else timeout)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {ev!r} report from the {self.config['role']}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line.get("ev") == ev and where(line):
                return line
            self.seen.append(line)

    def kill(self) -> None:
        """SIGKILL: the app sends no stop-offer."""
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self.send("exit")
            try:
                self.process.wait(unit(5))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> SomeipPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def daemons(*interfaces: str, first_octet: int = 224) -> Iterator[list[SomeipDaemon]]:
    """Daemons on ``interfaces`` sharing one discovery network of this test's own."""
    net = sd_net(first_octet)
    started: list[SomeipDaemon] = []
    try:
        for interface in interfaces:
            started.append(SomeipDaemon.start(interface, net))
        yield started
    finally:
        for daemon in started:
            daemon.stop()
