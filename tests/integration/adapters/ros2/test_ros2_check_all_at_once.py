"""``edgebus check`` reports every problem of a ``ros2`` adapter's interfaces in one run, as
the ``dds`` adapter's check does (the same code, ``adapters.dds.config.IdlSchema``): an
``idl_files`` entry with an IDL error does not keep the other files' types from being
checked against the mappings (a union Cyclone DDS corrupts, a member a ``to_mqtt``
template names, a type no file declares: said to be so "not counting" the broken file,
which might declare it), and a ``msg_files`` entry that cannot be converted does not keep
the IDL and the mappings from being checked (a type it would define, or a ``.msg`` file
including its IDL, is not reported again). Before, the first stage with an error hid the
next ones: a broken ``msg_files`` entry hid every IDL and mapping error, a broken IDL file
the mapping errors. Also for the ``dds`` adapter, whose check had the second stage. No
cyclonedds or rclpy import (``-X importtime``).
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import check_idl_lightly

BROKEN = "module u { module msg { module dds_ {\n struct S_ { long x }; }; }; };\n"

GOOD = """\
module u { module msg { module dds_ {
  union Short switch (short) { case -1: long neg; case 1: long pos; default: long other; };
  struct S_ { Short v; };
  struct L_ { long a; };
}; }; };
"""

WHY = (
    "union 'u::msg::dds_::Short' (used by 'u::msg::dds_::S_', declared in u/types.idl) has"
    " the negative case label -1 ('neg') on a short discriminator and a default case"
)


def _check(tmp_path: Path, adapter: str) -> tuple[int, str, list[str]]:
    """``edgebus check`` (a subprocess, ``-X importtime``, in ``tmp_path``) on one
    adapter; ``types.idl`` (broken) and ``u/types.idl`` are written first. The exit
    status, the output without the import lines, and the configuration's lines."""
    (tmp_path / "u").mkdir(exist_ok=True)
    (tmp_path / "types.idl").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "u" / "types.idl").write_text(GOOD, encoding="utf-8")
    text = f"""\
data_dir: {tmp_path / "data"}
listeners: [{{type: tcp, bind: "127.0.0.1:0"}}]
api: {{enabled: false}}
adapters:
{adapter}"""
    config = tmp_path / "edgebus.yaml"
    config.write_text(text, encoding="utf-8")
    status, output = check_idl_lightly(config)
    return status, output, text.splitlines()


def _line(lines: list[str], start: str) -> int:
    return next(n for n, line in enumerate(lines, 1) if line.strip().startswith(start))


ROS_MAPPINGS = """\
    ros_to_mqtt:
      - {from_ros: /s, type: u/msg/S, to_mqtt: "ros/s"}
      - {from_ros: /l, type: u/msg/L, to_mqtt: "ros/{nosuch}"}
      - {from_ros: /n, type: u/msg/Nope, to_mqtt: "ros/n"}
"""

IDL_ERROR = "types.idl:2:21: expected ';' after member declaration, got '}'"


def _expect_mapping_errors(output: str, lines: list[str], section: str, what: str) -> None:
    at = f"adapters[0].{section}"
    assert (f"edgebus.yaml:{_line(lines, '- {from_ros: /s')} {at}[0].type: {what} is not"
            f" supported: {WHY}") in output, output
    assert (f"edgebus.yaml:{_line(lines, '- {from_ros: /l')} {at}[1].to_mqtt: topic template"
            " 'ros/{nosuch}': u::msg::dds_::L_ has no member 'nosuch'") in output, output


def test_a_broken_idl_file_does_not_hide_the_mapping_errors(tmp_path: Path) -> None:
    status, output, lines = _check(tmp_path, f"""\
  - type: ros2
    name: r
    idl_files: [types.idl, u/types.idl]
{ROS_MAPPINGS}""")
    assert status == 2, output
    assert f"edgebus.yaml:{_line(lines, 'idl_files:')} adapters[0].idl_files[0]: {IDL_ERROR}" \
        in output, output
    _expect_mapping_errors(output, lines, "ros_to_mqtt", "ROS 2 type 'u/msg/S'")
    # types.idl might declare it: the message says the broken file was not counted
    assert (f"edgebus.yaml:{_line(lines, '- {from_ros: /n')} adapters[0].ros_to_mqtt[2].type:"
            " no definition of ROS 2 type 'u/msg/Nope': add its .msg/.srv file to msg_files,"
            " or an IDL file declaring u::msg::dds_::Nope_ to idl_files; not counting"
            " types.idl, which cannot be parsed") in output, output
    assert len(output.splitlines()) == 4, output


