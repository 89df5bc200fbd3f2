"""The ready job, killed with SIGKILL in the middle of a micro-batch and started again:
every message lands in Parquet once.

The first run is the cluster command of docs/spark.md (``spark-submit ... job.py``, with
``--master local[2]``); it is killed, process group and all, while a batch is between
its offsets and its commit in the checkpoint. More messages arrive; then ``edgebus spark
run --trigger availableNow`` goes on from the same checkpoint and stops once it has read
what the log holds.

Then SIGTERM to the process group of a streaming ``edgebus spark run``: it stops cleanly
(status 0, one line on stderr) with a consistent output.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.components import SINK
from tests.helpers import mqtt_builder as mb
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.raw_client import RawClient
from tests.helpers.timeouts import unit
from tests.integration.api.support import KEY
from tests.integration.components.support import status_of, wait_for
from tests.integration.spark.support import committed_files, committed_rows
from tests.integration.stream.support import LOOPBACK, STREAM, http_of, offsets_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent

# _publish keeps 100 QoS 1 PUBLISH in flight: within Receive Maximum (MQTT 5.0 3.3.4).
CONFIG = STREAM + LOOPBACK + "mqtt:\n  receive_maximum: 100\n"

PROGRESS = re.compile(r"^batch (\d+): (\d+) rows, offsets (\d+|-) -> (\d+), \d+ rows/s, \d+ ms$")


def _publish(gw: RunningGateway, first: int, count: int) -> None:
    """Numbered QoS 1 messages, every tenth through the loopback adapter."""
    client = RawClient("127.0.0.1", gw.port, protocol_level=5)
    client.send(mb.gen_connect(f"job-pub-{first}", proto_ver=5))
    assert client.recv_packet().reason_code == 0
    for start in range(first, first + count, 100):
        numbers = range(start, min(start + 100, first + count))
        client.send(
            b"".join(
                mb.gen_publish(
                    f"raw/r{n}" if n % 10 == 0 else f"job/{n % 4}",
                    str(n),
                    qos=1,
                    mid=n % 65535 + 1,
                    proto_ver=5,
                )
                for n in numbers
            )
        )
        for _ in numbers:
            client.wait_for(lambda p: p.type == mb.PacketType.PUBACK)
    client.close()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _batches(checkpoint: Path, kind: str) -> set[int]:
    folder = checkpoint / kind
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()}


def _job_args(
    gw: RunningGateway, out: Path, checkpoint: Path, trigger: str, rows: int
) -> list[str]:
    """The job's arguments, the same under spark-submit and ``edgebus spark run``."""
    return [
        *("--gateway", http_of(gw).base, "--api-key", KEY),
        *("--out", str(out), "--checkpoint", str(checkpoint)),
        *("--trigger", trigger, "--max-rows-per-batch", str(rows)),
    ]


