"""Generate docs/configuration.md from the configuration models.

    python -m gateway.config.docgen > docs/configuration.md
    python -m gateway.config.docgen --check docs/configuration.md   # exit 1 if stale

Every key gets a row: its YAML path, type, default and the field's description. A field
without a description is a bug and stops the generator. The output is deterministic,
and a unit test fails when the committed reference differs from it.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import typing
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr, TypeAdapter
from pydantic.fields import FieldInfo

from gateway.config.introspect import (
    discriminator_of,
    field_annotation,
    is_model,
    literal_values,
    nullable_members,
    resolve_lazy,
    strip_annotated,
)
from gateway.config.models import GatewayConfig
from gateway.config.values import BindAddress

__all__ = ["main", "render_reference"]

GENERATOR = "python -m gateway.config.docgen"

INTRO = """\
# Configuration reference

edgebus reads one YAML file: `edgebus run -c edgebus.yaml`. Without `-c` it runs on the
embedded defaults listed below: MQTT on 127.0.0.1:1883, MQTT over WebSocket on
127.0.0.1:8083 (path `/mqtt`), state in `./edgebus-data`. Every key is optional unless
marked *required*; [`examples/edgebus.yaml`](../examples/edgebus.yaml) uses every section.

## Errors

The file is checked completely before anything starts, and every problem is reported at
once, one line each, naming the file, the line and the key's YAML path:

```text
edgebus.yaml:4 listeners[0].type: expected one of tcp, tls, ws, wss, got 'tpc'
edgebus.yaml:8 listeners[1]: unknown key 'alow_anonymous'; did you mean 'allow_anonymous'?
edgebus.yaml:11 listeners[2]: missing required key 'bind'
edgebus.yaml:27 mqtt.max_qos: expected 0, 1 or 2, got 3
```

Unknown keys are errors, with the nearest valid key suggested. Duplicate keys are errors
too (plain YAML would silently keep the last one). Where a key takes either a value or a
mapping (a SOME/IP method: an id, or a mapping with `id` and more), a mapping gets the
problems of the mapping form only, and any other value one line naming both forms
(`expected a mapping or an integer, got 'abc'`).

Checks between keys run in the same pass as the checks of each key, so fixing what one
run reports does not reveal more in the next: a mapping with a bad `codec` still has its
`connect`/`bind` and its topic template checked, an adapter with a bad `domain_id` its
IDL files and types, and names (`adapters[].name`, ...) are checked for duplicates even
when an entry has a problem. Only the checks that need a key with a problem of its own
are left out (a `topic` is not checked against a `from_mqtt` that is not valid).

An address is bound once: two listeners, a listener and the API, or an adapter's `bind`
(`tcp://host:port`, NNG's `ws://host:port/path`, or the same `ipc://` path) and a
listener, the API or another adapter's `bind` on the same port and address (or the
wildcard `0.0.0.0` / `*`) are an error naming both places, instead of an adapter that
fails to start and retries. An `ipc://` path to bind must be in a directory that exists
and can be written (ZeroMQ and NNG create the socket file, not its directory).

The files the configuration names are checked with it: every TLS listener's certificate,
key (with its `keyfile_password`) and CA bundle are loaded, the password file is read
(a bad line is named `passwd:3: problem`), and the data directory, the API key file and
the log file must be usable. Every bridge's `tls` files (`cafile`, `certfile`,
`keyfile` with its `keyfile_password`) and every webhook's `cafile` are loaded too: one
that is missing or not PEM, or an encrypted key without its password (never asked for
on the terminal), is an error here, for a bridge whether `enabled` or not, although at
run time it would only leave that bridge degraded. `edgebus check FILE` reports all of
that without starting anything, and warns about configured components whose type this
release does not run and about an empty file (no YAML document: the embedded defaults,
which a start serves and a reload refuses); `edgebus run` checks the same before it
writes anything. YAML
syntax errors name the line and column, with a hint (`line 3 is indented more than line 2, ...`).

## Values

- **Durations** are written `500ms`, `30s`, `5m`, `1h`, `7d`, or combined (`1h30m`); a
  plain number is seconds (`10`, `2.5`). Keys keep natural names (`interval: 10s`); in
  Python the value is a float of seconds (`config.sys.interval == 10.0`).
- **Sizes** are written `512B`, `64KB`, `1MB`, `2GB` (powers of 1000) or `512KiB`,
  `64MiB`, `1GiB` (powers of 1024); units are case-insensitive; a plain integer is
  bytes. In Python the value is an int of bytes (`config.mqtt.max_packet_size ==
  1000000`).
