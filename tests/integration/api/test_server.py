"""The API server's life in the gateway: bound at start, closed at stop, optional."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.binding import BindError
from gateway.config import parse_config
from tests.helpers.gateway import running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import KEY


def test_the_port_is_closed_when_the_gateway_stops(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API_CONFIG) as gw:
        address = gw.gateway.api_address
        assert address is not None
        assert http_of(gw).get("/api/v1/health").status == 200
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=1).close()


def test_a_busy_port_stops_the_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = parse_config(
            f"listeners: []\npersistence: memory\ndata_dir: {tmp_path}\n"
            f"api: {{bind: '127.0.0.1:{port}', keys: ['{KEY}']}}\n"
        )

        async def start() -> None:
            await Gateway(config).run()

        with pytest.raises(ExceptionGroup) as info:
            asyncio.run(start())
    [error] = info.value.exceptions
    assert isinstance(error, BindError)
    assert error.path == ("api", "bind")
    assert str(error) == (
        f"the HTTP API cannot listen on 127.0.0.1:{port}: the address is already in use"
        " (another edgebus or MQTT broker?)"
    )


def test_the_api_can_be_disabled(tmp_path: Path) -> None:
    with running_gateway(tmp_path, "api:\n  enabled: false\n") as gw:
        assert gw.gateway.api is None
        assert gw.gateway.api_address is None
    assert not (tmp_path / "data" / "api-key").exists()
