"""DDS <-> MQTT benchmark: the dds and ros2 adapters beside plain cyclonedds, in one run.

``run()`` returns the report lines (``python -m bench`` prints them after the broker
table; ``--no-dds`` skips it); ``python -m bench.bench_dds [--rounds N]`` runs it alone.

Every process is its own (``bench/dds_worker.py``), on loopback, in a DDS domain drawn
at random from 10..99. One gateway (``edgebus run``) serves all rounds, with a ``dds``
adapter (small struct) and a ``ros2`` adapter (``sensor_msgs/Imu`` on ``rt/...``).

- DDS -> MQTT: a plain cyclonedds Python writer writes N samples as fast as it can
  (reliable, keep all: it slows down to what its readers take). Edgebus: the gateway
  reads them and publishes JSON; a raw MQTT subscriber counts what arrives. Plain: a
  plain cyclonedds Python reader (``take()`` into sample objects) reads the same
  writer program on a topic of its own. Rate = samples / (last - first arrival).
- MQTT -> DDS: edgebus: a raw MQTT client publishes N JSON payloads (QoS 0, at most
  5000 ahead of what arrived), the gateway writes them to DDS, a raw DDS reader counts
  them. Plain: a plain cyclonedds writer fed from a loop, counted by the same raw
  reader. Rate as above.

Rounds alternate edgebus and plain; the report shows medians and the ratio edgebus /
plain against the target of issue 11 (at least 0.8x). The machine is shared: a ratio
is only as good as the quiet of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.brokers import REPO_ROOT, free_port
from bench.client import mqtt_connect
from bench.frames import encode_disconnect
from bench.lifetime import die_with_parent

__all__ = ["run"]

TARGET = 0.8
LOOPBACK = (
    '<CycloneDDS xmlns="https://cdds.io/config"><Domain id="any">'
    '<General><Interfaces><NetworkInterface name="lo"/></Interfaces>'
    "<AllowMulticast>false</AllowMulticast></General>"
    '<Discovery><Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
    "</Domain></CycloneDDS>"
)
SMALL_IDL = """
module bench {
  @final struct Small { long id; unsigned long seq; double value; string name; };
};
"""
ROS_IDL = REPO_ROOT / "adapters" / "ros2" / "idl"
IMU_IDL = ROS_IDL / "sensor_msgs" / "msg" / "dds_" / "Imu_.idl"
SMALL = {"id": 7, "seq": 0, "value": 21.5, "name": "engine"}
IMU = {
    "header": {"stamp": {"sec": 0, "nanosec": 500}, "frame_id": "imu_link"},
    "orientation": {"x": 0.0, "y": 0.0, "z": 0.7071, "w": 0.7071},
    "orientation_covariance": [0.01, 0, 0, 0, 0.01, 0, 0, 0, 0.01],
    "angular_velocity": {"x": 0.001, "y": -0.002, "z": 0.5},
    "angular_velocity_covariance": [0.02] * 9,
    "linear_acceleration": {"x": 0.1, "y": 0.2, "z": 9.80665},
    "linear_acceleration_covariance": [0.03] * 9,
}


@dataclass
class Case:
    label: str
    direction: str  # "dds_to_mqtt" or "mqtt_to_dds"
    type_name: str
    idl: list[str]
    include: list[str]
    sample: dict[str, Any]
    field: str
    n: int
    edgebus_topic: str  # DDS topic the gateway reads or writes
    plain_topic: str
    mqtt: str  # MQTT filter (dds_to_mqtt) or topic (mqtt_to_dds)
    rates: dict[str, list[float]] = field(default_factory=lambda: {"edgebus": [], "plain": []})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"edgebus": [], "plain": []})
    notes: list[str] = field(default_factory=list)


def _cases(idl_dir: Path, n_small: int, n_imu: int) -> list[Case]:
    small = [str(idl_dir / "small.idl")]
    imu = [str(IMU_IDL)]
    include = [str(ROS_IDL)]
    return [
        Case("DDS -> MQTT, small struct", "dds_to_mqtt", "bench::Small", small, [], SMALL,
             "seq", n_small, "bench_small", "bench_small_plain", "bench/small/#"),
        Case("DDS -> MQTT, sensor_msgs/Imu", "dds_to_mqtt", "sensor_msgs::msg::dds_::Imu_", imu,
             include, IMU, "header.stamp.sec", n_imu, "rt/bench/imu", "rt/bench/imu_plain",
             "bench/ros/#"),
        Case("MQTT -> DDS, small struct", "mqtt_to_dds", "bench::Small", small, [], SMALL,
             "seq", n_small, "bench_small_in", "bench_small_in_plain", "bench/to_dds/small"),
        Case("MQTT -> DDS, sensor_msgs/Imu", "mqtt_to_dds", "sensor_msgs::msg::dds_::Imu_", imu,
             include, IMU, "header.stamp.sec", n_imu, "rt/bench/imu_in",
             "rt/bench/imu_in_plain", "bench/to_dds/imu"),
    ]


def _config(port: int, domain: int, data_dir: Path, idl_dir: Path) -> str:
    network = ("    network:\n      interfaces: [lo]\n      peers: [127.0.0.1]\n"
               "      allow_multicast: false\n")
    return f"""
