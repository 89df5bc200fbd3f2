"""Stopping: a component gets a bounded time to drain in its ``stop()``, then is cancelled;
one that drains in time finishes its work (the tap store tests show a flushed store)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker_core.broker import Broker
from gateway.components import SINK, Spec, Supervisor
from gateway.hub import Hub
from tests.helpers.components import StubbornComponent, registered  # noqa: F401


@pytest.mark.usefixtures("registered")
def test_a_component_that_does_not_stop_is_cancelled_after_the_timeout(tmp_path: Path) -> None:
    async def scenario() -> tuple[float, StubbornComponent, str]:
        supervisor = Supervisor(Hub(Broker()), tmp_path, stop_timeout_s=0.2)
        async with asyncio.TaskGroup() as tg:
            supervisor.start(tg)
            supervisor.add(Spec(SINK, "test-stubborn", "mule", None))
            while (supervisor.status(SINK, "mule") or {}).get("state") != "running":
                await asyncio.sleep(0.01)
            component = supervisor.instance(SINK, "mule")
            started = time.monotonic()
            await supervisor.shutdown()
            took = time.monotonic() - started
        status = supervisor.status(SINK, "mule")
        assert status is not None
        return took, component, str(status["state"])

    took, component, state = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert component.stop_called
    assert component.cancelled
    assert state == "stopped"
    assert 0.2 <= took < 5
