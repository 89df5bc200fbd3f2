"""``ApiConnections``: the bounds of the API's HTTP connections and their counters.

The API shares the gateway's process, and so its file descriptors and memory, with the
MQTT listeners. Its connections are bounded like theirs:

- at most ``max_connections`` open at once (``api.max_connections``): one more is
  answered ``503`` and closed as soon as it is accepted, before anything is read from it;
- a request's line and headers must arrive within ``request_timeout_s`` of the
  connection (or of the previous response on a kept-alive one), and its body within
  ``request_timeout_s`` of its headers (``api.request_timeout``); a client too slow is
  answered ``408`` (or, having sent nothing, just closed) and its connection closed.

``gateway.api.http_protocol`` enforces them in uvicorn's protocol; this module holds no
framework, so that the gateway can build it at start-up, before FastAPI and uvicorn
are loaded. The counters are served as Prometheus metrics (``metric_families``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = ["ApiConnections", "metric_families"]


@dataclass(slots=True)
class ApiConnections:
    """The limits of ``api:`` and what the server counted against them."""

    max_connections: int
    request_timeout_s: float
    #: Connections open now (each at most ``max_connections``).
    open: int = 0
    #: Connections answered 503 at accept because ``max_connections`` were open.
    refused: int = 0
    #: Connections closed because a request's head did not arrive in time.
    head_timeouts: int = 0
    #: Connections closed because a request's body did not arrive in time.
    body_timeouts: int = 0
    #: Refusing since the last accepted connection (the warning is logged once).
    refusing: bool = False

    def full(self) -> bool:
        return self.open >= self.max_connections


def metric_families(connections: ApiConnections) -> Iterator[Metric]:
    """The ``edgebus_api_*`` Prometheus families of ``connections``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    yield GaugeMetricFamily(
        "edgebus_api_connections", "Open HTTP API connections", value=connections.open
    )
    yield GaugeMetricFamily(
        "edgebus_api_max_connections",
        "Most HTTP API connections open at once (api.max_connections)",
        value=connections.max_connections,
    )
    yield CounterMetricFamily(
        "edgebus_api_connections_refused",
        "HTTP API connections answered 503 at accept: api.max_connections were open",
        value=connections.refused,
    )
    timeouts = CounterMetricFamily(
        "edgebus_api_request_timeouts",
        "HTTP API connections closed because a request did not arrive within"
        " api.request_timeout, by the part missing",
        labels=["part"],
    )
    timeouts.add_metric(["head"], connections.head_timeouts)
    timeouts.add_metric(["body"], connections.body_timeouts)
    yield timeouts
