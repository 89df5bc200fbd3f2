"""A ROS 2 node's DDS side, without ROS: what rmw_cyclonedds puts on the wire.

    python -m tests.helpers.ros2_peer DOMAIN

Written against cyclonedds alone, independent of edgebus's IDL tools: the message
types are declared here by hand with their ROS 2 DDS names (``std_msgs::msg::dds_::
String_``, ...), topics are ``rt/<name>``, services ``rq/<name>Request`` and
``rr/<name>Reply`` whose samples start with rmw_cyclonedds's request header (``guid``:
the client's request writer, ``seq``: its request number), and clients and services
mark their endpoints with ``clientid=...;`` / ``serviceid=...;`` user data.

One JSON command per line on stdin, one JSON reply per line on stdout:

- ``publisher {id, topic, type, profile}`` / ``subscriber {...}``: ``type`` is a ROS 2
  type (``geometry_msgs/msg/Twist``), ``profile`` a ROS 2 QoS profile name;
- ``matched {id, timeout}``; ``publish {id, messages}``; ``take {id, count, timeout}``;
- ``serve_add_two_ints {service}``: a service answering ``sum = a + b``;
- ``serve_trigger {service}``: a std_srvs/srv/Trigger service answering ``success: true``
  and the number of requests it took as ``message``;
- ``call_trigger {id, service, timeout}``: starts a std_srvs/srv/Trigger call;
  ``result {id, timeout}`` waits for its response.
"""

# no "from __future__ import annotations": cyclonedds reads the annotations as objects

import dataclasses
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as t
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration


@dataclass
@annotate.final
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str = ""


@dataclass
@annotate.final
class Empty_(IdlStruct, typename="std_msgs::msg::dds_::Empty_"):
    """rosidl gives an empty message a placeholder member."""

    structure_needs_at_least_one_member: t.uint8 = 0


