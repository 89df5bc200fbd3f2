"""A remote broker in a network namespace, reached over a veth pair (LIBRARIES.md).

``RemoteNamespace`` makes a namespace with a unique name and a unique /30 from
10.250.0.0/16, adds the guard route first (``unreachable <subnet> metric 4000``: if the
host side ever lost its route, traffic for the subnet must not take the default route
and leave the machine), connects the namespace over a veth pair, and runs mosquitto in
it, listening on the namespace's end of the pair and on its own loopback, where a
``mosquitto_sub`` (also in the namespace) records what arrives: that subscriber is not
cut off when the link is.

``cut()`` sets the namespace side of the veth down (packets vanish: no reset, no FIN);
``restore()`` sets it up again. Everything is undone by ``close()``, whatever happened.
``NamespaceUnavailable`` is raised where namespaces cannot be made (not root).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
import subprocess
import time
from pathlib import Path

from tests.helpers import mqtt_builder as mb
from tests.helpers.timeouts import unit

__all__ = ["NamespaceUnavailable", "RemoteNamespace"]


class NamespaceUnavailable(RuntimeError):
    """``ip netns add`` failed: this machine (or user) cannot make namespaces."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _taken(subnet: ipaddress.IPv4Network) -> bool:
    routes = _ip("-4", "route", "show", "table", "all").stdout
    addresses = _ip("-4", "addr").stdout
    prefix = ".".join(str(subnet.network_address).split(".")[:3]) + "."
    return prefix in routes or prefix in addresses


class RemoteNamespace:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        tag = f"{os.getpid() % 10000:04d}{random.randrange(100):02d}"
        self.ns = f"eb-i12-{tag}"
        self.host_if = f"ebh{tag}"
        self.ns_if = f"ebr{tag}"
        for _ in range(50):
            block = random.randrange(256 * 64)
            subnet = ipaddress.IPv4Network(f"10.250.{block // 64}.{(block % 64) * 4}/30")
            if not _taken(subnet):
                break
        else:
            raise RuntimeError("no free /30 in 10.250.0.0/16")
        self.subnet = subnet
        hosts = list(subnet.hosts())
        self.host_ip, self.remote_ip = str(hosts[0]), str(hosts[1])
        self.port = 1883
        self.local_port = 1884  # the namespace's loopback, for the recording subscriber
        self.broker: subprocess.Popen[bytes] | None = None
        self.subscriber: subprocess.Popen[bytes] | None = None
        self.received = workdir / "received.txt"
        self._guard = False
        self._made = False

    def open(self) -> RemoteNamespace:
        try:
            done = _ip("netns", "add", self.ns, check=False)
        except FileNotFoundError as exc:
            raise NamespaceUnavailable("the `ip` program (iproute2) is not installed") from exc
        if done.returncode != 0:
            raise NamespaceUnavailable(f"ip netns add failed: {done.stderr.strip()}")
        self._made = True
        try:
            _ip("route", "add", "unreachable", str(self.subnet), "metric", "4000")
            self._guard = True
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.ns)
            _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            self._in_ns("ip", "addr", "add", f"{self.remote_ip}/30", "dev", self.ns_if)
            self._in_ns("ip", "link", "set", self.ns_if, "up")
            self._in_ns("ip", "link", "set", "lo", "up")
            self._start_broker()
        except BaseException:
            self.close()
            raise
        return self

    def _in_ns(self, *argv: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.ns, *argv], capture_output=True, check=True)

    def _start_broker(self) -> None:
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(
            "\n".join(
                [
                    "per_listener_settings false",
                    f"listener {self.port} {self.remote_ip}",
                    f"listener {self.local_port} 127.0.0.1",
                    "allow_anonymous true",
                    "persistence true",
                    f"persistence_location {self.workdir}/",
                    "max_queued_messages 1000000",
                    "log_dest stderr",
                    "log_type error warning notice",
                    *(["user root"] if os.geteuid() == 0 else []),
                ]
            )
            + "\n"
        )
        log = (self.workdir / "mosquitto.log").open("wb")
        self.broker = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "mosquitto", "-c", str(conf)],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + unit(10)
        while not self._answers():
            assert self.broker.poll() is None, (self.workdir / "mosquitto.log").read_text()
            assert time.monotonic() < deadline, "mosquitto in the namespace did not start"
            time.sleep(0.05)
        out = self.received.open("wb")
        argv = ["ip", "netns", "exec", self.ns, "mosquitto_sub", "-h", "127.0.0.1"]
        argv += ["-p", str(self.local_port), "-t", "cloud/#", "-q", "1", "-c", "-i", "ns-rec"]
        self.subscriber = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )

    def _answers(self) -> bool:
        try:
            with socket.create_connection((self.remote_ip, self.port), timeout=unit(1)) as sock:
                sock.sendall(mb.gen_connect("ns-probe", keepalive=10))
                return sock.recv(4)[:1] == b"\x20"
        except OSError:
            return False

    def cut(self) -> None:
        self._in_ns("ip", "link", "set", self.ns_if, "down")

    def restore(self) -> None:
        self._in_ns("ip", "link", "set", self.ns_if, "up")

    def payloads(self) -> list[int]:
        text = self.received.read_text(errors="replace")
        return [int(line) for line in text.splitlines() if line.strip().isdigit()]

    def close(self) -> None:
        for process in (self.subscriber, self.broker):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(unit(5))
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", self.host_if, check=False)
        if self._made:
            _ip("netns", "del", self.ns, check=False)
        if self._guard:
            _ip("route", "del", "unreachable", str(self.subnet), "metric", "4000", check=False)

    def __enter__(self) -> RemoteNamespace:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
