"""``WillScheduler``: a persisted session's pending will is written to the store until it
is published or cancelled; one restored from the store is armed for its wall-clock due
time, at once when that passed."""

from __future__ import annotations

import asyncio

from broker_core.context import Context, Origin
from broker_core.mqtt.packets import Will
from broker_core.mqtt.properties import Properties
from broker_core.store.base import RestoredWill
from broker_core.will import WillScheduler

WILL = Will("status/c", b"gone", 1, False, Properties(will_delay_interval=30))
ORIGIN = Origin("mqtt", "c", "127.0.0.1:1", "alice")
NOW = 1_800_000_000.0


class RecordingStore:
    """The two store methods the scheduler calls, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def will_saved(self, client_id: str, due_at: float, will: Will, origin: Origin) -> None:
        self.calls.append(("saved", client_id, due_at, will, origin))

    def will_deleted(self, client_id: str) -> None:
        self.calls.append(("deleted", client_id))


def scheduler() -> tuple[WillScheduler, RecordingStore, list[Context]]:
    store = RecordingStore()
    published: list[Context] = []
    return WillScheduler(published.append, store), store, published  # type: ignore[arg-type]


async def next_turns() -> None:
    """Lets the loop run what is due now (timers of delay 0), without waiting for time."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_a_persisted_will_is_saved_with_its_due_time_and_deleted_when_published() -> None:
    async def main() -> None:
        wills, store, published = scheduler()
        wills.schedule("c", WILL, ORIGIN, 30, NOW, persist=True)
        assert store.calls == [("saved", "c", NOW + 30, WILL, ORIGIN)]
        assert len(wills) == 1
        wills.fire_now("c")  # the session ended first
        assert store.calls[1:] == [("deleted", "c")]
        (context,) = published
        assert (context.topic, context.payload, context.origin) == ("status/c", b"gone", ORIGIN)
        assert context.properties.will_delay_interval is None
        assert len(wills) == 0

    asyncio.run(main())


def test_a_cancelled_persisted_will_is_deleted_and_not_published() -> None:
    async def main() -> None:
        wills, store, published = scheduler()
        wills.schedule("c", WILL, ORIGIN, 30, NOW, persist=True)
        wills.cancel("c")
        assert store.calls[1:] == [("deleted", "c")]
        assert published == []

    asyncio.run(main())


def test_a_will_not_persisted_or_published_at_once_is_not_written() -> None:
    async def main() -> None:
        wills, store, published = scheduler()
        wills.schedule("c", WILL, ORIGIN, 30, NOW)
        wills.cancel("c")
        wills.schedule("d", WILL, ORIGIN, 0, NOW, persist=True)
        assert store.calls == []
        assert [context.topic for context in published] == ["status/c"]

    asyncio.run(main())


def test_a_restored_will_already_due_is_published_on_the_next_turn() -> None:
    async def main() -> None:
        wills, store, published = scheduler()
        wills.restore("c", RestoredWill(NOW - 5, WILL, ORIGIN), NOW)
        assert published == []  # not during the restore: every session first
        await next_turns()
        assert [context.topic for context in published] == ["status/c"]
        assert store.calls == [("deleted", "c")]

    asyncio.run(main())


def test_a_restored_will_not_yet_due_waits_and_a_takeover_cancels_it() -> None:
    async def main() -> None:
        wills, store, published = scheduler()
        wills.restore("c", RestoredWill(NOW + 3600, WILL, ORIGIN), NOW)
        await next_turns()
        assert published == []
        assert len(wills) == 1
        wills.cancel("c")
        assert store.calls == [("deleted", "c")]
        assert len(wills) == 0

    asyncio.run(main())


def test_pending_will_bytes_are_counted_and_bounded() -> None:
    # A will counts its topic, payload and properties; each way out of the scheduler
    # (published, cancelled, replaced by a restored one) gives its bytes back.
    size = len("status/c") + len(b"gone") + len(WILL.properties.encoded())

    async def main() -> None:
        store = RecordingStore()
        published: list[Context] = []
        full: list[None] = []
        wills = WillScheduler(
            published.append,
            store,  # type: ignore[arg-type]
            max_bytes=2 * size,
            on_full=lambda: full.append(None),
        )
        wills.schedule("a", WILL, ORIGIN, 30, NOW)
        wills.schedule("b", WILL, ORIGIN, 30, NOW)
        assert (len(wills), wills.bytes) == (2, 2 * size)
        assert wills.room_for(WILL) is False
        wills.schedule("c", WILL, ORIGIN, 30, NOW)  # no room: published now
        assert (len(wills), len(published), len(full)) == (2, 1, 1)
        wills.cancel("a")
        assert wills.bytes == size
        assert wills.room_for(WILL) is True
        wills.fire_now("b")
        assert (wills.bytes, len(published)) == (0, 2)
        wills.restore("r", RestoredWill(NOW + 30, WILL, ORIGIN), NOW)
        wills.restore("r", RestoredWill(NOW + 60, WILL, ORIGIN), NOW)  # counted once
        assert (len(wills), wills.bytes) == (1, size)
        wills.cancel("r")
        assert wills.bytes == 0

    asyncio.run(main())
