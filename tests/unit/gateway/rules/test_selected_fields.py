"""``gateway.rules.selected`` refuses only what cannot render: for each statement and
template field of a table, a refused field renders on none of the sample messages the
way the actions render it (``Republish.run``, ``render_payload``), and a field that
renders on one is never refused."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from broker_core.context import Context, Origin
from broker_core.mqtt.properties import Properties
from gateway.mapping import MappingError, TopicTemplate
from gateway.rules.actions import _flat, render_payload
from gateway.rules.compiler import compile_statement
from gateway.rules.fields import MessageRow
from gateway.rules.functions import RuleEvaluationError
from gateway.rules.selected import result_fields, unselected_fields

STATEMENTS = [
    'SELECT payload.t AS t FROM "a/#"',
    'SELECT payload.a.b, clientid FROM "a/#"',
    'SELECT payload FROM "a/#"',
    'SELECT json_decode(payload) AS payload FROM "a/#"',
    'SELECT meta AS m, topic FROM "a/#"',
    'SELECT payload.a AS key FROM "a/#"',
    'SELECT payload.list[1] FROM "a/#"',
    'SELECT payload.t AS `a.b` FROM "a/#"',
    'SELECT properties FROM "a/#"',
    'SELECT upper(clientid), qos FROM "a/#"',
    'SELECT *, 1 AS one FROM "a/#"',
]
FIELDS = [
    "t", "a", "a.b", "a.b.c", "payload", "payload.t", "payload.a", "payload.a.b",
    "payload.a.b.c", "key", "key.t", "key.a.b", "key.x", "key.b", "clientid", "m", "m.k",
    "m.k.z", "topic", "qos", "x", "upper", "one", "payload.list", "payload.list.1",
    "properties.content_type",
]  # fmt: skip
PAYLOADS = [
    b'{"t": 1, "a": {"b": 2, "c": {"z": 1}}, "x": 3, "list": [0, 5], "k": 1}',
    b'{"t": {"z": 1}, "a": {"b": {"c": 4}}, "list": [{"a": 1}, {"b": 2}], "b": 5}',
    b'{"a": {"b": "q", "t": 2}, "b": {"c": 1}, "t": "u", "x": 3}',
    b'{"a": 7, "t": 1, "key": 2}',
    b"plain",
]
METAS: list[dict[str, Any]] = [{}, {"k": 1}, {"k": {"z": 2}}]


def _results(sql: str) -> list[dict[str, Any]]:
    compiled = compile_statement(sql)
    results = []
    for payload, meta in itertools.product(PAYLOADS, METAS):
        context = Context("a/b", payload, meta=meta, origin=Origin("mqtt", "c1", None, None),
                          properties=Properties(content_type="text/plain"))  # fmt: skip
        try:
            results.append(compiled.select(MessageRow(context)))
        except RuleEvaluationError:
            continue  # json_decode of a payload that is not JSON
    return results


def _renders_topic(template: str, out: dict[str, Any]) -> bool:
    try:
        TopicTemplate(template).render(_flat(out), out.get("payload"))
    except MappingError:
        return False
    return True


@pytest.mark.parametrize("sql", STATEMENTS)
def test_a_refused_field_never_renders_and_a_rendered_one_is_never_refused(sql: str) -> None:
    statement = compile_statement(sql).statement
    results = _results(sql)
    assert results
    for field in FIELDS:
        topic = f"x/{{{field}}}"
        refused = unselected_fields(statement, topic, topic=True) == [field]
        renders = any(_renders_topic(topic, out) for out in results)
        assert not (refused and renders), (sql, field)
        placeholder = f"{{{field}}}"
        refused = unselected_fields(statement, placeholder, topic=False) == [field]
        renders = any(render_payload(placeholder, out) != b"" for out in results)
        assert not (refused and renders), (sql, field)


def test_fields_never_given_are_refused() -> None:
    statement = compile_statement('SELECT payload.a.b, upper(clientid) AS c FROM "a/#"').statement
    assert result_fields(statement) == (("payload", "a", "b"), ("c",))
    template = "x/{c}/{payload.a.b}/{key.a.b}/{payload.z}/{key.z}/{d}/{d}"
    assert unselected_fields(statement, template, topic=True) == ["payload.z", "key.z", "d"]
    assert unselected_fields(statement, '{"c": {c}, "k": {key.a}, "l": {d[0]}}', topic=False) == [
        "key.a", "d[0]"
    ]  # fmt: skip


def test_select_star_may_give_any_field() -> None:
    statement = compile_statement('SELECT *, 1 AS one FROM "a/#"').statement
    assert result_fields(statement) is None
    assert unselected_fields(statement, "x/{anything}/{meta.dds.type}", topic=True) == []
