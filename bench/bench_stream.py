"""The stream log's costs (issue 13): the broker with the log against without it, and
rows per second from the gateway into Parquet.

``run(rounds, duration_s, warmup_s)`` returns the report lines (``python -m bench``
prints them after the broker table; ``--no-stream`` skips them);
``python -m bench.bench_stream`` runs it alone.

1. **The cost of the log on the broker.** The QoS 0 fan-in scenario of
   ``bench.scenarios`` (4 publishers, 1 wildcard subscriber) against ``edgebus-stream``
   (``stream.topics: ["#"]``: every message recorded, ``fsync: always``) and plain
   ``edgebus``, interleaved rounds on fresh brokers, medians; target: at least 0.8x.
   Broker CPU per delivered message is shown too: the machine's other load disturbs it
   less than the rate.
   Beside it, the same cost measured in-process, which the machine's other load disturbs
   least (``inprocess_cost``): ``Broker.publish`` of ``INPROCESS_MESSAGES`` fan-in-like
   QoS 0 messages (4 publishers, one wildcard subscriber, 8,000 per loop turn as busy
   socket reads give, 2,000 of one publisher in a row as one read holds), with the real
   ``stream`` component (``StreamSink``: hook, writer thread, segment files, fsync)
   against without it; CPU time of the whole process (the writer thread included) per
   message, the median of ``INPROCESS_ROUNDS`` interleaved rounds.
2. **Gateway -> Parquet.** A gateway with the log holds ``BACKLOG`` messages (QoS 0 JSON,
   4 topics) and keeps receiving ``LIVE_RATE`` msg/s while the ready job's query
   (``spark_sink.job.write_parquet``: Parquet partitioned by date and protocol, a
   checkpoint) reads it in micro-batches of ``BATCH_ROWS`` on ``local[2]``: rows per
   second of the full micro-batches after the first (which starts Spark's Python
   workers). Side by side: the same query shape reading the same records from Parquet
   files on the local disk (Spark's own file source, one file per micro-batch), the
   ceiling of this machine.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.brokers import STREAM_API_KEY, RunningBroker, launch
from bench.client import mqtt_connect, read_packet
from bench.frames import encode_disconnect, encode_publish
from bench.lifetime import die_with_parent
from bench.report import format_table, summarize
from bench.runner import BenchResults, BrokerSlot, run_all
from bench.scenarios import BenchOptions, Metric, Scenario, Target, run_fanin

__all__ = ["BACKLOG", "BATCH_ROWS", "INPROCESS_MESSAGES", "LIVE_RATE", "inprocess_cost", "run"]

BACKLOG = 200_000
BATCH_ROWS = 50_000
LIVE_RATE = 2_000
INPROCESS_MESSAGES = 200_000
INPROCESS_ROUNDS = 3
_TURN = 8_000  # messages per loop turn in-process
_READ = 2_000  # of them from one publisher in a row (one socket read holds one client's)
_TIMEOUT_S = 240.0
_PINGREQ = b"\xc0\x00"
_PINGRESP = 13

FANIN_WITH_STREAM = Scenario(
    "fanin",
    "QoS 0 fan-in 4 -> 1, stream.topics [#] vs none",
    (Metric("received", "received", "msg/s", True, Target("ratio_min", 0.8)),),
    run_fanin,
)


def _cpu_per_message(results: BenchResults, label: str) -> float | None:
    values = [
        r.details["broker_cpu"] / r.values["received"] * 1e6
        for r in results.records
        if r.label == label and not r.error and r.values.get("received")
    ]
    return sorted(values)[len(values) // 2] if values else None


def fanin_cost(rounds: int, duration_s: float, warmup_s: float) -> list[str]:
    """The fan-in table: edgebus with the log (A) against without (B)."""
    results = BenchResults(
        options=BenchOptions(duration_s=duration_s, warmup_s=warmup_s),
        slots=[BrokerSlot("edgebus+stream", "edgebus-stream"), BrokerSlot("edgebus", "edgebus")],
        scenarios=[FANIN_WITH_STREAM],
        rounds=rounds,
    )
    run_all(
        results,
        progress=lambda record: print(
            f"  {record.label} round {record.round} {record.values}", file=sys.stderr
        ),
    )
    lines = format_table(summarize(results))
    with_log = _cpu_per_message(results, "edgebus+stream")
    without = _cpu_per_message(results, "edgebus")
    if with_log and without:
        lines.append(
            f"broker CPU per message (median): {with_log:.2f} us with the log,"
            f" {without:.2f} us without: {without / with_log:.2f}x"
        )
    return lines


# -- the same cost in-process ------------------------------------------------------------


async def _publish_inprocess(directory: Path | None) -> float:
    """CPU seconds per message of ``Broker.publish`` (and, with ``directory``, of the
    stream log writing there, until every message is in it)."""
    from broker_core.broker import Broker
    from broker_core.context import EMPTY_META, Origin, new_context, next_message_id
    from broker_core.mqtt.properties import EMPTY
    from gateway.components import SINK, ComponentStatus, Host
    from gateway.components.host import STARTING
    from gateway.config.models.stream import StreamConfig
    from gateway.hub import Hub
    from spark_sink.sink import StreamSink

    broker = Broker()
    broker.tap(Origin("mqtt", "subscriber"), ["bench/in/+"], lambda context: None, 0)
    sink = task = host = None
    if directory is not None:
        sink = StreamSink(StreamConfig(enabled=True, path=directory))
        host = Host(ComponentStatus(SINK, "stream", "bench", STARTING), directory)
        task = asyncio.ensure_future(sink.run(Hub(broker).client("sink", "bench"), host))
        await asyncio.sleep(0)  # hooked before its first await
    publishers = [Origin("mqtt", f"publisher-{n}", "127.0.0.1:1", None) for n in range(4)]
    topics = [f"bench/in/{n}" for n in range(4)]
    payload = bytes(16)
    started = time.process_time()
    for _ in range(INPROCESS_MESSAGES // _TURN):
        for n in range(_TURN):
            k = n // _READ
            context = new_context(
                topics[k], payload, 0, False, EMPTY, publishers[k], EMPTY_META,
                next_message_id(), time.time_ns(),
            )  # fmt: skip
            broker.publish(context)
        await asyncio.sleep(0)  # the end of a loop turn
    if sink is not None and host is not None and task is not None:
        deadline = time.monotonic() + _TIMEOUT_S
        # Every message recorded, or dropped (QoS 0 beyond ``stream.queue_size`` while
        # the writer is behind: counted, and part of what the log costs).
        while _accounted(sink.stats()) < INPROCESS_MESSAGES:
            if time.monotonic() > deadline:
                raise TimeoutError("the stream log did not record every message")
            await asyncio.sleep(0.001)
    spent = time.process_time() - started
    if host is not None and task is not None:
        host.stopping.set()
        await task
        host.release()  # no supervisor here: close what the run kept for a next one
    return spent / INPROCESS_MESSAGES


def _accounted(stats: dict[str, int]) -> int:
    return stats.get("recorded", 0) + stats.get("dropped", 0) + stats.get("failed", 0)


def inprocess_cost() -> list[str]:
    """The log's cost on ``Broker.publish``, in-process: see the module docstring."""
    with_log: list[float] = []
    without: list[float] = []
    for _ in range(INPROCESS_ROUNDS):
        work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
        try:
            with_log.append(asyncio.run(_publish_inprocess(work)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        without.append(asyncio.run(_publish_inprocess(None)))
    a = sorted(with_log)[len(with_log) // 2] * 1e6
    b = sorted(without)[len(without) // 2] * 1e6
    return [
        f"in-process, Broker.publish of {INPROCESS_MESSAGES:,} QoS 0 messages "
        f"({_TURN:,} per loop turn, {_READ:,} of one publisher in a row), CPU per message"
        f" (median of {INPROCESS_ROUNDS}):",
        f"  {a:.2f} us with the log, {b:.2f} us without: the log adds {a - b:.2f} us"
        " (Broker.publish alone: no sockets, no decoding, so no ratio)",
    ]


# -- gateway -> Parquet -----------------------------------------------------------------


def _publish(port: int, count: int, rate: float, stop: Any) -> None:
    """QoS 0 JSON messages on 4 topics: ``count`` of them (0: until ``stop``), at
    ``rate`` msg/s (0: as fast as the socket takes them)."""
    die_with_parent()
    sock = mqtt_connect(port, f"bench-stream-{os.getpid()}")
    frames = [
        encode_publish(f"bench/stream/{n % 4}", json.dumps({"n": n, "value": n % 100}).encode())
        for n in range(500)
    ]
    chunk = b"".join(frames)
    sent = 0
    started = time.monotonic()
    try:
        while (count and sent < count) or (not count and not stop.is_set()):
            sock.sendall(chunk)
            sent += len(frames)
            if rate:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        # A PINGRESP comes after everything before it was handled; closing at once
        # could lose what the broker had not read yet.
        sock.sendall(_PINGREQ)
        while read_packet(sock)[0] >> 4 != _PINGRESP:
            pass
        sock.sendall(encode_disconnect())
    finally:
        sock.close()


def _log_end(broker: RunningBroker) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.api_port}/api/v1/stream/offsets",
        headers={"Authorization": f"Bearer {STREAM_API_KEY}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["end"])


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.1)


def _rate(query: Any, batches: int) -> tuple[float, list[tuple[int, int]]]:
    """Rows per second of the full batches after the first, waiting for ``batches``
    full batches; and (rows, ms) of every batch seen."""

    def full() -> list[dict[str, Any]]:
        return [p for p in query.recentProgress if p["numInputRows"] >= BATCH_ROWS]

    _wait(lambda: len(full()) >= batches or not query.isActive, f"{batches} micro-batches")
    done = full()
    steady = done[1:batches]
    rows = sum(p["numInputRows"] for p in steady)
    millis = sum(p["batchDuration"] for p in steady)
    seen = [(p["numInputRows"], p["batchDuration"]) for p in query.recentProgress]
    return (rows / (millis / 1000) if millis else 0.0), seen


def parquet_rate() -> list[str]:
    """Gateway -> Parquet rows/s, and the same query from local Parquet files."""
    from spark_sink.job import session, write_parquet

    work = Path(tempfile.mkdtemp(prefix="bench-parquet-"))
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    try:
        with launch("edgebus-stream") as broker:
            assert broker.api_port is not None
            filler = context.Process(target=_publish, args=(broker.port, BACKLOG, 0, stop))
            filler.start()
            filler.join(_TIMEOUT_S)
            _wait(lambda: _log_end(broker) >= BACKLOG, "the backlog in the log")
            spark = session("local[2]", "edgebus-bench")
            try:
                live = context.Process(target=_publish, args=(broker.port, 0, LIVE_RATE, stop))
                live.start()
                gateway = f"http://127.0.0.1:{broker.api_port}"
                records = (
                    spark.readStream.format("edgebus")
                    .option("gateway", gateway)
                    .option("apiKey", STREAM_API_KEY)
                    .option("maxRowsPerBatch", BATCH_ROWS)
                    .option("partitionRows", BATCH_ROWS // 2)
                    .load()
                )
                trigger = {"processingTime": "100 milliseconds"}
                query = write_parquet(records, str(work / "out"), str(work / "ck"), trigger)
                try:
                    edgebus_rate, edgebus_seen = _rate(query, 4)
                finally:
                    query.stop()
                    stop.set()
                    live.join(10)
                # The same records, as Parquet files on the local disk: the ceiling.
                source = spark.read.format("edgebus").option("gateway", gateway)
                source = source.option("apiKey", STREAM_API_KEY).option("endOffset", BACKLOG)
                files = work / "input"
                source.load().repartition(4).write.parquet(str(files))
                schema = spark.read.parquet(str(files)).schema
                from_files = (
                    spark.readStream.schema(schema)
                    .option("maxFilesPerTrigger", 1)
                    .parquet(str(files))
                )
                query = write_parquet(from_files, str(work / "out2"), str(work / "ck2"), trigger)
                try:
                    files_rate, _ = _rate_files(query)
                finally:
                    query.stop()
            finally:
                spark.stop()
    finally:
        stop.set()
        shutil.rmtree(work, ignore_errors=True)
    ratio = edgebus_rate / files_rate if files_rate else 0.0
    return [
        "gateway -> Parquet (the ready job's query, local[2], micro-batches of "
        f"{BATCH_ROWS:,} rows, {LIVE_RATE:,} msg/s arriving meanwhile):",
        f"  edgebus source        {edgebus_rate:>10,.0f} rows/s",
        f"  Parquet files (local) {files_rate:>10,.0f} rows/s   ratio {ratio:.2f}x",
        "  batches (rows, ms): " + ", ".join(f"{r}/{m}" for r, m in edgebus_seen[:8]),
    ]


def _rate_files(query: Any) -> tuple[float, list[tuple[int, int]]]:
    """The file source's batches are one file each (about BACKLOG / 4 rows)."""
    _wait(lambda: len(query.recentProgress) >= 4 or not query.isActive, "4 file batches")
    steady = query.recentProgress[1:4]
    rows = sum(p["numInputRows"] for p in steady)
    millis = sum(p["batchDuration"] for p in steady)
    return (rows / (millis / 1000) if millis else 0.0), []


def run(rounds: int = 3, duration_s: float = 5.0, warmup_s: float = 1.0) -> list[str]:
    lines = ["", "stream log (issue 13): the cost of the log on the broker", ""]
    lines += fanin_cost(rounds, duration_s, warmup_s)
    lines += inprocess_cost()
    lines.append("")
    try:
        lines += parquet_rate()
    except Exception as exc:  # Spark is optional for the broker figures: report, go on
        lines.append(f"gateway -> Parquet not measured: {type(exc).__name__}: {exc}")
    return lines


if __name__ == "__main__":
    socket.setdefaulttimeout(30)
    for line in run():
        print(line, flush=True)
