"""The report: a comparison table on stdout and a JSON document.

``summarize`` turns the run records into one plain dict (medians, ratios, pass/fail);
the table and the JSON file are both rendered from it. The candidate is the first
broker of ``--brokers`` (edgebus by default), the reference the second (mosquitto).
Ratios are always candidate / reference, whatever the direction of the metric: above
1 is better for throughput, below 1 is better for latency and memory.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from bench.runner import BenchResults, RunRecord

__all__ = ["emit", "format_progress", "format_table", "summarize", "write_json"]

# Runs where processes outside the benchmark used more CPU than this (in cores) are
# flagged: their figures measure the neighbours as much as the broker.
OTHER_LOAD_WARNING = 0.15
_LEVEL_NAMES = {3: "MQTT 3.1", 4: "MQTT 3.1.1", 5: "MQTT 5.0"}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit in ("msg/s", "msg", "conn/s", "conn"):
        return f"{value:,.0f}"
    if unit == "ms":
        return f"{value:.3f}"
    return f"{value:.2f}"


def summarize(results: BenchResults) -> dict[str, Any]:
    """Medians per broker, ratio, target and verdict for every metric."""
    labels = [slot.label for slot in results.slots]
    candidate = labels[0]
    reference = labels[1] if len(labels) > 1 else None
    scenarios: dict[str, Any] = {}
    for scenario in results.scenarios:
        metrics: dict[str, Any] = {}
        for metric in scenario.metrics:
            per_broker = {
                label: {
                    "median": results.median(scenario.name, label, metric.key),
                    "runs": results.values(scenario.name, label, metric.key),
                }
                for label in labels
            }
            cand = results.median(scenario.name, candidate, metric.key)
            ref = results.median(scenario.name, reference, metric.key) if reference else None
            ratio = cand / ref if cand is not None and ref else None
            verdict = None
            if metric.target is not None and cand is not None:
                verdict = metric.target.met(cand, ref)
            metrics[metric.key] = {
                "label": metric.label,
                "unit": metric.unit,
                "higher_is_better": metric.higher_is_better,
                "brokers": per_broker,
                "ratio": ratio,
                "target": metric.target.describe(metric.unit) if metric.target else None,
                "pass": verdict,
            }
        title = scenario.title.format(**asdict(results.options))
        scenarios[scenario.name] = {"title": title, "metrics": metrics}
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        },
        "options": asdict(results.options),
        "rounds": results.rounds,
        "brokers": [asdict(slot) for slot in results.slots],
        "candidate": candidate,
        "reference": reference,
        "scenarios": scenarios,
        "failed_brokers": results.failed,
        "runs": [asdict(record) for record in results.records],
    }


def format_table(summary: dict[str, Any]) -> list[str]:
    """The comparison table and the per-run figures, as lines."""
    opts = summary["options"]
    labels = [b["label"] for b in summary["brokers"]]
    reference = summary["reference"]
    head = (
        f"edgebus bench: {summary['machine']['cpus']} CPUs, "
        f"{_LEVEL_NAMES.get(opts['level'], opts['level'])}, {opts['duration_s']:g} s per run "
        f"after {opts['warmup_s']:g} s warm-up, {summary['rounds']} rounds interleaved, medians"
    )
    columns = ["scenario", "metric", *labels]
    if reference:
        a, b = summary["candidate"], reference
        columns.append("ratio A/B" if a.split()[0] == b.split()[0] else f"ratio {a}/{b}")
    columns += ["target", "result"]
    rows = []
    for scenario in summary["scenarios"].values():
        for metric in scenario["metrics"].values():
            row = [scenario["title"], f"{metric['label']} ({metric['unit']})"]
            row += [_fmt(metric["brokers"][label]["median"], metric["unit"]) for label in labels]
            if reference:
                row.append("n/a" if metric["ratio"] is None else f"{metric['ratio']:.2f}x")
            verdict = {True: "PASS", False: "FAIL", None: "-" if not metric["target"] else "n/a"}
            row += [metric["target"] or "", verdict[metric["pass"]]]
            rows.append(row)
    widths = [max(len(str(r[i])) for r in [columns, *rows]) for i in range(len(columns))]
    numeric = set(range(2, len(columns) - 1))

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [head, "", line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    out += ["", "per run, in run order; cpu = broker / load generator / other processes, in cores:"]
    for record in summary["runs"]:
        out.append("  " + format_progress(RunRecord(**record)))
    notes = _notes(summary)
    if notes:
        out += ["", "notes:", *(f"  - {note}" for note in notes)]
    return out


def _disturbance(record: RunRecord) -> float:
    """CPU (cores) that processes outside the benchmark used during the run."""
    other: float = record.details.get("other_cpu", 0.0)
    return other


def _warnings(record: RunRecord) -> list[str]:
    """What makes a run's figures doubtful: lost or extra messages."""
    d = record.details
    found = []
    ratio = d.get("delivery_ratio")
    if ratio is not None and abs(ratio - 1.0) > 1e-4:
        found.append(f"subscribers got {ratio:.2%} of the expected deliveries")
    if d.get("lost"):
        found.append(f"{d['lost']} of {d['expected']} latency probes lost")
    return found


def format_progress(record: RunRecord) -> str:
    """One line per run: scenario, broker, round, figures or error."""
    prefix = f"{record.scenario:<8} {record.label:<15} round {record.round}"
    if record.error:
        first_line = record.error.splitlines()[0]
        return f"{prefix}  ERROR {first_line}"
    figures = "  ".join(
        f"{k}={v:,.0f}" if v >= 1000 else f"{k}={v:.3f}" for k, v in record.values.items()
    )
    d = record.details
    cpu = ""
    if "broker_cpu" in d:
        cpu = f"  cpu {d['broker_cpu']:.2f}/{d['generator_cpu']:.2f}/{d['other_cpu']:.2f}"
    warnings = "".join(f"  [{w}]" for w in _warnings(record))
    if _disturbance(record) > OTHER_LOAD_WARNING:
        warnings += "  [disturbed]"
    return f"{prefix}  {figures}{cpu}  ({record.seconds:.1f} s){warnings}"


def _notes(summary: dict[str, Any]) -> list[str]:
    notes = []
    disturbed = []
    for raw in summary["runs"]:
        record = RunRecord(**raw)
        where = f"{record.scenario}, {record.label}, round {record.round}"
        if record.error and record.error not in summary["failed_brokers"].values():
            notes.append(f"{where}: not measured: {record.error}")
        notes += [f"{where}: {w}" for w in _warnings(record)]
        if _disturbance(record) > OTHER_LOAD_WARNING:
            disturbed.append(_disturbance(record))
    if disturbed:
        notes.append(
            f"{len(disturbed)} of {len(summary['runs'])} runs [disturbed]: other processes "
            f"used {min(disturbed):.2f}-{max(disturbed):.2f} cores during the measurement; "
            "their figures are low by an unknown amount; rerun on an idle machine"
        )
    for label, error in summary["failed_brokers"].items():
        notes.append(f"{label} did not start; its remaining runs were skipped: {error}")
    return notes


def write_json(summary: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(summary, indent=2) + "\n")


def emit(lines: list[str], stream: TextIO | None = None) -> None:
    """Print lines, to stdout unless told (the only place in the harness that prints)."""
    for text in lines:
        print(text, file=stream or sys.stdout, flush=True)
