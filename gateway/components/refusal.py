"""``Refusal``: what a durable component that could not open its store does with the
messages it should have stored.

A durable tap or hook is a participant of every acknowledgement of its messages: a
PUBACK / PUBREC promises the message is in the component's store (the stream log, a
bridge's queue). When no run of the component could open that store (a directory that
cannot be written, a segment missing from the middle of the log, a bridge queue that is
damaged or was lost), there is nothing to store into; acknowledging anyway would break
that promise silently. So, while the component backs off, a ``Refusal`` takes its place
and takes part in the acknowledgements as a store whose every write fails: a QoS 1 or 2
message it ``matches`` (and, when ``origins`` is given, from one of those protocols) is
not acknowledged, and its MQTT publisher is disconnected (``0x80``) to send it again, as
when a write of an open store fails. Other messages, and QoS 0 ones, go on as if the
component were not configured.

The message is refused whole, before anything takes it: the broker asks every open
refusal (``Broker.refusals``, ``refuses``) before the retained store and routing, so a
refused message reaches no subscriber, no other component and no log, once per resend,
and a QoS 2 one's packet id is not recorded as received (its resend is refused again
until the store opens, then delivered once). A hub client's publish gets ``0x80``.

The caller decides what it sees: ``hook_into(hub)`` hooks every message (the stream
log), ``tap_into(hub, filters)`` taps the filters the component would tap (a bridge's
``forwards``, under the bridge's ACL identity); ``matches(topic)`` then says which of
them the store would have taken at QoS 1 or 2. It is kept between runs (``Host.keep``):
the next run that opens its store taps or hooks the broker and closes the refusal in the
same loop turn. The supervisor closes it when no run follows (the component is paused,
disabled or removed, or the gateway stops): a paused component refuses nothing.

As a durable participant (``broker_core.acks``): ``pending`` is the number of messages
refused since the last barrier; ``barrier(callback)`` calls back False at the end of
the loop turn when some were, True at once when none were. A message of another topic
whose acknowledgement is asked for in the same turn, after a refused one that asked
for none (a component's publish), waits on that barrier and fails with it, as it would
behind a failed write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from broker_core.broker import Refuser
from broker_core.context import Context
from broker_core.tap import Tap
from gateway.hub import HubClient, HubHook

__all__ = ["Refusal"]

Done = Callable[[bool], None]


class Refusal:
    def __init__(self, matches: Callable[[str], bool], origins: Iterable[str] = ()) -> None:
        self.pending = 0
        self.refused = 0  # QoS 1 and 2 messages of the store's topics, not acknowledged
        self.hook: HubHook | Tap | None = None
        self._loop = asyncio.get_running_loop()
        self._callbacks: list[Done] = []
        self._scheduled = False
        self._matches = matches
        self._origins = frozenset(origins)
        self._refusals: list[Refuser] | None = None  # the broker's, while hooked

    def select(self, matches: Callable[[str], bool], origins: Iterable[str] = ()) -> None:
        """Refuses what ``matches`` (and ``origins``) select from now on (a run with a new
        config could not open the store either)."""
        self._matches = matches
        self._origins = frozenset(origins)

    def hook_into(self, hub: HubClient) -> None:
        """Hooks every message (``hub.hook``), this refusal their durable participant."""
        self.hook = hub.hook(self.take, durable=self)
        self._ask_before_routing(hub)

    def tap_into(self, hub: HubClient, filters: Iterable[str]) -> None:
        """Taps ``filters`` (``hub.tap``), this refusal their durable participant."""
        self.hook = hub.tap(*filters, callback=self.take, durable=self)
        self._ask_before_routing(hub)

    def _ask_before_routing(self, hub: HubClient) -> None:
        refusals = self._refusals = hub.hub.broker.refusals
        if self not in refusals:
            refusals.append(self)

    def refuses(self, context: Context) -> bool:
        """Before routing (``Broker.refusals``): whether ``context`` is one ``take``
        would refuse; counted in ``refused`` when it is (the broker then routes it to
        no one)."""
        if not context.qos or not self._matches(context.topic):
            return False
        if self._origins and context.origin.protocol not in self._origins:
            return False
        hook = self.hook
        if isinstance(hook, Tap) and hook.no_local:
            origin, own = context.origin, hook.origin
            if origin is own or (origin.name == own.name and origin.protocol == own.protocol):
                return False  # the tap would not see it (its own messages)
        self.refused += 1
        return True

    def take(self, context: Context) -> None:
        """The hook: a QoS 1 or 2 message the store would take is refused."""
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
        """Unhooks (or untaps); what was refused and not answered yet is answered
        (refused)."""
        refusals = self._refusals
        if refusals is not None:
            self._refusals = None
            if self in refusals:
                refusals.remove(self)
        if self.hook is not None:
            self.hook.close()
        self._settle()
