"""``edgebus check`` on ``.msg`` files whose defaults or constants do not fit their type
(real files): each is reported at its ``.msg`` line, and array defaults are checked.

Before, an out-of-range integer (``uint8 level 300``, ``int8 C=200``) or an overlong
bounded string default was reported at a line and column of the generated IDL, and an
array default of the wrong length (``float32[3] arr [1.0, 2.0]``) passed: array defaults
were dropped without a check.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check

EDGE = """\
uint8 level 300
int8 C=200
string<=3 s "toolong"
float32[3] arr [1.0, 2.0]
uint8[<=2] b [1, 2, 3]
int16[2] small [1, 70000]
float32 f 1e39
int32[3] good [1, 2, 3]
string<=4 fits "abcd"
"""


def _check(tmp_path: Path, name: str, msg_text: str) -> tuple[Path, str, int, list[str]]:
    """``edgebus check`` of a ros2 adapter reading ``my_pkg/msg/<name>`` (the file
    holding ``msg_text``): the file, the configuration, the status and the lines."""
    msg = tmp_path / "my_pkg" / "msg" / f"{name}.msg"
    msg.parent.mkdir(parents=True)
    msg.write_text(msg_text)
    text = f"""\
data_dir: {tmp_path / 'data'}
{QUIET}adapters:
  - type: ros2
    name: robot
    domain_id: 7
    msg_files: [{msg}]
    ros_to_mqtt:
      - from_ros: /{name.lower()}
        type: my_pkg/msg/{name}
        to_mqtt: ros/{name.lower()}
"""
    status, lines = check(tmp_path, text)
    return msg, text, status, lines


def test_msg_defaults_that_do_not_fit_are_reported_at_their_msg_line(tmp_path: Path) -> None:
    msg, text, status, lines = _check(tmp_path, "Edge", EDGE)
    assert status != 0, lines
    at = f"edgebus.yaml:{text.splitlines().index(f'    msg_files: [{msg}]') + 1}" \
         f" adapters[0].msg_files[0]: {msg}"
    assert lines == [
        f"{at}:1:1: 300 does not fit in uint8 (0..255)",
        f"{at}:2:1: 200 does not fit in int8 (-128..127)",
        f"{at}:3:1: the value 'toolong' (7 bytes in UTF-8) is longer than the bound of"
        " string<=3",
        f"{at}:4:1: the array default has 2 elements, the array [3] has 3",
        f"{at}:5:1: the array default has 3 elements, more than the bound 2",
        f"{at}:6:1: 70000 does not fit in int16 (-32768..32767)",
        f"{at}:7:1: 1e39 does not fit in float32",
    ], lines


def test_fitting_array_defaults_pass(tmp_path: Path) -> None:
    *_, status, lines = _check(
        tmp_path,
        "Fine",
        "int32[3] good [1, 2, 3]\nstring<=3[<=2] names ['ab', \"c,d\"]\n"
        "float64[] any [0.5]\nstring<=4 fits \"abcd\"\n",
    )
    assert status == 0, lines
