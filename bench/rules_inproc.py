"""The rule engine's cost per message inside the broker, without sockets.

``python -m bench.rules_inproc`` routes messages through ``Broker.publish`` in one
process (100 publishers' topics ``bench/in/00`` .. ``bench/in/99``, one local subscriber
on ``bench/in/+``), with no rule, 10 rules and 100 rules set up as ``bench_rules`` sets
them up (each message reaching one rule, every message passing its WHERE and yielding a
result for a ``log`` action), and prints the CPU time per message of each and what the
rules add. The three brokers take turns, the best of the rounds counts: on a loaded
machine this still measures the code, not the neighbours. Options: ``--rounds N``,
``--no-actions`` (rules without actions: the evaluation alone), ``--no-match`` (the
rules' FROM matches none of the traffic: what rules cost the topics they do not read),
``--sql TEMPLATE`` (another statement; ``{}`` stands for the FROM sources).

This is a profiling aid, not a target: ``bench_rules`` (in ``make bench``) measures the
gateway over TCP, the figure issue 16 sets targets for.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence

from bench.bench_rules import rule_filters
from broker_core.broker import Broker
from broker_core.context import Context, Origin
from gateway.config.models.rules import RuleConfig
from gateway.hub import Hub
from gateway.rules.engine import RuleEngine

__all__ = ["measure", "run"]

SQL = "SELECT topic, qos, clientid FROM {} WHERE qos < 2 AND topic LIKE 'bench/%'"
RULE_COUNTS = (0, 10, 100)
BATCH = 1000  # messages routed between two turns of the loop (the action worker's)


def _configs(count: int, sql: str, actions: bool, match: bool) -> list[RuleConfig]:
    configs = []
    for i in range(count):
        sources = ", ".join(f'"{f}"' for f in rule_filters(i, count))
        if not match:
            sources = sources.replace("bench/in/", "other/in/")
        config = RuleConfig.model_validate(
            {
                "name": f"r{i:03d}",
                "sql": sql.format(sources),
                "actions": [{"type": "log", "level": "debug"}],
            }
        )
        configs.append(config if actions else config.model_copy(update={"actions": ()}))
    return configs


def _discard(context: Context) -> None:
    """The subscriber: takes each message (a session would write it)."""


class _Setup:
    def __init__(self, count: int, sql: str, actions: bool, match: bool) -> None:
        self.broker = Broker()
        self.engine = RuleEngine(Hub(self.broker), _configs(count, sql, actions, match))

    async def start(self) -> asyncio.Task[None]:
        task = asyncio.create_task(self.engine.run())
        await asyncio.sleep(0)  # the configured rules install
        self.broker.subscribe(
            Origin("mqtt", "sub"), ("bench/in/+",), 0, no_local=False, on_message=_discard
        )
        return task

    async def once(self, messages: Sequence[Context], total: int) -> float:
        """CPU seconds per message routing ``total`` messages and acting on the results."""
        publish = self.broker.publish
        started = time.process_time()
        for _ in range(total // len(messages)):
            for context in messages:
                publish(context)
            await asyncio.sleep(0)
        while self.engine.stats()["queue_depth"]:
            await asyncio.sleep(0)
        return (time.process_time() - started) / total


async def measure(
    rounds: int = 9,
    total: int = 50_000,
    sql: str = SQL,
    actions: bool = True,
    match: bool = True,
) -> dict[int, float]:
    """Best CPU seconds per message with 0, 10 and 100 rules, the brokers taking turns."""
    origins = [Origin("mqtt", f"p{i:02d}", "127.0.0.1:1", None) for i in range(100)]
    messages = [
        Context(f"bench/in/{i % 100:02d}", b'{"t": 1}', 0, False, origin=origins[i % 100])
        for i in range(BATCH)
    ]
    setups = {count: _Setup(count, sql, actions, match) for count in RULE_COUNTS}
    tasks = [await setup.start() for setup in setups.values()]
    best = dict.fromkeys(RULE_COUNTS, float("inf"))
    try:
        for _ in range(rounds):
            for count, setup in setups.items():
                best[count] = min(best[count], await setup.once(messages, total))
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return best


def run(argv: Sequence[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(prog="python -m bench.rules_inproc")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-actions", action="store_true")
    parser.add_argument("--no-match", action="store_true")
    parser.add_argument("--sql", default=SQL)
    args = parser.parse_args(argv)
    best = asyncio.run(
        measure(args.rounds, sql=args.sql, actions=not args.no_actions, match=not args.no_match)
    )
    lines = ["Rule engine in process: CPU time per message routed (best of the rounds)"]
    for count, seconds in best.items():
        added = "" if count == 0 else f"  (rules add {(seconds - best[0]) * 1e6:+.2f} us)"
        lines.append(f"  {count:>4} rules: {seconds * 1e6:.2f} us{added}")
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
