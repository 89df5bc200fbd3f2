"""Every endpoint with and without credentials; the key generated on first start."""

from __future__ import annotations

import base64
import logging
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.errors import ConfigError
from tests.helpers.gateway import RunningGateway, running_gateway
from tests.integration.api.conftest import API_CONFIG, http_of
from tests.integration.api.support import (
    KEY,
    PASSWORD,
    USER,
    Headers,
    Http,
    api_key,
    basic,
    bearer,
)

# (method, path, body, status with good credentials), one row per operation of the API.
_RULE = {"name": "nothing", "sql": 'SELECT * FROM "a"', "actions": [{"type": "log"}]}

ENDPOINTS: list[tuple[str, str, Any, int]] = [
    ("GET", "/api/v1/health", None, 200),
    ("GET", "/api/v1/brokers", None, 200),
    ("GET", "/api/v1/clients", None, 200),
    ("GET", "/api/v1/clients/nobody", None, 404),
    ("DELETE", "/api/v1/clients/nobody", None, 404),
    ("GET", "/api/v1/subscriptions", None, 200),
    ("GET", "/api/v1/topics", None, 200),
    ("GET", "/api/v1/retained", None, 200),
    ("GET", "/api/v1/retained/no/such/topic", None, 404),
    ("DELETE", "/api/v1/retained/no/such/topic", None, 404),
    ("POST", "/api/v1/publish", {"topic": "auth/test", "payload": "x"}, 200),
    ("POST", "/api/v1/publish/batch", [{"topic": "auth/test", "payload": "x"}], 200),
    ("GET", "/api/v1/adapters", None, 200),
    ("GET", "/api/v1/adapters/nothing", None, 404),
    ("POST", "/api/v1/adapters/nothing/restart", None, 404),
    ("GET", "/api/v1/components", None, 200),
    ("GET", "/api/v1/components/adapter/nothing", None, 404),
    ("POST", "/api/v1/components/adapter/nothing/restart", None, 404),
    ("POST", "/api/v1/components/adapter/nothing/pause", None, 404),
    ("POST", "/api/v1/components/adapter/nothing/resume", None, 404),
    ("GET", "/api/v1/bridges", None, 200),
    ("POST", "/api/v1/bridges", {"name": "invalid"}, 422),
    ("GET", "/api/v1/bridges/nothing", None, 404),
    ("PUT", "/api/v1/bridges/nothing", {"name": "nothing"}, 404),
    ("DELETE", "/api/v1/bridges/nothing", None, 404),
    ("POST", "/api/v1/bridges/nothing/pause", None, 404),
    ("POST", "/api/v1/bridges/nothing/resume", None, 404),
    ("GET", "/api/v1/rules", None, 200),
    ("GET", "/api/v1/rules/nothing", None, 404),
    ("POST", "/api/v1/rules", {}, 422),
    ("PUT", "/api/v1/rules/nothing", _RULE, 404),
    ("POST", "/api/v1/rules/nothing/enable", None, 404),
    ("POST", "/api/v1/rules/nothing/disable", None, 404),
    ("DELETE", "/api/v1/rules/nothing", None, 404),
    ("POST", "/api/v1/rules/test", {"sql": 'SELECT * FROM "a"'}, 200),
    ("GET", "/api/v1/stream/offsets", None, 404),  # stream.enabled is false here
    ("GET", "/api/v1/stream/records", None, 404),
    ("GET", "/api/v1/metrics", None, 200),
    ("GET", "/api/v1/config", None, 200),
    ("POST", "/api/v1/reload", None, 200),
    ("GET", "/api/v1/openapi.json", None, 200),
    ("GET", "/metrics", None, 200),
]

