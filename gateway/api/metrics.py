"""Metrics: one snapshot of live broker state, served as JSON and in Prometheus format.

``snapshot(gateway)`` reads ``Broker.stats()`` when asked (a scrape, a GET), on the
broker's loop, the same statistics ``$SYS`` publishes (``broker_core.stats`` defines
connected, received, sent and dropped once): nothing is sampled in the background and
nothing is kept twice. The
Prometheus side is a custom ``Collector`` over that snapshot, registered on a
``CollectorRegistry`` of its own per gateway (never the process-global one), so two
gateways in one process (tests) do not mix.

=======================================  =======  ===============================================
name                                     type     labels, meaning
=======================================  =======  ===============================================
edgebus_info                             gauge    node, version; always 1
edgebus_uptime_seconds                   gauge    seconds since start
edgebus_connections                      gauge    listener, protocol, version; open connections
edgebus_clients_connected                gauge    clients connected now (= sessions online)
edgebus_clients_connected_max            gauge    the most clients connected at once
edgebus_sessions                         gauge    state (online, offline)
edgebus_subscriptions                    gauge    subscriptions, shared and local ones included
edgebus_messages_received_total          counter  protocol; messages in (mqtt, api, adapter types)
edgebus_messages_sent_total              counter  protocol; messages out (mqtt)
edgebus_bytes_received_total             counter  protocol; wire bytes (mqtt), payload bytes (api)
edgebus_bytes_sent_total                 counter  protocol; wire bytes (mqtt)
edgebus_messages_dropped_total           counter  reason; see ``DROP_REASONS``
edgebus_publish_denied_total             counter  publishes refused (ACL, ``$SYS``)
edgebus_shared_redelivered_total         counter  owed by an ended shared member, sent to another
edgebus_retained_messages                gauge    retained messages held
edgebus_delayed_messages                 gauge    ``$delayed/`` messages waiting
edgebus_queued_messages                  gauge    messages queued for MQTT sessions, summed
edgebus_queued_messages_max              gauge    the longest session queue
edgebus_queued_bytes                     gauge    bytes queued for MQTT sessions
edgebus_inflight_messages                gauge    QoS 1/2 messages awaiting acknowledgement
edgebus_inflight_bytes                   gauge    bytes of the messages in flight
edgebus_delayed_bytes                    gauge    bytes of the ``$delayed/`` messages waiting
edgebus_will_bytes                       gauge    bytes of the wills held (connected, pending)
edgebus_local_queued_messages            gauge    messages waiting for local subscribers
edgebus_local_queued_messages_max        gauge    the longest local subscriber queue
edgebus_store_pending_writes             gauge    writes handed to the store, not committed
edgebus_limit_hits_total                 counter  limit; times a bound was reached (``LIMITS``)
edgebus_pending_connections              gauge    sockets that have not sent CONNECT yet
edgebus_retained_bytes                   gauge    bytes of retained messages held
edgebus_topic_alias_bytes                gauge    topic characters in client alias tables
edgebus_router_cache_entries             gauge    topics in the router's match cache
edgebus_router_cache_bytes               gauge    estimated bytes of the router's match cache
edgebus_login_failures_total             counter  failed logins
edgebus_credentials_revoked_total        counter  clients a reload disconnected: their password
                                                  file entry was removed or changed
edgebus_login_throttle_tracked           gauge    user names and addresses being throttled
edgebus_observer_errors_total            counter  broker-event observers that raised
edgebus_tls_handshake_failures_total     counter  listener, reason; TLS handshakes that failed
edgebus_component_up                     gauge    kind, type, name, state; 1 running, else 0
edgebus_component_degraded               gauge    kind, type, name; 1 degraded, else 0 (why: API)
edgebus_component_restarts_total         counter  kind, type, name; restarts
edgebus_component_messages_published_total counter kind, type, name; messages it published
edgebus_component_messages_denied_total  counter  kind, type, name; its publishes refused
edgebus_component_messages_dropped_total counter  kind, type, name, queue (subscription, inbox,
                                                  too_large: its publishes over max_packet_size)
edgebus_component_queue_depth            gauge    kind, type, name, queue (subscription, inbox)
edgebus_component_messages_tapped_total  counter  kind, type, name; messages its taps took
edgebus_component_tap_errors_total       counter  kind, type, name; its tap callbacks that raised
edgebus_component_stat                   gauge    kind, type, name, stat; its own ``stats()``
edgebus_adapter_up                       gauge    adapter, type, state; 1 running, 0 otherwise
edgebus_adapter_restarts_total           counter  adapter; restarts (failures, requests, reloads)
edgebus_adapter_messages_published_total counter  adapter; messages the adapter published
edgebus_adapter_messages_dropped_total   counter  adapter; its subscription queues overflowed
edgebus_adapter_queue_depth              gauge    adapter; messages waiting for the adapter
edgebus_bridge_up                        gauge    bridge; 1 running, 0 otherwise
edgebus_rule_hits_total                  counter  rule; messages a rule matched (its FROM)
edgebus_rule_passed_total                counter  rule; ... that passed its WHERE
edgebus_rule_failed_total                counter  rule; evaluations that raised
edgebus_rule_actions_total               counter  rule, action, type, outcome (succeeded, failed)
edgebus_rule_queue_dropped_total         counter  entries the full rule-engine queue dropped
edgebus_rule_queue_depth                 gauge    entries waiting in the rule-engine queue
edgebus_webhook_sent_total               counter  webhook; posts answered 2xx
edgebus_webhook_failed_total             counter  webhook; posts failed after their retries
edgebus_webhook_retried_total            counter  webhook; retries
edgebus_webhook_dropped_total            counter  webhook; events the full queue dropped
edgebus_webhook_queue_depth              gauge    webhook; events waiting to be posted
=======================================  =======  ===============================================

The ``edgebus_component_*`` families cover every component of every kind (adapters,
bridges, sinks) the same way; the ``edgebus_adapter_*`` ones are the adapters' share of
them, kept for existing dashboards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from broker_core.stats import DROP_REASONS
from broker_core.version import VERSION
from gateway.api.components import (
    GatewayView,
    adapter_stat,
    adapter_statuses,
    bridge_infos,
    is_up,
    rule_infos,
)
from gateway.api.schemas import (
    BytesMetrics,
    ClientCounts,
    ConnectionCount,
    InstanceStatus,
    LimitMetrics,
    MessageMetrics,
    Metrics,
    QueueMetrics,
    SessionCounts,
    TlsHandshakeFailures,
)

__all__ = [
    "DROP_REASONS",
    "BrokerCollector",
    "component_statuses",
    "mqtt_version",
    "new_registry",
    "snapshot",
]

_VERSIONS = {3: "3.1", 4: "3.1.1", 5: "5.0"}


def mqtt_version(protocol_level: int) -> str:
    return _VERSIONS.get(protocol_level, str(protocol_level))


def snapshot(gateway: GatewayView) -> Metrics:
    """The metrics of ``gateway`` now: ``Broker.stats()`` and the components' statuses."""
    stats = gateway.broker.stats()
    return Metrics(
        node=stats.node,
        uptime_s=round(stats.uptime_s, 3),
        clients=ClientCounts(
            connected=stats.connected,
            connecting=stats.connecting,
            maximum=stats.connected_max,
            total=stats.sessions,
        ),
        connections=[
            ConnectionCount(
                listener=count.listener,
                protocol="mqtt",
                version="connecting"
                if count.protocol_level is None
                else mqtt_version(count.protocol_level),
                count=count.count,
            )
            for count in stats.listeners
        ],
        sessions=SessionCounts(
            online=stats.sessions_online, offline=stats.sessions - stats.sessions_online
        ),
        subscriptions=stats.subscriptions,
        messages=MessageMetrics(
            received=dict(stats.received),
            sent=dict(stats.sent),
            dropped={reason: stats.dropped[reason] for reason in DROP_REASONS},
            publish_denied=stats.publish_denied,
            shared_redelivered=stats.shared_redelivered,
            retained=stats.retained,
            delayed=stats.delayed,
            delayed_bytes=stats.delayed_bytes,
            will_bytes=stats.will_bytes,
        ),
        bytes=BytesMetrics(
            received=dict(stats.bytes_received),
            sent=dict(stats.bytes_sent),
        ),
        queues=QueueMetrics(
            queued_messages=stats.queued_messages,
            queued_messages_max=stats.queued_messages_max,
            queued_bytes=stats.queued_bytes,
            inflight=stats.inflight,
            inflight_bytes=stats.inflight_bytes,
            local_queued=stats.local_queued,
            local_queued_max=stats.local_queued_max,
        ),
        store_pending_writes=stats.store_pending_writes,
        limits=LimitMetrics(
            hits=dict(stats.limit_hits),
            pending_connections=stats.pending_connections,
            retained_bytes=stats.retained_bytes,
            topic_alias_bytes=stats.topic_alias_bytes,
            router_cache_entries=stats.router_cache_entries,
            router_cache_bytes=stats.router_cache_bytes,
            login_failures=stats.login_failures,
            credentials_revoked=getattr(
                getattr(gateway, "security", None), "revoked_disconnects", 0
            ),
            login_throttle_tracked=stats.login_throttle_tracked,
        ),
        observer_errors=stats.observer_errors,
        tls_handshake_failures=[
            TlsHandshakeFailures(listener=listener, reason=reason, count=count)
            for (listener, reason), count in sorted(stats.tls_handshake_failures.items())
        ],
        adapters=adapter_statuses(gateway),
        bridges=bridge_infos(gateway),
        rules=rule_infos(gateway),
        components=component_statuses(gateway),
        rule_engine=_stats_of(gateway, "rules"),
        webhooks=_statuses_of(gateway, "webhooks"),
    )


