"""Rules that share a tap, and the callback that evaluates them on each message.

Rules with the same FROM filters share one tap on the broker (``RuleGroup``, identity
``rule:$rules``; the engine checks the ACL with each rule's identity). The router
matched the filters; while the message is routed, the tap's callback
(``tap_callback``: a closure built for the group's rules as they are, again whenever
they change or the action queue is resized; for a group of one rule reading only the
Context, without a loop) runs each rule's generated WHERE (``MessageProgram.passes``)
and queues what passed for the engine's action worker (``gateway.rules.engine``).
This is the rules' per-message path: it adds nothing per message but the closure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from broker_core.context import Context
from broker_core.tap import Tap
from gateway.rules.fields import MessageRow
from gateway.rules.rule import Rule

if TYPE_CHECKING:
    from gateway.rules.engine import RuleEngine

__all__ = ["RuleGroup", "tap_callback"]


class RuleGroup:
    """Rules with the same FROM filters and the one tap they share."""

    __slots__ = ("filters", "needs_row", "rules", "tap")

    def __init__(self, filters: tuple[str, ...]) -> None:
        self.filters = filters
        self.rules: list[Rule] = []
        self.tap: Tap | None = None
        self.needs_row = False  # a WHERE reads more than the Context (the JSON payload)

    def add(self, rule: Rule) -> None:
        self.rules.append(rule)
        self.needs_row = any(r.statement.message.passes_needs_row for r in self.rules)

    def remove(self, rule: Rule) -> None:
        if rule in self.rules:
            self.rules.remove(rule)
        self.needs_row = any(r.statement.message.passes_needs_row for r in self.rules)


def tap_callback(group: RuleGroup, engine: RuleEngine) -> Callable[[Context], None]:
    """The callback of a group's tap, for its rules as they are now (the engine's
    ``_refresh`` builds it again when they change or the queue is resized). During
    routing it runs each rule's WHERE on the message (a rule never sees its own
    messages) through its generated ``passes``; the message's row is built only when
    one of them reads more than the Context. Counts ``matched``, ``passed``, ``failed``; a
    message that passed a rule with actions goes to the action queue (its Context,
    or the row when built; a full queue drops its oldest), where the worker builds
    the SELECT output; never raises. A group of one rule reading only the Context
    (the common case) gets a callback without the loop."""
    failed = engine._failed
    queue_append, results_append = engine._queue.append, engine._results.append
    if len(group.rules) == 1 and not group.needs_row:
        (rule,) = group.rules
        name, passes, acts = rule.name, rule.passes, bool(rule.actions)

        def route_one(context: Context) -> None:
            origin = context.origin
            if origin.name == name and origin.protocol == "rule":
                return  # what this rule published
            rule.matched += 1
            if passes is not None:
                try:
                    if not passes(context, None):
                        return  # WHERE is not true
                except Exception as exc:
                    failed(rule, exc)
                    return
            rule.passed += 1
            if acts:
                queue_append(rule)
                results_append(context)  # the worker builds the SELECT output
                if engine._idle:  # the worker waits for results
                    engine._wake_worker()

        return route_one

    rules = tuple((rule, rule.name, rule.passes, bool(rule.actions)) for rule in group.rules)
    needs_row, node = group.needs_row, engine.node

    def route(context: Context) -> None:
        origin = context.origin
        own = origin.name if origin.protocol == "rule" else None
        row = MessageRow(context, node) if needs_row else None
        item = context if row is None else row  # the row keeps its decoded payload
        for rule, name, passes, acts in rules:
            if name == own:
                continue
            rule.matched += 1
            if passes is not None:
                try:
                    if not passes(context, row):
                        continue  # WHERE is not true
                except Exception as exc:
                    failed(rule, exc)
                    continue
            rule.passed += 1
            if acts:
                queue_append(rule)
                results_append(item)
                if engine._idle:
                    engine._wake_worker()

    return route
