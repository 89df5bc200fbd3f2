"""Configuration of the ``dds`` adapter, and the DDS settings the ``ros2`` adapter shares.

Imports no cyclonedds: the models validate without the native library. Shared with
``adapters/ros2/config.py``: ``DdsQos`` (reliability, durability, history, deadline,
lifespan), ``DdsQosProfile`` (a named ``DdsQos``), ``DdsNetworkConfig`` (interfaces,
peers, multicast, or a whole Cyclone DDS configuration) and ``check_profiles``.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from xml.sax.saxutils import quoteattr

from pydantic import AfterValidator, Field, PrivateAttr, ValidationError, model_validator

from gateway.config.errors import FieldProblems
from gateway.config.models.adapter_base import (
    AdapterConfigBase,
    check_filter_template,
    check_topic_template,
)
from gateway.config.models.base import ConfigModel, valid_as_written, valid_items
from gateway.config.values import DurationSpec, PathSpec
from gateway.mapping import TopicTemplate

__all__ = [
    "AUTO",
    "DdsAdapterConfig",
    "DdsNetworkConfig",
    "DdsQos",
    "DdsQosProfile",
    "DdsToMqtt",
    "FromMqttOptions",
    "IdlSchema",
    "MqttToDds",
    "QosChoice",
    "ToMqttOptions",
    "TypeUse",
    "check_profiles",
    "idl_problems",
    "is_pattern",
    "member_problem",
    "sources_digest",
]

#: ``type: auto``: the type is discovered on the network (XTypes).
AUTO = "auto"

_TYPE_NAME = re.compile(r"^(::)?[A-Za-z_][A-Za-z0-9_]*((::|\.)[A-Za-z_][A-Za-z0-9_]*)*$")
_PATTERN = re.compile(r"[*?\[]")

FilterTemplateText = Annotated[str, AfterValidator(check_filter_template)]
TopicTemplateText = Annotated[str, AfterValidator(check_topic_template)]
Seconds = Annotated[float, DurationSpec(gt=0)]


def is_pattern(topic: str) -> bool:
    """True when a DDS topic name is a glob pattern (``*``, ``?``, ``[...]``)."""
    return _PATTERN.search(topic) is not None


def _check_type_name(value: str) -> str:
    if value != AUTO and not _TYPE_NAME.match(value):
        raise ValueError(f"expected an IDL type name like Module::Type, or auto, got {value!r}")
    return value.lstrip(":").replace(".", "::")


def _check_dds_topic(value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"expected a DDS topic name without spaces, got {value!r}")
    return value


TypeName = Annotated[str, AfterValidator(_check_type_name)]
DdsTopic = Annotated[str, AfterValidator(_check_dds_topic)]


class DdsQos(ConfigModel):
    """DDS QoS of a reader or writer; a key left out (null) comes from the profile."""

    reliability: Literal["reliable", "best_effort"] | None = Field(
        default=None,
        description="`reliable` (default; a reliable reader does not match a best-effort"
        " writer) or `best_effort`.",
    )
    durability: Literal["volatile", "transient_local"] | None = Field(
        default=None,
        description="`volatile` (default) or `transient_local`: a writer keeps its last"
        " samples for late-joining readers, and a reader asks writers for them.",
    )
    history: Annotated[int, Field(ge=1)] | Literal["all"] | None = Field(
        default=None,
        description="History depth: keep the last N samples per instance, or `all` (the"
        " default: readers and writers keep every sample until it is delivered, within"
        " `max_samples`).",
    )
    max_samples: int | None = Field(
        default=None,
        ge=1,
        description="Samples a reader or writer holds at most (default 10 000); a full"
        " reliable reader slows its writers down instead of losing samples.",
    )
    deadline: Seconds | None = Field(
        default=None,
        description="Deadline: the longest expected gap between samples of an instance;"
        " null: none.",
    )
    lifespan: Seconds | None = Field(
        default=None,
        description="Lifespan: how long a written sample stays valid; null: forever.",
    )

    def over(self, base: DdsQos) -> DdsQos:
        """This QoS with its unset keys taken from ``base``."""
        merged = {
            name: getattr(self, name) if getattr(self, name) is not None else getattr(base, name)
            for name in DdsQos.model_fields
        }
        return DdsQos(**merged)


class DdsQosProfile(DdsQos):
    """A named DDS QoS, used by mappings through `qos_profile`."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="Name mappings use in `qos_profile`.",
    )


