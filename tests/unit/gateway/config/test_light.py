"""The configuration ``edgebus run`` holds (``gateway.config.light``): validated by the
schema in a forked child, handed back as read-only views with the models' attribute
names, the same problems and the same messages as ``edgebus check``."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from broker_core.errors import ConfigError
from gateway.config import GatewayConfig, load_config, validate_config
from gateway.config.light import (
    ConfigView,
    RunConfig,
    Secret,
    same_config,
    validate_for_run,
    view_of,
)
from tests.unit.gateway.config.test_errors import BROKEN

FILE = """\
node_name: cell-7
listeners:
  - type: tcp
    bind: 127.0.0.1:0
  - type: ws
    bind: "[::1]:0"
    path: /mq
mqtt:
  max_packet_size: 256KB
  server_keep_alive: 90s
acl:
  rules:
    - {permission: allow, username: alice, ipaddress: 10.0.0.0/8, topics: ["a/#"]}
api:
  bind: 127.0.0.1:0
  keys: [abcdefghijklmnopqrstuvwxyz]
webhooks:
  - name: hook
    url: https://example.invalid/hook
    secret: s3cret-s3cret
"""


def _run_config(tmp_path: Path, text: str) -> RunConfig:
    path = tmp_path / "edgebus.yaml"
    path.write_text(text)
    return validate_for_run(path)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # data_dir and relative paths resolve here
    return tmp_path


def test_the_defaults_come_back_as_views_equal_to_the_models(in_tmp: Path) -> None:
    run = validate_for_run(None)
    model = load_config(None)
    assert isinstance(run.config, ConfigView)
    assert same_config(run.config, model)
    assert run.config.model_dump(mode="json") == model.model_dump(mode="json")
    assert run.config.listeners[1].bind == model.listeners[1].bind
    assert run.config.mqtt.max_keepalive == model.mqtt.max_keepalive
    assert run.where(("listeners", 0, "bind")) == "listeners[0].bind (default)"


def test_a_file_comes_back_with_every_value_and_its_lines(in_tmp: Path) -> None:
    run = _run_config(in_tmp, FILE)
    model = load_config(in_tmp / "edgebus.yaml")
    config = run.config
    assert isinstance(config, ConfigView)
    assert same_config(config, model)
    assert config.model_dump(mode="json") == model.model_dump(mode="json")
    assert config.node_name == "cell-7"
    assert [str(listener.bind) for listener in config.listeners] == ["127.0.0.1:0", "[::1]:0"]
    assert config.listeners[1].path == "/mq"
    assert config.mqtt.max_packet_size == 256_000
    assert config.mqtt.server_keep_alive == 90.0
    assert config.acl.rules[0].username == "alice"
    assert str(config.acl.rules[0].ipaddress) == "10.0.0.0/8"
    assert isinstance(config.webhooks[0].secret, Secret)
    assert config.webhooks[0].secret.get_secret_value() == "s3cret-s3cret"
    assert "s3cret" not in repr(config)
    assert config.api.keys[0].get_secret_value() == "abcdefghijklmnopqrstuvwxyz"
    valid = validate_config(in_tmp / "edgebus.yaml")
    for path in [("listeners", 1, "bind"), ("mqtt", "server_keep_alive"), ("sys", "interval")]:
        assert run.where(path) == valid.where(path)
    assert run.where(("listeners", 1, "bind")) == f"{in_tmp / 'edgebus.yaml'}:6 listeners[1].bind"


def test_views_are_read_only_and_copy_with_updates() -> None:
    config = view_of(load_config(None))
    with pytest.raises(AttributeError):
        config.node_name = "other"
    with pytest.raises(AttributeError, match="no field 'nod_name'"):
        _ = config.nod_name
    copied = config.model_copy(update={"node_name": "other"})
    assert copied.node_name == "other" and config.node_name != "other"
    assert copied.model_dump(mode="json")["node_name"] == "other"
    assert pickle.loads(pickle.dumps(config)) == config
    assert hash(config.listeners[0]) == hash(view_of(load_config(None)).listeners[0])


def test_same_config_compares_models_with_views() -> None:
    model = load_config(None)
    other = model.model_copy(update={"node_name": "other"})
    assert same_config(view_of(model).mqtt, model.mqtt)
    assert same_config(view_of(model).listeners, model.listeners)
    assert not same_config(view_of(model), other)


def test_rules_or_components_keep_the_models(in_tmp: Path) -> None:
    text = """\
        rules:
          - name: r
            sql: SELECT * FROM "a/#"
            actions:
              - {type: republish, topic: b}
    """
    run = _run_config(in_tmp, textwrap.dedent(text))
    assert isinstance(run.config, GatewayConfig)
    assert run.where(("rules", 0, "sql")) == f"{in_tmp / 'edgebus.yaml'}:3 rules[0].sql"


@pytest.mark.parametrize(
    ("text", "expected"), [p.values for p in BROKEN], ids=[p.id for p in BROKEN]
)
def test_the_child_reports_what_check_reports(
    in_tmp: Path, text: str, expected: list[str]
) -> None:
    path = in_tmp / "edgebus.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as checked:
        validate_config(path)
    with pytest.raises(ConfigError) as ran:
        validate_for_run(path)
    assert ran.value.problems == checked.value.problems
    assert str(ran.value) == str(checked.value)


def test_an_unreadable_file_is_reported_as_check_reports_it(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as ran:
        validate_for_run(in_tmp / "missing.yaml")
    with pytest.raises(ConfigError) as checked:
        validate_config(in_tmp / "missing.yaml")
    assert ran.value.problems == checked.value.problems