def _stats_of(gateway: object, attribute: str) -> dict[str, int]:
    stats = getattr(getattr(gateway, attribute, None), "stats", None)
    return dict(stats()) if callable(stats) else {}


def _statuses_of(gateway: object, attribute: str) -> list[dict[str, Any]]:
    statuses = getattr(getattr(gateway, attribute, None), "statuses", None)
    return list(statuses()) if callable(statuses) else []


def component_statuses(gateway: object) -> list[InstanceStatus]:
    """Every component instance the gateway's supervisor runs (none without one)."""
    supervisor = getattr(gateway, "components", None)
    statuses = getattr(supervisor, "statuses", None)
    if not callable(statuses):
        return []
    return [InstanceStatus(**status) for status in statuses()]


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class BrokerCollector(Collector):
    """Prometheus metrics read from the broker at scrape time."""

    def __init__(self, gateway: GatewayView) -> None:
        self.gateway = gateway

    def collect(self) -> Iterator[Metric]:
        m = snapshot(self.gateway)
        info = GaugeMetricFamily(
            "edgebus_info", "edgebus version and node", labels=["node", "version"]
        )
        info.add_metric([m.node, VERSION], 1)
        yield info
        yield _gauge("edgebus_uptime_seconds", "Seconds since the broker started", m.uptime_s)
        conns = GaugeMetricFamily(
            "edgebus_connections",
            "Open client connections",
            labels=["listener", "protocol", "version"],
        )
        for count in m.connections:
            conns.add_metric([count.listener, count.protocol, count.version], count.count)
        yield conns
        yield _gauge("edgebus_clients_connected", "Clients connected now", m.clients.connected)
        yield _gauge(
            "edgebus_clients_connected_max", "The most clients connected at once", m.clients.maximum
        )
        sessions = GaugeMetricFamily("edgebus_sessions", "Sessions by state", labels=["state"])
        sessions.add_metric(["online"], m.sessions.online)
        sessions.add_metric(["offline"], m.sessions.offline)
        yield sessions
        yield _gauge("edgebus_subscriptions", "Subscriptions", m.subscriptions)
        for name, doc, values in (
            ("edgebus_messages_received", "Messages received", m.messages.received),
            ("edgebus_messages_sent", "Messages sent", m.messages.sent),
            ("edgebus_bytes_received", "Bytes received", m.bytes.received),
            ("edgebus_bytes_sent", "Bytes sent", m.bytes.sent),
        ):
            family = CounterMetricFamily(name, doc + ", by protocol", labels=["protocol"])
            for protocol, value in sorted(values.items()):
                family.add_metric([protocol], value)
            yield family
        dropped = CounterMetricFamily(
            "edgebus_messages_dropped", "Messages dropped, by reason", labels=["reason"]
        )
        for reason in DROP_REASONS:
            dropped.add_metric([reason], m.messages.dropped.get(reason, 0))
        yield dropped
        yield CounterMetricFamily(
            "edgebus_publish_denied", "Publishes refused", value=m.messages.publish_denied
        )
        yield CounterMetricFamily(
            "edgebus_shared_redelivered",
            "Messages an ended session owed through a shared subscription, sent to another member",
            value=m.messages.shared_redelivered,
        )
        queues = m.queues
        for name, doc, value in (
            ("edgebus_retained_messages", "Retained messages held", m.messages.retained),
            ("edgebus_delayed_messages", "Delayed messages waiting", m.messages.delayed),
            ("edgebus_queued_messages", "Messages queued for sessions", queues.queued_messages),
            ("edgebus_queued_messages_max", "Longest session queue", queues.queued_messages_max),
            ("edgebus_queued_bytes", "Bytes queued for sessions", queues.queued_bytes),
            ("edgebus_inflight_messages", "QoS 1/2 messages in flight", queues.inflight),
            ("edgebus_inflight_bytes", "Bytes of messages in flight", queues.inflight_bytes),
            ("edgebus_delayed_bytes", "Bytes of delayed messages", m.messages.delayed_bytes),
            ("edgebus_will_bytes", "Bytes of held wills", m.messages.will_bytes),
            (
                "edgebus_local_queued_messages",
                "Messages waiting for local subscribers",
                queues.local_queued,
            ),
            (
                "edgebus_local_queued_messages_max",
                "Longest local subscriber queue",
                queues.local_queued_max,
            ),
            (
                "edgebus_store_pending_writes",
                "Store writes not yet committed",
                m.store_pending_writes,
            ),
            (
                "edgebus_pending_connections",
                "Sockets that have not sent CONNECT yet",
                m.limits.pending_connections,
            ),
            ("edgebus_retained_bytes", "Bytes of retained messages held", m.limits.retained_bytes),
            (
                "edgebus_topic_alias_bytes",
                "Topic characters held in client topic alias tables",
                m.limits.topic_alias_bytes,
            ),
            (
                "edgebus_login_throttle_tracked",
                "User names and addresses the login throttle remembers",
                m.limits.login_throttle_tracked,
            ),
            (
                "edgebus_router_cache_entries",
                "Topics in the router's match cache",
                m.limits.router_cache_entries,
            ),
            (
                "edgebus_router_cache_bytes",
                "Estimated bytes of the router's match cache",
                m.limits.router_cache_bytes,
            ),
        ):
            yield _gauge(name, doc, value)
        limit_hits = CounterMetricFamily(
            "edgebus_limit_hits", "Times a bound was reached, by limit", labels=["limit"]
        )
        for limit, hit_count in sorted(m.limits.hits.items()):
            limit_hits.add_metric([limit], hit_count)
        yield limit_hits
        yield CounterMetricFamily(
            "edgebus_login_failures", "Failed logins", value=m.limits.login_failures
        )
        yield CounterMetricFamily(
            "edgebus_credentials_revoked",
            "Clients a reload disconnected: their password file entry was removed or changed",
            value=m.limits.credentials_revoked,
        )
        yield CounterMetricFamily(
            "edgebus_observer_errors",
            "Broker-event observers that raised",
            value=m.observer_errors,
        )
        tls_failures = CounterMetricFamily(
            "edgebus_tls_handshake_failures",
            "TLS handshakes that failed, by listener and reason",
            labels=["listener", "reason"],
        )
        for failure in m.tls_handshake_failures:
            tls_failures.add_metric([failure.listener, failure.reason], failure.count)
        yield tls_failures
        up = GaugeMetricFamily(
            "edgebus_adapter_up", "1 when the adapter runs", labels=["adapter", "type", "state"]
        )
        restarts = CounterMetricFamily(
            "edgebus_adapter_restarts", "Adapter restarts after failures", labels=["adapter"]
        )
        published = CounterMetricFamily(
            "edgebus_adapter_messages_published",
            "Messages an adapter published",
            labels=["adapter"],
        )
        dropped_by = CounterMetricFamily(
            "edgebus_adapter_messages_dropped",
            "Messages dropped from an adapter's subscription queues",
            labels=["adapter"],
        )
        depth = GaugeMetricFamily(
            "edgebus_adapter_queue_depth", "Messages waiting for an adapter", labels=["adapter"]
        )
        for adapter in m.adapters:
            name = adapter.name
            up.add_metric(
                [name, adapter.type or "", adapter.state], 1 if is_up(adapter.state) else 0
            )
            restarts.add_metric([name], adapter.restarts or 0)
            published.add_metric([name], adapter_stat(adapter, "published"))
            dropped_by.add_metric([name], adapter_stat(adapter, "dropped"))
            depth.add_metric([name], adapter_stat(adapter, "queue_depth"))
        yield from (up, restarts, published, dropped_by, depth)
        yield from _component_families(m.components)
        bridges = GaugeMetricFamily(
            "edgebus_bridge_up", "1 when the bridge runs", labels=["bridge"]
        )
        for bridge in m.bridges:
            bridges.add_metric([bridge.name], 1 if is_up(bridge.state) else 0)
        yield bridges
        hits = CounterMetricFamily("edgebus_rule_hits", "Messages a rule matched", labels=["rule"])
        for rule in m.rules:
            if rule.hits is not None:
                hits.add_metric([rule.name], rule.hits)
        yield hits
        yield from _rule_families(m)


