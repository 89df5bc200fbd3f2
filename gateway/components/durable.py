"""``BatchWriter``: a component's own durable store, written on its own thread.

A durable tap's callback runs on the event loop, during routing, and must not block:
it ``append``-s the message, and the writer thread writes each loop turn's items as one
batch (``write(items)``: insert into SQLite and commit, append to a segment file and
fsync, ...). The writer is a durable participant of the broker's acknowledgements
(``broker_core.acks``): ``pending`` counts items appended and not yet written, and
``barrier(callback)`` calls back on the loop once everything appended before it is
written, with False when ``write`` raised. Pass it as ``hub.tap(..., durable=writer)``
and a publisher's PUBACK waits for it.

Backlog: past ``max_pending`` items ``backlogged()`` is true; a component may then slow
its producers (nothing is dropped here).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["BatchWriter"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Barrier:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[bool], None]) -> None:
        self.callback = callback


class BatchWriter(Generic[T]):
    """Items appended on the loop, written in batches by one thread; see the module."""

    def __init__(
        self, write: Callable[[list[T]], None], name: str, max_pending: int = 100_000
    ) -> None:
        self._write = write
        self.name = name
        self.max_pending = max_pending
        self.written = 0
        self.failed = 0
        self._loop = asyncio.get_running_loop()
        self._ops: list[T | _Barrier] = []
        self._flush_scheduled = False
        self._in_thread = 0  # items handed to the thread, not yet written
        self._queue: queue.SimpleQueue[list[T | _Barrier] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"edgebus-{name}", daemon=True)
        self._thread.start()
        self._closed = False

    @property
    def pending(self) -> int:
        return self._in_thread + len(self._ops)

    def backlogged(self) -> bool:
        return self.pending > self.max_pending

    def append(self, item: T) -> None:
        """Queues ``item`` for the next batch; call on the event loop."""
        if self._closed:
            raise RuntimeError(f"{self.name}: closed")
        self._ops.append(item)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def barrier(self, callback: Callable[[bool], None]) -> None:
        """``callback(ok)`` once everything appended so far is written."""
        if not self.pending:
            callback(True)
            return
        self._ops.append(_Barrier(callback))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def close(self, timeout_s: float = 10.0) -> None:
        """Writes what was appended, then stops the thread (waits up to ``timeout_s``)."""
        if self._closed:
            return
        self._closed = True
        self._flush()
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("%s: writer did not finish within %.0f s", self.name, timeout_s)

    def _flush(self) -> None:
        self._flush_scheduled = False
        ops = self._ops
        if not ops:
            return
        self._ops = []
        self._in_thread += sum(1 for op in ops if type(op) is not _Barrier)
        self._queue.put(ops)

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            lists = [first]
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                lists.append(more)
            items: list[T] = []
            barriers: list[_Barrier] = []
            for ops in lists:
                for op in ops:
                    if type(op) is _Barrier:
                        barriers.append(op)
                    else:
                        items.append(op)  # type: ignore[arg-type]
            ok = True
            if items:
                try:
                    self._write(items)
                except Exception:
                    ok = False
                    log.exception("%s: writing %d items failed", self.name, len(items))
            try:
                self._loop.call_soon_threadsafe(self._written, len(items), barriers, ok)
            except RuntimeError:  # the loop is closed: nobody waits any more
                return

    def _written(self, count: int, barriers: list[_Barrier], ok: bool) -> None:
        self._in_thread -= count
        if ok:
            self.written += count
        else:
            self.failed += count
        for barrier in barriers:
            barrier.callback(ok)
