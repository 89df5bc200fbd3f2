"""The ready job: the stream log into Parquet, partitioned by date and protocol.

    edgebus spark run --gateway URL --out PATH --checkpoint PATH [--trigger 5s | availableNow]
                      [--master local[*]] [--api-key KEY] [--topic FILTER] ...
    spark-submit --master spark://host:7077 .../spark_sink/job.py --gateway URL ...

The same code either way: this module is the spark-submit application, and
``edgebus spark run`` calls its ``main``. It reads ``format("edgebus")`` as a stream,
adds the partition column ``date`` (of ``ts``, in UTC), and writes Parquet with a
checkpoint, so a query stopped at any point (even by SIGKILL) and started again with the
same checkpoint writes every record once. One line per micro-batch goes to stdout::

    batch 3: 1200 rows, offsets 4800 -> 6000, 2400 rows/s, 500 ms

``--trigger availableNow`` reads what the log holds when the query starts, then stops;
otherwise the query runs until SIGTERM or SIGINT (Ctrl-C), sent to the job alone or to
its whole process group: it stops the query, then the session, and exits with status 0
and one line on stderr::

    edgebus spark: stopped by SIGTERM after batch 7

``edgebus spark run`` starts Spark's driver JVM in a session of its own, so that a signal
to the job's process group does not reach it (the JVM exits when the job does: it reads
the job's pipe to its standard input), and with ``-Xrs``: a SIGTERM that reaches it
anyway (a service manager signalling every process of the job, a ``kill``) ends it at
once, without the stack traces its shutdown hooks would print. When the job got the
signal too, it says the same line and exits the same way; when the JVM alone did::

    edgebus spark: stopped by SIGTERM to Spark's driver JVM after batch 7

(status 0; a JVM that ends otherwise, status 1 and ``Spark's driver JVM was killed by
SIGKILL``). Either way the checkpoint holds what was committed.

A query that fails (wrong credentials, data loss, ...) ends the job with one line on
stderr and status 1::

    edgebus spark: the query failed: <the root cause's message>

Spark's own log of that failure (a stack trace per place it passed) is turned off.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = [
    "failure_reason",
    "main",
    "parse_args",
    "parse_trigger",
    "prepare_environment",
    "progress_line",
    "session",
    "write_parquet",
]

APP_NAME = "edgebus-stream"
_TRIGGER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# The last line of a Python traceback within Spark's message: ``module.Class: message``.
_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception)): (\S.*)$", re.M)
# Spark's loggers that log a failed query or task with its stack traces (datasources:
# FileFormatWriter's "Aborting job" when a task of the Parquet write failed).
_FAILURE_LOGGERS = (
    "org.apache.spark.sql.execution.streaming",
    "org.apache.spark.sql.execution.datasources",
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.TaskSchedulerImpl",
    "org.apache.spark.api.python",
)


def parse_trigger(text: str) -> dict[str, Any]:
    """``writeStream.trigger(**...)`` of ``--trigger``: ``availableNow`` or a period."""
    if text.strip().lower() in ("availablenow", "available-now", "once"):
        return {"availableNow": True}
    match = _TRIGGER.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"expected a period such as 5s, 500ms, 1m, or availableNow; got {text!r}"
        )
    millis = round(float(match.group(1)) * _SECONDS[match.group(2)] * 1000)
    return {"processingTime": f"{max(millis, 1)} milliseconds"}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def parse_args(argv: Sequence[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Stream the edgebus stream log into Parquet, partitioned by date and"
        " protocol, exactly once (a checkpoint keeps the progress).",
    )
    p.add_argument("--gateway", required=True, help="the gateway's HTTP API: http://host:8081")
    p.add_argument("--out", required=True, help="Parquet output directory (or URI)")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (or URI)")
    p.add_argument(
        "--trigger",
        type=parse_trigger,
        default=parse_trigger("5s"),
        help="micro-batch period (5s, 500ms, 1m) or availableNow: what the log holds,"
        " then stop (default 5s)",
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[*]; under spark-submit, the one it was given)",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get("EDGEBUS_API_KEY"),
        help="API key (default: $EDGEBUS_API_KEY)",
    )
    p.add_argument("--username", help="a user of api.users, instead of a key")
    p.add_argument(
        "--password",
        default=os.environ.get("EDGEBUS_API_PASSWORD"),
        help="its password (default: $EDGEBUS_API_PASSWORD)",
    )
    p.add_argument("--topic", default="#", help="topic filter (default #)")
    p.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where a new query starts: earliest, latest or an offset (default earliest)",
    )
    p.add_argument(
        "--max-rows-per-batch", type=_positive, help="most offsets per micro-batch (no limit)"
    )
    p.add_argument(
        "--partition-rows", type=_positive, default=100_000, help="offsets per Spark task"
    )
    return p.parse_args(argv)


def prepare_environment(master: str) -> None:
    """What a local Spark needs before its session starts: loopback only, workers running
    this Python and able to import ``spark_sink``."""
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def _offset(source: Any, key: str) -> str:
    value = source.get(key) if isinstance(source, dict) else None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict) and "offset" in value:
        return str(value["offset"])
    return "-"


def progress_line(progress: dict[str, Any]) -> str:
    """One line for one micro-batch's ``StreamingQueryProgress`` (as a dict)."""
    sources = progress.get("sources") or [{}]
    rate = progress.get("processedRowsPerSecond") or 0.0
    duration = progress.get("batchDuration")
    if duration is None:
        duration = (progress.get("durationMs") or {}).get("triggerExecution", 0)
    return (
        f"batch {progress.get('batchId')}: {progress.get('numInputRows', 0)} rows,"
        f" offsets {_offset(sources[0], 'startOffset')} -> {_offset(sources[0], 'endOffset')},"
        f" {rate:.0f} rows/s, {duration} ms"
    )


