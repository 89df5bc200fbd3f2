"""Component types for tests of the seam, registered by the tests that use them.

They live here, not in the package: a test registers them (``registered`` fixture, or
``register_test_types()`` in a gateway subprocess started through
``tests.helpers.component_gateway``) and they are gone again afterwards.

- ``test-flaky`` (every kind): fails to start ``fail_starts`` times, then runs, publishes
  ``flaky/<kind>/<attempt>``, crashes once if ``crash_once``, then reports
  ``degraded(degrade)`` when set, and serves.
- ``test-stubborn`` (sink): its ``stop()`` never returns; only cancellation ends it.
- ``test-threadfed`` (adapter): a thread of its own puts ``count`` numbered items into a
  host inbox at full speed; the loop side checks their order and counts them.
- ``test-tapstore`` (adapter): a durable tap appending every message on ``topics`` to
  SQLite in its data directory, on its own writer thread (``BatchWriter``), before the
  publisher's PUBACK; its API route ``GET /api/v1/test-tapstore/{name}/messages`` lists
  what it holds.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest
from fastapi import APIRouter, HTTPException
from pydantic import Field

from gateway.api.deps import Components
from gateway.components import (
    ADAPTER,
    KINDS,
    SINK,
    BatchWriter,
    ComponentType,
    Host,
    Inbox,
    registry,
)
from gateway.config.models.adapter_base import AdapterConfigBase
from gateway.hub import HubClient

__all__ = [
    "ATTEMPTS",
    "FlakyConfig",
    "TapStoreConfig",
    "ThreadFedConfig",
    "read_tap_store",
    "register_test_types",
    "registered",
]

ATTEMPTS: dict[str, int] = {}


class FlakyConfig(AdapterConfigBase):
    type: Literal["test-flaky"] = Field(description="Test type.")
    fail_starts: int = Field(default=2, description="Failures before it starts.")
    crash_once: bool = Field(default=True, description="Crash once after starting.")
    degrade: str | None = Field(default=None, description="Degraded reason to report.")


class FlakyComponent:
    def __init__(self, config: FlakyConfig) -> None:
        self.config = config

    async def run(self, hub: HubClient, host: Host) -> None:
        key = f"{host.kind}/{host.name}"
        attempt = ATTEMPTS[key] = ATTEMPTS.get(key, 0) + 1
        if attempt <= self.config.fail_starts:
            raise ConnectionError(f"native side unreachable (attempt {attempt})")
        host.ready()
        hub.publish(hub.context(f"flaky/{host.kind}/{attempt}", b"up", 1))
        if self.config.crash_once and attempt == self.config.fail_starts + 1:
            await asyncio.sleep(0.1)
            raise RuntimeError("native side crashed")
        if self.config.degrade:
            host.degraded(self.config.degrade)
        await asyncio.Event().wait()

    def stats(self) -> dict[str, int]:
        return {"answer": 42}


class StubbornComponent:
    """Never stops by itself: ``stop()`` hangs too, so only cancellation ends it."""

    def __init__(self, config: object) -> None:
        self.config = config
        self.cancelled = False
        self.stop_called = False

    async def run(self, hub: HubClient, host: Host) -> None:
        host.ready()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    async def stop(self) -> None:
        self.stop_called = True
        await asyncio.Event().wait()


class ThreadFedConfig(AdapterConfigBase):
    type: Literal["test-threadfed"] = Field(description="Test type.")
    count: int = Field(description="Items the thread produces.")
    inbox_size: int = Field(default=100, description="The inbox's bound.")
    overflow: Literal["drop_oldest", "drop_new", "block"] = Field(
        default="block", description="The inbox's overflow policy."
    )
    consume_after_producer: bool = Field(
        default=False, description="Start consuming only once the producer is done."
    )


class ThreadFedComponent:
    def __init__(self, config: ThreadFedConfig) -> None:
        self.config = config
        self.received = 0
        self.out_of_order = 0
        self.last = -1
        self.produced = threading.Event()

    async def run(self, hub: HubClient, host: Host) -> None:
        inbox: Inbox[int] = host.inbox(self.config.inbox_size, self.config.overflow)
        thread = threading.Thread(target=self._produce, args=(inbox.put,), daemon=True)
        thread.start()
        host.ready()
        if self.config.consume_after_producer:
            await asyncio.to_thread(self.produced.wait)
        async for item in inbox:
            if item <= self.last:
                self.out_of_order += 1
            self.last = item
            self.received += 1

    def _produce(self, put: Callable[[int], bool]) -> None:
        for number in range(self.config.count):
            put(number)
        self.produced.set()

    def stats(self) -> dict[str, int]:
        return {
            "received": self.received,
            "out_of_order": self.out_of_order,
            "produced": int(self.produced.is_set()),
        }


class TapStoreConfig(AdapterConfigBase):
    type: Literal["test-tapstore"] = Field(description="Test type.")
    topics: tuple[str, ...] = Field(default=("#",), description="Filters tapped.")


_CREATE = "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, topic TEXT, payload BLOB)"


def read_tap_store(path: Path) -> list[tuple[str, bytes]]:
    """What a tap store at ``path`` (its ``tap.db``) holds, in order."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT topic, payload FROM messages ORDER BY seq")
        return [(topic, bytes(payload)) for topic, payload in rows]
    finally:
        conn.close()