def _rule_families(m: Metrics) -> Iterator[Metric]:
    """The rule engine's and the webhooks' counters (``edgebus_rule_*``, ``edgebus_webhook_*``)."""
    passed = CounterMetricFamily(
        "edgebus_rule_passed", "Messages that passed a rule's WHERE", labels=["rule"]
    )
    failed = CounterMetricFamily(
        "edgebus_rule_failed", "Evaluations of a rule that raised", labels=["rule"]
    )
    actions = CounterMetricFamily(
        "edgebus_rule_actions",
        "Action runs of a rule by outcome",
        labels=["rule", "action", "type", "outcome"],
    )
    for rule in m.rules:
        details = rule.details
        if isinstance(details.get("passed"), int):
            passed.add_metric([rule.name], details["passed"])
            failed.add_metric([rule.name], details.get("failed", 0))
        for index, action in enumerate(details.get("actions") or ()):
            if isinstance(action, dict):
                for outcome in ("succeeded", "failed"):
                    labels = [rule.name, str(index), str(action.get("type")), outcome]
                    actions.add_metric(labels, action.get(outcome, 0))
    yield from (passed, failed, actions)
    engine = m.rule_engine
    yield CounterMetricFamily(
        "edgebus_rule_queue_dropped",
        "Entries the full rule-engine queue dropped (oldest first)",
        value=engine.get("dropped", 0),
    )
    yield _gauge(
        "edgebus_rule_queue_depth", "Entries waiting in the rule-engine queue",
        engine.get("queue_depth", 0),
    )  # fmt: skip
    label = ["webhook"]
    families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {
        "sent": CounterMetricFamily("edgebus_webhook_sent", "Posts answered 2xx", labels=label),
        "failed": CounterMetricFamily(
            "edgebus_webhook_failed", "Posts that failed after their retries", labels=label
        ),
        "retried": CounterMetricFamily(
            "edgebus_webhook_retried", "Retries of failed posts", labels=["webhook"]
        ),
        "dropped": CounterMetricFamily(
            "edgebus_webhook_dropped", "Events the full queue dropped", labels=["webhook"]
        ),
        "queue_depth": GaugeMetricFamily(
            "edgebus_webhook_queue_depth", "Events waiting to be posted", labels=["webhook"]
        ),
    }
    for hook in m.webhooks:
        for key, family in families.items():
            family.add_metric([str(hook.get("name"))], hook.get(key, 0))
    yield from families.values()


