"""The ``dds`` adapter, and the DDS machinery the ``ros2`` adapter shares.

The only module of ``adapters/dds`` that imports cyclonedds.

- ``DdsBus``: one domain participant with its readers and writers. A taker thread waits
  on a waitset and takes serialized samples (no deserialization) in batches, handing
  them to whoever created the reader (``DdsBridge``, through the host's inbox); the
  builtin topics tell it about remote endpoints (topics for glob patterns, writers and
  readers whose type is rebuilt from XTypes type information for ``type: auto``, in a
  worker thread).
- ``DdsAdapter``: the component: loads the IDL, builds plans from its configuration,
  runs a ``DdsBridge`` (``adapters/dds/bridge.py``) over a ``DdsBus``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

import cyclonedds.domain as dds_domain
from cyclonedds._clayer import ddspy_take, ddspy_write
from cyclonedds.builtin import (
    BuiltinDataReader,
    BuiltinTopicDcpsPublication,
    BuiltinTopicDcpsSubscription,
)
from cyclonedds.core import (
    DDSException,
    GuardCondition,
    InstanceState,
    Listener,
    Policy,
    Qos,
    ReadCondition,
    SampleState,
    ViewState,
    WaitSet,
)
from cyclonedds.dynamic import get_types_for_typeid
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic
from cyclonedds.util import duration

import idl_codegen
from adapters.dds.bridge import TAKE_BATCH, Batch, DdsBridge
from adapters.dds.codec import InPlan, InRoute, OutPlan, OutRoute, TypeRegistry, TypeSupport
from adapters.dds.config import DdsAdapterConfig, DdsNetworkConfig, DdsQos
from adapters.dds.matching import keyed_of
from adapters.failures import Unexpected
from broker_core.errors import AdapterError
from gateway.components import Host
from gateway.hub import HubClient
from gateway.mapping import MappingError

__all__ = ["DdsAdapter", "DdsBridge", "DdsBus", "Writer", "qos_of"]

log = logging.getLogger(__name__)

_ANY = SampleState.Any | ViewState.Any | InstanceState.Any
_DEFAULT_MAX_SAMPLES = 10_000


def qos_of(qos: DdsQos, *, writer: bool, user_data: bytes | None = None) -> Qos:
    """The cyclonedds Qos of a reader or writer (samples of its own participant ignored)."""
    policies: list[Any] = [Policy.IgnoreLocal.Participant]
    if qos.reliability == "best_effort":
        policies.append(Policy.Reliability.BestEffort)
    else:  # a writer never blocks the event loop: a full history is retried later
        policies.append(Policy.Reliability.Reliable(duration(seconds=0 if writer else 1)))
    transient = qos.durability == "transient_local"
    policies.append(Policy.Durability.TransientLocal if transient else Policy.Durability.Volatile)
    history = qos.history
    if history is None:  # a transient-local writer keeping everything would fill up for good
        history = 1 if transient and writer else "all"
    policies.append(Policy.History.KeepAll if history == "all"
                    else Policy.History.KeepLast(int(history)))
    max_samples = qos.max_samples or _DEFAULT_MAX_SAMPLES
    policies.append(Policy.ResourceLimits(max_samples=max_samples))
    if transient and writer:
        depth = (Policy.History.KeepAll if history == "all"
                 else Policy.History.KeepLast(int(history)))
        policies.append(Policy.DurabilityService(
            cleanup_delay=0, history=depth, max_samples=max_samples, max_instances=-1,
            max_samples_per_instance=-1))
    if qos.deadline is not None:
        policies.append(Policy.Deadline(duration(seconds=qos.deadline)))
    if qos.lifespan is not None:
        policies.append(Policy.Lifespan(duration(seconds=qos.lifespan)))
    if user_data:
        policies.append(Policy.Userdata(user_data))
    return Qos(*policies)


#: Cyclone's QoS policy ids (``dds_qos_policy_id_t``), named as in the configuration.
_POLICIES = {
    1: "user data", 2: "durability", 3: "presentation", 4: "deadline", 5: "latency budget",
    6: "ownership", 7: "ownership strength", 8: "liveliness", 9: "time-based filter",
    10: "partition", 11: "reliability", 12: "destination order", 13: "history",
    14: "resource limits", 18: "topic data", 19: "group data", 20: "transport priority",
    21: "lifespan", 22: "durability service", 23: "property",
    25: "data representation (XCDR1 / XCDR2)",
}
#: DDS_TYPE_CONSISTENCY_ENFORCEMENT_QOS_POLICY_ID: the types of the two endpoints differ.
_TYPE_CONSISTENCY = 24


class _Incompatible:
    """Counts (and logs, now and then) remote endpoints that do not match one of ours:
    ``type_mismatch`` when the remote endpoint's type is not ours (same topic, another
    type, or the same type name with other members), ``incompatible_qos`` otherwise."""

    def __init__(self, bus: DdsBus, kind: str, topic: str, type_name: str,
                 mapping: str | None = None) -> None:
        self.bus = bus
        self.kind = kind  # "reader" or "writer": ours
        self.topic = topic
        self.type_name = type_name
        # what the log names: the mapping (``ros_to_mqtt[0]``) and the topic
        self.where = f"{mapping}: topic {topic!r}" if mapping else f"topic {topic!r}"

    def __call__(self, entity: Any, status: Any) -> None:
        bus = self.bus
        policy = getattr(status, "last_policy_id", None)
        peer = "writer" if self.kind == "reader" else "reader"
        if policy == _TYPE_CONSISTENCY:
            bus.type_mismatch += 1
            if _now_and_then(bus.type_mismatch):
                log.warning("%s %s: %s: a remote %s's type does not match the IDL type %s"
                            " (other members, or another type); it is not matched and its"
                            " samples are not bridged", bus.kind, bus.name, self.where, peer,
                            self.type_name)
            return
        bus.incompatible_qos += 1
        if _now_and_then(bus.incompatible_qos):
            name = _POLICIES.get(policy, f"policy id {policy}") if policy else "unknown"
            log.warning("%s %s: %s: a remote %s's QoS is incompatible with our %s's"
                        " (%s); it is not matched", bus.kind, bus.name, self.where, peer,
                        self.kind, name)


def _now_and_then(count: int) -> bool:
    return count in (1, 10, 100) or count % 1000 == 0


class Writer:
    """A DDS writer of serialized samples; ``write`` never blocks."""

    __slots__ = ("_ref", "entity", "topic")

    def __init__(self, entity: DataWriter, topic: str) -> None:
        self.entity = entity
        self.topic = topic
        self._ref = entity._ref

    @property
    def instance_handle(self) -> int:
        return int(self.entity.get_instance_handle())

    def write(self, data: bytes) -> bool:
        """Writes a serialized sample; False when its history is full (try again later).
        Raises ``AdapterError`` for anything else."""
        code = ddspy_write(self._ref, data)
        if code >= 0:
            return True
        if code == DDSException.DDS_RETCODE_TIMEOUT:
            return False
        raise AdapterError(f"DDS write to {self.topic!r} failed: {DDSException(code, '')}")

    def matched(self) -> int:
        return len(self.entity.get_matched_subscriptions())


class _Reader:
    __slots__ = ("deliver", "entity", "ref", "topic")

    def __init__(self, entity: DataReader, topic: str, deliver: Callable[[Batch], bool]) -> None:
        self.entity = entity
        self.ref = entity._ref
        self.topic = topic
        self.deliver = deliver


class _Domains:
    """The DDS domains the buses of this process are in, shared by reference count.

    A domain's Cyclone configuration (``network``) is given when it is created, by the
    first bus in it; Cyclone refuses another configuration for a domain that exists
    (PRECONDITION_NOT_MET), so the first one applies to every bus in the domain. Deleting
    a ``Domain`` deletes every participant in it, so it is deleted when the last bus
    leaves. Any other refusal (an interface that does not exist, a malformed
    configuration) fails the bus instead of letting Cyclone fall back to its defaults.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, tuple[dds_domain.Domain | None, int]] = {}

    def acquire(self, name: str, domain_id: int, network: DdsNetworkConfig) -> None:
        """Takes a reference to the domain (creating it with the network's configuration);
        ``AdapterError`` when Cyclone cannot join it. ``name``: the adapter as the log
        lines name it (``dds vehicle``, ``ros2 robot``)."""
        xml = network.cyclone_xml(domain_id)
        with self._lock:
            domain, count = self._held.get(domain_id, (None, 0))
            if count == 0 and xml is not None:
                try:
                    domain = dds_domain.Domain(domain_id, xml)
                except DDSException as exc:
                    if exc.code != DDSException.DDS_RETCODE_PRECONDITION_NOT_MET:
                        raise AdapterError(_rejected(domain_id, network, exc)) from exc
                    # created outside the buses (another library in this process)
                    log.warning("%s: domain %d exists in this process already; its"
                                " configuration applies, not this adapter's network keys",
                                name, domain_id)
            elif count and xml is not None:
                log.warning("%s: domain %d is in use by another adapter of this"
                            " gateway; the network keys of the first one apply", name,
                            domain_id)
            self._held[domain_id] = (domain, count + 1)

    def release(self, domain_id: int) -> None:
        with self._lock:
            domain, count = self._held.pop(domain_id, (None, 0))
            if count > 1:
                self._held[domain_id] = (domain, count - 1)
                return
        if domain is not None:
            with contextlib.suppress(Exception):
                domain.__del__()


