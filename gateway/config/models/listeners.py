"""``listeners``: the sockets MQTT clients connect to, and their TLS settings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    SecretStr,
    SerializationInfo,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)

from gateway.config.errors import FieldProblems, show_value
from gateway.config.files import checks_files, tls_file_problems
from gateway.config.models.base import (
    ConfigModel,
    doc_default,
    empty_means_none,
    show_secret,
    valid_as_written,
    with_problems,
)
from gateway.config.values import BindAddress, PathSpec

__all__ = ["ListenerConfig", "ListenerType", "TlsConfig"]

#: The transports a listener speaks.
ListenerType = Literal["tcp", "tls", "ws", "wss"]

_WEBSOCKET = ("ws", "wss")
_TLS = ("tls", "wss")


class TlsConfig(ConfigModel):
    """TLS settings of a `tls` or `wss` listener."""

    certfile: Annotated[Path, PathSpec()] = Field(
        description="PEM file with the server certificate (and its chain). Read again,"
        " with the key, CA and CRL files, on a reload (SIGHUP): a renewed certificate is"
        " served from the next handshake (docs/listeners.md)."
    )
    keyfile: Annotated[Path, PathSpec()] = Field(
        description="PEM file with the server certificate's private key."
    )
    cafile: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="PEM bundle of the CAs that client certificates are verified against.",
    )
    crlfile: Annotated[Path, PathSpec()] | None = Field(
        default=None,
        description="PEM file of certificate revocation lists (X509 CRL) client"
        " certificates are checked against (with `verify_peer`): a revoked one fails the"
        " handshake with the `certificate_revoked` alert. The CA of every client"
        " certificate needs a CRL in it, and a CRL past its next update refuses every"
        " client. Read again when the file changes, without a restart (docs/listeners.md,"
        ' "Revoking client certificates").',
    )
    verify_peer: bool = Field(
        default=False,
        description="Request a certificate from every client and verify it against"
        " `cafile` (needs `cafile`).",
    )
    fail_if_no_peer_cert: bool = Field(
        default=False,
        description="With `verify_peer`: refuse clients that present no certificate."
        " Without it, such clients fall back to username/password.",
    )
    use_identity_as_username: bool = Field(
        default=False,
        description="With `verify_peer`: the client certificate's subject CN becomes the"
        " client's username (for authentication and ACL).",
    )
    min_version: Literal["1.2", "1.3"] = Field(
        default="1.2", description="Oldest TLS version accepted."
    )
    ciphers: str | None = Field(
        default=None,
        description="OpenSSL cipher list for TLS 1.2 (TLS 1.3 suites are not configurable);"
        " null keeps Python's secure default.",
    )
    keyfile_password: SecretStr | None = Field(
        default=None,
        description="Password of an encrypted `keyfile` (empty = none); write it as"
        " `${ENV_VAR}`, not in clear.",
    )

    _empty_password_means_none = field_validator("keyfile_password", mode="before")(
        empty_means_none
    )

    @field_serializer("keyfile_password", when_used="json")
    def _secret(self, value: SecretStr | None, info: SerializationInfo) -> str | None:
        return show_secret(value, info)

    # The checks between keys run in field validators, on the keys declared before (in
    # `info.data` when valid), so that they report with the problems of other keys.

    @field_validator("verify_peer")
    @classmethod
    def _verify_with_cafile(cls, value: bool, info: ValidationInfo) -> bool:
        if value and "cafile" in info.data and info.data["cafile"] is None:
            raise ValueError("needs 'cafile' to verify client certificates")
        return value

    @field_validator("fail_if_no_peer_cert", "use_identity_as_username")
    @classmethod
    def _with_verify_peer(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("verify_peer") is False:
            raise ValueError("only works with 'verify_peer: true'")
        return value

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[tuple[str | int, ...], str]]:
        """The files, when a key that does not name them (``verify_peer``) has a problem."""
        keys = (
            "certfile",
            "keyfile",
            "cafile",
            "crlfile",
            "min_version",
            "ciphers",
            "keyfile_password",
        )
        if not checks_files(context) or failed & set(keys):
            return []
        try:
            values = {key: valid_as_written(cls, key, data, context) for key in keys}
        except ValidationError:
            return []
        password = values["keyfile_password"]
        found = tls_file_problems(
            values["certfile"],
            values["keyfile"],
            values["cafile"],
            values["min_version"],
            values["ciphers"],
            None if password is None else password.get_secret_value(),
            values["crlfile"],
        )
        return [((option,), message) for option, message in found]

    @model_validator(mode="after")
    def _files(self, info: ValidationInfo) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        # crlfile comes before verify_peer (beside cafile): judged once both are read
        if self.crlfile is not None and not self.verify_peer:
            problems.append((("crlfile",), "only works with 'verify_peer: true'"))
        if checks_files(info.context):
            password = self.keyfile_password
            found = tls_file_problems(
                self.certfile,
                self.keyfile,
                self.cafile,
                self.min_version,
                self.ciphers,
                None if password is None else password.get_secret_value(),
                self.crlfile,
            )
            problems += [((option,), message) for option, message in found]
        if problems:
            raise FieldProblems(problems)
        return self


def _default_name(data: dict[str, Any]) -> str:
    return f"{data['type']}:{data['bind']}"


def _default_path(data: dict[str, Any]) -> str | None:
    return "/mqtt" if data.get("type") in _WEBSOCKET else None


class ListenerConfig(ConfigModel):
    """One socket that MQTT clients connect to.

    Without a `listeners` key the broker listens with MQTT on 127.0.0.1:1883 and
    WebSocket on 127.0.0.1:8083 (path /mqtt); listing any listener replaces both.
    """

    type: ListenerType = Field(
        description="Transport: `tcp` (MQTT), `tls` (MQTT over TLS), `ws` (MQTT over"
        " WebSocket), `wss` (MQTT over WebSocket over TLS).",
    )
    bind: BindAddress = Field(
        description="Address to listen on, `host:port` or `[ipv6]:port`; port 0 lets the"
        " system pick a free port. Use 0.0.0.0 or [::] to accept remote clients.",
    )
    name: str = Field(
        default_factory=_default_name,
        min_length=1,
        description="Name in logs, metrics and the API; unique among listeners.",
        json_schema_extra=doc_default("`<type>:<bind>`, e.g. `tcp:127.0.0.1:1883`"),
    )
    allow_anonymous: bool = Field(
        default=True,
        description="Accept clients that send no username (and no client certificate"
        " identity) on this listener.",
    )
    max_connections: int = Field(
        default=10000,
        ge=1,
        description="Most clients connected at once on this listener, counting those that"
        " sent CONNECT; more get CONNACK 0x97 (3.1.1: return code 3).",
    )
    max_pending_connections: int = Field(
        default=256,
        ge=1,
        description="Sockets that have not sent CONNECT yet, at most, apart from"
        " `max_connections`, counted from their accept (a TLS handshake on `tls`/`wss`, a"
        " WebSocket upgrade on `ws`/`wss` under way included); a new one beyond the bound"
        " closes the oldest silent one, so idle or stalled sockets cannot keep clients out.",
    )
    connection_rate: float | None = Field(
        default=None,
        gt=0,
        description="CONNECT packets accepted per second (token bucket); more get CONNACK"
        " 0x9F (3.1.1: return code 3); null = unlimited.",
    )
    path: str | None = Field(
        default_factory=_default_path,
        description="HTTP path of the WebSocket endpoint; `ws` and `wss` only.",
        json_schema_extra=doc_default("`/mqtt` for `ws` and `wss`, else null"),
    )
    tls: TlsConfig | None = Field(
        default=None,
        description="TLS settings; required for `tls` and `wss`, not allowed for `tcp` and `ws`.",
    )

    @field_validator("name", mode="before")
    @classmethod
    def _null_name_means_default(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            # when type or bind is wrong that is the error to report, not this one
            known = "type" in info.data and "bind" in info.data
            return _default_name(info.data) if known else "?"
        return value

    @field_validator("path", mode="before")
    @classmethod
    def _null_path_means_default(cls, value: Any, info: ValidationInfo) -> Any:
        return _default_path(info.data) if value is None else value

    @field_validator("path")
    @classmethod
    def _path_for_websocket(cls, value: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("type")
        if value is None or kind is None:
            return value
        if kind not in _WEBSOCKET:
            raise ValueError(f"only allowed on ws and wss listeners, not {kind}")
        if not value.startswith("/"):
            raise ValueError(f"expected a path starting with '/', got {show_value(value)}")
        return value

    @field_validator("tls", mode="before")
    @classmethod
    def _empty_tls_is_empty(cls, value: Any, info: ValidationInfo) -> Any:
        # `tls:` with nothing under it on a tls/wss listener: report what it lacks
        # (certfile, keyfile), not that the key is missing
        return {} if value is None and info.data.get("type") in _TLS else value

    @field_validator("tls", mode="wrap")
    @classmethod
    def _tls_for_tls(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> TlsConfig | None:
        # before the section's own problems: on a tcp or ws listener its files do not matter
        kind = info.data.get("type")
        if value is not None and kind is not None and kind not in _TLS:
            other = "tls" if kind == "tcp" else "wss"
            raise ValueError(f"not allowed on a {kind} listener (did you mean type {other}?)")
        tls: TlsConfig | None = handler(value)
        return tls

    @model_validator(mode="wrap")
    @classmethod
    def _tls_required(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        kind = data.get("type") if isinstance(data, dict) else None
        missing = kind in _TLS and data.get("tls") is None and "tls" not in data
        problem: list[tuple[tuple[str | int, ...], str]] = [
            ((), f"missing required key 'tls' (a {kind} listener needs one)")
        ]
        try:
            listener = handler(data)
        except ValidationError as exc:
            raise with_problems(exc, problem if missing else []) from None
        if missing:
            raise FieldProblems(problem)
        return listener