def _component_families(components: list[InstanceStatus]) -> Iterator[Metric]:
    """The ``edgebus_component_*`` families: every kind, the same way."""
    labels = ["kind", "type", "name"]
    up = GaugeMetricFamily(
        "edgebus_component_up", "1 when the component runs", labels=[*labels, "state"]
    )
    # No reason label: the supervisor's reason is free text (a bridge's carries its
    # reconnect countdown), a new series at every scrape. The API's status has it.
    degraded = GaugeMetricFamily(
        "edgebus_component_degraded",
        "1 when the component runs degraded (the reason is in the API's component status)",
        labels=labels,
    )
    counters = {
        key: CounterMetricFamily(f"edgebus_component_{name}", doc, labels=labels)
        for key, name, doc in (
            ("restarts", "restarts", "Restarts of the component"),
            ("published", "messages_published", "Messages the component published"),
            ("denied", "messages_denied", "Publishes of the component refused"),
            ("tapped", "messages_tapped", "Messages the component's taps took"),
            ("tap_errors", "tap_errors", "Tap callbacks of the component that raised"),
        )
    }
    dropped = CounterMetricFamily(
        "edgebus_component_messages_dropped",
        "Messages dropped from the component's queues",
        labels=[*labels, "queue"],
    )
    depth = GaugeMetricFamily(
        "edgebus_component_queue_depth",
        "Messages waiting in the component's queues",
        labels=[*labels, "queue"],
    )
    own = GaugeMetricFamily(
        "edgebus_component_stat", "The component's own counters", labels=[*labels, "stat"]
    )
    for c in components:
        ident = [c.kind, c.type, c.name]
        up.add_metric([*ident, c.state], 1 if is_up(c.state) else 0)
        degraded.add_metric(ident, 1 if c.state == "degraded" else 0)
        values = {**c.stats, "restarts": c.restarts}
        for key, family in counters.items():
            family.add_metric(ident, values.get(key, 0))
        dropped.add_metric([*ident, "subscription"], c.stats.get("dropped", 0))
        dropped.add_metric([*ident, "inbox"], c.stats.get("inbox_dropped", 0))
        dropped.add_metric([*ident, "too_large"], c.stats.get("too_large", 0))
        depth.add_metric([*ident, "subscription"], c.stats.get("queue_depth", 0))
        depth.add_metric([*ident, "inbox"], c.stats.get("inbox_depth", 0))
        for stat, value in sorted(c.component_stats.items()):
            own.add_metric([*ident, stat], value)
    yield from (up, degraded, *counters.values(), dropped, depth, own)


def new_registry(gateway: GatewayView) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(gateway))
    return registry
