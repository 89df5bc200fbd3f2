"""A hub subscription changes its filters while it runs (``add`` / ``remove``): a
message matching several filters arrives once, retained messages of an added filter
arrive, the ACL applies to added filters, and removed filters stop delivering."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.context import Context, Origin
from broker_core.errors import AdapterError
from gateway.hub import HubClient, HubSubscription
from tests.helpers.gateway import RunningGateway, running_gateway

ACL = """
acl:
  rules:
    - {permission: deny, action: subscribe, clientid: "zmq:fan", topics: ["secret/#"]}
"""


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, ACL) as gateway:
        yield gateway


def _publish(gw: RunningGateway, topic: str, retain: bool = False) -> None:
    source = Context(topic, topic.encode(), 1, retain, origin=Origin("api", "test"))
    gw.call(lambda: gw.broker.publish(source))


def _drain(gw: RunningGateway, sub: HubSubscription) -> list[str]:
    local = sub._local

    def take() -> list[str]:
        out = []
        while (ctx := local.get_nowait()) is not None:
            out.append(ctx.topic)
        return out

    return gw.call(take)


def test_filters_change_while_the_subscription_runs(gw: RunningGateway) -> None:
    client: HubClient = gw.call(lambda: gw.gateway.hub.client("zmq", "fan"))
    sub: HubSubscription = gw.call(lambda: client.subscribe(qos=1))
    assert sub.filters == []
    _publish(gw, "robots/r1/pose", retain=True)
    _publish(gw, "robots/r2/pose")
    assert _drain(gw, sub) == []

    gw.call(lambda: sub.add("robots/r1/#", "robots/+/pose"))
    assert sub.filters == ["robots/r1/#", "robots/+/pose"]
    assert _drain(gw, sub) == ["robots/r1/pose", "robots/r1/pose"]  # retained, per filter
    _publish(gw, "robots/r1/pose")
    _publish(gw, "robots/r2/pose")
    assert _drain(gw, sub) == ["robots/r1/pose", "robots/r2/pose"]  # each once

    gw.call(lambda: sub.add("robots/r1/#"))  # already there: nothing changes
    assert sub.filters == ["robots/r1/#", "robots/+/pose"]
    gw.call(lambda: sub.remove("robots/+/pose", "never/subscribed"))
    _publish(gw, "robots/r2/pose")
    _publish(gw, "robots/r1/x")
    assert _drain(gw, sub) == ["robots/r1/x"]

    with pytest.raises(AdapterError):
        gw.call(lambda: sub.add("secret/plans"))
    assert sub.filters == ["robots/r1/#"]
    gw.call(sub.close)
    gw.call(lambda: sub.add("robots/#"))  # a closed subscription stays closed
    _publish(gw, "robots/r1/x")
    assert _drain(gw, sub) == []
