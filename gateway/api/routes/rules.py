"""``/rules/...``: the rule engine's rules, managed at run time (docs/rules.md).

``GET /rules`` (in ``components``) lists them. Here: one rule, create, replace, enable,
disable, delete, and ``POST /rules/test``, which runs a statement on a sample message
without any action. A rule changed here lives until the gateway restarts or a reload
brings the configured rule of that name back; to keep one, write it in the
configuration file.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any, Self

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from broker_core.errors import AdapterError
from gateway.api.components import GatewayView
from gateway.api.deps import Caller, Gw, Responses
from gateway.api.schemas import RuleInfo
from gateway.components import BRIDGE
from gateway.config.models.rules import RuleConfig, check_rule_references
from gateway.config.models.topic_levels import component_filter_problems
from gateway.rules.engine import Rule, RuleEngine
from gateway.rules.functions import to_json
from gateway.rules.parser import RuleSyntaxError

__all__ = ["RuleSample", "RuleTest", "RuleTestResult", "router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["rules"])

_NOT_FOUND: Responses = {404: {"description": "No such rule"}}
_BAD: Responses = {400: {"description": "The rule cannot be installed (the detail says why)"}}


async def _engine(request: Request) -> RuleEngine:
    engine = getattr(request.app.state.gateway, "rules", None)
    if not isinstance(engine, RuleEngine):
        raise HTTPException(status.HTTP_404_NOT_FOUND, "this gateway runs no rule engine")
    return engine


Engine = Annotated[RuleEngine, Depends(_engine)]


def _info(rule: Rule) -> RuleInfo:
    found = rule.status()
    return RuleInfo(
        name=found.pop("name"), state=found.pop("state"), hits=found.pop("hits"), details=found
    )


def _rule(engine: RuleEngine, name: str) -> Rule:
    rule = engine.get(name)
    if rule is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no rule {name!r}")
    return rule


def _check_levels(gateway: GatewayView, config: RuleConfig) -> None:
    """422 naming ``sql`` when a FROM filter has more levels than the running broker's
    ``mqtt.max_topic_levels``, as a configuration file's rule is refused."""
    max_levels = gateway.broker.limits.max_topic_levels
    problems = component_filter_problems("rules", config, max_levels)
    if problems:
        raise RequestValidationError(
            [
                {"type": "value_error", "loc": ("body", *path), "msg": message, "input": None}
                for path, message in problems
            ]
        )


def _check_references(gateway: GatewayView, engine: RuleEngine, config: RuleConfig) -> None:
    """400 when the rule names a webhook or bridge that does not exist, or appends to a
    stream log that is not enabled."""
    components = getattr(gateway, "components", None)
    bridges = tuple(spec.name for spec in components.specs(BRIDGE)) if components else ()
    problems = check_rule_references(
        (config,),
        tuple(getattr(engine.webhooks, "configs", ())),
        bridges,
        gateway.config.stream.enabled,
    )
    if problems:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, "; ".join(p for _, p in problems))


@router.get("/rules/{name}", summary="One rule, with its counters", responses=_NOT_FOUND)
async def get_rule(engine: Engine, name: str) -> RuleInfo:
    return _info(_rule(engine, name))


@router.post(
    "/rules",
    summary="Create a rule",
    status_code=status.HTTP_201_CREATED,
    responses={**_BAD, 409: {"description": "A rule of that name exists"}},
)
async def create_rule(engine: Engine, gateway: Gw, caller: Caller, rule: RuleConfig) -> RuleInfo:
    if engine.get(rule.name) is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, f"there is already a rule {rule.name!r}")
    _check_levels(gateway, rule)
    _check_references(gateway, engine, rule)
    try:
        created = engine.add(rule)
    except (AdapterError, ValueError) as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    log.info("rule %s created through the API by %s", rule.name, caller.name)
    return _info(created)


@router.put(
    "/rules/{name}",
    summary="Replace a rule (its counters start over)",
    responses={**_NOT_FOUND, **_BAD},
)
async def replace_rule(
    engine: Engine, gateway: Gw, caller: Caller, name: str, rule: RuleConfig
) -> RuleInfo:
    _rule(engine, name)
    if rule.name != name:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST, f"the body names rule {rule.name!r}, the path {name!r}"
        )
    _check_levels(gateway, rule)
    _check_references(gateway, engine, rule)
    try:
        replaced = engine.update(rule)
    except (AdapterError, ValueError) as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    log.info("rule %s replaced through the API by %s", name, caller.name)
    return _info(replaced)


