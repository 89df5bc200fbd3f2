"""ROS 2 .msg / .srv files -> IDL in the shape ROS 2's DDS layer uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import idl_codegen
from idl_codegen import IdlErrors
from idl_codegen.cdr_json import transcoder_for
from idl_codegen.ros_msg import convert, msg_to_idl, srv_to_idl
from tests.unit.idl_codegen.corpus import CASES

ROS2_GOLDEN = CASES["ros2"][1][0]
SHIPPED = Path(__file__).resolve().parents[3] / "adapters" / "ros2" / "idl"

MESSAGES = {
    "builtin_interfaces/msg/Time.msg": "int32 sec\nuint32 nanosec\n",
    "std_msgs/msg/Header.msg": "builtin_interfaces/Time stamp\nstring frame_id\n",
    "geometry_msgs/msg/Quaternion.msg": "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1\n",
    "geometry_msgs/msg/Vector3.msg": "float64 x\nfloat64 y\nfloat64 z\n",
    "sensor_msgs/msg/Imu.msg": (
        "# an IMU\nstd_msgs/Header header\ngeometry_msgs/Quaternion orientation\n"
        "float64[9] orientation_covariance # row major\ngeometry_msgs/Vector3 angular_velocity\n"
        "float64[9] angular_velocity_covariance\ngeometry_msgs/Vector3 linear_acceleration\n"
        "float64[9] linear_acceleration_covariance\n"),
}


def write(root: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


def schema_of(loaded: Any, name: str) -> dict[str, Any]:
    document = loaded.json_schema(name)
    document.pop("$comment", None)
    return document


def test_imu_converts_to_the_type_rosidl_gives(tmp_path: Path) -> None:
    written = convert(write(tmp_path, MESSAGES), tmp_path / "idl")
    assert sorted(p.relative_to(tmp_path / "idl").as_posix() for p in written) == [
        "builtin_interfaces/msg/dds_/Time_.idl", "geometry_msgs/msg/dds_/Quaternion_.idl",
        "geometry_msgs/msg/dds_/Vector3_.idl", "sensor_msgs/msg/dds_/Imu_.idl",
        "std_msgs/msg/dds_/Header_.idl"]
    ours = idl_codegen.load(tmp_path / "idl/sensor_msgs/msg/dds_/Imu_.idl",
                            include_dirs=[tmp_path / "idl"])
    golden = idl_codegen.load(ROS2_GOLDEN / "sensor_msgs/msg/dds_/Imu_.idl",
                              include_dirs=[ROS2_GOLDEN])
    name = "sensor_msgs::msg::dds_::Imu_"
    assert schema_of(ours, name) == schema_of(golden, name)
    assert ours[name]().serialize() == golden[name]().serialize()
    assert ours.codec("geometry_msgs::msg::dds_::Quaternion_").to_json(
        ours["geometry_msgs::msg::dds_::Quaternion_"]())["w"] == 1.0


def test_every_construct() -> None:
    idl = msg_to_idl(
        "# comment\nint8 A = -2\nstring GREETING = 'hi # not a comment'\nbool FLAG=true\n"
        "byte b\nchar c\nbool ok true\nstring<=8 short \"x\"\nwstring w\n"
        "int32[] values\nuint8[<=4] small\nfloat32[3] triple\nstring<=5[<=2] names\n"
        "Other other\npkg/Thing thing\nHeader header\nint64 module\n",
        "my_pkg", "Kitchen")
    assert "module Kitchen_Constants {" in idl
    assert "const int8 A = -2;" in idl
    assert 'const string GREETING = "hi # not a comment";' in idl
    assert "const boolean FLAG = TRUE;" in idl
    for line in ("octet b;", "uint8 c;", "@default (value=TRUE)", "boolean ok;",
                 '@default (value="x")', "string<8> _short;", "wstring w;",
                 "sequence<long> values;", "sequence<uint8, 4> small;", "float triple[3];",
                 "sequence<string<5>, 2> names;", "my_pkg::msg::dds_::Other_ other;",
                 "pkg::msg::dds_::Thing_ thing;", "std_msgs::msg::dds_::Header_ header;",
                 "long long _module;"):
        assert line in idl, line
    for include in ('#include "my_pkg/msg/dds_/Other_.idl"', '#include "pkg/msg/dds_/Thing_.idl"',
                    '#include "std_msgs/msg/dds_/Header_.idl"'):
        assert include in idl


def test_a_service_and_an_empty_message(tmp_path: Path) -> None:
    idl = srv_to_idl("int64 a\nint64 b\n---\nint64 sum\n", "example_interfaces", "AddTwoInts")
    loaded = idl_codegen.load(write(tmp_path, {"x.idl": idl})[0])
    request = loaded.codec("example_interfaces::srv::dds_::AddTwoInts_Request_")
    response = loaded.codec("example_interfaces::srv::dds_::AddTwoInts_Response_")
    assert request.loads(b'{"a": 1, "b": 2}') is not None
    assert response.to_json(response.loads(b'{"sum": 3}')) == {"sum": 3}
    empty = msg_to_idl("# nothing\n", "std_msgs", "Empty")
    assert "uint8 structure_needs_at_least_one_member;" in empty


@pytest.mark.parametrize(("text", "problem"), [
    ("int32\n", "cannot read 'int32' as 'TYPE NAME'"),
    ("int32 x\nint32 x\n", "duplicate name 'x'"),
    ("int32 x = nope\n", "expected an integer, got 'nope'"),
    ("int32[2] X = 1\n", "a constant cannot be an array"),
    ("a/b/c/d x\n", "cannot read the type 'a/b/c/d'"),
    ("int32<=3 x\n", "only strings can be bounded"),
])
def test_errors_name_file_and_line(text: str, problem: str) -> None:
    with pytest.raises(IdlErrors) as caught:
        msg_to_idl("float64 ok\n" + text, "pkg", "Bad")
    assert str(caught.value).startswith(("pkg/msg/Bad.msg:2:1: ", "pkg/msg/Bad.msg:3:1: "))
    assert problem in str(caught.value)


def test_misplaced_files_and_bad_services_are_errors(tmp_path: Path) -> None:
    wrong = tmp_path / "Status.msg"
    wrong.write_text("int32 x\n")
    with pytest.raises(IdlErrors, match=r"expected PACKAGE/msg/Name\.msg"):
        convert([wrong], tmp_path / "out")
    with pytest.raises(IdlErrors, match="one '---'"):
        srv_to_idl("int32 a\n", "pkg", "NoSeparator")


def test_the_shipped_types_load_and_take_the_direct_path() -> None:
    files = sorted(SHIPPED.rglob("*.idl"))
    assert len(files) >= 70
    loaded = idl_codegen.load(files, include_dirs=[SHIPPED])
    for name in loaded.topic_types:
        _, _, dds, type_name = name.split("::")
        assert dds == "dds_" and type_name.endswith("_")
        codec = loaded.codec(name)
        assert transcoder_for(codec.schema, name) is not None, name
    for required in ("std_msgs::msg::dds_::String_", "geometry_msgs::msg::dds_::Twist_",
                     "sensor_msgs::msg::dds_::Imu_", "nav_msgs::msg::dds_::Odometry_",
                     "builtin_interfaces::msg::dds_::Time_",
                     "std_srvs::srv::dds_::Trigger_Request_",
                     "example_interfaces::srv::dds_::AddTwoInts_Response_"):
        assert required in loaded, required


def test_quotes_escapes_and_integer_literals_read_as_rosidl_reads_them(tmp_path: Path) -> None:
    # rosidl (rosidl_adapter/parser.py parse_primitive_value_string) drops the outer quotes,
    # refuses an unescaped inner one and turns \" (or \') into the quote, keeping any
    # other backslash; integers are int(text), else int(text, 0): 010 is 10, 0x10 is 16.
    # Before, the backslashes stayed, "a \" # b" was cut at the '#', and 010 was refused.
    paths = write(tmp_path / "src", {"my_pkg/msg/Quotes.msg": (
        'string GREETING="hi \\"there\\""\n'
        "string SINGLE='it\\'s'\n"
        'string HASHED="a \\" # b"  # a comment\n'
        'string BACKSLASH="c:\\\\dir\\n"\n'
        "int32 OCTALISH=010\n"
        "int32 HEX=0x10\n"
        "uint8 ZERO=00\n"
        'string greeting "say \\"hi\\""\n'
        "int32 count 007\n")})
    convert(paths, tmp_path / "idl")
    loaded = idl_codegen.load(tmp_path / "idl/my_pkg/msg/dds_/Quotes_.idl",
                              include_dirs=[tmp_path / "idl"])
    constants = {name.rsplit("::", 1)[-1]: value for name, value in loaded.constants.items()}
    assert constants == {
        "GREETING": 'hi "there"', "SINGLE": "it's", "HASHED": 'a " # b',
        "BACKSLASH": "c:\\\\dir\\n", "OCTALISH": 10, "HEX": 16, "ZERO": 0}
    sample = loaded.types["my_pkg::msg::dds_::Quotes_"]()
    assert (sample.greeting, sample.count) == ('say "hi"', 7)
    with pytest.raises(IdlErrors, match="quote \" inside the string is not escaped"):
        msg_to_idl('string BAD="a"b"\n', "pkg", "Bad")
