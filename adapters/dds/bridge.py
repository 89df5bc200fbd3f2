"""``DdsBridge``: routes between a ``DdsBus`` and the hub; the part of the ``dds`` and
``ros2`` adapters that is the same. Imports no cyclonedds (the bus does that).

- DDS -> MQTT: a reader per ``OutPlan`` topic (at start, or once a topic matching a
  pattern or an ``auto`` type is discovered); its samples come through the host's inbox
  (batches of up to ``TAKE_BATCH``, ``block`` policy: a full inbox leaves samples in the
  DDS reader, so a reliable writer slows down instead of losing them) and are published
  on the loop.
- MQTT -> DDS: a hub subscription per ``InPlan``; a writer per DDS topic, created on
  first use (``max_writers`` at most); a write that finds the writer's history full is
  retried until the DDS readers catch up. A ``transient_local`` plan writes the MQTT
  retained messages on its filter first in every run (a tap at start), also when the
  subscription is the last run's, taken over: each run's writer is new.
- Remote endpoints of our topics whose type differs from ours in having a key, which DDS
  never matches and does not report (``adapters/dds/matching.py``), are logged, counted
  (``key_mismatch``) and make the adapter ``degraded`` until they are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from adapters.dds.codec import InPlan, OutPlan, OutRoute, TypeRegistry, TypeSupport
from adapters.dds.config import AUTO
from adapters.dds.matching import KeyWatch, Mismatch
from adapters.failures import Unexpected
from broker_core.context import Context
from broker_core.errors import AdapterError
from gateway.components import BLOCK, Host
from gateway.hub import HubClient, HubSubscription
from gateway.mapping import MappingError

if TYPE_CHECKING:
    from adapters.dds.adapter import DdsBus, Writer

__all__ = ["TAKE_BATCH", "Batch", "DdsBridge"]

log = logging.getLogger(__name__)

#: Samples taken from a reader at once, and handed to the loop as one inbox item.
TAKE_BATCH = 256
_WRITE_RETRY_S = 0.002

#: What a reader hands over: serialized samples with their SampleInfo, as taken.
Batch = list[tuple[bytes, Any]]


class DdsBridge:
    """Routes between one ``DdsBus`` and the hub, for the plans it is given."""

    def __init__(self, name: str, hub: HubClient, host: Host, bus: DdsBus,
                 types: TypeRegistry, *, queue_size: int, discovery_timeout_s: float,
                 max_writers: int,
                 sections: tuple[str, str] = ("dds_to_mqtt", "mqtt_to_dds"),
                 kind: str = "dds") -> None:
        self.name = name
        self.kind = kind  # the adapter type the log lines name (ros2 runs this bridge too)
        self.hub = hub
        self.host = host
        self.bus = bus
        self.types = types
        self.queue_size = queue_size
        self.discovery_timeout_s = discovery_timeout_s
        self.max_writers = max_writers
        self.loop = asyncio.get_running_loop()
        # batches of up to TAKE_BATCH samples: queue_size samples at most
        self.inbox = host.inbox(maxsize=max(2, queue_size // TAKE_BATCH), overflow=BLOCK,
                                callback=self._dispatch)
        self.counts = {"dds_to_mqtt": 0, "mqtt_to_dds": 0, "malformed_dds": 0,
                       "malformed_mqtt": 0, "mqtt_errors": 0, "unroutable": 0, "refused": 0,
                       "write_retries": 0, "write_errors": 0, "writers_refused": 0, "no_type": 0,
                       "discovered_topics": 0, "samples_taken": 0, "disposed": 0,
                       "key_mismatch": 0}
        self.sections = sections  # the configuration's names of the out and in mappings
        self.keys = KeyWatch(bus.partitions)
        self._key_kinds: set[tuple[str, str, str, str]] = set()  # mismatches logged
        self._serving = False
        self._in_index: dict[int, int] = {}  # id(InPlan) -> its index
        self._out: list[OutPlan] = []
        self._reading: set[tuple[int, str]] = set()  # (dds_to_mqtt index, DDS topic) read
        self._resolving: set[str] = set()
        self._in_types: dict[str, TypeSupport] = {}  # DDS topic -> type, for auto writes
        self._writers: dict[str, Writer] = {}
        self._subscriptions: list[tuple[InPlan, HubSubscription]] = []
        self._retained: dict[int, list[Context]] = {}  # id(InPlan) -> retained, to write first
        self._warned: set[str] = set()
        self.unexpected = Unexpected(log)

    # -- DDS -> MQTT ---------------------------------------------------------------------------

    def add_out(self, plan: OutPlan) -> None:
        """Reads the plan's topic now, or its topics once discovered (patterns, auto)."""
        self._out.append(plan)
        if not plan.pattern and plan.type_name != AUTO:
            self._read(len(self._out) - 1, plan.topic, self.types.support(plan.type_name))

    def watch_publications(self) -> None:
        if self._out:
            self.bus.watch(True, lambda endpoint: self._threadsafe(self._publication, endpoint),
                           lambda key: self._threadsafe(self._remote_gone, key))

    def deliver_to(self, handle: Callable[[bytes, Any], None]) -> Callable[[Batch], bool]:
        """A reader's ``deliver`` (taker thread) that has ``handle(data, info)`` called on
        the loop for each sample with data, through the inbox."""
        put = self.inbox.put
        return lambda batch: put((handle, batch))

    def _dispatch(self, item: tuple[Callable[[bytes, Any], None], Batch]) -> None:
        handle, batch = item
        counts = self.counts
        counts["samples_taken"] += len(batch)
        for data, info in batch:
            if not info.valid_data:
                counts["disposed"] += 1  # an instance disposed or unregistered: no data
                continue
            try:
                handle(data, info)
            except Exception as exc:  # a bug of ours: the rest of the batch goes on
                counts["malformed_dds"] += 1
                self.unexpected(exc, "%s %s: a DDS sample failed unexpectedly; dropped",
                                self.kind, self.name)  # fmt: skip

    def _read(self, index: int, topic: str, support: TypeSupport) -> None:
        """A reader of ``topic`` for the plan ``self._out[index]``: every mapping that
        names or matches a topic has a reader of its own, so each gets every sample."""
        plan = self._out[index]
        route = plan.route(topic, support)
        publish = self._publish

        def handle(data: bytes, info: Any) -> None:
            publish(route, data, info.source_timestamp)

        mapping = f"{self.sections[0]}[{index}]"
        reader = self.bus.reader(topic, support.cls, plan.qos, self.deliver_to(handle),
                                 mapping=mapping)
        self._reading.add((index, topic))
        self._key_mismatches(self.keys.local(mapping, topic, "reader", support.name,
                                             self.bus.keyed(reader)))
        log.info("%s %s: reading %r (%s) for %s[%d]", self.kind, self.name, topic,
                 support.name, self.sections[0], index)

    def _publish(self, route: OutRoute, data: bytes, timestamp: int) -> None:
        try:
            context = route.context(data, timestamp)
        except MappingError as exc:
            self.counts["malformed_dds"] += 1
            self.warn(f"{route.meta.get('dds.topic')}: {exc}")
            return
        if self.hub.publish(context):
            self.counts["dds_to_mqtt"] += 1
        else:
            self.counts["refused"] += 1

    def _publication(self, endpoint: Any) -> None:
        """A remote writer was discovered: checked against our readers of its topic, and
        every pattern or ``auto`` mapping its topic matches reads the topic (those with an
        IDL type at once, ``auto`` ones once the type is rebuilt from the network)."""
        topic = endpoint.topic_name
        self._key_mismatches(self.keys.remote(endpoint.key, topic, "writer",
                                              str(endpoint.type_name),
                                              self.bus.partitions_of(endpoint)))
        auto = False
        for index, plan in enumerate(self._out):
            if (not (plan.pattern or plan.type_name == AUTO) or (index, topic) in self._reading
                    or not plan.matches(topic)):
                continue
            if plan.type_name == AUTO:
                auto = True
            elif endpoint.type_name.replace(".", "::") != plan.type_name:
                self.warn(f"{topic}: type {endpoint.type_name}, not {plan.type_name}; skipped")
            else:
                self._start_discovered(index, topic, self.types.support(plan.type_name))
        if not auto or topic in self._resolving:
            return
        self._resolving.add(topic)

        def done(cls: type | None, reason: str | None) -> None:
            self._threadsafe(self._resolved, topic, cls, reason)

        self.bus.resolve_type(endpoint, self.discovery_timeout_s, done)

    def _resolved(self, topic: str, cls: type | None, reason: str | None) -> None:
        self._resolving.discard(topic)
        if cls is None:
            self.counts["no_type"] += 1
            self.warn(f"{topic}: cannot rebuild its type: {reason}")
            return
        try:
            support = self.types.discovered(cls)
        except (TypeError, ValueError, MappingError) as exc:
            self.counts["no_type"] += 1
            self.warn(f"{topic}: discovered type not supported: {exc}")
            return
        for index, plan in enumerate(self._out):
            if (plan.type_name == AUTO and (index, topic) not in self._reading
                    and plan.matches(topic)):
                self._start_discovered(index, topic, support)

    def _start_discovered(self, index: int, topic: str, support: TypeSupport) -> None:
        try:
            self._read(index, topic, support)
        except (AdapterError, MappingError) as exc:
            self.warn(f"{topic}: {exc}")
            return
        self.counts["discovered_topics"] += 1

    # -- MQTT -> DDS ---------------------------------------------------------------------------

    def add_in(self, plan: InPlan) -> None:
        self._in_index[id(plan)] = len(self._subscriptions)
        if plan.type_name != AUTO:
            self.types.support(plan.type_name)  # unknown types fail at start
        topic_filter = plan.route.source.topic_filter
        latched = plan.qos.durability == "transient_local"
        subscription = self.hub.subscribe(topic_filter, qos=plan.mqtt_qos,
                                          maxsize=self.queue_size, retained=not latched)
        if latched:
            # The writer is new in every run, and a subscription of the last run taken
            # over gets no retained messages again: a tap hands them over now, to be
            # written before what the subscription queued, so the new writer holds the
            # latest data for late-joining DDS readers again.
            retained: list[Context] = []
            self.hub.tap(topic_filter, callback=retained.append, qos=plan.mqtt_qos,
                         retained=True).close()
            if retained:
                self._retained[id(plan)] = retained
        self._subscriptions.append((plan, subscription))
        static = plan.route.static_topic
        if static is not None and plan.type_name != AUTO:
            self._writer(plan, static, self.types.support(plan.type_name))

    def watch_subscriptions(self) -> None:
        if self._subscriptions:
            self.bus.watch(False, lambda endpoint: self._threadsafe(self._subscription, endpoint),
                           lambda key: self._threadsafe(self._remote_gone, key))

    def _subscription(self, endpoint: Any) -> None:
        """A remote reader was discovered: checked against our writers of its topic, and
        its type rebuilt for ``auto`` mappings."""
        topic = endpoint.topic_name
        self._key_mismatches(self.keys.remote(endpoint.key, topic, "reader",
                                              str(endpoint.type_name),
                                              self.bus.partitions_of(endpoint)))
        if not any(plan.type_name == AUTO for plan, _ in self._subscriptions):
            return
        if topic in self._in_types or topic in self._resolving:
            return
        self._resolving.add(topic)

        def done(cls: type | None, reason: str | None) -> None:
            self._threadsafe(self._resolved_in, topic, cls, reason)

        self.bus.resolve_type(endpoint, self.discovery_timeout_s, done)

    def _resolved_in(self, topic: str, cls: type | None, reason: str | None) -> None:
        self._resolving.discard(topic)
        if cls is not None:
            with contextlib.suppress(TypeError, ValueError):
                self._in_types[topic] = self.types.discovered(cls)

    def _writer(self, plan: InPlan, topic: str, support: TypeSupport) -> Writer | None:
        writer = self._writers.get(topic)
        if writer is None:
            if len(self._writers) >= self.max_writers:
                self.counts["writers_refused"] += 1
                self.warn(f"{topic}: max_writers ({self.max_writers}) reached")
                return None
            mapping = f"{self.sections[1]}[{self._in_index.get(id(plan), 0)}]"
            writer = self._writers[topic] = self.bus.writer(topic, support.cls, plan.qos,
                                                            mapping=mapping)
            log.info("%s %s: writing %r (%s)", self.kind, self.name, topic, support.name)
            self._key_mismatches(self.keys.local(mapping, topic, "writer", support.name,
                                                 self.bus.keyed(writer.entity)))
        return writer

    async def _pump(self, plan: InPlan, subscription: HubSubscription) -> None:
        route = plan.route
        retained = self._retained.pop(id(plan), None)
        source = subscription if retained is None else _chain(retained, subscription)
        async for context in source:
            topic = route.topic_of(context)
            if topic is None:
                continue
            try:
                support = (self._in_types.get(topic) if plan.type_name == AUTO
                           else self.types.support(plan.type_name))
                if support is None:
                    self.counts["no_type"] += 1
                    self.warn(f"{topic}: no reader discovered yet to take its type from")
                    continue
                data = route.cdr_of(context, support)
                writer = self._writer(plan, topic, support)
            except MappingError as exc:
                self.counts["malformed_mqtt"] += 1
                self.warn(f"{context.topic} -> {topic}: {exc}")
                continue
            except AdapterError as exc:
                self.counts["unroutable"] += 1
                self.warn(f"{context.topic} -> {topic}: {exc}")
                continue
            except Exception as exc:  # a bug of ours: one message must not take down the adapter
                self.counts["mqtt_errors"] += 1
                self.unexpected(exc, "%s %s: an MQTT message to %s failed unexpectedly; dropped",
                                self.kind, self.name, topic)  # fmt: skip
                continue
            if writer is None:
                continue
            try:
                while not writer.write(data):  # its history is full: DDS readers lag
                    self.counts["write_retries"] += 1
                    await asyncio.sleep(_WRITE_RETRY_S)
            except AdapterError as exc:
                self.counts["write_errors"] += 1
                self.warn(f"{topic}: {exc}")
                continue
            self.counts["mqtt_to_dds"] += 1

    # -- endpoints DDS never matches -----------------------------------------------------------

    def _key_mismatches(self, found: list[Mismatch]) -> None:
        """New mismatches: counted, logged (each kind once at WARNING), reported."""
        if not found:
            return
        self.counts["key_mismatch"] += len(found)
        for mismatch in found:
            kind = (mismatch.mapping, mismatch.topic, mismatch.remote_type,
                    mismatch.remote_role)
            if kind not in self._key_kinds:
                if len(self._key_kinds) >= 1000:  # bounded: topics may come and go
                    self._key_kinds.clear()
                self._key_kinds.add(kind)
                log.warning("%s %s: %s", self.kind, self.name, mismatch.log_message())
            elif log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s: %s", self.kind, self.name, mismatch.log_message())
        self._report_keys()

    def _remote_gone(self, key: Any) -> None:
        if self.keys.gone(key):
            log.info("%s %s: a remote endpoint whose key-ness did not match ours is gone",
                     self.kind, self.name)
            self._report_keys()

    def _report_keys(self) -> None:
        """The adapter is degraded while a remote endpoint of one of our topics differs
        from ours in key-ness; running again once none does."""
        if not self._serving:
            return
        current = self.keys.mismatches
        if not current:
            self.host.ready()
            return
        shown = "; ".join(m.reason() for m in current[:3])
        more = f" (and {len(current) - 3} more)" if len(current) > 3 else ""
        self.host.degraded(f"types differ in key-ness from remote endpoints: {shown}{more}")

    # -- running -----------------------------------------------------------------------------

    async def serve(self, *more: Awaitable[None]) -> None:
        """Runs the pumps (and ``more``) until the host is asked to stop (or one fails)."""
        self.watch_publications()
        self.watch_subscriptions()
        self.bus.start()
        self.host.ready()
        self._serving = True
        self._report_keys()
        try:
            async with asyncio.TaskGroup() as tg:
                pumps = [tg.create_task(self._pump(plan, subscription))
                         for plan, subscription in self._subscriptions]
                pumps += [tg.create_task(_run(task)) for task in more]
                await self.host.stopping.wait()
                for pump in pumps:
                    pump.cancel()
        finally:
            self._serving = False
            # what waits in the inbox is still published; the taker thread stops taking
            self.inbox.close()

    def writer_for(self, topic: str) -> Writer | None:
        return self._writers.get(topic)

    def stats(self) -> dict[str, int]:
        return {**self.counts, "incompatible_qos": self.bus.incompatible_qos,
                "type_mismatch": self.bus.type_mismatch,
                "readers": len(self._reading), "writers": len(self._writers),
                **self.bus.reader_status()}

    def _threadsafe(self, fn: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to do
            self.loop.call_soon_threadsafe(fn, *args)

    def warn(self, message: str) -> None:
        """Logs a problem: every time at DEBUG, the first of each kind at WARNING."""
        kind = message.split(":", 1)[0]
        if kind not in self._warned:
            if len(self._warned) >= 1000:  # bounded: topics built from captures vary
                self._warned.clear()
            self._warned.add(kind)
            log.warning("%s %s: %s", self.kind, self.name, message)
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s: %s", self.kind, self.name, message)


async def _run(awaitable: Awaitable[None]) -> None:
    await awaitable


async def _chain(first: list[Context], then: HubSubscription) -> AsyncIterator[Context]:
    for context in first:
        yield context
    async for context in then:
        yield context

