"""``POST /api/v1/reload`` checks the file as ``edgebus check`` does (the password file
included), refuses a rule naming a webhook the gateway does not run, logs a refusal at
ERROR, and reports only what changed."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker_core.passwords import MIN_ITERATIONS, hash_password, write_password_file
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.conftest import API_CONFIG, config_file, http_of
from tests.integration.api.support import Http


def _use(gw: RunningGateway, path: Path) -> None:
    gw.call(lambda: setattr(gw.gateway, "config_path", path))


def _write_users(path: Path, *names: str) -> None:
    write_password_file(path, {name: hash_password("pw", MIN_ITERATIONS) for name in names})


def _refused(http: Http) -> list[str]:
    reply = http.post("/api/v1/reload")
    assert reply.status == 400, reply.text
    detail = reply.json()["detail"]
    assert detail["message"] == "the configuration was not reloaded"
    problems: list[str] = detail["problems"]
    return problems


def _reloaded(http: Http) -> list[str]:
    reply = http.post("/api/v1/reload")
    assert reply.status == 200, reply.text
    reloaded: list[str] = reply.json()["reloaded"]
    return reloaded


def test_a_refused_reload_is_logged_at_error(
    tmp_path: Path, gw: RunningGateway, http: Http, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("acl:\n  default: maybe\n")
    _use(gw, path)
    with caplog.at_level(logging.INFO):
        problem = f"{path}:2 acl.default: expected one of allow, deny, got 'maybe'"
        assert _refused(http) == [problem]
    errors = [(r.name, r.getMessage()) for r in caplog.records if r.levelno == logging.ERROR]
    assert ("gateway.app", f"reload refused: {problem}") in errors
    assert ("gateway.api.routes.admin", "reload requested through the API by key-0 refused") in (
        errors
    )


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "passwd"
    _write_users(path, "alice")
    return path


@pytest.fixture
def gw_users(tmp_path: Path, users: Path) -> Any:
    with running_gateway(tmp_path, API_CONFIG + f"auth: {{password_file: {users}}}\n") as gw:
        yield gw


def test_a_broken_password_file_is_refused_as_check_refuses_it(
    tmp_path: Path, gw_users: RunningGateway, users: Path
) -> None:
    http = http_of(gw_users)
    missing = tmp_path / "missing.txt"
    _use(gw_users, config_file(tmp_path, gw_users, auth={"password_file": str(missing)}))
    [problem] = _refused(http)
    assert "auth.password_file" in problem
    assert "cannot read the password file" in problem

    bad = tmp_path / "bad.txt"
    bad.write_text("no-colon-here\n")
    _use(gw_users, config_file(tmp_path, gw_users, auth={"password_file": str(bad)}))
    [problem] = _refused(http)
    assert problem.endswith(f"auth.password_file: {bad}:1: expected user:hash")

    users.write_text("alice\n")  # the running file itself broken: refused too
    _use(gw_users, config_file(tmp_path, gw_users, auth={"password_file": str(users)}))
    [problem] = _refused(http)
    assert problem.endswith(f"auth.password_file: {users}:1: expected user:hash")


def test_a_reload_reports_only_what_changed(
    tmp_path: Path, gw_users: RunningGateway, users: Path
) -> None:
    http = http_of(gw_users)
    auth = {"password_file": str(users)}
    _use(gw_users, config_file(tmp_path, gw_users, auth=auth))
    assert _reloaded(http) == []
    assert _reloaded(http) == []

    _write_users(users, "alice", "bob")
    assert _reloaded(http) == ["password_file"]
    assert _reloaded(http) == []

    acl = yaml.safe_load("{default: deny, rules: []}")
    _use(gw_users, config_file(tmp_path, gw_users, auth=auth, acl=acl))
    assert _reloaded(http) == ["acl"]
    assert _reloaded(http) == []


WEBHOOK_RULE = {
    "name": "r2",
    "sql": 'SELECT 1 AS one FROM "a/#"',
    "actions": [{"type": "webhook", "webhook": "w"}],
}


def test_a_rule_naming_a_webhook_the_gateway_does_not_run_is_refused(
    tmp_path: Path, gw: RunningGateway, http: Http
) -> None:
    path = config_file(
        tmp_path,
        gw,
        webhooks=[{"name": "w", "url": "http://127.0.0.1:9/x"}],
        rules=[WEBHOOK_RULE],
    )
    _use(gw, path)
    [problem] = _refused(http)
    lines = [text.strip() for text in path.read_text().splitlines()]
    line = lines.index("webhook: w") + 1
    assert problem == (
        f"{path}:{line} rules[0].actions[0].webhook: no webhook named 'w' in this running"
        " gateway (the webhooks section takes effect at the next restart)"
    )
    assert http.get("/api/v1/rules").json() == []
    # POST /rules refuses the same rule
    reply = http.post("/api/v1/rules", WEBHOOK_RULE)
    assert (reply.status, reply.json()) == (400, {"detail": "no webhook named 'w'"})


def test_a_rule_naming_a_running_webhook_is_added(tmp_path: Path) -> None:
    hook = "webhooks: [{name: w, url: 'http://127.0.0.1:9/x'}]\n"
    with running_gateway(tmp_path, API_CONFIG + hook) as gw:
        http = http_of(gw)
        webhooks = [{"name": "w", "url": "http://127.0.0.1:9/x"}]
        _use(gw, config_file(tmp_path, gw, webhooks=webhooks, rules=[WEBHOOK_RULE]))
        assert _reloaded(http) == ["rule: added r2"]
        assert [rule["name"] for rule in http.get("/api/v1/rules").json()] == ["r2"]


LOOPBACK = {
    "type": "loopback",
    "name": "second",
    "mappings": [{"source": "x/{a}", "target": "y/{a}"}],
}


def test_a_reload_names_a_disabled_component_disabled(tmp_path: Path, gw: RunningGateway) -> None:
    """An adapter added, or changed, with ``enabled: false`` is reported so, not as
    ``started``/``restarted`` (it is stopped); enabled again, it is ``started``."""
    http = http_of(gw)
    disabled = {**LOOPBACK, "enabled": False}
    _use(gw, config_file(tmp_path, gw, adapters=[disabled]))
    assert _reloaded(http) == ["adapter: added second (disabled)"]
    assert http.get("/api/v1/adapters/second").json()["state"] == "stopped"
    _use(gw, config_file(tmp_path, gw, adapters=[{**disabled, "restart_backoff": "2s"}]))
    assert _reloaded(http) == ["adapter: changed second (disabled)"]
    _use(gw, config_file(tmp_path, gw, adapters=[LOOPBACK]))
    assert _reloaded(http) == ["adapter: started second"]
    _use(gw, config_file(tmp_path, gw, adapters=[disabled]))
    assert _reloaded(http) == ["adapter: stopped second (disabled)"]
