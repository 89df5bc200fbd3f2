"""Delayed publish: ``$delayed/<seconds>/<topic>`` is delivered to ``<topic>`` later.

The NanoMQ / EMQX convention. The message is kept (persisted by a durable store) until
it is due, survives restarts, and then goes through the normal publish path. At most
``max_messages`` wait at once, of at most ``max_bytes`` together (each message's topic,
payload and properties, ``message_size``; 0: no limit); past either a PUBLISH is refused
with Quota exceeded (0x97), counted in ``refused`` and handed to ``on_refused``.
Messages restored at start-up are counted, never refused.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from broker_core.context import Context
from broker_core.errors import ProtocolError
from broker_core.mqtt.session_state import message_size
from broker_core.mqtt.topics import validate_topic_name
from broker_core.store.base import Store

__all__ = ["DELAYED_PREFIX", "DelayedPublisher", "parse_delayed_topic"]

DELAYED_PREFIX = "$delayed/"
MAX_DELAY_S = 4_294_967


def parse_delayed_topic(topic: str) -> tuple[int, str] | None:
    """(seconds, topic) of a ``$delayed/`` topic; None when it is not a valid one."""
    rest = topic[len(DELAYED_PREFIX) :]
    seconds, slash, target = rest.partition("/")
    if not slash or not target or not seconds.isdigit() or int(seconds) > MAX_DELAY_S:
        return None
    try:
        validate_topic_name(target)
    except ProtocolError:
        return None
    if target.startswith("$"):
        return None  # not $delayed again, and never $SYS: those belong to the broker
    return int(seconds), target


class DelayedPublisher:
    def __init__(
        self,
        publish: Callable[[Context], None],
        store: Store,
        max_messages: int = 0,
        on_refused: Callable[[Context], None] | None = None,
        max_bytes: int = 0,
    ) -> None:
        self._publish = publish
        self._store = store
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.on_refused = on_refused
        self._pending: dict[int, asyncio.TimerHandle] = {}
        self._sizes: dict[int, int] = {}  # by key: message_size of each pending message
        self._keys = itertools.count(1)
        self.refused = 0
        self.bytes = 0  # message_size of the pending messages together

    def over_limit(self, context: Context) -> str | None:
        """The bound ``context`` would pass (``max_delayed_messages``/``_bytes``), or None."""
        if self.max_messages and len(self._pending) >= self.max_messages:
            return "max_delayed_messages"
        if self.max_bytes and self.bytes + message_size(context) > self.max_bytes:
            return "max_delayed_bytes"
        return None

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, context: Context, delay_s: int, now: float) -> bool:
        """Keeps ``context`` (already addressed to its real topic) for ``delay_s``."""
        if self.over_limit(context) is not None:
            self.refused += 1
            if self.on_refused is not None:
                self.on_refused(context)
            return False
        key = next(self._keys)
        self._store.delayed_added(key, now + delay_s, context)
        self._arm(key, now + delay_s, context, now)
        return True

    def restore(self, items: list[tuple[int, float, Context]], now: float) -> None:
        last = 0
        for key, due_at, context in items:
            self._arm(key, due_at, context, now)
            last = max(last, key)
        self._keys = itertools.count(last + 1)

    def cancel_all(self) -> None:
        for handle in self._pending.values():
            handle.cancel()
        self._pending.clear()
        self._sizes.clear()
        self.bytes = 0

    def _arm(self, key: int, due_at: float, context: Context, now: float) -> None:
        loop = asyncio.get_running_loop()
        self._pending[key] = loop.call_later(max(due_at - now, 0), self._fire, key, context)
        size = self._sizes[key] = message_size(context)
        self.bytes += size

    def _fire(self, key: int, context: Context) -> None:
        del self._pending[key]
        self.bytes -= self._sizes.pop(key)
        self._store.delayed_removed(key)
        self._publish(context)
