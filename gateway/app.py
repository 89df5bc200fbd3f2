"""``Gateway``: the appliance around the broker, one asyncio.TaskGroup owning it all.

``run()`` builds the broker from the configuration, binds every listener, runs the
broker's housekeeping, and on ``stop()`` (SIGTERM, SIGINT) closes listeners, ends every
client connection (MQTT 5 clients are told the server is shutting down, 0x8B) so their
wills are published while the rules, components and store still run, then stops those
and returns.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_core.broker import VERSION, Broker
from broker_core.clock import now as clock_now
from broker_core.errors import ConfigError
from broker_core.listeners.settings import ListenerSettings, Listening
from broker_core.mqtt.limits import ServerLimits
from broker_core.mqtt.reason_codes import ReasonCode
from broker_core.store.base import MemoryStore, Store
from broker_core.store.sqlite import SqliteStore
from broker_core.sys_topics import SysTopics
from gateway.binding import bind_error
from gateway.components import ADAPTER, BRIDGE, KindView, Supervisor, registry
from gateway.config.light import same_config
from gateway.config.validate import inactive_sections
from gateway.hub import Hub
from gateway.lazy_listener import LazyServer, listening_socket
from gateway.security import build_security

if TYPE_CHECKING:
    from broker_core.listeners.tls_context import ServerTls
    from gateway.api import ApiServer
    from gateway.config import GatewayConfig, ListenerConfig, MqttConfig
    from gateway.config.validate import ValidConfig
    from gateway.rules.engine import RuleEngine
    from gateway.webhook import Webhooks

__all__ = ["Gateway", "limits_from_config"]

log = logging.getLogger(__name__)


#: The listen backlog of a WebSocket listener (as websockets' ``serve`` had it).
WEBSOCKET_BACKLOG = 1024

#: Sections a reload reports but does not apply: they take effect at the next restart.
_RESTART_SECTIONS = (
    "listeners", "mqtt", "persistence", "data_dir", "node_name", "auth", "sys", "webhooks"
)  # fmt: skip


def limits_from_config(mqtt: MqttConfig) -> ServerLimits:
    """The broker's protocol limits from the ``mqtt:`` section (durations to seconds)."""
    return ServerLimits(
        max_packet_size=mqtt.max_packet_size,
        receive_maximum=mqtt.receive_maximum,
        max_inflight=mqtt.max_inflight,
        max_queued_messages=mqtt.max_queued_messages,
        max_queued_bytes=mqtt.max_queued_bytes,
        queue_overflow=mqtt.queue_overflow,
        max_queued_bytes_total=mqtt.max_queued_bytes_total,
        max_inflight_bytes=mqtt.max_inflight_bytes,
        max_offline_sessions=mqtt.max_offline_sessions,
        max_will_bytes_total=mqtt.max_will_bytes_total,
        max_topic_alias=mqtt.max_topic_alias,
        max_topic_alias_bytes=mqtt.max_topic_alias_bytes,
        max_packet_properties=mqtt.max_packet_properties,
        max_packet_properties_bytes=mqtt.max_packet_properties_bytes,
        max_subscriptions=mqtt.max_subscriptions,
        max_subscriptions_total=mqtt.max_subscriptions_total,
        max_topic_levels=mqtt.max_topic_levels,
        read_budget=mqtt.read_budget,
        max_qos=mqtt.max_qos,
        retain_available=mqtt.retain_available,
        wildcard_subscriptions=mqtt.wildcard_subscriptions,
        shared_subscriptions=mqtt.shared_subscriptions,
        subscription_identifiers=mqtt.subscription_identifiers,
        server_keep_alive=None if mqtt.server_keep_alive is None else int(mqtt.server_keep_alive),
        max_keepalive=int(mqtt.max_keepalive),
        max_session_expiry=int(mqtt.max_session_expiry),
        max_client_id_length=mqtt.max_client_id_length,
        max_retained_messages=mqtt.max_retained_messages,
        max_retained_bytes=mqtt.max_retained_bytes,
        max_delayed_messages=mqtt.max_delayed_messages,
        max_delayed_bytes=mqtt.max_delayed_bytes,
        publish_rate=mqtt.publish_rate,
        publish_burst=mqtt.publish_burst,
    )


