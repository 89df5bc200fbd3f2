"""The generated function a tap runs on a message (``CompiledStatement.message``) gives
what the compiler's closures give: on the table of statements, and on generated WHERE
clauses over messages with unusual values (no JSON payload, a numeric string, NULLs)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.context import Context, Origin
from gateway.rules import compile_statement
from gateway.rules.codegen import message_program
from gateway.rules.compiler import CompiledStatement
from gateway.rules.fields import MessageRow, Row
from gateway.rules.functions import RuleEvaluationError
from gateway.rules.nodes import Binary, Expr, Field, Literal, SelectItem, Statement, Unary
from tests.helpers.rule_statements import MESSAGE, TABLE

MESSAGES = [
    MESSAGE,
    replace(MESSAGE, payload=b"\xff not json", origin=Origin("zmq", "", None, None)),
    replace(MESSAGE, topic="s", qos="1", retain=True, payload=b'{"temp": "12", "name": null}'),  # type: ignore[arg-type]
    Context("sensors/x%_y", json.dumps({"temp": [1], "name": 7}).encode(), 2, False),
]


def _by_closures(statement: CompiledStatement, context: Context) -> Any:
    row = MessageRow(context)
    return statement.select(row) if statement.matches(row) else None


def _by_program(statement: CompiledStatement, context: Context) -> Any:
    program = statement.message
    return program.run(context, MessageRow(context) if program.needs_row else None)


def _by_parts(statement: CompiledStatement, context: Context) -> Any:
    """WHERE and SELECT apart, as the taps and the action worker run them."""
    program = statement.message
    row = MessageRow(context)
    passes, select = program.passes, program.select
    assert select is not None
    if passes is not None and not passes(context, row if program.passes_needs_row else None):
        return None
    return select(context, row if program.select_needs_row else None)


def _outcome(run: Any, statement: CompiledStatement, context: Context) -> Any:
    try:
        return ("out", run(statement, context))
    except (RuleEvaluationError, TypeError, ValueError) as exc:
        return ("raised", type(exc))


@pytest.mark.parametrize(("sql", "expected"), TABLE, ids=[sql for sql, _ in TABLE])
def test_the_table_by_the_generated_function(sql: str, expected: dict[str, Any] | None) -> None:
    statement = compile_statement(sql)
    assert _by_program(statement, MESSAGE) == expected
    assert _by_parts(statement, MESSAGE) == expected


def test_a_statement_of_message_columns_needs_no_row() -> None:
    statement = compile_statement(
        "SELECT topic, qos, clientid FROM \"bench/#\" WHERE qos < 2 AND topic LIKE 'bench/%'"
    )
    assert statement.message.needs_row is False
    context = Context("bench/in/07", b"x", 0, False, origin=Origin("mqtt", "p7"))
    assert statement.message.run(context, None) == {"topic": "bench/in/07", "qos": 0,
                                                    "clientid": "p7"}  # fmt: skip
    assert statement.message.run(replace(context, qos=2), None) is None
    assert compile_statement('SELECT payload.t FROM "#"').message.needs_row is True


def test_an_evaluation_error_is_raised_as_by_the_closures() -> None:
    statement = compile_statement('SELECT payload.hum / 0 AS x FROM "#" WHERE qos = 1')
    with pytest.raises(RuleEvaluationError, match="division by zero"):
        _by_program(statement, MESSAGE)


_OPERANDS = [
    "topic", "qos", "retain", "clientid", "username", "origin", "id", "timestamp",
    "payload.temp", "payload.name", "payload.missing", "payload", "node", "meta.dds.type",
    "1", "2.5", "0", "'1'", "'12'", "'sensors/kitchen/temp'", "'dev-1'", "TRUE", "FALSE",
    "NULL", "qos + 1",
]  # fmt: skip
_PATTERNS = ["'sensors/%'", "'%temp'", "'%kitchen%'", "'s'", "'%'", "'dev-_'", "'%x\\%_y'",
             "'sensors/kitchen/temp'", "''", "clientid"]  # fmt: skip
_COMPARISONS = ["=", "!=", "<>", "<", "<=", ">", ">="]


def _conditions() -> st.SearchStrategy[str]:
    operand = st.sampled_from(_OPERANDS)
    atoms = st.one_of(
        st.builds(
            lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from(_COMPARISONS), operand
        ),
        st.builds(
            lambda a, n, p: f"{a} {n}LIKE {p}",
            operand,
            st.sampled_from(["", "NOT "]),
            st.sampled_from(_PATTERNS),
        ),
        st.builds(lambda a, n: f"{a} IS {n}NULL", operand, st.sampled_from(["", "NOT "])),
        operand,
    )
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
            st.builds(lambda a, b: f"({a}) OR ({b})", inner, inner),
            st.builds(lambda a: f"NOT ({a})", inner),
        ),
        max_leaves=5,
    )


@settings(max_examples=400, deadline=None)
@given(_conditions(), st.lists(st.sampled_from(_OPERANDS[:12]), min_size=1, max_size=3))
def test_generated_where_clauses_mean_the_same(where: str, fields: list[str]) -> None:
    sql = f'SELECT {", ".join(fields)} FROM "#" WHERE {where}'
    statement = compile_statement(sql)
    for context in MESSAGES:
        expected = _outcome(_by_closures, statement, context)
        assert _outcome(_by_program, statement, context) == expected, (sql, context)
        assert _outcome(_by_parts, statement, context) == expected, (sql, context)


def test_a_statement_too_deep_for_python_runs_on_the_closures() -> None:
    """The parser bounds nesting (64 levels), far below Python's own limit; a deeper
    tree (built here by hand) still runs, on the compiler's closures."""
    where: Expr = Binary("=", Field(("qos",), 0), Literal(1, 0), 0)
    for _ in range(250):
        where = Unary("NOT", where, 0)
    statement = Statement((SelectItem(Field(("topic",), 0), None, 0),), ("#",), where)

    def closures(context: Context, row: Row | None) -> dict[str, Any] | None:
        return {"by": "closures"}

    program = message_program(statement, lambda node: lambda row: None, closures)
    assert program.run is closures
    assert program.needs_row is True
    assert program.select is not None and program.passes is not None
    assert program.select(MESSAGE, MessageRow(MESSAGE)) == {"by": "closures"}
