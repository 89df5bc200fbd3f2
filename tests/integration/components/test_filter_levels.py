"""Component filters deeper than ``mqtt.max_topic_levels`` are configuration errors.

A client's SUBSCRIBE deeper than the bound gets SUBACK 0x8F; the filters components
subscribe to (adapter mappings, bridge forwards, a bridge subscription's local topics,
rule FROM filters, the stream log's topics) went into the same tries unchecked. Now they
are refused where every other configuration problem is, naming file, line and YAML path:
``edgebus check``, ``edgebus run`` (starts nothing), a reload (also against the running
broker's bound, since ``mqtt`` changes take a restart), and the API that creates
components (``/rules``, ``/bridges``: 422 naming the field). At run time a hub client's
subscription deeper than the bound is refused too (limit ``topic_levels``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from broker_core.errors import AdapterError
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.conftest import API_CONFIG, config_file, http_of
from tests.interop.mosquitto.tools import run_edgebus

LEVELS = 8  # mqtt.max_topic_levels in these files


def deep(first: str, levels: int) -> str:
    """A topic of ``levels`` levels: ``first`` and ``x`` ones."""
    return first + "/x" * (levels - 1)


def _sections(levels: int) -> dict[str, Any]:
    """A configuration whose every component filter has ``levels`` levels."""
    return {
        "persistence": "memory",
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
        "api": {"enabled": False},
        "mqtt": {"max_topic_levels": LEVELS},
        "adapters": [
            {
                "type": "loopback",
                "name": "echo",
                "mappings": [
                    {"source": "in/{x}", "target": "out/{x}"},
                    {"source": deep("a", levels - 1) + "/{rest#}", "target": "out/{rest}"},
                ],
            }
        ],
        "bridges": [
            {
                "name": "cloud",
                "server": "127.0.0.1:1",
                "forwards": [{"local": "ok/#"}, {"local": "$share/g/" + deep("b", levels)}],
                "subscriptions": [
                    {"remote": deep("c", levels)},  # no local: its topics land here as they are
                    {"remote": deep("c", levels + 5), "local": "in/c"},  # remote only: fine
                    {"remote": "d/#", "local": deep("d", levels)},
                    {"remote": deep("e", levels) + "/#"},  # a trailing # may match no level
                ],
            }
        ],
        "rules": [
            {
                "name": "r",
                "sql": f'SELECT * FROM "{deep("f", levels)}", "$events/client_connected"',
                "actions": [{"type": "log", "level": "debug"}],
            }
        ],
        "stream": {"enabled": True, "topics": [deep("g", levels)]},
    }


#: (YAML path, what the message names) of every filter _sections(LEVELS + 1) refuses.
REFUSED = [
    ("adapters[0].mappings[1].source", "the filter"),
    ("bridges[0].forwards[1].local", "the filter '$share/g/b/"),
    ("bridges[0].subscriptions[0].remote", "the remote filter"),
    ("bridges[0].subscriptions[2].local", "the local topic template"),
    ("bridges[0].subscriptions[3].remote", "the remote filter (with no `local`, its messages"),
    ("rules[0].sql", "the FROM filter 'f/"),
    ("stream.topics[0]", "the filter 'g/"),
]


def _assert_refused(lines: list[str], config: Path) -> None:
    assert len(lines) == len(REFUSED), lines
    for line, (path, what) in zip(lines, REFUSED, strict=True):
        prefix, _, message = line.partition(f" {path}: ")
        assert message, (path, line)
        filename, _, number = prefix.rpartition(":")
        assert filename == str(config), line
        assert int(number) > 0, line
        assert message.startswith(what), line
        assert message.endswith(f"levels, more than mqtt.max_topic_levels ({LEVELS})"), line
        assert f"has {LEVELS + 1} levels" in message, line


def test_edgebus_check_and_run_refuse_deeper_component_filters(tmp_path: Path) -> None:
    config = tmp_path / "edgebus.yaml"
    config.write_text(yaml.safe_dump(_sections(LEVELS)))
    done = run_edgebus(tmp_path, "check", str(config))
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"{config}: OK", ""), (
        done.stderr
    )

    config.write_text(yaml.safe_dump(_sections(LEVELS + 1)))
    done = run_edgebus(tmp_path, "check", str(config))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    _assert_refused(lines, config)
    # The line is the key's: the rule's FROM is on the line of rules[0].sql.
    written = config.read_text().splitlines()
    [rule_line] = [line for line in lines if " rules[0].sql: " in line]
    number = int(rule_line.partition(" ")[0].rpartition(":")[2])
    assert written[number - 1].lstrip().startswith("sql: "), written[number - 1]

    run = run_edgebus(tmp_path, "run", "-c", str(config))
    assert run.returncode == 2, run.stderr
    assert [line for line in run.stderr.splitlines() if "max_topic_levels" in line] == lines
    assert not (tmp_path / "edgebus-data").exists()  # nothing started


def test_a_lower_max_topic_levels_refuses_filters_it_allowed(tmp_path: Path) -> None:
    config = tmp_path / "edgebus.yaml"
    sections = _sections(LEVELS)
    sections["mqtt"] = {"max_topic_levels": LEVELS - 1}
    config.write_text(yaml.safe_dump(sections))
    done = run_edgebus(tmp_path, "check", str(config))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == len(REFUSED)
    assert f"more than mqtt.max_topic_levels ({LEVELS - 1})" in done.stderr


@pytest.fixture
def gw(tmp_path: Path) -> Any:
    with running_gateway(tmp_path, API_CONFIG + f"mqtt:\n  max_topic_levels: {LEVELS}\n") as g:
        yield g


def _rule(sql_from: str) -> dict[str, Any]:
    return {
        "name": "deep",
        "sql": f'SELECT * FROM "{sql_from}"',
        "actions": [{"type": "log", "level": "debug"}],
    }


def test_the_rules_api_refuses_a_deeper_from_filter(gw: RunningGateway) -> None:
    http = http_of(gw)
    reply = http.post("/api/v1/rules", _rule(deep("r", LEVELS + 1)))
    assert reply.status == 422, reply.text
    [problem] = reply.json()["detail"]
    assert problem["loc"] == ["body", "sql"]
    assert problem["msg"].startswith("the FROM filter 'r/x/")
    assert problem["msg"].endswith(
        f"has {LEVELS + 1} levels, more than mqtt.max_topic_levels ({LEVELS})"
    )
    assert http.get("/api/v1/rules").json() == []
    reply = http.post("/api/v1/rules", _rule(deep("r", LEVELS)))
    assert reply.status == 201, reply.text
    reply = http.request("PUT", "/api/v1/rules/deep", _rule("$share/g/" + deep("r", LEVELS + 1)))
    assert reply.status == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == ["body", "sql"]
    assert (
        http.get("/api/v1/rules/deep").json()["details"]["sql"].endswith(f'"{deep("r", LEVELS)}"')
    )


def test_the_bridges_api_refuses_a_deeper_local_filter(gw: RunningGateway) -> None:
    http = http_of(gw)
    entry: dict[str, Any] = {
        "name": "cloud",
        "server": "127.0.0.1:1",
        "forwards": [{"local": "ok/#"}, {"local": deep("b", LEVELS + 1)}],
    }
    reply = http.post("/api/v1/bridges", entry)
    assert reply.status == 422, reply.text
    [line] = reply.json()["detail"]
    assert line.startswith("forwards[1].local: the filter 'b/x/")
    assert line.endswith(f"more than mqtt.max_topic_levels ({LEVELS})")
    assert http.get("/api/v1/bridges").json() == []
    entry["forwards"] = [{"local": "ok/#"}]
    assert http.post("/api/v1/bridges", entry).status == 201
    entry["subscriptions"] = [{"remote": deep("s", LEVELS + 1)}]
    reply = http.request("PUT", "/api/v1/bridges/cloud", entry)
    assert reply.status == 422, reply.text
    [line] = reply.json()["detail"]
    assert line.startswith("subscriptions[0].remote: the remote filter")


def _refused(http: Any) -> list[str]:
    reply = http.post("/api/v1/reload")
    assert reply.status == 400, reply.text
    problems: list[str] = reply.json()["detail"]["problems"]
    return problems


def test_a_reload_refuses_deeper_filters(tmp_path: Path, gw: RunningGateway) -> None:
    http = http_of(gw)
    rule = _rule(deep("r", LEVELS + 1))
    path = config_file(tmp_path, gw, mqtt={"max_topic_levels": LEVELS}, rules=[rule])
    gw.call(lambda: setattr(gw.gateway, "config_path", path))
    [problem] = _refused(http)
    assert problem.startswith(f"{path}:")
    assert " rules[0].sql: the FROM filter 'r/x/" in problem
    # The file raising the bound is no way around it: mqtt takes effect at a restart,
    # and until then the running broker's bound holds.
    path = config_file(tmp_path, gw, mqtt={"max_topic_levels": LEVELS + 1}, rules=[rule])
    [problem] = _refused(http)
    assert " rules[0].sql: the FROM filter 'r/x/" in problem
    assert problem.endswith(
        f"more than mqtt.max_topic_levels ({LEVELS}) in this running gateway"
        " (the mqtt section takes effect at the next restart)"
    )
    assert http.get("/api/v1/rules").json() == []
    path = config_file(tmp_path, gw, mqtt={"max_topic_levels": LEVELS}, rules=[_rule("r/x")])
    reply = http.post("/api/v1/reload")
    assert reply.status == 200, reply.text
    assert "rule: added deep" in reply.json()["reloaded"]


def test_a_hub_subscription_deeper_than_the_bound_is_refused(gw: RunningGateway) -> None:
    # Filters no configuration names (a ZeroMQ subscriber's, on demand) meet the bound
    # where components subscribe.
    hub = gw.call(lambda: gw.gateway.hub.client("zmq", "deep"))
    with pytest.raises(AdapterError, match=rf"more than mqtt.max_topic_levels \({LEVELS}\)"):
        gw.call(lambda: hub.subscribe(deep("z", LEVELS + 1)))
    with pytest.raises(AdapterError, match="max_topic_levels"):
        gw.call(lambda: hub.subscribe("$share/g/" + deep("z", LEVELS + 1)))
    assert gw.call(lambda: gw.broker.counters.limit_hits.get("topic_levels", 0)) == 2
    subscription = gw.call(lambda: hub.subscribe(deep("z", LEVELS)))
    assert subscription.filters == [deep("z", LEVELS)]


SOMEIP = {
    "persistence": "memory",
    "listeners": [],
    "api": {"enabled": False},
    "mqtt": {"max_topic_levels": 6},
    "adapters": [
        {
            "type": "someip",
            "name": "car",
            "daemon": {"interface": "127.0.0.1"},
            "response_topic": "r/a/b/c/d/e/f",
            "offer": [
                {
                    "service_id": 0x2000,
                    "instance_id": 1,
                    "eventgroups": [1],
                    "events": [{"id": 0x8001, "from_mqtt": "x/{service:04x}/a/b/c/d/e"}],
                }
            ],
        }
    ],
}


def test_topics_an_adapter_subscribes_to_by_name_are_checked_too(tmp_path: Path) -> None:
    # from_mqtt (MQTT to native) and response_topic (replies) are subscribed to, topic
    # templates here (SOME/IP's are rendered with numbers: a level each).
    config = tmp_path / "edgebus.yaml"
    config.write_text(yaml.safe_dump(SOMEIP))
    done = run_edgebus(tmp_path, "check", str(config))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert sorted(line.split(" ", 2)[1] for line in lines) == [
        "adapters[0].offer[0].events[0].from_mqtt:",
        "adapters[0].response_topic:",
    ], lines
    assert all("has 7 levels, more than mqtt.max_topic_levels (6)" in line for line in lines)
    config.write_text(yaml.safe_dump({**SOMEIP, "mqtt": {"max_topic_levels": 7}}))
    done = run_edgebus(tmp_path, "check", str(config))
    assert done.returncode == 0, done.stderr
