"""``edgebus check`` parses a ``ros2`` adapter's ``.msg``/``.srv`` files, as the adapter
converts them when it starts: their problems are the configuration's, with the file, line
and column, at the ``msg_files`` entry's YAML path and line. Parsing them loads neither
cyclonedds nor rclpy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.check_command import QUIET, check
from tests.helpers.timeouts import unit

ADAPTER = """\
adapters:
  - type: ros2
    name: robot
    msg_files:
{files}
    ros_to_mqtt:
      - {{from_ros: /status, type: my_pkg/msg/Status, to_mqtt: "ros/{{ros.topic}}"}}
"""


def _adapter(*files: str) -> str:
    return QUIET + ADAPTER.format(files="\n".join(f"      - {file}" for file in files))


def _interfaces(root: Path, status: str, add: str) -> None:
    (root / "my_pkg" / "msg").mkdir(parents=True)
    (root / "my_pkg" / "srv").mkdir(parents=True)
    (root / "my_pkg" / "msg" / "Status.msg").write_text(status)
    (root / "my_pkg" / "srv" / "Add.srv").write_text(add)


def test_interface_file_errors_are_reported_by_check(tmp_path: Path) -> None:
    _interfaces(tmp_path, "int32 x\nflot32[ y\nstring name 'a'\n", "int64 a\nint64 b\n")
    text = _adapter("my_pkg/msg/Status.msg", "my_pkg/srv/Add.srv", "my_pkg/msg/Gone.msg",
                    "Loose.msg")  # fmt: skip
    code, lines = check(tmp_path, text)
    assert code == 2
    assert lines == [
        "edgebus.yaml:7 adapters[0].msg_files[0]: my_pkg/msg/Status.msg:2:1: cannot read"
        " 'flot32[ y' as 'TYPE NAME'",
        "edgebus.yaml:8 adapters[0].msg_files[1]: my_pkg/srv/Add.srv:1:1: a service has one"
        " '---' between request and response",
        "edgebus.yaml:9 adapters[0].msg_files[2]: cannot read 'my_pkg/msg/Gone.msg': no such"
        " file",
        "edgebus.yaml:10 adapters[0].msg_files[3]: expected PACKAGE/msg/Name.msg or"
        " PACKAGE/srv/Name.srv, got 'Loose.msg'",
    ]


def test_every_error_of_a_file_is_reported_with_the_others(tmp_path: Path) -> None:
    _interfaces(tmp_path, "int32 x\nint32 x\nbool flag maybe\n", "int64 a\n---\nint64 sum\n")
    text = _adapter("my_pkg/msg/Status.msg", "my_pkg/srv/Add.srv") + "    max_writers: 0\n"
    code, lines = check(tmp_path, text)
    assert code == 2
    assert lines == [
        "edgebus.yaml:7 adapters[0].msg_files[0]: my_pkg/msg/Status.msg:2:1: duplicate name"
        " 'x'",
        "edgebus.yaml:7 adapters[0].msg_files[0]: my_pkg/msg/Status.msg:3:1: expected true"
        " or false, got 'maybe'",
        "edgebus.yaml:11 adapters[0].max_writers: expected at least 1, got 0",
    ]


_PROBE = """
import json, sys
from click.testing import CliRunner
from gateway.cli import main
result = CliRunner().invoke(main, ["check", "edgebus.yaml"])
print(json.dumps([result.exit_code, result.output, sorted(sys.modules)]))
"""


def test_valid_files_pass_without_loading_the_dds_libraries(tmp_path: Path) -> None:
    _interfaces(tmp_path, "# a status\nint32 x 5\nstring<=8 name\nuint8 OK=0\n",
                "int64 a\nint64 b\n---\nint64 sum\n")  # fmt: skip
    (tmp_path / "edgebus.yaml").write_text(_adapter("my_pkg/msg/Status.msg",
                                                    "my_pkg/srv/Add.srv"))  # fmt: skip
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, capture_output=True,
                          text=True, timeout=unit(60), check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, output, modules = json.loads(done.stdout.splitlines()[-1])
    assert (code, output.strip()) == (0, "edgebus.yaml: OK")
    assert "idl_codegen.ros_msg" in modules
    assert [m for m in modules if m.split(".")[0] in ("cyclonedds", "rclpy")] == []
