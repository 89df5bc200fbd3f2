"""edgebus configuration: one YAML file -> typed, validated, immutable models.

    from gateway.config import load_config
    config = load_config("edgebus.yaml")      # or load_config(None) for the defaults
    config.listeners[0].bind.port

Problems raise ``ConfigError``; its ``problems`` lists every one, each naming file,
line and YAML path. ``validate_config`` also checks the files the configuration names
(certificates, password file, data directory), as ``edgebus check`` and ``run`` do.
docs/configuration.md is generated from these models by ``python -m gateway.config.docgen``.
"""

from __future__ import annotations

from broker_core.errors import ConfigError
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
from gateway.config.values import BindAddress

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