class DdsNetworkConfig(ConfigModel):
    """Where Cyclone DDS talks: interfaces, peers, multicast. With nothing set, Cyclone's
    own configuration applies (`CYCLONEDDS_URI` or its defaults)."""

    interfaces: tuple[str, ...] = Field(
        default=(),
        description="Network interfaces to use, by name (`eth0`, `lo`) or address; empty:"
        " Cyclone chooses.",
    )
    peers: tuple[str, ...] = Field(
        default=(),
        description="Unicast discovery peers (addresses or host names), for networks"
        " without multicast.",
    )
    allow_multicast: bool | None = Field(
        default=None,
        description="Use multicast (discovery and data); null: Cyclone's default (on).",
    )
    config: str | None = Field(
        default=None,
        description="A whole Cyclone DDS configuration (XML text or a `file://` URI) used"
        " instead of the keys above.",
    )

    @property
    def configured(self) -> bool:
        return bool(
            self.interfaces or self.peers or self.allow_multicast is not None or self.config
        )

    def cyclone_xml(self, domain_id: int) -> str | None:
        """The Cyclone DDS configuration of the domain; None: Cyclone's own."""
        if self.config is not None:
            return self.config
        if not self.configured:
            return None
        general: list[str] = []
        if self.interfaces:
            items = "".join(
                f"<NetworkInterface address={quoteattr(i)}/>"
                if _looks_like_address(i)
                else f"<NetworkInterface name={quoteattr(i)}/>"
                for i in self.interfaces
            )
            general.append(f"<Interfaces>{items}</Interfaces>")
        if self.allow_multicast is not None:
            general.append(
                f"<AllowMulticast>{'true' if self.allow_multicast else 'false'}</AllowMulticast>"
            )
        parts = [f"<General>{''.join(general)}</General>"] if general else []
        if self.peers:
            peers = "".join(f"<Peer address={quoteattr(p)}/>" for p in self.peers)
            parts.append(f"<Discovery><Peers>{peers}</Peers></Discovery>")
        return (
            '<CycloneDDS xmlns="https://cdds.io/config">'
            f'<Domain id="{domain_id}">{"".join(parts)}</Domain></CycloneDDS>'
        )


def _looks_like_address(text: str) -> bool:
    return bool(re.match(r"^[0-9.]+$", text)) or ":" in text


class QosChoice(ConfigModel):
    """The DDS QoS of a mapping's reader or writer: a profile, and keys over it."""

    qos_profile: str | None = Field(
        default=None,
        description="Name of a `qos_profiles` entry; null: the one named `default`, if any.",
    )
    dds_qos: DdsQos | None = Field(
        default=None, description="DDS QoS keys over the profile's (`history: 50`, ...)."
    )


class ToMqttOptions(QosChoice):
    """How samples become MQTT messages (shared by `dds_to_mqtt` and `ros_to_mqtt`)."""

    qos: Literal[0, 1, 2] = Field(default=1, description="MQTT QoS of the messages.")
    retain: bool = Field(default=False, description="Publish with the retain flag.")
    payload: Literal["json", "cdr"] = Field(
        default="json",
        description="`json` through the IDL codec, or `cdr`: the serialized sample as it"
        " came (with its encapsulation header).",
    )


class FromMqttOptions(QosChoice):
    """How MQTT messages become samples (shared by `mqtt_to_dds` and `mqtt_to_ros`)."""

    qos: Literal[0, 1, 2] = Field(default=1, description="QoS of the MQTT subscription.")
    payload: Literal["json", "cdr"] = Field(
        default="json",
        description="`json` (checked against the type) or `cdr` (a serialized sample with"
        " its encapsulation header, checked too).",
    )
    strict: bool = Field(
        default=True,
        description="JSON must name every member and no other; false: missing members take"
        " their defaults and unknown ones are ignored.",
    )


class DdsToMqtt(ToMqttOptions):
    """Samples of a DDS topic published as MQTT messages."""

    from_dds: DdsTopic = Field(
        description="DDS topic name, or a glob pattern (`vehicle/*`) matching every"
        " discovered topic it fits."
    )
    type: TypeName = Field(
        description="IDL type (`Module::Type`, from `idl_files`), or `auto`: rebuilt from"
        " the writer's XTypes type information."
    )
    to_mqtt: TopicTemplateText = Field(
        description="MQTT topic template: `{dds.topic}`, `{dds.type}`, and members of the"
        " sample (`vehicle/{vin}/speed`, `{pose.position.x}`)."
    )


