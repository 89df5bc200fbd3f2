"""``RuleEngine``: the rules, the taps and observers evaluating them, one action queue.

Each rule gets a hub client ``rule:<name>`` (the ACL knows it by that client id; its
republished messages carry that origin). Rules with the same FROM filters share one tap
on the broker (``RuleGroup``, identity ``rule:$rules``; the ACL is checked with each rule's
identity). The router matched the filters (once per topic: its match cache); while
the message is routed, the tap's callback (a closure built for the group's rules as
they are, again whenever they change; for a group of one rule reading only the
Context, without a loop) decides for each rule of the group whether the message
passes, through the rule's generated WHERE (``MessageProgram.passes``,
``gateway.rules.codegen``). A WHERE reading only message columns reads them from the
Context; otherwise the message's row is built once per group (a WHERE reading
``payload.x`` parses the JSON payload once). So every message a rule's FROM matches is
evaluated, whatever the load, and counted (``matched``, ``passed``, ``failed``); a
WHERE that raises counts ``failed`` and routing goes on. ``$events/...`` sources
are broker-event observers (``broker.observers``) evaluating their rule with the
compiler's closures.

The installed rule is ``gateway.rules.rule``; the tap groups and the callback that
evaluates their rules per message, ``gateway.rules.taps``; trying a statement on a
sample, ``gateway.rules.sample``.

The SELECT output and the actions (I/O) are deferred: a message that passed goes with
its rule into one bounded queue (``queue_size``, default 10 000) as it is (its Context,
which is frozen; or its row, when the tap built one: the decoded payload goes with it),
and one worker task on the loop builds the SELECT output (``MessageProgram.select``)
and runs the actions, taking at most ``CPU_SHARE`` (a tenth) of the loop's time while
results wait. So a result the queue drops costs no SELECT. A SELECT that raises counts
the rule's ``failed`` when the worker evaluates it (the result counted ``passed``
already) and runs no action; the SELECT of a rule without actions is never evaluated.
An event's SELECT is evaluated with its WHERE and its output queued. When the queue is
full the oldest result is dropped and counted (the rule's
``dropped``, the engine's ``dropped``, the metric ``edgebus_rule_queue_dropped_total``):
under overload actions are shed, counted, never the evaluation of WHERE. The queue is a
``deque`` with ``maxlen`` (dropping costs the broker's path nothing but the append);
the drops are counted from the other counts when asked: a rule's results queued (every
result that passed, when it has actions) less those the worker took and those still
waiting. SQLite rows and webhook
posts go on to their own bounded queues.

A rule never sees its own messages (the tap skips a rule for messages whose origin is
that rule), so a rule that republishes to a topic matching its own FROM does not loop;
rules chained through republish (A feeds B) do run, as in EMQX: B evaluates when A's
action publishes, in the worker.

Rules come from the configuration (``source: config``) and from the HTTP API
(``source: api``): ``add``, ``update``, ``enable``, ``delete``; a configuration reload
(``reconcile``) replaces the configured ones and keeps the API's. ``test`` runs a
statement (WHERE and SELECT at once) on a sample message without any action.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_core.context import Context, Origin
from broker_core.errors import AdapterError
from broker_core.observe import BrokerEvent
from gateway.hub import Hub, HubClient
from gateway.rules.actions import Action, ActionContext, Targets, WebhookSender, build_action
from gateway.rules.fields import EventRow, MessageRow, Row, event_row
from gateway.rules.name_case import case_warnings
from gateway.rules.rule import Rule
from gateway.rules.sample import test_statement
from gateway.rules.sqlite_table import SqliteTables
from gateway.rules.taps import RuleGroup, tap_callback

if TYPE_CHECKING:
    from gateway.config.models.rules import RuleConfig

__all__ = ["Rule", "RuleEngine"]

log = logging.getLogger(__name__)

CONFIG = "config"
API = "api"
#: The share of the loop's time the action worker takes while results wait: after the
#: loop spent ``t`` seconds elsewhere, a turn may last ``t * CPU_SHARE / (1 - CPU_SHARE)``
#: (between ``MIN_TURN_S`` and ``MAX_TURN_S``). Under overload actions get this share and
#: the queue drops the oldest results (counted); the broker keeps the other nine tenths.
CPU_SHARE = 0.1
MIN_TURN_S = 0.0002
MAX_TURN_S = 0.02
#: Results the worker acts on between two readings of the clock.
WORKER_BATCH = 16


class _Retirement:
    """Queued behind the results of a replaced rule (``RuleEngine._retire``): when the
    action worker takes it, those results were acted on, and the rule's client closes.
    Like a deleted rule it has no client, so the worker's one check finds it."""

    __slots__ = ("rule", "taken")
    client = None

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.taken = 0


