"""``StreamSink``: the ``stream`` sink component, the durable tap that feeds the log.

It taps ``stream.topics`` (keeping ``stream.origins``) and hands every Context to a
``BatchWriter`` whose thread appends them to the ``StreamLog``. The writer is the tap's
durable participant: a QoS 1 or 2 publisher is acknowledged only once its message is
written (and fsync-ed with ``fsync: always``). QoS 0 messages enter the log the same
way but hold nothing; when more than ``queue_size`` messages wait for the writer, QoS 0
ones are not recorded and counted as ``dropped`` (QoS 1 and 2 ones always are: their
publishers' windows bound them).

When ``stream.enabled`` is false the component does not run and the broker pays
nothing: no tap, no durable participant.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from broker_core.context import Context
from gateway.components import BatchWriter, Host
from gateway.config.models.stream import StreamConfig
from gateway.hub import HubClient
from spark_sink.segments import StreamLog

__all__ = ["StreamSink"]

log = logging.getLogger(__name__)


class StreamSink:
    def __init__(self, config: StreamConfig) -> None:
        self.config = config
        self.log: StreamLog | None = None
        self.dropped = 0  # QoS 0 messages not recorded: the writer's queue was full
        self.filtered = 0  # tapped, but not from one of `origins`
        self._writer: BatchWriter[Context] | None = None
        self._host: Host | None = None
        self._failing = False
        self._finished: asyncio.Event | None = None

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
        # Opened and tapped before the first await: the gateway opens its listeners once
        # every component got that far (Supervisor.settle), so the log sees every message.
        stream_log.open()
        writer: BatchWriter[Context] = BatchWriter(
            self._write, f"stream-{host.name}", max_pending=config.queue_size
        )
        self.log, self._writer = stream_log, writer
        tap = None
        try:
            tap = hub.tap(*config.topics, callback=self._recorder(writer), durable=writer)
            bounds = stream_log.bounds()
            log.info(
                "stream log %s: offsets %d to %d, %d segments",
                stream_log.directory,
                bounds.start,
                bounds.end,
                bounds.segments,
            )
            host.ready()
            await self._housekeep(stream_log, host)
        finally:
            if tap is not None:
                tap.close()  # nothing new arrives; then what was appended is written
            await asyncio.to_thread(writer.close)
            await asyncio.to_thread(stream_log.close)
            self._finished.set()

    async def stop(self) -> None:
        if self._finished is not None:
            await self._finished.wait()  # run() writes, syncs and closes on `stopping`

    def _recorder(self, writer: BatchWriter[Context]) -> Callable[[Context], None]:
        """The tap's callback: runs during routing, must not block."""
        origins = frozenset(self.config.origins) if self.config.origins else None
        append = writer.append
        backlogged = writer.backlogged

        def record(context: Context) -> None:
            if origins is not None and context.origin.protocol not in origins:
                self.filtered += 1
                return
            if context.qos == 0 and backlogged():
                self.dropped += 1
                return
            append(context)

        return record

    def _write(self, contexts: list[Context]) -> None:
        """On the writer's thread: one batch into the log."""
        assert self.log is not None and self._host is not None
        try:
            self.log.append(contexts)
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