def _submit(gw: RunningGateway, out: Path, checkpoint: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [
        *(str(BIN / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false"),
        str(ROOT / "spark_sink" / "job.py"),
        *_job_args(gw, out, checkpoint, "200ms", 150),
    ]
    with log.open("ab") as output:
        return subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, env=_env(), start_new_session=True
        )


def _kill_mid_batch(gw: RunningGateway, out: Path, checkpoint: Path, log: Path) -> int:
    """Runs the job until a batch after the first is planned and not committed, then
    SIGKILLs its process group; returns that batch's id. Tries again (same checkpoint)
    when the kill landed between two batches."""
    for _ in range(3):
        job = _submit(gw, out, checkpoint, log)
        try:
            deadline = time.monotonic() + unit(240)
            while True:
                assert job.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                planned, committed = (
                    _batches(checkpoint, "offsets"),
                    _batches(checkpoint, "commits"),
                )
                pending = planned - committed
                if committed and pending and max(pending) > max(committed):
                    os.killpg(job.pid, signal.SIGKILL)
                    break
                time.sleep(0.01)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            job.wait(unit(30))
        in_flight = _batches(checkpoint, "offsets") - _batches(checkpoint, "commits")
        if in_flight:
            return max(in_flight)
    raise AssertionError("the job was never killed in the middle of a batch")


def test_killed_mid_batch_and_restarted_the_job_writes_every_message_once(
    tmp_path: Path,
) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with running_gateway(tmp_path, CONFIG) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        _publish(gw, 0, 3000)
        total = 3000 + 300  # the loopback adapter republishes every tenth
        wait_for(lambda: offsets_of(http_of(gw))["end"], lambda end: end == total, 30)

        killed = _kill_mid_batch(gw, out, checkpoint, tmp_path / "submit.log")
        written = {p for p in out.rglob("*.parquet")}
        hidden = written - set(committed_files(out))  # files of the batch that never committed

        _publish(gw, 3000, 500)
        total += 500 + 50
        wait_for(lambda: offsets_of(http_of(gw))["end"], lambda end: end == total, 30)
        command = [
            *(str(BIN / "edgebus"), "spark", "run", "--master", "local[2]"),
            *_job_args(gw, out, checkpoint, "availableNow", 1000),
        ]
        done = subprocess.run(command, capture_output=True, env=_env(), timeout=unit(400))
        assert done.returncode == 0, done.stderr.decode()[-3000:]

    rows = committed_rows(out)
    offsets = sorted(row["offset"] for row in rows)
    assert offsets == list(range(total))  # every message, once
    by_offset = {row["offset"]: row for row in rows}
    numbers = sorted(int(row["payload_json"]) for row in rows if row["protocol"] == "mqtt")
    assert numbers == list(range(3500))
    assert sorted(
        int(row["payload_json"]) for row in rows if row["protocol"] == "loopback"
    ) == list(range(0, 3500, 10))
    for row in by_offset.values():  # partitioned by date (of ts, UTC) and protocol
        assert row["date"] == row["ts"].date().isoformat()
        assert row["protocol"] in ("mqtt", "loopback")
    assert {p.parent.parent.name.split("=")[0] for p in committed_files(out)} == {"date"}
    assert not (hidden & set(committed_files(out)))

    lines = done.stdout.decode().splitlines()
    progress = [PROGRESS.match(line) for line in lines]
    assert all(progress), lines
    batches = [int(m.group(1)) for m in progress if m]
    assert batches == list(range(batches[0], batches[0] + len(batches)))
    assert batches[0] == killed  # the killed batch runs again, with the same offsets
    assert int(progress[-1].group(4)) == total  # type: ignore[union-attr]


def _children(pid: int) -> set[int]:
    """The processes ``pid`` started (the JVM of ``edgebus spark run``), from /proc."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(child) for child in (task / "children").read_text().split()}
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # exited, not yet reaped


def test_sigterm_to_the_process_group_stops_the_job_cleanly(tmp_path: Path) -> None:
    """``timeout`` or a service manager sends SIGTERM to the job's whole process group
    while it streams: the job stops the query, then the session, and exits with status 0
    and one line on stderr, no traceback; what it committed is every offset from 0 up to
    its last batch's end, once."""
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with running_gateway(tmp_path, CONFIG) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        _publish(gw, 0, 3000)
        total = 3000 + 300
        wait_for(lambda: offsets_of(http_of(gw))["end"], lambda end: end == total, 30)
        command = [
            *(str(BIN / "edgebus"), "spark", "run", "--master", "local[2]"),
            *_job_args(gw, out, checkpoint, "200ms", 150),
        ]
        stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
        with stdout.open("wb") as out_file, stderr.open("wb") as err_file:
            job = subprocess.Popen(
                command, stdout=out_file, stderr=err_file, env=_env(), start_new_session=True
            )
        try:
            deadline = time.monotonic() + unit(240)
            while not _batches(checkpoint, "commits"):  # streaming: a batch committed
                assert job.poll() is None, stderr.read_text()[-3000:]
                assert time.monotonic() < deadline, stderr.read_text()[-3000:]
                time.sleep(0.05)
            jvm = _children(job.pid)
            assert _batches(checkpoint, "commits") != set(range(total // 150))  # not done yet
            os.killpg(job.pid, signal.SIGTERM)
            code = job.wait(unit(120))
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(unit(30))

    errors = stderr.read_text()
    assert code == 0, errors[-3000:]
    assert "Traceback" not in errors, errors[-3000:]
    assert "py4j" not in errors.lower(), errors[-3000:]
    assert "Exception" not in errors, errors[-3000:]  # nor Spark's logs of the interrupted batch
    ours = [line for line in errors.splitlines() if line.startswith("edgebus spark:")]
    lines = stdout.read_text().splitlines()
    progress = [PROGRESS.match(line) for line in lines]
    assert all(progress), lines
    last = progress[-1]
    assert last is not None
    assert ours == [f"edgebus spark: stopped by SIGTERM after batch {last.group(1)}"]
    wait_for(lambda: [pid for pid in jvm if not _gone(pid)], lambda alive: alive == [], 30)

    offsets = sorted(row["offset"] for row in committed_rows(out))
    assert offsets == list(range(int(last.group(4))))  # every offset up to the last batch, once
    assert 0 < len(offsets) < total
    committed = _batches(checkpoint, "commits")
    assert committed == set(range(int(last.group(1)) + 1))


def test_a_query_failing_in_a_task_prints_one_line_not_sparks_stack_traces(
    tmp_path: Path,
) -> None:
    """A query that fails inside a task (here the records from ``--starting-offsets 0``
    were deleted by retention: the read in the worker fails): status 1 and the job's one
    line naming the cause; none of Spark's logs of the failed job (FileFormatWriter's
    "Aborting job" with an 80-line Java stack trace was printed)."""
    retention = "  segment_bytes: 4096\n  max_bytes: 8192\n"
    with running_gateway(
        tmp_path, CONFIG.replace("enabled: true\n", "enabled: true\n" + retention)
    ) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        _publish(gw, 0, 300)
        wait_for(lambda: offsets_of(http_of(gw))["start"], lambda start: start > 0, 30)
        command = [
            *(str(BIN / "edgebus"), "spark", "run", "--master", "local[1]"),
            *_job_args(gw, tmp_path / "out", tmp_path / "checkpoint", "availableNow", 1000),
            *("--starting-offsets", "0"),
        ]
        done = subprocess.run(command, capture_output=True, env=_env(), timeout=unit(300))
    errors = done.stderr.decode()
    assert done.returncode == 1, errors[-3000:]
    ours = [line for line in errors.splitlines() if line.startswith("edgebus spark:")]
    assert len(ours) == 1, errors[-3000:]
    assert ours[0].startswith("edgebus spark: the query failed: offsets 0 to "), ours
    assert "deleted by the gateway's retention" in ours[0], ours
    assert "\tat " not in errors, errors[-3000:]  # no Java stack trace
    assert " ERROR " not in errors, errors[-3000:]  # none of Spark's logs of the failure