class MqttToDds(FromMqttOptions):
    """MQTT messages written as samples to a DDS topic."""

    from_mqtt: FilterTemplateText = Field(
        description="MQTT filter template; `{name}` captures one level, `{name#}` the rest."
    )
    to_dds: TopicTemplateText = Field(
        description="DDS topic name; may use the captures (`vehicle_{vin}_cmd`)."
    )
    type: TypeName = Field(
        description="IDL type (`Module::Type`), or `auto`: taken from a discovered reader"
        " of the topic."
    )

    @model_validator(mode="after")
    def _topic(self) -> Self:
        if is_pattern(self.to_dds):
            raise FieldProblems([(("to_dds",), "a DDS topic to write cannot be a pattern")])
        return self


def check_profiles(
    profiles: Sequence[DdsQosProfile],
    mappings: Iterable[tuple[str, Sequence[ConfigModel]]],
    builtin: Iterable[str] = (),
) -> None:
    """Profile names are unique and every `qos_profile` names one (or a built-in)."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    seen: set[str] = set()
    for index, profile in enumerate(profiles):
        if profile.name in seen:
            problems.append((("qos_profiles", index, "name"), f"duplicate {profile.name!r}"))
        seen.add(profile.name)
    known = seen | set(builtin)
    for section, entries in mappings:
        for index, entry in enumerate(entries):
            name = getattr(entry, "qos_profile", None)
            if name is not None and name not in known:
                choices = ", ".join(sorted(known)) or "none defined"
                problems.append(
                    ((section, index, "qos_profile"), f"unknown profile {name!r} ({choices})")
                )
    if problems:
        raise FieldProblems(problems)


Problems = list[tuple[tuple[str | int, ...], str]]

#: The metadata a ``to_mqtt`` template may name besides the sample's members.
_META = ("dds.topic", "dds.type")


def idl_problems(
    idl_files: Sequence[Path],
    include_dirs: Sequence[Path],
    dds_to_mqtt: Sequence[DdsToMqtt | None],
    mqtt_to_dds: Sequence[MqttToDds | None],
) -> Problems:
    """What keeps the adapter from starting with these IDL files, as ``(path, message)``:
    a file that cannot be read, IDL errors (with the IDL file, line and column), a mapping
    ``type`` the files do not declare or that the adapter would refuse at start (a union
    Cyclone DDS misreads, ``idl_codegen.cyclone_limits``: the same function the adapter
    asks, naming the IDL file declaring the union), a ``to_mqtt`` template naming a member
    the type does not have. Only the IDL parser runs (pure Python; no cyclonedds). A None
    mapping (one with problems of its own) is not checked. A file with errors does not
    keep the mappings from being checked against the other files' types, in the same run
    (``IdlSchema.compile``)."""
    uses = [
        TypeUse((section, index), entry.type, f"DDS type {entry.type!r}",
                entry.to_mqtt if isinstance(entry, DdsToMqtt) else None)
        for section, entries in (("dds_to_mqtt", dds_to_mqtt), ("mqtt_to_dds", mqtt_to_dds))
        for index, entry in enumerate(entries)
        if entry is not None and entry.type != AUTO
    ]
    schema = IdlSchema.compile(idl_files, include_dirs, idl_files)
    return schema.problems + schema.use_problems(
        uses, _META, lambda use, choices: f"unknown DDS type {use.type!r} ({choices})"
    )


@dataclass(frozen=True, slots=True)
class TypeUse:
    """A mapping's DDS type, for ``IdlSchema.use_problems``: the mapping's YAML path
    (``("dds_to_mqtt", 0)``), the DDS type name, how messages call it (``DDS type
    'a::S'``) and the mapping's ``to_mqtt`` template (None: none to check)."""

    at: tuple[str | int, ...]
    type: str
    shown: str
    to_mqtt: str | None = None


