"""Fixtures of the broker integration tests: one in-process gateway per test on
127.0.0.1:0, and a factory of paho / raw clients connected to it.

A test that needs other limits marks itself with the YAML to merge::

    @pytest.mark.gateway_config("mqtt:\\n  max_queued_messages: 5\\n")
    def test_x(gw, clients): ...

``EDGEBUS_TEST_PERSISTENCE=sqlite`` runs every test with the SQLite store instead of the
in-memory one the gateway helper defaults to.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.broker.support import Clients

# These tests talk MQTT only: no HTTP API server per test.
NO_API = "api:\n  enabled: false\n"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gateway_config(yaml): YAML merged into the test gateway's configuration"
    )


@pytest.fixture
def gw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningGateway]:
    """A gateway for one test; ``@pytest.mark.gateway_config(yaml)`` adds configuration."""
    marker = request.node.get_closest_marker("gateway_config")
    config_yaml = NO_API + (marker.args[0] if marker else "")
    persistence = os.environ.get("EDGEBUS_TEST_PERSISTENCE")
    if persistence:  # run the suite against another store, e.g. "sqlite"
        config_yaml = f"persistence: {persistence}\n{config_yaml}"
    with running_gateway(tmp_path / "gw", config_yaml) as gateway:
        yield gateway


@pytest.fixture
def clients(gw: RunningGateway) -> Iterator[Clients]:
    """Paho and raw clients of ``gw``, closed after the test (before the gateway stops)."""
    factory = Clients(gw)
    try:
        yield factory
    finally:
        factory.close_all()
