"""``edgebus check`` reports the rules' references to webhooks, bridges and the stream
log along with the other problems of the file, not only when there are none."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.check_command import QUIET, check


def test_a_statement_error_does_not_hide_an_unknown_webhook(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: bad
    sql: 'SELEC x FROM "a/#"'
    actions: [{type: log}]
  - name: hook
    sql: 'SELECT payload.t AS t FROM "a/#"'
    actions:
      - {type: webhook, webhook: nope}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert lines == [
        "edgebus.yaml:5 rules[0].sql: expected SELECT, got 'SELEC' at position 0"
        " (line 1, column 1)",
        "edgebus.yaml:10 rules[1].actions[0].webhook: no webhook named 'nope'",
    ]


def test_references_are_checked_in_a_rule_with_another_problem(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: r
    sql: 'SELECT * FROM "a/#"'
    actions:
      - {type: republish, topic: out, qos: 3}
      - {type: bridge, bridge: nobody, topic: x}
      - {type: stream, topic: y}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert lines == [
        "edgebus.yaml:7 rules[0].actions[0].qos: expected 0, 1 or 2, got 3",
        "edgebus.yaml:8 rules[0].actions[1].bridge: no bridge named 'nobody'",
        "edgebus.yaml:9 rules[0].actions[2].type: the stream log is not enabled (`stream`)",
    ]


def test_a_webhook_with_a_problem_still_exists_for_the_rules(tmp_path: Path) -> None:
    text = """\
webhooks:
  - {name: ops, url: "ftp://nowhere"}
bridges:
  - {name: cloud, server: "127.0.0.1:1", forwards: [{local: "up/#"}], qos: 7}
stream: {enabled: true, topics: []}
rules:
  - name: r
    sql: 'SELECT * FROM "a/#"'
    actions:
      - {type: webhook, webhook: ops}
      - {type: bridge, bridge: cloud, topic: up/x}
      - {type: stream, topic: derived/x}
"""
    code, lines = check(tmp_path, QUIET + text)
    assert code == 2
    assert [line.split(" ")[1].rstrip(":") for line in lines] == [
        "webhooks[0].url",
        "bridges[0]",
        "stream.topics",
    ]