@dataclass(slots=True)
class IdlSchema:
    """IDL files parsed for a configuration check (``idl_problems``, and the ``ros2``
    adapter's), or the problems that kept them from parsing. Only the IDL parser runs
    (pure Python; no cyclonedds)."""

    schema: Any = None  # idl_codegen.model.Schema; None when problems kept it from parsing
    declared_in: dict[str, str] = field(default_factory=dict)  # type -> file, as shown
    problems: Problems = field(default_factory=list)
    #: The files left out of ``schema`` because they (or a file they include) have errors,
    #: as problems name them: a type they may declare is not known.
    left_out: list[str] = field(default_factory=list)
    left_out_paths: set[Path] = field(default_factory=set)  # the same, resolved

    @classmethod
    def compile(
        cls,
        files: Sequence[Path],
        include_dirs: Sequence[Path],
        idl_files: Sequence[Path],
        made: Mapping[Path, tuple[tuple[str | int, ...], str]] | None = None,
    ) -> IdlSchema:
        """Parses ``files`` (``#include`` searched in ``include_dirs``). ``idl_files``,
        the files of the configuration among them, are checked to exist first; an IDL
        error is reported at the YAML path of the one it is in (``idl_files[1]``; else
        ``idl_files``). ``made``: files made from others (the ``ros2`` adapter's
        converted ``msg_files``), by resolved path: the YAML path and the name an error
        in one is reported with. When some files have errors, the others are still
        parsed (together, as the adapter would), so that the mappings are checked against
        their types in the same run (``left_out``: the files without their types)."""
        from idl_codegen.diagnostics import IdlErrors  # the parser: imported when needed
        from idl_codegen.frontend import compile_idl
        from idl_codegen.model import Schema

        problems: Problems = []
        for index, file in enumerate(idl_files):
            if not file.is_file():
                why = "is not a file" if file.exists() else "no such file"
                problems.append((("idl_files", index), f"cannot read {str(file)!r}: {why}"))
        missing = [file for file in idl_files if not file.is_file()]
        files = [file for file in files if file not in missing]
        shown = [str(file) for file in missing]
        remaining = list(files)
        errors: list[Any] = []
        while remaining:
            try:
                compiled = compile_idl(remaining, list(include_dirs))
                break
            except IdlErrors as exc:
                found = [_idl_problem(error, idl_files, made) for error in exc.errors]
                if errors:  # found once files with errors were left out: said so
                    found = [(at, f"{text} (checked without {', '.join(shown)})")
                             for at, text in found]
                problems += found
                errors = exc.errors
            except (OSError, UnicodeDecodeError) as exc:
                problems.append((("idl_files",), f"cannot read the IDL: {exc}"))
                return cls(problems=problems)
            broken = _files_in_error(remaining, include_dirs, errors)
            if not broken:  # an error no file can be blamed for: no types known
                return cls(problems=problems)
            remaining = [file for file in remaining if file not in broken]
            shown += [made[file.resolve()][1] if made and file.resolve() in made else str(file)
                      for file in broken]
        else:
            return cls(Schema(), problems=problems, left_out=shown,
                       left_out_paths={file.resolve() for file in files})
        schema = compiled.schema
        names: dict[str, str] = {}
        for source in compiled.files:  # the file as the configuration or #include names it
            names.setdefault(source.provenance, source.display)
        declared_in = {name: names.get(origin, origin) for name, origin in schema.origins.items()}
        left = {file.resolve() for file in files if file not in remaining}
        return cls(schema, declared_in, problems, shown, left)

    def use_problems(
        self,
        uses: Sequence[TypeUse],
        meta: Sequence[str],
        unknown: Callable[[TypeUse, str], str],
    ) -> Problems:
        """What the adapter would refuse at start in the mappings' ``uses`` of the parsed
        types: a type not declared (``unknown(use, "known: a::S, …")`` says so), a type
        using a union Cyclone DDS misreads (``idl_codegen.cyclone_limits``, the function
        the adapter asks), a ``to_mqtt`` template naming a member the type does not have
        (``meta``: the names it may use besides the members). With files ``left_out`` (their
        errors are reported), a type not declared in the others is said to be so "not
        counting" them, as they may declare it; when no file parsed, it is not reported."""
        from idl_codegen.cyclone_limits import cyclone_misreads
        from idl_codegen.model import EnumType, StructType, UnionType

        schema = self.schema
        if schema is None:
            return []
        known = {
            name: declared
            for name, declared in schema.types.items()
            if isinstance(declared, StructType | UnionType | EnumType)
        }
        problems: Problems = []
        for use in uses:
            at = (*use.at, "type")
            if use.type not in known:
                if self.left_out and not known:  # no file parsed: its error says enough
                    continue
                message = unknown(use, _type_choices(known))
                if self.left_out:  # it may be declared there: say so, not just "unknown"
                    message += (f"; not counting {', '.join(self.left_out)}, which cannot"
                                f" be parsed")
                problems.append((at, message))
                continue
            misread = cyclone_misreads(schema, use.type, self.declared_in)
            if misread is not None:  # the adapter would refuse it at start (codec.TypeSupport)
                problems.append((at, f"{use.shown} is not supported: {misread}"))
                continue
            if use.to_mqtt is None:
                continue
            for name in TopicTemplate(use.to_mqtt).fields:
                if name in meta:
                    continue
                path = name.partition(".")[2] if name.startswith(("payload.", "key.")) else name
                problem = member_problem(schema, use.type, path)
                if problem is not None:
                    problems.append(
                        ((*use.at, "to_mqtt"), f"topic template {use.to_mqtt!r}: {problem}")
                    )
        return problems


