"""The in-process rule bench routes its messages through the rules it says: each message
reaches one rule, every result is acted on, and it reports a time for each rule count."""

from __future__ import annotations

import asyncio

from bench.rules_inproc import BATCH, RULE_COUNTS, SQL, _Setup, measure
from broker_core.context import Context, Origin


def test_every_message_reaches_one_rule_and_is_acted_on() -> None:
    async def route() -> list[dict[str, int]]:
        setup = _Setup(10, SQL, actions=True, match=True)
        task = await setup.start()
        origin = Origin("mqtt", "p")
        messages = [Context(f"bench/in/{i % 100:02d}", b"x", 0, False, origin=origin)
                    for i in range(BATCH)]  # fmt: skip
        seconds = await setup.once(messages, 2 * BATCH)
        task.cancel()
        assert seconds > 0
        return setup.engine.statuses()

    statuses = asyncio.run(route())
    assert len(statuses) == 10
    assert sum(status["matched"] for status in statuses) == 2 * BATCH
    assert {status["passed"] for status in statuses} == {2 * BATCH // 10}
    assert sum(status["actions"][0]["succeeded"] for status in statuses) == 2 * BATCH


def test_measure_gives_a_time_per_rule_count() -> None:
    best = asyncio.run(measure(rounds=1, total=BATCH))
    assert sorted(best) == sorted(RULE_COUNTS)
    assert all(0 < seconds < 1 for seconds in best.values())
