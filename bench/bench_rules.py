"""The rule engine's cost: QoS 0 fan-in with 0, 10 and 100 active rules, in one run.

``run()`` returns the result lines (``python -m bench`` prints them after the broker
table); ``python -m bench.bench_rules`` runs it alone. In every round, in this order, a
fresh edgebus gateway (a subprocess) runs the QoS 0 fan-in scenario of the broker table
(4 publishers on ``bench/in/0`` .. ``bench/in/3``, one subscriber on ``bench/in/+``):

- with no rule;
- with 10 rules, and with 100 rules, rule ``i`` reading ``FROM "bench/in/<i mod 4>"``:
  each sees a quarter of the traffic (each message reaches 2 or 3 of the 10 rules, 25
  of the 100), evaluates a WHERE clause on it and passes it to a ``log`` action at
  DEBUG level (disabled: the action costs a counter, not output).

The figure is the subscriber's receive rate, median over rounds; the ratio is against
no rule (issue 16: at least 0.7x with 10 rules, 0.4x with 100). Under overload the
engine's bounded queue drops the oldest entries (counted in its metrics) rather than
slow the broker, so the ratio measures what evaluating rules takes from the broker's
loop. On a shared 2-core machine the figures swing from run to run; compare ratios of
one run.
"""

from __future__ import annotations

import statistics
import sys

from bench.brokers import launch
from bench.scenarios import BenchOptions, run_fanin

__all__ = ["rules_config", "run"]

ROUNDS = 3
RULE_COUNTS = (0, 10, 100)
TARGETS = {10: 0.7, 100: 0.4}
PUBLISHERS = 4


def rules_config(count: int) -> str:
    """The ``rules:`` section of ``count`` rules (empty for none)."""
    if count == 0:
        return ""
    lines = ["rules:"]
    for i in range(count):
        lines += [
            f"  - name: r{i:03d}",
            f"    sql: >-\n      SELECT topic, qos, clientid FROM \"bench/in/{i % PUBLISHERS}\""
            f" WHERE qos < 2 AND topic LIKE 'bench/%'",
            "    actions: [{type: log, level: debug}]",
        ]
    return "\n".join(lines) + "\n"


def _rate(count: int, options: BenchOptions) -> float:
    with launch("edgebus", extra_config=rules_config(count)) as broker:
        metrics, _ = run_fanin(broker, options)
    return metrics["received"]


def run(rounds: int = ROUNDS, options: BenchOptions | None = None) -> list[str]:
    options = options or BenchOptions()
    rates: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    for round_number in range(rounds):
        for count in RULE_COUNTS:
            rate = _rate(count, options)
            rates[count].append(rate)
            print(
                f"rules: round {round_number + 1}/{rounds}: {count} rules: {rate:,.0f} msg/s",
                file=sys.stderr,
            )
    medians = {count: statistics.median(values) for count, values in rates.items()}
    base = medians[0]
    lines = [
        f"Rule engine: QoS 0 fan-in 4 -> 1, median of {rounds} rounds"
        " (ratio: against no rule)",
        f"  {'rules':>6}  {'msg/s':>10}  {'ratio':>6}  target",
    ]
    for count in RULE_COUNTS:
        ratio = medians[count] / base if base else float("nan")
        target = TARGETS.get(count)
        verdict = "" if target is None else (
            f">= {target}x {'met' if ratio >= target else 'MISSED'}")  # fmt: skip
        shown = "" if count == 0 else f"{ratio:.2f}x"
        lines.append(f"  {count:>6}  {medians[count]:>10,.0f}  {shown:>6}  {verdict}")
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
