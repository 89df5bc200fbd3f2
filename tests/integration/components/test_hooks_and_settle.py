"""Two seam pieces the stream log needs: ``hub.hook`` (every message, one call each,
durable like a tap) and ``Supervisor.settle`` (what a component sets up before its
first await is in place before the gateway opens its listeners)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from broker_core.broker import Broker
from broker_core.context import Context, Origin
from gateway.components import SINK, ComponentType, Host, Spec, Supervisor, registry
from gateway.hub import Hub, HubClient
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit


class _HeldStore:
    """A durable participant whose writes commit only when the test says so."""

    def __init__(self) -> None:
        self.items: list[Context] = []
        self.committed = 0
        self.waiting: list[Callable[[bool], None]] = []

    @property
    def pending(self) -> int:
        return len(self.items) - self.committed

    def barrier(self, callback: Callable[[bool], None]) -> None:
        if not self.pending:
            callback(True)
        else:
            self.waiting.append(callback)

    def commit(self) -> None:
        self.committed = len(self.items)
        waiting, self.waiting = self.waiting, []
        for callback in waiting:
            callback(True)


def test_a_durable_hook_sees_every_message_and_holds_the_puback(tmp_path: Path) -> None:
    with running_gateway(tmp_path) as gw:
        store = _HeldStore()
        client = gw.call(lambda: gw.gateway.hub.client("test", "hooked"))
        hook = gw.call(lambda: client.hook(store.items.append, durable=store))
        pub = RawClient("127.0.0.1", gw.port, protocol_level=5)
        pub.send(mb.gen_connect("hook-pub", proto_ver=5))
        assert pub.recv_packet().reason_code == 0
        # The broker's own $SYS event of the connection is hooked too.
        assert _wait(lambda: gw.call(lambda: len(store.items)) == 1)
        assert store.items.pop().topic.endswith("/clients/hook-pub/connected")
        pub.send(mb.gen_publish("a/b", b"1", qos=1, mid=1, proto_ver=5))
        pub.send(mb.gen_publish("$app/x", b"2", qos=0, proto_ver=5))  # `$` topics too
        assert _wait(lambda: gw.call(lambda: len(store.items)) == 2), store.items
        # The PUBACK waits for the store's barrier, held until the test commits.
        assert _wait(lambda: gw.call(lambda: len(store.waiting)) == 1)
        assert not pub.backlog
        gw.call(store.commit)  # now the message is "in the store": the PUBACK goes out
        ack = pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
        assert (ack.packet_id, ack.reason_code) == (1, 0x10)
        assert [(c.topic, c.qos) for c in store.items] == [("a/b", 1), ("$app/x", 0)]
        gw.call(client.close)  # the hook and its participant go
        assert hook.closed
        broker = gw.broker
        counts = gw.call(
            lambda: (len(broker.observers.message_hooks), len(broker.acks.participants))
        )
        assert counts == (0, 0)
        pub.send(mb.gen_publish("a/c", b"3", qos=1, mid=2, proto_ver=5))
        assert pub.wait_for(lambda p: p.type == mb.PacketType.PUBACK).packet_id == 2
        assert len(store.items) == 2


def _wait(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + unit(5)
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class _Early:
    """Hooks before its first await, like the stream log."""

    seen: list[str] = []

    def __init__(self, config: object) -> None:
        self.config = config

    async def run(self, hub: HubClient, host: Host) -> None:
        hub.hook(lambda context: _Early.seen.append(context.topic))
        host.ready()
        await asyncio.Event().wait()


def test_settle_runs_every_component_to_its_first_await(tmp_path: Path) -> None:
    undo = registry.register(
        ComponentType(SINK, "test-early", f"{__name__}:_Early", f"{__name__}:_Early")
    )

    async def scenario() -> list[str]:
        broker = Broker()
        supervisor = Supervisor(Hub(broker), tmp_path, [Spec(SINK, "test-early", "early", None)])
        async with asyncio.TaskGroup() as tg:
            supervisor.start(tg)
            await supervisor.settle()
            # What a listener would accept first: the component's hook already sees it.
            broker.publish(Context("first/message", b"", origin=Origin("mqtt", "c")))
            seen = list(_Early.seen)
            await supervisor.shutdown()
        return seen

    try:
        assert asyncio.run(asyncio.wait_for(scenario(), unit(30))) == ["first/message"]
    finally:
        undo()
