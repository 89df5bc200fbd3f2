"""A long flat chain (``a AND b AND ...`` of thousands of terms, no nesting) is a rule
like any other, through every way a rule comes in: ``POST /api/v1/rules`` and
``/rules/test``, ``POST /api/v1/reload``, ``edgebus check`` and a ``SIGHUP`` reload
(it made the compiler recurse once per term: a plain-text 500, a RecursionError
traceback from ``check``, "Exception in callback" on SIGHUP). Nesting stays bounded."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.rules.parser import MAX_DEPTH
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.helpers.json_log import entries, wait_logged
from tests.helpers.timeouts import unit
from tests.integration.api.conftest import API_CONFIG, config_file, http_of
from tests.integration.api.support import Http
from tests.integration.broker.support import wait_until
from tests.interop.mosquitto.tools import EdgebusProcess, run_edgebus

TERMS = 2000  # four times the chain that made the compiler recurse too deep
#: Every term true for a QoS 1 message: 2,000 comparisons ANDed.
ANDS = 'SELECT topic FROM "long/#" WHERE ' + " AND ".join(["qos = 1"] * TERMS)
#: Only the last term true for ``{"n": 1999}``: 2,000 comparisons ORed, read from the
#: payload (the generated code reads the row).
ORS = 'SELECT payload.n AS n FROM "long/#" WHERE ' + " OR ".join(
    f"payload.n = {n}" for n in range(TERMS)
)
#: A chain of arithmetic and ``||``, folded as the nested operators give it.
SUMS = "SELECT " + " + ".join(["1"] * TERMS) + ' AS total FROM "long/#"'


def _rule(name: str, sql: str) -> dict[str, Any]:
    return {"name": name, "sql": sql, "actions": [{"type": "log", "level": "debug"}]}


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path, API_CONFIG) as gateway:
        yield gateway


def _details(http: Http, name: str) -> dict[str, Any]:
    reply = http.get(f"/api/v1/rules/{name}")
    assert reply.status == 200, reply.text
    details: dict[str, Any] = reply.json()["details"]
    return details


def test_a_long_flat_chain_is_a_rule_through_the_api(gw: RunningGateway) -> None:
    http = http_of(gw)
    for name, sql in (("ands", ANDS), ("ors", ORS), ("sums", SUMS)):
        reply = http.post("/api/v1/rules", _rule(name, sql))
        assert reply.status == 201, reply.text[:300]
        assert reply.json()["state"] == "running"
    reply = http.post("/api/v1/publish", {"topic": "long/1", "payload": '{"n": 1999}', "qos": 1})
    assert reply.status == 200, reply.text
    for name in ("ands", "ors", "sums"):

        def passed(name: str = name) -> bool:
            return bool(_details(http, name)["passed"] == 1)

        wait_until(passed, what=f"{name} passed")
        assert _details(http, name)["failed"] == 0

    tests = [
        (ANDS, {"topic": "long/1", "qos": 1}, {"topic": "long/1"}),
        (ORS, {"topic": "long/1", "payload": {"n": 1999}}, {"n": 1999}),
        (SUMS, {"topic": "long/1"}, {"total": TERMS}),
    ]
    for sql, sample, output in tests:
        reply = http.post("/api/v1/rules/test", {"sql": sql, "sample": sample})
        assert reply.status == 200, reply.text[:300]
        assert reply.json() == {"matched": True, "output": output, "reason": None, "error": None}


def test_nesting_stays_bounded(gw: RunningGateway) -> None:
    http = http_of(gw)
    deep = "(" * (MAX_DEPTH + 1) + "qos = 1" + ")" * (MAX_DEPTH + 1)
    reply = http.post("/api/v1/rules", _rule("deep", f'SELECT * FROM "t" WHERE {deep}'))
    assert reply.status == 422, reply.text
    assert f"expressions nested deeper than {MAX_DEPTH}" in reply.text
    fits = "(" * (MAX_DEPTH - 1) + "qos = 1" + ")" * (MAX_DEPTH - 1)
    reply = http.post("/api/v1/rules", _rule("fits", f'SELECT * FROM "t" WHERE {fits}'))
    assert reply.status == 201, reply.text


def test_a_long_flat_chain_in_the_file_is_reloaded(tmp_path: Path, gw: RunningGateway) -> None:
    http = http_of(gw)
    path = config_file(tmp_path, gw, rules=[_rule("ands", ANDS), _rule("ors", ORS)])
    gw.call(lambda: setattr(gw.gateway, "config_path", path))
    reply = http.post("/api/v1/reload")
    assert (reply.status, reply.json()) == (
        200,
        {"reloaded": ["rule: added ands", "rule: added ors"], "restart_required": []},
    )


def _check(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return run_edgebus(tmp_path, "check", str(config))


def test_edgebus_check_accepts_a_long_flat_chain(tmp_path: Path) -> None:
    config = tmp_path / "edgebus.yaml"
    sections = {
        "listeners": [{"type": "tcp", "bind": "127.0.0.1:0"}],
        "api": {"enabled": False},
        "rules": [_rule("ands", ANDS), _rule("ors", ORS), _rule("sums", SUMS)],
    }
    config.write_text(yaml.safe_dump(sections))
    done = _check(tmp_path, config)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"{config}: OK", "")

    sections["rules"] = [_rule("bad", ANDS + " AND")]  # still a clear problem
    config.write_text(yaml.safe_dump(sections))
    done = _check(tmp_path, config)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"{config}:")
    assert " rules[0].sql: expected a value, a field or a function, got the end" in line


def test_sighup_reloads_a_long_flat_chain(tmp_path: Path) -> None:
    log = tmp_path / "gw.log"
    logging = f"api:\n  enabled: false\nlogging: {{format: json, file: {log}}}\n"
    with EdgebusProcess(tmp_path, logging) as gw:
        rules = yaml.safe_dump({"rules": [_rule("ands", ANDS), _rule("ors", ORS)]})
        gw.config.write_text(gw.config.read_text() + rules)
        assert gw.process is not None
        gw.process.send_signal(signal.SIGHUP)
        [entry] = wait_logged(log, "configuration reloaded", timeout=unit(20))
        assert entry["message"].endswith(": rule: added ands, rule: added ors")
        assert [e for e in entries(log) if e["level"] == "ERROR"] == []
        assert gw.signal_and_wait(signal.SIGTERM) == 0
    assert gw.stderr_path.read_text() == ""  # no traceback, everything in the log file
