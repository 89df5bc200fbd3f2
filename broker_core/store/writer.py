"""One writer thread per store: batches of statements, one transaction per batch.

The event loop hands over lists of operations (``(sql, params)`` or a barrier
callback); the thread takes every list waiting, runs them in order in one
transaction (consecutive runs of one statement through ``executemany``), commits,
then calls the barriers back on the loop with whether the commit succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Barrier", "Writer"]

log = logging.getLogger(__name__)


class Barrier:
    __slots__ = ("callback",)

    def __init__(self, callback: Callable[[bool], None]) -> None:
        self.callback = callback


Op = tuple[str, tuple[Any, ...]] | Barrier


class Writer:
    def __init__(
        self,
        conn: sqlite3.Connection,
        loop: asyncio.AbstractEventLoop,
        committed: Callable[[int, list[Barrier], bool], None],
    ) -> None:
        self._conn = conn
        self._loop = loop
        self._committed = committed
        self._queue: queue.SimpleQueue[list[Op] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="edgebus-store-writer", daemon=True)
        self._thread.start()

    def submit(self, ops: list[Op]) -> None:
        self._queue.put(ops)

    def close(self, timeout_s: float = 10.0) -> None:
        """Writes what was submitted, then stops the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.error("store writer did not finish within %.0f s", timeout_s)

    def _run(self) -> None:
        conn = self._conn
        stop = False
        while not stop:
            batch = self._queue.get()
            if batch is None:
                break
            batches = [batch]
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batches.append(more)
            barriers: list[Barrier] = []
            count = 0
            ok = True
            try:
                conn.execute("BEGIN")
                for ops in batches:
                    count += len(ops)
                    self._execute(conn, ops, barriers)
                conn.execute("COMMIT")
            except sqlite3.Error:
                ok = False
                log.exception("store write failed; %d operations rolled back", count)
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            try:
                self._loop.call_soon_threadsafe(self._committed, count, barriers, ok)
            except RuntimeError:  # the loop is closed: nobody waits any more
                return
        conn.close()

    @staticmethod
    def _execute(conn: sqlite3.Connection, ops: list[Op], barriers: list[Barrier]) -> None:
        run_sql: str | None = None
        run: list[tuple[Any, ...]] = []
        for op in ops:
            if type(op) is Barrier:
                barriers.append(op)
                continue
            sql, params = op  # type: ignore[misc]
            if sql is not run_sql:
                if run:
                    conn.executemany(run_sql, run)  # type: ignore[arg-type]
                run_sql = sql
                run = []
            run.append(params)
        if run:
            conn.executemany(run_sql, run)  # type: ignore[arg-type]
