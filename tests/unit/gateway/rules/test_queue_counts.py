"""The action queue's drops stay exact now that the queue is a ``deque`` with ``maxlen``
and the drops are counted from the other counts: per rule and for the engine, after
the worker ran, after a rule is deleted or replaced, after the queue is resized; and a
rule sharing its FROM with another keeps its own counts."""

from __future__ import annotations

import asyncio
from typing import Any

from broker_core.broker import Broker
from broker_core.context import Context, Origin
from gateway.config.models.rules import RuleConfig
from gateway.hub import Hub
from gateway.rules.engine import RuleEngine

PUBLISHER = Origin("mqtt", "p", None, None)


def _rule(name: str, topic: str, where: str = "") -> RuleConfig:
    return RuleConfig.model_validate(
        {
            "name": name,
            "sql": f'SELECT topic FROM "{topic}" {where}',
            "actions": [{"type": "log", "level": "debug"}],
        }
    )


def _publish(broker: Broker, topic: str, count: int) -> None:
    for i in range(count):
        broker.publish(Context(topic, str(i).encode(), 0, False, origin=PUBLISHER))


def _counts(engine: RuleEngine) -> dict[str, tuple[Any, ...]]:
    return {
        s["name"]: (s["matched"], s["passed"], s["dropped"], s["actions"][0]["succeeded"])
        for s in engine.statuses()
    }


async def _drained(engine: RuleEngine) -> None:
    async with asyncio.timeout(30):
        while engine.stats()["queue_depth"]:
            await asyncio.sleep(0)


def test_drops_are_exact_per_rule_and_engine_through_deletes_and_resizes() -> None:
    async def scenario() -> None:
        broker = Broker()
        engine = RuleEngine(Hub(broker), [_rule("a", "a/#"), _rule("b", "b/#")], queue_size=10)
        task = asyncio.create_task(engine.run())
        await asyncio.sleep(0)  # the rules install
        try:
            # 100 results in one loop turn, before the worker runs: the 90 oldest dropped
            _publish(broker, "a/x", 100)
            assert _counts(engine)["a"] == (100, 100, 90, 0)
            assert engine.stats()["dropped"] == 90
            await _drained(engine)
            assert _counts(engine)["a"] == (100, 100, 90, 10)
            stats = engine.stats()
            assert (stats["queue_depth"], stats["dropped"], stats["processed"]) == (0, 90, 10)

            # a rule deleted with results waiting: they are taken (not acted on), and
            # its drops stay in the engine's count
            _publish(broker, "a/x", 15)  # 5 more dropped
            engine.delete("a")
            assert engine.stats()["dropped"] == 95
            await _drained(engine)
            assert (engine.stats()["dropped"], engine.stats()["processed"]) == (95, 20)

            # resizing drops the oldest results over the new bound, counted
            _publish(broker, "b/x", 8)
            engine.queue_size = 3
            assert _counts(engine)["b"] == (8, 8, 5, 0)
            _publish(broker, "b/x", 4)  # the new bound applies to the taps at once
            assert _counts(engine)["b"] == (12, 12, 9, 0)
            assert engine.stats()["dropped"] == 104
            await _drained(engine)
            assert _counts(engine)["b"] == (12, 12, 9, 3)

            # two rules on the same FROM share a tap, each with its own counts; a rule
            # replaced keeps its drops in the engine's count, and what it queued before
            # is acted on by its actions, then its client closes
            engine.queue_size = 10
            engine.add(_rule("c", "b/#", "WHERE payload = '1'"))
            _publish(broker, "b/x", 5)
            counts = _counts(engine)
            assert (counts["b"], counts["c"]) == ((17, 17, 9, 3), (5, 1, 0, 0))
            old = engine.get("b")
            assert old is not None and old.actions[0].succeeded == 3
            engine.update(_rule("b", "b/#"))  # its 5 waiting results are acted on by old
            assert old.client is not None  # until the worker reached them
            _publish(broker, "b/x", 1)
            assert _counts(engine)["b"] == (1, 1, 0, 0)
            assert engine.stats()["dropped"] == 104
            await _drained(engine)
            counts = _counts(engine)
            assert (counts["b"], counts["c"]) == ((1, 1, 0, 1), (6, 1, 0, 1))
            assert (engine.stats()["dropped"], engine.stats()["processed"]) == (104, 30)
            assert (old.actions[0].succeeded, old.client) == (8, None)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert engine.stats()["dropped"] == 104  # after the engine stopped, too

    asyncio.run(scenario())