- **Paths** are relative to the working directory edgebus runs in.
- **Names** (type `name`: the `name` of an adapter, bridge, rule or webhook) are 1 to
  64 letters, digits, `_`, `.` or `-`, starting with a letter or digit: `cloud`,
  `front-door_2`. They appear in client ids, metrics and API paths.
- **Addresses** (`bind`) are `host:port`, IPv6 literals in brackets: `[::1]:1883`.
  Port 0 lets the system choose a free port. No two listeners, nor a listener and
  `api.bind`, may share a port on the same address or where one of them is the wildcard
  of the other's IP version (`0.0.0.0:1883` takes `127.0.0.1:1883`; `[::]` sockets are
  IPv6-only, so `0.0.0.0` and `[::]` do not clash; `localhost` is 127.0.0.1 and ::1).
- **Environment variables**: `${NAME}` in a string value is replaced by the variable
  `NAME`, `${NAME:-default}` falls back to `default` when `NAME` is unset or empty, and
  `$${` is a literal `${`. An unset variable without a default is an error naming its
  line. The result is text, converted to the key's type like any quoted value
  (`max_qos: ${QOS}` with `QOS=1` gives the integer 1). Keep secrets such as passwords
  in variables: `keyfile_password: ${TLS_KEY_PASSWORD}`.
- **Choices** are written as the tables show them, quoted or not: `protocol_version: 5`
  and `protocol_version: "5"` are the same, and so are `min_version: 1.3` and
  `min_version: "1.3"` (YAML reads the unquoted ones as numbers); `max_qos: "1"` is the
  integer 1.
- **Empty sections**: a section key with nothing under it (`mqtt:`) means the section's
  defaults, and so does a list or mapping key with nothing under it (`rules:`,
  `acl: {rules: }`, `headers:`); `null` in an optional key means unset.
- YAML anchors, aliases and `<<` merge keys work as usual.

In the tables, `listeners[]` stands for every item of the `listeners` list.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _bounds(kind: str, metadata: Sequence[object]) -> str:
    lower: object = None
    upper: object = None
    lower_op = upper_op = ""
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            lower, lower_op = item.ge, ">="
        elif isinstance(item, annotated_types.Gt):
            lower, lower_op = item.gt, ">"
        elif isinstance(item, annotated_types.Le):
            upper, upper_op = item.le, "<="
        elif isinstance(item, annotated_types.Lt):
            upper, upper_op = item.lt, "<"
    if lower is not None and upper is not None and lower_op == ">=" and upper_op == "<=":
        return f"{kind}, {_number(lower)} to {_number(upper)}"
    parts = [kind]
    if lower is not None:
        parts.append(f"{lower_op} {_number(lower)}")
    if upper is not None:
        parts.append(f"{upper_op} {_number(upper)}")
    return " ".join(parts)


def _min_length(metadata: Sequence[object]) -> int:
    for item in metadata:
        if isinstance(item, annotated_types.MinLen):
            return item.min_length
    return 0


def _plural(text: str) -> str:
    """``mapping`` -> ``mappings``, ``integer, 1 to 5`` -> ``integers, 1 to 5``,
    ``string (secret)`` -> ``strings (secret)``."""
    if text.startswith("one of "):
        return f"values, each {text}"
    cut = min(
        (
            i
            for i in (text.find(","), text.find(" or "), text.find(" >"), text.find(" ("))
            if i != -1
        ),
        default=len(text),
    )
    return f"{text[:cut]}s{text[cut:]}"


