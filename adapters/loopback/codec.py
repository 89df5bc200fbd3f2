"""Pure conversion for the loopback adapter: a received Context to the one to publish."""

from __future__ import annotations

import json
from dataclasses import replace

from adapters.loopback.config import LoopbackMapping
from broker_core.context import Context, Origin
from gateway.mapping import FilterTemplate, MappingError, TopicTemplate, codec

__all__ = ["CompiledMapping", "republish"]


class CompiledMapping:
    """A mapping with its templates and codecs parsed once."""

    __slots__ = ("config", "decoder", "encoder", "source", "target")

    def __init__(self, config: LoopbackMapping) -> None:
        self.config = config
        self.source = FilterTemplate(config.source)
        self.target = TopicTemplate(config.target)
        self.decoder = codec(config.decode)
        self.encoder = codec(config.encode)


def republish(mapping: CompiledMapping, context: Context, origin: Origin) -> Context | None:
    """The Context to publish for ``context``; None when it does not match the source."""
    captures = mapping.source.match(context.topic)
    if captures is None:
        return None
    native = mapping.decoder.from_mqtt(context.payload)  # MQTT payload -> native bytes
    payload_obj = None
    if any(f.startswith(("payload.", "key.")) for f in mapping.target.fields):
        try:
            payload_obj = json.loads(native)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise MappingError(f"{context.topic}: payload fields need a JSON payload") from exc
    topic = mapping.target.render(captures, payload_obj)
    payload = mapping.encoder.to_mqtt(native)
    properties = context.properties
    if mapping.config.encode != mapping.config.decode or mapping.config.encode != "raw":
        properties = replace(
            properties,
            content_type=mapping.encoder.content_type,
            payload_format_indicator=1 if mapping.encoder.text else None,
        )
    return Context(
        topic,
        payload,
        min(context.qos, mapping.config.qos),
        context.retain and mapping.config.retain,
        properties,
        origin,
        {"loopback.source": context.topic},
    )
