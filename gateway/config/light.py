"""The configuration ``edgebus run`` holds: validated by the schema in a short-lived child
process, kept in the gateway as light read-only objects (docs/performance.md, "Start-up
memory").

pydantic and the schema's models are ~9 MB of a running gateway's memory, a third of
what it needs to serve. ``validate_for_run`` forks before either is imported; the child
runs the one loader (``gateway.config.validate_config``: the same checks, the same
messages with file, line and YAML path as ``edgebus check``), turns the validated,
defaulted models into :class:`ConfigView` trees, sends them back through a pipe
(``marshal``: the gateway loads no ``pickle`` either), then exits. The gateway reads
the same attribute names it would read on the models (``config.listeners[0].bind.port``);
secrets are :class:`Secret` (``get_secret_value()``, as pydantic's ``SecretStr``); bind
addresses, paths, networks are the schema's own value types, none of which imports
pydantic.

When components (adapters, bridges, the stream log) or rules are configured, the models
are loaded in the gateway itself: their own code reads them with methods of the models, and
they pay for heavier libraries anyway. So does any failure of the child that is not a
configuration problem: the in-process loader then reports it as it always did.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, cast

from broker_core.errors import ConfigError
from gateway.config.address import BindAddress
from gateway.config.shown import format_path, line_of

if TYPE_CHECKING:
    from gateway.config.introspect import Loc
    from gateway.config.models import GatewayConfig

__all__ = [
    "ConfigView",
    "RunConfig",
    "Secret",
    "same_config",
    "validate_for_run",
    "view_of",
    "where",
]


class Secret:
    """A secret value, shown as ``**********``: pydantic's ``SecretStr`` in a view."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Secret, (self._value,))


