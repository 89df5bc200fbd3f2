"""The inbox: bounded, thread-safe, one loop wake-up per batch, drops counted."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from gateway.components.inbox import BLOCK, DROP_NEW, DROP_OLDEST, Inbox


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def test_overflow_policies_count_every_drop() -> None:
    async def scenario() -> None:
        new: Inbox[int] = Inbox(3, DROP_NEW)
        old: Inbox[int] = Inbox(3, DROP_OLDEST)
        assert [new.put(n) for n in range(5)] == [True, True, True, False, False]
        assert all(old.put(n) for n in range(5))
        new.close()
        old.close()
        assert [n async for n in new] == [0, 1, 2]
        assert [n async for n in old] == [2, 3, 4]
        assert (new.dropped, new.accepted, old.dropped, old.accepted) == (2, 3, 2, 5)
        assert new.put(9) is False
        assert new.dropped == 3

    run(scenario())


def test_a_fast_thread_wakes_the_loop_once_per_batch() -> None:
    wakes = 0

    async def scenario() -> list[int]:
        nonlocal wakes
        inbox: Inbox[int] = Inbox(1_000_000)
        original = inbox._wake

        def counted() -> None:
            nonlocal wakes
            wakes += 1
            original()

        inbox._wake = counted  # type: ignore[method-assign]
        go = threading.Event()

        def produce() -> None:
            go.wait()
            for number in range(100_000):
                inbox.put(number)
            inbox._loop.call_soon_threadsafe(inbox.close)

        threading.Thread(target=produce, daemon=True).start()
        go.set()
        await asyncio.sleep(0.05)  # the consumer is busy: producers only append
        return [n async for n in inbox]

    got = run(scenario())
    assert got == list(range(100_000))
    assert wakes < 1000  # batches, not one wake-up per item


def test_callback_mode_hands_items_over_in_order_on_the_loop() -> None:
    async def scenario() -> list[int]:
        got: list[int] = []
        loop_thread = threading.get_ident()
        done = asyncio.Event()

        def on_item(number: int) -> None:
            assert threading.get_ident() == loop_thread
            if number == 1:
                raise ValueError("a consumer's bug")
            got.append(number)
            if number == 9_999:
                done.set()

        inbox: Inbox[int] = Inbox(100, BLOCK, callback=on_item)
        producer = threading.Thread(target=lambda: [inbox.put(n) for n in range(10_000)])
        producer.start()
        await done.wait()
        producer.join()
        assert inbox.errors == 1
        return got

    assert run(scenario()) == [0, *range(2, 10_000)]


def test_block_waits_for_room_but_never_on_the_loop() -> None:
    async def scenario() -> None:
        inbox: Inbox[int] = Inbox(1, BLOCK)
        assert inbox.put(1)
        with pytest.raises(RuntimeError, match="cannot wait on the event loop"):
            inbox.put(2)
        result: list[bool] = []
        timed_out = threading.Thread(target=lambda: result.append(inbox.put(3, timeout=0.01)))
        timed_out.start()
        await asyncio.to_thread(timed_out.join)
        assert result == [False]
        assert inbox.dropped == 1
        waiting = threading.Thread(target=lambda: result.append(inbox.put(4)))
        waiting.start()
        assert await inbox.get() == 1
        await asyncio.to_thread(waiting.join)
        assert await inbox.get() == 4

    run(scenario())


def test_a_producer_keeping_what_a_closed_inbox_refuses_is_not_counted_dropped() -> None:
    async def scenario() -> None:
        inbox: Inbox[int] = Inbox(1, BLOCK)
        assert inbox.put(1)
        result: list[bool] = []
        waiting = threading.Thread(target=lambda: result.append(inbox.put(2, keep_if_closed=True)))
        waiting.start()
        while not inbox._room._waiters:  # type: ignore[attr-defined]  # it waits for room
            await asyncio.sleep(0)
        inbox.close()
        await asyncio.to_thread(waiting.join)
        assert inbox.put(3, keep_if_closed=True) is False
        assert (result, inbox.dropped, inbox.accepted) == ([False], 0, 1)
        assert inbox.put(4) is False
        assert inbox.dropped == 1

    run(scenario())


def test_bad_arguments() -> None:
    async def scenario() -> None:
        with pytest.raises(ValueError, match="maxsize"):
            Inbox(0)
        with pytest.raises(ValueError, match="overflow"):
            Inbox(1, "drop_all")

    run(scenario())