listeners:
  - type: tcp
    bind: 127.0.0.1:{port}
data_dir: {data_dir}
persistence: memory
api:
  bind: 127.0.0.1:0
mqtt:
  max_queued_messages: 1000000
  max_queued_bytes: 2GB
adapters:
  - type: dds
    name: bench
    domain_id: {domain}
{network}    idl_files: [{idl_dir / "small.idl"}]
    dds_to_mqtt:
      - from_dds: bench_small
        type: bench::Small
        to_mqtt: bench/small/{{id}}
    mqtt_to_dds:
      - from_mqtt: bench/to_dds/small
        to_dds: bench_small_in
        type: bench::Small
  - type: ros2
    name: bench-ros
    domain_id: {domain}
{network}    ros_to_mqtt:
      - from_ros: /bench/imu
        type: sensor_msgs/msg/Imu
        to_mqtt: bench/ros/{{ros.topic}}
        dds_qos: {{history: all}}
    mqtt_to_ros:
      - from_mqtt: bench/to_dds/imu
        to_ros: /bench/imu_in
        type: sensor_msgs/msg/Imu
        dds_qos: {{history: all}}
"""


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "CYCLONEDDS_URI": LOOPBACK, "PYTHONPATH": path,
            "PYTHONUNBUFFERED": "1"}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def _gateway(domain: int, workdir: Path, idl_dir: Path) -> Iterator[tuple[int, int]]:
    port = free_port()
    config = workdir / "edgebus.yaml"
    config.write_text(_config(port, domain, workdir / "data", idl_dir))
    log = open(workdir / "gateway.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run", "-c", str(config)],
                               stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               cwd=REPO_ROOT, env=_env(), preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError("the gateway exited: "
                                   + (workdir / "gateway.log").read_text()[-2000:])
            try:
                with mqtt_connect(port, "bench-dds-ready", timeout_s=1.0) as sock:
                    sock.sendall(encode_disconnect())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        time.sleep(1.0)  # the adapters load their types and join the domain
        yield port, process.pid
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


class _Worker:
    def __init__(self, role: str, args: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.dds_worker", role, json.dumps(args)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=REPO_ROOT, env=_env(), preexec_fn=die_with_parent)

    def ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line or "ready" not in json.loads(line):
            self.result()

    def result(self, timeout: float = 180) -> dict[str, Any]:
        try:
            out, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
        lines = [line for line in out.splitlines() if line.strip()]
        if not lines:
            raise RuntimeError(f"worker failed: {err[-1500:]}")
        result: dict[str, Any] = json.loads(lines[-1])
        if "error" in result:
            raise RuntimeError(f"worker: {result['error']}")
        return result


def _rate(result: dict[str, Any], n: int, notes: list[str], who: str) -> float:
    received = result["received"]
    if received < n:
        notes.append(f"{who}: {received} of {n} samples arrived")
    span = result["last"] - result["first"]
    return received / span if span > 0 and received > 1 else 0.0


def _common(case: Case, domain: int) -> dict[str, Any]:
    return {"domain": domain, "type": case.type_name, "idl": case.idl, "include": case.include}


def _run_case(case: Case, who: str, domain: int, gateway: tuple[int, int]) -> float:
    """One run; returns samples/s and records the CPU per sample of the side under test
    (the gateway, or the plain reader / writer)."""
    port, pid = gateway
    common = _common(case, domain)
    timeout = 120
    before = _cpu_seconds(pid)
    if case.direction == "dds_to_mqtt":
        if who == "edgebus":
            counter = _Worker("mqtt_sub", {"port": port, "filter": case.mqtt, "n": case.n,
                                           "timeout": timeout})
        else:
            counter = _Worker("reader", {**common, "topic": case.plain_topic, "n": case.n,
                                         "timeout": timeout})
        counter.ready()
        topic = case.edgebus_topic if who == "edgebus" else case.plain_topic
        writer = _Worker("writer", {**common, "topic": topic, "n": case.n, "readers": 1,
                                    "sample": case.sample, "field": case.field})
        result = counter.result()
        writer.result()
        cpu = _cpu_seconds(pid) - before if who == "edgebus" else result["cpu"]
        case.cpu[who].append(cpu / max(result["received"], 1))
        return _rate(result, case.n, case.notes, who)
    if who == "edgebus":
        worker = _Worker("mqtt_to_dds", {**common, "topic": case.edgebus_topic, "port": port,
                                         "mqtt_topic": case.mqtt, "n": case.n, "window": 5000,
                                         "sample": case.sample,
                                         "field": case.field if "." not in case.field else "",
                                         "timeout": timeout})
        result = worker.result()
        case.cpu[who].append((_cpu_seconds(pid) - before) / max(result["received"], 1))
        return _rate(result, case.n, case.notes, who)
    counter = _Worker("reader", {**common, "topic": case.plain_topic, "n": case.n, "raw": True,
                                 "timeout": timeout})
    counter.ready()
    writer = _Worker("writer", {**common, "topic": case.plain_topic, "n": case.n, "readers": 1,
                                "sample": case.sample, "field": case.field})
    result = counter.result()
    case.cpu[who].append(writer.result()["cpu"] / case.n)
    return _rate(result, case.n, case.notes, who)


def _fmt(rate: float) -> str:
    return f"{rate:,.0f}" if rate else "n/a"


def measure(rounds: int = 3, n_small: int = 30_000, n_imu: int = 15_000) -> list[Case]:
    domain = random.SystemRandom().randint(10, 99)
    with tempfile.TemporaryDirectory(prefix="bench-dds-") as tmp:
        workdir = Path(tmp)
        (workdir / "small.idl").write_text(SMALL_IDL)
        cases = _cases(workdir, n_small, n_imu)
        with _gateway(domain, workdir, workdir) as gateway:
            for case in cases:
                for index in range(rounds):
                    order = ("edgebus", "plain") if index % 2 == 0 else ("plain", "edgebus")
                    for who in order:
                        try:
                            rate = _run_case(case, who, domain, gateway)
                        except (RuntimeError, OSError) as exc:
                            case.notes.append(f"{who}: {exc}")
                            rate = 0.0
                        case.rates[who].append(rate)
                        print(f"bench_dds: {case.label}: {who} {_fmt(rate)} samples/s",
                              file=sys.stderr, flush=True)
    return cases


def report(cases: list[Case], rounds: int) -> list[str]:
    lines = [
        f"DDS <-> MQTT (bench/bench_dds.py): samples/s, median of {rounds} rounds;"
        " plain = cyclonedds-python alone",
        f"{'scenario':32} {'edgebus':>10} {'plain':>10} {'ratio':>7} {'target':>8}  result",
    ]
    for case in cases:
        edgebus = statistics.median(case.rates["edgebus"]) if case.rates["edgebus"] else 0.0
        plain = statistics.median(case.rates["plain"]) if case.rates["plain"] else 0.0
        ratio = edgebus / plain if plain and edgebus else 0.0
        result = "n/a" if not ratio else ("PASS" if ratio >= TARGET else "MISS")
        lines.append(f"{case.label:32} {_fmt(edgebus):>10} {_fmt(plain):>10} "
                     f"{ratio:>6.2f}x {'>= ' + str(TARGET) + 'x':>8}  {result}")
        runs = " ".join(f"{e:,.0f}/{p:,.0f}" for e, p in
                        zip(case.rates["edgebus"], case.rates["plain"], strict=False))
        lines.append(f"  per round (edgebus/plain): {runs}")
        if case.cpu["edgebus"] and case.cpu["plain"]:
            mine = statistics.median(case.cpu["edgebus"]) * 1e6
            theirs = statistics.median(case.cpu["plain"]) * 1e6
            side = "reader" if case.direction == "dds_to_mqtt" else "writer"
            lines.append(f"  CPU per sample: gateway {mine:.1f} us, plain {side} {theirs:.1f} us")
        lines += [f"  note: {note}" for note in case.notes]
    return lines


def run(rounds: int = 3) -> list[str]:
    """Measures and returns the report lines."""
    cases = measure(rounds)
    return report(cases, rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_dds", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side (3)")
    parser.add_argument("--small", type=int, default=30_000, help="small samples per run")
    parser.add_argument("--imu", type=int, default=15_000, help="Imu samples per run")
    args = parser.parse_args(argv)
    cases = measure(args.rounds, args.small, args.imu)
    print("\n".join(report(cases, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
