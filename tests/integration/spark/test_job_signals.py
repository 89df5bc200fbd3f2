"""``edgebus spark run`` stopped by Ctrl-C (SIGINT to its process group), then, started
again with the same checkpoint, by a SIGTERM to Spark's driver JVM alone (what a
service manager signalling every process of the job, or a ``kill`` of the JVM, does to
it): each time status 0, one line on stderr, no Python or Java stack trace; the second
run goes on where the first one's checkpoint ended, and Parquet holds every offset of
the committed batches once.

Before, a SIGTERM reaching the JVM ran its shutdown hooks, which stopped the Spark
context under the running batch: the JVM printed Spark's logs of the aborted write with
Java stack traces, and the job ended with status 1 and Python tracebacks (py4j's
refused connection, PySpark's accumulator server). One gateway, two Spark sessions.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gateway.components import SINK
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.timeouts import unit
from tests.integration.components.support import status_of, wait_for
from tests.integration.spark.support import committed_rows
from tests.integration.spark.test_job import (
    BIN,
    CONFIG,
    PROGRESS,
    _batches,
    _children,
    _env,
    _gone,
    _job_args,
    _publish,
)
from tests.integration.stream.support import http_of, offsets_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: What must not be on the job's stderr: Python tracebacks, Java stack frames and
#: exceptions, Spark's ERROR logs, py4j.
TRACE = re.compile(r"Traceback|^\s+at |Exception|ERROR|py4j|Py4J", re.M)


def _descendants(pid: int) -> set[int]:
    """Every process under ``pid``: the driver JVM and Spark's Python workers."""
    found: set[int] = set()
    pending = [pid]
    while pending:
        try:
            children = _children(pending.pop())
        except FileNotFoundError:  # exited meanwhile
            continue
        pending += list(children - found)
        found |= children
    return found


def _run_until_mid_batch(
    gw: RunningGateway, out: Path, checkpoint: Path, log: Path
) -> tuple[subprocess.Popen[bytes], Path]:
    """Starts the streaming job; returns once this run committed a batch and planned the
    next one (a batch in progress), with the file its stderr goes to."""
    command = [
        *(str(BIN / "edgebus"), "spark", "run", "--master", "local[2]"),
        *_job_args(gw, out, checkpoint, "200ms", 150),
    ]
    stderr = log.with_suffix(".err")
    with log.open("wb") as out_file, stderr.open("wb") as err_file:
        job = subprocess.Popen(
            command, stdout=out_file, stderr=err_file, env=_env(), start_new_session=True
        )
    before = _batches(checkpoint, "commits")
    deadline = time.monotonic() + unit(240)
    while True:
        assert job.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, stderr.read_text()[-3000:]
        committed = _batches(checkpoint, "commits")
        planned = _batches(checkpoint, "offsets")
        if committed - before and planned - committed:
            return job, stderr
        time.sleep(0.02)


def _stop(job: subprocess.Popen[bytes], send: list[tuple[int, bool, signal.Signals]]) -> int:
    """Sends each ``(pid, group, signal)``; the job's exit status."""
    try:
        for pid, group, sig in send:
            (os.killpg if group else os.kill)(pid, sig)
        return job.wait(unit(120))
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(unit(30))


def _one_clean_line(stderr: Path) -> str:
    errors = stderr.read_text()
    assert not TRACE.search(errors), errors[-4000:]
    ours = [line for line in errors.splitlines() if line.startswith("edgebus spark:")]
    assert len(ours) == 1, errors[-4000:]
    return ours[0]


def test_ctrl_c_then_sigterm_to_the_driver_jvm_stop_cleanly_and_resume(tmp_path: Path) -> None:
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with running_gateway(tmp_path, CONFIG) as gw:
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        _publish(gw, 0, 3000)
        total = 3000 + 300  # the loopback adapter republishes every tenth
        wait_for(lambda: offsets_of(http_of(gw))["end"], lambda end: end == total, 30)

        # Ctrl-C in a terminal: SIGINT to the job's process group
        job, stderr = _run_until_mid_batch(gw, out, checkpoint, tmp_path / "first.out")
        spawned = _descendants(job.pid)
        code = _stop(job, [(job.pid, True, signal.SIGINT)])
        assert code == 0, stderr.read_text()[-4000:]
        first = [PROGRESS.match(line) for line in (tmp_path / "first.out").read_text().splitlines()]
        assert first and all(first), first
        last = first[-1]
        assert last is not None
        assert _one_clean_line(stderr) == f"edgebus spark: stopped by SIGINT after batch {last[1]}"
        assert _batches(checkpoint, "commits") == set(range(int(last[1]) + 1))
        wait_for(lambda: [p for p in spawned if not _gone(p)], lambda alive: alive == [], 30)

        # SIGTERM to the driver JVM alone, in the middle of a batch
        job, stderr = _run_until_mid_batch(gw, out, checkpoint, tmp_path / "second.out")
        spawned = _descendants(job.pid)
        jvm = _children(job.pid)
        assert len(jvm) == 1
        code = _stop(job, [(pid, False, signal.SIGTERM) for pid in jvm])
        assert code == 0, stderr.read_text()[-4000:]
        line = _one_clean_line(stderr)
        assert re.fullmatch(
            r"edgebus spark: stopped by SIGTERM to Spark's driver JVM (after batch \d+|at start)",
            line,
        ), line
        wait_for(lambda: [p for p in spawned if not _gone(p)], lambda alive: alive == [], 30)

    second = [PROGRESS.match(line) for line in (tmp_path / "second.out").read_text().splitlines()]
    assert all(second), second
    if second:  # the second run went on from the first one's checkpoint
        assert second[0] is not None and int(second[0][1]) == int(last[1]) + 1
        assert second[0][3] == last[4]
    committed = _batches(checkpoint, "commits")
    assert committed == set(range(max(committed) + 1))
    assert max(committed) > int(last[1])
    offsets = sorted(row["offset"] for row in committed_rows(out))
    assert offsets == list(range(len(offsets)))  # every offset of the committed batches, once
    assert len(offsets) == 150 * (max(committed) + 1) < total
