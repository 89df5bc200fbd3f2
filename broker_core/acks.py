"""Acknowledging a message once it is durable, in the order the publisher sent it.

A PUBACK / PUBREC (or a component's ``on_safe``) promises that the message survives a
crash. What must be durable first is whatever the message changed: the broker's store
(queued deliveries, retained messages) and every **durable participant**, an object a
durable tap appends to during routing (a bridge's queue, the stream log). Each has the
``Store`` contract of ``broker_core/store/base.py``::

    pending: int                                # writes handed over, not yet committed
    barrier(callback: Callable[[bool], None])   # called back once all of them are

``Acknowledgements.after(owner, callback)`` calls ``callback(ok)`` once every
participant with pending writes has committed them (``ok`` is False when one failed).
Callbacks of one owner (a session, a hub client) run in the order they were asked for,
even when the barriers complete out of order [MQTT-4.6.0-2].

A participant may also have ``batch: int``, the number of the batch its next write goes
into, with the promise that barriers asked while it reads the same number are called back
together, after the commit of that batch. An owner's callback waiting on such a
participant alone then joins the owner's previous one when that waits on the same batch
(one barrier for the messages of a publisher that one commit makes durable).

The broker's fast path checks ``store.pending`` and ``participants`` itself: with nothing
pending and no durable participant registered, it acknowledges at once and nothing here
runs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Protocol

__all__ = ["Acknowledgements", "Durable"]


class Durable(Protocol):
    """A store that takes part in acknowledgements (see the module docstring)."""

    @property
    def pending(self) -> int: ...

    def barrier(self, callback: Callable[[bool], None]) -> None: ...


class _Held:
    __slots__ = ("batch", "callback", "more", "ok", "remaining")

    def __init__(self, callback: Callable[[bool], None], remaining: int) -> None:
        self.callback = callback
        self.remaining = remaining
        self.ok = True
        self.more: list[Callable[[bool], None]] | None = None  # joined callbacks, in order
        self.batch: tuple[Durable, int] | None = None  # the one participant's batch


class Acknowledgements:
    """The broker's store plus the durable participants of the taps, and the held
    acknowledgements of each owner, in order."""

    def __init__(self, store: Durable) -> None:
        self.store = store
        self.participants: dict[Durable, int] = {}  # participant -> taps using it
        self._held: dict[object, deque[_Held]] = {}

    def add(self, participant: Durable) -> None:
        """Registers a durable participant (once per tap using it)."""
        self.participants[participant] = self.participants.get(participant, 0) + 1

    def remove(self, participant: Durable) -> None:
        count = self.participants.get(participant, 0) - 1
        if count > 0:
            self.participants[participant] = count
        else:
            self.participants.pop(participant, None)

    def idle(self) -> bool:
        """True when an acknowledgement needs to wait for nothing (besides its owner's
        earlier ones): no store write pending, no participant with pending writes."""
        if self.store.pending:
            return False
        participants = self.participants
        if not participants:
            return True
        return not any(participant.pending for participant in participants)

    def held(self, owner: object) -> int:
        """How many of ``owner``'s callbacks are still waiting."""
        queue = self._held.get(owner)
        if queue is None:
            return 0
        return sum(1 if held.more is None else 1 + len(held.more) for held in queue)

    def after(
        self, owner: object, callback: Callable[[bool], None], also: Durable | None = None
    ) -> None:
        """Calls ``callback(ok)`` once everything handed over so far is durable, after
        ``owner``'s earlier callbacks; with ``also``, once that is too (a write that must
        wait for the participants' commits before it is handed over: the broker's record
        of a QoS 2 packet id received)."""
        waiting = [p for p in self.participants if p.pending]
        if self.store.pending:
            waiting.append(self.store)
        if also is not None:
            waiting.append(also)
        queue = self._held.get(owner)
        if not waiting and queue is None:
            callback(True)
            return
        batch: tuple[Durable, int] | None = None
        if len(waiting) == 1:
            participant = waiting[0]
            number = getattr(participant, "batch", None)
            if number is not None:
                batch = (participant, number)
                if queue:
                    last = queue[-1]
                    if last.batch == batch and last.remaining == 1:
                        if last.more is None:
                            last.more = [callback]
                        else:
                            last.more.append(callback)
                        return
        held = _Held(callback, len(waiting))
        held.batch = batch
        if queue is None:
            queue = self._held[owner] = deque()
        queue.append(held)
        if not waiting:
            self._release(owner)
            return
        for participant in waiting:
            participant.barrier(partial(self._committed, owner, held))

    def _committed(self, owner: object, held: _Held, ok: bool) -> None:
        held.remaining -= 1
        if not ok:
            held.ok = False
        if held.remaining <= 0:
            self._release(owner)

    def _release(self, owner: object) -> None:
        queue = self._held.get(owner)
        while queue and queue[0].remaining <= 0:
            held = queue.popleft()
            if not queue:
                del self._held[owner]
            held.callback(held.ok)
            if held.more is not None:
                for callback in held.more:
                    callback(held.ok)
            queue = self._held.get(owner)
