"""The SQL rule engine: statements over the message stream and broker events, and the
actions their results feed (docs/rules.md).

- ``parser``: the statement's syntax (recursive descent, errors naming the position);
- ``compiler``: the syntax tree as closures over a row; ``functions``: what it may call;
- ``fields``: rows of messages and events (shared with the webhooks);
- ``actions``: republish, SQLite, webhook, log; ``sqlite_table``: the SQLite writer;
- ``engine``: ``RuleEngine``, the rules, their taps and observers, one bounded queue.
"""

from __future__ import annotations

from gateway.rules.compiler import CompiledStatement, compile_statement
from gateway.rules.parser import RuleSyntaxError, parse

__all__ = ["CompiledStatement", "RuleSyntaxError", "compile_statement", "parse"]
