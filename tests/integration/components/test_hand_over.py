"""What a run keeps for the next (``Host.keep``) reaches it across a restart, an update
and the backoff after a failure, and is closed when no run follows: paused, removed,
disabled, or the gateway stops."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.broker import Broker
from gateway.components import SINK, ComponentType, Host, Spec, Supervisor, registry
from gateway.hub import Hub, HubClient

#: What happened, in order: ("took", token or None), ("closed", token).
EVENTS: list[tuple[str, object]] = []
#: Runs that raise once they have kept their token, by config.
FAIL: set[str] = set()


class Keeper:
    """Takes what the last run kept, keeps a new token as it ends (however it ends)."""

    runs = 0

    def __init__(self, config: str) -> None:
        self.config = config

    async def run(self, hub: HubClient, host: Host) -> None:
        Keeper.runs += 1
        token = f"{self.config}#{Keeper.runs}"
        EVENTS.append(("took", host.take()))
        try:
            host.ready()
            if self.config in FAIL:
                FAIL.discard(self.config)
                raise RuntimeError("the native side failed")
            await host.stopping.wait()
        finally:
            host.keep(token, lambda: EVENTS.append(("closed", token)))


@pytest.fixture
def keeper() -> Iterator[None]:
    undo = registry.register(
        ComponentType(SINK, "test-keeper", f"{__name__}:Keeper", f"{__name__}:Keeper")
    )
    EVENTS.clear()
    FAIL.clear()
    Keeper.runs = 0
    try:
        yield
    finally:
        undo()


async def _until(what: tuple[str, object], times: int = 1) -> None:
    async with asyncio.timeout(10):
        while EVENTS.count(what) < times:
            await asyncio.sleep(0.01)


@pytest.mark.usefixtures("keeper")
def test_kept_across_restarts_closed_when_no_run_follows(tmp_path: Path) -> None:
    async def scenario() -> None:
        supervisor = Supervisor(Hub(Broker()), tmp_path, stop_timeout_s=2)
        async with asyncio.TaskGroup() as tg:
            supervisor.start(tg)
            supervisor.add(Spec(SINK, "test-keeper", "k", "a", restart_backoff_s=0.05))
            await _until(("took", None))
            supervisor.restart(SINK, "k")  # on request
            await _until(("took", "a#1"))
            supervisor.update(Spec(SINK, "test-keeper", "k", "b", restart_backoff_s=0.05))
            await _until(("took", "a#2"))  # a new config takes over the old run's
            FAIL.add("b")
            supervisor.restart(SINK, "k")
            await _until(("took", "b#4"))  # across the backoff after run 4 failed
            supervisor.pause(SINK, "k")
            await _until(("closed", "b#5"))  # paused: nothing waits for a next run
            supervisor.resume(SINK, "k")
            await _until(("took", None), 2)
            supervisor.update(Spec(SINK, "test-keeper", "k", "c", enabled=False))
            await _until(("closed", "b#6"))  # disabled
            supervisor.update(Spec(SINK, "test-keeper", "k", "d"))
            await _until(("took", None), 3)
            supervisor.remove(SINK, "k")
            await _until(("closed", "d#7"))
            supervisor.add(Spec(SINK, "test-keeper", "last", "e"))
            await _until(("took", None), 4)
            await supervisor.shutdown()
        assert EVENTS[-1] == ("closed", "e#8")
        assert [e for e in EVENTS if e[0] == "closed"] == [
            ("closed", "b#5"),
            ("closed", "b#6"),
            ("closed", "d#7"),
            ("closed", "e#8"),
        ]  # each token once: taken or closed, never both

    asyncio.run(asyncio.wait_for(scenario(), 60))
