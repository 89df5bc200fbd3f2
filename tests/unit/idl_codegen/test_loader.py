"""idl_codegen.load: the generated types, in process, with no file written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import idl_codegen
from broker_core.errors import IdlError
from idl_codegen.introspect import describe
from tests.unit.idl_codegen.corpus import CASES

Write = Callable[..., Path]


def test_load_returns_classes_constants_and_codecs() -> None:
    files, include_dirs = CASES["vehicle"]
    schema = idl_codegen.load(files[0], include_dirs=include_dirs)
    signal = schema["vehicle::signals::Signal"]
    assert schema["vehicle.signals.Signal"] is signal
    assert "vehicle::signals::Signal" in schema and "nope::X" not in schema
    assert signal.__idl_typename__ == "vehicle::signals::Signal"  # type: ignore[attr-defined]
    assert schema.constants["vehicle::MAX_WHEELS"] == 6
    assert schema.constants["vehicle::units::DEFAULT_UNIT"] is \
        schema["vehicle::units::SpeedUnit"].MPS  # type: ignore[attr-defined]
    assert "vehicle::Name" in schema.typedefs
    assert schema.module("vehicle::units").KPH_PER_MPS == 3.6
    assert schema.topic_types == ["vehicle::signals::Signal", "vehicle::signals::Event",
                                  "vehicle::signals::GearChange", "vehicle::signals::Diagnostic",
                                  "vehicle::signals::Config"]
    sample = signal(vin="WVW1", signal_id=3)
    assert signal.deserialize(sample.serialize()) == sample  # type: ignore[attr-defined]
    codec = schema.codec("vehicle::signals::Signal")
    assert codec.from_json(codec.to_json(sample)) == sample
    assert schema.json_schema("vehicle::signals::Signal")["title"] == "vehicle::signals::Signal"
    with pytest.raises(KeyError):
        schema.json_schema("vehicle::Nope")


def test_loaded_types_equal_generated_ones(tmp_path: Path) -> None:
    """The loader runs the generator: both give the same type description."""
    import subprocess
    import sys

    from tests.helpers.timeouts import unit
    from tests.unit.idl_codegen.corpus import generate_case

    for relative, content in generate_case("ros2", ("python",)).files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    code = ("from idl_codegen.introspect import describe\n"
            "from sensor_msgs.msg.dds_ import Imu_\n"
            "print(repr(describe(Imu_).schema.types))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=unit(60), check=False,
                          env={"PYTHONPATH": f"{tmp_path}:{Path.cwd()}"})
    assert done.stderr == ""
    files, include_dirs = CASES["ros2"]
    loaded = idl_codegen.load(files, include_dirs=include_dirs)
    assert done.stdout == repr(describe(loaded["sensor_msgs::msg::dds_::Imu_"]).schema.types) \
        + "\n"


def test_each_load_gets_its_own_classes() -> None:
    files, include_dirs = CASES["hello"]
    first = idl_codegen.load(files, include_dirs=include_dirs)
    second = idl_codegen.load(files, include_dirs=include_dirs)
    assert first["HelloWorldData::Msg"] is not second["HelloWorldData::Msg"]
    assert first["HelloWorldData::Msg"].__module__.startswith("_edgebus_idl_")


def test_defines_and_include_dirs(write_idl: Write, tmp_path: Path) -> None:
    write_idl("module dep { struct D { long v; }; };", "inc/dep.idl")
    main = write_idl('#include <dep.idl>\nmodule m { struct S { dep::D d; string<LEN> t; }; };')
    schema = idl_codegen.load(main, include_dirs=[tmp_path / "inc"], defines={"LEN": "4"})
    codec = schema.codec("m::S")
    with pytest.raises(idl_codegen.IdlValueError):
        codec.from_json({"d": {"v": 1}, "t": "too long"})


def test_bad_idl_raises_idl_error_with_every_problem(write_idl: Write) -> None:
    path = write_idl("module m { struct S { Unknown u; }; const octet O = 999; };", "bad.idl")
    with pytest.raises(IdlError) as caught:
        idl_codegen.load(path)
    assert isinstance(caught.value, idl_codegen.IdlErrors)
    assert [error.message for error in caught.value.errors] == [
        "unknown type 'Unknown'", "999 does not fit in octet (0..255)"]
    assert (caught.value.line, caught.value.column) == (1, 23)


def test_warnings_are_kept(write_idl: Write) -> None:
    schema = idl_codegen.load(write_idl("struct S { wstring w; };"))
    assert [w.message for w in schema.warnings] == [
        "wstring is mapped to a UTF-8 string: cyclonedds-python has no wide strings"]


def test_tracebacks_show_generated_source() -> None:
    import linecache

    files, include_dirs = CASES["hello"]
    cls = idl_codegen.load(files, include_dirs=include_dirs)["HelloWorldData::Msg"]
    module = __import__(cls.__module__, fromlist=["x"])
    assert module.__spec__ is not None
    assert "class Msg(" in "".join(linecache.getlines(module.__spec__.origin or
                                                      f"<idl_codegen {cls.__module__}>"))


_BOOL_UNION = ("module a { union Flag switch (boolean) { case TRUE: long on;"
               " default: double off; };"
               " union LowU switch (boolean) { case FALSE: long low; default: short high; }; };")
_INT_UNION = ("module b { union Reading switch (short) { case 1: long count;"
              " case 2: double level; };"
              " union ZeroU switch (long) { case 0: short zero; case 5: long five; }; };")
_LABELS_CHECK = """
import sys, idl_codegen
first, second = (idl_codegen.load(path) for path in sys.argv[1:])
schemas = {**first.types, **second.types}
codecs = {name: (first if name in first else second).codec(name) for name in schemas}
samples = [("a::Flag", dict(on=5), True), ("a::LowU", dict(low=5), False),
           ("b::Reading", dict(count=5), 1), ("b::ZeroU", dict(zero=5), 0)]