def test_a_broken_msg_file_does_not_hide_the_idl_and_mapping_errors(tmp_path: Path) -> None:
    msg = tmp_path / "my_pkg" / "msg"
    msg.mkdir(parents=True)
    (msg / "Status.msg").write_text("float32 x\nflot32[ y\n", encoding="utf-8")
    (msg / "Uses.msg").write_text("my_pkg/Status s\nint32 n\n", encoding="utf-8")
    status, output, lines = _check(tmp_path, f"""\
  - type: ros2
    name: r
    msg_files: [my_pkg/msg/Status.msg, my_pkg/msg/Uses.msg]
    idl_files: [types.idl, u/types.idl]
{ROS_MAPPINGS}\
      - {{from_ros: /st, type: my_pkg/msg/Status, to_mqtt: "ros/st"}}
      - {{from_ros: /us, type: my_pkg/msg/Uses, to_mqtt: "ros/us"}}
""")
    assert status == 2, output
    assert (f"edgebus.yaml:{_line(lines, 'msg_files:')} adapters[0].msg_files[0]:"
            " my_pkg/msg/Status.msg:2:1: cannot read 'flot32[ y' as 'TYPE NAME'") in output, output
    assert f"edgebus.yaml:{_line(lines, 'idl_files:')} adapters[0].idl_files[0]: {IDL_ERROR}" \
        in output, output
    _expect_mapping_errors(output, lines, "ros_to_mqtt", "ROS 2 type 'u/msg/S'")
    assert "adapters[0].ros_to_mqtt[2].type: no definition of ROS 2 type 'u/msg/Nope'" \
        in output, output
    # Status (its file's error is reported) and Uses (which includes Status's IDL): nothing
    # more, no "no definition", no missing #include
    assert len(output.splitlines()) == 5, output


def test_the_dds_check_reports_the_same_at_once(tmp_path: Path) -> None:
    status, output, lines = _check(tmp_path, """\
  - type: dds
    name: d
    idl_files: [types.idl, u/types.idl]
    dds_to_mqtt:
      - {from_dds: s, type: "u::msg::dds_::S_", to_mqtt: "dds/s"}
      - {from_dds: l, type: "u::msg::dds_::L_", to_mqtt: "dds/{nosuch}"}
    mqtt_to_dds:
      - {from_mqtt: "a/b", to_dds: n, type: "u::msg::dds_::Nope_"}
""")
    assert status == 2, output
    assert f"edgebus.yaml:{_line(lines, 'idl_files:')} adapters[0].idl_files[0]: {IDL_ERROR}" \
        in output, output
    assert (f"edgebus.yaml:{_line(lines, '- {from_dds: s')} adapters[0].dds_to_mqtt[0].type:"
            f" DDS type 'u::msg::dds_::S_' is not supported: {WHY}") in output, output
    assert (f"edgebus.yaml:{_line(lines, '- {from_dds: l')} adapters[0].dds_to_mqtt[1].to_mqtt:"
            " topic template 'dds/{nosuch}': u::msg::dds_::L_ has no member 'nosuch'") \
        in output, output
    assert (f"edgebus.yaml:{_line(lines, '- {from_mqtt')} adapters[0].mqtt_to_dds[0].type:"
            " unknown DDS type 'u::msg::dds_::Nope_' (known: u::msg::dds_::L_,"
            " u::msg::dds_::S_, u::msg::dds_::Short); not counting types.idl, which cannot"
            " be parsed") in output, output
    assert len(output.splitlines()) == 4, output


def test_an_error_behind_another_files_syntax_error_is_reported_in_the_same_run(
        tmp_path: Path) -> None:
    # the parser resolves names only in IDL without syntax errors: b.idl's unknown type is
    # found once types.idl is left out, and said so
    (tmp_path / "b.idl").write_text("module mb { struct B { mc::Nope y; }; struct C { long z; };"
                                    " };\n", encoding="utf-8")
    status, output, lines = _check(tmp_path, """\
  - type: dds
    name: d
    idl_files: [types.idl, b.idl, u/types.idl]
    dds_to_mqtt:
      - {from_dds: l, type: "u::msg::dds_::L_", to_mqtt: "dds/{nosuch}"}
""")
    assert status == 2, output
    at = f"edgebus.yaml:{_line(lines, 'idl_files:')}"
    assert f"{at} adapters[0].idl_files[0]: {IDL_ERROR}" in output, output
    assert (f"{at} adapters[0].idl_files[1]: b.idl:1:24: unknown type 'mc::Nope' (checked"
            " without types.idl)") in output, output
    assert "u::msg::dds_::L_ has no member 'nosuch'" in output, output
    assert len(output.splitlines()) == 3, output
