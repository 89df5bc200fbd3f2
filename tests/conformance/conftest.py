"""Fixtures of the MQTT conformance suite.

The suite runs against every target named in ``CONFORMANCE_TARGETS`` (comma separated,
default ``edgebus``; ``mosquitto`` is the reference). One broker per target serves the whole
session; tests keep out of each other's way with unique client identifiers and topic roots
(the ``uid`` fixture).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.support import Clients
from tests.helpers.brokers import BrokerHandle, BrokerStartError, start_edgebus, start_mosquitto

# mosquitto's default has no Maximum Packet Size; a limit lets the suite exercise 0x95.
MOSQUITTO_CONF = "max_packet_size 1000000\n"


def _start_mosquitto(path: Path) -> BrokerHandle:
    return start_mosquitto(path, MOSQUITTO_CONF)


STARTERS = {"edgebus": start_edgebus, "mosquitto": _start_mosquitto}
TARGETS = [
    name.strip()
    for name in os.environ.get("CONFORMANCE_TARGETS", "edgebus").split(",")
    if name.strip()
]


@pytest.fixture(scope="session", params=TARGETS)
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerHandle]:
    """The broker under test, started once per target for the whole session."""
    name = request.param
    if name not in STARTERS:
        pytest.fail(
            f"unknown conformance target {name!r} in CONFORMANCE_TARGETS; "
            f"known: {', '.join(sorted(STARTERS))}",
            pytrace=False,
        )
    try:
        handle = STARTERS[name](tmp_path_factory.mktemp(name))
    except BrokerStartError as exc:
        pytest.fail(f"conformance target {name!r} did not start:\n{exc}", pytrace=False)
    with handle:
        yield handle


@pytest.fixture
def clients(broker: BrokerHandle, uid: str) -> Iterator[Clients]:
    """Opens raw connections to the broker; closes them all after the test."""
    factory = Clients(broker, uid)
    try:
        yield factory
    finally:
        factory.close_all()


@pytest.fixture
def uid() -> str:
    """A short unique token for client identifiers and topic roots of one test."""
    return os.urandom(5).hex()


@pytest.fixture
def root(uid: str) -> str:
    """A topic root no other test uses."""
    return f"cf/{uid}"