async def _enable(engine: RuleEngine, caller: Caller, name: str, enabled: bool) -> RuleInfo:
    _rule(engine, name)
    try:
        rule = engine.enable(name, enabled)
    except (AdapterError, ValueError) as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    log.info("rule %s %s through the API by %s", name,
             "enabled" if enabled else "disabled", caller.name)  # fmt: skip
    return _info(rule)


@router.post("/rules/{name}/enable", summary="Enable a rule", responses=_NOT_FOUND)
async def enable_rule(engine: Engine, caller: Caller, name: str) -> RuleInfo:
    return await _enable(engine, caller, name, True)


@router.post("/rules/{name}/disable", summary="Disable a rule", responses=_NOT_FOUND)
async def disable_rule(engine: Engine, caller: Caller, name: str) -> RuleInfo:
    return await _enable(engine, caller, name, False)


@router.delete(
    "/rules/{name}",
    summary="Delete a rule",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_NOT_FOUND,
)
async def delete_rule(engine: Engine, caller: Caller, name: str) -> Response:
    if not engine.delete(name):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no rule {name!r}")
    log.info("rule %s deleted through the API by %s", name, caller.name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


class RuleSample(BaseModel):
    """A sample message (or, with ``event``, a broker event's columns). A message's
    unknown fields are refused (a typo would test the default silently); an event's
    columns are any fields."""

    model_config = ConfigDict(extra="allow")

    event: str = Field(
        default="message.publish",
        max_length=64,
        description="`message.publish`, or an event such as `client.connected` (its other"
        " columns as extra fields).",
    )
    topic: str = Field(default="", max_length=65535)
    payload: Any = Field(default="", description="Text, or any JSON value (sent as JSON).")
    qos: int = Field(default=0, ge=0, le=2)
    retain: bool = False
    clientid: str = Field(default="", max_length=65535)
    username: str | None = None
    peername: str | None = None
    user_properties: dict[str, str] = Field(default_factory=dict)
    origin: str = Field(
        default="mqtt", max_length=64, description="The publisher's protocol (`origin`)."
    )

    @model_validator(mode="after")
    def _message_fields_only(self) -> Self:
        unknown = sorted(self.model_extra or ()) if self.event == "message.publish" else []
        if unknown:
            known = ", ".join(name for name in type(self).model_fields if name != "event")
            raise PydanticCustomError(
                "extra_forbidden",
                "unknown field(s) of a message sample: {unknown} (a message has {known};"
                ' an event\'s columns go with "event")',
                {"unknown": ", ".join(unknown), "known": known},
            )
        return self


class RuleTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: str = Field(max_length=65535, description="The statement to test.")
    sample: RuleSample = Field(default_factory=RuleSample)


class RuleTestResult(BaseModel):
    matched: bool = Field(description="FROM matched the sample and WHERE was true.")
    output: dict[str, Any] | None = Field(description="What the actions would receive.")
    reason: str | None = Field(default=None, description="Why it did not match.")
    error: str | None = Field(default=None, description="Evaluating the statement failed.")


@router.post(
    "/rules/test",
    summary="Run a statement on a sample message, without actions",
    responses={400: {"description": "The statement does not parse (detail: where)"}},
)
async def test_rule(engine: Engine, test: RuleTest) -> RuleTestResult:
    try:
        result = engine.test(test.sql, test.sample.model_dump())
    except RuleSyntaxError as exc:
        raise HTTPException(
            status.HTTP_400_BAD_REQUEST,
            {"message": str(exc), "position": exc.pos, "line": exc.line, "column": exc.column},
        ) from None
    except (ValidationError, ValueError, TypeError, RecursionError) as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    if result.get("output") is not None:
        # as the actions write it: bytes as base64 text, inf/NaN as null
        result["output"] = json.loads(to_json(result["output"]))
    return RuleTestResult(**result)
