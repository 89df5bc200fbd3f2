"""The rule engine's cost: QoS 0 fan-in with 0, 10 and 100 active rules, in one run.

``run()`` returns the result lines (``python -m bench`` prints them after the broker
table); ``python -m bench.bench_rules`` runs it alone. In every round, in this order, a
fresh edgebus gateway (a subprocess) runs the QoS 0 fan-in scenario of the broker table
with 100 publisher connections instead of 4, each on its own topic ``bench/in/00`` ..
``bench/in/99`` (in 2 processes), one subscriber on ``bench/in/+``:

- with no rule;
- with 10 rules, rule ``i`` reading ``FROM "bench/in/<i>0", ..., "bench/in/<i>9"``;
- with 100 rules, rule ``i`` reading ``FROM "bench/in/<i>"``.

So the traffic is divided among the rules: each message reaches exactly one rule, and
each rule sees its share of the traffic (a tenth, a hundredth). Each rule evaluates a
WHERE clause that every message passes (``qos < 2 AND topic LIKE 'bench/%'``), selects
three fields and hands the result to a ``log`` action at DEBUG level (disabled: the
action costs a queue entry and a counter, not output). So every message costs one
evaluation and one action; the router, not the rules, matches the FROM filters.

The figure is the subscriber's receive rate, median over rounds; the ratio is against
no rule in the same round, median over rounds (issue 16: at least 0.7x with 10 rules,
0.4x with 100). Beside it, messages per broker CPU-second and their ratio, the cost of
the rules per message, which a loaded machine disturbs less than the rate. Rules
evaluate every message while it is routed, so "evaluated" (the
rules' ``matched`` summed, over the messages the publishers sent, read from the
gateway's ``/api/v1/metrics`` at the end of the run) is 100 %; "acted" is the share of
the results whose action ran: the action worker takes at most a fifth of the loop
(``gateway.rules.engine.CPU_SHARE``) and under overload its bounded queue drops the
oldest results, counted. On a shared 2-core machine the figures swing from run to run;
compare ratios of one run.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import urllib.request
from typing import Any

from bench.brokers import RunningBroker, launch
from bench.scenarios import BenchOptions, run_fanin

__all__ = ["rule_filters", "rules_config", "run"]

ROUNDS = 3
RULE_COUNTS = (0, 10, 100)
TARGETS = {10: 0.7, 100: 0.4}
#: Publisher connections, one topic each (``bench/in/00`` .. ``bench/in/99``).
PUBLISHERS = 100


def rule_filters(i: int, count: int) -> list[str]:
    """The FROM filters of rule ``i`` of ``count``: its share of the publishers' topics."""
    share = PUBLISHERS // count
    return [f"bench/in/{k:02d}" for k in range(i * share, (i + 1) * share)]


def rules_config(count: int) -> str:
    """The ``rules:`` section of ``count`` rules (empty for none)."""
    if count == 0:
        return ""
    lines = ["rules:"]
    for i in range(count):
        sources = ", ".join(f'"{f}"' for f in rule_filters(i, count))
        lines += [
            f"  - name: r{i:03d}",
            f"    sql: >-\n      SELECT topic, qos, clientid FROM {sources}"
            f" WHERE qos < 2 AND topic LIKE 'bench/%'",
            "    actions: [{type: log, level: debug}]",
        ]
    return "\n".join(lines) + "\n"


