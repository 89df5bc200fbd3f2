"""``StreamSink``: the ``stream`` sink component, the durable hook that feeds the log.

It hooks every message the broker routes (``hub.hook``: a message hook, one call per
message with its Context) into a ``LogWriter``, which encodes them in batches of at most
512 and hands them to its thread: the messages matching ``stream.topics`` (and
``stream.origins``) are appended to the ``StreamLog``. The writer is the hook's durable
participant: a QoS 1 or 2 publisher is acknowledged only once its message is written
(and fsync-ed with ``fsync: always``). QoS 0 messages enter the log the same way but
hold nothing; when more than ``queue_size`` messages wait for the writer, QoS 0 ones are
not recorded and are counted as ``dropped`` (QoS 1 and 2 ones always are: their
publishers' windows bound them).

The log is opened and hooked before ``run`` first awaits: the gateway opens its
listeners only after that (``Supervisor.settle``), so no message gets past it. When
``stream.enabled`` is false the component does not run and the broker pays nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from broker_core.context import Context
from gateway.components import Host
from gateway.config.models.stream import StreamConfig
from gateway.hub import HubClient
from spark_sink.fields import TopicMatcher
from spark_sink.records import Encoded
from spark_sink.segments import StreamLog, encode_chunks
from spark_sink.writer import LogWriter

__all__ = ["StreamSink"]

log = logging.getLogger(__name__)


class StreamSink:
    def __init__(self, config: StreamConfig) -> None:
        self.config = config
        self.log: StreamLog | None = None
        self.dropped = 0  # QoS 0 messages not recorded: the writer was behind
        self.filtered = 0  # of the topics, but not from one of `origins`
        self._writer: LogWriter | None = None
        self._host: Host | None = None
        self._failing = False
        self._finished: asyncio.Event | None = None
        self._everything = config.topics == ("#",) and config.origins is None
        self._matches = TopicMatcher(*config.topics)
        self._origins = frozenset(config.origins or ())

    async def run(self, hub: HubClient, host: Host) -> None:
        config = self.config
        self._host = host
        self._finished = asyncio.Event()
        stream_log = StreamLog(
            config.path or host.data_dir,
            segment_bytes=config.segment_bytes,
            max_bytes=config.max_bytes,
            retention_s=config.retention,
            fsync=config.fsync,
            fsync_interval_s=config.fsync_interval,
        )
        # Opened and hooked before the first await: the gateway opens its listeners once
        # every component got that far (Supervisor.settle), so the log sees every message.
        stream_log.open()
        writer = LogWriter(
            self._write, self._prepare, f"stream-{host.name}", max_pending=config.queue_size
        )
        self.log, self._writer = stream_log, writer
        hook = None
        try:
            hook = hub.hook(writer.append, durable=writer)
            bounds = stream_log.bounds()
            log.info(
                "stream log %s: offsets %d to %d, %d segments",
                stream_log.directory,
                bounds.start,
                bounds.end,
                bounds.segments,
            )
            host.ready()
            await asyncio.gather(writer.run(host.stopping), self._housekeep(stream_log, host))
        finally:
            if hook is not None:
                hook.close()  # nothing new arrives; then what was taken in is written
            await writer.close()
            await asyncio.to_thread(stream_log.close)
            self._finished.set()

    async def stop(self) -> None:
        if self._finished is not None:
            await self._finished.wait()  # run() writes, syncs and closes on `stopping`

    def _prepare(self, items: list[Context], backlogged: bool) -> tuple[list[Encoded], int]:
        """On the loop, per batch: the messages to record, encoded."""
        if self._everything and not backlogged:
            topics = [c.topic for c in items]
            joined = "".join(topics)
            if "$" not in joined:  # the common case: everything, nothing to look at
                return encode_chunks(items, topics, joined), len(items)
        selected = self._select(items, backlogged)
        return encode_chunks(selected), len(selected)

    def _select(self, items: list[Context], backlogged: bool) -> list[Context]:
        matches = self._matches
        origins = self._origins
        selected = []
        for context in items:
            if not matches(context.topic):
                continue
            if origins and context.origin.protocol not in origins:
                self.filtered += 1
                continue
            if backlogged and context.qos == 0:
                self.dropped += 1
                continue
            selected.append(context)
        return selected

    def _write(self, batches: list[Encoded]) -> None:
        """On the writer's thread: the batches into the log."""
        assert self.log is not None and self._host is not None
        try:
            self.log.append_encoded(batches)
        except OSError as exc:
            self._failing = True
            self._host.degraded(f"cannot write the stream log: {exc}")
            raise
        if self._failing:
            self._failing = False
            self._host.ready()

    async def _housekeep(self, stream_log: StreamLog, host: Host) -> None:
        """Retention, and the periodic fsync of ``fsync: interval``, until stopped."""
        config = self.config
        period = min(max(config.retention / 4, 0.5), 60.0)
        if config.fsync == "interval":
            period = min(period, config.fsync_interval)
        while not host.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await host.stopping.wait()
            if config.fsync == "interval":
                await asyncio.to_thread(stream_log.sync)
            await asyncio.to_thread(stream_log.enforce_retention)

    def stats(self) -> dict[str, int]:
        stats = {"dropped": self.dropped, "filtered": self.filtered}
        writer = self._writer
        if writer is not None:
            stats.update(recorded=writer.written, failed=writer.failed, pending=writer.pending)
        if self.log is not None:
            bounds = self.log.bounds()
            stats.update(
                start_offset=bounds.start,
                end_offset=bounds.end,
                bytes=bounds.bytes,
                segments=bounds.segments,
                fsyncs=self.log.fsyncs,
                deleted_segments=self.log.deleted_segments,
                truncated_bytes=self.log.truncated_bytes,
            )
        return stats
