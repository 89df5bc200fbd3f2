"""Fixtures of the API tests: a gateway with API keys and a user on 127.0.0.1:0, an
HTTP client authenticated with the key, and MQTT clients of the same gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.support import KEY, PASSWORD, USER, Http, bearer
from tests.integration.broker.support import Clients

API_CONFIG = f"""
api:
  keys: ["{KEY}"]
  users:
    - username: {USER}
      password: "{PASSWORD}"
"""


def config_file(tmp_path: Path, gw: RunningGateway, **sections: Any) -> Path:
    """The running gateway's configuration as a file (for reloads), with ``sections``
    replaced."""
    data = yaml.safe_load(API_CONFIG)
    data.update(
        {
            "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
            "data_dir": str(gw.gateway.config.data_dir),
            "persistence": "memory",
            "sys": {"interval": 0},
        }
    )
    data["api"]["bind"] = "127.0.0.1:0"
    data.update(sections)
    path = tmp_path / "edgebus.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def http_of(gw: RunningGateway) -> Http:
    address = gw.gateway.api_address
    assert address is not None
    host, port = address
    return Http(f"http://{host}:{port}", bearer(KEY))


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, API_CONFIG) as gateway:
        yield gateway


@pytest.fixture
def http(gw: RunningGateway) -> Http:
    return http_of(gw)


@pytest.fixture
def clients(gw: RunningGateway) -> Iterator[Clients]:
    factory = Clients(gw)
    try:
        yield factory
    finally:
        factory.close_all()
