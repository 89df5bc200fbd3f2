"""Shared by the ZeroMQ and NNG adapter tests: peers in their own processes, MQTT 5
clients, short ipc paths, and waits on the adapter's state and counters."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.brokers import free_port
from tests.helpers.gateway import RunningGateway
from tests.helpers.peer_process import PeerProcess
from tests.integration.broker.support import PahoClient
from tests.integration.components.support import wait_for

__all__ = [
    "counters",
    "ipc_dir",
    "mqtt_client",
    "nng_peer",
    "state_of",
    "tcp_url",
    "wait_counter",
    "wait_state",
    "zmq_peer",
]

PEERS = Path(__file__).parent / "peers"


def zmq_peer(*args: str) -> PeerProcess:
    """``peers/zmq_peer.py`` with ``args``, in its own process."""
    return PeerProcess([sys.executable, str(PEERS / "zmq_peer.py"), *args])


def nng_peer(*args: str) -> PeerProcess:
    """``peers/nng_peer.py`` with ``args``, in its own process."""
    return PeerProcess([sys.executable, str(PEERS / "nng_peer.py"), *args])


def tcp_url() -> str:
    """A loopback TCP URL on a port that was free a moment ago."""
    return f"tcp://127.0.0.1:{free_port()}"


@pytest.fixture
def ipc_dir() -> Iterator[Path]:
    """A short directory for ipc:// sockets (Unix socket paths are limited to 107 bytes,
    and pytest's tmp_path can be longer)."""
    path = Path(tempfile.mkdtemp(prefix="eb-ipc-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def mqtt_client(gw: RunningGateway, client_id: str) -> Iterator[PahoClient]:
    """A connected MQTT 5 paho client."""
    host, port = gw.address()
    client = PahoClient(host, port, 5, client_id)
    client.connect()
    try:
        yield client
    finally:
        client.close()


def state_of(gw: RunningGateway, name: str) -> dict[str, Any]:
    status = gw.call(lambda: gw.gateway.adapters.status(name))
    assert status is not None
    return status


def wait_state(gw: RunningGateway, name: str, state: str, seconds: float = 10) -> dict[str, Any]:
    return wait_for(lambda: state_of(gw, name), lambda s: s["state"] == state, seconds)


def counters(gw: RunningGateway, name: str) -> dict[str, int]:
    stats: dict[str, int] = state_of(gw, name)["component_stats"]
    return stats


def wait_counter(
    gw: RunningGateway, name: str, counter: str, at_least: int, seconds: float = 10
) -> dict[str, int]:
    return wait_for(lambda: counters(gw, name), lambda c: c[counter] >= at_least, seconds)
