"""Load a configuration file: YAML -> :class:`GatewayConfig`, or every problem at once.

``parse_model`` is the whole pipeline and knows no section: it reads the YAML
(``yaml_source``), validates it against a model class, and renders the problems of both
steps, sorted by line, into one ``ConfigError``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from broker_core.errors import ConfigError
from gateway.config.errors import Problem, format_path, problems_from_validation_error
from gateway.config.introspect import Loc
from gateway.config.models import GatewayConfig
from gateway.config.yaml_source import YamlDocument, read_yaml

__all__ = ["dump_config", "load_config", "load_config_document", "parse_config", "parse_model"]

ModelT = TypeVar("ModelT", bound=BaseModel)


def _restates(problem: Problem, unresolved: set[Loc]) -> bool:
    """True when ``problem`` is about a value whose ``${VAR}`` was not resolved."""
    return any(problem.path[:end] in unresolved for end in range(len(problem.path) + 1))


def _validate(
    model: type[ModelT],
    text: str,
    filename: str,
    env: Mapping[str, str] | None,
    context: Mapping[str, object] | None,
) -> tuple[ModelT, YamlDocument]:
    document = read_yaml(text, filename, os.environ if env is None else env)
    problems = list(document.problems)
    data = {} if document.data is None else document.data
    try:
        config = model.model_validate(data, context=context)
    except ValidationError as exc:
        found = problems_from_validation_error(exc, model, document.line_of)
        problems += [problem for problem in found if not _restates(problem, document.unresolved)]
    if problems:
        problems.sort(key=lambda problem: problem.line)
        lines = [_render(problem, filename, document) for problem in problems]
        raise ConfigError("\n".join(lines), lines)
    return config, document


def _render(problem: Problem, filename: str, document: YamlDocument) -> str:
    """``problem.render``, or ``file: path (default): ...`` for a key the file lacks."""
    if problem.path and problem.path[:1] not in document.lines:
        return f"{filename}: {format_path(problem.path)} (default): {problem.message}"
    return problem.render(filename)


def parse_model(
    model: type[ModelT],
    text: str,
    filename: str,
    *,
    env: Mapping[str, str] | None = None,
    context: Mapping[str, object] | None = None,
) -> ModelT:
    """Validate YAML ``text`` against ``model``; ``filename`` names it in messages.

    ``${NAME}`` references are looked up in ``env`` (default: ``os.environ``);
    ``context`` is pydantic's validation context (``gateway.config.files.FILE_CHECKS``
    also checks the files the configuration names). Raises ``ConfigError`` listing every
    problem, one line each, in file order.
    """
    return _validate(model, text, filename, env, context)[0]


def parse_config(
    text: str, filename: str = "<string>", *, env: Mapping[str, str] | None = None
) -> GatewayConfig:
    """Parse the text of a configuration file; see :func:`parse_model`."""
    return parse_model(GatewayConfig, text, filename, env=env)


def _read_text(filename: str) -> str:
    try:
        raw = Path(filename).read_bytes()
    except OSError as exc:
        line = f"{filename}: cannot read the configuration file: {exc.strerror or exc}"
        raise ConfigError(line, [line]) from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = f"{filename}: not UTF-8 text (invalid byte at offset {exc.start})"
        raise ConfigError(line, [line]) from exc


def load_config(
    path: str | os.PathLike[str] | None, *, env: Mapping[str, str] | None = None
) -> GatewayConfig:
    """Load the configuration file at ``path``; ``None`` gives the embedded defaults.

    Messages name the file as ``path`` was given. Raises ``ConfigError``.
    """
    return load_config_document(path, env=env)[0]


def load_config_document(
    path: str | os.PathLike[str] | None,
    *,
    env: Mapping[str, str] | None = None,
    context: Mapping[str, object] | None = None,
) -> tuple[GatewayConfig, YamlDocument | None]:
    """:func:`load_config` with the parsed file (its lines); None for the defaults."""
    if path is None:
        try:
            return GatewayConfig.model_validate({}, context=context), None
        except ValidationError as exc:
            found = problems_from_validation_error(exc, GatewayConfig, lambda _: 0)
            lines = [f"{format_path(p.path)} (default): {p.message}" for p in found]
            raise ConfigError("\n".join(lines), lines) from exc
    filename = os.fspath(path)
    return _validate(GatewayConfig, _read_text(filename), filename, env, context)


def dump_config(config: BaseModel) -> str:
    """``config`` as YAML that loads back into an equal model.

    Secrets (``keyfile_password``) are written in clear: the output is a configuration
    file, to be stored like one.
    """
    data = config.model_dump(mode="json", context={"reveal_secrets": True})
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