GOOD: dict[str, Headers] = {
    "bearer": bearer(KEY),
    "x-api-key": api_key(KEY),
    "basic": basic(USER, PASSWORD),
}
BAD: dict[str, Headers | None] = {
    "none": None,
    "wrong-bearer": bearer(KEY + "x"),
    "wrong-x-api-key": api_key("not-the-key-at-all"),
    "wrong-password": basic(USER, PASSWORD + "x"),
    "unknown-user": basic("intruder", PASSWORD),
    "key-as-password": basic(USER, KEY),
    "other-scheme": {"Authorization": f"Token {KEY}"},
    # malformed Basic credentials: the same answer as wrong ones
    "basic-not-base64": {"Authorization": "Basic !!!notbase64"},
    "basic-without-colon": {"Authorization": "Basic " + base64.b64encode(b"operator").decode()},
    "basic-not-ascii": {"Authorization": "Basic " + base64.b64encode(b"\xff:\xfe").decode()},
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    with running_gateway(tmp_path_factory.mktemp("auth"), API_CONFIG) as gateway:
        yield gateway


def _id(row: tuple[str, str, Any, int]) -> str:
    return f"{row[0]} {row[1]}"


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=_id)
@pytest.mark.parametrize("how", list(BAD))
def test_without_good_credentials_every_endpoint_is_401(
    shared: RunningGateway, endpoint: tuple[str, str, Any, int], how: str
) -> None:
    method, path, body, _ = endpoint
    reply = http_of(shared).request(method, path, body, auth=BAD[how])
    assert reply.status == 401
    assert reply.json() == {"detail": "missing or wrong credentials"}
    challenge = reply.headers["www-authenticate"]
    assert challenge == 'Bearer realm="edgebus", Basic realm="edgebus"'


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=_id)
@pytest.mark.parametrize("how", list(GOOD))
def test_with_credentials_every_endpoint_answers(
    shared: RunningGateway, endpoint: tuple[str, str, Any, int], how: str
) -> None:
    method, path, body, expected = endpoint
    reply = http_of(shared).request(method, path, body, auth=GOOD[how])
    assert reply.status == expected


def test_the_table_covers_every_operation_of_the_description(shared: RunningGateway) -> None:
    description = http_of(shared).get("/api/v1/openapi.json").json()
    described = {
        (method.upper(), path)
        for path, operations in description["paths"].items()
        for method in operations
    }
    tested = {(method, _template(path)) for method, path, _, _ in ENDPOINTS}
    assert described | {("GET", "/api/v1/openapi.json")} == tested


def _template(path: str) -> str:
    templates: tuple[tuple[str, str | Callable[[str], str]], ...] = (
        (r"^/api/v1/clients/.+$", "/api/v1/clients/{clientid}"),
        (r"^/api/v1/retained/.+$", "/api/v1/retained/{topic}"),
        (r"^/api/v1/adapters/[^/]+/restart$", "/api/v1/adapters/{name}/restart"),
        (r"^/api/v1/adapters/[^/]+$", "/api/v1/adapters/{name}"),
        (r"^/api/v1/components/[^/]+/[^/]+$", "/api/v1/components/{kind}/{name}"),
        (r"^/api/v1/rules/(?!test$)[^/]+$", "/api/v1/rules/{name}"),
        (
            r"^/api/v1/rules/[^/]+/(enable|disable)$",
            lambda path: "/api/v1/rules/{name}/" + path.rsplit("/", 1)[1],
        ),
        (
            r"^/api/v1/components/[^/]+/[^/]+/(restart|pause|resume)$",
            lambda path: "/api/v1/components/{kind}/{name}/" + path.rsplit("/", 1)[1],
        ),
        (r"^/api/v1/bridges/[^/]+$", "/api/v1/bridges/{name}"),
        (
            r"^/api/v1/bridges/[^/]+/(pause|resume)$",
            lambda path: "/api/v1/bridges/{name}/" + path.rsplit("/", 1)[1],
        ),
    )
    for pattern, name in templates:
        if re.match(pattern, path):
            return name if isinstance(name, str) else name(path)
    return path


