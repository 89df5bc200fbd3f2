"""Helpers of the rule and webhook tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.broker.support import Clients

__all__ = ["gateway_with_clients"]


@contextlib.contextmanager
def gateway_with_clients(tmp_path: Path, config: str) -> Iterator[tuple[RunningGateway, Clients]]:
    """A running gateway with ``config`` and a factory of MQTT clients closed at the end."""
    with running_gateway(tmp_path, config) as gw:
        clients = Clients(gw)
        try:
            yield gw, clients
        finally:
            clients.close_all()
