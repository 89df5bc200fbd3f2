"""The configuration schema: one model per section, ``GatewayConfig`` on top."""

from __future__ import annotations

from gateway.config.models.api import ApiConfig, ApiUser
from gateway.config.models.base import ConfigModel
from gateway.config.models.bridges import BridgeConfig, BridgeForward, BridgeSubscription
from gateway.config.models.gateway import GatewayConfig
from gateway.config.models.listeners import ListenerConfig, ListenerType, TlsConfig
from gateway.config.models.mqtt import MqttConfig
from gateway.config.models.rules import RuleConfig, WebhookConfig
from gateway.config.models.security import AclConfig, AclRule, AuthConfig, HttpAuthConfig
from gateway.config.models.stream import StreamConfig
from gateway.config.models.system import LoggingConfig, SysConfig

__all__ = [
    "AclConfig",
    "AclRule",
    "ApiConfig",
    "ApiUser",
    "AuthConfig",
    "BridgeConfig",
    "BridgeForward",
    "BridgeSubscription",
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
    "WebhookConfig",
]
