"""The loader knows no section: a new model (here a list discriminated by ``type``,
the shape ``adapters`` will take) gets file/line/path errors and docs for free."""

from __future__ import annotations

import textwrap
from typing import Annotated, Literal

import pytest
from pydantic import Field

from gateway.config import ConfigError, ConfigModel, parse_model
from gateway.config.docgen import render_reference
from gateway.config.values import DurationSpec


class ZmqThing(ConfigModel):
    """A ZeroMQ adapter."""

    type: Literal["zmq"] = Field(description="Adapter type.")
    endpoint: str = Field(description="Where to connect.")


class DdsThing(ConfigModel):
    """A DDS adapter."""

    type: Literal["dds"] = Field(description="Adapter type.")
    domain: int = Field(default=0, ge=0, le=232, description="DDS domain id.")
    poll: Annotated[float, DurationSpec()] = Field(default=1.0, description="Poll interval.")


Thing = Annotated[ZmqThing | DdsThing, Field(discriminator="type")]


class Root(ConfigModel):
    """A future top level."""

    adapters: tuple[Thing, ...] = Field(default=(), description="Adapters.")


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_model(Root, textwrap.dedent(text), "edgebus.yaml", env={})
    return caught.value.problems


def test_a_discriminated_list_loads() -> None:
    root = parse_model(
        Root,
        "adapters:\n  - {type: zmq, endpoint: 'tcp://a:1'}\n  - {type: dds, poll: 5s}\n",
        "edgebus.yaml",
    )
    assert isinstance(root.adapters[0], ZmqThing)
    assert isinstance(root.adapters[1], DdsThing)
    assert root.adapters[1].poll == 5.0


def test_errors_inside_a_discriminated_item_name_the_yaml_path() -> None:
    text = """\
        adapters:
          - type: zmq
            endpont: tcp://a:1
          - type: dds
            domain: 300
            pol: 1s
          - type: someip
          - endpoint: x
        """
    assert problems(text) == [
        # the required 'endpoint', misspelt: the unknown key's line only
        "edgebus.yaml:3 adapters[0]: unknown key 'endpont'; did you mean 'endpoint'?",
        "edgebus.yaml:5 adapters[1].domain: expected at most 232, got 300",
        "edgebus.yaml:6 adapters[1]: unknown key 'pol'; did you mean 'poll'?",
        "edgebus.yaml:7 adapters[2].type: expected one of zmq, dds, got 'someip'",
        "edgebus.yaml:8 adapters[3]: missing required key 'type'",
    ]


def test_the_reference_documents_each_variant() -> None:
    text = render_reference(Root)
    assert "| `adapters` | list of mappings, by `type` | `[]` | Adapters. |" in text
    assert "## `adapters[]` (`type: zmq`)" in text
    assert "## `adapters[]` (`type: dds`)" in text
    assert "| `adapters[].domain` | integer, 0 to 232 | `0` | DDS domain id. |" in text