class ConfigView:
    """One validated section as plain data: its fields under the model's attribute names,
    read-only. ``model_dump`` and ``model_copy`` do what the model's do (the API's
    ``/config`` dumps it as JSON, a reload and the rule engine copy with updates)."""

    __slots__ = ("_fields", "_json", "_kind")

    _kind: str
    _fields: dict[str, Any]
    _json: dict[str, Any]

    def __init__(self, kind: str, fields: dict[str, Any], json: dict[str, Any]) -> None:
        """``kind``: the model's class name; ``json``: the JSON form of the fields that
        hold no view (a duration as ``"30s"``, a secret masked), as the model dumps it."""
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_fields", fields)
        object.__setattr__(self, "_json", json)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(f"{self._kind} has no field {name!r}") from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{self._kind} is read-only")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigView):
            return NotImplemented
        return self._kind == other._kind and self._fields == other._fields

    def __hash__(self) -> int:
        return hash((self._kind, tuple(self._fields.items())))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self._fields.items())
        return f"{self._kind}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConfigView, (self._kind, self._fields, self._json))

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The fields as a dict, nested sections as dicts; ``mode="json"``: as the model's
        JSON dump (secrets masked)."""
        return {
            name: _dump(value, self._json.get(name), mode) for name, value in self._fields.items()
        }

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> ConfigView:
        """A copy with the fields of ``update`` replaced (not validated, as the model's)."""
        update = dict(update or {})
        json = {name: value for name, value in self._json.items() if name not in update}
        for name, value in update.items():
            if not _holds_view(value):
                json[name] = _json_of(value)
        return ConfigView(self._kind, {**self._fields, **update}, json)


def _holds_view(value: object) -> bool:
    return isinstance(value, ConfigView) or (
        isinstance(value, tuple) and any(isinstance(item, ConfigView) for item in value)
    )


def _dump(value: object, json: object, mode: str) -> object:
    if isinstance(value, ConfigView):
        return value.model_dump(mode=mode)
    if isinstance(value, tuple) and _holds_view(value):
        return [_dump(item, None, mode) for item in value]
    return json if mode == "json" else value


def _json_of(value: object) -> object:
    """A plain value's JSON form, for ``model_copy``'s updates (booleans, numbers, text)."""
    if isinstance(value, Secret):
        return "**********"
    if isinstance(value, tuple | list):
        return [_json_of(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def view_of(model: Any) -> Any:
    """``model`` (a validated pydantic model) as a :class:`ConfigView` tree; run where
    pydantic is loaded (the child process, tests)."""
    return _view(model, model.model_dump(mode="json"))


def _view(value: Any, json: Any) -> Any:
    from pydantic import BaseModel, SecretStr

    if isinstance(value, BaseModel):
        fields: dict[str, Any] = {}
        plain: dict[str, Any] = {}
        json = json if isinstance(json, dict) else {}
        for name in type(value).model_fields:
            fields[name] = _view(getattr(value, name), json.get(name))
            if not _holds_view(fields[name]):
                plain[name] = json.get(name)
        return ConfigView(type(value).__name__, fields, plain)
    if isinstance(value, tuple | list):
        items = json if isinstance(json, list) and len(json) == len(value) else [None] * len(value)
        return tuple(_view(item, item_json) for item, item_json in zip(value, items, strict=True))
    if isinstance(value, dict):
        json = json if isinstance(json, dict) else {}
        return {key: _view(item, json.get(key)) for key, item in value.items()}
    if isinstance(value, SecretStr):
        return Secret(value.get_secret_value())
    return value


def same_config(a: object, b: object) -> bool:
    """Whether two values of the configuration are equal, each a model or its view (a
    gateway started on views compares them with the models a reload loads)."""
    if "pydantic" in sys.modules:  # else neither holds a model
        a, b = _view(a, None), _view(b, None)
    return a == b


def where(filename: str | None, lines: Mapping[Loc, int] | None, path: Loc) -> str:
    """``edgebus.yaml:14 listeners[0].bind``; ``listeners[0].bind (default)`` for a key
    the file does not write (``lines``: the line of each path the file writes)."""
    if lines is None or path[:1] not in lines:
        shown = f"{format_path(path)} (default)"
        return shown if filename is None else f"{filename}: {shown}"
    return f"{filename}:{line_of(lines, path)} {format_path(path)}"


@dataclass(frozen=True)
class RunConfig:
    """What ``edgebus run`` starts with: the configuration (views, or the models when
    components are configured) and where its keys were written."""

    config: GatewayConfig
    #: the file as given; None for the embedded defaults
    filename: str | None
    #: the line of each path the file writes; None for the defaults
    lines: Mapping[Loc, int] | None

    def where(self, path: Loc) -> str:
        return where(self.filename, self.lines, path)


def _needs_models(config: GatewayConfig) -> bool:
    """Whether code that reads the models runs: components, rules (see the module doc)."""
    return bool(config.adapters or config.bridges or config.rules or config.stream.enabled)


def _encode(value: object) -> object:
    """``value`` (views and the schema's value types) as data ``marshal`` can carry: the
    parent then needs no ``pickle`` (~0.4 MB). Containers become tagged tuples; a type
    not listed raises ``TypeError`` (the parent then validates in its own process)."""
    if value is None or isinstance(value, str | int | float | bytes):  # bool is an int
        return value
    if isinstance(value, ConfigView):
        fields = {name: _encode(item) for name, item in value._fields.items()}
        return ("view", value._kind, fields, value._json)
    if isinstance(value, tuple):
        return ("tuple", tuple(_encode(item) for item in value))
    if isinstance(value, dict):
        return ("dict", {key: _encode(item) for key, item in value.items()})
    if isinstance(value, Secret):
        return ("secret", value.get_secret_value())
    if isinstance(value, PurePath):
        return ("path", str(value))
    if isinstance(value, BindAddress):
        return ("bind", value.host, value.port)
    if isinstance(value, IPv4Network | IPv6Network):
        return ("network", str(value))
    raise TypeError(f"no encoding for {type(value).__name__}")


def _decode(data: Any) -> Any:
    if not isinstance(data, tuple):
        return data
    tag = data[0]
    if tag == "view":
        return ConfigView(data[1], {name: _decode(item) for name, item in data[2].items()}, data[3])
    if tag == "tuple":
        return tuple(_decode(item) for item in data[1])
    if tag == "dict":
        return {key: _decode(item) for key, item in data[1].items()}
    if tag == "secret":
        return Secret(data[1])
    if tag == "path":
        return Path(data[1])
    if tag == "bind":
        return BindAddress(data[1], data[2])
    return ip_network(data[1])  # "network"


def _in_child(path: str | None) -> tuple[Any, ...]:
    """The child's answer: ``("ok", views, lines)``, ``("models",)`` when components are
    configured, ``("error", message, problems)``."""
    from gateway.config.validate import validate_config

    try:
        valid = validate_config(path)
    except ConfigError as exc:
        return ("error", str(exc), exc.problems)
    if _needs_models(valid.config):
        return ("models",)
    lines = None if valid.document is None else dict(valid.document.lines)
    return ("ok", _encode(view_of(valid.config)), lines)


def _ask_child(path: str | None) -> tuple[Any, ...] | None:
    """Fork, validate in the child, read its answer; None if it gave none."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer, then exit without running the parent's clean-up
        os.close(read_end)
        status = 0
        try:
            try:
                answer: tuple[Any, ...] = _in_child(path)
            except BaseException:  # reported by the parent's own loader
                import traceback

                answer = ("failed", traceback.format_exc())
            data = marshal.dumps(answer)
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        except BaseException:  # no answer: the parent validates in its own process
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer_pipe:
        data = answer_pipe.read()
    os.waitpid(pid, 0)
    if not data:
        return None
    answer = marshal.loads(data)  # our own child's answer, through our own pipe
    return None if answer[0] == "failed" else cast(tuple[Any, ...], answer)


def validate_for_run(path: str | os.PathLike[str] | None) -> RunConfig:
    """The configuration at ``path`` (None: the defaults), validated as
    ``gateway.config.validate_config`` does, for a gateway to run; raises ``ConfigError``
    with the same problems. See the module's doc for what it holds."""
    filename = None if path is None else os.fspath(path)
    answer = _ask_child(filename)
    if answer is not None and answer[0] == "error":
        raise ConfigError(answer[1], answer[2])
    if answer is not None and answer[0] == "ok":
        return RunConfig(cast("GatewayConfig", _decode(answer[1])), filename, answer[2])
    from gateway.config.validate import validate_config

    valid = validate_config(path)
    lines = None if valid.document is None else valid.document.lines
    return RunConfig(valid.config, filename, lines)
