"""A run's subscriptions are handed over to the next run of the instance (a restart on
request, an update, after a failure): what they queued reaches the next run, which
takes each over by subscribing to the same filters; what no run takes over is counted
as dropped (``dropped`` and ``handover_dropped``) once the next run is up, or when no
run follows (paused, removed). Before, a run's subscriptions closed with it and what
they held was lost uncounted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.broker import Broker
from gateway.components import ADAPTER, ComponentType, Host, Spec, Supervisor, registry
from gateway.hub import Hub, HubClient

#: payloads the consuming runs received, in order
RECEIVED: list[bytes] = []
#: and the QoS each came with
QOS: list[int] = []


class Holder:
    """``hold:<filter>`` subscribes (QoS 1) and consumes nothing; ``take:<filter>``
    consumes; ``take0:<filter>`` subscribes with QoS 0 and consumes."""

    def __init__(self, config: str) -> None:
        self.mode, _, self.filter = config.partition(":")

    async def run(self, hub: HubClient, host: Host) -> None:
        subscription = hub.subscribe(self.filter, qos=0 if self.mode == "take0" else 1)
        host.ready()
        if self.mode == "hold":
            await asyncio.get_running_loop().create_future()  # until cancelled
        async for context in subscription:
            RECEIVED.append(context.payload)
            QOS.append(context.qos)


@pytest.fixture
def holder() -> Iterator[None]:
    undo = registry.register(
        ComponentType(ADAPTER, "test-holder", f"{__name__}:Holder", f"{__name__}:Holder")
    )
    RECEIVED.clear()
    QOS.clear()
    try:
        yield
    finally:
        undo()


async def _until(what: object, check: object, seconds: float = 10) -> None:
    async with asyncio.timeout(seconds):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.01)


@pytest.mark.usefixtures("holder")
def test_queued_messages_reach_the_next_run_or_are_counted(tmp_path: Path) -> None:
    async def scenario() -> None:
        hub = Hub(Broker())
        supervisor = Supervisor(hub, tmp_path, stop_timeout_s=2)
        sender = hub.client("test", "sender")

        def publish(topic: str, payload: bytes) -> None:
            assert sender.publish(sender.context(topic, payload, qos=1))

        def stats() -> dict[str, int]:
            status = supervisor.status(ADAPTER, "h")
            assert status is not None
            return dict(status["stats"])

        def running() -> bool:
            status = supervisor.status(ADAPTER, "h")
            return status is not None and status["state"] == "running"

        async def next_run_up(before: object) -> None:
            """Waits for a run other than ``before`` (a component object) to be up."""
            await _until("up", lambda: running() and supervisor.instance(ADAPTER, "h")
                         not in (None, before))  # fmt: skip
            await asyncio.sleep(0)  # the release of what it did not take over, if any

        def spec(config: str) -> Spec:
            return Spec(ADAPTER, "test-holder", "h", config, restart_backoff_s=0.05)

        async with asyncio.TaskGroup() as tg:
            supervisor.start(tg)
            supervisor.add(spec("hold:a/#"))
            await _until("running", running)
            for n in range(5):
                publish(f"a/{n}", b"%d" % n)
            assert stats()["queue_depth"] == 5
            before = supervisor.instance(ADAPTER, "h")
            supervisor.restart(ADAPTER, "h")  # on request: the next run takes them over
            await next_run_up(before)
            assert (stats()["queue_depth"], stats()["dropped"]) == (5, 0)
            supervisor.update(spec("take0:a/#"))  # a new config takes them over too,
            await _until("received", lambda: len(RECEIVED) == 5)  # at another QoS
            assert RECEIVED == [b"0", b"1", b"2", b"3", b"4"]
            publish("a/x", b"x")  # granted QoS 0 from now on; the queued ones kept 1
            await _until("received", lambda: len(RECEIVED) == 6)
            assert QOS == [1, 1, 1, 1, 1, 0]
            del RECEIVED[5:]
            before = supervisor.instance(ADAPTER, "h")
            supervisor.update(spec("hold:a/#"))
            await next_run_up(before)
            publish("a/5", b"5")
            publish("a/6", b"6")
            supervisor.update(spec("hold:b/#"))  # nothing subscribes to a/# any more
            await _until("counted", lambda: stats()["handover_dropped"] == 2)
            assert (stats()["dropped"], stats()["queue_depth"]) == (2, 0)
            publish("b/1", b"b")
            publish("a/7", b"7")  # no subscriber left: not taken in
            assert stats()["queue_depth"] == 1
            supervisor.pause(ADAPTER, "h")  # no run follows: counted at once
            await _until("paused", lambda: stats()["handover_dropped"] == 3)
            assert (stats()["dropped"], stats()["queue_depth"]) == (3, 0)
            assert RECEIVED == [b"0", b"1", b"2", b"3", b"4"]
            await supervisor.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 60))
