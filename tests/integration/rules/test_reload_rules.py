"""A configuration reload (``POST /api/v1/reload``) and the rules: the reloaded ACL judges
the rules as at start, a rule disabled through the API stays disabled when the file
leaves it as it was, a bridge a rule forwards through is not removed from under it, and
the answer lists the sections that wait for a restart."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.conftest import API_CONFIG, config_file, http_of
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients, wait_until


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, API_CONFIG) as gateway:
        yield gateway


@pytest.fixture
def http(gw: RunningGateway) -> Http:
    return http_of(gw)


@pytest.fixture
def clients(gw: RunningGateway) -> Iterator[Clients]:
    factory = Clients(gw)
    try:
        yield factory
    finally:
        factory.close_all()


def _use(gw: RunningGateway, path: Path) -> None:
    gw.call(lambda: setattr(gw.gateway, "config_path", path))


def _reload(http: Http) -> dict[str, Any]:
    reply = http.post("/api/v1/reload")
    assert reply.status == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def _reloaded(http: Http) -> list[str]:
    reloaded: list[str] = _reload(http)["reloaded"]
    return reloaded


def _rule(http: Http, name: str) -> dict[str, Any]:
    reply = http.get(f"/api/v1/rules/{name}")
    assert reply.status == 200, reply.text
    found: dict[str, Any] = reply.json()
    return found


def _publish(http: Http, topic: str) -> None:
    reply = http.post("/api/v1/publish", {"topic": topic, "payload": "x", "qos": 1})
    assert reply.status == 200, reply.text


SPY = {
    "name": "spy",
    "sql": 'SELECT * FROM "secret/#"',
    "actions": [{"type": "republish", "topic": "leak/x"}],
}
#: Sees every message after the one under test: once it counted it, the rules under
#: test had their turn (a message's taps run while it is routed, in publish order).
SENTINEL = {"name": "sentinel", "sql": 'SELECT * FROM "mark/#"', "actions": [{"type": "log"}]}
DENY = {
    "default": "allow",
    "rules": [
        {"permission": "deny", "clientid": "rule:spy", "action": "subscribe",
         "topics": ["secret/#"]},
        {"permission": "deny", "clientid": "rule:spy2", "action": "subscribe",
         "topics": ["secret/#"]},
    ],
}  # fmt: skip


def _matched_after_mark(http: Http, marks: int, *names: str) -> list[int]:
    """The ``matched`` of the rules ``names`` once the sentinel counted ``marks``."""
    _publish(http, "mark/1")
    wait_until(lambda: _rule(http, "sentinel")["hits"] == marks, what="the sentinel's count")
    return [_rule(http, name)["details"]["matched"] for name in names]


def test_a_reload_judges_the_rules_against_the_new_acl_as_a_start_does(
    tmp_path: Path, gw: RunningGateway, http: Http, clients: Clients
) -> None:
    _use(gw, config_file(tmp_path, gw, rules=[SPY, SENTINEL]))
    assert _reloaded(http) == ["rule: added spy", "rule: added sentinel"]
    assert http.post("/api/v1/rules", {**SPY, "name": "spy2"}).status == 201
    watcher = clients.subscriber(5, "leak/#", qos=1)
    _publish(http, "secret/1")
    assert [watcher.expect_message().topic for _ in range(2)] == ["leak/x", "leak/x"]

    _use(gw, config_file(tmp_path, gw, rules=[SPY, SENTINEL], acl=DENY))
    answer = _reload(http)
    assert answer == {
        "reloaded": ["acl", "rule: stopped spy", "rule: stopped spy2"],
        "restart_required": [],
    }
    for name in ("spy", "spy2"):
        rule = _rule(http, name)
        assert rule["state"] == "error"
        assert rule["details"]["error"] == (
            f"rule {name!r}: the ACL denies subscribing to 'secret/#'"
        )
        assert rule["details"]["matched"] == 1  # its counters are kept
    _publish(http, "secret/2")
    assert _matched_after_mark(http, 1, "spy", "spy2") == [1, 1]  # no longer read
    watcher.expect_no_message()
    assert _reloaded(http) == []  # judged again: nothing changes

    _use(gw, config_file(tmp_path, gw, rules=[SPY, SENTINEL]))
    assert _reloaded(http) == ["acl", "rule: started spy", "rule: started spy2"]
    assert [_rule(http, n)["state"] for n in ("spy", "spy2")] == ["running", "running"]
    _publish(http, "secret/3")
    assert [watcher.expect_message().topic for _ in range(2)] == ["leak/x", "leak/x"]
    assert [_rule(http, n)["details"]["matched"] for n in ("spy", "spy2")] == [2, 2]


FR = {"name": "fr", "sql": 'SELECT * FROM "f/#"', "actions": [{"type": "log"}]}


def test_a_rule_disabled_through_the_api_stays_disabled_across_a_reload(
    tmp_path: Path, gw: RunningGateway, http: Http
) -> None:
    path = config_file(tmp_path, gw, rules=[FR, SENTINEL])
    _use(gw, path)
    assert _reloaded(http) == ["rule: added fr", "rule: added sentinel"]
    for n in range(3):
        _publish(http, f"f/{n}")
    wait_until(lambda: _rule(http, "fr")["hits"] == 3, what="3 hits")
    assert http.post("/api/v1/rules/fr/disable").json()["state"] == "disabled"

    assert _reload(http) == {"reloaded": [], "restart_required": []}
    rule = _rule(http, "fr")
    assert (rule["state"], rule["hits"], rule["details"]["enabled"]) == ("disabled", 3, False)
    _publish(http, "f/4")
    assert _matched_after_mark(http, 1, "fr") == [3]  # still not evaluated

    assert http.post("/api/v1/rules/fr/enable").json()["state"] == "running"
    assert _reloaded(http) == []
    _publish(http, "f/5")
    wait_until(lambda: _rule(http, "fr")["hits"] == 4, what="the 4th hit")

    # a rule of the file disabled there and enabled through the API: kept enabled too
    _use(gw, config_file(tmp_path, gw, rules=[{**FR, "enabled": False}, SENTINEL]))
    assert _reloaded(http) == ["rule: updated fr"]  # the file changed it: replaced
    rule = _rule(http, "fr")
    assert (rule["state"], rule["hits"]) == ("disabled", 0)
    assert http.post("/api/v1/rules/fr/enable").json()["state"] == "running"
    assert _reloaded(http) == []
    assert _rule(http, "fr")["state"] == "running"


BRIDGE = {"name": "up", "server": "127.0.0.1:1", "forwards": [{"local": "fw/#"}]}
TO_BRIDGE = {
    "name": "tobridge",
    "sql": 'SELECT * FROM "t/#"',
    "actions": [{"type": "bridge", "bridge": "up", "topic": "fw/x"}],
}


def test_a_bridge_a_rule_forwards_through_is_not_removed_from_under_it(
    tmp_path: Path, gw: RunningGateway, http: Http
) -> None:
    assert http.post("/api/v1/bridges", BRIDGE).status == 201
    assert http.post("/api/v1/rules", TO_BRIDGE).status == 201
    assert http.post("/api/v1/rules", {**TO_BRIDGE, "name": "again"}).status == 201

    reply = http.delete("/api/v1/bridges/up")
    assert reply.status == 409, (reply.status, reply.text)
    assert reply.json() == {
        "detail": "the bridge 'up' is used by rules 'tobridge', 'again': delete or change"
        " them first"
    }
    assert http.get("/api/v1/bridges/up").status == 200
    assert http.delete("/api/v1/rules/again").status == 204
    reply = http.delete("/api/v1/bridges/up")
    assert reply.status == 409, (reply.status, reply.text)
    assert reply.json() == {
        "detail": "the bridge 'up' is used by rule 'tobridge': delete or change it first"
    }

    # a reload ends the bridges added through the API, and keeps the API's rules
    path = config_file(tmp_path, gw)
    _use(gw, path)
    reply = http.post("/api/v1/reload")
    assert reply.status == 400, reply.text
    assert reply.json()["detail"]["problems"] == [
        f"{path}: rule 'tobridge' (created through the API, kept by a reload) actions[0]:"
        " no bridge named 'up' in the reloaded configuration; delete or change that rule"
        " first, or keep what it names in the file"
    ]
    assert http.get("/api/v1/bridges/up").status == 200  # nothing changed
    assert _rule(http, "tobridge")["state"] == "running"

    _use(gw, config_file(tmp_path, gw, bridges=[BRIDGE]))  # the bridge in the file
    _reload(http)
    assert http.get("/api/v1/bridges/up").status == 200
    assert http.delete("/api/v1/bridges/up").status == 409

    assert http.delete("/api/v1/rules/tobridge").status == 204
    assert http.delete("/api/v1/bridges/up").status == 204
    assert http.get("/api/v1/bridges/up").status == 404


def test_a_reload_lists_the_sections_that_wait_for_a_restart(
    tmp_path: Path, gw: RunningGateway, http: Http, caplog: pytest.LogCaptureFixture
) -> None:
    same = config_file(tmp_path, gw)
    _use(gw, same)
    assert _reload(http) == {"reloaded": [], "restart_required": []}

    changed = config_file(
        tmp_path,
        gw,
        listeners=[{"type": "tcp", "bind": "127.0.0.1:0", "max_connections": 7}],
        webhooks=[{"name": "new", "url": "http://127.0.0.1:9/x"}],
    )
    _use(gw, changed)
    with caplog.at_level(logging.INFO, logger="gateway.app"):
        expected = {"reloaded": [], "restart_required": ["listeners", "webhooks"]}
        assert _reload(http) == expected
        assert _reload(http) == expected  # true until the restart
    infos = [r.getMessage() for r in caplog.records if r.name == "gateway.app"]
    assert infos.count(
        f"configuration reloaded from {changed}: nothing changed; waiting for a restart:"
        " listeners, webhooks"
    ) == 2  # fmt: skip
    assert http.get("/api/v1/metrics").json()["webhooks"] == []  # not applied

    _use(gw, config_file(tmp_path, gw))
    assert _reload(http) == {"reloaded": [], "restart_required": []}


LOOPBACK = {
    "type": "loopback",
    "name": "lb",
    "restart_backoff": "100ms",
    "mappings": [{"source": "a/{x}", "target": "b/{x}"}],
}
DENY_COMPONENTS = {
    "default": "allow",
    "rules": [
        {"permission": "deny", "clientid": "loopback:lb", "action": "subscribe",
         "topics": ["a/#"]},
        {"permission": "deny", "clientid": "bridge:up", "action": "subscribe",
         "topics": ["fw/#"]},
    ],
}  # fmt: skip


def test_a_reload_judges_adapters_and_bridges_against_the_new_acl_as_a_start_does(
    tmp_path: Path, gw: RunningGateway, http: Http
) -> None:
    bridge = {**BRIDGE, "restart_backoff": "100ms"}
    _use(gw, config_file(tmp_path, gw, adapters=[LOOPBACK], bridges=[bridge]))
    assert _reloaded(http) == ["adapter: started lb", "bridge: started up"]
    wait_until(lambda: http.get("/api/v1/adapters/lb").json()["state"] == "running")

    _use(gw, config_file(tmp_path, gw, adapters=[LOOPBACK], bridges=[bridge],
                         acl=DENY_COMPONENTS))  # fmt: skip
    assert _reloaded(http) == ["acl", "adapter: restarted lb", "bridge: restarted up"]
    for kind, name, topic in (("adapter", "lb", "a/+"), ("bridge", "up", "fw/#")):

        def refused(kind: str = kind, name: str = name) -> dict[str, Any]:
            found: dict[str, Any] = http.get(f"/api/v1/components/{kind}/{name}").json()
            return found if found["state"] == "backing_off" else {}

        status = wait_until(refused, what=f"{kind} {name} backing off")
        protocol = "loopback" if kind == "adapter" else "bridge"
        assert status["last_error"] == (
            f"AdapterError: {protocol} {name!r}: the ACL denies subscribing to {topic!r}"
        )
    assert _reloaded(http) == []  # judged again: nothing changes

    _use(gw, config_file(tmp_path, gw, adapters=[LOOPBACK], bridges=[bridge]))
    assert _reloaded(http) == ["acl"]  # they run again at their next attempt
    wait_until(lambda: http.get("/api/v1/adapters/lb").json()["state"] == "running")
    wait_until(lambda: http.get("/api/v1/bridges/up").json()["state"] != "backing_off")
