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

Across runs. The open log, its writer and the hook feeding them (a ``_Recorder``)
outlive a run: as a run ends (on request, with a new config, after a failure) the hook
stays in place and goes on taking messages into the writer (``LogWriter.keep_flushing``)
until the next run takes them over (``Host.keep`` / ``take``, ``hub.keep_open`` /
``adopt``), so nothing acknowledged meanwhile escapes the log. The next run

- with the same directory keeps all three: the hook that was never out of place is
  its own again (``hub.adopt``); what arrived before is selected as the last run chose
  (a flush), what arrives after as this one chooses; new settings apply to the open log
  (``StreamLog.configure``). One ``StreamLog`` writes a directory, ever;
- with another directory opens that log, hooks it, and unhooks the last run's in the
  same loop turn; then it closes the last run's writer (which writes what it took in,
  and its publishers are acknowledged) and log;
- that cannot open its log leaves the last run's recording (into the old directory)
  and backs off.

When no run ever opened the log, a ``Refusal`` stands in for it while the component
backs off: QoS 1 and 2 messages of its topics are not acknowledged (see
``gateway.components.refusal``). The supervisor closes whatever is kept when no run follows:
the component is paused, disabled or removed, or the gateway stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from broker_core.context import Context
from broker_core.errors import AdapterError
from gateway.components import Host
from gateway.components.refusal import Refusal
from gateway.config.models.stream import StreamConfig
from gateway.hub import HubClient, HubHook
from spark_sink.fields import TopicMatcher
from spark_sink.records import Encoded
from spark_sink.segments import StreamLog, encode_chunks
from spark_sink.writer import LogWriter

__all__ = ["StreamSink"]

log = logging.getLogger(__name__)

#: At most this many seconds between two checkpoints of the end the log has given
#: (``StreamLog.checkpoint``: ``msync``-ed, so a power loss keeps it; under ``never``
#: the only record of it, after an fsync). Under ``always`` each append records its end
#: at once, under ``interval`` each fsync: a ``kill -9`` keeps that.
CHECKPOINT_S = 5.0


class _Recorder:
    """An open log, the writer appending to it and the hook feeding the writer: what a
    run hands to the next (see the module docstring)."""

    def __init__(self, stream_log: StreamLog, host: Host, sink: StreamSink) -> None:
        self.log = stream_log
        self.sink = sink  # whose selection the writer uses (``prepare``)
        self.hook: HubHook | None = None
        self._host = host
        self._failing = False
        self.writer = LogWriter(
            self._write, sink._prepare, f"stream-{host.name}", max_pending=sink.config.queue_size
        )

    @classmethod
    def open(cls, directory: Path, host: Host, sink: StreamSink) -> _Recorder:
        """Opens the log in ``directory`` (raises ``OSError`` or ``StreamLogError``)."""
        stream_log = StreamLog(directory, *_settings(sink.config))
        stream_log.open()
        return cls(stream_log, host, sink)

    def holds(self, directory: Path) -> bool:
        """True when its log is the one in ``directory``."""
        return self.log.directory.resolve() == directory.resolve()

    def hook_into(self, hub: HubClient) -> None:
        self.hook = hub.hook(self.writer.append, durable=self.writer)

    def select(self, sink: StreamSink) -> None:
        """From now on ``sink`` (the next run's) selects what the writer records; what
        was taken in before is handed over with the last run's selection."""
        self.writer.flush()
        sink.dropped, sink.filtered = self.sink.dropped, self.sink.filtered
        self.sink = sink
        self.writer.prepare = sink._prepare
        self.writer.max_pending = sink.config.queue_size

    def hand_over(self, hub: HubClient, host: Host) -> None:
        """The run ends: the hook stays in place and the writer goes on, until the next
        run takes them (``host.take()``) or the supervisor closes them."""
        assert self.hook is not None
        hub.keep_open(self.hook)
        self.writer.keep_flushing()
        host.keep(self, self.close)

    def close(self) -> None:
        """Unhooks, writes what was taken in, closes the log (on the loop)."""
        if self.hook is not None:
            self.hook.close()
        self.writer.shut()
        self.log.close()

    async def aclose(self) -> None:
        """``close``, the log's last sync on a thread."""
        if self.hook is not None:
            self.hook.close()
        await self.writer.close()
        try:
            await asyncio.to_thread(self.log.close)
        except OSError as exc:
            log.warning("stream log %s: closing it failed: %s", self.log.directory, exc)

    def _write(self, batches: list[Encoded]) -> None:
        """On the writer's thread: the batches into the log."""
        try:
            self.log.append_encoded(batches)
        except OSError as exc:
            self._failing = True
            self._host.degraded(f"cannot write the stream log: {exc}")
            raise
        if self._failing:
            self._failing = False
            self._host.ready()


def _settings(config: StreamConfig) -> tuple[int, int, float, str, float]:
    """``StreamLog``'s settings from ``config``, in the order of its constructor and of
    ``configure``: segment_bytes, max_bytes, retention_s, fsync, fsync_interval_s."""
    return (
        config.segment_bytes,
        config.max_bytes,
        config.retention,
        config.fsync,
        config.fsync_interval,
    )


