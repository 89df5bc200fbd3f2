"""gateway.security: what the ``auth:`` and ``acl:`` sections build, and ``reload``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker_core.acl import DENY_DISCONNECT, DENY_IGNORE, PUBLISH, SUBSCRIBE, RuleAcl
from broker_core.auth_file import PasswordFileProvider
from broker_core.auth_http import HttpAuthProvider
from broker_core.auth_scram import ScramAuthenticator
from broker_core.broker import Broker
from broker_core.context import Origin
from broker_core.errors import ConfigError
from gateway.app import Gateway
from gateway.config import GatewayConfig, parse_config
from gateway.config.models.security import AclConfig
from gateway.security import build_security
from tests.integration.security.support import password_file

ALICE = Origin("mqtt", "c1", "10.0.0.1:1", "alice")


def config(text: str) -> GatewayConfig:
    return parse_config(text, "security-test.yaml")


def test_nothing_configured_is_the_listener_policy() -> None:
    security = build_security(config(""))
    assert security.authenticator.providers == ()
    assert security.authenticator.methods == {}
    assert security.acl is None  # default allow without rules: no ACL on the publish path
    assert security.deny_action == DENY_IGNORE


def test_everything_configured(tmp_path: Path) -> None:
    users = password_file(tmp_path / "passwd", {"alice": "a"})
    security = build_security(
        config(
            f"""
auth:
  password_file: {users}
  http: {{url: "http://127.0.0.1:9/auth", method: get, timeout: 2s, cache_ttl: 5m}}
acl:
  default: deny
  deny_action: disconnect
  rules:
    - permission: allow
      action: publish
      username: alice
      ipaddress: 10.0.0.0/8
      topics: ["a/%u/#", "eq b/#"]
"""
        )
    )
    first, second = security.authenticator.providers
    assert isinstance(first, PasswordFileProvider)
    assert isinstance(second, HttpAuthProvider)
    assert (second.method, second.timeout_s, second.cache_ttl_s) == ("GET", 2.0, 300.0)
    assert isinstance(security.authenticator.methods["SCRAM-SHA-256"], ScramAuthenticator)
    assert security.deny_action == DENY_DISCONNECT
    acl = security.acl
    assert isinstance(acl, RuleAcl)
    assert acl.allows(ALICE, PUBLISH, "a/alice/x") is True
    assert acl.allows(ALICE, PUBLISH, "b/#") is True
    assert acl.allows(ALICE, SUBSCRIBE, "a/alice/x") is False
    assert acl.allows(Origin("mqtt", "c1", "192.168.0.1:1", "alice"), PUBLISH, "a/alice/x") is False
    asyncio.run(security.aclose())


def test_scram_can_be_switched_off(tmp_path: Path) -> None:
    users = password_file(tmp_path / "passwd", {"alice": "a"})
    security = build_security(config(f"auth: {{password_file: {users}, scram: false}}"))
    assert security.authenticator.methods == {}


def test_missing_password_file_stops_the_gateway(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        Gateway(config(f"auth: {{password_file: {tmp_path / 'nope'}}}"))


def test_reload(tmp_path: Path) -> None:
    path = password_file(tmp_path / "passwd", {"alice": "a"})
    security = build_security(config(f"auth: {{password_file: {path}}}\nacl: {{default: deny}}"))
    broker = Broker()
    security.install(broker)
    assert broker.authenticator is security.authenticator
    assert broker.acl is security.acl
    assert security.passwords is not None
    password_file(path, {"alice": "a", "bob": "b"})
    security.reload()
    assert len(security.passwords) == 2
    # a new acl section replaces the rules in the broker
    security.reload(
        AclConfig.model_validate(
            {
                "default": "deny",
                "deny_action": "disconnect",
                "rules": [{"permission": "allow", "topics": ["x"]}],
            }
        )
    )
    assert broker.acl is security.acl
    assert broker.acl_deny_action == DENY_DISCONNECT
    assert broker.acl is not None
    assert broker.acl.allows(ALICE, PUBLISH, "x") is True
    path.write_text("broken\n")
    with pytest.raises(ConfigError):
        security.reload()
    assert len(security.passwords) == 2  # the old users stay


def test_docs_examples_are_valid_configuration() -> None:
    text = (Path(__file__).parents[3] / "docs" / "security.md").read_text()
    blocks = [block.split("```", 1)[0] for block in text.split("```yaml\n")[1:]]
    assert len(blocks) >= 5
    for number, block in enumerate(blocks, 1):
        parse_config(block, f"docs/security.md yaml block {number}", env={"AUTH_TOKEN": "t"})
