"""``edgebus check`` parses a ``ros2`` adapter's ``idl_files`` as the ``dds`` adapter's check
does (the same code, ``adapters.dds.config.IdlSchema``), together with the built-in and
``msg_files`` interfaces the adapter loads beside them at start: an IDL error (with the IDL
file, line and column), a type no file declares, a type using a union Cyclone DDS corrupts
(a ``short`` discriminator, a negative case label, a ``default`` case) and a ``to_mqtt``
template naming a member the type lacks are errors with the YAML file, line and path.
Before, the check said OK and the adapter failed at start and backed off. The check
imports neither cyclonedds nor rclpy (``-X importtime``).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import check_idl_lightly

TYPES = """\
module u { module msg { module dds_ {
  union Short switch (short) { case -1: long long neg; case 7: unsigned short uu;
                               default: boolean flag; };
  union Long switch (long) { case -1: long long neg; case 7: unsigned short uu;
                             default: boolean flag; };
  struct S_ { int32 id; Short u; };
  struct L_ { int32 id; Long u; };
}; }; };
"""

WHY = (
    "has the negative case label -1 ('neg') on a short discriminator and a default case:"
    " Cyclone DDS reads such samples as the default case and corrupts them. Use a long"
    " discriminator, non-negative labels, or no default case"
)


def _check(tmp_path: Path, idl: str, mappings: str, extra: str = "") -> tuple[int, str, list[str]]:
    """``edgebus check`` (a subprocess, ``-X importtime``) on a ros2 adapter with the IDL
    file ``types.idl`` holding ``idl`` and the given mappings; the exit status, the output
    without the import lines, and the configuration's lines."""
    (tmp_path / "types.idl").write_text(idl, encoding="utf-8")
    text = f"""\
data_dir: {tmp_path / "data"}
listeners: [{{type: tcp, bind: "127.0.0.1:0"}}]
api: {{enabled: false}}
adapters:
  - type: ros2
    name: robot
    idl_files: [{tmp_path / "types.idl"}]
{mappings}{extra}"""
    config = tmp_path / "edgebus.yaml"
    config.write_text(text, encoding="utf-8")
    status, output = check_idl_lightly(config)
    return status, output, text.splitlines()


def _line(lines: list[str], start: str, nth: int = 0) -> int:
    return [n for n, line in enumerate(lines, 1) if line.strip().startswith(start)][nth]


def test_an_idl_error_is_reported_with_idl_file_line_column_and_yaml_path(
        tmp_path: Path) -> None:
    status, output, lines = _check(
        tmp_path, "module u { module msg {\n  struct S_ { int32 id };\n}; };\n",
        "    ros_to_mqtt:\n      - {from_ros: /s, type: u/msg/S, to_mqtt: s}\n")
    assert status == 2, output
    idl = tmp_path / "types.idl"
    assert (f"edgebus.yaml:{_line(lines, 'idl_files:')} adapters[0].idl_files[0]: {idl}:2:24:"
            " expected ';' after member declaration, got '}'") in output, output
    assert "OK" not in output


def test_a_union_cyclone_corrupts_an_unknown_type_and_a_member_are_reported(
        tmp_path: Path) -> None:
    mappings = """\
    ros_to_mqtt:
      - from_ros: /s
        type: u/msg/S
        to_mqtt: "ros/{ros.topic}"
      - from_ros: /l
        type: u/msg/L
        to_mqtt: "ros/{nosuch}"
      - from_ros: /n
        type: u/msg/Nope
        to_mqtt: n
    mqtt_to_ros:
      - from_mqtt: cmd
        to_ros: /cmd
        type: u/msg/S
"""
    status, output, lines = _check(tmp_path, TYPES, mappings, "    max_writers: 0\n")
    assert status == 2, output
    idl = tmp_path / "types.idl"
    union = (f"is not supported: union 'u::msg::dds_::Short' (used by 'u::msg::dds_::S_',"
             f" declared in {idl}) {WHY}")
    assert (f"edgebus.yaml:{_line(lines, 'type: u/msg/S')} adapters[0].ros_to_mqtt[0].type:"
            f" ROS 2 type 'u/msg/S' {union}") in output, output
    member = _line(lines, 'to_mqtt: "ros/{nosuch}')
    assert (f"edgebus.yaml:{member}"
            " adapters[0].ros_to_mqtt[1].to_mqtt: topic template 'ros/{nosuch}':"
            " u::msg::dds_::L_ has no member 'nosuch'") in output, output
    assert (f"edgebus.yaml:{_line(lines, 'type: u/msg/Nope')} adapters[0].ros_to_mqtt[2].type:"
            " no definition of ROS 2 type 'u/msg/Nope': add its .msg/.srv file to msg_files,"
            " or an IDL file declaring u::msg::dds_::Nope_ to idl_files") in output, output
    assert (f"edgebus.yaml:{_line(lines, 'type: u/msg/S', 1)} adapters[0].mqtt_to_ros[0].type:"
            f" ROS 2 type 'u/msg/S' {union}") in output, output
    # reported with the adapter's other problems (checks_as_written)
    assert (f"edgebus.yaml:{_line(lines, 'max_writers:')} adapters[0].max_writers:"
            " expected at least 1, got 0") in output, output


def test_the_union_over_a_long_discriminator_and_built_in_types_pass(tmp_path: Path) -> None:
    mappings = """\
    ros_to_mqtt:
      - {from_ros: /l, type: u/msg/L, to_mqtt: "ros/{ros.topic}/{id}"}
      - {from_ros: /imu, type: sensor_msgs/msg/Imu, to_mqtt: "imu/{header.frame_id}"}
    mqtt_to_ros_services:
      - {from_mqtt: add, to_ros: /add, type: example_interfaces/srv/AddTwoInts}
"""
    status, output, _ = _check(tmp_path, TYPES, mappings)
    assert status == 0, output
    assert output.strip().endswith("edgebus.yaml: OK"), output


def test_a_msg_file_naming_a_type_no_file_defines_is_reported_at_its_entry(
        tmp_path: Path) -> None:
    (tmp_path / "my_pkg" / "msg").mkdir(parents=True)
    (tmp_path / "my_pkg" / "msg" / "Status.msg").write_text("other_pkg/Thing t\nint32 x\n")
    mappings = f"""\
    msg_files: [{tmp_path / "my_pkg" / "msg" / "Status.msg"}]
    ros_to_mqtt:
      - {{from_ros: /s, type: my_pkg/msg/Status, to_mqtt: s}}
      - {{from_ros: /l, type: u/msg/L, to_mqtt: l}}
"""
    status, output, lines = _check(tmp_path, TYPES, mappings)
    assert status == 2, output
    assert (f"edgebus.yaml:{_line(lines, 'msg_files:')} adapters[0].msg_files[0]:"
            f" {tmp_path / 'my_pkg' / 'msg' / 'Status.msg'} (as IDL:"
            " my_pkg/msg/dds_/Status_.idl):4:1: cannot find include file"
            ' "other_pkg/msg/dds_/Thing_.idl"') in output, output
