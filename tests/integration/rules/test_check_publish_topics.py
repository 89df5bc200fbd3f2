"""``edgebus check`` refuses a topic template the gateway would publish to that the
broker refuses of any topic name (``topic_name_problem``): a rule's republish (also
bridge and stream) action topic and a loopback mapping's ``target`` starting ``$share/``
(the form of a shared subscription), wildcards, NUL. Each is named by file, line and YAML
path; before, ``$share/`` ones passed the check and failed on every message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.interop.mosquitto.tools import run_edgebus


def _config(republish: str, target: str) -> dict[str, Any]:
    return {
        "persistence": "memory",
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
        "api": {"enabled": False},
        "adapters": [
            {
                "type": "loopback",
                "name": "echo",
                "mappings": [{"source": "in/{x}", "target": target}],
            }
        ],
        "rules": [
            {
                "name": "r",
                "sql": "SELECT * FROM 'a/#'",
                "actions": [{"type": "republish", "topic": republish}],
            }
        ],
    }


def _check(tmp_path: Path, config: dict[str, Any]) -> tuple[int, list[str]]:
    path = tmp_path / "edgebus.yaml"
    path.write_text(yaml.safe_dump(config))
    done = run_edgebus(tmp_path, "check", str(path))
    return done.returncode, done.stderr.strip().splitlines()


def test_share_topics_are_refused_with_their_yaml_path(tmp_path: Path) -> None:
    assert _check(tmp_path, _config("b/{clientid}", "out/{x}")) == (0, [])

    code, lines = _check(tmp_path, _config("$share/g/{clientid}", "$share/g/out/{x}"))
    assert code == 2, lines
    for path, topic in (
        ("rules[0].actions[0].topic", "$share/g/{clientid}"),
        ("adapters[0].mappings[0].target", "$share/g/out/{x}"),
    ):
        [line] = [line for line in lines if f" {path}" in line]
        assert "must not start with $share/" in line, line
        assert topic in line, line

    code, lines = _check(tmp_path, _config("b/+", "out/\0/{x}"))
    assert code == 2, lines
    assert any(" rules[0].actions[0].topic" in line and "'+'" in line for line in lines), lines
    assert any(" adapters[0].mappings[0].target" in line and "NUL" in line for line in lines)


def test_a_bridge_subscription_local_share_topic_is_refused(tmp_path: Path) -> None:
    """A bridge brings remote messages in under ``subscriptions[].local``: a ``$share/``
    template there was refused on every message at run time (one WARNING each)."""
    config: dict[str, Any] = {
        "persistence": "memory",
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
        "api": {"enabled": False},
        "bridges": [
            {
                "name": "cloud",
                "server": "127.0.0.1:1883",
                "subscriptions": [{"remote": "in/#", "local": "$share/g/{topic}"}],
            }
        ],
    }
    code, lines = _check(tmp_path, config)
    assert code == 2, lines
    [line] = [line for line in lines if " bridges[0].subscriptions[0].local" in line]
    assert "must not start with $share/" in line, line