def listener_settings(listener: ListenerConfig) -> ListenerSettings:
    return ListenerSettings(
        name=listener.name,
        allow_anonymous=listener.allow_anonymous,
        max_connections=listener.max_connections,
        max_pending_connections=listener.max_pending_connections,
        connection_rate=listener.connection_rate,
        use_identity_as_username=bool(listener.tls and listener.tls.use_identity_as_username),
    )


def open_store(config: GatewayConfig) -> Store:
    """The store ``persistence`` names: SQLite in ``data_dir``, or memory."""
    if config.persistence == "sqlite":
        return SqliteStore(Path(config.data_dir))
    return MemoryStore()


class Gateway:
    def __init__(self, config: GatewayConfig, config_path: Path | None = None) -> None:
        self.config = config
        self.config_path = config_path
        self.security = build_security(config)  # first: a bad password file opens nothing
        self.store = open_store(config)
        self.broker = Broker(
            limits_from_config(config.mqtt),
            node_name=config.node_name,
            write_high_water=config.mqtt.write_high_water,
            write_timeout_s=config.mqtt.write_timeout,
            store=self.store,
        )
        self.sys_topics = SysTopics(self.broker, VERSION, config.sys.interval, config.sys.events)
        self.security.install(self.broker)  # authenticator, acl, acl_deny_action
        self.hub = Hub(self.broker)
        specs = registry.specs_from_config(config)[0]
        self.components = Supervisor(
            self.hub, Path(config.data_dir), specs, events=self.sys_topics
        )
        # The rule engine and the webhooks are built with their first use (build_rules).
        self._rules: RuleEngine | None = None
        self._webhooks: Webhooks | None = None
        self._rule_tasks: list[asyncio.Task[None]] = []
        self.adapters: KindView = self.components.view(ADAPTER)
        # Until a bridge type is registered, the API lists the configured bridges.
        self.bridges: KindView | None = (
            self.components.view(BRIDGE) if registry.types_of(BRIDGE) else None
        )
        self.addresses: dict[str, tuple[str, int]] = {}
        #: The sections of the configuration file that differ from what runs and take
        #: effect at the next restart, as the last reload found them (``reload``).
        self.restart_required: list[str] = []
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._servers: list[Listening] = []
        self._lazy: list[asyncio.Task[None]] = []  # listeners waiting for a first connection
        self._tls: list[ServerTls] = []  # the TLS listeners' contexts (reload)
        self._clients_closed = False  # the listeners closed, every client connection ended
        self._tg: asyncio.TaskGroup | None = None
        self.api: ApiServer | None = None
        if config.api.enabled:
            from gateway.api import ApiServer  # FastAPI and uvicorn only when serving

            self.api = ApiServer(self)

    @property
    def rules(self) -> RuleEngine:
        """The rule engine (``build_rules``)."""
        return self.build_rules()

    @property
    def webhooks(self) -> Webhooks:
        """The configured webhooks (``build_rules``)."""
        self.build_rules()
        assert self._webhooks is not None
        return self._webhooks

    def build_rules(self) -> RuleEngine:
        """The rule engine, with the webhooks its actions post to, built with its first
        use: rules or webhooks in the configuration, a reload that adds rules, the HTTP
        API. A gateway without them loads none of their code (0.45 MB of idle RSS).
        Built while the gateway runs, both start at once."""
        if self._rules is None:
            from gateway.rules.engine import RuleEngine
            from gateway.rules.targets import GatewayTargets
            from gateway.webhook import Webhooks

            config = self.config
            self._webhooks = Webhooks(config.webhooks, self.broker, config.node_name)
            self._rules = RuleEngine(
                self.hub,
                config.rules,
                Path(config.data_dir),
                self._webhooks,
                config.node_name,
                targets=GatewayTargets(self.components, lambda: self.config.stream),
            )
            if self._tg is not None:
                self._start_rules(self._tg)
        return self._rules

    def _start_rules(self, tg: asyncio.TaskGroup) -> None:
        if self._rule_tasks or self._rules is None or self._webhooks is None:
            return
        self._rules.start()  # the configured rules evaluate from here on
        self._rule_tasks = [
            tg.create_task(self._webhooks.run(), name="webhooks"),
            tg.create_task(self._rules.run(), name="rules"),
        ]

    @property
    def api_address(self) -> tuple[str, int] | None:
        """The HTTP API's bound address once running; None when disabled."""
        return None if self.api is None else self.api.address

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """``stop`` was called: the gateway is shutting down (or has stopped)."""
        return self._stop.is_set()

    def reload(self) -> list[str]:
        """Re-reads the configuration file: adapter mappings, ACL, credentials; and the
        certificate, key, CA and CRL files of the TLS listeners (new handshakes use them).

        Clients stay connected. Components (adapters, bridges, sinks) whose configuration
        changed restart; new ones start, removed ones stop. Rules are judged against
        the new ACL as at their install (``RuleEngine.rejudge``). Sections that need a
        restart (listeners, mqtt, persistence, data_dir, node_name, auth, sys,
        webhooks, api, logging) are not applied: they are logged and listed in
        ``restart_required``. Returns what changed. The file is checked as ``edgebus
        check`` checks it (the files it names included), a rule naming a webhook this
        gateway does not run is refused, so is a component filter deeper than the running
        broker's ``mqtt.max_topic_levels``, and so is a file that would leave a rule
        created through the API naming a bridge (or the stream log) the reload removes:
        on any problem it raises ConfigError, logs each problem at ERROR and changes
        nothing.
        """
        try:
            return self._reload()
        except ConfigError as exc:
            for problem in exc.problems:
                log.error("reload refused: %s", problem)
            raise

    def _checked(self, path: Path) -> ValidConfig:
        """The file at ``path`` checked for a reload; ConfigError on any problem, an
        unexpected failure of a check included (logged with its traceback): nothing
        has changed yet."""
        # The schema's models and file checks: loaded from the first reload.
        from gateway.config import validate_config

        try:
            valid = validate_config(path)
        except ConfigError:
            raise
        except Exception as exc:
            log.exception("reload: checking %s failed", path)
            message = f"{path}: the file could not be checked ({type(exc).__name__}: {exc})"
            raise ConfigError(message) from None
        if valid.empty:
            # An editor that truncates before it writes, a failed copy: read as the
            # embedded defaults, it would remove every component and rule and open the
            # ACL. A start on an empty file is the defaults; a reload is refused.
            message = (
                f"{path} is empty (no YAML document, only comments or null): not reloaded,"
                " nothing changed (to run on the embedded defaults, restart with it)"
            )
            raise ConfigError(message, [message])
        problems = (
            self._unknown_webhooks(valid)
            + self._api_rules_renamed(valid)
            + self._dangling_api_rules(valid)
            + self._too_deep_for_running(valid)
        )
        if problems:
            raise ConfigError("\n".join(problems), problems)
        return valid

    def _reload_tls(self) -> list[str]:
        """Builds each TLS listener's context again from its files when one of them
        changed (a renewed certificate); a file that cannot be loaded keeps the context in
        use, logged at ERROR by ``ServerTls``."""
        return [f"listener {tls.name} TLS files" for tls in self._tls if tls.reload()]

    def _reload(self) -> list[str]:
        if self.config_path is None:
            self.security.reload()
            tls = self._reload_tls()
            passwords = self.security.passwords
            log.info(
                "configuration reloaded without a file (the embedded defaults, no -c):"
                " password file %s; ACL caches emptied; TLS files: %s",
                "none" if passwords is None else f"{passwords.path} re-read",
                ", ".join(tls) if tls else f"{len(self._tls)} TLS listener(s), none changed",
            )
            return ["password_file", "acl_cache", *tls]
        valid = self._checked(self.config_path)
        new = valid.config
        passwords = self.security.passwords
        users_before = None if passwords is None else passwords.users()
        self.security.reload(new.acl)
        self._warn_acl_opened(valid)
        done: list[str] = []
        if not same_config(new.acl, self.config.acl):
            done.append("acl")
        if passwords is not None and passwords.users() != users_before:
            done.append("password_file")
        done += self._reload_tls()  # the files the running listeners name
        specs = registry.specs_from_config(new)[0]
        done += self.components.reconcile(specs)
        done += self.components.rejudge()  # the new ACL, as at their start
        if new.rules or self._rules is not None:
            done += self.rules.reconcile(new.rules)
            done += self.rules.rejudge()  # the new ACL, as at install
        # A gateway started on views (gateway.config.light) compares them with models.
        fixed = [
            name
            for name in _RESTART_SECTIONS
            if not same_config(getattr(new, name), getattr(self.config, name))
        ]
        if not same_config(getattr(new, "api", None), getattr(self.config, "api", None)):
            fixed.append("api")
        if not same_config(new.logging, self.config.logging):
            fixed.append("logging")  # the CLI installed its handler at the start
        for name in fixed:
            log.warning("reload: the change to %r takes effect at the next restart", name)
        self.config = new.model_copy(update={name: getattr(self.config, name) for name in fixed})
        self.restart_required = fixed
        log.info(
            "configuration reloaded from %s: %s%s",
            self.config_path,
            ", ".join(done) or "nothing changed",
            f"; waiting for a restart: {', '.join(fixed)}" if fixed else "",
        )
        return done

    def _warn_acl_opened(self, valid: ValidConfig) -> None:
        """A WARNING when the reloaded ACL allows by default what the running one denied:
        a file that lost its ``acl`` section (``acl.default`` is ``allow`` by default)
        opens every topic to every client."""
        before, after = self.config.acl.default, valid.config.acl.default
        if before == "deny" and after == "allow":
            written = valid.document is not None and ("acl",) in valid.document.lines
            log.warning(
                "reload: acl.default changes deny -> allow%s: topics no rule names are"
                " open to every client",
                "" if written else f" ({valid.filename} has no acl section)",
            )

    def _unknown_webhooks(self, valid: ValidConfig) -> list[str]:
        """A problem for each action of the new rules naming a webhook this gateway does
        not run: webhooks start with the gateway (a new one runs after a restart), and
        such an action would fail every time. ``POST /rules`` refuses the same."""
        from gateway.config.models.rules import check_rule_references

        new = valid.config
        bridges = tuple(bridge.name for bridge in new.bridges)
        found = check_rule_references(
            new.rules, tuple(self.config.webhooks), bridges, new.stream.enabled
        )
        return [
            f"{valid.where(path)}: {message} in this running gateway"
            " (the webhooks section takes effect at the next restart)"
            for path, message in found
            if path[-1] == "webhook"
        ]

    def _too_deep_for_running(self, valid: ValidConfig) -> list[str]:
        """A problem for each component filter of the new file deeper than the running
        broker's ``mqtt.max_topic_levels``, when the file raises that bound: ``mqtt``
        takes effect at the next restart, and until then the broker refuses them."""
        from gateway.config.models.topic_levels import gateway_filter_problems

        new = valid.config
        running = self.broker.limits.max_topic_levels
        if new.mqtt.max_topic_levels <= running:
            return []  # the file's own check was the stricter one
        sections = {"adapters": new.adapters, "bridges": new.bridges, "rules": new.rules}
        found = gateway_filter_problems(sections, running, new.stream)
        return [
            f"{valid.where(path)}: {message} in this running gateway"
            " (the mqtt section takes effect at the next restart)"
            for path, message in found
        ]

    def _api_rules_renamed(self, valid: ValidConfig) -> list[str]:
        """A problem for each rule of the file named as a rule created through the API
        but written differently: a reload keeps the API's rules, and replacing one
        silently by the file's would be a surprise. The same rule written in the file
        (to keep it across restarts) is taken over by it (``RuleEngine.reconcile``)."""
        if self._rules is None:
            return []
        api = {config.name: config for config in self._rules.api_rules()}
        return [
            f"{valid.where(('rules', index, 'name'))}: rule {rule.name!r} was created"
            " through the API and runs with another configuration; a reload keeps the"
            " API's rules: delete that rule first (DELETE /api/v1/rules/"
            f"{rule.name}), or write it in the file as it runs, or rename this one"
            for index, rule in enumerate(valid.config.rules)
            if rule.name in api and api[rule.name] != rule
        ]

    def _dangling_api_rules(self, valid: ValidConfig) -> list[str]:
        """A problem for each action of a rule created through the API (a reload keeps
        those rules) that would name a bridge the new file does not have (bridges added
        through the API end with a reload) or append to a stream log it disables: the
        action would fail on every result. Nothing is lost silently: the operator
        deletes or changes the rule, or writes the bridge in the file, first."""
        if self._rules is None:
            return []
        from gateway.config.models.rules import action_reference_problems

        new = valid.config
        configured = {rule.name for rule in new.rules}  # the file takes these over
        kept = [rule for rule in self._rules.api_rules() if rule.name not in configured]
        actions = ((i, j, action) for i, rule in enumerate(kept)
                   for j, action in enumerate(rule.actions))  # fmt: skip
        bridges = {bridge.name for bridge in new.bridges}
        webhooks = {webhook.name for webhook in self.config.webhooks}
        found = action_reference_problems(actions, webhooks, bridges, new.stream.enabled)
        return [
            f"{self.config_path}: rule {kept[path[1]].name!r} (created through the API,"
            f" kept by a reload) actions[{path[3]}]: {message} in the reloaded"
            " configuration; delete or change that rule first, or keep what it names in"
            " the file"
            for path, message in found
            if isinstance(path[1], int) and isinstance(path[3], int)
        ]

    def rules_using_bridge(self, name: str) -> list[str]:
        """The rules whose actions forward through the bridge ``name`` (``DELETE
        /api/v1/bridges/{name}`` refuses to remove a bridge they use)."""
        return [] if self._rules is None else self._rules.bridge_users(name)

    async def run(self) -> None:
        started = time.monotonic()
        self.broker.restore(self.store.open(), clock_now())
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                # Components first: their durable taps (the stream log, bridge queues) are
                # in place before the listeners accept the first message.
                self.components.start(tg)
                await self.components.settle()
                if self.config.rules or self.config.webhooks:
                    self.build_rules()
                self._start_rules(tg)  # when built before the gateway ran
                for index, listener in enumerate(self.config.listeners):
                    try:
                        self._servers.append(await self._start_listener(listener))
                    except OSError as exc:
                        where = ("listeners", index, "bind")
                        raise bind_error(where, listener.name, listener.bind, exc) from exc
                if self.api is not None:
                    try:
                        await self.api.start()
                    except OSError as exc:
                        raise bind_error(("api", "bind"), None, self.config.api.bind, exc) from exc
                    tg.create_task(self.api.serve(), name="http-api")
                housekeeping = tg.create_task(self.broker.run(), name="broker-housekeeping")
                sys_task = tg.create_task(self.sys_topics.run(), name="sys-topics")
                self._warn_inactive_sections()
                log.info(
                    "edgebus node %s ready in %.2fs",
                    self.config.node_name,
                    time.monotonic() - started,
                )
                self.ready.set()
                await self._stop.wait()
                self._tg = None  # what is built from now on does not start
                # The clients' wills go through the rules, the bridges and the store
                # before any of them stops.
                self._close_clients()
                housekeeping.cancel()
                sys_task.cancel()
                for waiting in self._lazy:
                    waiting.cancel()
                for task in self._rule_tasks:
                    task.cancel()  # the rules' SQLite rows are written before it returns
                await self.components.shutdown()
                if self.api is not None:
                    self.api.stop()
        finally:
            await self._shutdown()

    def _warn_inactive_sections(self) -> None:
        """Sections this release validates and lists but does not run (yet)."""
        for path, message in inactive_sections(self.config):
            log.warning("%s %s", path[0], message)

    async def _start_listener(self, listener: ListenerConfig) -> Listening:
        host, port = listener.bind.host, listener.bind.port
        settings = listener_settings(listener)
        context = None
        if listener.tls is not None:  # tls, wss
            from broker_core.listeners.tls_context import ServerTls, server_ssl_context

            tls, password = listener.tls, listener.tls.keyfile_password
            built = server_ssl_context(
                tls.certfile,
                tls.keyfile,
                cafile=tls.cafile,
                verify_peer=tls.verify_peer,
                fail_if_no_peer_cert=tls.fail_if_no_peer_cert,
                min_version=tls.min_version,
                ciphers=tls.ciphers,
                keyfile_password=None if password is None else password.get_secret_value(),
                crlfile=tls.crlfile,
                where=f"listener {listener.name!r} tls",
            )
            context = ServerTls(built, listener.name)  # reloaded with the configuration
            self._tls.append(context)
        server: Listening
        if listener.type == "tcp":
            from broker_core.listeners.tcp import start_tcp

            server = await start_tcp(self.broker, host, port, settings)
        elif listener.type == "tls":
            from broker_core.listeners.tls import start_tls

            assert context is not None  # the config requires `tls:` on a tls listener
            server = await start_tls(self.broker, host, port, settings, context)
        else:  # ws, wss: websockets is imported with the first connection (lazy_listener)
            if importlib.util.find_spec("websockets") is None:
                raise ConfigError(
                    f"listener {listener.name!r}: type {listener.type} needs the websockets"
                    " package: pip install 'edgebus[ws]'"
                )
            path = listener.path or "/mqtt"
            sock = await listening_socket(host, port, WEBSOCKET_BACKLOG)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by each

            async def start(sock: socket.socket) -> Any:
                websocket = await asyncio.to_thread(
                    importlib.import_module, "broker_core.listeners.websocket"
                )
                return await websocket.start_websocket(
                    self.broker, host, port, settings, path, context, sock=sock
                )

            lazy = LazyServer(sock, start)
            assert self._tg is not None  # listeners start inside run()'s TaskGroup
            self._lazy.append(self._tg.create_task(lazy.serve(), name=f"listener-{listener.name}"))
            log.info(
                "listener %s (%s) bound to %s path %s; WebSocket loaded with its first connection",
                listener.name,
                "WebSocket over TLS" if context is not None else "WebSocket",
                sock.getsockname()[:2],
                path,
            )
            server = lazy
        sockname = server.sockets[0].getsockname()
        self.addresses[listener.name] = (sockname[0], sockname[1])
        return server

    def _close_clients(self) -> None:
        """Stops accepting, and ends every client connection now: MQTT 5 clients get
        DISCONNECT 0x8B (Server shutting down); each client's will is published, or kept
        pending with its session (Will Delay Interval), as when any connection ends
        without DISCONNECT. No waiting: each connection ends at once (``shut_down``)."""
        if not self._clients_closed:
            self._clients_closed = True
            for server in self._servers:
                server.close()
        for conn in list(self.broker.connections):
            conn.shut_down(ReasonCode.SERVER_SHUTTING_DOWN)

    async def _shutdown(self) -> None:
        self._close_clients()  # done already unless run() failed
        for server in self._servers:
            try:
                async with asyncio.timeout(2):
                    await server.wait_closed()
            except TimeoutError:
                log.warning("listener did not close within 2 s")
        self._servers.clear()
        self.store.close()
        await self.security.aclose()
        log.info("edgebus stopped")