def failure_reason(error: BaseException) -> str:
    """The root cause's message of a failed query's ``error``, in one line: the last
    Python exception of ``spark_sink`` raised in the source (its traceback is embedded in
    Spark's message), else of any Python code, else the first line of ``error``."""
    text = str(error)
    raised = [m for m in _RAISED.finditer(text) if not _spark_internal(m.group(0))]
    ours = [m for m in raised if m.group(0).startswith("spark_sink.")]
    if ours or raised:
        return (ours or raised)[-1].group(2).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _spark_internal(line: str) -> bool:
    return line.startswith(("pyspark.", "py4j.", "org.apache.", "java.", "scala."))


def _quiet_failures(spark: Any) -> None:
    """Turns off Spark's logs of a failed query and its tasks: ``main`` says it in one line."""
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in _FAILURE_LOGGERS:
            configurator.setLevel(name, level)
    except Exception as exc:  # py4j's: another logging backend; keep its logs
        print(f"edgebus spark: Spark's failure logs stay on: {exc}", file=sys.stderr)


def _source_options(args: argparse.Namespace) -> dict[str, str]:
    options = {
        "gateway": args.gateway,
        "topic": args.topic,
        "startingOffsets": str(args.starting_offsets),
        "partitionRows": str(args.partition_rows),
    }
    if args.api_key:
        options["apiKey"] = args.api_key
    if args.username:
        options["username"] = args.username
        options["password"] = args.password or ""
    if args.max_rows_per_batch:
        options["maxRowsPerBatch"] = str(args.max_rows_per_batch)
    return options


