"""The mapping entries the ZeroMQ and NNG adapters share, before each narrows them.

``zmq_to_mqtt`` / ``nng_to_mqtt`` entries are ``InboundMapping`` s, ``mqtt_to_zmq`` /
``mqtt_to_nng`` entries ``OutboundMapping`` s. Each adapter's ``config.py`` subclasses
them, narrowing ``socket`` and ``frames`` to what its library offers and setting the
class constants below (socket roles, URL schemes, the metadata key of the native topic);
the checks across keys live here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, ValidationInfo, model_validator

from gateway.config.errors import FieldProblems
from gateway.config.files import checks_files, ipc_bind_problem
from gateway.config.introspect import Loc
from gateway.config.models.adapter_base import (
    check_codec,
    check_filter_template,
    check_topic_template,
)
from gateway.config.models.base import ConfigModel, doc_default
from gateway.config.models.bridges import check_captures
from gateway.config.values import DurationSpec
from gateway.mapping import TopicTemplate

__all__ = [
    "MULTIPART",
    "PREFIX",
    "RAW",
    "Endpoints",
    "InboundMapping",
    "OutboundMapping",
    "SocketMapping",
    "check_endpoints",
    "check_mappings",
    "mapping_names_as_written",
]

MULTIPART = "multipart"
PREFIX = "prefix"
RAW = "raw"

#: One URL or a list of them.
Endpoints = str | tuple[str, ...]

_PAYLOAD_FIELDS = ("payload.", "key.")
_MQTT_TOPIC = "mqtt.topic"


def _urls(value: Endpoints | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def check_endpoints(
    connect: Endpoints | None,
    bind: Endpoints | None,
    schemes: frozenset[str],
    context: Any = None,
) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems with ``connect`` / ``bind``: exactly one given, known schemes; with the
    file checks (``edgebus check``, ``run``), an ``ipc://`` path to bind whose directory
    does not exist or cannot be written."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if (connect is None) == (bind is None):
        problems.append(((), "give exactly one of connect or bind"))
    known = ", ".join(f"{s}://" for s in sorted(schemes))
    for key, value in (("connect", connect), ("bind", bind)):
        urls = _urls(value)
        if value is not None and not urls:
            problems.append(((key,), "expected at least one URL"))
        for i, url in enumerate(urls):
            scheme = urlsplit(url).scheme
            if scheme not in schemes or "://" not in url:
                where: tuple[str | int, ...] = (key,) if isinstance(value, str) else (key, i)
                problems.append((where, f"expected a URL starting with {known}, got {url!r}"))
            elif key == "bind" and scheme == "ipc" and checks_files(context):
                problem = ipc_bind_problem(Path(url.removeprefix("ipc://")))
                if problem is not None:
                    at: Loc = (key,) if isinstance(value, str) else (key, i)
                    problems.append((at, f"cannot bind {url}: {problem}"))
    return problems


def _written(value: Any) -> Any:
    """A ``connect`` / ``bind`` value as written (a YAML list) in its validated shape."""
    return tuple(value) if isinstance(value, list) else value


def check_mappings(
    inbound: tuple[InboundMapping, ...], outbound: tuple[OutboundMapping, ...], keys: str
) -> None:
    """An adapter has at least one mapping, and its mapping names are unique."""
    if not inbound and not outbound:
        raise ValueError(f"expected at least one entry in {keys}")
    names = [m.name for m in (*inbound, *outbound) if m.name is not None]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"mapping names must be unique: {', '.join(duplicates)}")


def mapping_names_as_written(
    data: Mapping[str, Any], failed: frozenset[str], inbound: str, outbound: str
) -> list[tuple[Loc, str]]:
    """``check_mappings``' unique names when a key of the adapter has a problem (its
    check does not run then): the names as written."""
    names: list[str] = []
    for key in (inbound, outbound):
        entries = data.get(key)
        for entry in entries if isinstance(entries, list | tuple) else ():
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if isinstance(name, str):
                names.append(name)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return [((), f"mapping names must be unique: {', '.join(duplicates)}")]
    return []


class SocketMapping(ConfigModel):
    """What both directions have; an adapter's mixin of its own narrows ``frames`` and
    sets the class constants below for both of its directions."""

    #: Socket types that answer or ask (request/response), per adapter.
    REQUEST_SOCKETS: ClassVar[frozenset[str]] = frozenset()
    #: URL schemes the library speaks.
    SCHEMES: ClassVar[frozenset[str]] = frozenset()
    #: The metadata key holding the native topic (``zmq.topic``, ``nng.topic``).
    TOPIC_KEY: ClassVar[str] = ""

    socket: str = Field(description="Socket type.")
    connect: Endpoints | None = Field(
        default=None,
        description="URL (or list of URLs) to connect to (NNG: dial), e.g."
        " `tcp://127.0.0.1:5556`, `ipc:///run/robot.sock`. Reconnects by itself.",
    )
    bind: Endpoints | None = Field(
        default=None,
        description="URL (or list of URLs) to bind (NNG: listen). Exactly one of `connect`"
        " and `bind`. An `ipc://` path's directory must exist; an address a listener, the"
        " API or another `bind` of the file uses is an error.",
    )
    frames: str = Field(
        default=MULTIPART,
        description="Frame layout: `multipart` (`[topic, payload]`, ZeroMQ only), `prefix`"
        " (one frame `topic + delimiter + payload`: NanoMQ's `sub_pre`/`pub_pre` and its"
        " NNG bridge format) or `raw` (the whole message is the payload).",
    )
    delimiter: str = Field(
        default="",
        json_schema_extra=doc_default('`""`'),
        description="`prefix` layout: the bytes between topic and payload (NanoMQ's NNG"
        " bridge: `/`). Empty: the topic is the `subscribe` prefix the message starts with.",
    )
    codec: Annotated[str, AfterValidator(check_codec)] = Field(
        default="raw",
        description="Payload codec of the MQTT side (`raw`, `json`, `base64`, `hex`); sets"
        " the content type.",
    )
    high_water_mark: int = Field(
        default=100_000,
        ge=1,
        description="Messages the socket queues per peer and direction before it blocks or"
        " drops (ZeroMQ SNDHWM/RCVHWM; NNG send/receive buffer, at most 8192).",
    )
    timeout: Annotated[float, DurationSpec(gt=0)] = Field(
        default=10.0,
        description="Request/response sockets: how long a request waits for its reply.",
    )
    max_inflight: int = Field(
        default=64,
        ge=1,
        description="Request/response sockets that allow it (`dealer`, `router`, `req0`,"
        " `rep0`): requests waiting for replies at once.",
    )

    @model_validator(mode="before")
    @classmethod
    def _raw_for_requests(cls, data: Any) -> Any:
        """Request/response sockets carry bare payloads unless told otherwise."""
        if (
            isinstance(data, dict)
            and "frames" not in data
            and isinstance(data.get("socket"), str)
            and data["socket"] in cls.REQUEST_SOCKETS
        ):
            return {**data, "frames": RAW}
        return data

    name: str | None = Field(
        default=None,
        description="Name of this mapping in the adapter's counters (`<name>.received`, ...);"
        " null: `<list>[<index>]`, e.g. `zmq_to_mqtt[0]`.",
    )

    def urls(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(connect URLs, bind URLs)."""
        return _urls(self.connect), _urls(self.bind)

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        if failed & {"connect", "bind"}:
            return []
        connect, bind = _written(data.get("connect")), _written(data.get("bind"))
        return check_endpoints(connect, bind, cls.SCHEMES, context)

    def _problems(self, context: Any) -> list[tuple[tuple[str | int, ...], str]]:
        problems = check_endpoints(self.connect, self.bind, self.SCHEMES, context)
        if "delimiter" in self.model_fields_set and self.delimiter and self.frames != PREFIX:
            problems.append((("delimiter",), "only the prefix frame layout has a delimiter"))
        return problems


