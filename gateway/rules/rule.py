"""``Rule``: one installed rule of the engine (``gateway.rules.engine``).

Its compiled statement (WHERE and SELECT on a message, as generated code), its
actions and hub client once installed, the tap group it shares, whether it is
enabled, its counters (``matched``, ``passed``, ``failed``, and ``taken`` by the action
worker; ``dropped`` derived from them) and its status as the API shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker_core.context import Context
from gateway.hub import HubClient
from gateway.rules.actions import Action
from gateway.rules.fields import MessageRow

if TYPE_CHECKING:
    from gateway.config.models.rules import RuleConfig
    from gateway.rules.compiler import CompiledStatement
    from gateway.rules.taps import RuleGroup

__all__ = ["Rule"]


class Rule:
    """One installed rule: its statement, actions, counters and hooks."""

    def __init__(self, config: RuleConfig, source: str) -> None:
        self.config = config
        self.name = config.name
        self.source = source
        from gateway.rules.compiler import compile_statement  # ~1 MB: with the first rule

        self.statement: CompiledStatement = compile_statement(config.sql)
        program = self.statement.message
        self.passes = program.passes  # WHERE on a message (None: no WHERE)
        assert program.select is not None
        self.select = program.select  # SELECT on a message, in the action worker
        self.select_needs_row = program.select_needs_row
        self.actions: list[Action] = []
        self.client: HubClient | None = None
        self.undo: list[Callable[[], None]] = []
        self.matched = 0  # a message or event of its FROM reached it
        self.passed = 0  # ... and passed WHERE
        self.failed = 0  # evaluating it raised
        self.taken = 0  # its results the action worker took off the queue
        #: How many of its results wait in the action queue (set by the engine).
        self.waiting: Callable[[Rule], int] | None = None
        self.error: str | None = None  # why it could not be installed
        self.group: RuleGroup | None = None  # the tap it shares
        #: Enabled or disabled through the API (``RuleEngine.enable``), over its
        #: configuration's ``enabled``; None: as configured. Kept across reloads that
        #: leave the rule's configuration as it is.
        self.enabled_override: bool | None = None

    @property
    def enabled(self) -> bool:
        override = self.enabled_override
        return self.config.enabled if override is None else override

    def output(self, item: Context | MessageRow, node: str) -> dict[str, Any]:
        """The SELECT output of a message that passed (queued by a tap: its Context, or
        its row when the tap built one); raises what evaluating SELECT raises."""
        if isinstance(item, MessageRow):
            return self.select(item.context, item)
        return self.select(item, MessageRow(item, node) if self.select_needs_row else None)

    @property
    def queued(self) -> int:
        """Its results that went to the action queue: every result that passed, when it
        has actions (``_route`` and ``_evaluate`` queue exactly those)."""
        return self.passed if self.config.actions else 0

    def dropped(self, waiting: int | None = None) -> int:
        """Its results the full action queue dropped: queued, neither taken by the
        worker nor waiting (``waiting``: how many wait, when the caller counted them)."""
        if waiting is None:
            waiting = self.waiting(self) if self.waiting is not None else 0
        return self.queued - self.taken - waiting

    def status(self, waiting: int | None = None) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": "error" if self.error else "running" if self.enabled else "disabled",
            "hits": self.matched,
            "enabled": self.enabled,
            "source": self.source,
            "sql": self.config.sql,
            "description": self.config.description,
            "matched": self.matched,
            "passed": self.passed,
            "failed": self.failed,
            "dropped": self.dropped(waiting),
            "error": self.error,
            "actions": [action.stats() for action in self.actions]
            or [{"type": a.type, "succeeded": 0, "failed": 0} for a in self.config.actions],
        }
