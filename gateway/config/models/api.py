"""``api``: the HTTP management API and the Prometheus ``/metrics`` endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, SerializationInfo, field_serializer, field_validator

from gateway.config.api_keys import MIN_KEY_LENGTH, default_key_file, key_problem
from gateway.config.errors import FieldProblems
from gateway.config.models.base import ConfigModel, doc_default, show_secret
from gateway.config.values import BindAddress, DurationSpec, PathSpec

__all__ = ["MIN_KEY_LENGTH", "ApiConfig", "ApiUser", "default_key_file", "key_problem"]


class ApiUser(ConfigModel):
    """A user of the API, logging in with HTTP Basic authentication."""

    username: str = Field(
        min_length=1, description="The user name (no `:`); it names the user in logs."
    )
    password: SecretStr = Field(
        description="The user's password; write it as `${ENV_VAR}`, not in clear."
    )

    @field_validator("username")
    @classmethod
    def _no_colon(cls, value: str) -> str:
        if ":" in value:
            raise ValueError("must not contain ':' (HTTP Basic separates it from the password)")
        return value

    @field_validator("password")
    @classmethod
    def _not_empty(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value():
            raise ValueError("must not be empty")
        return value

    @field_serializer("password", when_used="json")
    def _secret(self, value: SecretStr, info: SerializationInfo) -> str | None:
        return show_secret(value, info)


class ApiConfig(ConfigModel):
    """The HTTP management API (`/api/v1/...`) and Prometheus metrics (`/metrics`).

    Authentication is always on: a request presents one of `keys` (as
    `Authorization: Bearer <key>` or `X-API-Key: <key>`) or a user's name and password
    (HTTP Basic). With neither `keys` nor `users`, a key is generated on first start
    and stored in `key_file`; docs/api.md describes every endpoint.
    """

    enabled: bool = Field(default=True, description="Serve the API; false = no HTTP port.")
    bind: BindAddress = Field(
        default=BindAddress("127.0.0.1", 8081),
        description="Address of the HTTP server, `host:port`; port 0 lets the system pick"
        " a free port. Use 0.0.0.0 or [::] to accept remote requests.",
    )
    keys: tuple[SecretStr, ...] = Field(
        default=(),
        description=f"API keys, at least {MIN_KEY_LENGTH} characters each; write them as"
        " `${ENV_VAR}`. The n-th key (from 0) acts as `key-<n>` in logs and as the"
        " origin of what it publishes.",
    )
    users: tuple[ApiUser, ...] = Field(
        default=(), description="Users who log in with HTTP Basic authentication."
    )
    key_file: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="Where the generated key is kept when neither `keys` nor `users` is"
        " set: created (mode 0600) with a random key on first start, read on later ones.",
        json_schema_extra=doc_default("`<data_dir>/api-key`"),
    )
    metrics_auth: bool = Field(
        default=True,
        description="`/metrics` (Prometheus) requires the same credentials as the API;"
        " false serves it to anyone who can reach `bind`.",
    )
    max_connections: int = Field(
        default=64,
        ge=1,
        description="Most HTTP connections open at once, idle kept-alive ones included;"
        " one more is answered 503 and closed as soon as it is accepted, unread"
        " (`edgebus_api_connections_refused_total`). The API shares the gateway's file"
        " descriptors and memory with the MQTT listeners.",
    )
    request_timeout: Annotated[float, DurationSpec(gt=0, le=3600)] = Field(
        default=10.0,
        description="Time for a request's line and headers to arrive (from the"
        " connection, or from the previous response), and again for its body (from the"
        " headers); a client slower than that is answered 408 and its connection closed"
        " (`edgebus_api_request_timeouts_total`).",
    )

    @field_validator("keys")
    @classmethod
    def _usable_keys(cls, keys: tuple[SecretStr, ...]) -> tuple[SecretStr, ...]:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        seen: dict[str, int] = {}
        for index, key in enumerate(keys):
            text = key.get_secret_value()
            if len(text) < MIN_KEY_LENGTH:
                problems.append(
                    ((index,), f"expected a key of at least {MIN_KEY_LENGTH} characters")
                )
            elif text != text.strip() or any(char.isspace() for char in text):
                problems.append(((index,), "a key must not contain white space"))
            first = seen.setdefault(text, index)
            if first != index:
                problems.append(((index,), f"the same key as api.keys[{first}]"))
        if problems:
            raise FieldProblems(problems)
        return keys

    @field_validator("users")
    @classmethod
    def _distinct_users(cls, users: tuple[ApiUser, ...]) -> tuple[ApiUser, ...]:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        seen: dict[str, int] = {}
        for index, user in enumerate(users):
            first = seen.setdefault(user.username, index)
            if first != index:
                problems.append(
                    (
                        (index, "username"),
                        f"duplicate user {user.username!r} (also api.users[{first}])",
                    )
                )
        if problems:
            raise FieldProblems(problems)
        return users

    @field_serializer("keys", when_used="json")
    def _secrets(self, value: tuple[SecretStr, ...], info: SerializationInfo) -> list[Any]:
        return [show_secret(key, info) for key in value]