def _rejected(domain_id: int, network: DdsNetworkConfig, exc: DDSException) -> str:
    """Why Cyclone refused the network configuration of a domain, as far as we can tell
    (Cyclone itself says it on stderr only)."""
    reason = "Cyclone DDS rejected the adapter's network configuration"
    try:
        present = [name for _, name in socket.if_nameindex()]
    except OSError:
        present = []
    missing = [i for i in network.interfaces if present and not _looks_like_address(i)
               and i not in present]
    if missing:
        names = ", ".join(repr(i) for i in missing)
        reason += (f": no network interface {names} on this host"
                   f" (there are {', '.join(present)})")
    elif network.config is not None:
        reason += " (network.config)"
    return f"cannot join DDS domain {domain_id}: {reason} ({exc})"


def _looks_like_address(text: str) -> bool:
    return text.replace(".", "").isdigit() or ":" in text


_DOMAINS = _Domains()


class DdsBus:
    """One domain participant, its readers and writers, a taker and a discovery thread."""

    def __init__(self, name: str, domain_id: int, network: DdsNetworkConfig,
                 partitions: Iterable[str] = (), kind: str = "dds") -> None:
        self.name = name
        self.kind = kind  # the adapter type the log lines name
        self.domain_id = domain_id
        self.network = network
        self.partitions = tuple(partitions)
        self.incompatible_qos = 0
        self.type_mismatch = 0
        self.take_errors = 0
        self._unexpected = Unexpected(log)
        self._held = False  # a reference to the domain in _DOMAINS
        self._participant: dds_domain.DomainParticipant | None = None
        self._publisher: Publisher | None = None
        self._subscriber: Subscriber | None = None
        self._waitset: WaitSet | None = None
        self._guard: GuardCondition | None = None
        self._topics: dict[str, tuple[type, Topic]] = {}
        self._readers: list[_Reader] = []
        self._keep: list[Any] = []  # conditions and listeners that must stay alive
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._taker: threading.Thread | None = None
        self._discovery: list[tuple[BuiltinDataReader, Callable[[Any], None],
                                    Callable[[Any], None] | None]] = []
        self._resolver = concurrent.futures.ThreadPoolExecutor(1, f"dds-{name}-types")
        self._guid: Any = None

    # -- life cycle (blocking: call from a worker thread) ---------------------------------

    def open(self) -> None:
        _DOMAINS.acquire(f"{self.kind} {self.name}", self.domain_id, self.network)
        self._held = True
        try:
            self._participant = dds_domain.DomainParticipant(self.domain_id)
            qos = Qos(Policy.Partition(list(self.partitions))) if self.partitions else None
            self._publisher = Publisher(self._participant, qos=qos)
            self._subscriber = Subscriber(self._participant, qos=qos)
            self._waitset = WaitSet(self._participant)
            self._guard = GuardCondition(self._participant)
            self._waitset.attach(self._guard)
            self._guid = self._participant.guid
        except DDSException as exc:
            self.close()
            raise AdapterError(f"cannot join DDS domain {self.domain_id}: {exc}") from exc

    def start(self) -> None:
        self._taker = threading.Thread(target=self._take_loop, name=f"dds-{self.name}",
                                       daemon=True)
        self._taker.start()

    def close(self) -> None:
        self._stop.set()
        if self._guard is not None:
            with contextlib.suppress(DDSException):  # the participant is gone already
                self._guard.set(True)
        if self._taker is not None and self._taker is not threading.current_thread():
            self._taker.join(5.0)
        self._resolver.shutdown(wait=False, cancel_futures=True)
        if self._participant is not None:
            with contextlib.suppress(Exception):
                self._participant.__del__()
        self._participant = self._publisher = self._subscriber = None
        self._waitset = self._guard = None
        if self._held:
            self._held = False
            _DOMAINS.release(self.domain_id)
        self._readers.clear()
        self._discovery.clear()
        self._keep.clear()
        self._topics.clear()

    @property
    def participant(self) -> dds_domain.DomainParticipant:
        if self._participant is None:
            raise AdapterError("the DDS participant is closed")
        return self._participant

    @property
    def participant_guid(self) -> Any:
        return self._guid

    # -- entities ----------------------------------------------------------------------------

    def topic(self, name: str, cls: type) -> Topic:
        with self._lock:
            known = self._topics.get(name)
            if known is not None:
                if known[0] is not cls and _idl_name(known[0]) != _idl_name(cls):
                    raise AdapterError(f"DDS topic {name!r} is used with type "
                                       f"{_idl_name(known[0])} here; cannot use {_idl_name(cls)}")
                return known[1]
            try:
                topic: Topic = Topic(self.participant, name, cls)
            except DDSException as exc:
                raise AdapterError(f"cannot create DDS topic {name!r}: {exc}") from exc
            self._topics[name] = (cls, topic)
            return topic

    def reader(self, name: str, cls: type, qos: DdsQos, deliver: Callable[[Batch], bool],
               user_data: bytes | None = None, mapping: str | None = None) -> DataReader:
        """A reader whose samples go to ``deliver`` in batches (up to 256 serialized
        samples with their SampleInfo, dispose notifications included), on the taker
        thread; ``deliver`` returns False when they can no longer be taken. ``mapping``
        (``dds_to_mqtt[0]``): what the log names beside the topic."""
        listener = Listener(on_requested_incompatible_qos=_Incompatible(
            self, "reader", name, _idl_name(cls), mapping))
        try:
            entity = DataReader(self._subscriber or self.participant, self.topic(name, cls),
                                qos=qos_of(qos, writer=False, user_data=user_data),
                                listener=listener)
        except DDSException as exc:
            raise AdapterError(f"cannot create a DDS reader of {name!r}: {exc}") from exc
        condition = ReadCondition(entity, _ANY)
        with self._lock:
            self._keep += [listener, condition]
            self._readers.append(_Reader(entity, name, deliver))
        assert self._waitset is not None and self._guard is not None
        self._waitset.attach(condition)
        self._guard.set(True)  # the taker takes what arrived before the attach
        return entity

    def writer(self, name: str, cls: type, qos: DdsQos, user_data: bytes | None = None,
               mapping: str | None = None) -> Writer:
        listener = Listener(on_offered_incompatible_qos=_Incompatible(
            self, "writer", name, _idl_name(cls), mapping))
        try:
            entity = DataWriter(self._publisher or self.participant, self.topic(name, cls),
                                qos=qos_of(qos, writer=True, user_data=user_data),
                                listener=listener)
        except DDSException as exc:
            raise AdapterError(f"cannot create a DDS writer of {name!r}: {exc}") from exc
        with self._lock:
            self._keep.append(listener)
        return Writer(entity, name)

    def keyed(self, entity: DataReader | DataWriter) -> bool | None:
        """Whether Cyclone made our reader or writer a keyed endpoint (its RTPS entity
        kind); None when it cannot tell."""
        try:
            return keyed_of(entity.guid)
        except DDSException:  # the entity is gone already
            return None

    @staticmethod
    def partitions_of(endpoint: Any) -> tuple[str, ...]:
        """The partitions of a discovered endpoint (none: the default partition)."""
        qos = getattr(endpoint, "qos", None)
        policy = qos[Policy.Partition] if qos is not None else None
        return tuple(policy.partitions) if policy is not None else ()

    def watch(self, publications: bool, found: Callable[[Any], None],
              gone: Callable[[Any], None] | None = None) -> None:
        """Calls ``found(endpoint)`` on the taker thread for every remote writer
        (``publications``) or reader discovered, those found already included, and
        ``gone(key)`` with the endpoint's GUID when one is deleted or its participant lost."""
        builtin = BuiltinTopicDcpsPublication if publications else BuiltinTopicDcpsSubscription
        reader = BuiltinDataReader(self.participant, builtin)
        condition = ReadCondition(reader, _ANY)
        with self._lock:
            self._keep.append(condition)
            self._discovery.append((reader, found, gone))
        assert self._waitset is not None and self._guard is not None
        self._waitset.attach(condition)
        self._guard.set(True)

    def resolve_type(self, endpoint: Any, timeout_s: float,
                     done: Callable[[type | None, str | None], None]) -> None:
        """Rebuilds the type of a discovered endpoint from the network, in a worker
        thread; ``done(cls, None)`` or ``done(None, reason)`` runs there."""

        def work() -> None:
            if getattr(endpoint, "type_id", None) is None:
                done(None, "the endpoint sends no XTypes type information")
                return
            try:
                cls, _ = get_types_for_typeid(self.participant, endpoint.type_id,
                                              duration(seconds=timeout_s))
            except Exception as exc:  # cyclonedds raises DDSException and others
                done(None, f"{type(exc).__name__}: {exc}")
                return
            done(cls, None)  # type: ignore[arg-type]

        self._resolver.submit(work)

    # -- the taker thread ------------------------------------------------------------------------

    def _take_loop(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._take_once():
                    return
            except Exception as exc:  # never let the thread die silently: log, count, go on
                self.take_errors += 1
                self._unexpected(exc, "%s %s: taking samples failed; trying again",
                                 self.kind, self.name)  # fmt: skip
                self._stop.wait(0.5)

    def _take_once(self) -> bool:
        """Waits for data and takes it; False when the thread is to end."""
        assert self._waitset is not None and self._guard is not None
        self._waitset.wait(duration(seconds=1))
        self._guard.set(False)
        if self._stop.is_set():
            return False
        with self._lock:
            readers = list(self._readers)
            discovery = list(self._discovery)
        for endpoints, found, gone in discovery:
            for endpoint in endpoints.take(N=64):
                info = getattr(endpoint, "sample_info", None)
                if (info is not None and not info.valid_data) or not endpoint.topic_name:
                    if gone is not None:  # an endpoint gone: only its key is set
                        gone(endpoint.key)
                    continue
                if endpoint.participant_key != self._guid:
                    found(endpoint)
        return all(self._drain(reader) for reader in readers)

    def _drain(self, reader: _Reader) -> bool:
        while not self._stop.is_set():
            batch = ddspy_take(reader.ref, _ANY, TAKE_BATCH)
            if type(batch) is int:
                self.take_errors += 1
                log.warning("%s %s: take from %r failed: %s", self.kind, self.name, reader.topic,
                            DDSException(batch, ""))
                return True
            if not batch:
                return True
            if not reader.deliver(batch):
                return False
            if len(batch) < TAKE_BATCH:
                return True
        return False

    def reader_status(self) -> dict[str, int]:
        """Samples DDS itself lost or rejected at the adapter's readers."""
        lost = rejected = 0
        with self._lock:
            readers = list(self._readers)
        for reader in readers:
            with contextlib.suppress(DDSException):
                lost += reader.entity.get_sample_lost_status().total_count
                rejected += reader.entity.get_sample_rejected_status().total_count
        return {"dds_samples_lost": lost, "dds_samples_rejected": rejected}


def _idl_name(cls: type) -> str:
    return str(getattr(cls, "__idl_typename__", cls.__name__)).replace(".", "::")


class DdsAdapter:
    """DDS topics to MQTT and back (component type ``dds``)."""

    def __init__(self, config: DdsAdapterConfig) -> None:
        self.config = config
        self._bridge: DdsBridge | None = None
        self._stats: dict[str, int] = {}

    def plans(self, types: TypeRegistry, origin: Any) -> tuple[list[OutPlan], list[InPlan]]:
        config = self.config
        outs: list[OutPlan] = []
        for mapping in config.dds_to_mqtt:
            qos = (mapping.dds_qos or DdsQos()).over(config.profile(mapping.qos_profile))

            def route(topic: str, support: TypeSupport, m: Any = mapping) -> OutRoute:
                meta = {"dds.topic": topic, "dds.type": support.name}
                return OutRoute(m.to_mqtt, support, meta, origin, qos=m.qos, retain=m.retain,
                                payload=m.payload)

            outs.append(OutPlan(mapping.from_dds, mapping.type, qos, route))
        ins = [
            InPlan(InRoute(m.from_mqtt, m.to_dds, payload=m.payload, strict=m.strict), m.type,
                   (m.dds_qos or DdsQos()).over(config.profile(m.qos_profile)), m.qos)
            for m in config.mqtt_to_dds
        ]
        return outs, ins

    async def run(self, hub: HubClient, host: Host) -> None:
        config = self.config
        types = TypeRegistry()
        if config.idl_files:
            schema = await asyncio.to_thread(idl_codegen.load, list(config.idl_files),
                                             list(config.include_dirs))
            types = TypeRegistry(schema.types)
        bus = DdsBus(config.name, config.domain_id, config.network, config.partitions)
        await asyncio.to_thread(bus.open)
        try:
            bridge = DdsBridge(config.name, hub, host, bus, types, queue_size=config.queue_size,
                               discovery_timeout_s=config.discovery_timeout,
                               max_writers=config.max_writers)
            self._bridge = bridge
            outs, ins = self.plans(types, hub.origin)
            try:
                for out in outs:
                    bridge.add_out(out)
                for plan in ins:
                    bridge.add_in(plan)
            except MappingError as exc:
                raise AdapterError(str(exc)) from exc
            await bridge.serve()
        finally:
            self._stats = self.stats()
            self._bridge = None
            await asyncio.to_thread(bus.close)

    def stats(self) -> dict[str, int]:
        if self._bridge is None:
            return dict(self._stats)
        return self._bridge.stats()
