"""Forwards and subscriptions compiled: templates, QoS, retain, properties, AWS limits."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.mapping import Inbound, MappingError, Outbound, expiry_left, forwarded_properties
from broker_core.context import Context
from broker_core.mqtt.properties import Properties
from gateway.config.models.bridges import BridgeConfig


def _config(**kw: Any) -> BridgeConfig:
    base: dict[str, Any] = {"name": "b", "server": "127.0.0.1:1883"}
    base.update(kw)
    return BridgeConfig.model_validate(base)


def test_the_first_matching_forward_decides() -> None:
    outbound = Outbound(
        _config(
            forwards=[
                {"local": "site/{device}/{rest#}", "remote": "plants/{device}/{rest}", "qos": 1},
                {"local": "site/#", "qos": 2, "retain": True},
            ]
        )
    )
    assert outbound.filters == ["site/+/#", "site/#"]
    route = outbound.route(Context("site/d1/temp/c", b"21", 2, True))
    assert route is not None
    assert (route.topic, route.qos, route.retain, route.size) == ("plants/d1/temp/c", 1, False, 18)
    assert outbound.route(Context("other", b"", 1)) is None


def test_properties_that_travel_and_expiry() -> None:
    props = Properties(
        message_expiry_interval=10,
        content_type="a/b",
        topic_alias=3,
        subscription_identifiers=(4,),
        user_properties=(("k", "v"),),
    )
    kept = forwarded_properties(props)
    assert (kept.topic_alias, kept.subscription_identifiers) == (None, ())
    assert (kept.content_type, kept.user_properties) == ("a/b", (("k", "v"),))
    assert expiry_left(kept, 100.0, 104.5) == Properties(
        message_expiry_interval=6, content_type="a/b", user_properties=(("k", "v"),)
    )
    assert expiry_left(kept, 100.0, 110.0) is None
    assert forwarded_properties(Properties(topic_alias=1)) == Properties()


def test_aws_iot_downgrades_qos_2_and_enforces_its_limits() -> None:
    config = _config(
        type="aws_iot",
        tls={"certfile": "/c.pem", "keyfile": "/k.pem"},
        forwards=[{"local": "a/{rest#}", "remote": "dt/{rest}", "qos": 2}],
        subscriptions=[{"remote": "cmd/#", "qos": 2}],
    )
    outbound = Outbound(config)
    route = outbound.route(Context("a/b", b"x", 2))
    assert route is not None and route.qos == 1
    assert Inbound(config).requests[0][1] == 1
    with pytest.raises(MappingError, match="7 '/'"):
        outbound.route(Context("a/1/2/3/4/5/6/7/8", b"x", 1))
    with pytest.raises(MappingError, match="payloads"):
        outbound.route(Context("a/b", b"x" * (128 * 1024 + 1), 1))


def test_subscriptions_map_remote_topics_to_local_ones() -> None:
    inbound = Inbound(
        _config(
            subscriptions=[
                {"remote": "cmd/{dev}/{rest#}", "local": "local/{dev}/{rest}", "retain": True},
                {"remote": "all/#", "qos": 0, "no_local": False, "retain_handling": 2},
            ]
        )
    )
    assert inbound.requests == [("cmd/+/#", 1, True, True, 0), ("all/#", 0, False, False, 2)]
    route = inbound.route("cmd/d7/x/y", True, 1)
    assert route is not None and (route.topic, route.retain) == ("local/d7/x/y", True)
    route = inbound.route("all/z", True, 0)
    assert route is not None and (route.topic, route.retain) == ("all/z", False)
    assert inbound.route("nothing", False, 0) is None


def test_retain_asks_retain_as_published_unless_set_false() -> None:
    inbound = Inbound(
        _config(
            subscriptions=[
                {"remote": "a/#", "retain": True},
                {"remote": "b/#", "retain": True, "retain_as_published": False},
                {"remote": "c/#"},
                {"remote": "d/#", "retain_as_published": True},
            ]
        )
    )
    assert [request[3] for request in inbound.requests] == [True, False, False, True]
