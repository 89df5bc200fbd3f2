"""The API's credentials, without the web framework: API keys and users from the
``api:`` section, or a generated key (``load_or_create_key``).

With neither keys nor users configured, ``load_or_create_key`` reads the key kept in
``api.key_file`` (default ``<data_dir>/api-key``), creating it with a random key and
mode 0600 on first start. The gateway builds them at start-up, so that a problem with
the key file shows before anything starts, while FastAPI is loaded only when the API
gets its first connection (``gateway.api.server``).
"""

from __future__ import annotations

import base64
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker_core.errors import ConfigError
from gateway.config.api_keys import default_key_file, key_problem

if TYPE_CHECKING:
    from gateway.config.models.api import ApiConfig

__all__ = [
    "GENERATED_KEY_NAME",
    "REALM",
    "Credentials",
    "Principal",
    "build_credentials",
    "default_key_file",
    "load_or_create_key",
]

log = logging.getLogger(__name__)

GENERATED_KEY_NAME = "generated-key"
REALM = "edgebus"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who made a request: ``name`` is ``key-<n>``, ``generated-key`` or a username."""

    name: str
    kind: str  # "key" or "user"


class Credentials:
    """The keys and users the API accepts."""

    def __init__(self, keys: dict[str, str], users: dict[str, str]) -> None:
        self._keys = [(key.encode(), name) for key, name in keys.items()]
        self._users = {name: password.encode() for name, password in users.items()}
        self._dummy = os.urandom(32)

    @property
    def accepts_users(self) -> bool:
        return bool(self._users)

    def check_key(self, key: str) -> Principal | None:
        import hmac  # with hashlib, OpenSSL's digests: loaded by the API's first request

        given = key.encode()
        found: str | None = None
        for expected, name in self._keys:
            if hmac.compare_digest(given, expected) and found is None:
                found = name
        return None if found is None else Principal(found, "key")

    def check_user(self, username: str, password: str) -> Principal | None:
        import hmac  # OpenSSL's digests, with the API's first request

        expected = self._users.get(username)
        # Compare against something even for an unknown user: no timing hint.
        ok = hmac.compare_digest(password.encode(), expected or self._dummy)
        return Principal(username, "user") if ok and expected is not None else None


def load_or_create_key(path: Path) -> str:
    """The key kept in ``path``; a new random one (written with mode 0600) when missing.

    Raises ``ConfigError`` when the file cannot be read or written, or holds no usable key.
    """
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ConfigError(f"api.key_file: cannot read {path}: {exc.strerror or exc}") from exc
    else:
        problem = key_problem(text)
        if problem is not None:
            raise ConfigError(f"api.key_file: {path} {problem}")
        log.info("API key read from %s", path)
        return text
    key = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(key + "\n")
    except OSError as exc:
        raise ConfigError(f"api.key_file: cannot create {path}: {exc.strerror or exc}") from exc
    log.warning("API key generated, stored in %s", path)
    return key


def build_credentials(config: ApiConfig, data_dir: Path) -> Credentials:
    """The credentials of ``config``; generates or reads the key file when it has none."""
    keys = {key.get_secret_value(): f"key-{index}" for index, key in enumerate(config.keys)}
    users = {user.username: user.password.get_secret_value() for user in config.users}
    if not keys and not users:
        path = config.key_file or default_key_file(data_dir)
        keys = {load_or_create_key(path): GENERATED_KEY_NAME}
    return Credentials(keys, users)