class StreamSink:
    def __init__(self, config: StreamConfig) -> None:
        self.config = config
        self.log: StreamLog | None = None
        self.dropped = 0  # QoS 0 messages not recorded: the writer was behind
        self.filtered = 0  # of the topics, but not from one of `origins`
        self._writer: LogWriter | None = None
        self._refusal: Refusal | None = None
        self._finished: asyncio.Event | None = None
        self._everything = config.topics == ("#",) and config.origins is None
        self._matches = TopicMatcher(*config.topics)
        self._origins = frozenset(config.origins or ())

    async def run(self, hub: HubClient, host: Host) -> None:
        self._finished = asyncio.Event()
        held: _Recorder | Refusal | None = host.take()
        # Opened (or taken over) and hooked before the first await: the gateway opens its
        # listeners once every component got that far (Supervisor.settle), so the log
        # sees every message.
        try:
            hub.check_subscribe(("#",))
        except AdapterError:  # the ACL no longer lets the log see every message
            if held is not None:
                held.close()
            self._finished.set()
            raise
        try:
            recorder, retiring = self._take_over(hub, host, held)
        except BaseException:
            self._wait(hub, host, held)
            self._finished.set()
            raise
        self.log, self._writer = recorder.log, recorder.writer
        try:
            if retiring is not None:
                await retiring.aclose()
            else:
                await asyncio.to_thread(recorder.log.configure, *_settings(self.config))
            bounds = recorder.log.bounds()
            log.info(
                "stream log %s: offsets %d to %d, %d segments",
                recorder.log.directory,
                bounds.start,
                bounds.end,
                bounds.segments,
            )
            host.ready()
            await asyncio.gather(
                recorder.writer.run(host.stopping), self._housekeep(recorder.log, host)
            )
        finally:
            recorder.hand_over(hub, host)
            self._finished.set()

    def _take_over(
        self, hub: HubClient, host: Host, held: _Recorder | Refusal | None
    ) -> tuple[_Recorder, _Recorder | None]:
        """This run's recorder, hooked, and the last run's when it must be closed still
        (another directory). Raises when the log cannot be opened; ``held`` is then
        untouched."""
        directory = Path(self.config.path) if self.config.path else host.data_dir
        if isinstance(held, _Recorder) and held.holds(directory):
            assert held.hook is not None
            held.select(self)
            hub.adopt(held.hook)  # never out of place: nothing escaped it
            return held, None
        recorder = _Recorder.open(directory, host, self)
        try:
            recorder.hook_into(hub)
        except BaseException:
            recorder.close()
            raise
        # The same loop turn as the new hook: every message goes to one log or the other.
        if isinstance(held, Refusal):
            held.close()
            return recorder, None
        if held is not None and held.hook is not None:
            held.hook.close()
        return recorder, held

    def _wait(self, hub: HubClient, host: Host, held: _Recorder | Refusal | None) -> None:
        """This run could not open its log: until a run can, the last run's log goes on
        recording, or, when none is open, a refusal stands in for it."""
        if isinstance(held, _Recorder):
            self.log, self._writer = held.log, held.writer
            host.keep(held, held.close)
            return
        refusal = held
        if refusal is None:
            refusal = Refusal(TopicMatcher(*self.config.topics), self.config.origins or ())
            refusal.hook_into(hub)
            assert refusal.hook is not None
            hub.keep_open(refusal.hook)
        else:
            refusal.select(TopicMatcher(*self.config.topics), self.config.origins or ())
        self._refusal = refusal
        host.keep(refusal, refusal.close)

    async def stop(self) -> None:
        if self._finished is not None:
            await self._finished.wait()  # run() hands the log over on `stopping`

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

    async def _housekeep(self, stream_log: StreamLog, host: Host) -> None:
        """Retention, the periodic fsync of ``fsync: interval``, and the record of the
        end the log has given (``StreamLog.checkpoint``, at most every
        ``CHECKPOINT_S``), until stopped."""
        config = self.config
        period = min(max(config.retention / 4, 0.5), CHECKPOINT_S)
        if config.fsync == "interval":
            period = min(period, config.fsync_interval)
        while not host.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(period):
                    await host.stopping.wait()
            if config.fsync == "interval":
                await asyncio.to_thread(stream_log.sync)
            try:
                await asyncio.to_thread(stream_log.checkpoint)
            except OSError as exc:  # a full disk: the writes say so; this one retries
                log.warning("stream log %s: cannot record its end: %s", stream_log.directory, exc)
            await asyncio.to_thread(stream_log.enforce_retention)

    def stats(self) -> dict[str, int]:
        refused = 0 if self._refusal is None else self._refusal.refused
        stats = {"dropped": self.dropped, "filtered": self.filtered, "refused": refused}
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
                damaged_batches=self.log.damaged_batches,
            )
        return stats
