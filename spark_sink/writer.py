"""``LogWriter``: the stream log's durable participant, a front for a ``BatchWriter``.

The stream log sees every message the broker routes, so its per-message cost is the
cost of the log on the broker. The hub hook is ``append``: the Context goes on a plain
list (``items``); the rest is done per batch, on the loop:

- when ``batch_records`` messages are taken in (in the hook's call), every ``linger_s``
  while messages arrive (``idle_s`` while none do), and at the end of the loop turn in
  which a barrier was asked for, the loop takes the list and ``prepare(items,
  backlogged)`` picks what to record (topics, origins, and QoS 0 ones dropped when the
  writer is behind) and encodes it: ``(batches, records)``;
- that goes, as one item, to a ``gateway.components.BatchWriter``, whose thread writes
  what a loop turn handed over in one call (``write(batches)``: one ``writev``, synced
  as it is written under ``fsync: always``). Each call of the thread that releases the
  GIL makes it take the GIL back from the busy loop (a forced switch after 5 ms), so
  the thread makes as few as it can (``StreamLog._write``).

Why at most ``batch_records`` (512) Contexts wait: a busy loop turn runs thousands of
messages (a socket read holds many PUBLISH packets), and Contexts held that long
outlived the cyclic GC's young generation: promoted to the old ones, they made the
collector traverse the whole heap again and again, a cost larger than the log's own
work. A Context held for fewer than about 700 allocations (the GC's first threshold)
is freed by its reference count before a collection sees it; so nothing here holds
one after its batch is encoded (the bytes handed to the thread are not tracked).

Encoding on the loop rather than on the thread: the same work, but no second thread
wanting the GIL while the broker works (on a busy 2-core machine the contention cost
more than the encoding itself).

``pending`` (messages taken in, not yet written) and ``barrier(callback)`` make it a
durable participant (``broker_core.acks``): a QoS 1 or 2 publisher's acknowledgement
waits for the barrier, which flushes at the end of the current loop turn, so QoS 1
traffic does not wait for the linger. ``backlogged()``: more than ``max_pending`` taken
in and not written.

Between two runs of the sink (``run`` has returned, the next has not started) the
writer goes on taking messages in: ``keep_flushing()`` hands batches over on a timer
instead, until ``run`` starts again or ``close``. ``prepare`` and ``max_pending`` may
change meanwhile (the next run's selection and ``queue_size``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from broker_core.context import Context
from gateway.components import BatchWriter

__all__ = ["LogWriter"]

#: ``prepare(items, backlogged) -> (batches, records)``: what to hand to the thread, and
#: how many messages those batches record.
Prepare = Callable[[list[Context], bool], tuple[list[Any], int]]
Done = Callable[[bool], None]


class LogWriter:
    def __init__(
        self,
        write: Callable[[list[Any]], None],
        prepare: Prepare,
        name: str,
        max_pending: int = 100_000,
        linger_s: float = 0.01,
        idle_s: float = 0.1,
        batch_records: int = 512,
    ) -> None:
        self.prepare = prepare
        self.max_pending = max_pending
        self.linger_s = linger_s
        self.idle_s = idle_s
        self.batch_records = batch_records
        self.items: list[Context] = []
        self.written = 0  # messages recorded
        self.failed = 0  # messages whose write failed
        self._loop = asyncio.get_running_loop()
        self._callbacks: list[Done] = []
        self._flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None  # keep_flushing's, between runs
        self._in_thread = 0  # taken in, handed to the thread, not written yet
        self._thread: BatchWriter[list[Any]] = BatchWriter(
            lambda prepared: write([batch for batches in prepared for batch in batches]), name
        )

    @property
    def pending(self) -> int:
        return self._in_thread + len(self.items)

    def backlogged(self) -> bool:
        return self.pending > self.max_pending

    def append(self, context: Context) -> None:
        """Takes ``context`` in (the hook); hands a batch over every ``batch_records``."""
        items = self.items
        items.append(context)
        if len(items) >= self.batch_records:
            self.flush()

    def barrier(self, callback: Done) -> None:
        """``callback(ok)`` on the loop once everything taken in so far is written."""
        if not self.items and not self._callbacks:
            self._thread.barrier(callback)
            return
        self._callbacks.append(callback)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hands what was taken in to the thread; call on the loop."""
        self._flush_scheduled = False
        if self.items:
            taken, self.items = self.items, []
            count = len(taken)
            backlogged = self._in_thread + count > self.max_pending
            batches, records = self.prepare(taken, backlogged)
            del taken  # nothing holds the Contexts any longer (see the module docstring)
            self._in_thread += count
            self._thread.append(batches)
            self._thread.barrier(lambda ok: self._written(count, records, ok))
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self._thread.barrier(callback)

    def _written(self, taken: int, records: int, ok: bool) -> None:
        self._in_thread -= taken
        if ok:
            self.written += records
        else:
            self.failed += records

    async def run(self, stopping: asyncio.Event) -> None:
        """Hands batches over every ``linger_s`` (``idle_s`` when nothing came)
        (``keep_flushing``) and once more when ``stopping`` is set; the timer goes on
        after, until the next ``run`` or ``close``."""
        self.keep_flushing()
        await stopping.wait()
        self.flush()

    def keep_flushing(self) -> None:
        """Hands batches over as ``run`` does, on a timer of the loop, until ``run``
        starts again or ``close``: between two runs, when no ``run`` does it."""
        self._stop_timer()
        delay = self.linger_s if self.items else self.idle_s
        self._timer = self._loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.flush()
        self.keep_flushing()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def shut(self) -> None:
        """Writes what was taken in, then stops the thread (on the loop: the last write
        holds it up for as long as it takes). The last barriers' callbacks run on the
        loop afterwards."""
        self._stop_timer()
        self.flush()
        self._thread.close()

    async def close(self) -> None:
        """``shut``, then lets the last barriers' callbacks run."""
        self.shut()
        await asyncio.sleep(0)
