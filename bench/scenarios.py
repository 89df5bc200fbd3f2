"""The scenarios of ``make bench``, their metrics and the targets of issue 2.

A scenario turns ``BenchOptions`` and a running broker into a dict of metric values
(plus details for the JSON report). Metrics name their unit, whether higher is
better, and their target: either a ratio to the reference broker (the second one in
``--brokers``, mosquitto by default) or an absolute bound on the candidate (the first).

Process layout (see docs/performance.md for the measurements behind it):

- QoS 0 fan-in: 4 publisher connections in ``publisher_procs`` processes, one
  subscriber on ``bench/in/+`` in one process;
- QoS 0 fan-out: 1 publisher process, 10 subscribers on ``bench/out`` dealt over
  ``subscriber_procs`` processes;
- QoS 1: 4 publisher connections, each with a window of 100 unacknowledged PUBLISH,
  in ``qos1_publisher_procs`` processes; one QoS 1 subscriber on ``bench/q1/+``;
- latency: one publisher process at 1000 msg/s, one subscriber process;
- echo: the harness process itself, one client publishing QoS 1 to its own
  subscription, one message at a time, Nagle's algorithm on (``bench.echo``);
- idle memory: the harness process itself opens the connections;
- start-up memory: the broker's RSS once it answers, with ``make run``'s defaults
  (edgebus: MQTT, WebSocket, HTTP API, SQLite; the ``defaults`` launch profile);
- connects: ``connect_procs`` processes connecting and disconnecting in a loop.

Throughput is also given per broker CPU-second (messages / broker CPU time over the
window): on a 2-core machine shared with the load generator, that is the figure that
compares the brokers' own cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.brokers import RunningBroker
from bench.connects import run_connects
from bench.echo import run_echo
from bench.idle import run_idle
from bench.latency import run_latency
from bench.loadgen import FlowResult, FlowSpec, run_flow
from bench.procstat import rss_kib

__all__ = ["SCENARIOS", "BenchOptions", "Metric", "Scenario", "Target"]


@dataclass(frozen=True)
class BenchOptions:
    duration_s: float = 5.0
    warmup_s: float = 1.0
    level: int = 4
    payload_size: int = 16
    fanin_publishers: int = 4
    fanout_subscribers: int = 10
    qos1_publishers: int = 4
    window: int = 100
    e2e_window: int = 32_768
    batch: int = 512
    publisher_procs: int = 2
    subscriber_procs: int = 2
    qos1_publisher_procs: int = 1
    latency_rate: float = 1000.0
    idle_connections: int = 1000
    idle_warm: int = 50
    connect_procs: int = 2
    startup_settle_s: float = 2.0


@dataclass(frozen=True)
class Target:
    """``ratio_min``: candidate / reference >= value; ``max``: candidate <= value;
    ``below``: candidate < value."""

    kind: str
    value: float

    def describe(self, unit: str) -> str:
        if self.kind == "ratio_min":
            return f">= {self.value:g}x"
        op = "<=" if self.kind == "max" else "<"
        return f"{op} {self.value:g} {unit}"

    def met(self, candidate: float, reference: float | None) -> bool | None:
        """Whether the target is met; None when it cannot be judged."""
        if self.kind == "ratio_min":
            if reference is None or reference <= 0:
                return None
            return candidate / reference >= self.value
        if self.kind == "max":
            return candidate <= self.value
        return candidate < self.value


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    target: Target | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    metrics: tuple[Metric, ...]
    run: Callable[[RunningBroker, BenchOptions], tuple[dict[str, float], dict[str, Any]]]
    profile: str = "bench"  # the broker's configuration (bench.brokers.launch)


def _flow_details(result: FlowResult) -> dict[str, Any]:
    return {
        "window_s": round(result.duration_s, 3),
        "published_per_s": round(result.publish_rate),
        "acked_per_s": round(result.ack_rate),
        "delivered_per_s": round(result.delivery_rate),
        "per_subscriber_per_s": [round(n / result.duration_s) for n in result.delivered],
        "delivery_ratio": round(result.delivery_ratio, 6),
        "broker_cpu": round(result.broker_cpu, 3),
        "generator_cpu": round(result.generator_cpu, 3),
        "other_cpu": round(result.other_cpu, 3),
        "sent_total": result.sent_total,
        "delivered_total": result.delivered_total,
    }


def _per_cpu(rate: float, result: FlowResult) -> float:
    """Messages per broker CPU-second."""
    return rate / result.broker_cpu if result.broker_cpu > 0 else 0.0


def _flow(broker: RunningBroker, opts: BenchOptions, spec: FlowSpec) -> FlowResult:
    return run_flow(
        spec, broker.port, broker.pid, broker.check_alive, opts.warmup_s, opts.duration_s
    )


def _topics(prefix: str, n: int) -> tuple[str, ...]:
    width = len(str(n - 1))
    return tuple(f"{prefix}/{i:0{width}d}" for i in range(n))


def run_fanin(broker: RunningBroker, opts: BenchOptions) -> tuple[dict[str, float], dict[str, Any]]:
    spec = FlowSpec(
        qos=0,
        publish_topics=_topics("bench/in", opts.fanin_publishers),
        subscribe_filter="bench/in/+",
        subscribers=1,
        publisher_procs=opts.publisher_procs,
        subscriber_procs=1,
        level=opts.level,
        payload_size=opts.payload_size,
        batch=opts.batch,
        e2e_window=opts.e2e_window,
    )
    result = _flow(broker, opts, spec)
    values = {
        "received": result.delivery_rate,
        "received_per_cpu": _per_cpu(result.delivery_rate, result),
    }
    return values, _flow_details(result)


def run_fanout(
    broker: RunningBroker, opts: BenchOptions
) -> tuple[dict[str, float], dict[str, Any]]:
    spec = FlowSpec(
        qos=0,
        publish_topics=("bench/out",),
        subscribe_filter="bench/out",
        subscribers=opts.fanout_subscribers,
        publisher_procs=1,
        subscriber_procs=opts.subscriber_procs,
        level=opts.level,
        payload_size=opts.payload_size,
        batch=opts.batch,
        e2e_window=opts.e2e_window,
    )
    result = _flow(broker, opts, spec)
    values = {
        "deliveries": result.delivery_rate,
        "per_subscriber": result.per_subscriber_rate,
        "deliveries_per_cpu": _per_cpu(result.delivery_rate, result),
    }
    return values, _flow_details(result)


def run_qos1(broker: RunningBroker, opts: BenchOptions) -> tuple[dict[str, float], dict[str, Any]]:
    spec = FlowSpec(
        qos=1,
        publish_topics=_topics("bench/q1", opts.qos1_publishers),
        subscribe_filter="bench/q1/+",
        subscribers=1,
        publisher_procs=opts.qos1_publisher_procs,
        subscriber_procs=1,
        level=opts.level,
        payload_size=opts.payload_size,
        window=opts.window,
        e2e_window=opts.e2e_window,
    )
    result = _flow(broker, opts, spec)
    values = {
        "acked": result.ack_rate,
        "delivered": result.delivery_rate,
        "acked_per_cpu": _per_cpu(result.ack_rate, result),
    }
    return values, _flow_details(result)


def run_latency_probe(
    broker: RunningBroker, opts: BenchOptions
) -> tuple[dict[str, float], dict[str, Any]]:
    result = run_latency(
        broker.port,
        broker.pid,
        broker.check_alive,
        opts.latency_rate,
        opts.warmup_s,
        opts.duration_s,
        opts.level,
        opts.payload_size,
    )
    values = {"p50": result.p50_ms, "p99": result.p99_ms, "max": result.max_ms}
    details = {
        "received": result.received,
        "expected": result.expected,
        "lost": result.lost,
        "late_sends": result.late_sends,
        "broker_cpu": round(result.broker_cpu, 3),
        "generator_cpu": round(result.generator_cpu, 3),
        "other_cpu": round(result.other_cpu, 3),
    }
    return values, details


def run_echo_probe(
    broker: RunningBroker, opts: BenchOptions
) -> tuple[dict[str, float], dict[str, Any]]:
    result = run_echo(
        broker.port,
        broker.pid,
        broker.check_alive,
        opts.warmup_s,
        opts.duration_s,
        opts.level,
        opts.payload_size,
    )
    values = {"round_trips": result.rate, "p50": result.p50_ms, "p99": result.p99_ms}
    details = {
        "round_trips": result.round_trips,
        "broker_cpu": round(result.broker_cpu, 3),
        "generator_cpu": round(result.generator_cpu, 3),
        "other_cpu": round(result.other_cpu, 3),
    }
    return values, details


def run_idle_memory(
    broker: RunningBroker, opts: BenchOptions
) -> tuple[dict[str, float], dict[str, Any]]:
    result = run_idle(
        broker.port,
        broker.pid,
        broker.check_alive,
        opts.idle_connections,
        opts.idle_warm,
        opts.level,
    )
    details = {
        "connections": result.connections,
        "rss_before_kib": result.rss_before_kib,
        "rss_after_kib": result.rss_after_kib,
    }
    return {"kib_per_conn": result.kib_per_connection}, details


def run_startup_memory(
    broker: RunningBroker, opts: BenchOptions
) -> tuple[dict[str, float], dict[str, Any]]:
    time.sleep(opts.startup_settle_s)
    broker.check_alive()
    kib = rss_kib(broker.pid)
    return {"rss_mb": kib / 1024}, {"rss_kib": kib}


def run_connect_rate(
    broker: RunningBroker, opts: BenchOptions
) -> tuple[dict[str, float], dict[str, Any]]:
    result = run_connects(
        broker.port,
        broker.pid,
        broker.check_alive,
        opts.warmup_s,
        opts.duration_s,
        opts.level,
        opts.connect_procs,
    )
    values = {
        "connects": result.rate,
        "connects_per_cpu": result.connects / (result.broker_cpu * result.duration_s)
        if result.broker_cpu > 0
        else 0.0,
        "cpu_per_connect": result.cpu_per_connect_ms,
    }
    details = {
        "connects": result.connects,
        "failures": result.failures,
        "broker_cpu": round(result.broker_cpu, 3),
        "broker_user_cpu": round(result.broker_user_cpu, 3),  # its own code's part
        "generator_cpu": round(result.generator_cpu, 3),
        "other_cpu": round(result.other_cpu, 3),
    }
    return values, details


_HALF = Target("ratio_min", 0.5)
_PAR = Target("ratio_min", 1.0)  # issue 17: at least mosquitto's

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "fanin",
            "QoS 0 fan-in 4 -> 1 (wildcard)",
            (
                Metric("received", "received", "msg/s", True, _HALF),
                Metric("received_per_cpu", "received per broker CPU-s", "msg", True, _PAR),
            ),
            run_fanin,
        ),
        Scenario(
            "fanout",
            "QoS 0 fan-out 1 -> 10",
            (
                Metric("deliveries", "deliveries, all subscribers", "msg/s", True, _HALF),
                Metric("per_subscriber", "per subscriber", "msg/s", True),
                Metric("deliveries_per_cpu", "deliveries per broker CPU-s", "msg", True),
            ),
            run_fanout,
        ),
        Scenario(
            "qos1",
            "QoS 1 4 -> 1, window 100",
            (
                Metric("acked", "acknowledged publishes", "msg/s", True, _HALF),
                Metric("delivered", "delivered", "msg/s", True),
                Metric("acked_per_cpu", "acknowledged per broker CPU-s", "msg", True),
            ),
            run_qos1,
        ),
        Scenario(
            "latency",
            "latency at {latency_rate:g} msg/s",
            (
                Metric("p50", "p50", "ms", False),
                Metric("p99", "p99", "ms", False, Target("below", 5.0)),
                Metric("max", "max", "ms", False),
            ),
            run_latency_probe,
        ),
        Scenario(
            "echo",
            "QoS 1 to its own subscription, one at a time, Nagle on (paho's way)",
            (
                Metric("round_trips", "round trips", "/s", True, _HALF),
                Metric("p50", "p50", "ms", False),
                Metric("p99", "p99", "ms", False),
            ),
            run_echo_probe,
        ),
        Scenario(
            "idle",
            "memory per idle connection",
            (
                Metric(
                    "kib_per_conn", "RSS growth per connection", "KiB", False, Target("max", 3.0)
                ),
            ),
            run_idle_memory,
        ),
        Scenario(
            "startup",
            "idle RSS at start (make run's defaults)",
            (Metric("rss_mb", "RSS", "MB", False, Target("max", 30.0)),),
            run_startup_memory,
            profile="defaults",
        ),
        Scenario(
            "connect",
            "connects (CONNECT, CONNACK, DISCONNECT)",
            (
                Metric("connects", "connects", "conn/s", True, _PAR),
                Metric("connects_per_cpu", "connects per broker CPU-s", "conn", True),
                Metric("cpu_per_connect", "broker CPU per connect", "ms", False),
            ),
            run_connect_rate,
        ),
    )
}
