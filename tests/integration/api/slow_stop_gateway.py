"""``python -m tests.integration.api.slow_stop_gateway run -c cfg.yaml``: the edgebus CLI
with one more adapter type, ``test-slowstop``, whose ``stop()`` never returns: the
gateway's shutdown then waits the supervisor's stop timeout (5 s) for it, with the HTTP
API still serving (test_reload_during_shutdown_api.py). Its ``stop()`` logs
``slowstop: stop called`` when the shutdown reaches it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from pydantic import Field

from gateway.cli import main
from gateway.components import ADAPTER, ComponentType, Host, registry
from gateway.config.models.adapter_base import AdapterConfigBase
from gateway.hub import HubClient

__all__ = ["SlowStopConfig", "register_slow_stop"]

log = logging.getLogger(__name__)


class SlowStopConfig(AdapterConfigBase):
    type: Literal["test-slowstop"] = Field(description="Test type.")


class SlowStopComponent:
    def __init__(self, config: SlowStopConfig) -> None:
        self.config = config

    async def run(self, hub: HubClient, host: Host) -> None:
        host.ready()
        await asyncio.Event().wait()

    async def stop(self) -> None:
        log.info("slowstop: stop called")
        await asyncio.Event().wait()  # the supervisor cancels it after its stop timeout


def register_slow_stop() -> None:
    here = "tests.integration.api.slow_stop_gateway"
    registry.register(
        ComponentType(
            ADAPTER, "test-slowstop", f"{here}:SlowStopComponent", f"{here}:SlowStopConfig"
        )
    )


if __name__ == "__main__":
    register_slow_stop()
    main()