def _idl_problem(
    error: Any,
    idl_files: Sequence[Path],
    made: Mapping[Path, tuple[tuple[str | int, ...], str]] | None,
) -> tuple[tuple[str | int, ...], str]:
    """An ``IdlError`` as a problem at the YAML path of the file it is in (``IdlSchema``)."""
    at: tuple[str | int, ...] = ("idl_files",)
    text = str(error)
    with contextlib.suppress(OSError, ValueError):
        path = Path(error.file).resolve()
        if made and path in made:
            at, name = made[path]
            text = f"{name}:{error.line}:{error.column}: {error.message}"
        else:
            at = ("idl_files", [p.resolve() for p in idl_files].index(path))
    return at, text


def _files_in_error(
    files: Sequence[Path], include_dirs: Sequence[Path], errors: Sequence[Any]
) -> list[Path]:
    """The ``files`` that ``errors`` are in: the file itself or a file it ``#include``s
    (only the preprocessor runs, for each file alone)."""
    from idl_codegen.diagnostics import Diagnostics
    from idl_codegen.preprocess import Preprocessor

    where: set[Path] = set()
    for error in errors:
        with contextlib.suppress(OSError, ValueError):
            where.add(Path(error.file).resolve())
    broken: list[Path] = []
    for file in files:
        try:
            read = Preprocessor(include_dirs, Diagnostics()).run([file]).files
        except (OSError, ValueError):
            read = []
        if file.resolve() in where or any(source.path.resolve() in where for source in read):
            broken.append(file)
    return broken


#: How many type names an unknown ``type`` lists.
_SHOWN_TYPES = 8


def _type_choices(known: Mapping[str, Any]) -> str:
    """``known: a::S, a::T, … (3 more)``: the structs (the usual topic types) first, then
    the unions and enums, at most ``_SHOWN_TYPES``."""
    from idl_codegen.model import StructType

    structs = sorted(name for name, declared in known.items() if isinstance(declared, StructType))
    others = sorted(name for name in known if name not in set(structs))
    names = [*structs, *others]
    if not names:
        return "none: add idl_files"
    shown = ", ".join(names[:_SHOWN_TYPES])
    more = len(names) - _SHOWN_TYPES
    return f"known: {shown}, … ({more} more)" if more > 0 else f"known: {shown}"


def profile_problems_as_written(
    model: type[ConfigModel],
    data: Mapping[str, Any],
    failed: frozenset[str],
    context: Any,
    sections: Sequence[tuple[str, type[ConfigModel]]],
    builtin: Iterable[str] = (),
) -> Problems:
    """``check_profiles`` when another key of the adapter has a problem: the profiles, if
    valid, against the mappings that are valid themselves."""
    if "qos_profiles" in failed:
        return []
    try:
        profiles = valid_as_written(model, "qos_profiles", data, context)
        check_profiles(
            profiles,
            [(key, valid_items(entry, data.get(key), context)) for key, entry in sections],
            builtin,
        )
    except ValidationError:
        return []
    except FieldProblems as exc:
        return list(exc.problems)
    return []


def member_problem(schema: Any, type_name: str, path: str) -> str | None:
    """Why ``path`` (``a.b.2.c``) does not name a member of ``type_name`` in ``schema``
    (an ``idl_codegen.model.Schema``), or None."""
    from idl_codegen.model import ArrayType, NamedType, SequenceType, StructType, UnionType

    current: Any = schema.types[type_name]
    for part in path.split("."):
        if isinstance(current, NamedType):
            current = schema.types[current.name]
        current = schema.resolve(current) if not isinstance(current, StructType) else current
        if isinstance(current, StructType):
            found = next((m for m in schema.all_members(current) if m.name == part), None)
            if found is None:
                return f"{current.name} has no member {part!r}"
            current = schema.resolve(found.type)
        elif isinstance(current, UnionType):
            case = next((c for c in current.cases if c.name == part), None)
            if part != "discriminator" and case is None:
                return f"{current.name} has no member {part!r}"
            current = schema.resolve(case.type if case else current.discriminator)
        elif isinstance(current, SequenceType | ArrayType) and part.isdigit():
            current = schema.resolve(current.element)
        else:
            return f"{part!r} is not a member (in {path!r})"
    return None


