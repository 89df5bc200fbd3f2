"""``auth`` and ``acl``: who may connect, and what they may publish and subscribe to."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from gateway.config.errors import FieldProblems
from gateway.config.files import checks_files, password_file_problems
from gateway.config.models.base import ConfigModel
from gateway.config.values import DurationSpec, HttpUrlSpec, NetworkSpec, PathSpec, TopicFilterSpec

__all__ = ["AclConfig", "AclRule", "AuthConfig", "HttpAuthConfig", "LoginThrottleConfig"]


class HttpAuthConfig(ConfigModel):
    """Authentication by an HTTP service that is asked about connecting clients."""

    url: Annotated[str, HttpUrlSpec()] = Field(description="The service's URL.")
    method: Literal["POST", "GET"] = Field(
        default="POST",
        description="HTTP method of the request (case-insensitive).",
    )
    timeout: Annotated[float, DurationSpec(gt=0)] = Field(
        default=5.0, description="How long to wait for the service's answer."
    )
    cache_ttl: Annotated[float, DurationSpec()] = Field(
        default=60.0,
        description="How long an answer is reused for the same credentials; 0 disables the cache.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description='Extra request headers, e.g. `Authorization: "Bearer ${AUTH_TOKEN}"`.',
    )

    @field_validator("method", mode="before")
    @classmethod
    def _method_upper(cls, value: Any) -> Any:
        if isinstance(value, str) and value.upper() in ("POST", "GET"):
            return value.upper()
        return value


class LoginThrottleConfig(ConfigModel):
    """Throttling of failed logins, per user name and per source address: after
    `free_failures` failures each further attempt waits before its password is checked,
    `delay` doubling per failure up to `max_delay`; an attempt that would wait past the
    connect timeout is refused at once with 0x9F (3.1.1: return code 3)."""

    enabled: bool = Field(default=True, description="Throttle failed logins.")
    free_failures: int = Field(
        default=5, ge=0, description="Failed logins of a user name or address before the delay."
    )
    delay: Annotated[float, DurationSpec(gt=0)] = Field(
        default=1.0, description="The first delay; it doubles with each further failure."
    )
    max_delay: Annotated[float, DurationSpec(gt=0)] = Field(
        default=60.0, description="The longest delay; at least `delay`."
    )
    forget_after: Annotated[float, DurationSpec(gt=0)] = Field(
        default=600.0,
        description="Failures are forgotten this long after the last one of a user name or"
        " address (a successful login forgets its user name's at once).",
    )
    max_tracked: int = Field(
        default=10000,
        ge=1,
        description="User names and addresses remembered at most; the least recently failed"
        " are forgotten first.",
    )


class AuthConfig(ConfigModel):
    """Authentication of clients that present credentials; clients without any are
    governed by each listener's `allow_anonymous`."""

    password_file: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="File of `user:$pbkdf2-sha256$...` lines, written by `edgebus passwd`;"
        " a file written by `mosquitto_passwd` (`$6$`, `$7$` hashes) works too.",
    )
    http: HttpAuthConfig | None = Field(
        default=None,
        description="Ask an HTTP service about clients; null = no HTTP authentication.",
    )
    scram: bool = Field(
        default=True,
        description="Offer MQTT 5 enhanced authentication (SCRAM-SHA-256) against the"
        " users of `password_file`.",
    )
    login_throttle: LoginThrottleConfig = Field(
        default_factory=LoginThrottleConfig,
        description="Throttling of failed logins (password guessing).",
    )

    @field_validator("password_file")
    @classmethod
    def _readable_users(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and checks_files(info.context):
            problems = password_file_problems(value)
            if problems:
                raise FieldProblems(((), problem) for problem in problems)
        return value


class AclRule(ConfigModel):
    """One ACL rule. It applies to a client when every given condition (`username`,
    `clientid`, `ipaddress`) matches, and to a topic when one of `topics` matches."""

    permission: Literal["allow", "deny"] = Field(
        description="What the rule decides when it matches."
    )
    action: Literal["publish", "subscribe", "all"] = Field(
        default="all", description="The operation the rule applies to."
    )
    username: str | None = Field(
        default=None, description="Only clients with this username; null = any."
    )
    clientid: str | None = Field(
        default=None, description="Only clients with this client id; null = any."
    )
    ipaddress: Annotated[IPv4Network | IPv6Network, NetworkSpec()] | None = Field(
        default=None,
        description="Only clients connecting from this network (`10.0.0.0/8`) or address;"
        " null = any.",
    )
    topics: tuple[Annotated[str, TopicFilterSpec()], ...] = Field(
        min_length=1,
        description="Topic filters the rule covers. `%u` stands for the client's username"
        " and `%c` for its client id; `eq <filter>` matches that filter literally"
        " (`eq #` matches a subscription to `#`, not every topic).",
    )


class AclConfig(ConfigModel):
    """Topic access control: rules are tried in order and the first match decides."""

    default: Literal["allow", "deny"] = Field(
        default="allow", description="The decision when no rule matches."
    )
    deny_action: Literal["ignore", "disconnect"] = Field(
        default="ignore",
        description="What follows a denied publish or subscribe: `ignore` refuses the"
        " operation only, `disconnect` also disconnects the client.",
    )
    rules: tuple[AclRule, ...] = Field(default=(), description="The rules, first match wins.")
