"""``LogWriter``: the stream log's writer thread, and the durable participant it is.

The stream log sees every message the broker routes, so its per-message cost is the
cost of the log on the broker: it is kept to one C call. The hub hook is the
``append`` of a plain list (``items``), no Python frame per message; the rest is done
per batch:

- every ``linger_s`` while messages arrive (``idle_s`` while none do), or at the end of
  the loop turn in which a barrier was asked for, the loop takes the list and
  ``prepare(items, backlogged)`` picks what to record (topics, origins, and QoS 0 ones
  dropped when the writer is behind) and encodes it: ``(batches, records)``;
- the thread writes what it was handed (``write(batches)``: append and fsync, calls
  that release the GIL), then, back on the loop, calls the barriers' callbacks.

Encoding on the loop rather than on the thread: the same work, but no second thread
wanting the GIL while the broker works (on a busy machine, the contention cost more
than the encoding itself).

``pending`` (messages taken in, not yet written) and ``barrier(callback)`` make it a
durable participant (``broker_core.acks``): a QoS 1 or 2 publisher's acknowledgement
waits for the barrier, which flushes at the end of the current loop turn, so QoS 1
traffic does not wait for the linger. ``backlogged``: more than ``max_pending`` taken in
and not written.

Like ``gateway.components.BatchWriter``, with two differences the hot path needs: the
append is a list's own, and batches are handed over by time (``linger_s``), not every
loop turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from broker_core.context import Context

__all__ = ["LogWriter"]

log = logging.getLogger(__name__)

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
    ) -> None:
        self._write = write
        self._prepare = prepare
        self.name = name
        self.max_pending = max_pending
        self.linger_s = linger_s
        self.idle_s = idle_s
        self.items: list[Context] = []
        self.append = self.items.append  # the hook: a C call per message
        self.written = 0  # messages recorded
        self.failed = 0  # messages whose write failed
        self._loop = asyncio.get_running_loop()
        self._callbacks: list[Done] = []
        self._flush_scheduled = False
        self._in_thread = 0  # taken in, handed to the thread, not written yet
        self._queue: queue.SimpleQueue[tuple[list[Any], int, int, list[Done]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name=f"edgebus-{name}", daemon=True)
        self._thread.start()
        self._closed = False

    @property
    def pending(self) -> int:
        return self._in_thread + len(self.items)

    def backlogged(self) -> bool:
        return self.pending > self.max_pending

    def barrier(self, callback: Done) -> None:
        """``callback(ok)`` on the loop once everything taken in so far is written."""
        if not self.pending:
            callback(True)
            return
        self._callbacks.append(callback)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Hands what was taken in to the thread; call on the loop."""
        self._flush_scheduled = False
        items = self.items
        callbacks = self._callbacks
        if not items and not callbacks:
            return
        taken = items.copy()
        items.clear()  # the same list: the hook appends to it
        self._callbacks = []
        backlogged = self._in_thread + len(taken) > self.max_pending
        batches, records = self._prepare(taken, backlogged) if taken else ([], 0)
        self._in_thread += len(taken)
        self._queue.put((batches, len(taken), records, callbacks))

    async def run(self, stopping: asyncio.Event) -> None:
        """Hands batches over every ``linger_s`` (``idle_s`` when nothing came) until
        ``stopping`` is set."""
        delay = self.idle_s
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stopping.wait()
            delay = self.linger_s if self.items else self.idle_s
            self.flush()

    async def close(self, timeout_s: float = 10.0) -> None:
        """Writes what was taken in, then stops the thread (waits up to ``timeout_s``)."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join, timeout_s)
        if self._thread.is_alive():
            log.error("%s: writer did not finish within %.0f s", self.name, timeout_s)
        await asyncio.sleep(0)  # the last barriers' callbacks run

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            entries = [first]
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                entries.append(more)
            batches: list[Any] = []
            taken = records = 0
            callbacks: list[Done] = []
            for prepared, count, recorded, done in entries:
                batches += prepared
                taken += count
                records += recorded
                callbacks += done
            ok = True
            if batches:
                try:
                    self._write(batches)
                except Exception:
                    ok = False
                    log.exception("%s: writing %d messages failed", self.name, records)
            try:
                self._loop.call_soon_threadsafe(self._done, taken, records, callbacks, ok)
            except RuntimeError:  # the loop is closed: nobody waits any more
                return

    def _done(self, taken: int, count: int, callbacks: list[Done], ok: bool) -> None:
        self._in_thread -= taken
        if ok:
            self.written += count
        else:
            self.failed += count
        for callback in callbacks:
            callback(ok)