@dataclass
@annotate.final
class Vector3_(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0


@dataclass
@annotate.final
class Quaternion_(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: t.float64 = 0.0
    y: t.float64 = 0.0
    z: t.float64 = 0.0
    w: t.float64 = 1.0


@dataclass
@annotate.final
class Twist_(IdlStruct, typename="geometry_msgs::msg::dds_::Twist_"):
    linear: Vector3_ = field(default_factory=Vector3_)
    angular: Vector3_ = field(default_factory=Vector3_)


@dataclass
@annotate.final
class Time_(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: t.int32 = 0
    nanosec: t.uint32 = 0


@dataclass
@annotate.final
class Header_(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time_ = field(default_factory=Time_)
    frame_id: str = ""


def _nine() -> list[float]:
    return [0.0] * 9


@dataclass
@annotate.final
class Imu_(IdlStruct, typename="sensor_msgs::msg::dds_::Imu_"):
    header: Header_ = field(default_factory=Header_)
    orientation: Quaternion_ = field(default_factory=Quaternion_)
    orientation_covariance: t.array[t.float64, 9] = field(default_factory=_nine)
    angular_velocity: Vector3_ = field(default_factory=Vector3_)
    angular_velocity_covariance: t.array[t.float64, 9] = field(default_factory=_nine)
    linear_acceleration: Vector3_ = field(default_factory=Vector3_)
    linear_acceleration_covariance: t.array[t.float64, 9] = field(default_factory=_nine)


@dataclass
@annotate.final
class Status_(IdlStruct, typename="my_robot::msg::dds_::Status_"):
    """my_robot/msg/Status.msg: ``string name``, ``uint8 level``, ``float32[3] position``."""

    name: str = ""
    level: t.uint8 = 0
    position: t.array[t.float32, 3] = field(default_factory=lambda: [0.0] * 3)


# services: rmw_cyclonedds's request header, then the request's or response's members
@dataclass
@annotate.final
class AddTwoIntsRequest(IdlStruct, typename="example_interfaces::srv::dds_::AddTwoInts_Request_"):
    guid: t.uint64 = 0
    seq: t.int64 = 0
    a: t.int64 = 0
    b: t.int64 = 0


@dataclass
@annotate.final
class AddTwoIntsResponse(IdlStruct,
                         typename="example_interfaces::srv::dds_::AddTwoInts_Response_"):
    guid: t.uint64 = 0
    seq: t.int64 = 0
    sum: t.int64 = 0


@dataclass
@annotate.final
class TriggerRequest(IdlStruct, typename="std_srvs::srv::dds_::Trigger_Request_"):
    guid: t.uint64 = 0
    seq: t.int64 = 0
    structure_needs_at_least_one_member: t.uint8 = 0


@dataclass
@annotate.final
class TriggerResponse(IdlStruct, typename="std_srvs::srv::dds_::Trigger_Response_"):
    guid: t.uint64 = 0
    seq: t.int64 = 0
    success: bool = False
    message: str = ""


TYPES: dict[str, type] = {
    "std_msgs/msg/Empty": Empty_,
    "std_msgs/msg/String": String_,
    "geometry_msgs/msg/Twist": Twist_,
    "sensor_msgs/msg/Imu": Imu_,
    "my_robot/msg/Status": Status_,
}


def profile(name: str) -> Qos:
    """The ROS 2 QoS profiles as rmw_cyclonedds sets them."""
    if name == "sensor_data":
        return Qos(Policy.Reliability.BestEffort, Policy.Durability.Volatile,
                   Policy.History.KeepLast(5))
    if name == "transient_local":
        return Qos(Policy.Reliability.Reliable(duration(seconds=1)),
                   Policy.Durability.TransientLocal, Policy.History.KeepLast(1))
    return Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.Durability.Volatile,
               Policy.History.KeepLast(10))


def to_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


def from_json(cls: type, value: dict[str, Any]) -> Any:
    hints = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {}
    for name, item in value.items():
        default = hints[name].default_factory  # type: ignore[misc]
        inner = default() if default is not dataclasses.MISSING else None
        kwargs[name] = (from_json(type(inner), item) if dataclasses.is_dataclass(inner)
                        else item)
    return cls(**kwargs)


def service_qos(user_data: str) -> Qos:
    return Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.Durability.Volatile,
               Policy.History.KeepLast(10), Policy.Userdata(user_data.encode()))


class Node:
    def __init__(self, domain: int) -> None:
        self.participant = DomainParticipant(domain)
        self.entities: dict[str, Any] = {}
        self.calls: dict[str, dict[str, Any]] = {}
        self.topics: dict[str, Topic] = {}

    def topic(self, name: str, cls: type) -> Topic:
        if name not in self.topics:
            self.topics[name] = Topic(self.participant, name, cls)
        return self.topics[name]

    def op_publisher(self, id: str, topic: str, type: str, profile_name: str = "default") -> dict[str, Any]:  # noqa: E501
        cls = TYPES[type]
        writer = DataWriter(self.participant, self.topic("rt" + topic, cls),
                            qos=profile(profile_name))
        self.entities[id] = (writer, cls)
        return {}

    def op_subscriber(self, id: str, topic: str, type: str, profile_name: str = "default") -> dict[str, Any]:  # noqa: E501
        cls = TYPES[type]
        reader = DataReader(self.participant, self.topic("rt" + topic, cls),
                            qos=profile(profile_name))
        self.entities[id] = (reader, cls)
        return {}

    def op_matched(self, id: str, timeout: float = 10) -> dict[str, Any]:
        entity, _ = self.entities[id]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            matched = (entity.get_matched_subscriptions() if isinstance(entity, DataWriter)
                       else entity.get_matched_publications())
            if matched:
                return {"matched": len(matched)}
            time.sleep(0.02)
        return {"matched": 0}

    def op_publish(self, id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        writer, cls = self.entities[id]
        for message in messages:
            writer.write(from_json(cls, message))
        return {}

    def op_take(self, id: str, count: int, timeout: float = 10) -> dict[str, Any]:
        reader, _ = self.entities[id]
        got: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            got += [to_json(s) for s in reader.take(N=count) if s.sample_info.valid_data]
            time.sleep(0.01)
        return {"messages": got}

    def op_serve_add_two_ints(self, service: str) -> dict[str, Any]:
        user_data = "serviceid=peer.1;"
        requests = DataReader(self.participant,
                              self.topic(f"rq{service}Request", AddTwoIntsRequest),
                              qos=service_qos(user_data))
        replies = DataWriter(self.participant, self.topic(f"rr{service}Reply", AddTwoIntsResponse),
                             qos=service_qos(user_data))

        def serve() -> None:
            while True:
                for request in requests.take(N=16):
                    if request.sample_info.valid_data:
                        replies.write(AddTwoIntsResponse(guid=request.guid, seq=request.seq,
                                                         sum=request.a + request.b))
                time.sleep(0.005)

        threading.Thread(target=serve, daemon=True).start()
        self.entities[service] = (requests, replies)
        return {}

    def op_serve_trigger(self, service: str) -> dict[str, Any]:
        user_data = "serviceid=peer.3;"
        requests = DataReader(self.participant,
                              self.topic(f"rq{service}Request", TriggerRequest),
                              qos=service_qos(user_data))
        replies = DataWriter(self.participant, self.topic(f"rr{service}Reply", TriggerResponse),
                             qos=service_qos(user_data))

        def serve() -> None:
            taken = 0
            while True:
                for request in requests.take(N=16):
                    if request.sample_info.valid_data:
                        taken += 1
                        replies.write(TriggerResponse(guid=request.guid, seq=request.seq,
                                                      success=True, message=str(taken)))
                time.sleep(0.005)

        threading.Thread(target=serve, daemon=True).start()
        self.entities[service] = (requests, replies)
        return {}

    def op_call_trigger(self, id: str, service: str, timeout: float = 10) -> dict[str, Any]:
        user_data = "clientid=peer.2;"
        requests = DataWriter(self.participant, self.topic(f"rq{service}Request", TriggerRequest),
                              qos=service_qos(user_data))
        replies = DataReader(self.participant, self.topic(f"rr{service}Reply", TriggerResponse),
                             qos=service_qos(user_data))
        guid = requests.get_instance_handle() & ((1 << 64) - 1)
        call: dict[str, Any] = {"done": threading.Event()}
        self.calls[id] = call

        def run() -> None:
            deadline = time.monotonic() + timeout
            # the service is available once its request reader and reply writer matched
            while time.monotonic() < deadline and not (
                    requests.get_matched_subscriptions() and replies.get_matched_publications()):
                time.sleep(0.01)
            requests.write(TriggerRequest(guid=guid, seq=1))
            while time.monotonic() < deadline and "response" not in call:
                for reply in replies.take(N=16):
                    if reply.sample_info.valid_data and reply.guid == guid and reply.seq == 1:
                        call["response"] = {"success": reply.success, "message": reply.message}
                time.sleep(0.005)
            call["done"].set()

        threading.Thread(target=run, daemon=True).start()
        self.entities[id] = (requests, replies)
        return {}

    def op_result(self, id: str, timeout: float = 10) -> dict[str, Any]:
        call = self.calls[id]
        call["done"].wait(timeout)
        return {"response": call.get("response")}


if __name__ == "__main__":
    from tests.helpers.dds_peer import serve

    serve(Node(int(sys.argv[1])))
