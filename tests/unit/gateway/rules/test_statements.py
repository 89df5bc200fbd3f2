"""A table of rule statements run on one message, with the expected output (None: the
WHERE clause rejects it), and syntax errors with their positions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.rules import RuleSyntaxError, compile_statement
from gateway.rules.fields import EventRow, MessageRow
from gateway.rules.functions import RuleEvaluationError
from tests.helpers.rule_statements import MESSAGE, TABLE


@pytest.mark.parametrize(("sql", "expected"), TABLE, ids=[sql for sql, _ in TABLE])
def test_statement_on_a_message(sql: str, expected: dict[str, Any] | None) -> None:
    statement = compile_statement(sql)
    row = MessageRow(MESSAGE)
    if expected is None:
        assert statement.matches(row) is False
        return
    assert statement.matches(row) is True
    assert statement.select(row) == expected


@pytest.mark.parametrize(("sql", "expected"), TABLE, ids=[sql for sql, _ in TABLE])
def test_a_message_as_an_event_row_gives_the_same(sql: str, expected: Any) -> None:
    """Message columns are read straight from the Context in comparisons, LIKE and
    SELECT; an event row carrying the same columns gives the same results."""
    statement = compile_statement(sql)
    row = EventRow(MessageRow(MESSAGE).as_dict())
    assert statement.matches(row) is (expected is not None)
    if expected is not None:
        assert statement.select(row) == expected


@pytest.mark.parametrize(
    ("where", "matches"),
    [
        ("qos < 2 AND topic LIKE 'sensors/%'", True),
        ("qos > '0'", True),  # a numeric string compares as a number
        ("clientid LIKE 'dev-_'", True),
        ("clientid NOT LIKE 'dev-%'", False),
        ("username LIKE 'a%' AND retain = false", True),
        ("topic LIKE 'other/%' OR qos = 1", True),
    ],
)
def test_message_columns_in_where(where: str, matches: bool) -> None:
    statement = compile_statement(f'SELECT topic, clientid FROM "#" WHERE {where}')
    for row in (MessageRow(MESSAGE), EventRow(MessageRow(MESSAGE).as_dict())):
        assert statement.matches(row) is matches
    assert statement.matches(EventRow({})) is False  # missing columns are NULL


def test_select_star_is_every_column() -> None:
    out = compile_statement('SELECT * FROM "#"').select(MessageRow(MESSAGE))
    assert out["payload"] == MESSAGE.payload.decode()
    assert out["properties"] == {"content_type": "application/json",
                                 "user_properties": {"site": "n1"}}  # fmt: skip
    assert {"id", "topic", "qos", "clientid", "timestamp", "meta", "node"} <= set(out)


def test_sources_split_into_topics_and_events() -> None:
    statement = compile_statement(
        'SELECT * FROM "a/#", "$events/client_connected", \'b/+\', "$events/message_dropped"'
    )
    assert statement.topics == ("a/#", "b/+")
    assert [kind.NAME for kind in statement.events] == ["client.connected", "message.dropped"]


def test_event_rows_read_like_messages() -> None:
    row = EventRow({"clientid": "c", "payload": '{"x": {"y": 2}}', "reason": "normal"})
    statement = compile_statement(
        'SELECT clientid, payload.x.y AS y FROM "$events/client_disconnected"'
        " WHERE reason = 'normal'"
    )
    assert statement.matches(row) is True
    assert statement.select(row) == {"clientid": "c", "y": 2}


ERRORS = [
    ('SELECT FROM "a"', 7, "expected a field or an expression, got 'FROM'"),
    ("SELECT a", 8, "expected FROM, got the end of the statement"),
    ("SELECT a FROM a", 14, "expected a quoted topic filter, e.g. \"sensors/#\", got 'a'"),
    ('SELECT a FROM "a" WHERE', 23, "expected a value, a field or a function"),
    ('SELECT a FROM "a" WHERE b = = 2', 28, "expected a value, a field or a function, got '='"),
    ('SELECT a FROM "a" WHERE (b = 2', 30, "expected ')', got the end of the statement"),
    ('SELECT a FROM "a" WHERE b NOT 2', 30, "expected IN or LIKE after NOT, got '2'"),
    ('SELECT a FROM "a" WHERE b IN 2', 29, "expected a list after IN"),
    ('SELECT a FROM "a" LIMIT 2', 18, "expected WHERE or the end of the statement, got 'LIMIT'"),
    ('SELECT \'abc FROM "a"', 7, "unterminated quoted text"),
    ('SELECT a # b FROM "a"', 9, "unexpected character '#'"),
    ('SELECT nope(1) FROM "a"', 7, "unknown function 'nope'"),
    ('SELECT upper(1, 2) FROM "a"', 7, "upper() takes 1 argument, got 2"),
    ('SELECT a FROM "a/#/b"', 14, "bad topic filter 'a/#/b'"),
    ('SELECT a FROM "$events/nope"', 14, "unknown event source '$events/nope'"),
    ('SELECT CASE END FROM "a"', 12, "expected WHEN, got 'END'"),
    ('SELECT a.b. FROM "a"', 12, "expected a field name after '.'"),
]


@pytest.mark.parametrize(("sql", "pos", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_syntax_errors_name_the_position(sql: str, pos: int, message: str) -> None:
    with pytest.raises(RuleSyntaxError) as caught:
        compile_statement(sql)
    assert caught.value.pos == pos
    assert caught.value.reason.startswith(message)
    assert str(caught.value).endswith(f"at position {pos} (line 1, column {pos + 1})")


def test_errors_on_later_lines_give_line_and_column() -> None:
    with pytest.raises(RuleSyntaxError) as caught:
        compile_statement('SELECT a\nFROM "x"\nWHERE a >')
    assert (caught.value.line, caught.value.column) == (3, 10)


def test_a_failing_expression_raises_on_evaluation() -> None:
    statement = compile_statement('SELECT payload.hum / 0 AS x FROM "#"')
    with pytest.raises(RuleEvaluationError, match="division by zero"):
        statement.select(MessageRow(MESSAGE))


_WORDS = st.sampled_from(
    ["SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "LIKE", "CASE", "WHEN", "THEN",
     "END", "(", ")", ",", "*", "-", "+", "=", "'a'", '"t/#"', "payload.x", "1", "upper(",
     "[", "]", ".", "IS", "NULL", "`q`", "$events/x"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_WORDS, max_size=20).map(" ".join)))
def test_any_text_parses_or_raises_a_syntax_error(text: str) -> None:
    try:
        compile_statement(text)
    except RuleSyntaxError as exc:
        assert 0 <= exc.pos <= len(text)
