"""Cyclone DDS in tests: loopback only, a domain per test, peers in their own processes.

Import this module before anything imports ``cyclonedds``: it pins Cyclone to the
loopback interface through ``CYCLONEDDS_URI`` (inline XML, unicast discovery to
127.0.0.1, no multicast). The adapters under test get the same settings through their
``network:`` keys (``NETWORK_YAML``).

Domain ids: ``domain_id()`` draws one at random from 10..99. Cyclone's ports are
7400 + 250 * id (+ a few per participant), so these stay below Linux's ephemeral port
range (32768 and up), where a port another socket holds would move a participant off
its well-known port. Other engineers' tests may run at the same time on this machine;
a random draw per test, plus topic names carrying the test process's pid (``unique``),
keeps them apart.

``DdsPeer`` runs ``python -m tests.helpers.dds_peer`` (a plain cyclonedds program) in
its own process and drives it with one JSON command per line.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.helpers.timeouts import unit
from tests.interop.idl_codegen.dds_env import LOOPBACK_URI  # the same loopback settings

if TYPE_CHECKING:
    from tests.helpers.gateway import RunningGateway

__all__ = [
    "LOOPBACK_URI",
    "NETWORK_YAML",
    "DdsPeer",
    "PeerError",
    "dds_environment",
    "domain_id",
    "gateway_matched",
    "unique",
]

os.environ["CYCLONEDDS_URI"] = LOOPBACK_URI

#: The ``network:`` section of a dds or ros2 adapter on loopback.
NETWORK_YAML = """\
    network:
      interfaces: [lo]
      peers: [127.0.0.1]
      allow_multicast: false
"""

_random = random.SystemRandom()
_ROOT = Path(__file__).resolve().parents[2]


def domain_id() -> int:
    """A DDS domain id for one test (10..99, at random)."""
    return _random.randint(10, 99)


def unique(name: str) -> str:
    """``name`` made unique to this test process and draw (DDS topics, MQTT topics)."""
    return f"{name}_{os.getpid()}_{_random.randrange(1 << 30)}"


def dds_environment() -> dict[str, str]:
    """The environment of a peer process: loopback Cyclone, the project on the path."""
    path = os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "CYCLONEDDS_URI": LOOPBACK_URI, "PYTHONPATH": path}


def gateway_matched(gw: RunningGateway, adapter: str, endpoint: str, topic: str) -> bool:
    """Has the gateway's DDS ``endpoint`` ("reader" or "writer") of ``topic`` in
    ``adapter`` (a dds or ros2 adapter of the running gateway ``gw``, asked on its loop)
    matched a peer? True while there is none: a writer is created on first use, a reader
    of a pattern's topic once the topic is discovered.

    Discovery is two-sided: a peer's endpoint that has matched the gateway's does not
    mean the gateway's has matched it. A writer sends a volatile sample only to the
    readers it has seen; a reader drops what comes from a writer it has not seen, which
    a best-effort writer never sends again."""

    def matched() -> bool:
        bridge = gw.gateway.adapters.instance(adapter)._bridge
        if bridge is None:
            return True
        if endpoint == "writer":
            writer = bridge.writer_for(topic)
            return writer is None or writer.matched() >= 1
        readers = [r.entity for r in bridge.bus._readers if r.topic == topic]
        return all(reader.get_matched_publications() for reader in readers)

    return gw.call(matched)


class PeerError(AssertionError):
    """The peer reported an error, or died."""


class DdsPeer:
    """A cyclonedds peer process; ``call(op, **args)`` returns its JSON reply.

    ``module`` is the peer program (``tests.helpers.dds_peer`` by default; the ROS 2
    tests use their own).
    """

    def __init__(self, domain: int, module: str = "tests.helpers.dds_peer",
                 *args: str) -> None:
        self.domain = domain
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, str(domain), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=dds_environment(), cwd=str(_ROOT),
        )
        self._lock = threading.Lock()
        self._stderr: list[str] = []
        self._replies: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        threading.Thread(target=self._read_replies, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def _read_replies(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._replies.put(line)

    def call(self, op: str, wait: float | None = None, **args: Any) -> dict[str, Any]:
        """Sends one command and waits for its reply: ``wait`` seconds, by default the
        command's own ``timeout`` plus 30 units."""
        assert self.process.stdin is not None and self.process.stdout is not None
        if wait is None:
            wait = float(args.get("timeout", 0)) + unit(30)
        with self._lock:
            self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
            self.process.stdin.flush()
            try:
                reply = self._replies.get(timeout=wait)
            except queue.Empty:
                raise PeerError(f"peer: no reply to {op} within {wait:.0f}s; stderr:\n"
                                + "".join(self._stderr[-30:])) from None
        answer: dict[str, Any] = json.loads(reply)
        if not answer.get("ok"):
            raise PeerError(f"peer: {op} failed: {answer.get('error')}")
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(unit(10))
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(unit(5))

    def __enter__(self) -> DdsPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
