"""The ROS 2 adapter's pure side: names, types, QoS profiles, the service header."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from adapters.ros2.codec import (
    dds_topic,
    dds_type,
    ros_topic,
    ros_type,
    service_topics,
    service_types,
    split_header,
    with_header,
)
from adapters.ros2.config import PROFILES, Ros2AdapterConfig
from broker_core.errors import ConfigError
from gateway.config import parse_config


def test_topic_names() -> None:
    assert dds_topic("/chatter") == "rt/chatter"
    assert dds_topic("/robot/cmd_vel") == "rt/robot/cmd_vel"
    assert dds_topic("cmd_vel", "/robot") == "rt/robot/cmd_vel"
    assert dds_topic("cmd_vel", "/") == "rt/cmd_vel"
    assert ros_topic("rt/robot/cmd_vel") == "/robot/cmd_vel"
    assert ros_topic("vehicle_state") is None


def test_type_names() -> None:
    assert dds_type("std_msgs/msg/String") == "std_msgs::msg::dds_::String_"
    assert dds_type("geometry_msgs/Twist") == "geometry_msgs::msg::dds_::Twist_"
    assert ros_type("sensor_msgs::msg::dds_::Imu_") == "sensor_msgs/msg/Imu"
    assert ros_type("vehicle::Speed") == "vehicle::Speed"
    assert service_types("std_srvs/srv/SetBool") == (
        "std_srvs::srv::dds_::SetBool_Request_", "std_srvs::srv::dds_::SetBool_Response_")
    assert service_topics("/add_two_ints") == ("rq/add_two_intsRequest", "rr/add_two_intsReply")
    assert service_topics("status", "/robot") == ("rq/robot/statusRequest",
                                                  "rr/robot/statusReply")


def test_the_request_header_goes_right_after_the_encapsulation() -> None:
    body = b"\x00\x01\x00\x00" + struct.pack("<qq", 2, 3)  # AddTwoInts_Request_ a=2, b=3
    wire = with_header(body, 0xFEDCBA9876543210, 7)
    assert wire == (b"\x00\x01\x00\x00" + struct.pack("<Qq", 0xFEDCBA9876543210, 7)
                    + struct.pack("<qq", 2, 3))
    assert split_header(wire) == (0xFEDCBA9876543210, 7, body)
    big_endian = b"\x00\x00\x00\x00" + struct.pack(">q", 5)
    assert split_header(with_header(big_endian, 1, 2)) == (1, 2, big_endian)
    with pytest.raises(ValueError):
        split_header(b"\x00\x01\x00\x00short")


def test_ros_qos_profiles() -> None:
    assert (PROFILES["default"].reliability, PROFILES["default"].history) == ("reliable", 10)
    assert (PROFILES["sensor_data"].reliability, PROFILES["sensor_data"].history) == (
        "best_effort", 5)
    assert PROFILES["transient_local"].durability == "transient_local"


def _config(text: str) -> Ros2AdapterConfig:
    return parse_config(text, "t.yaml").adapters[0]  # type: ignore[no-any-return]


BASE = """
adapters:
  - type: ros2
    name: robot
    ros_to_mqtt:
      - {from_ros: /imu, type: sensor_msgs/msg/Imu, to_mqtt: "ros/{ros.topic}"}
"""


def test_the_domain_defaults_to_ros_domain_id(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(BASE)
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    assert config.domain == 0
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert config.domain == 42
    assert _config(BASE + "    domain_id: 7\n").domain == 7


def test_profiles_resolve_built_in_and_user_ones() -> None:
    config = _config(BASE + "    qos_profiles: [{name: fast, reliability: best_effort}]\n")
    assert config.profile("sensor_data") == PROFILES["sensor_data"]
    assert config.profile("fast").reliability == "best_effort"
    assert config.profile(None) == PROFILES["default"]


@pytest.mark.parametrize(("extra", "problem"), [
    ("    mqtt_to_ros: [{from_mqtt: x, to_ros: /y, type: std_msgs/String, "
     "qos_profile: nope}]\n", "unknown profile 'nope'"),
    ("    ros_services_to_mqtt: [{from_ros: /s, to_mqtt: x, type: std_msgs/msg/String}]\n",
     "expected a service type"),
    ("    ros_to_mqtt: [{from_ros: 'bad name', type: std_msgs/msg/String, to_mqtt: x}]\n",
     "expected a ROS 2 name"),
    ("    namespace: robot\n", "expected an absolute name"),
])
def test_configuration_errors(extra: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(BASE + extra)
    assert problem in str(caught.value)


NESTED_IDL = """\
module p { module msg { module dds_ {
  struct Empty_ { uint8 structure_needs_at_least_one_member; };
  struct Holder_ { Empty_ e; sequence<Empty_> es; Empty_ two[2]; long x; };
  struct W_ { long a; wstring w; };
  struct Outer_ { sequence<W_> ws; };
}; }; };
"""


def _types(tmp_path: Any) -> Any:
    import idl_codegen

    idl = tmp_path / "p.idl"
    idl.write_text(NESTED_IDL)
    return idl_codegen.load([idl]).types


def test_placeholders_of_nested_empty_messages_are_invisible(tmp_path: Any) -> None:
    from adapters.ros2.adapter import PlaceholderSupport, support_of

    types = _types(tmp_path)
    holder = support_of(types["p::msg::dds_::Holder_"])
    assert isinstance(holder, PlaceholderSupport)
    cdr = holder.cdr_of(b'{"e": {}, "es": [{}, {}], "two": [{}, {}], "x": 3}')
    assert json.loads(holder.json_of(cdr)) == {"e": {}, "es": [{}, {}], "two": [{}, {}],
                                               "x": 3}
    empty = support_of(types["p::msg::dds_::Empty_"])
    assert empty.json_of(empty.cdr_of(b"{}")) == b"{}"
    # the placeholder given explicitly is accepted too
    assert empty.json_of(empty.cdr_of(b'{"structure_needs_at_least_one_member": 0}')) == b"{}"


def test_the_wstring_member_of_a_type(tmp_path: Any) -> None:
    import idl_codegen
    from adapters.ros2.codec import wstring_member

    idl = tmp_path / "p.idl"
    idl.write_text(NESTED_IDL)
    schema = idl_codegen.load([idl]).description
    assert wstring_member(schema, "p::msg::dds_::Outer_") == "ws[].w"
    assert wstring_member(schema, "p::msg::dds_::W_") == "w"
    assert wstring_member(schema, "p::msg::dds_::Holder_") is None
