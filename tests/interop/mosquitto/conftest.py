"""Fixtures of the mosquitto client interop tests: an in-process gateway on 127.0.0.1:0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.interop.mosquitto.tools import have_mosquitto_clients


@pytest.fixture(autouse=True)
def _mosquitto_clients_installed() -> None:
    if not have_mosquitto_clients():
        pytest.skip(
            "mosquitto_pub / mosquitto_sub are not installed (apt-get install mosquitto-clients)"
        )


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path / "gw", "api:\n  enabled: false\n") as gateway:
        yield gateway


@pytest.fixture
def address(gw: RunningGateway) -> tuple[str, int]:
    return gw.address()
