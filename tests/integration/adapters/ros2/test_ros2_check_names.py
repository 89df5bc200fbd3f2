"""``edgebus check`` on the ROS 2 names of a ``ros2`` adapter's mappings (real files).

- A capture (``{robot}``) is rendered in ``mqtt_to_ros.to_ros`` only. In a service's
  ``to_ros``, a served service's ``from_ros`` or a read topic's ``from_ros`` it is a
  configuration error at its line. Before, check accepted it and the adapter used it
  literally (DDS topics ``rq/{robot}/resetRequest``): calls failed as "not available".
- The glob patterns the documentation promises for ``ros_to_mqtt.from_ros`` are
  accepted: ``/robot/*``, ``/*/cmd_vel``, ``?``, ``[...]``. Before, ``/robot/*`` was
  refused (a level had to start with a letter).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

ADAPTER = """\
adapters:
  - type: ros2
    name: robot
    domain_id: 7
    ros_to_mqtt:
      - from_ros: {from_ros}
        type: std_msgs/msg/String
        to_mqtt: ros/{{ros.topic}}
    mqtt_to_ros:
      - from_mqtt: cmd/{{robot}}
        to_ros: /{{robot}}/cmd
        type: std_msgs/msg/String
    mqtt_to_ros_services:
      - from_mqtt: call/{{robot}}/reset
        to_ros: {to_ros}
        type: std_srvs/srv/Trigger
    ros_services_to_mqtt:
      - from_ros: {served}
        to_mqtt: svc/{{ros.service}}
        type: std_srvs/srv/Trigger
"""


def _config(tmp_path: Path, from_ros: str, to_ros: str, served: str) -> str:
    return (f"data_dir: {tmp_path / 'data'}\n" + QUIET
            + ADAPTER.format(from_ros=from_ros, to_ros=to_ros, served=served))


def _line(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1)
                if line.strip(" -").startswith(start))


def test_a_capture_where_it_is_not_rendered_is_a_configuration_error(tmp_path: Path) -> None:
    text = _config(tmp_path, "/{robot}/status", "/{robot}/reset", "/{robot}/get_status")
    status, lines = check(tmp_path, text)
    assert status != 0, lines
    output = "\n".join(lines)
    for path, name, key in (
        ("ros_to_mqtt[0].from_ros", "/{robot}/status", "from_ros: /{robot}/status"),
        ("mqtt_to_ros_services[0].to_ros", "/{robot}/reset", "to_ros: /{robot}/reset"),
        ("ros_services_to_mqtt[0].from_ros", "/{robot}/get_status",
         "from_ros: /{robot}/get_status"),
    ):
        assert (f"edgebus.yaml:{_line(text, key)} adapters[0].{path}: captures ({{name}}) are"
                f" not rendered here, only in mqtt_to_ros to_ros: expected a ROS 2 name like"
                f" /robot/cmd_vel, got {name!r}") in output, output
    assert "mqtt_to_ros[0]" not in output  # rendered there


def test_documented_glob_patterns_pass_the_check(tmp_path: Path) -> None:
    for pattern in ("/robot/*", "/*/cmd_vel", "/cam?/image_raw", "/arm_[lr]/joint_states",
                    "robot/*"):
        status, lines = check(tmp_path, _config(tmp_path, pattern, "/reset", "/get_status"))
        assert status == 0, (pattern, lines)


def test_a_glob_is_no_service_name(tmp_path: Path) -> None:
    text = _config(tmp_path, "/robot/*", "/robot/*", "/get_status")
    status, lines = check(tmp_path, text)
    assert status != 0
    assert (f"edgebus.yaml:{_line(text, 'to_ros: /robot/*')} adapters[0]."
            "mqtt_to_ros_services[0].to_ros: expected a ROS 2 name like /robot/cmd_vel, got"
            " '/robot/*'") in "\n".join(lines), lines