for name, member, expected in samples:
    sample = schemas[name](**member)
    assert type(sample.discriminator) is type(expected), (name, sample.discriminator)
    assert sample.discriminator == expected, (name, sample.discriminator)
    text = codecs[name].dumps(sample)
    assert codecs[name].loads(text) == sample, name
    print(name, text.decode())
"""


@pytest.mark.parametrize("bool_first", [True, False])
def test_union_labels_do_not_leak_between_boolean_and_integer_unions(
        write_idl: Write, bool_first: bool) -> None:
    """typing caches Annotated[T | None, case(1, T)] by equality and case(True, T) ==
    case(1, T): a boolean union and an integer union must not share labels, whichever
    is loaded first (in a fresh process, so nothing else filled the cache)."""
    import subprocess
    import sys

    from tests.helpers.timeouts import unit

    paths = [str(write_idl(_BOOL_UNION, "a.idl")), str(write_idl(_INT_UNION, "b.idl"))]
    if not bool_first:
        paths.reverse()
    done = subprocess.run([sys.executable, "-c", _LABELS_CHECK, *paths], capture_output=True,
                          text=True, timeout=unit(60), check=False)
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        'a::Flag {"discriminator":true,"on":5}', 'a::LowU {"discriminator":false,"low":5}',
        'b::Reading {"discriminator":1,"count":5}', 'b::ZeroU {"discriminator":0,"zero":5}']


def test_generated_code_that_cyclonedds_refuses_is_an_idl_error(
        write_idl: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the generated class fail to build (a generator bug, a cyclonedds limit),
    load() raises IdlError naming the type, chained to the cause, not the raw exception."""
    from idl_codegen.emit_python import PythonEmitter

    emit = PythonEmitter.emit

    def broken(self: PythonEmitter) -> dict[str, str]:
        files = emit(self)
        return {path: text + "\nraise IndexError('string index out of range')\n"
                if path.endswith("/_Msg.py") else text for path, text in files.items()}

    monkeypatch.setattr(PythonEmitter, "emit", broken)
    with pytest.raises(IdlError) as caught:
        idl_codegen.load(write_idl("module m { struct Msg { string s; }; };", "x.idl"))
    assert str(caught.value).endswith(
        "x.idl:0:0: cyclonedds-python cannot build m::Msg from the generated code "
        "(IndexError: string index out of range)")
    assert isinstance(caught.value.__cause__, IndexError)