class InboundMapping(SocketMapping):
    """Native messages to MQTT: one socket, its messages published to `to_mqtt`."""

    subscribe: tuple[str, ...] = Field(
        default=("",),
        description='Subscriber sockets: topic prefixes to subscribe to (`""`: everything).',
        json_schema_extra=doc_default('`[""]`'),
    )
    to_mqtt: Annotated[str, AfterValidator(check_topic_template)] = Field(
        description="Topic template of the MQTT messages, e.g. `robots/{zmq.topic}`"
        " (`{nng.topic}` for NNG); `payload.` fields of a JSON payload work too."
    )
    qos: Literal[0, 1, 2] = Field(default=1, description="QoS of the MQTT messages.")
    retain: bool = Field(default=False, description="Publish with the retain flag.")
    response_topic: str | None = Field(
        default=None,
        description="Reply sockets: the MQTT topic responders publish their replies to;"
        " null: `edgebus/replies/<type>/<adapter>/<mapping>`.",
    )

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        problems = super().checks_as_written(data, failed, context)
        to_mqtt = data.get("to_mqtt")
        if not failed & {"to_mqtt", "frames", "socket"} and isinstance(to_mqtt, str):
            default = RAW if data.get("socket") in cls.REQUEST_SOCKETS else MULTIPART
            frames = data.get("frames", cls.model_fields["frames"].default or default)
            problems += cls._to_mqtt_problems(to_mqtt, frames)
        return problems

    @classmethod
    def _to_mqtt_problems(cls, to_mqtt: str, frames: str) -> list[tuple[Loc, str]]:
        problems: list[tuple[Loc, str]] = []
        fields = TopicTemplate(to_mqtt).fields
        if frames == RAW and cls.TOPIC_KEY in fields:
            problems.append((("to_mqtt",), f"the raw layout carries no topic: {{{cls.TOPIC_KEY}}}"))
        unknown = [f for f in fields if f != cls.TOPIC_KEY and not f.startswith(_PAYLOAD_FIELDS)]
        if unknown:
            names = ", ".join(f"{{{f}}}" for f in unknown)
            problems.append(
                (
                    ("to_mqtt",),
                    f"{names} is not available: expected {{{cls.TOPIC_KEY}}} or `payload.` fields",
                )
            )
        return problems

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Self:
        problems = self._problems(info.context)
        subscriber = self.socket in ("sub", "sub0")
        if self.subscribe != ("",) and not subscriber:
            problems.append((("subscribe",), f"a {self.socket} socket does not subscribe"))
        if (
            self.frames == PREFIX
            and not self.delimiter
            and not (subscriber and all(self.subscribe))
        ):
            problems.append(
                (
                    ("delimiter",),
                    "the prefix layout needs a delimiter, or a subscriber socket whose"
                    " subscribe prefixes (non-empty) are the topics",
                )
            )
        problems += self._to_mqtt_problems(self.to_mqtt, self.frames)
        if self.response_topic is not None and self.socket not in self.REQUEST_SOCKETS:
            problems.append((("response_topic",), f"a {self.socket} socket sends no requests"))
        if self.response_topic is not None:
            try:
                TopicTemplate(self.response_topic)
            except ValueError as exc:
                problems.append((("response_topic",), str(exc)))
            else:
                if "{" in self.response_topic:
                    problems.append((("response_topic",), "expected a topic, not a template"))
        if problems:
            raise FieldProblems(problems)
        return self

    def needs_payload_fields(self) -> bool:
        return any(f.startswith(_PAYLOAD_FIELDS) for f in TopicTemplate(self.to_mqtt).fields)


