"""Will messages and the will delay (MQTT 5.0 3.1.2.5, 3.1.3.2).

A will is published when a connection ends without a normal DISCONNECT, after its
Will Delay Interval or when the session ends, whichever is first [MQTT-3.1.3-9]; a
new connection with the same client id before then that resumes the session (Clean
Start 0) cancels it, one with Clean Start 1 ends the session and so publishes it
(``broker_core.connect``).

The pending will of a persisted session is persisted with it (``Store.will_saved``),
its due time as wall-clock time, and deleted once published or cancelled. At start-up
the store's pending wills are armed again (``restore``); one whose moment passed while
the gateway was down is published at once. The will of a connected client is in a
durable store too (``Store.will_held``, from its CONNECT until the connection ends,
every session alike): after a kill it comes back as a pending will, due its delay after
the broker last ran (at once for a session that ended with its connection).

One will per client id: bounded by the sessions, and in bytes (``will_size``: topic,
payload and properties) under ``max_bytes`` (``mqtt.max_will_bytes_total``; 0: no
limit). ``bytes`` counts every will the broker
holds: the pending ones here, and the wills of connected clients, held in their
``Session`` until the connection ends: ``broker_core.connect`` adds a will's size when
it accepts its CONNECT (refusing one that would not fit, 0x97) and
``SessionRegistry.end_connection`` takes it back, before a will that is due goes to
``schedule``. A will that would pass the bound when its connection ends (the bound
lowered since its CONNECT) is published at once instead of after its delay, and
``on_full`` is told. Wills restored at start-up are counted, never refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from broker_core.clock import now as clock_now
from broker_core.context import Context, Origin
from broker_core.mqtt.packets import Will
from broker_core.mqtt.properties import EMPTY

if TYPE_CHECKING:
    from broker_core.store.base import RestoredWill, Store

__all__ = ["WillScheduler", "will_context", "will_size"]


def will_size(will: Will) -> int:
    """What a pending will counts against ``max_bytes``: topic, payload, properties."""
    props = will.properties
    size = len(will.topic) + len(will.payload)
    return size if props is EMPTY else size + props.encoded_length()


def will_context(will: Will, origin: Origin, now: float) -> Context:
    props = will.properties
    if props is not EMPTY and props.will_delay_interval is not None:
        props = replace(props, will_delay_interval=None)
    return Context(
        will.topic, will.payload, will.qos, will.retain, props, origin, received_at=int(now * 1e9)
    )


class _Pending(NamedTuple):
    handle: asyncio.TimerHandle
    will: Will
    origin: Origin
    stored: bool  # written to the store: deleted there once published or cancelled
    size: int  # will_size(will)


class WillScheduler:
    """Pending wills; the Context is built when the will is published, so its Message
    Expiry Interval starts then (MQTT 5.0 3.1.3.2.4)."""

    def __init__(
        self,
        publish: Callable[[Context], None],
        store: Store,
        max_bytes: int = 0,
        on_full: Callable[[], None] | None = None,
    ) -> None:
        self._publish = publish
        self._store = store
        self._pending: dict[str, _Pending] = {}
        self.max_bytes = max_bytes
        self.on_full = on_full
        #: will_size of the pending wills and of the connected clients' wills together
        #: (those are added and taken back by broker_core.connect and end_connection)
        self.bytes = 0

    def room_for(self, will: Will) -> bool:
        """A pending ``will`` would stay within ``max_bytes``."""
        return not self.max_bytes or self.bytes + will_size(will) <= self.max_bytes

    def pending_size(self, client_id: str) -> int:
        """``will_size`` of ``client_id``'s pending will; 0 when it has none."""
        entry = self._pending.get(client_id)
        return 0 if entry is None else entry.size

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(
        self,
        client_id: str,
        will: Will,
        origin: Origin,
        delay_s: float,
        now: float,
        persist: bool = False,
    ) -> None:
        """Publishes ``will`` in ``delay_s`` (at once when 0); ``persist``: its session is
        in a durable store, and so is the will until it is published or cancelled."""
        self.cancel(client_id)
        if delay_s > 0 and not self.room_for(will):
            delay_s = 0  # over max_bytes: published now rather than kept
            if self.on_full is not None:
                self.on_full()
        if delay_s <= 0:
            self._publish(will_context(will, origin, now))
            return
        if persist:
            self._store.will_saved(client_id, now + delay_s, will, origin)
        self._arm(client_id, will, origin, delay_s, persist)

    def restore(self, client_id: str, pending: RestoredWill, now: float) -> None:
        """A will the store held at start-up, due at its wall time (one already past: at
        once, on the next loop turn, when every restored session can receive it)."""
        delay_s = max(pending.due_at - now, 0.0)
        self._arm(client_id, pending.will, pending.origin, delay_s, True)

    def cancel(self, client_id: str) -> None:
        entry = self._pending.pop(client_id, None)
        if entry is not None:
            self.bytes -= entry.size
            entry.handle.cancel()
            if entry.stored:
                self._store.will_deleted(client_id)

    def fire_now(self, client_id: str) -> None:
        """The session ended before the delay: publish the will at once."""
        if client_id in self._pending:
            self._pending[client_id].handle.cancel()
            self._fire(client_id)

    def _arm(
        self, client_id: str, will: Will, origin: Origin, delay_s: float, stored: bool
    ) -> None:
        handle = asyncio.get_running_loop().call_later(delay_s, self._fire, client_id)
        size = will_size(will)
        replaced = self._pending.get(client_id)
        if replaced is not None:
            replaced.handle.cancel()
            self.bytes -= replaced.size
        self._pending[client_id] = _Pending(handle, will, origin, stored, size)
        self.bytes += size

    def _fire(self, client_id: str) -> None:
        entry = self._pending.pop(client_id, None)
        if entry is not None:
            self.bytes -= entry.size
            if entry.stored:
                self._store.will_deleted(client_id)
            self._publish(will_context(entry.will, entry.origin, clock_now()))
