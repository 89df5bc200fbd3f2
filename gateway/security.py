"""The broker's authenticator and ACL, built from the ``auth:`` and ``acl:`` sections.

``build_security(config)`` returns a ``Security``: the ``AuthChain`` (SCRAM-SHA-256 for
MQTT 5 enhanced authentication when ``auth.scram`` and a password file are set, then
certificate identity, the password file, the HTTP service, and each listener's
``allow_anonymous``; see ``broker_core.auth``), the ``RuleAcl`` (None when there is
nothing to check: no rules and default allow) and the deny action. ``install(broker)``
puts them in the broker, with a ``LoginThrottle`` (``auth.login_throttle``);
``reload()`` re-reads the password file and disconnects the clients whose entry it
removed or changed (``broker_core.auth_file.disconnect_revoked``), forgets cached HTTP
answers and ACL decisions, and with a new ``acl:`` section installs its rules;
``aclose()`` ends re-authentications in progress and closes the HTTP client.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker_core.acl import DENY_DISCONNECT, DENY_IGNORE, PUBLISH, SUBSCRIBE, AclRule, RuleAcl
from broker_core.auth import AuthChain, CredentialProvider, EnhancedAuthMethod
from broker_core.broker import Broker
from broker_core.errors import ConfigError
from broker_core.login_throttle import LoginThrottle, ThrottleSettings

if TYPE_CHECKING:
    from broker_core.auth_http import HttpAuthProvider
    from broker_core.passwords import PasswordFile
    from gateway.config import GatewayConfig
    from gateway.config.models.security import AclConfig

__all__ = ["Security", "acl_rules", "build_acl", "build_security"]

log = logging.getLogger(__name__)

_ACTIONS = {
    "publish": frozenset({PUBLISH}),
    "subscribe": frozenset({SUBSCRIBE}),
    "all": frozenset({PUBLISH, SUBSCRIBE}),
}


@dataclass
class Security:
    authenticator: AuthChain
    acl: RuleAcl | None
    deny_action: str
    passwords: PasswordFile | None = None
    http: HttpAuthProvider | None = None
    throttle: ThrottleSettings | None = None  # None: failed logins are not throttled
    #: Clients disconnected by reloads because their password file entry was removed or
    #: changed (``edgebus_credentials_revoked_total``).
    revoked_disconnects: int = 0
    _brokers: list[Broker] = field(default_factory=list, repr=False)

    def install(self, broker: Broker) -> None:
        """Sets the broker's ``authenticator``, ``acl`` and ``acl_deny_action``."""
        broker.authenticator = self.authenticator
        broker.acl = self.acl
        broker.acl_deny_action = self.deny_action
        if broker not in self._brokers:
            broker.login_throttle = (
                None
                if self.throttle is None
                else LoginThrottle(self.throttle, on_throttled=broker.counters.hit)
            )
            self._brokers.append(broker)

    def reload(self, acl: AclConfig | None = None) -> None:
        """Re-reads the password file (ConfigError when it is broken; the old users stay,
        and so do their clients) and disconnects the clients whose entry it removed or
        changed (``disconnect_revoked``), forgets cached HTTP answers and ACL decisions;
        ``acl`` replaces the rules."""
        if self.passwords is not None:
            self.passwords.reload()
            self._disconnect_revoked(self.passwords)
        if self.http is not None:
            self.http.clear_cache()
        if acl is not None:
            self.acl = build_acl(acl)
            self.deny_action = DENY_DISCONNECT if acl.deny_action == "disconnect" else DENY_IGNORE
            for broker in self._brokers:
                self.install(broker)
        elif self.acl is not None:
            self.acl.reload(self.acl.rules, self.acl.default_allow)

    def _disconnect_revoked(self, passwords: PasswordFile) -> None:
        from broker_core.auth_file import disconnect_revoked

        count = sum(disconnect_revoked(broker.sessions, passwords) for broker in self._brokers)
        self.revoked_disconnects += count
        log.info(
            "password file %s reloaded: %d client(s) disconnected, their entry removed or"
            " changed",
            passwords.path,
            count,
        )

    async def aclose(self) -> None:
        """Ends re-authentications in progress and closes the HTTP client (shutdown)."""
        for broker in self._brokers:
            broker.auth_exchanges.cancel()
        if self.http is not None:
            await self.http.aclose()


def acl_rules(config: AclConfig) -> tuple[AclRule, ...]:
    return tuple(
        AclRule(
            allow=rule.permission == "allow",
            topics=tuple(rule.topics),
            actions=_ACTIONS[rule.action],
            username=rule.username,
            clientid=rule.clientid,
            network=rule.ipaddress,
        )
        for rule in config.rules
    )


def build_acl(config: AclConfig) -> RuleAcl | None:
    if not config.rules and config.default == "allow":
        return None  # nothing to check: keep the publish path free of ACL lookups
    return RuleAcl(acl_rules(config), default_allow=config.default == "allow")


def build_security(config: GatewayConfig) -> Security:
    """Raises ConfigError when the password file is missing or malformed, or when
    ``auth.http`` is set without aiohttp installed."""
    auth = config.auth
    providers: list[CredentialProvider] = []
    methods: dict[str, EnhancedAuthMethod] = {}
    passwords = None
    http = None
    # The providers' modules load when configured: the defaults need none of them.
    if auth.password_file is not None:
        from broker_core.auth_file import PasswordFileProvider
        from broker_core.auth_scram import ScramAuthenticator
        from broker_core.passwords import PasswordFile
        from broker_core.scram import METHOD as SCRAM_METHOD

        passwords = PasswordFile(auth.password_file)
        providers.append(PasswordFileProvider(passwords))
        if auth.scram:
            methods[SCRAM_METHOD] = ScramAuthenticator(passwords)
    if auth.http is not None:
        try:
            import aiohttp  # noqa: F401 - the provider imports it on first use
        except ImportError as exc:
            raise ConfigError("auth.http needs the aiohttp package: pip install aiohttp") from exc
        from broker_core.auth_http import HttpAuthProvider

        http = HttpAuthProvider(
            auth.http.url,
            method=auth.http.method,
            timeout_s=auth.http.timeout,
            cache_ttl_s=auth.http.cache_ttl,
            headers=auth.http.headers,
        )
        providers.append(http)
    acl = config.acl
    throttle = auth.login_throttle
    return Security(
        authenticator=AuthChain(providers, methods),
        acl=build_acl(acl),
        deny_action=DENY_DISCONNECT if acl.deny_action == "disconnect" else DENY_IGNORE,
        passwords=passwords,
        http=http,
        throttle=ThrottleSettings(
            free_failures=throttle.free_failures,
            delay_s=throttle.delay,
            max_delay_s=throttle.max_delay,
            forget_after_s=throttle.forget_after,
            max_tracked=throttle.max_tracked,
        )
        if throttle.enabled
        else None,
    )