class OutboundMapping(SocketMapping):
    """MQTT messages to native: those matching `from_mqtt`, sent on one socket."""

    from_mqtt: Annotated[str, AfterValidator(check_filter_template)] = Field(
        description="Filter template of the MQTT messages to send, e.g."
        " `cmd/{robot}/{rest#}`; `{name}` captures one level, `{name#}` the rest."
    )
    topic: Annotated[str, AfterValidator(check_topic_template)] = Field(
        default="{mqtt.topic}",
        description="Topic template of the native messages: the captures of `from_mqtt`,"
        " `{mqtt.topic}`, or `payload.` fields of a JSON payload.",
    )
    qos: Literal[0, 1, 2] = Field(default=1, description="QoS of the MQTT subscription.")

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        problems = super().checks_as_written(data, failed, context)
        written = {key: data.get(key) for key in ("socket", "from_mqtt", "topic") if key in data}
        if not failed & {"socket", "from_mqtt", "topic"} and "from_mqtt" in written:
            problem = cls.model_construct(**written)._topic_problem()
            if problem is not None:
                problems.append((("topic",), problem))
        return problems

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> Self:
        problems = self._problems(info.context)
        topic_problem = self._topic_problem()
        if topic_problem is not None:
            problems.append((("topic",), topic_problem))
        if problems:
            raise FieldProblems(problems)
        return self

    def _topic_problem(self) -> str | None:
        """What is wrong with ``topic``: a field other than ``{mqtt.topic}`` and the
        ``payload.`` ones that ``from_mqtt`` does not capture (the bridges' check, over
        those fields). An adapter narrows it for its own socket types."""
        named = [
            f
            for f in TopicTemplate(self.topic).fields
            if f != _MQTT_TOPIC and not f.startswith(_PAYLOAD_FIELDS)
        ]
        try:
            check_captures(self.from_mqtt, "/".join(f"{{{f}}}" for f in named) or None, "from_mqtt")
        except ValueError as exc:
            return str(exc)
        return None

    def needs_payload_fields(self) -> bool:
        return any(f.startswith(_PAYLOAD_FIELDS) for f in TopicTemplate(self.topic).fields)
