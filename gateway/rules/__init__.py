"""The SQL rule engine: statements over the message stream and broker events, and the
actions their results feed (docs/rules.md).

- ``parser``: the statement's syntax (recursive descent, errors naming the position);
- ``compiler``: the syntax tree as closures over a row; ``functions``: what it may call;
- ``fields``: rows of messages and events (shared with the webhooks); ``selected``: the
  fields a result can hold, against which the configuration checks action templates;
- ``actions``: republish, SQLite, webhook, log; ``sqlite_table``: the SQLite writer;
- ``engine``: ``RuleEngine``, the rules, their taps and observers, one bounded queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.lazy_names import lazy_getattr

if TYPE_CHECKING:
    from gateway.rules.compiler import CompiledStatement, compile_statement
    from gateway.rules.parser import RuleSyntaxError, parse

__all__ = ["CompiledStatement", "RuleSyntaxError", "compile_statement", "parse"]

#: Imported on first use (PEP 562): a gateway without rules does not load the parser
#: and the compiler (~1 MB).
_HOMES = {
    "CompiledStatement": "gateway.rules.compiler",
    "compile_statement": "gateway.rules.compiler",
    "RuleSyntaxError": "gateway.rules.parser",
    "parse": "gateway.rules.parser",
}

__getattr__ = lazy_getattr(globals(), _HOMES)
