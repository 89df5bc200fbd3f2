"""``edgebus check`` refuses an action template naming a field the rule's SELECT never
gives (the topic would fail on every result), and only that: ``SELECT *``, fields below
or above a selected one, and ``{payload.x}`` with the payload selected may be there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.check_command import QUIET, check

TARGETS = """\
bridges:
  - {name: cloud, server: "127.0.0.1:1", forwards: [{local: "up/#"}]}
stream: {enabled: true}
"""


def test_a_republish_topic_naming_an_unselected_field_is_refused(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: hot
    sql: 'SELECT payload.temp AS temp FROM "s/#"'
    actions:
      - {type: log}
      - {type: republish, topic: "alerts/{room}"}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert lines == [
        "edgebus.yaml:8 rules[0].actions[1].topic: topic template 'alerts/{room}' names"
        " 'room', which the SELECT of rule 'hot' does not give (it gives temp): the action"
        " would fail on every result (no topic)"
    ]


def test_every_template_of_every_action_is_checked(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: r
    sql: 'SELECT payload.a.b, clientid, upper(topic) FROM "s/#"'
    actions:
      - {type: bridge, bridge: cloud, topic: "up/{clientid}/{client}"}
      - {type: stream, topic: "derived/{payload.c}", payload: '{"b": {payload.a.b}, "x": {x}}'}
      - {type: republish, topic: "r/{clientid}", payload: "{upper}"}
"""
    code, lines = check(tmp_path, QUIET + TARGETS + rules)
    assert code == 2
    gives = "(it gives payload.a.b, clientid, upper(topic))"
    assert lines == [
        f"edgebus.yaml:10 rules[0].actions[0].topic: topic template 'up/{{clientid}}/{{client}}'"
        f" names 'client', which the SELECT of rule 'r' does not give {gives}: the action"
        " would fail on every result (no topic)",
        "edgebus.yaml:11 rules[0].actions[1].topic: topic template 'derived/{payload.c}'"
        f" names 'payload.c', which the SELECT of rule 'r' does not give {gives}: the"
        " action would fail on every result (no topic)",
        "edgebus.yaml:11 rules[0].actions[1].payload: payload template"
        f""" '{{"b": {{payload.a.b}}, "x": {{x}}}}' names 'x', which the SELECT of rule 'r'"""
        f" does not give {gives}: empty in every payload",
        "edgebus.yaml:12 rules[0].actions[2].payload: payload template '{upper}' names"
        f" 'upper', which the SELECT of rule 'r' does not give {gives}: empty in every payload",
    ]


def test_a_template_is_checked_beside_another_problem_of_its_rule(tmp_path: Path) -> None:
    rules = """\
rules:
  - name: r
    sql: 'SELECT payload.t AS t FROM "s/#"'
    actions:
      - {type: republish, topic: "a/{t}", qos: 3}
      - {type: republish, topic: "b/{u}"}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert code == 2
    assert [line.split(": ")[0] for line in lines] == [
        "edgebus.yaml:7 rules[0].actions[0].qos",
        "edgebus.yaml:8 rules[0].actions[1].topic",
    ]


@pytest.mark.parametrize(
    ("sql", "topic", "payload"),
    [
        ('SELECT * FROM "s/#"', "x/{anything}", "{whatever}"),
        ('SELECT *, 1 AS one FROM "s/#"', "x/{meta.dds.type}", "{one}"),
        ('SELECT payload FROM "s/#"', "x/{payload.room}/{key.id}", "{payload}"),
        ('SELECT json_decode(payload) AS payload FROM "s/#"', "x/{key.a.b}", "{payload.a}"),
        ('SELECT payload.a.b FROM "s/#"', "x/{payload.a.b.c}/{key.a.b}", "{payload.a}"),
        ('SELECT meta AS m, properties FROM "s/#"', "x/{m.dds.type}", "{properties.content_type}"),
        ('SELECT payload.list[1] FROM "s/#"', "x/{payload.list.1}", "{payload.list[1]}"),
        ('SELECT payload.t AS `a.b` FROM "s/#"', "x/{a.b}", "{a.b}"),
        ('SELECT clientid, qos FROM "s/#", "$events/client_connected"', "x/{clientid:>4}", "{qos}"),
    ],
)
def test_what_may_be_in_the_result_is_not_refused(
    tmp_path: Path, sql: str, topic: str, payload: str
) -> None:
    rules = f"""\
rules:
  - name: r
    sql: '{sql.replace("'", "''")}'
    actions:
      - {{type: republish, topic: "{topic}", payload: "{payload}"}}
"""
    code, lines = check(tmp_path, QUIET + rules)
    assert (code, lines) == (0, ["edgebus.yaml: OK"])
