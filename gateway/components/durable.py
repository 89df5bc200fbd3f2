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
from collections.abc import Callable
from typing import Generic, TypeVar

from broker_core.store.writer import Barrier, Writer

__all__ = ["BatchWriter"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class BatchWriter(Generic[T]):
    """Items appended on the loop, written in batches by one thread; see the module.

    The thread is the broker store's ``Writer`` (``broker_core.store.writer``) with
    ``write`` as its write function.
    """

    def __init__(
        self, write: Callable[[list[T]], None], name: str, max_pending: int = 100_000
    ) -> None:
        self.name = name
        self.max_pending = max_pending
        self.written = 0
        self.failed = 0
        self._loop = asyncio.get_running_loop()
        self._ops: list[T | Barrier] = []
        self._flush_scheduled = False
        self._in_thread = 0  # items handed to the thread, not yet written
        self._writer: Writer[T] = Writer(write, self._loop, self._written, name)
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
        self._ops.append(Barrier(callback))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def close(self, timeout_s: float = 10.0) -> None:
        """Writes what was appended, then stops the thread (waits up to ``timeout_s``)."""
        if self._closed:
            return
        self._closed = True
        self._flush()
        self._writer.close(timeout_s)

    def _flush(self) -> None:
        self._flush_scheduled = False
        ops = self._ops
        if not ops:
            return
        self._ops = []
        self._in_thread += sum(1 for op in ops if type(op) is not Barrier)
        self._writer.submit(ops)

    def _written(self, count: int, barriers: list[Barrier], ok: bool) -> None:
        items = count - len(barriers)
        self._in_thread -= items
        if ok:
            self.written += items
        else:
            self.failed += items
        for barrier in barriers:
            barrier.callback(ok)
