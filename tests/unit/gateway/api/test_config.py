"""The ``api:`` section: defaults, validation messages, secrets in dumps."""

from __future__ import annotations

import pytest

from broker_core.errors import ConfigError
from gateway.config import BindAddress, GatewayConfig, dump_config, parse_config


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "e.yaml", env={})
    return info.value.problems


def test_defaults() -> None:
    api = GatewayConfig().api
    assert api.enabled is True
    assert api.bind == BindAddress("127.0.0.1", 8081)
    assert (api.keys, api.users, api.key_file, api.metrics_auth) == ((), (), None, True)
    assert (api.max_connections, api.request_timeout) == (64, 10.0)


def test_connection_bounds_are_checked() -> None:
    config = parse_config("api:\n  max_connections: 5\n  request_timeout: 500ms\n")
    assert (config.api.max_connections, config.api.request_timeout) == (5, 0.5)
    found = problems("api:\n  max_connections: 0\n  request_timeout: 0s\n")
    assert len(found) == 2
    assert found[0].startswith("e.yaml:2 api.max_connections:")
    assert found[1].startswith("e.yaml:3 api.request_timeout: expected a duration longer than 0s")


def test_keys_come_from_the_environment() -> None:
    config = parse_config("api:\n  keys: ['${API_KEY}']\n", env={"API_KEY": "k" * 20})
    assert [key.get_secret_value() for key in config.api.keys] == ["k" * 20]


def test_bad_keys_and_users_are_reported_with_lines() -> None:
    text = (
        "api:\n"
        "  keys:\n"
        "    - short\n"
        "    - 'with a space in the middle'\n"
        "    - 0123456789abcdef\n"
        "    - 0123456789abcdef\n"
        "  users:\n"
        "    - {username: 'a:b', password: x}\n"
        "    - {username: op, password: ''}\n"
    )
    assert problems(text) == [
        "e.yaml:3 api.keys[0]: expected a key of at least 16 characters",
        "e.yaml:4 api.keys[1]: a key must not contain white space",
        "e.yaml:6 api.keys[3]: the same key as api.keys[2]",
        "e.yaml:8 api.users[0].username: must not contain ':'"
        " (HTTP Basic separates it from the password)",
        "e.yaml:9 api.users[1].password: must not be empty",
    ]
    duplicate = (
        "api:\n  users:\n    - {username: op, password: x}\n    - {username: op, password: y}\n"
    )
    assert problems(duplicate) == [
        "e.yaml:4 api.users[1].username: duplicate user 'op' (also api.users[0])"
    ]


def test_unknown_keys_suggest_the_right_one() -> None:
    assert problems("api:\n  metric_auth: false\n") == [
        "e.yaml:2 api: unknown key 'metric_auth'; did you mean 'metrics_auth'?"
    ]


def test_secrets_are_masked_unless_dumped_as_a_file() -> None:
    text = "api:\n  keys: ['0123456789abcdef']\n  users: [{username: op, password: pw}]\n"
    config = parse_config(text, env={})
    shown = config.model_dump(mode="json")["api"]
    assert shown["keys"] == ["**********"]
    assert shown["users"] == [{"username": "op", "password": "**********"}]
    assert parse_config(dump_config(config), env={}) == config
