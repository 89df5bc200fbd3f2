"""``python -m bench`` (``make bench``): edgebus against mosquitto, side by side.

Runs every scenario against each broker of ``--brokers``, interleaved, and prints a
table of medians with the ratio first broker / second broker and the targets of
issue 2. Progress goes to stderr, the table to stdout. See docs/performance.md.

Exit status: 0 when every run was measured; 2 when a broker did not start or a run
failed; with ``--check``, 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from bench.brokers import BROKER_KINDS
from bench.idle import raise_fd_limit
from bench.report import emit, format_progress, format_table, summarize, write_json
from bench.runner import BenchResults, run_all, slots_for
from bench.scenarios import SCENARIOS, BenchOptions

_LEVELS = {"3": 3, "3.1": 3, "4": 4, "3.1.1": 4, "5": 5, "5.0": 5}


def _csv(choices: tuple[str, ...] | list[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        unknown = [item for item in items if item not in choices]
        if unknown or not items:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of {', '.join(choices)}; got {text!r}"
            )
        return items

    return parse


def _parser() -> argparse.ArgumentParser:
    defaults = BenchOptions()
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Throughput, latency and memory of edgebus against mosquitto.",
    )
    p.add_argument(
        "--brokers",
        type=_csv(BROKER_KINDS),
        default=["edgebus", "mosquitto"],
        help="candidate,reference (default edgebus,mosquitto); 'mosquitto,mosquitto' "
        "validates the harness; a single broker prints figures without ratios",
    )
    p.add_argument(
        "--scenarios",
        type=_csv(list(SCENARIOS)),
        default=list(SCENARIOS),
        help=f"which scenarios (default all: {','.join(SCENARIOS)})",
    )
    p.add_argument("--rounds", type=int, default=3, help="runs per broker and scenario (3)")
    p.add_argument("--duration", type=float, default=defaults.duration_s, help="seconds (5)")
    p.add_argument("--warmup", type=float, default=defaults.warmup_s, help="seconds (1)")
    p.add_argument(
        "--protocol", choices=sorted(_LEVELS), default="4", help="MQTT level: 3, 4 (3.1.1), 5"
    )
    p.add_argument("--payload-size", type=int, default=defaults.payload_size, help="bytes (16)")
    p.add_argument(
        "--window", type=int, default=defaults.window, help="QoS 1 unacknowledged PUBLISH (100)"
    )
    p.add_argument("--latency-rate", type=float, default=defaults.latency_rate, help="msg/s (1000)")
    p.add_argument("--idle-connections", type=int, default=defaults.idle_connections, help="(1000)")
    p.add_argument(
        "--publisher-procs",
        type=int,
        default=defaults.publisher_procs,
        help="processes for the 4 QoS 0 fan-in publishers (2)",
    )
    p.add_argument(
        "--subscriber-procs",
        type=int,
        default=defaults.subscriber_procs,
        help="processes for the 10 fan-out subscribers (2)",
    )
    p.add_argument(
        "--qos1-publisher-procs",
        type=int,
        default=defaults.qos1_publisher_procs,
        help="processes for the 4 QoS 1 publishers (1)",
    )
    p.add_argument(
        "--quiet-timeout",
        type=float,
        default=10.0,
        help="before each run, wait up to this many seconds for the machine to be idle (10)",
    )
    p.add_argument(
        "--quiet-budget",
        type=float,
        default=60.0,
        help="total seconds of such waiting in a session; 0 disables waiting (60)",
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    p.add_argument("--no-idl", action="store_true", help="skip bench/bench_idl.py")
    p.add_argument("--no-someip", action="store_true", help="skip bench/bench_someip.py")
    p.add_argument(
        "--no-sockets", action="store_true", help="skip bench/bench_sockets.py (ZeroMQ, NNG)"
    )
    p.add_argument("--no-dds", action="store_true", help="skip bench/bench_dds.py")
    p.add_argument(
        "--no-bridge", action="store_true", help="skip bench/bench_bridge.py (about 2 minutes)"
    )
    p.add_argument(
        "--no-stream", action="store_true", help="skip bench/bench_stream.py (the stream log)"
    )
    p.add_argument("--no-rules", action="store_true", help="skip bench/bench_rules.py")
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="skip bench/connect_floor.py (connects against a bare event loop and two lean"
        " Python servers, one on a gateway's registry, about 2 minutes; only with the"
        " connect scenario)",
    )
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    return p


def _module_lines(name: str) -> list[str]:
    """Lines from ``bench/<name>.py``'s ``run()``, if that module exists."""
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"bench.{name}":
            raise
        return []
    run = getattr(module, "run", None)
    if not callable(run):
        return []
    try:
        return [str(line) for line in run()]
    except Exception as exc:  # another engineer's module: report it, keep our table
        return [f"{name} failed: {type(exc).__name__}: {exc}"]


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.rounds < 1 or args.duration <= 0 or args.warmup < 0:
        _parser().error("--rounds must be >= 1, --duration > 0, --warmup >= 0")
    if args.payload_size < 16:
        _parser().error("--payload-size must be >= 16 (the latency probe's sequence and time)")
    signal.signal(signal.SIGTERM, _terminate)
    options = BenchOptions(
        duration_s=args.duration,
        warmup_s=args.warmup,
        level=_LEVELS[args.protocol],
        payload_size=args.payload_size,
        window=args.window,
        latency_rate=args.latency_rate,
        idle_connections=args.idle_connections,
        publisher_procs=args.publisher_procs,
        subscriber_procs=args.subscriber_procs,
        qos1_publisher_procs=args.qos1_publisher_procs,
    )
    raise_fd_limit(options.idle_connections + options.idle_warm + 256)
    results = BenchResults(
        options=options,
        slots=slots_for(args.brokers),
        scenarios=[SCENARIOS[name] for name in args.scenarios],
        rounds=args.rounds,
        quiet_timeout_s=args.quiet_timeout,
        quiet_budget_s=args.quiet_budget,
    )
    run_all(results, progress=lambda record: emit([format_progress(record)], sys.stderr))
    summary = summarize(results)
    emit(["", *format_table(summary)])
    if args.json:
        write_json(summary, args.json)
    for name, skip in (
        ("bench_idl", args.no_idl),
        ("bench_someip", args.no_someip),
        ("bench_sockets", args.no_sockets),
        ("bench_dds", args.no_dds),
        ("bench_bridge", args.no_bridge),
        ("bench_rules", args.no_rules),
        ("connect_floor", args.no_floor or "connect" not in args.scenarios),
    ):
        lines = [] if skip else _module_lines(name)
        if lines:
            emit(["", *lines])
    if not args.no_stream:
        from bench.bench_stream import run as run_stream

        emit(run_stream(args.rounds, args.duration, args.warmup))
    if results.failed or results.errors():
        return 2
    missed = any(
        metric["pass"] is False
        for scenario in summary["scenarios"].values()
        for metric in scenario["metrics"].values()
    )
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