class _Reference:
    """Collects the sections of the reference, depth first in field order."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def type_text(
        self, annotation: object, path: str, nested: list[tuple[str, type[BaseModel], str]]
    ) -> str:
        bare, metadata = strip_annotated(resolve_lazy(annotation))
        members, nullable = nullable_members(bare)
        models = [strip_annotated(member)[0] for member in members]
        if len(models) > 1 and all(is_model(model) for model in models):
            key = discriminator_of(metadata) or "type"
            for model in typing.cast(list[type[BaseModel]], models):
                tags = literal_values(model.model_fields[key].annotation) or ("?",)
                nested.append((path, model, f"`{key}: {tags[0]}`"))
            text = f"mapping, by `{key}`"
        else:
            text = " or ".join(
                self._member_text(member, metadata, path, nested) for member in members
            )
        return f"{text} or null" if nullable else text

    def _member_text(
        self,
        member: object,
        outer: Sequence[object],
        path: str,
        nested: list[tuple[str, type[BaseModel], str]],
    ) -> str:
        bare, inner = strip_annotated(member)
        metadata = [*outer, *inner]
        for item in metadata:
            doc_type = getattr(item, "doc_type", None)
            if isinstance(doc_type, str):
                return doc_type
        values = literal_values(bare)
        if values is not None:
            return "one of " + ", ".join(f"`{value}`" for value in values)
        if is_model(bare):
            nested.append((path, typing.cast(type[BaseModel], bare), ""))
            return "mapping"
        origin = get_origin(bare)
        if origin in (tuple, list):
            items = [arg for arg in get_args(bare) if arg is not Ellipsis]
            prefix = "non-empty list" if _min_length(metadata) >= 1 else "list"
            return f"{prefix} of {_plural(self.type_text(items[0], path + '[]', nested))}"
        if origin is dict:
            key, value = get_args(bare)
            return (
                f"mapping of {self.type_text(key, path, nested)} to"
                f" {self.type_text(value, path, nested)}"
            )
        if bare is bool:
            return "bool"
        if bare is int:
            return _bounds("integer", metadata)
        if bare is float:
            return _bounds("number", metadata)
        if bare is str:
            return "non-empty string" if _min_length(metadata) >= 1 else "string"
        if bare is SecretStr:
            return "string (secret)"
        if bare is BindAddress:
            return "host:port"
        if isinstance(bare, type) and issubclass(bare, PurePath):
            return "path"
        raise TypeError(f"docgen: no type name for {bare!r} at {path}")

    def default_text(self, field: FieldInfo, path: str) -> str:
        extra = field.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("doc_default"), str):
            return str(extra["doc_default"])
        if field.is_required():
            return "*required*"
        if field.default_factory is not None:
            if field.default_factory_takes_validated_data:
                raise TypeError(f"docgen: {path} needs json_schema_extra doc_default")
            value: Any = field.default_factory()  # type: ignore[call-arg]
        else:
            value = field.default
        if isinstance(value, BaseModel):
            return "see below"
        adapter: TypeAdapter[Any] = TypeAdapter(typing.cast(Any, field_annotation(field)))
        shown = adapter.dump_python(value, mode="json")
        if shown is None:
            return "`null`"
        if isinstance(shown, bool):
            return f"`{str(shown).lower()}`"
        if isinstance(shown, list | tuple):
            return "`[]`" if not shown else f"`{list(shown)}`"
        if isinstance(shown, dict):
            return "`{}`" if not shown else f"`{shown}`"
        return f"`{shown}`"

    def section(self, model: type[BaseModel], prefix: str, title: str) -> None:
        self.out.append(f"## {title}\n")
        doc = inspect.getdoc(model)
        if doc and model.__doc__ and "__doc__" in model.__dict__:
            self.out.append(doc + "\n")
        self.out.append("| Key | Type | Default | Description |")
        self.out.append("| --- | --- | --- | --- |")
        nested: list[tuple[str, type[BaseModel], str]] = []
        for name, field in model.model_fields.items():
            path = f"{prefix}.{name}" if prefix else name
            if not field.description:
                raise TypeError(f"docgen: {model.__name__}.{name} has no description")
            type_text = self.type_text(field_annotation(field), path, nested)
            row = (
                f"`{path}`",
                type_text,
                self.default_text(field, path),
                field.description,
            )
            self.out.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
        self.out.append("")
        for path, child, label in nested:
            heading = f"`{path}`" + (f" ({label})" if label else "")
            self.section(child, path, heading)


def render_reference(root: type[BaseModel] = GatewayConfig) -> str:
    """The Markdown reference of ``root`` and every model below it."""
    reference = _Reference()
    reference.out.append(f"<!-- Generated by `{GENERATOR}`; do not edit by hand. -->\n")
    reference.out.append(INTRO)
    reference.section(root, "", "Top level")
    return "\n".join(reference.out).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reference to stdout, or with ``--check FILE`` compare it to FILE."""
    parser = argparse.ArgumentParser(prog=GENERATOR, description=__doc__)
    parser.add_argument("--check", metavar="FILE", help="exit 1 if FILE is not up to date")
    args = parser.parse_args(argv)
    text = render_reference()
    if args.check is None:
        sys.stdout.write(text)
        return 0
    current = Path(args.check).read_text(encoding="utf-8") if Path(args.check).exists() else ""
    if current != text:
        sys.stderr.write(f"{args.check} is stale; regenerate it with: {GENERATOR} > {args.check}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
