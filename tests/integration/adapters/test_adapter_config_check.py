"""``edgebus check`` on adapter configurations, and ``edgebus run`` when a bind fails, as
a user runs them: subprocesses on real files.

- Every problem of a file in one run, checks between keys included, even when another
  key of the same part (or of the same file) has a problem of its own.
- An adapter ``bind`` on an address a listener or another adapter binds, and an
  ``ipc://`` path in a directory that does not exist, are errors of ``check``.
- An adapter that cannot bind at run time logs one line a retry, no traceback.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.timeouts import unit
from tests.interop.mosquitto.tools import REPO_ROOT, edgebus_command, run_edgebus

pytest.importorskip("zmq")
pytest.importorskip("pynng")

DOCS = REPO_ROOT / "docs" / "adapters"


#: The start of a configuration file: a data directory, one listener, no HTTP API.
BASE = 'data_dir: data\nlisteners: [{type: tcp, bind: "127.0.0.1:0"}]\napi: {enabled: false}\n'


def _check(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    config = tmp_path / "edgebus.yaml"
    config.write_text(text)
    done = run_edgebus(tmp_path, "check", "edgebus.yaml")
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()


IDL = """module shapes {
  enum E0 { A0 }; enum E1 { A1 }; enum E2 { A2 }; enum E3 { A3 }; enum E4 { A4 };
  enum E5 { A5 }; enum E6 { A6 }; enum E7 { A7 }; enum E8 { A8 };
  union U switch (long) { case 1: long a; };
  struct Zpoint { long x; };
};
"""

#: Each mistake the probe found only one run at a time, all in one file.
ALL_AT_ONCE = """\
data_dir: data
listeners: [{{type: tcp, bind: "127.0.0.1:0"}}]
api: {{enabled: false}}
adapters:
  - type: zmq
    name: z
    zmq_to_mqtt:
      - socket: sub
        connect: tcp://127.0.0.1:1
        bind: tcp://127.0.0.1:2
        to_mqtt: a/{{zmq.topc}}
        subscribe: pose/
    mqtt_to_zmq:
      - socket: pub
        bind: tcp:/127.0.0.1:5
        from_mqtt: c/{{x}}/#
        topic: "{{y}}"
        codec: base32
  - type: nng
    name: z
    nng_to_mqtt:
      - socket: sub0
        connect: tcp://127.0.0.1:6
        to_mqtt: "n/{{nng.topic}}"
        high_water_mark: 9000
  - type: dds
    name: d
    domain_id: 300
    idl_files: [{missing}]
    dds_to_mqtt:
      - {{from_dds: t, type: shapes::Zpoint, to_mqtt: "x/{{x}}"}}
  - type: dds
    name: d2
    domain_id: 300
    idl_files: [{idl}]
    dds_to_mqtt:
      - {{from_dds: t, type: nope::T, to_mqtt: "x/1"}}
  - type: someip
    name: s
    layouts:
      L: {{type: struct, fields: [{{name: a, type: uint9}}]}}
    consume:
      - {{service_id: 0x1_0000, instance_id: 1, events: [0x8001]}}
bridges:
  - name: b
    server: "127.0.0.1:9999"
    forwards: [{{local: "a/{{x}}", remote: "b/{{y}}", qos: 3}}]
"""


def test_every_problem_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "shapes.idl").write_text(IDL)
    text = ALL_AT_ONCE.format(missing=tmp_path / "missing.idl", idl=tmp_path / "shapes.idl")
    status, lines = _check(tmp_path, text)
    assert status == 2, lines
    expected = [
        # the schema's problems
        "edgebus.yaml:12 adapters[0].zmq_to_mqtt[0].subscribe: expected a list, got 'pose/'",
        "edgebus.yaml:18 adapters[0].mqtt_to_zmq[0].codec: unknown codec 'base32';",
        "edgebus.yaml:25 adapters[1].nng_to_mqtt[0].high_water_mark: expected at most 8192",
        "edgebus.yaml:28 adapters[2].domain_id: expected at most 232, got 300",
        "edgebus.yaml:34 adapters[3].domain_id: expected at most 232, got 300",
        "edgebus.yaml:43 adapters[4].consume[0].service_id: expected at most 65534",
        # the checks between keys, found in the same run
        "edgebus.yaml:8 adapters[0].zmq_to_mqtt[0]: give exactly one of connect or bind",
        "edgebus.yaml:11 adapters[0].zmq_to_mqtt[0].to_mqtt: {zmq.topc} is not available",
        "edgebus.yaml:15 adapters[0].mqtt_to_zmq[0].bind: expected a URL starting with"
        " ipc://, tcp://, got 'tcp:/127.0.0.1:5'",
        "edgebus.yaml:17 adapters[0].mqtt_to_zmq[0].topic: {y} is not captured by the"
        " `from_mqtt` filter 'c/{x}/#'",
        f"edgebus.yaml:29 adapters[2].idl_files[0]: cannot read '{tmp_path / 'missing.idl'}':"
        " no such file",
        "edgebus.yaml:37 adapters[3].dds_to_mqtt[0].type: unknown DDS type 'nope::T' (known:"
        " shapes::Zpoint, shapes::E0, shapes::E1, shapes::E2, shapes::E3, shapes::E4,"
        " shapes::E5, shapes::E6, … (3 more))",
        "edgebus.yaml:41 adapters[4].layouts.L.fields[0].type: unknown type 'uint9'",
        "edgebus.yaml:20 adapters[1].name: 'z' is already the name of adapters[0]",
        "edgebus.yaml:47 bridges[0].forwards[0].qos: expected 0, 1 or 2, got 3",
        "edgebus.yaml:47 bridges[0].forwards[0]: {y} is not captured by the `local` filter",
    ]
    for start in expected:
        assert sum(line.startswith(start) for line in lines) == 1, (start, lines)
    assert len(lines) == len(expected), lines


def test_an_address_bound_twice(tmp_path: Path) -> None:
    # nothing binds: `check` compares the addresses as written
    status, lines = _check(
        tmp_path,
        """\
