"""Interleaved runs: every scenario against every broker, alternately, for N rounds.

For each scenario, round r runs the brokers in ``--brokers`` order (A, B, A, B, ...),
each on a freshly started broker that is stopped right after, so no run inherits
another's sessions, queues or heap. The figure per broker is the median over rounds.

Before each run the runner waits (up to ``quiet_timeout_s``, and ``quiet_budget_s`` in
all, so that a busy machine cannot stretch the session without bound) for the machine
to be idle, so that a neighbour's burst of work does not land in one broker's run only;
the CPU that other processes still used during the measurement is recorded with each
run.

A broker that cannot start is marked failed and skipped for the rest of the session
(its startup would otherwise time out in every run); a run that fails after the broker
started is recorded with its error and the others go on.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.brokers import launch
from bench.errors import BenchError
from bench.procstat import wait_for_quiet
from bench.scenarios import BenchOptions, Scenario

__all__ = ["QUIET_CORES", "BenchResults", "BrokerSlot", "RunRecord", "run_all", "slots_for"]

# The machine counts as idle below this much busy CPU, in cores.
QUIET_CORES = 0.1


@dataclass(frozen=True)
class BrokerSlot:
    """One column of the comparison: a broker kind under a display label."""

    label: str
    kind: str


@dataclass
class RunRecord:
    scenario: str
    label: str
    round: int
    values: dict[str, float]
    details: dict[str, Any]
    error: str | None
    seconds: float


@dataclass
class BenchResults:
    options: BenchOptions
    slots: list[BrokerSlot]
    scenarios: list[Scenario]
    rounds: int
    quiet_timeout_s: float = 10.0
    quiet_budget_s: float = 60.0
    records: list[RunRecord] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def values(self, scenario: str, label: str, metric: str) -> list[float]:
        return [
            r.values[metric]
            for r in self.records
            if r.scenario == scenario and r.label == label and metric in r.values
        ]

    def median(self, scenario: str, label: str, metric: str) -> float | None:
        values = self.values(scenario, label, metric)
        return statistics.median(values) if values else None

    def errors(self) -> list[RunRecord]:
        return [r for r in self.records if r.error]


def slots_for(kinds: Sequence[str]) -> list[BrokerSlot]:
    """Labels for ``--brokers``; a kind named twice gets " (A)" / " (B)" suffixes."""
    duplicated = len(set(kinds)) < len(kinds)
    return [
        BrokerSlot(f"{kind} ({chr(ord('A') + i)})" if duplicated else kind, kind)
        for i, kind in enumerate(kinds)
    ]


def run_all(
    results: BenchResults, progress: Callable[[RunRecord], None] | None = None
) -> BenchResults:
    """Fill ``results.records`` by running every scenario, interleaved."""
    opts = results.options
    budget_end = time.monotonic() + results.quiet_budget_s
    for scenario in results.scenarios:
        for round_no in range(1, results.rounds + 1):
            for slot in results.slots:
                if slot.label in results.failed:
                    continue
                left = min(results.quiet_timeout_s, budget_end - time.monotonic())
                if left > 0:
                    wait_for_quiet(QUIET_CORES, left)
                record = _run_one(scenario, slot, round_no, opts, results.failed)
                results.records.append(record)
                if progress is not None:
                    progress(record)
    return results


def _run_one(
    scenario: Scenario,
    slot: BrokerSlot,
    round_no: int,
    opts: BenchOptions,
    failed: dict[str, str],
) -> RunRecord:
    started = time.monotonic()
    values: dict[str, float] = {}
    details: dict[str, Any] = {}
    error = None
    broker_up = False
    try:
        with launch(slot.kind, profile=scenario.profile) as broker:
            broker_up = True
            values, details = scenario.run(broker, opts)
            broker.check_alive()
    except BenchError as exc:
        error = f"{type(exc).__name__}: {exc}"
        if not broker_up:
            failed[slot.label] = error
    return RunRecord(
        scenario.name, slot.label, round_no, values, details, error, time.monotonic() - started
    )
