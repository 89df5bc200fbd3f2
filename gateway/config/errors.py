"""Configuration problems, rendered the way a user reads them.

Every problem becomes one line naming the file, the line and the YAML path::

    edgebus.yaml:14 bridges[0].forwards[2].qos: expected 0, 1 or 2, got 3
    edgebus.yaml:3 listeners[0]: unknown key 'alow_anonymous'; did you mean 'allow_anonymous'?
    edgebus.yaml:7:5: YAML syntax error: mapping values are not allowed here

The messages are written here from pydantic's error *types*, never copied from
pydantic's English. Validators in the models raise ``ValueError`` with a message in the
same ``expected ..., got ...`` style, or :class:`FieldProblems` to report problems at
keys below the value they validate (a duplicate listener name at
``listeners[2].name``).

The exception itself is ``broker_core.errors.ConfigError``; its ``problems`` are the
rendered lines.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gateway.config.introspect import (
    Loc,
    is_model,
    literal_values,
    model_at,
    nullable_members,
    resolve_lazy,
    strip_annotated,
    walk_loc,
)
from gateway.config.shown import format_path, show_value

__all__ = [
    "FieldProblems",
    "Problem",
    "expected_choices",
    "format_path",
    "problems_from_validation_error",
    "show_value",
]


def expected_choices(values: Sequence[object]) -> str:
    """``[0, 1, 2]`` -> ``0, 1 or 2``; ``["tcp", "tls"]`` -> ``one of tcp, tls``."""
    shown = [str(value) for value in values]
    if all(isinstance(value, int) for value in values) and len(shown) > 1:
        return f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f"one of {', '.join(shown)}"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a configuration file, at a YAML path and line."""

    path: Loc
    line: int
    message: str
    column: int | None = None

    def render(self, filename: str) -> str:
        """``edgebus.yaml:14 bridges[0].qos: expected 0, 1 or 2, got 3``."""
        where = f"{filename}:{self.line}"
        if self.column is not None:
            where += f":{self.column}"
        if self.path:
            return f"{where} {format_path(self.path)}: {self.message}"
        return f"{where}: {self.message}"


class FieldProblems(ValueError):
    """Raised by a validator to report problems at keys below the validated value.

    Each problem is ``(relative path, message)``; an empty path means the value itself.
    """

    def __init__(self, problems: Iterable[tuple[Loc, str]]) -> None:
        self.problems: tuple[tuple[Loc, str], ...] = tuple(problems)
        super().__init__("; ".join(message for _, message in self.problems))


# pydantic error type -> what was expected
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "int_parsing_size": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "string_unicode": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dataclass_type": "a mapping",
    "path_type": "a path",
    "url_type": "a URL",
    "url_parsing": "a URL",
}

# Error types that restate another error, never worth a line of their own.
_SKIPPED = {"default_factory_not_called"}

_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")


def _unquote_all(text: str) -> list[object]:
    """Values from pydantic's ``'a', 'b' or 'c'`` / ``0, 1 or 2`` expectation text."""
    found = _QUOTED.findall(text)
    if found:
        return list(found)
    parts = [part.strip() for part in re.split(r",| or ", text) if part.strip()]
    return [int(part) if re.fullmatch(r"-?\d+", part) else part for part in parts]


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _bound_message(kind: str, ctx: dict[str, Any], got: str) -> str:
    if kind == "greater_than_equal":
        return f"expected at least {_number(ctx['ge'])}, got {got}"
    if kind == "greater_than":
        return f"expected more than {_number(ctx['gt'])}, got {got}"
    if kind == "less_than_equal":
        return f"expected at most {_number(ctx['le'])}, got {got}"
    return f"expected less than {_number(ctx['lt'])}, got {got}"


def _length_message(kind: str, ctx: dict[str, Any], value: object) -> str:
    minimum = ctx.get("min_length")
    maximum = ctx.get("max_length")
    noun = "characters" if kind.startswith("string") else "items"
    actual = ctx.get("actual_length")
    if actual is None and isinstance(value, str | list | tuple | dict):
        actual = len(value)
    if kind.endswith("too_short") and minimum == 1:
        return "must not be empty"
    if kind.endswith("too_short"):
        return f"expected at least {minimum} {noun}, got {actual}"
    return f"expected at most {maximum} {noun}, got {actual}"


def _message(error: ErrorDetails, annotation: object) -> str:
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    value = error.get("input")
    got = show_value(value)
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, got {got}"
    if kind in ("literal_error", "enum"):
        values = literal_values(annotation) or _unquote_all(str(ctx.get("expected", "")))
        return f"expected {expected_choices(values)}, got {got}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return _bound_message(kind, ctx, got)
    if kind in ("too_short", "too_long", "string_too_short", "string_too_long"):
        return _length_message(kind, ctx, value)
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "assertion_error":
        return str(ctx.get("error", error["msg"])).removeprefix("Assertion failed, ")
    message = error["msg"]
    return f"{message[:1].lower()}{message[1:]}, got {got}"