def test_the_publisher_is_named_after_the_credentials(shared: RunningGateway) -> None:
    http = http_of(shared)
    for auth, name in ((bearer(KEY), "key-0"), (basic(USER, PASSWORD), USER)):
        reply = http.post(
            "/api/v1/publish", {"topic": "who/am/i", "payload": "x", "retain": True}, auth=auth
        )
        assert reply.status == 200
        origin = http.get("/api/v1/retained/who/am/i").json()["origin"]
        assert origin == {"protocol": "api", "name": name}


def test_metrics_without_auth_when_configured(tmp_path: Path) -> None:
    config = API_CONFIG + "  metrics_auth: false\n"
    with running_gateway(tmp_path, config) as gw:
        http = http_of(gw)
        reply = http.get("/metrics", auth=None)
        assert reply.status == 200
        assert reply.headers["content-type"].startswith("text/plain")
        assert "edgebus_uptime_seconds" in reply.text
        assert http.get("/api/v1/metrics", auth=None).status == 401


def test_a_key_is_generated_on_first_start_and_reused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key_file = tmp_path / "data" / "api-key"
    with caplog.at_level(logging.INFO, logger="gateway.api.credentials"):
        with running_gateway(tmp_path) as gw:
            key = key_file.read_text().strip()
            assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
            assert len(key) >= 32
            http = Http(http_of(gw).base)
            assert http.get("/api/v1/health", auth=bearer(key)).status == 200
            assert http.get("/api/v1/health", auth=None).status == 401
            # Without users the challenge offers bearer tokens only.
            challenge = http.get("/api/v1/health", auth=None).headers["www-authenticate"]
            assert challenge == 'Bearer realm="edgebus"'
        generated = [r for r in caplog.records if r.message.startswith("API key generated")]
        assert [(r.levelno, r.message) for r in generated] == [
            (logging.WARNING, f"API key generated, stored in {key_file}")
        ]
        caplog.clear()
        with running_gateway(tmp_path) as gw:
            assert key_file.read_text().strip() == key
            http = Http(http_of(gw).base)
            assert http.get("/api/v1/health", auth=api_key(key)).status == 200
        messages = [r.message for r in caplog.records if r.name == "gateway.api.credentials"]
        assert messages == [f"API key read from {key_file}"]


def test_the_key_file_can_be_placed(tmp_path: Path) -> None:
    key_file = tmp_path / "secrets" / "edgebus.key"
    with running_gateway(tmp_path, f"api:\n  key_file: {key_file}\n"):
        assert key_file.exists()
    assert not (tmp_path / "data" / "api-key").exists()


def test_configured_keys_generate_nothing(tmp_path: Path) -> None:
    with running_gateway(tmp_path, API_CONFIG):
        pass
    assert not (tmp_path / "data" / "api-key").exists()


def test_a_broken_key_file_stops_the_start(tmp_path: Path) -> None:
    key_file = tmp_path / "data" / "api-key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text("short\n")
    with pytest.raises(ConfigError) as info, running_gateway(tmp_path):
        pass
    assert str(info.value) == (
        f"api.key_file: {key_file} holds no usable key (at least 16 characters without"
        " white space); delete it to generate a new one"
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/publish"),
        ("POST", "/api/v1/publish/batch"),
        ("POST", "/api/v1/bridges"),
        ("PUT", "/api/v1/bridges/b1"),
        ("POST", "/api/v1/rules"),
    ],
)
def test_credentials_are_checked_before_the_body(http: Http, method: str, path: str) -> None:
    """A body that is not JSON fails before FastAPI's dependencies run: without (or with
    wrong) credentials it is still 401, not a 422 echoing it; with them, 422."""
    bad = b'{"topic": "x", oops'
    json_type = {"Content-Type": "application/json"}
    for auth in (None, bearer("wrong-key-0123456789abcdef")):
        reply = http.request(method, path, raw=bad, auth=auth, headers=json_type)
        assert (reply.status, reply.json()) == (401, {"detail": "missing or wrong credentials"})
        assert reply.headers["www-authenticate"].startswith('Bearer realm="edgebus"')
    reply = http.request(method, path, raw=bad, headers=json_type)
    assert reply.status == 422
    assert reply.json()["detail"][0]["type"] == "json_invalid"