def session(master: str | None, app_name: str = APP_NAME) -> Any:
    """A Spark session with the ``edgebus`` source registered: ``master`` (default
    ``local[*]``), or, under spark-submit and with ``master`` None, the one it was given."""
    submitted = master is None and _submitted()
    prepare_environment("" if submitted else master or "local[*]")
    from pyspark.sql import SparkSession

    from spark_sink.datasource import EdgebusDataSource

    options = {
        "spark.app.name": app_name,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    if not submitted:
        options["spark.master"] = master or "local[*]"
        options["spark.driver.extraJavaOptions"] = DRIVER_JAVA_OPTIONS
        _start_driver(options)
    spark = SparkSession.builder.config(map=dict(options)).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(EdgebusDataSource)
    return spark


#: The driver JVM's options when the job starts it: ``-Xrs``, no handlers of its own for
#: SIGTERM and SIGHUP (PySpark already starts it with SIGINT ignored). A SIGTERM that
#: reaches the JVM (a service manager signalling every process of the job, ``kill``)
#: then ends it at once, as the signal's default action: its shutdown hooks do not run,
#: so it prints none of the stack traces of the batch they would interrupt (Spark's
#: FileFormatWriter, its RPC, the stream's thread), and the checkpoint holds what was
#: committed, as after a SIGKILL. The job tells how the JVM ended (``_StopRequest``).
DRIVER_JAVA_OPTIONS = "-Xrs"
#: How long the job waits for the driver JVM to exit once a call to it failed.
_DRIVER_EXIT_S = 5.0


def _start_driver(options: dict[str, str]) -> None:
    """Starts Spark's driver JVM as PySpark does (``spark-submit`` with ``options``), but
    in a session of its own (``launch_gateway``'s ``popen_kwargs``): a signal sent to
    this process's group (Ctrl-C, ``timeout``, a service manager) then reaches this
    process only, which stops the query and the session in order. The JVM still exits
    with this process, which holds its standard input; the gateway keeps its process
    (``gateway.proc``: ``_driver_process``)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf().setAll(list(options.items()))
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
    SparkContext(conf=conf, gateway=gateway)  # the active context getOrCreate takes


def write_parquet(records: Any, out: str, checkpoint: str, trigger: dict[str, Any]) -> Any:
    """Starts the query writing ``records`` (the source's schema) to Parquet under
    ``out``, partitioned by ``date`` (of ``ts``) and ``protocol``; returns it."""
    from pyspark.sql import functions as F

    return (
        records.withColumn("date", F.to_date("ts"))
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
        .partitionBy("date", "protocol")
        .outputMode("append")
        .trigger(**trigger)
        .start()
    )


def _driver_process(spark: Any) -> subprocess.Popen[bytes] | None:
    """The driver JVM this job started (``_start_driver``); None under spark-submit,
    whose JVM started this process."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return proc if isinstance(proc, subprocess.Popen) else None


class _StopRequest:
    """SIGTERM and SIGINT ask the job to stop: ``name`` says which came first.

    The driver JVM this job started may end on its own: a SIGTERM sent to it (a service
    manager signalling every process of the job, before or without the job; see
    ``DRIVER_JAVA_OPTIONS``), the OOM killer. ``driver_ended`` finds that out once a
    call to it failed, and keeps its exit status in ``driver_exit``.

    Once a signal came or the JVM ended, the JVM closing the connection of PySpark's
    accumulator server makes it print the traceback of that (``quiet_accumulators``):
    not said, the job's one line says how it ended."""

    def __init__(self) -> None:
        self.name: str | None = None
        self.driver: subprocess.Popen[bytes] | None = None
        self.driver_exit: int | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.name = self.name or signal.Signals(signum).name

    @property
    def stopping(self) -> bool:
        """A signal came, or the driver JVM ended: Spark's errors are not the query's."""
        return self.name is not None or self.driver_exit is not None

    def driver_ended(self, error: BaseException) -> bool:
        """True when ``error`` (of a call to Spark) comes from the driver JVM this job
        started having exited: waits up to ``_DRIVER_EXIT_S`` for that when ``error``
        says the JVM did not answer (an answer, a Java exception, means it lives)."""
        from py4j.protocol import Py4JError, Py4JJavaError

        if self.driver is None:
            return False
        if self.driver_exit is not None:
            return True
        silent = isinstance(error, Py4JError | OSError | EOFError)
        wait = _DRIVER_EXIT_S if silent and not isinstance(error, Py4JJavaError) else 0.0
        try:
            self.driver_exit = self.driver.wait(wait)
        except subprocess.TimeoutExpired:
            return False
        return True

    def driver_line(self) -> tuple[str, int]:
        """How the driver JVM ended, for the job's line, and the job's exit status: 0 for
        a SIGTERM (a stop, as the job's own), else 1."""
        code = self.driver_exit
        if code in (-signal.SIGTERM, 128 + signal.SIGTERM):
            return "stopped by SIGTERM to Spark's driver JVM", 0
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return f"Spark's driver JVM {how}", 1

    def quiet_accumulators(self, spark: Any) -> None:
        server = getattr(spark.sparkContext, "_accumulatorServer", None)
        if server is None:
            return
        handle_error = server.handle_error

        def on_error(request: Any, client_address: Any) -> None:
            # in the server's thread: the JVM closed the connection; ended, it is told
            error = sys.exc_info()[1] or EOFError()
            if self.name is None and not self.driver_ended(error):
                handle_error(request, client_address)

        server.handle_error = on_error


class _NotPy4J(logging.Filter):
    """Drops the records py4j logs, whatever the logger (its log of a failed call, with
    the traceback, goes to the root logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


_NOT_PY4J = _NotPy4J()


def _quiet_py4j() -> None:
    """py4j logs a call that failed (the driver JVM exiting or gone) with its traceback:
    the job says what matters in one line instead."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
    logging.getLogger().addFilter(_NOT_PY4J)


class _Progress:
    """Prints one line per micro-batch once, and keeps the last batch printed."""

    def __init__(self) -> None:
        self.last_batch = -1

    def print_new(self, query: Any) -> None:
        for progress in query.recentProgress:
            batch = progress.get("batchId", -1) if isinstance(progress, dict) else -1
            if batch > self.last_batch and progress.get("numInputRows") is not None:
                print(progress_line(progress), flush=True)
                self.last_batch = batch


def _run_query(
    spark: Any, query: Any, stop: _StopRequest, progress: _Progress
) -> BaseException | None:
    """Follows ``query`` until it ends, stopping it once a stop is requested; returns
    its failure, if any. Stopping interrupts the batch in progress, which several parts
    of Spark log with stack traces (the Parquet writer, Hadoop's file system, the
    scheduler): Spark's log is turned off first."""
    while True:
        try:
            done = query.awaitTermination(0.5)
        except Exception as exc:  # StreamingQueryException and kin
            if stop.name is not None:
                raise
            progress.print_new(query)
            return exc
        progress.print_new(query)
        if done:
            failure: BaseException | None = query.exception()
            return failure
        if stop.name is not None:
            spark.sparkContext.setLogLevel("OFF")
            query.stop()


def _spark_error(error: BaseException) -> bool:
    """True for what a call to the driver JVM raises when the JVM is exiting or gone:
    py4j's errors (a Java exception, or no answer), socket errors, PySpark's errors."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return isinstance(error, Py4JError | OSError | EOFError | PySparkException)


def _stop_session(spark: Any, quietly: bool) -> None:
    """``spark.stop()``; ``quietly``: saying nothing when the JVM is exiting or gone
    (PySpark warns that it could not stop it cleanly, and py4j raises)."""
    with warnings.catch_warnings():
        if quietly:
            warnings.simplefilter("ignore", RuntimeWarning)
        try:
            spark.stop()
        except Exception as exc:
            if not (quietly and _spark_error(exc)):
                raise


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    stop = _StopRequest()
    stop.install()  # before the session: a signal while Spark starts stops the job too
    _quiet_py4j()
    progress = _Progress()
    failure: BaseException | None = None
    spark = None
    try:
        spark = session(args.master)
        stop.install()  # again: PySpark's SparkContext installs its own SIGINT handler
        stop.driver = _driver_process(spark)
        stop.quiet_accumulators(spark)
        if stop.name is None:
            _quiet_failures(spark)
            records = spark.readStream.format("edgebus").options(**_source_options(args)).load()
            query = write_parquet(records, args.out, args.checkpoint, args.trigger)
            failure = _run_query(spark, query, stop, progress)
            if failure is not None and stop.name is None and stop.driver_ended(failure):
                failure = None  # not the query's: the JVM ended under it
    except KeyboardInterrupt:  # PySpark's SIGINT handler, before ours was back in place
        stop.name = stop.name or "SIGINT"
    except Exception as exc:  # stopping: the JVM got the signal too, and is exiting or gone
        if not _spark_error(exc) or not (stop.name is not None or stop.driver_ended(exc)):
            raise
    finally:
        if spark is not None:
            _stop_session(spark, quietly=stop.stopping)
    when = f"after batch {progress.last_batch}" if progress.last_batch >= 0 else "at start"
    if stop.name is not None:  # the checkpoint holds what was committed
        print(f"edgebus spark: stopped by {stop.name} {when}", file=sys.stderr)
        return 0
    if stop.driver_exit is not None:  # the checkpoint holds what was committed
        line, status = stop.driver_line()
        print(f"edgebus spark: {line} {when}", file=sys.stderr)
        return status
    if failure is not None:
        print(f"edgebus spark: the query failed: {failure_reason(failure)}", file=sys.stderr)
        return 1
    return 0


def _submitted() -> bool:
    """True under spark-submit: its JVM started first and gave this driver its master
    (it passes the JVM's address in ``PYSPARK_GATEWAY_PORT``)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


if __name__ == "__main__":
    sys.exit(main())
