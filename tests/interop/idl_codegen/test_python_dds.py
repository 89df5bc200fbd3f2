"""Samples of generated types written by cyclonedds in one process read in another.

The writer process imports the package ``idl-codegen`` generated on disk; this process
reads with the types ``idl_codegen.load`` built in memory. Values must be identical.
The writer waits for this process's reader to match before it writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import idl_codegen
from tests.helpers.timeouts import unit
from tests.interop.idl_codegen.dds_env import DOMAINS, dds_environment, take  # sets CYCLONEDDS_URI
from tests.unit.idl_codegen.corpus import CASES, generate_case

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[3]

WRITER = """
import json, sys, time
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic
from cyclonedds.util import duration
import importlib
from idl_codegen import codec_for

module, name, topic, domain, path = sys.argv[1:6]
cls = getattr(importlib.import_module(module), name)
codec = codec_for(cls)
samples = [codec.from_json(value) for value in json.load(open(path))]
participant = DomainParticipant(int(domain))
qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.Durability.TransientLocal,
          Policy.History.KeepAll)
writer = DataWriter(participant, Topic(participant, topic, cls), qos=qos)
deadline = time.monotonic() + float(sys.argv[6])
while not writer.get_matched_subscriptions() and time.monotonic() < deadline:
    time.sleep(0.02)
for sample in samples:
    writer.write(sample)
print("written", flush=True)
sys.stdin.read()  # stay alive (the samples live in this writer) until the test is done
"""


def samples_for(case: str, name: str) -> list[dict[str, Any]]:
    files, include_dirs = CASES[case]
    loaded = idl_codegen.load(files, include_dirs=include_dirs)
    cls: Any = loaded[name]
    codec = loaded.codec(name)
    if name == "vehicle::signals::Signal":
        value = loaded["vehicle::signals::Value"]
        reading = loaded["vehicle::signals::Reading"]
        wheel = loaded["vehicle::signals::Wheel"]
        units: Any = loaded["vehicle::units::SpeedUnit"]
        made = [
            cls(vin="WVW0", signal_id=1),
            cls(vin="WVWZZZ1JZXW000001", signal_id=2, value=value(raw=[1, 2, 255]),
                reading=reading(text="12.5 V"), unit=units.MPS, wheel_count=6,
                wheels=[wheel(index=i, pressure_kpa=210.5 + i,
                              temperature_c=None if i % 2 else 21.25) for i in range(6)],
                i8=-128, u8=255, o=7, c="Z", matrix=[[1, -2, 3], [2**62, -(2**63), 0]],
                traces=[[0.5, -1.25], [], [2.0**100]], note="ünïcode"),
            cls(vin="X", signal_id=3, value=value(discriminator=42, value=-9),
                reading=reading(flag=True)),
        ]
    elif name == "kitchen::Sink":
        color: Any = loaded["kitchen::Color"]
        by_enum = loaded["kitchen::ByEnum"]
        inner = loaded["kitchen::Inner"]
        made = [
            cls(id=1),
            cls(id=2, inner=inner(i8=-5, u8=200, c="q", w=0x263A, f=-0.5, u64=2**64 - 1),
                maybe_inner=inner(b=True), text="t", hash=bytes(range(16)),
                blob=[9, 8, 7], grid=[b"abc", b"def"], u8_array=b"\x00\x01\x02\xff",
                chars=["a", "b", "c"], colors=[color.RED, color.WHITE],
                by_enum=by_enum(green_or_blue="gb"),
                unions=[by_enum(red=-3), by_enum(discriminator=color.WHITE, value=bytes(16))],
                maybe_strings=["x", ""], with_id=-1),
        ]
    else:
        made = [cls(), cls(orientation_covariance=[float(i) for i in range(9)])]
    return [codec.to_json(sample) for sample in made]


@pytest.mark.parametrize(("case", "module", "name"), [
    ("vehicle", "vehicle.signals", "vehicle::signals::Signal"),
    ("kitchen", "kitchen", "kitchen::Sink"),
    ("ros2", "sensor_msgs.msg.dds_", "sensor_msgs::msg::dds_::Imu_"),
])
def test_generated_writer_loaded_reader(case: str, module: str, name: str,
                                        tmp_path: Path) -> None:
    for relative, content in generate_case(case, ("python",)).files.items():
        path = tmp_path / "gen" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    expected = samples_for(case, name)
    (tmp_path / "samples.json").write_text(json.dumps(expected))
    topic = f"idl_codegen_{case}_{os.getpid()}"  # concurrent test runs stay apart
    domain = DOMAINS["python"]
    env = {**dds_environment(), "PYTHONPATH": f"{tmp_path / 'gen'}:{ROOT}"}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, module, name.rsplit("::", 1)[1], topic, str(domain),
         str(tmp_path / "samples.json"), str(unit(15))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env)
    try:
        files, include_dirs = CASES[case]
        loaded = idl_codegen.load(files, include_dirs=include_dirs)
        received = take(loaded[name], topic, domain, len(expected), unit(15))
    finally:
        out, err = writer.communicate(input="", timeout=unit(15))
    assert (out, err) == ("written\n", "")
    codec = loaded.codec(name)
    got = sorted((codec.to_json(sample) for sample in received), key=json.dumps)
    assert got == sorted(expected, key=json.dumps)
