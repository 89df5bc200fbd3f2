"""``Inbox``: the one hand-off from a library's own threads to the event loop.

cyclonedds calls its listeners on its threads, paho runs its network loop on one,
someipy may too. Their callbacks ``put`` items into a bounded ``Inbox``; the event loop
consumes them, either as an async iterator (``async for item in inbox``) or through a
callback run on the loop (``callback=``).

- **Batched wake-ups.** A producer schedules a wake-up (``call_soon_threadsafe``) only
  when the consumer is idle, waiting for items; while it is busy, producers only
  append. A fast producer costs one loop callback per batch, not one per item.
- **Bounded.** At most ``maxsize`` items wait. On overflow: ``drop_oldest`` (default)
  drops the oldest waiting item, ``drop_new`` refuses the arriving one (``put`` returns
  False), ``block`` makes the producer's thread wait for room (up to ``put``'s
  ``timeout``; never from the loop's own thread). Every item dropped is counted in
  ``dropped``; ``accepted`` counts the items taken in.
- ``close()`` ends the consumer's iteration once the waiting items are consumed;
  ``put`` after it drops and counts (unless the producer keeps the item for another
  inbox: ``keep_if_closed``).

It lives in the gateway (``gateway/components``) rather than ``adapters/``: the host the
supervisor builds hands it out, and the gateway never imports the ``adapters`` package.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from broker_core.mqtt.limits import DROP_NEW, DROP_OLDEST

__all__ = ["BLOCK", "DROP_NEW", "DROP_OLDEST", "Inbox"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Overflow policy: the producing thread waits for room.
BLOCK = "block"


class Inbox(Generic[T]):
    """A bounded, thread-safe queue into the event loop; create it on the loop."""

    def __init__(
        self,
        maxsize: int = 10_000,
        overflow: str = DROP_OLDEST,
        callback: Callable[[T], None] | None = None,
        name: str = "inbox",
    ) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        if overflow not in (DROP_OLDEST, DROP_NEW, BLOCK):
            raise ValueError(f"unknown overflow policy {overflow!r}")
        self.maxsize = maxsize
        self.overflow = overflow
        self.name = name
        self.accepted = 0
        self.dropped = 0
        self.errors = 0  # callbacks that raised
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._callback = callback
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._items: deque[T] = deque()
        self._idle = True  # the consumer waits: the next put schedules a wake-up
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- producer side: any thread -----------------------------------------------------

    def put(self, item: T, timeout: float | None = None, *, keep_if_closed: bool = False) -> bool:
        """Hands ``item`` to the loop; False when it was dropped (``drop_new`` with the
        inbox full, ``block`` past ``timeout``, or a closed inbox). ``keep_if_closed``:
        the producer keeps an item a closed inbox refuses, for another inbox (an NNG
        socket's thread between two runs of its adapter), so it is not counted dropped."""
        with self._lock:
            if self._closed:
                if not keep_if_closed:
                    self.dropped += 1
                return False
            if len(self._items) >= self.maxsize:
                if self.overflow == DROP_NEW:
                    self.dropped += 1
                    return False
                if self.overflow == DROP_OLDEST:
                    self._items.popleft()
                    self.dropped += 1
                elif not self._wait_for_room(timeout):
                    if not (keep_if_closed and self._closed):
                        self.dropped += 1
                    return False
            self._items.append(item)  # not a local: a callback-mode drain swaps the deque
            self.accepted += 1
            wake = self._idle
            self._idle = False
        if wake:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody consumes any more
                self._loop.call_soon_threadsafe(self._wake)
        return True

    def _wait_for_room(self, timeout: float | None) -> bool:
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError(f"{self.name}: a 'block' inbox cannot wait on the event loop")
        ok = self._room.wait_for(lambda: self._closed or len(self._items) < self.maxsize, timeout)
        return ok and not self._closed

    # -- consumer side: the event loop -------------------------------------------------

    async def get(self) -> T:
        """The next item; raises StopAsyncIteration once closed and empty."""
        while True:
            with self._lock:
                if self._items:
                    item = self._items.popleft()
                    if self.overflow == BLOCK:
                        self._room.notify()
                    return item
                if self._closed:
                    raise StopAsyncIteration
                self._idle = True
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def __aiter__(self) -> Inbox[T]:
        return self

    async def __anext__(self) -> T:
        return await self.get()

    def close(self) -> None:
        """No more items are taken; the consumer ends once it has the waiting ones."""
        with self._lock:
            self._closed = True
            self._room.notify_all()
        self._wake()

    def _wake(self) -> None:
        if self._callback is not None:
            self._drain()
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _drain(self) -> None:
        """Callback mode: hands every waiting item to the callback, one batch per turn."""
        with self._lock:
            batch = self._items
            self._items = deque()
            if self.overflow == BLOCK:
                self._room.notify_all()
        callback = self._callback
        assert callback is not None
        for item in batch:
            try:
                callback(item)
            except Exception:
                self.errors += 1
                if self.errors == 1 or self.errors % 1000 == 0:
                    log.exception(
                        "%s: callback failed (%d failures so far)", self.name, self.errors
                    )
        with self._lock:
            if not self._items:
                self._idle = True
                return
        self._loop.call_soon(self._drain)  # more arrived meanwhile: next turn

    def stats(self) -> dict[str, int]:
        return {"depth": len(self._items), "accepted": self.accepted, "dropped": self.dropped}
