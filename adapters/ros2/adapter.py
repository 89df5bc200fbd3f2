"""The ``ros2`` adapter: ROS 2 topics and services over Cyclone DDS, no ROS installed.

The only module of ``adapters/ros2`` that imports cyclonedds. Topics go through the
DDS adapter's machinery (``DdsBus`` in ``adapters.dds.adapter``, ``DdsBridge`` in
``adapters.dds.bridge``) with ROS 2 names, types and QoS profiles; services are this
module's own:

- ``ServiceCaller`` (``mqtt_to_ros_services``): an MQTT 5 request (a JSON request, a
  response topic, correlation data) becomes a ROS 2 request with rmw_cyclonedds's
  header (our request writer as ``guid``, a sequence number as ``seq``); the reply with
  that header is published to the response topic with the correlation data.
- ``ServiceResponder`` (``ros_services_to_mqtt``): a ROS 2 request is published to an
  MQTT topic with a response topic of the adapter's and correlation data holding its
  header; the MQTT responder's reply is written back to the ROS 2 client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import types
from pathlib import Path
from typing import Any

import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as dds_types
from cyclonedds.idl import IdlStruct

import idl_codegen
from adapters.dds.adapter import DdsBus, Writer
from adapters.dds.bridge import DdsBridge
from adapters.dds.codec import (
    CONTENT_JSON,
    InPlan,
    InRoute,
    OutPlan,
    OutRoute,
    TypeRegistry,
    TypeSupport,
)
from adapters.dds.config import AUTO, DdsQos
from adapters.ros2.codec import (
    WSTRING_REFUSED,
    Fill,
    dds_topic,
    dds_type,
    filler,
    header_bytes,
    ros_topic,
    ros_type,
    service_topics,
    service_types,
    split_header,
    strip_placeholders,
    with_header,
    wstring_member,
)
from adapters.ros2.config import (
    BUILTIN_IDL,
    MqttToRosService,
    Ros2AdapterConfig,
    RosServiceToMqtt,
    type_files,
    type_uses,
)
from broker_core.context import Context
from broker_core.errors import AdapterError
from broker_core.mqtt.properties import Properties
from gateway.components import Host
from gateway.hub import HubClient
from gateway.mapping import FilterTemplate, MappingError, TopicTemplate
from idl_codegen.cdr_json import Transcoder
from idl_codegen.model import NamedType
from idl_codegen.ros_msg import convert

__all__ = ["BUILTIN_IDL", "Ros2Adapter", "ServiceCaller", "ServiceResponder", "wire_type"]

log = logging.getLogger(__name__)

_SERVICE_QOS = DdsQos(reliability="reliable", durability="volatile", history="all")
_UINT64 = (1 << 64) - 1
_ids = itertools.count(1)


def wire_type(cls: type) -> type:
    """``cls`` as rmw_cyclonedds puts it on the wire for a service: the request header
    (``guid: uint64``, ``seq: int64``) followed by ``cls``'s members, under ``cls``'s DDS
    type name."""
    members = dataclasses.fields(cls)
    taken = {member.name for member in members} & {"guid", "seq"}
    if taken:
        raise AdapterError(f"{cls.__name__}: a member named {sorted(taken)[0]!r} collides with"
                           " the request header")

    def body(namespace: dict[str, Any]) -> None:
        namespace["__annotations__"] = {"guid": dds_types.uint64, "seq": dds_types.int64,
                                        **{m.name: cls.__annotations__[m.name] for m in members}}
        namespace["__idl_field_annotations__"] = {
            name: dict(value) for name, value in
            getattr(cls, "__idl_field_annotations__", {}).items()}
        namespace["guid"] = 0
        namespace["seq"] = 0
        for member in members:
            namespace[member.name] = (
                member.default if member.default is not dataclasses.MISSING
                else dataclasses.field(default_factory=member.default_factory))

    typename = getattr(cls, "__idl_typename__", cls.__name__)
    wire = types.new_class(f"{cls.__name__}Wire", (IdlStruct,), {"typename": typename}, body)
    return dataclasses.dataclass(annotate.final(wire))


class PlaceholderSupport(TypeSupport):
    """A ROS 2 type with an empty message in it: its placeholder member is invisible on
    the MQTT side (``{}`` goes in, ``{}`` comes out)."""

    __slots__ = ("_fill",)

    def __init__(self, cls: type, fill: Fill) -> None:
        super().__init__(cls)
        self._fill = fill

    def extractor(self, paths: tuple[str, ...]) -> Transcoder | None:
        return None  # topic members come from the JSON, without the placeholder

    def json_of(self, data: bytes) -> bytes:
        text = super().json_of(data)
        stripped = strip_placeholders(json.loads(text))
        return json.dumps(stripped, ensure_ascii=False, separators=(",", ":")).encode()

    def cdr_of_value(self, value: Any, strict: bool = True) -> bytes:
        try:
            filled = self._fill(value)
        except RecursionError as exc:
            raise MappingError(f"{self.name}: nested too deeply") from exc
        return super().cdr_of_value(filled, strict)


def support_of(cls: type) -> TypeSupport:
    """The support of a ROS 2 type: ``PlaceholderSupport`` when it has an empty message
    in it, else the plain one."""
    support = TypeSupport(cls)
    fill = filler(support.codec.schema, NamedType(support.name))
    return PlaceholderSupport(cls, fill) if fill is not None else support


def _user_data(kind: str, key: str) -> bytes:
    return f"{kind}={key};".encode()


def _error_properties(correlation: bytes | None, reason: str) -> Properties:
    return Properties(payload_format_indicator=1, content_type=CONTENT_JSON,
                      correlation_data=correlation, user_properties=(("ros2.error", reason),))


class ServiceCaller:
    """MQTT 5 requests -> a ROS 2 service -> replies to their response topics."""

    def __init__(self, config: MqttToRosService, namespace: str, bridge: DdsBridge,
                 request: TypeSupport, response: TypeSupport,
                 mapping: str | None = None) -> None:
        self.config = config
        self.bridge = bridge
        self.request = request
        self.response = response
        self.requests_topic, self.replies_topic = service_topics(config.to_ros, namespace)
        self.client_id = f"{bridge.bus.participant_guid.hex}.{next(_ids)}"
        user_data = _user_data("clientid", self.client_id)
        self.writer: Writer = bridge.bus.writer(self.requests_topic, wire_type(request.cls),
                                                _SERVICE_QOS, user_data, mapping)
        self.guid = self.writer.instance_handle & _UINT64
        bridge.bus.reader(self.replies_topic, wire_type(response.cls), _SERVICE_QOS,
                          bridge.deliver_to(self._reply), user_data, mapping)
        self.subscription = bridge.hub.subscribe(FilterTemplate(config.from_mqtt).topic_filter,
                                                 qos=1, maxsize=bridge.queue_size)
        self.pending: dict[int, tuple[Context, asyncio.TimerHandle]] = {}
        self.sequence = itertools.count(1)
        self.counts = bridge.counts
        for key in ("service_calls", "service_replies", "service_timeouts", "service_errors"):
            self.counts.setdefault(key, 0)

    async def serve(self) -> None:
        async for context in self.subscription:
            try:
                self._call(context)
            except Exception as exc:  # a bug of ours: one call must not take down the adapter
                self.counts["mqtt_errors"] += 1
                self.bridge.unexpected(exc, "ros2 %s: a call of %s failed unexpectedly; dropped",
                                       self.bridge.name, self.config.to_ros)  # fmt: skip

    def _call(self, context: Context) -> None:
        properties = context.properties
        if not properties.response_topic:
            self.counts["service_errors"] += 1
            self.bridge.warn(f"{context.topic}: a service request needs a response topic")
            return
        if len(self.pending) >= self.config.max_pending:
            self._fail(context, "too many calls pending")
            return
        if not self.writer.matched():
            self._fail(context, "the service is not available (no server discovered)")
            return
        try:
            body = self.request.cdr_of(context.payload)
        except MappingError as exc:
            self.counts["malformed_mqtt"] += 1
            self._fail(context, f"bad request: {exc}")
            return
        seq = next(self.sequence)
        try:
            written = self.writer.write(with_header(body, self.guid, seq))
        except AdapterError as exc:
            written = False
            self.bridge.warn(f"{self.requests_topic}: {exc}")
        if not written:
            self._fail(context, "the service's request queue is full")
            return
        timer = self.bridge.loop.call_later(self.config.timeout, self._expire, seq)
        self.pending[seq] = (context, timer)
        self.counts["service_calls"] += 1

    def _reply(self, data: bytes, info: Any) -> None:
        try:
            guid, seq, body = split_header(data)
        except ValueError:
            self.counts["malformed_dds"] += 1
            return
        if guid != self.guid:
            return  # another client's reply
        entry = self.pending.pop(seq, None)
        if entry is None:
            return  # expired
        request, timer = entry
        timer.cancel()
        try:
            payload = self.response.json_of(body)
        except MappingError as exc:
            self.counts["malformed_dds"] += 1
            self._fail(request, f"bad response: {exc}")
            return
        properties = Properties(
            payload_format_indicator=1, content_type=CONTENT_JSON,
            correlation_data=request.properties.correlation_data,
            user_properties=(("ros.type", self.config.type),),
        )
        response_topic = request.properties.response_topic
        assert response_topic is not None
        self.bridge.hub.publish(self.bridge.hub.context(
            response_topic, payload, 1, False, properties=properties,
            meta={"ros.service": self.config.to_ros}))
        self.counts["service_replies"] += 1

    def _expire(self, seq: int) -> None:
        entry = self.pending.pop(seq, None)
        if entry is not None:
            self.counts["service_timeouts"] += 1
            self._fail(entry[0], f"no response within {self.config.timeout:g}s")

    def _fail(self, request: Context, reason: str) -> None:
        self.counts["service_errors"] += 1
        self.bridge.warn(f"{self.config.to_ros}: {reason}")
        topic = request.properties.response_topic
        if topic:
            self.bridge.hub.publish(self.bridge.hub.context(
                topic, json.dumps({"error": reason}).encode(), 1, False,
                properties=_error_properties(request.properties.correlation_data, reason)))


class ServiceResponder:
    """A ROS 2 service answered by an MQTT 5 responder."""

    def __init__(self, config: RosServiceToMqtt, namespace: str, bridge: DdsBridge,
                 request: TypeSupport, response: TypeSupport, adapter: str,
                 mapping: str | None = None) -> None:
        self.config = config
        self.bridge = bridge
        self.request = request
        self.response = response
        requests_topic, replies_topic = service_topics(config.from_ros, namespace)
        service = requests_topic[2:-len("Request")]
        self.service_id = f"{bridge.bus.participant_guid.hex}.{next(_ids)}"
        user_data = _user_data("serviceid", self.service_id)
        self.writer = bridge.bus.writer(replies_topic, wire_type(response.cls), _SERVICE_QOS,
                                        user_data, mapping)
        bridge.bus.reader(requests_topic, wire_type(request.cls), _SERVICE_QOS,
                          bridge.deliver_to(self._request), user_data, mapping)
        self.topic = TopicTemplate(config.to_mqtt).render({"ros.service": service.lstrip("/")})
        self.reply_topic = f"edgebus/ros2/{adapter}/replies{service}"
        self.subscription = bridge.hub.subscribe(self.reply_topic, qos=1,
                                                 maxsize=bridge.queue_size)
        self.pending: dict[bytes, asyncio.TimerHandle] = {}
        self.counts = bridge.counts
        for key in ("service_requests", "service_answers", "service_timeouts",
                    "service_errors"):
            self.counts.setdefault(key, 0)

    def _request(self, data: bytes, info: Any) -> None:
        try:
            guid, seq, body = split_header(data)
            payload = self.request.json_of(body)
        except (ValueError, MappingError) as exc:
            self.counts["malformed_dds"] += 1
            self.bridge.warn(f"{self.config.from_ros}: bad request: {exc}")
            return
        if len(self.pending) >= self.config.max_pending:
            self.counts["service_errors"] += 1
            self.bridge.warn(f"{self.config.from_ros}: too many requests pending")
            return
        correlation = header_bytes(guid, seq)
        self.pending[correlation] = self.bridge.loop.call_later(
            self.config.timeout, self._expire, correlation)
        properties = Properties(
            payload_format_indicator=1, content_type=CONTENT_JSON,
            response_topic=self.reply_topic, correlation_data=correlation,
            user_properties=(("ros.type", self.config.type),
                             ("dds.source_timestamp", str(info.source_timestamp))),
        )
        self.bridge.hub.publish(self.bridge.hub.context(
            self.topic, payload, 1, False, properties=properties,
            meta={"ros.service": self.config.from_ros}))
        self.counts["service_requests"] += 1

    async def serve(self) -> None:
        async for context in self.subscription:
            try:
                self._answer(context)
            except Exception as exc:  # a bug of ours: one answer must not take down the adapter
                self.counts["mqtt_errors"] += 1
                self.bridge.unexpected(
                    exc, "ros2 %s: an answer to %s failed unexpectedly; dropped",
                    self.bridge.name, self.config.from_ros)  # fmt: skip

    def _answer(self, context: Context) -> None:
        correlation = context.properties.correlation_data
        timer = self.pending.pop(correlation, None) if correlation else None
        if timer is None:
            self.counts["service_errors"] += 1
            self.bridge.warn(f"{self.reply_topic}: a reply without a pending request")
            return
        timer.cancel()
        assert correlation is not None
        guid, seq, _ = split_header(b"\x00\x01\x00\x00" + correlation)
        try:
            body = self.response.cdr_of(context.payload)
            written = self.writer.write(with_header(body, guid, seq))
        except (MappingError, AdapterError) as exc:
            self.counts["malformed_mqtt"] += 1
            self.bridge.warn(f"{self.reply_topic}: {exc}")
            return
        if written:
            self.counts["service_answers"] += 1
        else:
            self.counts["service_errors"] += 1

    def _expire(self, correlation: bytes) -> None:
        if self.pending.pop(correlation, None) is not None:
            self.counts["service_timeouts"] += 1


class Ros2Adapter:
    """ROS 2 topics and services to MQTT and back (component type ``ros2``)."""

    def __init__(self, config: Ros2AdapterConfig) -> None:
        self.config = config
        self._bridge: DdsBridge | None = None
        self._stats: dict[str, int] = {}

    def _load(self, data_dir: Path) -> TypeRegistry:
        """Converts ``msg_files``, finds the IDL of every type used, loads it (blocking).
        The configuration check parses the same files (``config.idl_problems``)."""
        config = self.config
        converted = data_dir / "idl"
        if config.msg_files:
            convert(config.msg_files, converted)
        uses = type_uses(config.ros_to_mqtt, config.mqtt_to_ros, config.mqtt_to_ros_services,
                         config.ros_services_to_mqtt)
        files, search, missing = type_files([use.type for use in uses], config.idl_files,
                                            config.include_dirs, converted)
        if missing and not config.idl_files:
            shown = sorted({ros_type(name) for name in missing})
            raise AdapterError(f"no definition of {', '.join(shown)}: add its .msg/.srv file"
                               " to msg_files")
        if not files:
            return TypeRegistry(make=support_of)
        schema = idl_codegen.load(files, include_dirs=search)
        for use in uses:  # as the check refuses them (a class does not tell a wstring)
            member = (wstring_member(schema.description, use.type)
                      if use.type in schema.description.types else None)
            if member is not None:
                raise AdapterError(f"ROS 2 type '{ros_type(use.type)}' is not supported:"
                                   f" member {member!r} is a wstring; {WSTRING_REFUSED}")
        return TypeRegistry(schema.types, make=support_of)

    def plans(self, types_: TypeRegistry, origin: Any) -> tuple[list[OutPlan], list[InPlan]]:
        config = self.config
        outs: list[OutPlan] = []
        for mapping in config.ros_to_mqtt:
            qos = (mapping.dds_qos or DdsQos()).over(
                config.profile(mapping.qos_profile, reader=True))

            def route(topic: str, support: TypeSupport, m: Any = mapping) -> OutRoute:
                ros_name = ros_topic(topic) or topic
                meta = {"ros.topic": ros_name.lstrip("/"), "ros.type": ros_type(support.name),
                        "dds.topic": topic, "dds.type": support.name}
                return OutRoute(m.to_mqtt, support, meta, origin, qos=m.qos, retain=m.retain,
                                payload=m.payload,
                                type_property=(("ros.type", ros_type(support.name)),
                                               ("dds.type", support.name)))

            type_name = AUTO if mapping.type == AUTO else dds_type(mapping.type)
            outs.append(OutPlan(dds_topic(mapping.from_ros, config.namespace), type_name, qos,
                                route))
        ins = []
        for m in config.mqtt_to_ros:
            target = dds_topic(m.to_ros, config.namespace)
            ins.append(InPlan(InRoute(m.from_mqtt, target, payload=m.payload, strict=m.strict),
                              AUTO if m.type == AUTO else dds_type(m.type),
                              (m.dds_qos or DdsQos()).over(config.profile(m.qos_profile)), m.qos))
        return outs, ins

    async def run(self, hub: HubClient, host: Host) -> None:
        config = self.config
        types_ = await asyncio.to_thread(self._load, host.data_dir)
        bus = DdsBus(config.name, config.domain, config.network, kind="ros2")
        await asyncio.to_thread(bus.open)
        try:
            bridge = DdsBridge(config.name, hub, host, bus, types_, queue_size=config.queue_size,
                               discovery_timeout_s=config.discovery_timeout,
                               max_writers=config.max_writers,
                               sections=("ros_to_mqtt", "mqtt_to_ros"), kind="ros2")
            self._bridge = bridge
            try:
                outs, ins = self.plans(types_, hub.origin)
                for out in outs:
                    bridge.add_out(out)
                for plan in ins:
                    bridge.add_in(plan)
                services: list[Any] = []
                for i, call in enumerate(config.mqtt_to_ros_services):
                    request, response = (types_.support(n) for n in service_types(call.type))
                    services.append(ServiceCaller(call, config.namespace, bridge, request,
                                                  response, f"mqtt_to_ros_services[{i}]"))
                for i, serve in enumerate(config.ros_services_to_mqtt):
                    request, response = (types_.support(n) for n in service_types(serve.type))
                    services.append(ServiceResponder(serve, config.namespace, bridge, request,
                                                     response, config.name,
                                                     f"ros_services_to_mqtt[{i}]"))
            except MappingError as exc:
                raise AdapterError(str(exc)) from exc
            await bridge.serve(*(service.serve() for service in services))
        finally:
            self._stats = self.stats()
            self._bridge = None
            await asyncio.to_thread(bus.close)

    def stats(self) -> dict[str, int]:
        if self._bridge is None:
            return dict(self._stats)
        return self._bridge.stats()
