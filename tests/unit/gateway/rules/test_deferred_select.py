"""The taps decide WHERE on the broker's path and queue the message; the action worker
builds the SELECT output, only for the results the bounded queue kept: the output is
the one the statement gives on that message, a SELECT that raises counts ``failed``
(beside ``passed``) when the worker evaluates it and runs no action, and the rule test
API still returns the output at once."""

from __future__ import annotations

import asyncio
from typing import Any

from broker_core.broker import Broker
from broker_core.context import Context, Origin
from gateway.config.models.rules import RuleConfig
from gateway.hub import Hub
from gateway.rules.engine import RuleEngine

PUBLISHER = Origin("mqtt", "p7", None, None)


def _rule(name: str, sql: str, republish: str | None = None) -> RuleConfig:
    action: dict[str, Any] = (
        {"type": "republish", "topic": republish, "qos": 0}
        if republish is not None
        else {"type": "log", "level": "debug"}
    )
    return RuleConfig.model_validate({"name": name, "sql": sql, "actions": [action]})


async def _drained(engine: RuleEngine) -> None:
    async with asyncio.timeout(30):
        while engine.stats()["queue_depth"]:
            await asyncio.sleep(0)


def _status(engine: RuleEngine, name: str) -> dict[str, Any]:
    return next(s for s in engine.statuses() if s["name"] == name)


def _publish(broker: Broker, topic: str, payload: bytes, qos: int = 0) -> None:
    broker.publish(Context(topic, payload, qos, False, origin=PUBLISHER))


def test_the_worker_builds_the_output_the_statement_gives() -> None:
    """Outputs of message columns, of the JSON payload read by WHERE (the row the tap
    built goes with the result) and read only by SELECT (the worker builds the row),
    of a group sharing one tap and of a rule alone on its tap: republished as the
    statement selects them."""
    expected = {
        b'out/cols {"topic":"s/a","qos":1,"clientid":"p7"}',
        b'out/cols {"topic":"s/b","qos":0,"clientid":"p7"}',
        b'out/where {"t":5}',
        b'out/select {"t":5,"topic":"s/a"}',
        b'out/select {"t":0,"topic":"s/b"}',
        b'out/alone {"d":10}',
    }

    async def scenario() -> set[bytes]:
        broker = Broker()
        received: list[bytes] = []
        engine = RuleEngine(
            Hub(broker),
            [
                _rule("cols", 'SELECT topic, qos, clientid FROM "s/#" WHERE qos < 2', "out/cols"),
                _rule("where", 'SELECT payload.t AS t FROM "s/#" WHERE payload.t > 1', "out/where"),
                _rule("select", 'SELECT payload.t AS t, topic FROM "s/#"', "out/select"),
                _rule("alone", 'SELECT payload.t * 2 AS d FROM "s/a"', "out/alone"),
            ],
        )

        def deliver(context: Context) -> None:
            received.append(context.topic.encode() + b" " + context.payload)

        broker.subscribe(Origin("mqtt", "sub"), ("out/#",), 0, no_local=False,
                         on_message=deliver)  # fmt: skip
        task = asyncio.create_task(engine.run())
        await asyncio.sleep(0)
        try:
            _publish(broker, "s/a", b'{"t": 5}', 1)
            _publish(broker, "s/b", b'{"t": 0}')
            async with asyncio.timeout(30):
                while len(received) < len(expected):
                    await asyncio.sleep(0)
            await _drained(engine)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return set(received)

    assert asyncio.run(scenario()) == expected


def test_a_select_that_raises_counts_failed_in_the_worker() -> None:
    """WHERE passes on the broker's path (``passed``); the worker evaluates SELECT,
    which divides by zero: ``failed`` once per result it took, no action runs. Results
    the full queue dropped are never evaluated; a rule without actions never
    evaluates its SELECT."""

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        broker = Broker()
        sql = 'SELECT payload.t / 0 AS x FROM "f/#" WHERE qos < 2'
        engine = RuleEngine(
            Hub(broker),
            [_rule("bad", sql), _rule("quiet", sql).model_copy(update={"actions": ()})],
            queue_size=3,
        )
        task = asyncio.create_task(engine.run())
        await asyncio.sleep(0)
        try:
            for _ in range(5):  # in one loop turn: the 2 oldest results dropped
                _publish(broker, "f/x", b'{"t": 1}')
            await _drained(engine)
            return _status(engine, "bad"), _status(engine, "quiet")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    bad, quiet = asyncio.run(scenario())
    assert (bad["matched"], bad["passed"], bad["failed"], bad["dropped"]) == (5, 5, 3, 2)
    assert bad["actions"] == [{"type": "log", "succeeded": 0, "failed": 0}]
    assert (quiet["matched"], quiet["passed"], quiet["failed"], quiet["dropped"]) == (5, 5, 0, 0)


def test_the_rule_test_api_returns_the_select_output_at_once() -> None:
    engine = RuleEngine(Hub(Broker()))
    sample = {"topic": "s/a", "payload": {"t": 4}, "clientid": "c"}
    sql = 'SELECT payload.t * 2 AS d, clientid FROM "s/#" WHERE payload.t > 1'
    assert engine.test(sql, sample) == {"matched": True, "output": {"d": 8, "clientid": "c"}}
    failing = engine.test('SELECT payload.t / 0 AS x FROM "s/#"', sample)
    assert failing["matched"] is False and "zero" in failing["error"]