data_dir: data
listeners: [{type: tcp, bind: "127.0.0.1:18910"}]
api: {enabled: false}
adapters:
  - type: nng
    name: nb
    nng_to_mqtt:
      - {socket: pull0, bind: "tcp://127.0.0.1:18910", to_mqtt: x}
  - type: zmq
    name: zb
    zmq_to_mqtt:
      - {socket: pull, bind: "tcp://*:18911", to_mqtt: y}
      - {socket: pull, bind: "tcp://127.0.0.1:18911", to_mqtt: z}
      - {socket: pull, bind: ["ipc://same.sock", "ipc://./same.sock"], to_mqtt: w}
""",
    )
    assert status == 2, lines
    assert lines == [
        "edgebus.yaml:8 adapters[0].nng_to_mqtt[0].bind: address tcp://127.0.0.1:18910 is"
        " already used by listeners[0] (127.0.0.1:18910)",
        "edgebus.yaml:13 adapters[1].zmq_to_mqtt[1].bind: address tcp://127.0.0.1:18911 is"
        " already used by adapters[1].zmq_to_mqtt[0].bind (tcp://*:18911)",
        "edgebus.yaml:14 adapters[1].zmq_to_mqtt[2].bind[1]: address ipc://./same.sock is"
        " already used by adapters[1].zmq_to_mqtt[2].bind[0] (ipc://same.sock)",
    ]


def test_an_ipc_path_in_a_missing_directory(tmp_path: Path) -> None:
    status, lines = _check(
        tmp_path,
        BASE
        + """\
adapters:
  - type: zmq
    name: z
    zmq_to_mqtt:
      - {socket: pull, bind: "ipc://nodir/jobs.sock", to_mqtt: jobs}
      - {socket: pull, connect: "ipc://nodir/peer.sock", to_mqtt: peer}
""",
    )
    assert status == 2, lines
    (line,) = lines
    assert line.startswith(
        "edgebus.yaml:8 adapters[0].zmq_to_mqtt[0].bind: cannot bind ipc://nodir/jobs.sock:"
        f" the directory '{tmp_path / 'nodir'}' does not exist"
    ), line
    (tmp_path / "nodir").mkdir()
    status, lines = _check(tmp_path, (tmp_path / "edgebus.yaml").read_text())
    assert (status, lines) == (0, ["edgebus.yaml: OK"])


def test_an_ipc_bind_path_on_a_regular_file_is_refused_and_the_file_kept(
    tmp_path: Path,
) -> None:
    # ZeroMQ and NNG unlink whatever is at an ipc path before binding: a mistyped path
    # would delete the user's file.
    notes, todo = tmp_path / "notes.txt", tmp_path / "todo.txt"
    notes.write_text("keep me\n")
    todo.write_text("and me\n")
    status, lines = _check(
        tmp_path,
        BASE
        + """\
adapters:
  - type: zmq
    name: z
    zmq_to_mqtt:
      - {socket: pull, bind: "ipc://notes.txt", to_mqtt: jobs}
  - type: nng
    name: n
    nng_to_mqtt:
      - {socket: pull0, bind: "ipc://todo.txt", to_mqtt: jobs}