class TapStoreComponent:
    def __init__(self, config: TapStoreConfig) -> None:
        self.config = config
        self.path: Path | None = None
        self.stored = 0
        self._finished = asyncio.Event()

    async def run(self, hub: HubClient, host: Host) -> None:
        self.path = host.data_dir / "tap.db"
        conn = sqlite3.connect(self.path, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(_CREATE)
        conn.commit()

        def write(items: list[tuple[str, bytes]]) -> None:
            conn.executemany("INSERT INTO messages (topic, payload) VALUES (?, ?)", items)
            conn.commit()

        writer: BatchWriter[tuple[str, bytes]] = BatchWriter(write, f"tapstore-{host.name}")
        try:
            hub.tap(
                *self.config.topics,
                callback=lambda context: writer.append((context.topic, context.payload)),
                durable=writer,
            )
            host.ready()
            await host.stopping.wait()
        finally:
            writer.close()
            self.stored = writer.written
            conn.close()
            self._finished.set()

    async def stop(self) -> None:
        await self._finished.wait()  # run() flushes and closes its store on `stopping`


tapstore_api = APIRouter(tags=["test-tapstore"])


@tapstore_api.get("/test-tapstore/{name}/messages")
async def tapstore_messages(supervisor: Components, name: str) -> list[dict[str, str]]:
    component = supervisor.instance(ADAPTER, name)
    if not isinstance(component, TapStoreComponent) or component.path is None:
        raise HTTPException(404, f"no tap store {name!r}")
    rows = await asyncio.to_thread(read_tap_store, component.path)
    return [{"topic": topic, "payload": payload.decode()} for topic, payload in rows]


_HERE = "tests.helpers.components"


def _types() -> list[ComponentType]:
    flaky = [
        ComponentType(kind, "test-flaky", f"{_HERE}:FlakyComponent", f"{_HERE}:FlakyConfig")
        for kind in KINDS
    ]
    return [
        *flaky,
        ComponentType(SINK, "test-stubborn", f"{_HERE}:StubbornComponent", f"{_HERE}:FlakyConfig"),
        ComponentType(
            ADAPTER, "test-threadfed", f"{_HERE}:ThreadFedComponent", f"{_HERE}:ThreadFedConfig"
        ),
        ComponentType(
            ADAPTER,
            "test-tapstore",
            f"{_HERE}:TapStoreComponent",
            f"{_HERE}:TapStoreConfig",
            api=f"{_HERE}:tapstore_api",
        ),
    ]


def register_test_types() -> Callable[[], None]:
    """Registers every test type; returns a function unregistering them."""
    undo = [registry.register(entry) for entry in _types()]

    def unregister() -> None:
        for step in reversed(undo):
            step()

    return unregister


@pytest.fixture
def registered() -> Iterator[None]:
    """The test component types, registered for one test."""
    unregister = register_test_types()
    try:
        yield
    finally:
        unregister()