def sources_digest(paths: Iterable[Path]) -> str:
    """A digest of the files' contents (missing files count as empty), so that a reload
    restarts an adapter whose IDL changed even when its configuration did not."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\x00missing")
    return digest.hexdigest()


class DdsAdapterConfig(AdapterConfigBase):
    """The `dds` adapter: DDS topics (Cyclone DDS) to MQTT and back, IDL loaded at start."""

    type: Literal["dds"] = Field(description="Adapter type.")
    domain_id: int = Field(default=0, ge=0, le=232, description="DDS domain id.")
    partitions: tuple[str, ...] = Field(
        default=(), description="DDS partitions of the adapter's readers and writers."
    )
    idl_files: tuple[Annotated[Path, PathSpec()], ...] = Field(
        default=(), description="IDL files loaded at start (and on reload) for the `type`s."
    )
    include_dirs: tuple[Annotated[Path, PathSpec()], ...] = Field(
        default=(), description="Directories searched by `#include` in the IDL files."
    )
    network: DdsNetworkConfig = Field(
        default_factory=DdsNetworkConfig, description="Cyclone DDS network settings."
    )
    qos_profiles: tuple[DdsQosProfile, ...] = Field(
        default=(),
        description="Named DDS QoS; the one named `default`, if any, applies to every"
        " mapping without a `qos_profile`.",
    )
    dds_to_mqtt: tuple[DdsToMqtt, ...] = Field(
        default=(), description="DDS topics published to MQTT."
    )
    mqtt_to_dds: tuple[MqttToDds, ...] = Field(
        default=(), description="MQTT messages written to DDS topics."
    )
    discovery_timeout: Seconds = Field(
        default=5.0, description="How long to wait for a discovered type's description."
    )
    max_writers: int = Field(
        default=256,
        ge=1,
        description="DDS writers `mqtt_to_dds` creates at most (topics built from captures);"
        " messages for further topics are dropped and counted.",
    )
    _digest: str = PrivateAttr(default="")

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> Problems:
        """The profile and IDL checks when another key has a problem: the profiles and
        files, against the mappings that are valid themselves."""
        sections = (("dds_to_mqtt", DdsToMqtt), ("mqtt_to_dds", MqttToDds))
        problems = profile_problems_as_written(cls, data, failed, context, sections)
        if failed & {"idl_files", "include_dirs"}:
            return problems
        try:
            idl_files = valid_as_written(cls, "idl_files", data, context)
            include_dirs = valid_as_written(cls, "include_dirs", data, context)
        except ValidationError:
            return problems
        return problems + idl_problems(
            idl_files,
            include_dirs,
            valid_items(DdsToMqtt, data.get("dds_to_mqtt"), context),
            valid_items(MqttToDds, data.get("mqtt_to_dds"), context),
        )

    @model_validator(mode="after")
    def _check(self) -> Self:
        problems: Problems = []
        if not self.dds_to_mqtt and not self.mqtt_to_dds:
            problems.append(((), "expected at least one mapping in dds_to_mqtt or mqtt_to_dds"))
        try:
            check_profiles(
                self.qos_profiles,
                [("dds_to_mqtt", self.dds_to_mqtt), ("mqtt_to_dds", self.mqtt_to_dds)],
            )
        except FieldProblems as exc:
            problems += exc.problems
        # on every validation (check, run, reload): an IDL that cannot be used fails here,
        # with the configuration's other errors, not at start with a backoff
        problems += idl_problems(
            self.idl_files, self.include_dirs, self.dds_to_mqtt, self.mqtt_to_dds
        )
        if problems:
            raise FieldProblems(problems)
        self._digest = sources_digest(self.idl_files)
        return self

    def profile(self, name: str | None) -> DdsQos:
        """The named profile (or `default`'s, or the built-in default when not defined)."""
        wanted = name or "default"
        for profile in self.qos_profiles:
            if profile.name == wanted:
                return DdsQos(**profile.model_dump(exclude={"name"}))
        return DdsQos()
