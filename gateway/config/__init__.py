"""edgebus configuration: one YAML file -> typed, validated, immutable models.

    from gateway.config import load_config
    config = load_config("edgebus.yaml")      # or load_config(None) for the defaults
    config.listeners[0].bind.port

Problems raise ``ConfigError``; its ``problems`` lists every one, each naming file,
line and YAML path. ``validate_config`` also checks the files the configuration names
(certificates, password file, data directory), as ``edgebus check`` and ``run`` do.
docs/configuration.md is generated from these models by ``python -m gateway.config.docgen``.
The names below are imported on first use (PEP 562): importing the package is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.errors import ConfigError
from gateway.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from gateway.config.address import BindAddress
    from gateway.config.loader import (
        dump_config,
        load_config,
        load_config_document,
        parse_config,
        parse_model,
    )
    from gateway.config.models import (
        AclConfig,
        AclRule,
        ApiConfig,
        ApiUser,
        AuthConfig,
        BridgeConfig,
        BridgeForward,
        BridgeSubscription,
        ConfigModel,
        GatewayConfig,
        HttpAuthConfig,
        ListenerConfig,
        ListenerType,
        LoggingConfig,
        MqttConfig,
        RuleConfig,
        StreamConfig,
        SysConfig,
        TlsConfig,
        WebhookConfig,
    )
    from gateway.config.validate import ValidConfig, inactive_sections, validate_config

__all__ = [
    "AclConfig",
    "AclRule",
    "ApiConfig",
    "ApiUser",
    "AuthConfig",
    "BindAddress",
    "BridgeConfig",
    "BridgeForward",
    "BridgeSubscription",
    "ConfigError",
    "ConfigModel",
    "GatewayConfig",
    "HttpAuthConfig",
    "ListenerConfig",
    "ListenerType",
    "LoggingConfig",
    "MqttConfig",
    "RuleConfig",
    "StreamConfig",
    "SysConfig",
    "TlsConfig",
    "ValidConfig",
    "WebhookConfig",
    "dump_config",
    "inactive_sections",
    "load_config",
    "load_config_document",
    "parse_config",
    "parse_model",
    "validate_config",
]

#: Where each name lives. Importing this package imports none of them: the schema's
#: models and pydantic load on first use, and ``edgebus run`` validates in a child
#: process (``gateway.config.light``), so the running gateway never loads them.
_HOMES = {
    **{name: "gateway.config.models" for name in __all__ if name != "ConfigError"},
    "BindAddress": "gateway.config.address",
    **dict.fromkeys(
        ["dump_config", "load_config", "load_config_document", "parse_config", "parse_model"],
        "gateway.config.loader",
    ),
    **dict.fromkeys(
        ["ValidConfig", "inactive_sections", "validate_config"], "gateway.config.validate"
    ),
}
__getattr__ = lazy_getattr(globals(), _HOMES)
