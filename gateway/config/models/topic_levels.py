"""Component filters against ``mqtt.max_topic_levels``, found before anything runs.

A client's SUBSCRIBE deeper than ``mqtt.max_topic_levels`` gets SUBACK 0x8F, and a
PUBLISH deeper than it 0x90 (``broker_core.subscribe``, ``Broker.publish_checked``). The
filters components subscribe to are the same trie's nodes, so a configuration naming
one deeper than the bound is refused where every other configuration problem is: by
``edgebus check``, at start-up and reload (``GatewayConfig``, against the file's own
``mqtt.max_topic_levels``; a reload also against the running broker's, since ``mqtt``
changes take a restart), and by the API that creates components (``POST``/``PUT
/bridges``, ``/rules``: 422 naming the field), against the running broker's. At run time
``HubClient.check_subscribe`` refuses such a filter too, for filters no configuration
names (a ZeroMQ subscriber's on demand).

What counts (``local_filters``), each with its YAML path below the section's entry:

- an adapter: every field validated as a filter template (``check_filter_template``:
  ``from_mqtt``, a loopback ``source``), as the topic filter it subscribes to; and, by
  the adapters' naming convention, a ``from_mqtt`` topic template (SOME/IP: rendered
  with numbers, one level each) and a ``response_topic`` (replies it subscribes to);
- a bridge: ``forwards[].local``; a subscription's local topic (its ``local`` template,
  or with none the remote topics themselves, so the ``remote`` filter): every message
  it brings in is published there, and refused when it is deeper than the bound;
- a rule: the topic filters of its ``FROM`` (``sql``; ``$events/`` sources are events);
- the stream log: ``stream.topics`` when it is enabled.

Webhooks add no filter: their ``topics`` are matched against events the broker reports,
not subscribed to.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel

from broker_core.mqtt.topics import SHARE_PREFIX, abbreviate
from gateway.config.models.adapter_base import check_filter_template
from gateway.mapping import FilterTemplate

__all__ = [
    "component_filter_problems",
    "filter_levels",
    "gateway_filter_problems",
    "local_filters",
    "too_deep_message",
]

Loc = tuple[str | int, ...]
Problems = list[tuple[Loc, str]]


def filter_levels(topic_filter: str) -> int:
    """Levels of ``topic_filter`` as the broker counts them: of the filter a
    ``$share/<group>/`` filter shares."""
    if topic_filter.startswith(SHARE_PREFIX):
        _, _, topic_filter = topic_filter[len(SHARE_PREFIX) :].partition("/")
    return topic_filter.count("/") + 1


def too_deep_message(
    topic_filter: str, max_levels: int, what: str = "filter", levels: int | None = None
) -> str | None:
    """Why ``topic_filter`` cannot be subscribed to here, or None when it can;
    ``levels``: the levels it counts, when not ``filter_levels(topic_filter)``."""
    if levels is None:
        levels = filter_levels(topic_filter)
    if levels <= max_levels:
        return None
    return (
        f"the {what} {abbreviate(topic_filter)} has {levels} levels, more than"
        f" mqtt.max_topic_levels ({max_levels})"
    )


def _filter_template_field(annotation: Any, metadata: list[Any]) -> bool:
    """True when a field is validated by ``check_filter_template`` (possibly optional)."""
    if any(isinstance(m, AfterValidator) and m.func is check_filter_template for m in metadata):
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        args = get_args(annotation)
        return _filter_template_field(args[0], list(args[1:]))
    if origin is Union or origin is types.UnionType:
        return any(_filter_template_field(arg, []) for arg in get_args(annotation))
    return False


#: Adapter fields naming a topic (or topic template) subscribed to, by convention: MQTT
#: to native (``from_mqtt``), replies of MQTT responders (``response_topic``).
_SUBSCRIBED_TOPICS = ("from_mqtt", "response_topic")


def _template_filters(model: BaseModel, at: Loc) -> Iterator[tuple[Loc, str, str]]:
    """``(path, topic filter, what)`` of every filter-template field in ``model`` and every
    topic it subscribes to (``_SUBSCRIBED_TOPICS``), recursively (models, lists and
    mappings of models)."""
    for name, field in type(model).model_fields.items():
        value = getattr(model, name, None)
        if isinstance(value, str):
            if _filter_template_field(field.annotation, field.metadata):
                try:
                    yield (*at, name), FilterTemplate(value).topic_filter, "filter"
                except ValueError:
                    continue  # reported by the field's own validator
            elif name in _SUBSCRIBED_TOPICS:
                yield (*at, name), value, "topic"  # each {field} one level at least
        else:
            yield from _nested_filters(value, (*at, name))


def _nested_filters(value: Any, at: Loc) -> Iterator[tuple[Loc, str, str]]:
    if isinstance(value, BaseModel):
        yield from _template_filters(value, at)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if isinstance(item, BaseModel):
                yield from _template_filters(item, (*at, index))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, BaseModel) and isinstance(key, str):
                yield from _template_filters(item, (*at, key))


def _bridge_filters(bridge: Any) -> Iterator[tuple[Loc, str, str, int]]:
    for index, forward in enumerate(bridge.forwards):
        topic_filter = FilterTemplate(forward.local).topic_filter
        yield ("forwards", index, "local"), topic_filter, "filter", filter_levels(topic_filter)
    for index, subscription in enumerate(bridge.subscriptions):
        if subscription.local is not None:
            # Each {field} renders at least one level: the fewest levels it can publish to.
            local = subscription.local
            yield (
                ("subscriptions", index, "local"),
                local,
                "local topic template",
                local.count("/") + 1,
            )
        else:
            remote = FilterTemplate(subscription.remote).topic_filter
            # Its messages keep their remote topics here; a trailing # may match no level.
            what = "remote filter (with no `local`, its messages keep their topics here)"
            if remote.endswith("/#"):
                remote = remote[:-2]
                what = what[:-1] + ", without its trailing #)"
            yield ("subscriptions", index, "remote"), remote, what, filter_levels(remote)


def local_filters(section: str, item: Any) -> Iterator[tuple[Loc, str, str, int]]:
    """``(path below the entry, topic filter, what it is, its levels)`` of what the entry
    ``item`` of ``section`` (``adapters``, ``bridges``, ``rules``) subscribes to locally;
    see the module."""
    if section == "bridges":
        yield from _bridge_filters(item)
    elif section == "rules":
        for source in item.sources():
            if not source.startswith("$events/"):
                yield ("sql",), source, "FROM filter", filter_levels(source)
    elif isinstance(item, BaseModel):
        for path, topic_filter, what in _template_filters(item, ()):
            yield path, topic_filter, what, filter_levels(topic_filter)


def component_filter_problems(section: str, item: Any, max_levels: int) -> Problems:
    """``(path below the entry, message)`` for each filter of ``item`` (an entry of
    ``section``) deeper than ``max_levels``."""
    problems: Problems = []
    for path, topic_filter, what, levels in local_filters(section, item):
        message = too_deep_message(topic_filter, max_levels, what, levels)
        if message is not None:
            problems.append((path, message))
    return problems


def gateway_filter_problems(
    sections: Mapping[str, Any], max_levels: int, stream: Any = None
) -> Problems:
    """``(path from the top of the file, message)`` for every component filter of
    ``sections`` (``{"adapters": (...), "bridges": (...), "rules": (...)}``) and of an
    enabled ``stream`` deeper than ``max_levels``."""
    problems: Problems = []
    for section, items in sections.items():
        for index, item in enumerate(items):
            found = component_filter_problems(section, item, max_levels)
            problems += [((section, index, *path), message) for path, message in found]
    if stream is not None and stream.enabled:
        for index, topic_filter in enumerate(stream.topics):
            message = too_deep_message(topic_filter, max_levels)
            if message is not None:
                problems.append((("stream", "topics", index), message))
    return problems
