"""Store writes held back until other stores have committed (``SqliteStore.incoming_added_after``).

A persistent session's QoS 2 packet id received ("awaiting PUBREL") is the broker's
promise that a resend of the message is a duplicate. Exactly once across a ``kill -9``
needs that record and what the message changed in the store (its queue entries for
persistent subscribers, its retained copy) in **one** commit: the record before them
loses the message when the kill comes between the two commits (the resend is taken for a
duplicate), the record after them delivers it twice (the resend is routed again, and the
restarted broker has the first copy queued too). Both are written in the same event-loop
turn, so they are in one list of operations, and one list is one commit (``Writer``).

The durable participants the message went to (the stream log, a bridge queue) commit in
stores of their own. Their commit must come first: the record committed before the log's
would leave the message missing from the log and its resend taken for a duplicate. So the
turn's list waits until each of them has committed what it holds now, and then goes to
the writer; a participant that failed leaves the record out (the message is refused, and
its resend offered again). The lists of later turns wait behind it, so the store's
operations keep their order. With no record held, nothing waits and nothing here runs
but two checks a turn.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from broker_core.acks import Durable

__all__ = ["HeldWrites"]


class _Record:
    """A held record, and the durable participant (``broker_core.acks``) its PUBREC waits
    on: called back once its list went to the writer (True) or it was left out (False)."""

    __slots__ = ("_callback", "done", "failed", "op")

    pending = 1

    def __init__(self, op: Any) -> None:
        self.op = op
        self.failed = False
        self.done = False
        self._callback: Callable[[bool], None] | None = None

    def barrier(self, callback: Callable[[bool], None]) -> None:
        if self.done:
            callback(not self.failed)
        else:
            self._callback = callback

    def finish(self) -> None:
        self.done = True
        callback = self._callback
        if callback is not None:
            self._callback = None
            callback(not self.failed)


class _Held:
    """One loop turn's operations and the records in them that wait for participants."""

    __slots__ = ("ops", "records", "waiting")

    def __init__(self) -> None:
        self.ops: list[Any] | None = None  # set when the turn ends (``flush``)
        self.records: list[_Record] = []
        self.waiting = 0  # participant commits not yet called back


class HeldWrites:
    """The store's lists of operations that wait for durable participants, in order."""

    __slots__ = ("_dropped", "_submit", "queue", "turn")

    def __init__(self, submit: Callable[[list[Any]], None], dropped: Callable[[int], None]) -> None:
        self._submit = submit  # hands a list to the writer
        self._dropped = dropped  # operations left out of a list (the store's pending count)
        self.queue: deque[_Held] = deque()  # ended turns that wait, oldest first
        self.turn: _Held | None = None  # the current turn, when it holds a record

    def hold(self, op: Any, participants: Sequence[Durable]) -> Durable:
        """``op``, already among the current turn's operations, waits for ``participants``
        to commit what they hold now, and the whole turn with it; left out if one fails.
        Returns what the acknowledgement waits on besides the store (``_Record``)."""
        turn = self.turn
        if turn is None:
            turn = self.turn = _Held()
        record = _Record(op)
        turn.records.append(record)
        turn.waiting += len(participants)
        for participant in participants:
            participant.barrier(partial(self._committed, turn, record))
        return record

    def flush(self, ops: list[Any]) -> bool:
        """The current turn ended with ``ops``: True when they wait (a record of theirs, or
        an earlier list, does), else False (the caller submits them)."""
        turn = self.turn
        if turn is None:
            if not self.queue:
                return False
            turn = _Held()
        self.turn = None
        turn.ops = ops
        self.queue.append(turn)
        self._release()
        return True

    def release_all(self) -> None:
        """Hands over every list still waiting, in order (the store is closing)."""
        for held in self.queue:
            held.waiting = 0
        self._release()

    def _committed(self, turn: _Held, record: _Record, ok: bool) -> None:
        if not ok:
            record.failed = True
        turn.waiting -= 1
        if turn.waiting <= 0 and self.queue and self.queue[0] is turn:
            self._release()

    def _release(self) -> None:
        queue = self.queue
        while queue and queue[0].waiting <= 0:
            held = queue.popleft()
            ops = held.ops
            assert ops is not None
            failed = [record.op for record in held.records if record.failed]
            if failed:
                kept = [op for op in ops if not any(op is record for record in failed)]
                self._dropped(len(ops) - len(kept))
                ops = kept
            if ops:
                self._submit(ops)
            for record in held.records:
                record.finish()
