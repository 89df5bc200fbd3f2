"""``edgebus spark run`` when the driver JVM it started ends under it (a SIGTERM to the
JVM alone, the OOM killer), with a fake session whose driver is a real child process:
one line on stderr, status 0 for a SIGTERM and 1 otherwise, no traceback (PySpark's
accumulator server quiet too); a failed call while the driver lives is a failure, as before.
The real JVM: tests/integration/spark/test_job_signals.py."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from py4j.protocol import Py4JError, Py4JNetworkError

from spark_sink import job

ARGV = ["--gateway", "http://127.0.0.1:1", "--out", "o", "--checkpoint", "c"]


@pytest.fixture
def driver() -> Iterator[subprocess.Popen[bytes]]:
    """A child process standing for the driver JVM (``gateway.proc``)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


class Server:
    """PySpark's accumulator server: ``handle_error`` prints a traceback."""

    def __init__(self) -> None:
        self.printed = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.printed += 1


class DriverSpark:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.readStream = self
        self.server = Server()
        self.sparkContext = SimpleNamespace(
            _accumulatorServer=self.server,
            _gateway=SimpleNamespace(proc=proc),
            setLogLevel=lambda level: None,
        )
        self.stopped = False

    def format(self, name: str) -> DriverSpark:
        return self

    def options(self, **options: str) -> DriverSpark:
        return self

    def load(self) -> DriverSpark:
        return self

    def stop(self) -> None:
        self.stopped = True
        if self.sparkContext._gateway.proc.poll() is not None:  # as PySpark's, the JVM gone
            raise ConnectionRefusedError(111, "Connection refused")


class EndingQuery:
    """A query whose driver ends by ``signum`` after its first batch (None: the driver
    lives, and a call fails anyway): py4j's calls fail from then on, and the JVM closing
    the accumulator server's connection makes it report an error."""

    def __init__(self, spark: DriverSpark, signum: int | None) -> None:
        self.spark = spark
        self.signum = signum
        self.waits = 0
        self.recentProgress = [
            {"batchId": 0, "numInputRows": 150, "sources": [{"endOffset": {"offset": 150}}]}
        ]

    def awaitTermination(self, timeout: float) -> bool:
        self.waits += 1
        if self.waits == 1:
            return False
        proc = self.spark.sparkContext._gateway.proc
        if self.signum is not None:
            proc.send_signal(self.signum)
        try:
            raise EOFError
        except EOFError:  # the accumulator server's thread, as socketserver calls it
            self.spark.sparkContext._accumulatorServer.handle_error(None, ("127.0.0.1", 1))
        raise Py4JNetworkError("Error while sending or receiving")

    def exception(self) -> None:
        return None

    def stop(self) -> None:
        raise Py4JError("An error occurred while calling o42.stop")


def _main(monkeypatch: pytest.MonkeyPatch, spark: DriverSpark, query: EndingQuery) -> int:
    monkeypatch.setattr(job, "session", lambda master: spark)
    monkeypatch.setattr(job, "write_parquet", lambda *args: query)
    monkeypatch.setattr(job, "_quiet_failures", lambda spark: None)
    return job.main(ARGV)


@pytest.fixture(autouse=True)
def restore_signals() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_sigterm_to_the_driver_jvm_stops_the_job_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    driver: subprocess.Popen[bytes],
) -> None:
    spark = DriverSpark(driver)
    assert _main(monkeypatch, spark, EndingQuery(spark, signal.SIGTERM)) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["batch 0: 150 rows, offsets - -> 150, 0 rows/s, 0 ms"]
    assert err.splitlines() == [
        "edgebus spark: stopped by SIGTERM to Spark's driver JVM after batch 0"
    ]
    assert spark.server.printed == 0
    assert spark.stopped


def test_a_driver_jvm_killed_otherwise_fails_the_job_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    driver: subprocess.Popen[bytes],
) -> None:
    spark = DriverSpark(driver)
    assert _main(monkeypatch, spark, EndingQuery(spark, signal.SIGKILL)) == 1
    assert capsys.readouterr().err.splitlines() == [
        "edgebus spark: Spark's driver JVM was killed by SIGKILL after batch 0"
    ]
    assert spark.server.printed == 0


def test_a_failed_call_while_the_driver_lives_is_a_failure_as_before(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    driver: subprocess.Popen[bytes],
) -> None:
    monkeypatch.setattr(job, "_DRIVER_EXIT_S", 0.2)
    spark = DriverSpark(driver)
    assert _main(monkeypatch, spark, EndingQuery(spark, None)) == 1
    assert capsys.readouterr().err.splitlines() == [
        "edgebus spark: the query failed: Error while sending or receiving"
    ]
    assert spark.server.printed == 1  # the accumulator server's error is shown
    assert driver.poll() is None