class RuleEngine:
    def __init__(
        self,
        hub: Hub,
        rules: Iterable[RuleConfig] = (),
        data_dir: Path = Path("."),
        webhooks: WebhookSender | None = None,
        node: str = "edgebus",
        queue_size: int = 10_000,
        targets: Targets | None = None,
    ) -> None:
        self.hub = hub
        self.targets = targets
        self.data_dir = Path(data_dir)
        self.webhooks = webhooks
        self.node = node
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self.processed = 0  # results the worker took off the queue (acted on, or not)
        self._retired = 0  # results queued by rules deleted or replaced since
        self._configured = list(rules)
        self._rules: dict[str, Rule] = {}
        # Results waiting for their rule's actions: the rules and what their SELECT is
        # built from, side by side (no tuple per result): the message's Context (or
        # its row, when the tap built one), which the worker turns into the SELECT
        # output (``Rule.output``); an event's SELECT output. Both bounded by
        # ``maxlen``: appending to a full one drops its oldest entry, in C, with no
        # bookkeeping on the broker's path; the drops are counted from the other counts
        # (``dropped``).
        self._queue: deque[Rule] = deque(maxlen=queue_size)
        self._results: deque[Context | MessageRow | dict[str, Any]] = deque(maxlen=queue_size)
        self._wake: asyncio.Event | None = None
        self._idle = False  # the worker waits on _wake
        self._tables: dict[Path, SqliteTables] = {}
        self._groups: dict[tuple[str, ...], RuleGroup] = {}
        # The identity of the engine's taps; no rule can have this name.
        self._origin = Origin("rule", "$rules", None, "rule:$rules")
        self._running = False

    # -- reading ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._rules) if self._running else len(self._configured)

    def get(self, name: str) -> Rule | None:
        return self._rules.get(name)

    def statuses(self) -> list[dict[str, Any]]:
        if not self._running:
            return [Rule(config, CONFIG).status() for config in self._configured]
        waiting = Counter(self._queue)  # one pass over the queue for every rule
        return [rule.status(waiting[rule]) for rule in self._rules.values()]

    @property
    def queue_size(self) -> int:
        """The action queue's bound (``queue_size`` of the constructor)."""
        size = self._queue.maxlen
        assert size is not None
        return size

    @queue_size.setter
    def queue_size(self, size: int) -> None:
        """Resizes the action queue; results over the new bound are dropped (the oldest)
        and counted."""
        if size < 1:
            raise ValueError("queue_size must be at least 1")
        self._queue = deque(self._queue, maxlen=size)
        self._results = deque(self._results, maxlen=size)
        for group in self._groups.values():
            self._refresh(group)  # the taps append to the new queue

    @property
    def dropped(self) -> int:
        """Results the full action queue dropped: every result queued (by the rules
        installed and by those gone) but those the worker took and those waiting."""
        queued = self._retired + sum(rule.queued for rule in self._rules.values())
        return queued - self.processed - len(self._queue)

    def _waiting(self, rule: Rule) -> int:
        """How many results of ``rule`` wait in the action queue."""
        return self._queue.count(rule)

    def stats(self) -> dict[str, int]:
        return {
            "rules": len(self._rules),
            "queue_depth": len(self._queue),
            "queue_size": self.queue_size,
            "dropped": self.dropped,
            "processed": self.processed,
        }

    # -- running ------------------------------------------------------------------------

    def start(self) -> None:
        """Installs the configured rules: they evaluate from here on, and ``run`` acts
        on what they pass. Once; ``run`` starts the engine when nothing did."""
        if self._running:
            return
        self._wake = asyncio.Event()
        self._running = True
        for config in self._configured:
            self._install_configured(config)

    async def run(self) -> None:
        """Runs the actions of what the rules pass until cancelled (``start`` first)."""
        try:
            self.start()
            await self._work()
        finally:
            self._running = False
            for rule in list(self._rules.values()):
                self._discard(rule)
            for waiting in [item for item in self._queue if type(item) is _Retirement]:
                self._retirement_reached(waiting)  # type: ignore[arg-type]
            for tables in self._tables.values():
                tables.close()
            self._tables.clear()

    async def _work(self) -> None:
        """Runs the actions of the queued results, within ``CPU_SHARE`` of the loop."""
        wake = self._wake
        assert wake is not None
        clock, node, failed = time.perf_counter, self.node, self._failed
        factor = CPU_SHARE / (1 - CPU_SHARE)
        ended = clock()
        while True:
            if not self._queue:
                wake.clear()
                self._idle = True
                await wake.wait()
            queue, results = self._queue, self._results  # new ones once resized
            started = clock()
            deadline = started + min(MAX_TURN_S, max(MIN_TURN_S, (started - ended) * factor))
            while queue and clock() < deadline:
                batch = min(len(queue), WORKER_BATCH)  # the clock is read once a batch
                for _ in range(batch):
                    rule, item = queue.popleft(), results.popleft()
                    rule.taken += 1
                    if rule.client is None:  # deleted or disabled since, or a retirement
                        if type(rule) is _Retirement:
                            self._retirement_reached(rule)
                        continue
                    if type(item) is dict:  # an event's, built when it was evaluated
                        out = item
                    else:
                        try:
                            out = rule.output(item, node)  # type: ignore[arg-type]
                        except Exception as exc:
                            failed(rule, exc)
                            continue
                    for action in rule.actions:
                        try:
                            action.run(out)
                        except Exception:
                            self._action_failed(rule, action)
                self.processed += batch
            ended = clock()
            await asyncio.sleep(0)

    @staticmethod
    def _action_failed(rule: Rule, action: Action) -> None:
        action.failed += 1
        if action.failed == 1 or action.failed % 1000 == 0:
            log.exception("rule %s: action %s failed", rule.name, action.type)

    def _refresh(self, group: RuleGroup) -> None:
        if group.tap is not None:
            group.tap.callback = tap_callback(group, self)

    def _wake_worker(self) -> None:
        self._idle = False
        self._wake.set()  # type: ignore[union-attr]

    def _evaluate(self, rules: Iterable[Rule], row: Row, own: str | None) -> None:
        """WHERE, then SELECT for a row that passes, of each rule but ``own`` (the
        closures: for broker events). Counts as the taps do; never raises."""
        for rule in rules:
            if rule.name == own:
                continue
            rule.matched += 1
            statement = rule.statement
            try:
                where = statement.where
                if where is not None and where(row) is not True:
                    continue
                out = statement.select(row)
            except Exception as exc:
                self._failed(rule, exc)
                continue
            rule.passed += 1
            if rule.actions:
                self._enqueue(rule, out)

    @staticmethod
    def _failed(rule: Rule, exc: Exception) -> None:
        rule.failed += 1
        if rule.failed == 1 or rule.failed % 1000 == 0:
            log.warning("rule %s failed (%d so far): %s", rule.name, rule.failed, exc)

    def _enqueue(self, rule: Rule, out: dict[str, Any]) -> None:
        """Queues an event's result for its rule's actions (a full queue drops its oldest) and
        wakes the worker when it waits."""
        self._queue.append(rule)
        self._results.append(out)
        if self._idle:  # the worker waits for results
            self._wake_worker()

    def _tables_for(self, database: Path | None) -> SqliteTables:
        path = database if database is not None else Path("rules.db")
        if not path.is_absolute():
            path = self.data_dir / path
        tables = self._tables.get(path)
        if tables is None:
            tables = self._tables[path] = SqliteTables(path)
        return tables

    def _install(self, rule: Rule) -> None:
        """Makes ``rule`` live (when enabled): its actions, tap and observers. Raises
        ``AdapterError`` when the ACL denies its filters (the caller uninstalls it)."""
        self._rules[rule.name] = rule
        rule.error = None
        for _, warning in case_warnings(rule.name, rule.statement.statement, rule.config.actions):
            log.warning("%s", warning)
        if not rule.enabled:
            return
        client = self.hub.client("rule", rule.name)
        rule.client = client
        rule.waiting = self._waiting
        context = ActionContext(client, self._tables_for, self.webhooks, self.targets)
        rule.actions = [build_action(a, context, rule.name) for a in rule.config.actions]
        if rule.statement.topics:
            self._join_group(rule, client)
        if rule.statement.events:
            evaluate, node, alone = self._evaluate, self.node, (rule,)

            def observe(event: BrokerEvent) -> None:
                message = getattr(event, "message", None)
                if (
                    message is not None
                    and message.origin.protocol == "rule"
                    and (message.origin.name == rule.name)
                ):
                    return  # what this rule published: no loop through its own events
                evaluate(alone, EventRow(event_row(event, node)), None)

            undo = self.hub.broker.observers.observe(rule.statement.events, observe)
            rule.undo.append(undo)

    def _join_group(self, rule: Rule, client: HubClient) -> None:
        """Rules with the same FROM filters share one tap (``RuleGroup``): a message is
        tapped once for all of them. The ACL is checked with the rule's identity."""
        broker = self.hub.broker
        filters = tuple(sorted(set(rule.statement.topics)))
        client.check_subscribe(filters)  # with the rule's own identity
        group = self._groups.get(filters)
        if group is None:
            group = self._groups[filters] = RuleGroup(filters)
            group.add(rule)
            route = tap_callback(group, self)
            group.tap = broker.tap(self._origin, filters, route, 2, no_local=False)
        else:
            group.add(rule)
            self._refresh(group)
        rule.group = group

    def _leave_group(self, rule: Rule) -> None:
        group = rule.group
        if group is None:
            return
        rule.group = None
        group.remove(rule)
        if not group.rules:
            if group.tap is not None:
                group.tap.close()
            self._groups.pop(group.filters, None)
        else:
            self._refresh(group)

    def _discard(self, rule: Rule) -> None:
        """Uninstalls a rule for good (deleted, replaced, the engine stopping); its
        queued results stay in the engine's count (``dropped``)."""
        self._uninstall(rule)
        self._retired += rule.queued

    def _uninstall(self, rule: Rule) -> None:
        self._detach(rule)
        if rule.client is not None:
            rule.client.close()
            rule.client = None

    def _detach(self, rule: Rule) -> None:
        """Stops ``rule`` evaluating (its tap, its observers) and forgets it; its hub
        client and actions stay (``_uninstall`` closes them)."""
        self._leave_group(rule)
        for undo in rule.undo:
            undo()
        rule.undo.clear()
        if self._rules.get(rule.name) is rule:
            self._rules.pop(rule.name)

    def _retire(self, rule: Rule) -> None:
        """Ends a rule replaced by a new one of the same name (``update``, a reload):
        detached already, it evaluates nothing more, but the results it queued before
        are still acted on by its actions, in their turn: a ``_Retirement`` queued
        behind them closes its client when the worker reaches it. Without it, the
        worker skipped them (a swap under load lost messages)."""
        self._retired += rule.queued
        if rule.client is None:
            return
        if not rule.actions:
            rule.client.close()
            rule.client = None
            return
        self._queue.append(_Retirement(rule))  # type: ignore[arg-type]
        self._results.append({})
        self._retired += 1  # counted as queued, so that ``dropped`` stays right
        if self._idle:
            self._wake_worker()

    def _retirement_reached(self, retirement: _Retirement) -> None:
        """The worker took every result the retired rule queued (or the full queue
        dropped them): its client closes. The marker itself is not a result."""
        self.processed -= 1
        self._retired -= 1
        rule = retirement.rule
        if rule.client is not None:
            rule.client.close()
            rule.client = None

    # -- managing (the API, reloads) ----------------------------------------------------

    def add(self, config: RuleConfig, source: str = API) -> Rule:
        """Installs a new rule; ValueError when the name is taken (or the ACL denies its
        filters: ``AdapterError``, nothing installed)."""
        if config.name in self._rules:
            raise ValueError(f"there is already a rule named {config.name!r}")
        rule = Rule(config, source)
        try:
            self._install(rule)
        except Exception:
            self._uninstall(rule)
            raise
        log.info("rule %s added (%s)", rule.name, source)
        return rule

    def update(self, config: RuleConfig, source: str | None = None) -> Rule:
        """Replaces a rule (counters start over); KeyError when there is none."""
        old = self._rules[config.name]
        new = Rule(config, source or old.source)  # a bad statement raises before any change
        self._replace(old, new)
        return new

    def _replace(self, old: Rule, new: Rule) -> None:
        """Installs ``new`` in place of ``old`` (same name) in one step of the loop: no
        message is routed between; the results ``old`` queued before are acted on
        by its actions (``_retire``). Raises what installing ``new`` raises, ``old`` then
        back as it was."""
        self._detach(old)
        try:
            self._install(new)
        except Exception:
            self._uninstall(new)
            if old.client is not None:
                old.client.close()
                old.client = None
            self._reinstall(old)
            raise
        self._retire(old)

    def enable(self, name: str, enabled: bool) -> Rule:
        """Starts or stops evaluating a rule; its counters go on. The choice holds
        until the rule is replaced (``update``, or a reload that changes it): a reload
        that leaves its configuration as it is keeps it."""
        rule = self._rules[name]
        if rule.enabled == enabled and rule.error is None:
            return rule
        before, counts = rule.enabled_override, [(a.succeeded, a.failed) for a in rule.actions]
        self._uninstall(rule)
        rule.enabled_override = enabled
        try:
            self._install(rule)
        except Exception:
            self._uninstall(rule)
            rule.enabled_override = before
            self._reinstall(rule)
            raise
        for action, (succeeded, failed) in zip(rule.actions, counts, strict=False):
            action.succeeded, action.failed = succeeded, failed
        return rule

    def _reinstall(self, rule: Rule) -> None:
        """Installs ``rule`` again as it was (after a change that failed, or once the
        ACL allows it), its counters kept; one the ACL denies stays listed with state
        ``error``."""
        counts = [(a.succeeded, a.failed) for a in rule.actions]
        try:
            self._install(rule)
        except AdapterError as exc:
            self._uninstall(rule)
            rule.error = str(exc)
            self._rules[rule.name] = rule
        for action, (succeeded, failed) in zip(rule.actions, counts, strict=False):
            action.succeeded, action.failed = succeeded, failed

    def delete(self, name: str) -> bool:
        rule = self._rules.get(name)
        if rule is None:
            return False
        self._discard(rule)
        log.info("rule %s deleted", name)
        return True

    def reconcile(self, configs: Iterable[RuleConfig]) -> list[str]:
        """Applies the rules of a reloaded configuration; the API's rules stay. A rule
        of the file written as a rule of the API runs is taken over by the file (source
        ``config``; it keeps running, its counters go on); one of the same name written
        otherwise leaves the API's rule as it is, with a WARNING (the gateway's reload
        refuses such a file first)."""
        wanted = {config.name: config for config in configs}
        self._configured = list(wanted.values())
        if not self._running:
            return []
        changes: list[str] = []
        for rule in list(self._rules.values()):
            if rule.source == CONFIG and rule.name not in wanted:
                self.delete(rule.name)
                changes.append(f"rule: removed {rule.name}")
        for name, config in wanted.items():
            installed = self._rules.get(name)
            if installed is None:
                self._install_configured(config)
                changes.append(f"rule: added {name}")
            elif installed.source == API:
                if installed.config == config:
                    installed.source = CONFIG
                    log.info("rule %s: taken over by the configuration", name)
                    changes.append(f"rule: {name} now configured")
                else:
                    log.warning(
                        "rule %s: created through the API, kept; the configuration's"
                        " rule of that name is not installed",
                        name,
                    )
            elif installed.config != config:
                self._detach(installed)
                self._install_configured(config)
                self._retire(installed)
                changes.append(f"rule: updated {name}")
        return changes

    def rejudge(self) -> list[str]:
        """Judges the installed rules against the ACL again, as installing them does
        (after a reload changed it): a running rule whose filters the ACL now denies
        stops and shows state ``error`` (its counters kept), one shown with ``error``
        that the ACL now allows runs again. Returns what changed, e.g.
        ``["rule: stopped spy (...)"]``."""
        if not self._running:
            return []
        changes: list[str] = []
        for rule in list(self._rules.values()):
            if rule.error is not None:
                self._reinstall(rule)  # denied at its install: allowed now?
                if rule.error is None:
                    log.info("rule %s started: the ACL allows its filters now", rule.name)
                    changes.append(f"rule: started {rule.name}")
                continue
            if rule.client is None or not rule.statement.topics:
                continue  # disabled, or only $events sources
            try:
                rule.client.check_subscribe(tuple(sorted(set(rule.statement.topics))))
            except AdapterError as exc:
                self._uninstall(rule)
                rule.error = str(exc)
                self._rules[rule.name] = rule
                log.error("rule %s stopped: %s", rule.name, exc)
                changes.append(f"rule: stopped {rule.name}")
        return changes

    def bridge_users(self, bridge: str) -> list[str]:
        """The rules (installed, disabled or in error) whose actions forward through the
        bridge named ``bridge``."""
        return [
            rule.name
            for rule in self._rules.values()
            if any(getattr(a, "bridge", None) == bridge for a in rule.config.actions)
        ]

    def api_rules(self) -> list[RuleConfig]:
        """The configurations of the rules created through the API (a reload keeps them)."""
        return [rule.config for rule in self._rules.values() if rule.source == API]

    def _install_configured(self, config: RuleConfig) -> Rule:
        """Installs a rule of the configuration; one the ACL refuses stays listed with
        state ``error`` (the others run)."""
        rule = Rule(config, CONFIG)
        try:
            self._install(rule)
        except AdapterError as exc:  # the ACL denies its filters
            self._uninstall(rule)
            rule.error = str(exc)
            self._rules[rule.name] = rule
            log.error("rule %s not installed: %s", rule.name, exc)
        return rule

    def test(self, sql: str, sample: dict[str, Any]) -> dict[str, Any]:
        """Runs ``sql`` on ``sample`` (see ``gateway.rules.sample.sample_row``) without
        any action: ``{"matched": bool, "output": dict | None}``. Raises
        ``RuleSyntaxError``; an evaluation error is returned as ``error``."""
        return test_statement(sql, sample, self.node)
