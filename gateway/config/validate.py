"""``validate_config``: everything ``edgebus run`` refuses, found before it starts.

``edgebus check FILE`` prints what it finds; ``edgebus run`` calls it first and starts
nothing (no data directory, database or API key) when it finds a problem. It loads the
file with the schema's checks and the file checks of ``gateway.config.files`` (TLS
certificates, keys and CA bundles, the password file, the data directory, the API key
file): every problem at once, each with file, line and YAML path.

Warnings do not stop anything: sections this release validates but does not run
(``inactive_sections``), which the gateway also logs when it starts, and settings a
profile changes (``profile_warnings``: QoS 2 toward AWS IoT Core, sent as QoS 1), and a
rule's names that differ only by case from a column (``rule_warnings``: ``Topic``, NULL
since names keep their case), which the rule engine also logs when it installs the rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.components import registry
from gateway.config.light import where

if TYPE_CHECKING:
    from gateway.config.introspect import Loc
    from gateway.config.models import GatewayConfig
    from gateway.config.yaml_source import YamlDocument

__all__ = [
    "ValidConfig",
    "inactive_sections",
    "profile_warnings",
    "rule_warnings",
    "validate_config",
]

_DOCS = {"bridges": "bridges", "stream": "spark"}


def inactive_sections(config: GatewayConfig) -> list[tuple[Loc, str]]:
    """``(path, message)`` for each configured section this release does not run:
    ``(("bridges",), "configured (cloud) but not run by this release; see ...")``."""
    configured: dict[str, list[str]] = {section: [] for section in _DOCS}
    for section, name in registry.specs_from_config(config)[1]:  # types not registered
        configured[section].append(name)
    return [
        (
            (section,),
            f"configured ({', '.join(names)}) but not run by this release;"
            f" see docs/{_DOCS[section]}.md",
        )
        for section, names in configured.items()
        if names
    ]


def profile_warnings(config: GatewayConfig) -> list[tuple[Loc, str]]:
    """What runs, but not as written: a bridge's QoS 2 toward AWS IoT Core, sent as 1."""
    return [
        (("bridges", index, *path), message)
        for index, bridge in enumerate(config.bridges)
        for path, message in bridge.warnings()
    ]


def rule_warnings(config: GatewayConfig) -> list[tuple[Loc, str]]:
    """What runs, but likely not as meant: a rule's name differing only by case from a
    column (``gateway.rules.name_case``)."""
    if not config.rules:
        return []
    from gateway.rules.name_case import case_warnings
    from gateway.rules.parser import parse

    return [
        (("rules", index, *path), message)
        for index, rule in enumerate(config.rules)
        for path, message in case_warnings(rule.name, parse(rule.sql), rule.actions)
    ]


@dataclass(frozen=True)
class ValidConfig:
    """A configuration ``edgebus run`` can start with, and where its keys were written."""

    config: GatewayConfig
    #: the file as given; None for the embedded defaults
    filename: str | None
    document: YamlDocument | None

    def where(self, path: Loc) -> str:
        """``edgebus.yaml:14 listeners[0].bind``; ``listeners[0].bind (default)`` for a
        key the file does not write."""
        return where(self.filename, None if self.document is None else self.document.lines, path)

    @property
    def empty(self) -> bool:
        """The file holds no YAML document (nothing, only comments, or null): the
        embedded defaults. A start serves them; a reload refuses such a file."""
        return self.document is not None and self.document.data is None

    def warnings(self) -> list[str]:
        """One line per warning, each naming file, line and path."""
        empty = (
            [f"{self.filename}: warning: the file is empty: the embedded defaults apply"
             " (a reload of a running gateway refuses it)"]
            if self.empty
            else []
        )  # fmt: skip
        return empty + [
            f"{self.where(path)}: warning: {message}"
            for path, message in [
                *inactive_sections(self.config),
                *profile_warnings(self.config),
                *rule_warnings(self.config),
            ]
        ]


def validate_config(
    path: str | os.PathLike[str] | None, *, env: Mapping[str, str] | None = None
) -> ValidConfig:
    """The configuration at ``path`` (None: the defaults), checked as ``run`` uses it.

    Raises ``ConfigError`` listing every problem; reads files, writes none.
    """
    from gateway.config.files import FILE_CHECKS  # the schema: imported when validating
    from gateway.config.loader import load_config_document

    config, document = load_config_document(path, env=env, context=FILE_CHECKS)
    return ValidConfig(config, None if path is None else os.fspath(path), document)
