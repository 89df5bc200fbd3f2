"""``edgebus spark run`` when its query fails: one line on stderr, status 1
(``spark_sink.job.main``), with a fake Spark session and query: no JVM."""

from __future__ import annotations

from typing import Any

import pytest

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
        self.stopped = False

    def format(self, name: str) -> FakeSpark:
        return self

    def options(self, **options: str) -> FakeSpark:
        return self

    def load(self) -> FakeSpark:
        return self

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
