"""A ROS 2 type with a ``wstring`` member is refused by ``edgebus check`` (real files),
at the mapping's ``type`` line, naming the member.

rmw_cyclonedds puts a wstring on the wire as a uint32 length and one 4-byte UTF-16 code
unit per character (legacy CDR with Linux's wchar_t); the adapter's codec writes and
reads it as a UTF-8 string. Before, such a mapping passed the check and corrupted the
field both ways, silently.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check


def test_a_type_with_a_wstring_is_refused_at_its_mapping(tmp_path: Path) -> None:
    msg = tmp_path / "my_pkg" / "msg"
    msg.mkdir(parents=True)
    (msg / "Named.msg").write_text("wstring name\nint32 after\n")
    (msg / "Fleet.msg").write_text("string site\nNamed[] robots\n")
    (msg / "Plain.msg").write_text("string name\n")
    text = f"""\
data_dir: {tmp_path / 'data'}
{QUIET}adapters:
  - type: ros2
    name: robot
    domain_id: 7
    msg_files: [{msg / 'Named.msg'}, {msg / 'Fleet.msg'}, {msg / 'Plain.msg'}]
    ros_to_mqtt:
      - from_ros: /named
        type: my_pkg/msg/Named
        to_mqtt: ros/named
      - from_ros: /plain
        type: my_pkg/msg/Plain
        to_mqtt: ros/plain
    mqtt_to_ros:
      - from_mqtt: fleet
        to_ros: /fleet
        type: my_pkg/msg/Fleet
"""
    status, lines = check(tmp_path, text)
    assert status != 0, lines
    output = "\n".join(lines)
    numbered = text.splitlines()
    named = numbered.index("        type: my_pkg/msg/Named") + 1
    fleet = numbered.index("        type: my_pkg/msg/Fleet") + 1
    assert (f"edgebus.yaml:{named} adapters[0].ros_to_mqtt[0].type: ROS 2 type"
            f" 'my_pkg/msg/Named' (declared in {msg / 'Named.msg'}) is not supported") in output
    assert "is not supported: member 'name' is a wstring; rmw_cyclonedds puts" in output
    assert (f"edgebus.yaml:{fleet} adapters[0].mqtt_to_ros[0].type: ROS 2 type"
            f" 'my_pkg/msg/Fleet'") in output, output
    assert "member 'robots[].name' is a wstring" in output
    assert "ros_to_mqtt[1]" not in output