def _metrics(broker: RunningBroker) -> dict[str, Any]:
    """The gateway's ``/api/v1/metrics`` (on ``broker.api_port``, its generated key in the
    data directory); empty when it cannot be read."""
    key_file = broker.log_path.parent / "data" / "api-key"
    if broker.api_port is None or not key_file.exists():
        return {}
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.api_port}/api/v1/metrics",
        headers={"Authorization": f"Bearer {key_file.read_text().strip()}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            metrics: dict[str, Any] = json.load(response)
    except OSError as exc:  # a gateway still busy with the backlog: no shares this round
        print(f"rules: could not read the gateway's metrics: {exc}", file=sys.stderr)
        return {}
    return metrics


@dataclasses.dataclass
class _Sample:
    rate: float
    per_cpu: float  # messages received per broker CPU-second
    evaluated: float | None = None  # the rules' matched / the messages sent
    acted: float | None = None  # results acted on / results (the rest dropped, counted)


def _measure(count: int, options: BenchOptions) -> _Sample:
    with launch("edgebus", extra_config=rules_config(count)) as broker:
        values, details = run_fanin(broker, options)
        metrics = _metrics(broker) if count else {}
    sample = _Sample(values["received"], values["received_per_cpu"])
    rules = [r.get("details", {}) for r in metrics.get("rules", [])]
    sent = details.get("sent_total", 0)
    if rules and sent:
        sample.evaluated = sum(r.get("matched", 0) for r in rules) / sent
        passed = sum(r.get("passed", 0) for r in rules)
        dropped = sum(r.get("dropped", 0) for r in rules)
        sample.acted = (passed - dropped) / passed if passed else None
    return sample


def _share(values: list[float]) -> str:
    return f"{statistics.median(values):.0%}" if values else ""


def run(rounds: int = ROUNDS, options: BenchOptions | None = None) -> list[str]:
    options = dataclasses.replace(options or BenchOptions(), fanin_publishers=PUBLISHERS)
    rates: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    ratios: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    per_cpu: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    cpu_ratios: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    evaluated: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    acted: dict[int, list[float]] = {count: [] for count in RULE_COUNTS}
    for round_number in range(rounds):
        for count in RULE_COUNTS:
            sample = _measure(count, options)
            rates[count].append(sample.rate)
            per_cpu[count].append(sample.per_cpu)
            if rates[0][-1]:
                ratios[count].append(sample.rate / rates[0][-1])  # paired: the same round's
            if per_cpu[0][-1]:
                cpu_ratios[count].append(sample.per_cpu / per_cpu[0][-1])
            shown = ""
            if sample.evaluated is not None:
                evaluated[count].append(sample.evaluated)
                shown = f", {sample.evaluated:.1%} of the messages evaluated"
            if sample.acted is not None:
                acted[count].append(sample.acted)
                shown += f", {sample.acted:.0%} of the results acted on"
            print(
                f"rules: round {round_number + 1}/{rounds}: {count} rules:"
                f" {sample.rate:,.0f} msg/s, {sample.per_cpu:,.0f} per broker CPU-s{shown}",
                file=sys.stderr,
            )
    lines = [
        f"Rule engine: QoS 0 fan-in {PUBLISHERS} -> 1, each message reaching one rule,"
        f" median of {rounds} rounds (ratio: against no rule in the same round)",
        f"  {'rules':>6}  {'msg/s':>10}  {'ratio':>6}  {'per CPU-s':>10}  {'ratio':>6}"
        f"  {'evaluated':>9}  {'acted':>6}  target",
    ]
    for count in RULE_COUNTS:
        median = statistics.median(rates[count])
        ratio = statistics.median(ratios[count]) if ratios[count] else float("nan")
        target = TARGETS.get(count)
        verdict = "" if target is None else (
            f">= {target}x {'met' if ratio >= target else 'MISSED'}")  # fmt: skip
        shown = "" if count == 0 else f"{ratio:.2f}x"
        cpu = statistics.median(per_cpu[count])
        cpu_shown = "" if count == 0 or not cpu_ratios[count] else (
            f"{statistics.median(cpu_ratios[count]):.2f}x")  # fmt: skip
        lines.append(
            f"  {count:>6}  {median:>10,.0f}  {shown:>6}  {cpu:>10,.0f}  {cpu_shown:>6}"
            f"  {_share(evaluated[count]):>9}  {_share(acted[count]):>6}  {verdict}"
        )
    lines.append(
        "  per CPU-s: messages received per broker CPU-second (its ratio: against no rule in"
        " the same round: the cost of the rules per message, less disturbed by other load);"
        " evaluated: the rules' matched over the messages sent (rules evaluate every"
        " message while it is routed); acted: the results whose action ran, the rest the"
        " bounded action queue dropped (counted) so as not to slow the broker"
    )
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
