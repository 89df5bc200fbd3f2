"""``edgebus spark run`` when its query fails (one line on stderr, status 1) or when it
is stopped by a signal (one line, status 0, also when the driver JVM got the signal too
and is gone), with a fake Spark session and query: no JVM (``spark_sink.job.main``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from py4j.protocol import Py4JError, Py4JNetworkError

from spark_sink import job

# What PySpark's StreamingQueryException says when the source's latestOffset raised
# (abridged from a real run: the Python traceback is embedded in Spark's message).
SPARK_MESSAGE = """[STREAM_FAILED] Query [id = 97b0, runId = 6507] terminated with exception: \
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source \
perform latestOffset: Traceback (most recent call last):
  File "/x/pyspark.zip/pyspark/sql/streaming/python_streaming_source_runner.py", line 279
  File "/work/main/spark_sink/client.py", line 77, in _open
    raise GatewayError(
spark_sink.client.GatewayError: http://127.0.0.1:1/api/v1/stream/offsets: the gateway \
refused the credentials (401): give the option apiKey, or username and password
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.pythonStreamingDataSourceRuntimeError
org.apache.spark.SparkException: Job aborted.
=== Streaming Query ===
Identifier: [id = 97b0, runId = 6507]
Current Committed Offsets: {}
"""


class StreamingQueryException(Exception):
    """Stands for pyspark's (captured from the JVM)."""


class FakeQuery:
    def __init__(self, failure: Exception, raises: bool) -> None:
        self.failure = failure
        self.raises = raises
        self.recentProgress: list[dict[str, Any]] = []

    def awaitTermination(self, timeout: float) -> bool:
        if self.raises:
            raise self.failure
        return True

    def exception(self) -> Exception:
        return self.failure

    def stop(self) -> None:
        pass


class FakeSpark:
    def __init__(self) -> None:
        self.readStream = self
        self.sparkContext = SimpleNamespace(_accumulatorServer=None, setLogLevel=self.log_level)
        self.log_levels: list[str] = []
        self.stopped = False

    def format(self, name: str) -> FakeSpark:
        return self

    def options(self, **options: str) -> FakeSpark:
        return self

    def load(self) -> FakeSpark:
        return self

    def log_level(self, level: str) -> None:
        self.log_levels.append(level)

    def stop(self) -> None:
        self.stopped = True


@pytest.mark.parametrize("raises", [True, False])  # awaitTermination raises / exception()
def test_a_failed_query_is_one_line_with_its_root_cause(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raises: bool
) -> None:
    spark = FakeSpark()
    query = FakeQuery(StreamingQueryException(SPARK_MESSAGE), raises)
    monkeypatch.setattr(job, "session", lambda master: spark)
    monkeypatch.setattr(job, "write_parquet", lambda *args: query)
    monkeypatch.setattr(job, "_quiet_failures", lambda spark: None)
    argv = ["--gateway", "http://127.0.0.1:1", "--out", "o", "--checkpoint", "c"]
    assert job.main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "edgebus spark: the query failed: http://127.0.0.1:1/api/v1/stream/offsets: the"
        " gateway refused the credentials (401): give the option apiKey, or username and"
        " password"
    ]
    assert spark.stopped


def test_the_root_cause_of_data_loss_and_of_other_failures() -> None:
    lost = (
        "Job aborted due to stage failure: Task 0 failed: org.apache.spark.api.python."
        "PythonException: Traceback (most recent call last):\n"
        '  File "/work/main/spark_sink/datasource.py", line 131, in _read\n'
        "spark_sink.datasource.DataLossError: offsets 0 to 9 were deleted by the gateway's"
        " retention before Spark read them (option failOnDataLoss=false goes on)\n"
        "\tat org.apache.spark.api.python.BasePythonRunner\n"
    )
    assert job.failure_reason(RuntimeError(lost)) == (
        "offsets 0 to 9 were deleted by the gateway's retention before Spark read them"
        " (option failOnDataLoss=false goes on)"
    )
    assert job.failure_reason(RuntimeError("[X] no Python here\nmore")) == "[X] no Python here"


class SignalledQuery:
    """A query that runs until the job, signalled while it waits, stops it; with
    ``driver_gone``, the JVM got the signal too: every later call fails as py4j's do."""

    def __init__(self, signum: int, driver_gone: bool) -> None:
        self.signum = signum
        self.driver_gone = driver_gone
        self.waits = 0
        self.stopped = False
        self.recentProgress = [
            {"batchId": 0, "numInputRows": 150, "sources": [{"endOffset": {"offset": 150}}]}
        ]

    def _call(self) -> None:
        if self.driver_gone and self.waits > 1:
            raise Py4JNetworkError("Answer from Java side is empty")

    def awaitTermination(self, timeout: float) -> bool:
        self.waits += 1
        if self.waits == 1:
            os.kill(os.getpid(), self.signum)
            return False
        self._call()
        return self.stopped

    def exception(self) -> None:
        return None

    def stop(self) -> None:
        self.waits += 1
        self._call()
        self.stopped = True


class GoneSpark(FakeSpark):
    def stop(self) -> None:
        self.stopped = True
        raise Py4JError("An error occurred while calling SparkSession.clearDefaultSession")


@pytest.fixture
def restore_signals() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("driver_gone", [False, True])
@pytest.mark.usefixtures("restore_signals")
def test_a_signal_stops_the_query_then_the_session_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
    driver_gone: bool,
) -> None:
    spark = GoneSpark() if driver_gone else FakeSpark()
    query = SignalledQuery(signum, driver_gone)
    monkeypatch.setattr(job, "session", lambda master: spark)
    monkeypatch.setattr(job, "write_parquet", lambda *args: query)
    monkeypatch.setattr(job, "_quiet_failures", lambda spark: None)
    argv = ["--gateway", "http://127.0.0.1:1", "--out", "o", "--checkpoint", "c"]
    assert job.main(argv) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["batch 0: 150 rows, offsets - -> 150, 0 rows/s, 0 ms"]
    name = signal.Signals(signum).name
    assert err.splitlines() == [f"edgebus spark: stopped by {name} after batch 0"]
    assert spark.log_levels == [
        "OFF"
    ]  # before stopping the query: no logs of the interrupted batch
    assert query.stopped is not driver_gone  # query.stop() failed: the JVM was gone
    assert spark.stopped


@pytest.mark.usefixtures("restore_signals")
def test_ctrl_c_while_the_session_starts_stops_the_job_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def session(master: str | None) -> None:
        raise KeyboardInterrupt  # PySpark's SIGINT handler, installed by its SparkContext

    monkeypatch.setattr(job, "session", session)
    argv = ["--gateway", "http://127.0.0.1:1", "--out", "o", "--checkpoint", "c"]
    assert job.main(argv) == 0
    assert capsys.readouterr() == ("", "edgebus spark: stopped by SIGINT at start\n")
