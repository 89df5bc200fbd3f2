"""The log's writer: batches by time or by barrier, callbacks in order, QoS 0 shed when
behind; and the sink's choice of what to record."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from typing import Any

from broker_core.context import Context, Origin
from gateway.config.models.stream import StreamConfig
from spark_sink.sink import StreamSink
from spark_sink.writer import LogWriter

ORIGIN = Origin("mqtt", "c")


def _context(topic: str, qos: int = 0, origin: Origin = ORIGIN) -> Context:
    return Context(topic, b"x", qos, False, origin=origin)


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 30))


def _held() -> tuple[list[list[str]], threading.Event, Callable[[list[list[str]]], None]]:
    """What a write wrote, the gate it waits for, and the write."""
    written: list[list[str]] = []
    gate = threading.Event()

    def write(batches: list[list[str]]) -> None:
        gate.wait(10)
        written.extend(batches)

    return written, gate, write


def test_a_barrier_hands_the_batch_over_at_the_end_of_the_loop_turn() -> None:
    async def scenario() -> None:
        written, gate, write = _held()

        def prepare(items: list[Context], backlogged: bool) -> tuple[list[Any], int]:
            return [[c.topic for c in items]], len(items)

        writer = LogWriter(write, prepare, "test", linger_s=3600, idle_s=3600)
        assert writer.pending == 0
        done: list[bool] = []
        writer.barrier(done.append)
        assert done == [True]  # nothing pending: at once
        writer.append(_context("a"))
        writer.append(_context("b"))
        writer.barrier(done.append)
        writer.append(_context("c"))  # after the barrier, same turn: same batch
        assert writer.pending == 3
        await asyncio.sleep(0)  # the flush at the end of the turn
        assert writer.pending == 3  # handed over, not written
        assert done == [True]
        gate.set()
        while len(done) < 2:
            await asyncio.sleep(0.01)
        assert done == [True, True]
        assert written == [["a", "b", "c"]]
        assert (writer.pending, writer.written) == (0, 3)
        await writer.close()

    run(scenario())


def test_without_a_barrier_batches_leave_every_linger() -> None:
    async def scenario() -> None:
        written: list[int] = []
        writer = LogWriter(
            lambda batches: written.extend(batches),
            lambda items, backlogged: ([len(items)], len(items)),
            "test",
            linger_s=0.01,
            idle_s=0.01,
        )
        stopping = asyncio.Event()
        task = asyncio.ensure_future(writer.run(stopping))
        for _ in range(100):
            writer.append(_context("t"))
        while writer.pending:
            await asyncio.sleep(0.01)
        stopping.set()
        await task
        await writer.close()
        assert sum(written) == 100 and writer.written == 100

    run(scenario())


def test_every_batch_records_the_hook_hands_a_batch_over_and_holds_no_context() -> None:
    """A busy loop turn runs thousands of messages: the writer encodes every
    ``batch_records`` of them at once and keeps none of their Contexts (the cyclic GC
    would otherwise see them; see spark_sink.writer)."""

    async def scenario() -> None:
        prepared: list[list[str]] = []
        written, gate, write = _held()

        def prepare(items: list[Context], backlogged: bool) -> tuple[list[Any], int]:
            prepared.append([c.topic for c in items])
            return [prepared[-1]], len(items)

        writer = LogWriter(write, prepare, "test", linger_s=3600, idle_s=3600, batch_records=3)
        kept = _context("kept")
        before = sys.getrefcount(kept)
        for topic in ("a", "b"):
            writer.append(_context(topic))
        writer.append(kept)
        # The third message filled a batch: encoded in the hook's call, in this turn.
        assert prepared == [["a", "b", "kept"]]
        assert (writer.items, writer.pending) == ([], 3)
        assert sys.getrefcount(kept) == before  # the writer holds it no longer
        writer.append(_context("d"))
        assert prepared == [["a", "b", "kept"]]  # the rest waits for the linger or a barrier
        done: list[bool] = []
        writer.barrier(done.append)
        await asyncio.sleep(0)
        assert prepared == [["a", "b", "kept"], ["d"]]
        gate.set()
        while not done:
            await asyncio.sleep(0.01)
        assert (done, written, writer.written) == ([True], [["a", "b", "kept"], ["d"]], 4)
        await writer.close()

    run(scenario())


def test_a_failed_write_fails_its_barriers() -> None:
    async def scenario() -> None:
        def write(batches: list[Any]) -> None:
            raise OSError("disk full")

        writer = LogWriter(write, lambda items, b: (items, len(items)), "test")
        writer.append(_context("t", 1))
        done: list[bool] = []
        writer.barrier(done.append)
        while not done:
            await asyncio.sleep(0.01)
        assert done == [False]
        assert (writer.failed, writer.written, writer.pending) == (1, 0, 0)
        await writer.close()

    run(scenario())


def test_behind_the_writer_is_told_so() -> None:
    async def scenario() -> None:
        seen: list[bool] = []
        gate = threading.Event()
        writer = LogWriter(
            lambda batches: gate.wait(10),
            lambda items, backlogged: (seen.append(backlogged), ([], len(items)))[1],
            "test",
            max_pending=5,
        )
        for _ in range(4):
            writer.append(_context("t"))
        writer.flush()
        for _ in range(4):
            writer.append(_context("t"))
        writer.flush()
        assert seen == [False, True]
        gate.set()
        await writer.close()

    run(scenario())


def test_the_sink_records_its_topics_and_origins_and_sheds_qos_0_when_behind() -> None:
    everything = StreamSink(StreamConfig(enabled=True))
    items = [_context("a/b"), _context("$SYS/x"), _context("c", 1)]
    assert [c.topic for c in everything._select(items, False)] == ["a/b", "c"]
    assert [c.topic for c in everything._select(items, True)] == ["c"]
    assert everything.dropped == 1
    chosen = StreamSink(StreamConfig(enabled=True, topics=("a/#", "c"), origins=("loopback",)))
    adapter = Origin("loopback", "units")
    items = [_context("a/b"), _context("a/c", origin=adapter), _context("c", 2, adapter)]
    assert [c.topic for c in chosen._select(items, False)] == ["a/c", "c"]
    assert chosen.filtered == 1
    encoded, records = chosen._prepare(items, False)
    assert records == 2 and sum(batch.count for batch in encoded) == 2
