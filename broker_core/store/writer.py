"""One writer thread: batches of operations, written together, barriers called back.

The event loop hands over lists of operations (``submit``): items for ``write`` and
``Barrier`` callbacks. The thread takes every list waiting, calls ``write(items)`` once
with all their items in order (the SQLite store: one transaction, ``executemany`` over
runs of one statement; a component's ``BatchWriter``: its own store), then calls
``committed(count, barriers, ok)`` on the loop: ``count`` operations (barriers
included) are done, ``ok`` is False when ``write`` raised. ``finish`` runs on the thread
once it stops (closing a connection the thread used). ``idle``, when given, runs on the
thread once the writer has had nothing to write for ``idle_s`` seconds after a write (the
SQLite store checkpoints its log there): at most once per quiet spell, so at most once
every ``idle_s`` seconds. Items ``quiet`` says are quiet (the store's ``last_alive``
stamp, written every few seconds while clients are connected) do not end a quiet spell.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Barrier", "Writer"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class Barrier:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[bool], None]) -> None:
        self.callback = callback


class Writer(Generic[T]):
    def __init__(
        self,
        write: Callable[[list[T]], None],
        loop: asyncio.AbstractEventLoop,
        committed: Callable[[int, list[Barrier], bool], None],
        name: str = "store",
        finish: Callable[[], None] | None = None,
        idle: Callable[[], None] | None = None,
        idle_s: float = 5.0,
        quiet: Callable[[T], bool] | None = None,
    ) -> None:
        self.name = name
        self._write = write
        self._loop = loop
        self._committed = committed
        self._finish = finish
        self._idle = idle
        self._idle_s = idle_s
        self._quiet = quiet
        self._queue: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run, name=f"edgebus-{name}-writer", daemon=True
        )
        self._thread.start()

    def submit(self, ops: list[T | Barrier]) -> None:
        self._queue.put(ops)

    def close(self, timeout_s: float = 10.0) -> None:
        """Writes what was submitted, then stops the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("%s: writer did not finish within %.0f s", self.name, timeout_s)

    def _run(self) -> None:
        stop = False
        wrote = False  # since the last idle call
        quiet_from = 0.0  # the end of the last write that was not quiet
        while not stop:
            if wrote and self._idle is not None:
                wait = quiet_from + self._idle_s - time.monotonic()
                try:
                    if wait <= 0:
                        raise queue.Empty
                    first = self._queue.get(timeout=wait)
                except queue.Empty:
                    wrote = False
                    self._idle()
                    continue
            else:
                first = self._queue.get()
            if first is None:
                break
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
            barriers: list[Barrier] = []
            for ops in lists:
                for op in ops:
                    if type(op) is Barrier:
                        barriers.append(op)
                    else:
                        items.append(op)
            ok = True
            if items:
                quiet = self._quiet
                loud = quiet is None or not all(map(quiet, items))
                try:
                    self._write(items)
                except Exception:
                    ok = False
                    log.exception("%s: writing %d operations failed", self.name, len(items))
                if loud:
                    wrote = True
                    quiet_from = time.monotonic()
            try:
                self._loop.call_soon_threadsafe(
                    self._committed, len(items) + len(barriers), barriers, ok
                )
            except RuntimeError:  # the loop is closed: nobody waits any more
                return
        if self._finish is not None:
            self._finish()