""",
    )
    assert status == 2, lines
    problem = "exists and is not a socket; refusing to replace it"
    assert lines == [
        f"edgebus.yaml:8 adapters[0].zmq_to_mqtt[0].bind: cannot bind ipc://notes.txt:"
        f" '{notes}' {problem}",
        f"edgebus.yaml:12 adapters[1].nng_to_mqtt[0].bind: cannot bind ipc://todo.txt:"
        f" '{todo}' {problem}",
    ]
    assert notes.read_text() == "keep me\n"
    assert todo.read_text() == "and me\n"


def test_the_zmq_docs_example_checks_as_printed(tmp_path: Path) -> None:
    text = (DOCS / "zmq.md").read_text()
    (example,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
                  if b.startswith("adapters:")]  # fmt: skip
    status, lines = _check(
        tmp_path,
        BASE + example,
    )
    assert (status, lines) == (0, ["edgebus.yaml: OK"])


def test_a_bind_that_fails_at_run_time_logs_one_line_a_retry(tmp_path: Path) -> None:
    holder = socket.socket()  # another process's socket, as far as the gateway can tell
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    config = tmp_path / "edgebus.yaml"
    config.write_text(
        f"""\
data_dir: data
persistence: memory
listeners: [{{type: tcp, bind: "127.0.0.1:0"}}]
api: {{enabled: false}}
adapters:
  - type: zmq
    name: zb
    restart_backoff: 50ms
    restart_backoff_max: 100ms
    zmq_to_mqtt:
      - {{socket: pull, bind: "tcp://127.0.0.1:{port}", to_mqtt: y}}
"""
    )
    log = tmp_path / "gateway.log"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with log.open("w") as out:
        process = subprocess.Popen(
            [*edgebus_command(), "run", "-c", str(config)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + unit(30)
        failures: list[str] = []
        while time.monotonic() < deadline and len(failures) < 3 and process.poll() is None:
            lines = log.read_text().splitlines()
            failures = [line for line in lines if "adapter zb failed" in line]
            time.sleep(0.05)
        assert len(failures) >= 3, log.read_text()
    finally:
        process.terminate()
        try:
            process.wait(unit(15))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(unit(5))
        holder.close()
    text = log.read_text()
    assert "Traceback" not in text, text
    assert f"cannot bind tcp://127.0.0.1:{port}: Address already in use" in failures[0]


def test_mapping_names_are_checked_when_a_mapping_has_a_problem(tmp_path: Path) -> None:
    status, lines = _check(
        tmp_path,
        BASE
        + """\
adapters:
  - type: zmq
    name: z
    zmq_to_mqtt:
      - {name: m, socket: pull, bind: "tcp://127.0.0.1:18912", to_mqtt: x, codec: nope}
    mqtt_to_zmq:
      - {name: m, socket: push, bind: "tcp://127.0.0.1:18913", from_mqtt: y}
  - type: nng
    name: disabled
    enabled: false
    nng_to_mqtt:
      - {socket: pull0, bind: "tcp://127.0.0.1:18912", to_mqtt: x}
""",
    )
    assert status == 2, lines
    # a disabled adapter binds nothing: its address is not taken
    assert lines == [
        "edgebus.yaml:5 adapters[0]: mapping names must be unique: m",
        "edgebus.yaml:8 adapters[0].zmq_to_mqtt[0].codec: unknown codec 'nope'; known: base64,"
        " hex, json, raw",
    ]


def test_dds_and_ros2_profiles_and_namespace_in_one_run(tmp_path: Path) -> None:
    status, lines = _check(
        tmp_path,
        BASE
        + """\
adapters:
  - type: dds
    name: d
    domain_id: 300
    dds_to_mqtt:
      - {from_dds: t, type: auto, to_mqtt: x, qos_profile: nope}
  - type: ros2
    name: r
    domain_id: 3
    namespace: robot
    ros_to_mqtt:
      - {from_ros: /imu, type: sensor_msgs/msg/Imu, to_mqtt: x, qos_profile: nope}
""",
    )
    assert status == 2, lines
    assert [line.partition(": ")[0] for line in lines] == [
        "edgebus.yaml:7 adapters[0].domain_id",
        "edgebus.yaml:9 adapters[0].dds_to_mqtt[0].qos_profile",
        "edgebus.yaml:13 adapters[1].namespace",
        "edgebus.yaml:15 adapters[1].ros_to_mqtt[0].qos_profile",
    ], lines


def test_tls_files_are_checked_when_another_tls_key_has_a_problem(tmp_path: Path) -> None:
    status, lines = _check(
        tmp_path,
        """\
data_dir: data
api: {enabled: false}
listeners:
  - type: tls
    bind: "127.0.0.1:0"
    tls: {certfile: nocert.pem, keyfile: nokey.pem, verify_peer: maybe}
""",
    )
    assert status == 2, lines
    assert lines == [
        "edgebus.yaml:6 listeners[0].tls.verify_peer: expected true or false, got 'maybe'",
        "edgebus.yaml:6 listeners[0].tls.certfile: cannot read 'nocert.pem': No such file or"
        " directory",
        "edgebus.yaml:6 listeners[0].tls.keyfile: cannot read 'nokey.pem': No such file or"
        " directory",
    ]
