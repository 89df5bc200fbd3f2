"""The ros2 adapter against a ROS 2 node's DDS side (tests/helpers/ros2_peer.py: exact
ROS 2 topic names, type names, QoS and rmw_cyclonedds's service header), MQTT through
paho. One gateway and one peer for the module, in a domain of their own."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.helpers.dds import NETWORK_YAML, DdsPeer, domain_id, gateway_matched, unique
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.broker.support import Clients, wait_until

NAMES = ("globbed", "empty", "empty_in", "trigger", "chatter", "chatter_in", "cmd_vel", "imu",
         "imu_in", "add_two_ints", "get_status", "robot", "status", "nobody")
STATUS_MSG = ("# a message of the user's own package\n"
              "string name\nuint8 level\nfloat32[3] position\n")

CONFIG = """
adapters:
  - type: ros2
    name: robot
    domain_id: {domain}
    namespace: /{robot}
    msg_files: [{msg_file}]
{network}    ros_to_mqtt:
      - from_ros: /{status}
        type: my_robot/msg/Status
        to_mqtt: ros/status/{{name}}
      - from_ros: /{globbed}/*
        type: std_msgs/msg/String
        to_mqtt: glob/{{ros.topic}}
      - from_ros: /{empty}
        type: std_msgs/msg/Empty
        to_mqtt: ros/{{ros.topic}}
      - from_ros: /{chatter}
        type: std_msgs/msg/String
        to_mqtt: ros/{{ros.topic}}
      - from_ros: /{cmd_vel}
        type: geometry_msgs/msg/Twist
        to_mqtt: ros/{{ros.topic}}
      - from_ros: /{imu}
        type: sensor_msgs/msg/Imu
        to_mqtt: ros/imu/{{header.frame_id}}
        qos_profile: sensor_data
    mqtt_to_ros:
      - from_mqtt: to_ros/empty
        to_ros: /{empty_in}
        type: std_msgs/msg/Empty
      - from_mqtt: to_ros/chatter
        to_ros: /{chatter_in}
        type: std_msgs/msg/String
      - from_mqtt: to_ros/{{robot}}/cmd_vel
        to_ros: /{{robot}}/cmd_vel
        type: geometry_msgs/msg/Twist
      - from_mqtt: to_ros/imu
        to_ros: {imu_in}
        type: sensor_msgs/msg/Imu
        qos_profile: sensor_data
    mqtt_to_ros_services:
      - from_mqtt: call/trigger
        to_ros: /{trigger}
        type: std_srvs/srv/Trigger
      - from_mqtt: call/add_two_ints
        to_ros: /{add_two_ints}
        type: example_interfaces/srv/AddTwoInts
        timeout: 10s
      - from_mqtt: call/nobody
        to_ros: /{nobody}
        type: std_srvs/srv/Trigger
    ros_services_to_mqtt:
      - from_ros: /{get_status}
        to_mqtt: svc/{{ros.service}}
        type: std_srvs/srv/Trigger
"""


@dataclass
class Ros:
    gw: RunningGateway
    peer: DdsPeer
    names: dict[str, str]

    def stats(self) -> dict[str, Any]:
        return self.gw.call(lambda: self.gw.gateway.adapters.status("robot"))["component_stats"]


@pytest.fixture(scope="module")
def ros(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ros]:
    domain = domain_id()
    names = {name: unique(name) for name in NAMES}
    msg_file = tmp_path_factory.mktemp("msgs") / "my_robot" / "msg" / "Status.msg"
    msg_file.parent.mkdir(parents=True)
    msg_file.write_text(STATUS_MSG)
    config = CONFIG.format(domain=domain, network=NETWORK_YAML, msg_file=msg_file, **names)
    with running_gateway(tmp_path_factory.mktemp("ros2"), config) as gw, \
            DdsPeer(domain, "tests.helpers.ros2_peer") as peer:
        wait_until(lambda: gw.call(lambda: gw.gateway.adapters.status("robot"))["state"]
                   == "running", unit(15), "the ros2 adapter runs")
        yield Ros(gw, peer, names)


@pytest.fixture
def clients(ros: Ros) -> Iterator[Clients]:
    factory = Clients(ros.gw)
    try:
        yield factory
    finally:
        factory.close_all()


def publisher(ros: Ros, topic: str, ros_type: str, profile: str = "default") -> str:
    ros.peer.call("publisher", id=topic, topic=topic, type=ros_type, profile_name=profile)
    assert ros.peer.call("matched", id=topic, timeout=unit(10))["matched"] >= 1
    gateway_matches(ros, "reader", topic)
    return topic


def subscriber(ros: Ros, topic: str, ros_type: str, profile: str = "default") -> str:
    ros.peer.call("subscriber", id=topic, topic=topic, type=ros_type, profile_name=profile)
    assert ros.peer.call("matched", id=topic, timeout=unit(10))["matched"] >= 1
    gateway_matches(ros, "writer", topic)
    return topic


def gateway_matches(ros: Ros, endpoint: str, topic: str) -> None:
    """Waits until the gateway's ``endpoint`` of ROS ``topic`` (DDS ``rt/...``) has matched
    the peer's, which may have seen the gateway's first."""
    wait_until(lambda: gateway_matched(ros.gw, "robot", endpoint, f"rt{topic}"), unit(10),
               f"the gateway's {endpoint} of {topic} matches the peer")


TWIST = {"linear": {"x": 0.5, "y": 0.0, "z": 0.0}, "angular": {"x": 0.0, "y": 0.0, "z": -1.25}}
IMU = {
    "header": {"stamp": {"sec": 1700000000, "nanosec": 123456789}, "frame_id": "imu_link"},
    "orientation": {"x": 0.0, "y": 0.0, "z": 0.7071067811865476, "w": 0.7071067811865476},
    "orientation_covariance": [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01],
    "angular_velocity": {"x": 0.001, "y": -0.002, "z": 0.5},
    "angular_velocity_covariance": [-1.0] + [0.0] * 8,
    "linear_acceleration": {"x": 0.1, "y": 0.2, "z": 9.80665},
    "linear_acceleration_covariance": [0.0] * 9,
}


def floats(value: Any) -> Any:
    """JSON with every number as a float (the peer gives ints where they were given)."""
    if isinstance(value, dict):
        return {k: floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [floats(v) for v in value]
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else value


def test_std_msgs_string_both_ways(ros: Ros, clients: Clients) -> None:
    chatter, chatter_in = ros.names["chatter"], ros.names["chatter_in"]
    sub = clients.subscriber(5, f"ros/{chatter}", 1)
    publisher(ros, f"/{chatter}", "std_msgs/msg/String")
    ros.peer.call("publish", id=f"/{chatter}", messages=[{"data": "hello from ROS \u2713"}])
    message = sub.expect_message(unit(10))
    assert json.loads(message.payload) == {"data": "hello from ROS \u2713"}
    user = dict(message.properties.UserProperty)
    assert user["ros.type"] == "std_msgs/msg/String"
    assert user["dds.type"] == "std_msgs::msg::dds_::String_"
    subscriber(ros, f"/{chatter_in}", "std_msgs/msg/String")
    clients.connect(5).publish("to_ros/chatter", b'{"data": "hello from MQTT"}', 1)
    taken = ros.peer.call("take", id=f"/{chatter_in}", count=1, timeout=unit(10))["messages"]
    assert taken == [{"data": "hello from MQTT"}]


def test_geometry_msgs_twist_both_ways(ros: Ros, clients: Clients) -> None:
    cmd_vel, robot = ros.names["cmd_vel"], ros.names["robot"]
    sub = clients.subscriber(5, f"ros/{cmd_vel}", 1)
    publisher(ros, f"/{cmd_vel}", "geometry_msgs/msg/Twist")
    ros.peer.call("publish", id=f"/{cmd_vel}", messages=[TWIST])
    assert json.loads(sub.expect_message(unit(10)).payload) == TWIST
    # a capture in the ROS name: to_ros/<robot>/cmd_vel -> /<robot>/cmd_vel; the writer
    # exists from the first message on (that one may go before the subscriber matched)
    topic = f"/{robot}/cmd_vel"
    ros.peer.call("subscriber", id=topic, topic=topic, type="geometry_msgs/msg/Twist")
    publisher_ = clients.connect(5)
    publisher_.publish(f"to_ros/{robot}/cmd_vel", json.dumps(TWIST).encode(), 1)
    assert ros.peer.call("matched", id=topic, timeout=unit(10))["matched"] == 1
    gateway_matches(ros, "writer", topic)
    publisher_.publish(f"to_ros/{robot}/cmd_vel", json.dumps(TWIST).encode(), 1)
    taken = ros.peer.call("take", id=topic, count=2, timeout=unit(3))["messages"]
    assert taken in ([TWIST], [TWIST, TWIST])


def test_sensor_msgs_imu_both_ways_with_the_sensor_data_profile(ros: Ros,
                                                                clients: Clients) -> None:
    imu, imu_in, robot = ros.names["imu"], ros.names["imu_in"], ros.names["robot"]
    sub = clients.subscriber(5, "ros/imu/#", 1)
    publisher(ros, f"/{imu}", "sensor_msgs/msg/Imu", "sensor_data")
    ros.peer.call("publish", id=f"/{imu}", messages=[IMU])
    message = sub.expect_message(unit(10))
    assert message.topic == "ros/imu/imu_link"
    got = json.loads(message.payload)
    assert got == floats(IMU) | {"header": IMU["header"]}
    assert math.isclose(got["linear_acceleration"]["z"], 9.80665)
    # a relative name resolves in the adapter's namespace: imu_in -> /<robot>/imu_in
    subscriber(ros, f"/{robot}/{imu_in}", "sensor_msgs/msg/Imu", "sensor_data")
    clients.connect(5).publish("to_ros/imu", json.dumps(IMU).encode(), 1)
    taken = ros.peer.call("take", id=f"/{robot}/{imu_in}", count=1, timeout=unit(10))
    assert [floats(m) | {"header": IMU["header"]} for m in taken["messages"]] == [
        floats(IMU) | {"header": IMU["header"]}]


def test_a_ros2_service_called_over_mqtt5(ros: Ros, clients: Clients) -> None:
    service = f"/{ros.names['add_two_ints']}"
    ros.peer.call("serve_add_two_ints", service=service)
    caller = clients.connect(5)
    assert caller.subscribe("replies/add", 1) == [1]

    def call(a: int, b: int, correlation: bytes) -> Any:
        props = Properties(PacketTypes.PUBLISH)
        props.ResponseTopic = "replies/add"
        props.CorrelationData = correlation
        caller.publish("call/add_two_ints", json.dumps({"a": a, "b": b}).encode(), 1,
                       properties=props)
        return caller.expect_message(unit(15))

    # until the adapter discovered the peer's service, a call is answered with an error
    first = None
    deadline = time.monotonic() + unit(15)
    while time.monotonic() < deadline:
        first = call(20, 22, b"first")
        if "error" not in json.loads(first.payload):
            break
        assert "not available" in json.loads(first.payload)["error"]
        time.sleep(0.1)
    assert first is not None
    assert json.loads(first.payload) == {"sum": 42}
    assert first.properties.CorrelationData == b"first"
    second = call(-5, 3, b"\x00\x01second")
    assert json.loads(second.payload) == {"sum": -2}
    assert second.properties.CorrelationData == b"\x00\x01second"
    assert dict(second.properties.UserProperty)["ros.type"] == "example_interfaces/srv/AddTwoInts"
    bad = call(2**63, 1, b"bad")
    assert "out of range for int64" in json.loads(bad.payload)["error"]


def test_an_mqtt5_responder_exposed_as_a_ros2_service(ros: Ros, clients: Clients) -> None:
    service = ros.names["get_status"]
    responder = clients.subscriber(5, f"svc/{service}", 1)
    ros.peer.call("call_trigger", id="status", service=f"/{service}", timeout=unit(20))
    request = responder.expect_message(unit(20))
    assert json.loads(request.payload) == {}  # rosidl's placeholder member is not shown
    props = Properties(PacketTypes.PUBLISH)
    props.CorrelationData = request.properties.CorrelationData
    reply = {"success": True, "message": "all systems nominal"}
    clients.connect(5).publish(request.properties.ResponseTopic, json.dumps(reply).encode(), 1,
                               properties=props)
    assert ros.peer.call("result", id="status", timeout=unit(20))["response"] == reply


def test_an_empty_message_is_an_empty_json_object_both_ways(ros: Ros,
                                                             clients: Clients) -> None:
    """rosidl's placeholder member of an empty message (``structure_needs_at_least_one_
    member``) is not seen from MQTT: ``{}`` goes out, ``{}`` is accepted."""
    empty, empty_in = ros.names["empty"], ros.names["empty_in"]
    sub = clients.subscriber(5, f"ros/{empty}", 1)
    publisher(ros, f"/{empty}", "std_msgs/msg/Empty")
    ros.peer.call("publish", id=f"/{empty}", messages=[{}])
    assert json.loads(sub.expect_message(unit(10)).payload) == {}
    subscriber(ros, f"/{empty_in}", "std_msgs/msg/Empty")
    clients.connect(5).publish("to_ros/empty", b"{}", 1)
    taken = ros.peer.call("take", id=f"/{empty_in}", count=1, timeout=unit(10))["messages"]
    assert taken == [{"structure_needs_at_least_one_member": 0}]


def test_a_service_with_an_empty_request_called_with_an_empty_object(
        ros: Ros, clients: Clients) -> None:
    service = f"/{ros.names['trigger']}"
    ros.peer.call("serve_trigger", service=service)
    caller = clients.connect(5)
    assert caller.subscribe("replies/trigger", 1) == [1]
    reply = None
    deadline = time.monotonic() + unit(15)
    while time.monotonic() < deadline:  # until the adapter discovered the service
        props = Properties(PacketTypes.PUBLISH)
        props.ResponseTopic = "replies/trigger"
        props.CorrelationData = b"t"
        caller.publish("call/trigger", b"{}", 1, properties=props)
        reply = json.loads(caller.expect_message(unit(15)).payload)
        if "not available" not in reply.get("error", ""):
            break
        time.sleep(0.1)
    assert reply == {"success": True, "message": "1"}


def test_a_glob_pattern_reads_every_discovered_topic_it_matches(ros: Ros,
                                                                clients: Clients) -> None:
    """``from_ros: /<name>/*`` (the documented form) reads each ROS topic below
    ``/<name>`` once a publisher is discovered."""
    globbed = ros.names["globbed"]
    sub = clients.subscriber(5, f"glob/{globbed}/+", 1)
    for leaf in ("left", "right"):
        publisher(ros, f"/{globbed}/{leaf}", "std_msgs/msg/String")
        ros.peer.call("publish", id=f"/{globbed}/{leaf}", messages=[{"data": leaf}])
        message = sub.expect_message(unit(10))
        assert (message.topic, json.loads(message.payload)) == (
            f"glob/{globbed}/{leaf}", {"data": leaf})


def test_a_message_of_the_users_own_msg_file(ros: Ros, clients: Clients) -> None:
    status = ros.names["status"]
    sub = clients.subscriber(5, "ros/status/+", 1)
    publisher(ros, f"/{status}", "my_robot/msg/Status")
    message = {"name": "arm", "level": 3, "position": [0.5, -1.25, 2.0]}
    ros.peer.call("publish", id=f"/{status}", messages=[message])
    got = sub.expect_message(unit(10))
    assert (got.topic, json.loads(got.payload)) == ("ros/status/arm", message)
    assert dict(got.properties.UserProperty)["ros.type"] == "my_robot/msg/Status"


def test_a_service_nobody_serves_is_answered_with_an_error(ros: Ros, clients: Clients) -> None:
    caller = clients.connect(5)
    assert caller.subscribe("replies/nobody", 1) == [1]
    props = Properties(PacketTypes.PUBLISH)
    props.ResponseTopic = "replies/nobody"
    props.CorrelationData = b"x"
    caller.publish("call/nobody", b"{}", 1, properties=props)
    reply = caller.expect_message(unit(10))
    assert "not available" in json.loads(reply.payload)["error"]
    assert dict(reply.properties.UserProperty)["ros2.error"].startswith("the service is not")
    assert reply.properties.CorrelationData == b"x"
