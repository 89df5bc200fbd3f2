"""API credentials: keys, users, the generated key file, the 401 challenge."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from broker_core.errors import ConfigError
from gateway.api.auth import (
    GENERATED_KEY_NAME,
    Credentials,
    Principal,
    build_credentials,
    challenge_headers,
    load_or_create_key,
)
from gateway.config import parse_model
from gateway.config.models.api import ApiConfig

KEY_A = "a" * 16 + "-key-a"
KEY_B = "b" * 16 + "-key-b"


def api_config(text: str) -> ApiConfig:
    return parse_model(ApiConfig, text, "api.yaml", env={})


def test_keys_and_users_are_checked() -> None:
    creds = Credentials({KEY_A: "key-0", KEY_B: "key-1"}, {"op": "pw-op"})
    assert creds.check_key(KEY_A) == Principal("key-0", "key")
    assert creds.check_key(KEY_B) == Principal("key-1", "key")
    assert creds.check_key(KEY_A[:-1]) is None
    assert creds.check_key("") is None
    assert creds.check_user("op", "pw-op") == Principal("op", "user")
    assert creds.check_user("op", "pw-op ") is None
    assert creds.check_user("nobody", "pw-op") is None
    assert creds.check_user("op", KEY_A) is None


def test_non_ascii_credentials_are_just_wrong() -> None:
    creds = Credentials({KEY_A: "key-0"}, {"op": "pässwörd"})
    assert creds.check_key("ключ-ключ-ключ-ключ") is None
    assert creds.check_user("op", "pässwörd") == Principal("op", "user")


def test_the_challenge_names_what_is_accepted() -> None:
    keys_only = Credentials({KEY_A: "key-0"}, {})
    assert challenge_headers(keys_only) == {"WWW-Authenticate": 'Bearer realm="edgebus"'}
    with_users = Credentials({}, {"op": "pw"})
    assert challenge_headers(with_users) == {
        "WWW-Authenticate": 'Bearer realm="edgebus", Basic realm="edgebus"'
    }


def test_configured_keys_are_named_by_position(tmp_path: Path) -> None:
    config = api_config(f"keys: ['{KEY_A}', '{KEY_B}']\n")
    creds = build_credentials(config, tmp_path)
    assert creds.check_key(KEY_B) == Principal("key-1", "key")
    assert not (tmp_path / "api-key").exists()


def test_users_only_generate_no_key(tmp_path: Path) -> None:
    config = api_config("users: [{username: op, password: secret}]\n")
    creds = build_credentials(config, tmp_path)
    assert creds.check_user("op", "secret") == Principal("op", "user")
    assert not (tmp_path / "api-key").exists()


def test_a_key_is_generated_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state" / "api-key"
    with caplog.at_level(logging.INFO, logger="gateway.api.credentials"):
        key = load_or_create_key(path)
        again = load_or_create_key(path)
    assert key == again
    assert len(key) >= 32
    assert path.read_text() == key + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [(r.levelname, r.message) for r in caplog.records] == [
        ("WARNING", f"API key generated, stored in {path}"),
        ("INFO", f"API key read from {path}"),
    ]


def test_the_default_key_file_is_in_the_data_dir(tmp_path: Path) -> None:
    creds = build_credentials(ApiConfig(), tmp_path)
    key = (tmp_path / "api-key").read_text().strip()
    assert creds.check_key(key) == Principal(GENERATED_KEY_NAME, "key")


def test_an_explicit_key_file(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "k"
    creds = build_credentials(api_config(f"key_file: {path}\n"), tmp_path / "data")
    assert creds.check_key(path.read_text().strip()) is not None


@pytest.mark.parametrize("content", ["", "short\n", "has white space in it somewhere\n"])
def test_an_unusable_key_file_is_a_config_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "api-key"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_or_create_key(path)
    assert str(info.value) == (
        f"api.key_file: {path} holds no usable key (at least 16 characters without"
        " white space); delete it to generate a new one"
    )


def test_a_key_file_that_cannot_be_reached(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as info:
        load_or_create_key(blocker / "api-key")
    assert str(info.value) == f"api.key_file: cannot read {blocker / 'api-key'}: Not a directory"