def _nearest(key: str, choices: Iterable[str]) -> str | None:
    """The choice nearest to ``key``, letter case aside (``Max_QoS``: ``max_qos``)."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def _suggest(key: str, choices: Iterable[str]) -> str:
    close = _nearest(key, choices)
    return f"; did you mean '{close}'?" if close else ""


def _missing(key: object) -> str:
    return f"missing required key '{key}'"


def _meant(error: ErrorDetails, root: type[BaseModel]) -> tuple[Loc, str] | None:
    """For an unknown key: (the YAML path of the mapping it is in, the key it is nearest
    to)."""
    loc = tuple(error["loc"])
    if error["type"] != "extra_forbidden" or not loc:
        return None
    parent, annotation = walk_loc(root, loc[:-1])
    model = model_at(annotation)
    close = _nearest(str(loc[-1]), model.model_fields) if model is not None else None
    return (parent, _missing(close)) if close is not None else None


def _misspelt_tag(data: object, tag: str, annotation: object) -> str | None:
    """The key of ``data`` that is ``tag`` (a tagged union's discriminator) misspelt: a
    key no member of the union knows, nearer to ``tag`` than to any member's key."""
    if not isinstance(data, dict) or annotation is None:
        return None
    bare, _ = strip_annotated(resolve_lazy(annotation))
    members = [strip_annotated(member)[0] for member in nullable_members(bare)[0]]
    known = {
        name
        for member in members
        if is_model(member)
        for name in typing.cast(type[BaseModel], member).model_fields
    }
    for key in data:
        if isinstance(key, str) and key not in known and _nearest(key, known | {tag}) == tag:
            return key
    return None


def _render_one(
    error: ErrorDetails, root: type[BaseModel], line_of: Callable[[Loc], int]
) -> list[Problem]:
    kind = error["type"]
    loc = tuple(error["loc"])
    if kind in _SKIPPED:
        return []
    if kind == "missing" and loc:
        parent, _ = walk_loc(root, loc[:-1])
        return [Problem(parent, line_of(parent), _missing(loc[-1]))]
    if kind == "extra_forbidden" and loc:
        parent, annotation = walk_loc(root, loc[:-1])
        key = str(loc[-1])
        model = model_at(annotation)
        hint = _suggest(key, model.model_fields) if model is not None else ""
        return [Problem(parent, line_of((*parent, key)), f"unknown key '{key}'{hint}")]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    path, annotation = walk_loc(root, loc)
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        key = str(ctx.get("discriminator", "type")).strip("'\"")
        if kind == "union_tag_not_found":
            misspelt = _misspelt_tag(error.get("input"), key, annotation)
            if misspelt is not None:
                at = (*path, misspelt)
                return [
                    Problem(
                        path, line_of(at), f"unknown key '{misspelt}'{_suggest(misspelt, [key])}"
                    )
                ]
            return [Problem(path, line_of(path), _missing(key))]
        tags = _unquote_all(str(ctx.get("expected_tags", "")))
        tagged = (*path, key)
        data = error.get("input")
        tag = data[key] if isinstance(data, dict) and key in data else ctx.get("tag")
        message = f"expected {expected_choices(tags)}, got {show_value(tag)}"
        return [Problem(tagged, line_of(tagged), message)]
    cause = ctx.get("error")
    if kind == "value_error" and isinstance(cause, FieldProblems):
        problems = []
        for relative, message in cause.problems:
            at = (*path, *relative)
            problems.append(Problem(at, line_of(at), message))
        return problems
    return [Problem(path, line_of(path), _message(error, annotation))]


def _is_mapping(annotation: object) -> bool:
    bare, _ = strip_annotated(resolve_lazy(annotation))
    return is_model(bare)


def _branches(root: type[BaseModel], loc: Loc) -> list[tuple[int, bool]]:
    """Where ``loc`` names a member of a union that is not discriminated (pydantic puts
    the member's name there: ``constrained-int``, ``function-wrap[...]``): (the index of
    that name, whether the member is a mapping)."""
    found: list[tuple[int, bool]] = []
    path, annotation = walk_loc(root, ())
    for index in range(len(loc)):
        if annotation is None:
            break
        members, _ = nullable_members(strip_annotated(resolve_lazy(annotation))[0])
        after, annotation = walk_loc(root, loc[: index + 1])
        if len(members) > 1 and len(after) == len(path) and annotation is not None:
            found.append((index, _is_mapping(annotation)))
        path = after
    return found


def _union_choices(
    errors: list[ErrorDetails], root: type[BaseModel], line_of: Callable[[Loc], int]
) -> tuple[set[int], dict[int, Problem]]:
    """What the errors about a value that fits no member of a union (one that is not
    discriminated) come to: (the errors to leave out, problems to report instead, by the
    number of the error they replace). pydantic reports each member's complaint:

    - a mapping that a mapping member looked into: that member's errors only (an integer
      member's "expected an integer, got a mapping" says nothing the user needs);
    - a value that no member took for its type: one line naming what each expected
      (``expected a mapping or an integer, got 'abc'``);
    - a value of a member's type that it refused (-1 for an unsigned integer): that
      member's errors only.
    """
    branches = [_branches(root, tuple(error["loc"])) for error in errors]
    # union location -> [(error number, member is a mapping, complaint about the value's type)]
    at: dict[Loc, list[tuple[int, bool, bool]]] = {}
    for number, (error, found) in enumerate(zip(errors, branches, strict=True)):
        loc = tuple(error["loc"])
        for index, mapping in found:
            top = len(loc) == index + 1 and error["type"] in _EXPECTED
            at.setdefault(loc[:index], []).append((number, mapping, top))
    skipped: set[int] = set()
    merged: dict[int, Problem] = {}
    for union, reports in at.items():
        numbers = [number for number, _, _ in reports]
        if _names_a_choice(errors, numbers, len(union)):
            described = [_member_expects(errors[n], root) for n in numbers]
            got = show_value(errors[numbers[0]].get("input"))
            path, _ = walk_loc(root, union)
            message = f"expected {_either(list(dict.fromkeys(described)))}, got {got}"
            merged[numbers[0]] = Problem(path, line_of(path), message)
            skipped |= set(numbers)
        elif any(mapping and not top for _, mapping, top in reports):
            skipped |= {number for number, mapping, _ in reports if not mapping}
        elif all(top for _, _, top in reports):
            if len(reports) > 1:
                numbers = [number for number, _, _ in reports]
                expected = dict.fromkeys(_EXPECTED[errors[n]["type"]] for n in numbers)
                got = show_value(errors[numbers[0]].get("input"))
                path, _ = walk_loc(root, union)
                message = f"expected {' or '.join(expected)}, got {got}"
                merged[numbers[0]] = Problem(path, line_of(path), message)
                skipped |= set(numbers)
        else:
            skipped |= {number for number, _, top in reports if top}
    return skipped, merged


def _names_a_choice(errors: list[ErrorDetails], numbers: list[int], depth: int) -> bool:
    """True when a union with a ``Literal`` member (``int >= 1 | 'all'``) refused a value:
    every error is about the value itself and one is the choice's."""
    chosen = [errors[n] for n in numbers]
    return (
        len(chosen) > 1
        and all(len(error["loc"]) == depth + 1 for error in chosen)
        and any(error["type"] == "literal_error" for error in chosen)
    )


_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _member_expects(error: ErrorDetails, root: type[BaseModel]) -> str:
    """What the union member an error is about takes: ``all``, ``an integer >= 1``."""
    _, annotation = walk_loc(root, tuple(error["loc"]))
    values = literal_values(annotation) if annotation is not None else None
    if values:
        return _either([str(value) for value in values])
    bare, metadata = strip_annotated(annotation)
    noun = {int: "an integer", float: "a number", str: "a string"}.get(
        bare,  # type: ignore[call-overload]
        _EXPECTED.get(error["type"], "a value"),
    )
    for item in [*metadata, *(m for f in metadata for m in getattr(f, "metadata", ()))]:
        for name, sign in _BOUNDS:
            bound = getattr(item, name, None)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                noun += f" {sign} {_number(bound)}"
    return noun


def _either(choices: list[str]) -> str:
    """``["a", "b", "c"]`` -> ``a, b or c``."""
    if len(choices) < 2:
        return "".join(choices)
    return f"{', '.join(choices[:-1])} or {choices[-1]}"


def problems_from_validation_error(
    exc: ValidationError, root: type[BaseModel], line_of: Callable[[Loc], int]
) -> list[Problem]:
    """Turn every error of ``exc`` (raised validating ``root``) into a :class:`Problem`.

    ``line_of`` maps a YAML path to its line in the file.
    """
    errors = exc.errors(include_url=False)
    # pydantic counts only the valid items of a list against its minimum length
    inner = {tuple(error["loc"][:end]) for error in errors for end in range(len(error["loc"]))}
    skipped, merged = _union_choices(errors, root, line_of)
    # a required key misspelt: its unknown-key line names it, a missing-key line is noise
    misspelt = {meant for meant in (_meant(error, root) for error in errors) if meant}
    problems: list[Problem] = []
    for number, error in enumerate(errors):
        if number in merged:
            problems.append(merged[number])
        if number in skipped:
            continue
        if error["type"] == "too_short" and tuple(error["loc"]) in inner:
            continue
        problems.extend(_render_one(error, root, line_of))
    return [problem for problem in problems if (problem.path, problem.message) not in misspelt]
