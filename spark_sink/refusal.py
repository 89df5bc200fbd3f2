"""``Refusal``: what a stream log that no run could open does with what it should record.

The log is a durable participant of every acknowledgement: a PUBACK / PUBREC promises
the message is in it. When no run of the ``stream`` component could open the log (its
directory cannot be created or written, a segment is missing from the middle), there
is nothing to record into; acknowledging anyway would break that promise silently. So,
while the component backs off, a ``Refusal`` hooks every message as the log would and
takes part in the acknowledgements as a store whose every write fails: a QoS 1 or 2
message of the log's ``topics`` (and ``origins``) is not acknowledged, and its MQTT
publisher is disconnected (``0x80``) to send it again, as when a write of an open log
fails. Other topics, and QoS 0 messages, go on as if no log were configured.

It is kept between runs (``Host.keep``): the next run that opens the log hooks it and
closes the refusal in the same loop turn. The supervisor closes it when no run follows
(the component is paused, disabled or removed, or the gateway stops): a paused log
refuses nothing.

As a durable participant (``broker_core.acks``): ``pending`` is the number of messages
refused since the last barrier; ``barrier(callback)`` calls back False at the end of
the loop turn when some were, True at once when none were. A message of another topic
whose acknowledgement is asked for in the same turn, after a refused one that asked
for none (a component's publish), waits on that barrier and fails with it, as it would
behind a failed write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from broker_core.context import Context
from gateway.config.models.stream import StreamConfig
from gateway.hub import HubClient, HubHook
from spark_sink.fields import TopicMatcher

__all__ = ["Refusal"]

Done = Callable[[bool], None]


class Refusal:
    def __init__(self, config: StreamConfig) -> None:
        self.pending = 0
        self.refused = 0  # QoS 1 and 2 messages of the log's topics, not acknowledged
        self.hook: HubHook | None = None
        self._loop = asyncio.get_running_loop()
        self._callbacks: list[Done] = []
        self._scheduled = False
        self._matches = TopicMatcher(*config.topics)
        self._origins = frozenset(config.origins or ())

    def select(self, config: StreamConfig) -> None:
        """Refuses what ``config`` would record from now on (a run with a new config
        could not open the log either)."""
        self._matches = TopicMatcher(*config.topics)
        self._origins = frozenset(config.origins or ())

    def hook_into(self, hub: HubClient) -> None:
        """Hooks every message (``hub.hook``), this refusal their durable participant."""
        self.hook = hub.hook(self.take, durable=self)

    def take(self, context: Context) -> None:
        """The hook: a QoS 1 or 2 message the log would record is refused."""
        if not context.qos or not self._matches(context.topic):
            return
        if self._origins and context.origin.protocol not in self._origins:
            return
        self.pending += 1
        self.refused += 1
        self._schedule()

    def barrier(self, callback: Done) -> None:
        """``callback(False)`` at the end of the loop turn when messages were refused since
        the last barrier; ``callback(True)`` at once when none were."""
        if not self.pending:
            callback(True)
            return
        self.pending = 0  # those are answered: a later message does not wait for them
        self._callbacks.append(callback)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._settle)

    def _settle(self) -> None:
        self._scheduled = False
        self.pending = 0
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(False)

    def close(self) -> None:
        """Unhooks; what was refused and not answered yet is answered (refused)."""
        if self.hook is not None:
            self.hook.close()
        self._settle()
