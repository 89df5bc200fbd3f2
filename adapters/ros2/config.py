"""Configuration of the ``ros2`` adapter (imports no cyclonedds)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from adapters.dds.config import (
    AUTO,
    DdsNetworkConfig,
    DdsQos,
    DdsQosProfile,
    FromMqttOptions,
    IdlSchema,
    QosChoice,
    ToMqttOptions,
    TypeUse,
    check_profiles,
    profile_problems_as_written,
    sources_digest,
)
from adapters.ros2.codec import (
    WSTRING_REFUSED,
    dds_type,
    ros_type,
    service_types,
    wstring_member,
)
from gateway.config.errors import FieldProblems
from gateway.config.introspect import Loc
from gateway.config.models.adapter_base import (
    AdapterConfigBase,
    check_filter_template,
    check_topic_template,
)
from gateway.config.models.base import ConfigModel, valid_as_written, valid_items
from gateway.config.values import DurationSpec, PathSpec

__all__ = [
    "BUILTIN_IDL",
    "PROFILES",
    "READER_PROFILES",
    "MqttToRos",
    "MqttToRosService",
    "Ros2AdapterConfig",
    "RosServiceToMqtt",
    "RosToMqtt",
    "idl_problems",
    "msg_problems",
    "type_files",
]

#: The IDL of the built-in interfaces (``std_msgs``, ``geometry_msgs``, ...), by type:
#: ``std_msgs/msg/dds_/String_.idl``.
BUILTIN_IDL = Path(__file__).resolve().parent / "idl"

#: The ROS 2 QoS profiles (rclcpp / rclpy presets), by name.
PROFILES: dict[str, DdsQos] = {
    "default": DdsQos(reliability="reliable", durability="volatile", history=10),
    "sensor_data": DdsQos(reliability="best_effort", durability="volatile", history=5),
    "transient_local": DdsQos(reliability="reliable", durability="transient_local", history=1),
    "services_default": DdsQos(reliability="reliable", durability="volatile", history=10),
    "system_default": DdsQos(reliability="reliable", durability="volatile", history=1),
}

#: The profiles of the adapter's readers (``ros_to_mqtt``) where they differ: a latched
#: topic (``/tf_static``) may have several publishers, each keeping its last message for
#: late joiners; the reader keeps 100 as tf2's static listener does, so it gets each.
READER_PROFILES: dict[str, DdsQos] = {
    "transient_local": DdsQos(reliability="reliable", durability="transient_local",
                              history=100),
}

#: A ROS 2 name: tokens of letters, digits and underscores, not starting with a digit.
_NAME = re.compile(r"^~?/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")
#: A glob pattern over ROS 2 names (``/robot/*``, ``/*/cmd_vel``, ``/cam?/image``,
#: ``/arm_[lr]/joint_states``): levels of name characters, ``*``, ``?`` and ``[...]``.
_GLOB_LEVEL = r"(?:[A-Za-z0-9_*?]|\[!?[A-Za-z0-9_-]+\])+"
_GLOB = re.compile(rf"^/?{_GLOB_LEVEL}(/{_GLOB_LEVEL})*$")
_TYPE = re.compile(r"^[a-z][a-z0-9_]*/((msg|srv)/)?[A-Z][A-Za-z0-9]*$")

def msg_problems(msg_files: Sequence[Path]) -> list[tuple[tuple[str | int, ...], str]]:
    """What keeps the adapter from converting ``msg_files`` when it starts, as ``((index,),
    message)``: a path not laid out as ``PACKAGE/msg/Name.msg`` or ``PACKAGE/srv/Name.srv``,
    a file that cannot be read or is not UTF-8, and the ``.msg``/``.srv`` errors of
    ``idl_codegen.ros_msg`` (``file:line:column: message``). Only that parser runs (pure
    Python; no cyclonedds, no rclpy); nothing is written."""
    if not msg_files:
        return []
    from idl_codegen.diagnostics import IdlErrors  # the parser: imported when needed
    from idl_codegen.ros_msg import msg_to_idl, srv_to_idl

    problems: list[tuple[tuple[str | int, ...], str]] = []
    for index, path in enumerate(msg_files):
        kind = path.suffix.lstrip(".")
        if kind not in ("msg", "srv") or path.parent.name != kind:
            problems.append(((index,), f"expected PACKAGE/msg/Name.msg or PACKAGE/srv/Name.srv,"
                                       f" got {str(path)!r}"))  # fmt: skip
            continue
        if not path.is_file():
            why = "is not a file" if path.exists() else "no such file"
            problems.append(((index,), f"cannot read {str(path)!r}: {why}"))
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            problems.append(((index,), f"cannot read {str(path)!r}: {exc.strerror or exc}"))
            continue
        except UnicodeDecodeError as exc:
            problems.append(((index,), f"{str(path)!r} is not UTF-8 text (invalid byte at"
                                       f" offset {exc.start})"))  # fmt: skip
            continue
        convert = msg_to_idl if kind == "msg" else srv_to_idl
        try:
            convert(text, path.parent.parent.name, path.stem, source=str(path))
        except IdlErrors as exc:
            problems += [((index,), str(error)) for error in exc.errors]
    return problems


def type_files(
    dds_types: Iterable[str], idl_files: Sequence[Path], include_dirs: Sequence[Path],
    converted: Path,
) -> tuple[list[Path], list[Path], list[str]]:
    """The IDL the adapter loads for ``dds_types`` (``pkg::msg::dds_::T_``): the files
    (``idl_files``, then the file of each type, ``pkg/msg/dds_/T_.idl``, from the
    ``msg_files`` converted into ``converted``, from ``include_dirs`` or from the built-in
    interfaces), the ``#include`` search path, and the types no file was found for."""
    search = [converted, *include_dirs, BUILTIN_IDL]
    files: list[Path] = list(idl_files)
    missing: list[str] = []
    for name in dds_types:
        found = _type_file(name, search)
        if found is not None:
            files.append(found)
        else:
            missing.append(name)
    return sorted(set(files)), search, missing


#: The metadata a ``to_mqtt`` template may name besides the message's members.
_META = ("ros.topic", "ros.type", "dds.topic", "dds.type")


def type_uses(
    ros_to_mqtt: Sequence[RosToMqtt | None],
    mqtt_to_ros: Sequence[MqttToRos | None],
    mqtt_to_ros_services: Sequence[MqttToRosService | None] = (),
    ros_services_to_mqtt: Sequence[RosServiceToMqtt | None] = (),
) -> list[TypeUse]:
    """The DDS types the mappings name (not ``auto``), with their YAML paths: a message
    type ``pkg/msg/T`` is ``pkg::msg::dds_::T_``, a service type its request and response
    types. None mappings (with problems of their own) are left out."""
    uses: list[TypeUse] = []
    topics: list[tuple[str, Sequence[RosToMqtt | MqttToRos | None]]] = [
        ("ros_to_mqtt", ros_to_mqtt), ("mqtt_to_ros", mqtt_to_ros)]
    for section, entries in topics:
        for index, entry in enumerate(entries):
            if entry is None or entry.type == AUTO:
                continue
            uses.append(TypeUse((section, index), dds_type(entry.type),
                                f"ROS 2 type {entry.type!r}",
                                entry.to_mqtt if isinstance(entry, RosToMqtt) else None))
    services: list[tuple[str, Sequence[MqttToRosService | RosServiceToMqtt | None]]] = [
        ("mqtt_to_ros_services", mqtt_to_ros_services),
        ("ros_services_to_mqtt", ros_services_to_mqtt)]
    for section, calls in services:
        for index, call in enumerate(calls):
            if call is None:
                continue
            for name in service_types(call.type):
                uses.append(TypeUse((section, index), name,
                                    f"ROS 2 service type {call.type!r} ({ros_type(name)})"))
    return uses


def idl_problems(
    msg_files: Sequence[Path], idl_files: Sequence[Path], include_dirs: Sequence[Path],
    uses: Sequence[TypeUse],
) -> list[tuple[tuple[str | int, ...], str]]:
    """What keeps the adapter from loading its types at start, as the ``dds`` adapter's
    check reports it (``adapters.dds.config.IdlSchema``, the same code): the same files
    the adapter loads (``type_files``; ``msg_files`` converted into a temporary
    directory) are parsed, and an ``idl_files`` entry that cannot be read, an IDL error
    (with the IDL file, line and column), a type no file declares, a type using a union
    Cyclone DDS misreads (``idl_codegen.cyclone_limits``) and a ``to_mqtt`` template
    naming a member the type does not have are problems at their YAML paths. Only the
    parsers run (pure Python; no cyclonedds, no rclpy). A ``msg_files`` entry that
    cannot be converted (``msg_problems`` reports it) is left out; the types it defines
    are not reported again, nor is a missing ``#include`` of its IDL. A file with
    errors does not keep the others from being checked (``IdlSchema.compile``)."""
    if not uses and not idl_files:
        return []
    from idl_codegen.diagnostics import IdlErrors  # the parsers: imported when needed
    from idl_codegen.ros_msg import convert

    with tempfile.TemporaryDirectory(prefix="edgebus-check-") as directory:
        converted = Path(directory).resolve()
        made: dict[Path, tuple[tuple[str | int, ...], str]] = {}
        unmade: set[str] = set()  # the IDL of a msg_files entry with problems: pkg/msg/dds_/T_.idl
        for index, source in enumerate(msg_files):
            try:
                (idl,) = convert([source], converted)
            except (IdlErrors, OSError, ValueError):  # reported by msg_problems
                unmade.add(f"{source.parent.parent.name}/{source.parent.name}/dds_/"
                           f"{source.stem}_.idl")
                continue
            shown = f"{source} (as IDL: {idl.relative_to(converted)})"
            made[idl.resolve()] = (("msg_files", index), shown)
        uses = [use for use in uses if _idl_of(use.type) not in unmade]
        files, search, _ = type_files([use.type for use in uses], idl_files, include_dirs,
                                      converted)
        parsed = IdlSchema.compile(files, search, idl_files, made)
        problems = [
            (at, message) for at, message in parsed.problems
            if not any(f'cannot find include file "{name}"' in message for name in unmade)
        ]
        # a type whose own file is left out (its errors, or those of a file it includes,
        # are reported): not reported again
        uses = [use for use in uses
                if (found := _type_file(use.type, search)) is None
                or found.resolve() not in parsed.left_out_paths]
        problems += parsed.use_problems(uses, _META, _no_definition)
        sources = {str(idl): shown.split(" (as IDL: ")[0] for idl, (_, shown) in made.items()}
        problems += _wstring_problems(parsed, uses, sources)
    unknown: set[tuple[str | int, ...]] = set()  # a service's request and response: once
    kept = []
    for at, message in problems:
        if message.startswith("no definition of "):
            if at in unknown:
                continue
            unknown.add(at)
        kept.append((at, message))
    return kept


def _wstring_problems(parsed: IdlSchema, uses: Sequence[TypeUse],
                      sources: Mapping[str, str]) -> list[tuple[tuple[str | int, ...], str]]:
    """A type with a wstring member: refused (``adapters.ros2.codec.WSTRING_REFUSED``).
    ``sources``: the ``msg_files`` entry of each converted IDL file."""
    schema = parsed.schema
    if schema is None:
        return []
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for use in uses:
        if use.type not in schema.types:
            continue
        member = wstring_member(schema, use.type)
        if member is not None:
            where = parsed.declared_in.get(use.type)
            where = sources.get(where, where) if where else where
            declared = f" (declared in {where})" if where else ""
            problems.append(((*use.at, "type"), f"{use.shown}{declared} is not supported:"
                             f" member {member!r} is a wstring; {WSTRING_REFUSED}"))
    return problems


def _type_file(dds_type_name: str, search: Sequence[Path]) -> Path | None:
    """The IDL file of a type in the first of the ``search`` directories that has it."""
    relative = Path(_idl_of(dds_type_name))
    return next((d / relative for d in search if (d / relative).is_file()), None)


def _idl_of(dds_type_name: str) -> str:
    """The IDL file of a type, as ``type_files`` looks for it: ``pkg/msg/dds_/T_.idl``."""
    package, kind, _, type_name = dds_type_name.split("::")
    if kind == "srv":
        type_name = type_name.rsplit("_", 2)[0] + "_"
    return f"{package}/{kind}/dds_/{type_name}.idl"


def _no_definition(use: TypeUse, known: str) -> str:
    del known  # the ROS 2 types are not listed (the built-in interfaces alone are many)
    return (f"no definition of {use.shown}: add its .msg/.srv file to msg_files, or an IDL"
            f" file declaring {use.type} to idl_files")


FilterTemplateText = Annotated[str, AfterValidator(check_filter_template)]
TopicTemplateText = Annotated[str, AfterValidator(check_topic_template)]
Seconds = Annotated[float, DurationSpec(gt=0)]


def _check_name(value: str) -> str:
    if "{" in value or "}" in value:
        raise ValueError(f"captures ({{name}}) are not rendered here, only in mqtt_to_ros"
                         f" to_ros: expected a ROS 2 name like /robot/cmd_vel, got {value!r}")
    if value.startswith("~"):
        raise ValueError(f"private names (~) have no node to belong to here: {value!r}")
    if not _NAME.match(value):
        raise ValueError(f"expected a ROS 2 name like /robot/cmd_vel, got {value!r}")
    return value


def _check_topic_or_glob(value: str) -> str:
    if any(c in value for c in "*?[") and "{" not in value and not value.startswith("~"):
        if not _GLOB.match(value):
            raise ValueError(f"expected a ROS 2 name like /robot/cmd_vel or a glob pattern"
                             f" like /robot/*, got {value!r}")
        return value
    return _check_name(value)


def _check_message_type(value: str) -> str:
    if value == "auto":
        return value
    if not _TYPE.match(value) or "/srv/" in value:
        raise ValueError(f"expected a message type like std_msgs/msg/String, got {value!r}")
    return value


def _check_service_type(value: str) -> str:
    if not _TYPE.match(value) or "/msg/" in value:
        raise ValueError(f"expected a service type like std_srvs/srv/Trigger, got {value!r}")
    return value


RosName = Annotated[str, AfterValidator(_check_name)]
RosNameOrGlob = Annotated[str, AfterValidator(_check_topic_or_glob)]
MessageType = Annotated[str, AfterValidator(_check_message_type)]
ServiceType = Annotated[str, AfterValidator(_check_service_type)]


class _RosQosChoice(QosChoice):
    qos_profile: str | None = Field(
        default=None,
        description="ROS 2 QoS profile: `default` (reliable, keep last 10), `sensor_data`"
        " (best effort, keep last 5), `transient_local` (latched: reliable, transient local,"
        " keep last 1; a `ros_to_mqtt` reader keeps 100, as tf2's static listener),"
        " `services_default`, `system_default`, or a `qos_profiles` name;"
        " null: `default`.",
    )


class RosToMqtt(_RosQosChoice, ToMqttOptions):
    """A ROS 2 topic published to MQTT."""

    from_ros: RosNameOrGlob = Field(
        description="ROS 2 topic (`/imu`, or relative to `namespace`); may be a glob"
        " pattern over discovered topics (`/robot/*`, `/*/cmd_vel`, `?`, `[...]`; `*`"
        " also matches across `/`)."
    )
    type: MessageType = Field(
        description="Message type (`sensor_msgs/msg/Imu`), or `auto`: rebuilt from the"
        " publisher's type information."
    )
    to_mqtt: TopicTemplateText = Field(
        description="MQTT topic template: `{ros.topic}` (without the leading `/`),"
        " `{ros.type}`, and members of the message (`{header.frame_id}`)."
    )


class MqttToRos(_RosQosChoice, FromMqttOptions):
    """MQTT messages published on a ROS 2 topic."""

    from_mqtt: FilterTemplateText = Field(
        description="MQTT filter template; `{name}` captures one level, `{name#}` the rest."
    )
    to_ros: str = Field(
        description="ROS 2 topic; may use the captures (`/{robot}/cmd_vel`)."
    )
    type: MessageType = Field(
        description="Message type (`geometry_msgs/msg/Twist`), or `auto` (from a"
        " discovered subscriber)."
    )

    @model_validator(mode="after")
    def _target(self) -> Self:
        check_topic_template(self.to_ros.lstrip("/") or "x")
        return self


class MqttToRosService(ConfigModel):
    """A ROS 2 service called by MQTT 5 requests (response topic + correlation data)."""

    from_mqtt: FilterTemplateText = Field(
        description="MQTT filter template the requests arrive on; the JSON payload is the"
        " request, the reply goes to the request's response topic."
    )
    to_ros: RosName = Field(description="ROS 2 service to call (`/add_two_ints`).")
    type: ServiceType = Field(description="Service type (`example_interfaces/srv/AddTwoInts`).")
    timeout: Seconds = Field(
        default=5.0, description="How long to wait for the service's response."
    )
    max_pending: int = Field(
        default=1000, ge=1,
        description="Calls waiting for a response at most; further requests are answered"
        " with an error at once.",
    )


class RosServiceToMqtt(ConfigModel):
    """A ROS 2 service whose calls an MQTT 5 responder answers."""

    from_ros: RosName = Field(description="ROS 2 service to offer (`/get_status`).")
    to_mqtt: TopicTemplateText = Field(
        description="MQTT topic the requests are published to (with a response topic and"
        " correlation data); `{ros.service}` is the service name without the leading `/`."
    )
    type: ServiceType = Field(description="Service type (`std_srvs/srv/Trigger`).")
    timeout: Seconds = Field(
        default=5.0, description="How long to wait for the MQTT responder's reply."
    )
    max_pending: int = Field(
        default=1000, ge=1, description="Requests waiting for a reply at most."
    )


class Ros2AdapterConfig(AdapterConfigBase):
    """The `ros2` adapter: ROS 2 topics and services over DDS (no ROS installation)."""

    type: Literal["ros2"] = Field(description="Adapter type.")
    domain_id: int | None = Field(
        default=None, ge=0, le=232,
        description="ROS 2 domain (DDS domain id); null: `ROS_DOMAIN_ID` of the"
        " environment, else 0.",
    )
    namespace: str = Field(
        default="/", description="Namespace of relative names (`cmd_vel` -> `/robot/cmd_vel`)."
    )
    msg_files: tuple[Annotated[Path, PathSpec()], ...] = Field(
        default=(),
        description="Your `.msg` and `.srv` files (`my_pkg/msg/Status.msg`), parsed when the"
        " configuration is validated (`edgebus check`) and converted to IDL at start; the"
        " built-in types need none.",
    )
    idl_files: tuple[Annotated[Path, PathSpec()], ...] = Field(
        default=(),
        description="Further IDL files with `pkg::msg::dds_::T_` types, parsed with the"
        " types the mappings name when the configuration is validated (`edgebus check`).",
    )
    include_dirs: tuple[Annotated[Path, PathSpec()], ...] = Field(
        default=(), description="Directories searched by `#include` in `idl_files`."
    )
    network: DdsNetworkConfig = Field(
        default_factory=DdsNetworkConfig, description="Cyclone DDS network settings."
    )
    qos_profiles: tuple[DdsQosProfile, ...] = Field(
        default=(), description="Named DDS QoS beside the ROS 2 profiles."
    )
    ros_to_mqtt: tuple[RosToMqtt, ...] = Field(
        default=(), description="ROS 2 topics published to MQTT."
    )
    mqtt_to_ros: tuple[MqttToRos, ...] = Field(
        default=(), description="MQTT messages published on ROS 2 topics."
    )
    mqtt_to_ros_services: tuple[MqttToRosService, ...] = Field(
        default=(), description="ROS 2 services called from MQTT 5 request/response."
    )
    ros_services_to_mqtt: tuple[RosServiceToMqtt, ...] = Field(
        default=(), description="ROS 2 services answered by MQTT 5 responders."
    )
    discovery_timeout: Seconds = Field(
        default=5.0, description="How long to wait for a discovered type's description."
    )
    max_writers: int = Field(
        default=256, ge=1,
        description="DDS writers `mqtt_to_ros` creates at most (topics built from captures).",
    )
    _digest: str = PrivateAttr(default="")

    @field_validator("msg_files")
    @classmethod
    def _msg_files_convert(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        # on every validation (check, run, reload), with the configuration's other
        # problems: a .msg/.srv file that cannot be converted fails here, not at start
        problems = msg_problems(value)
        if problems:
            raise FieldProblems(problems)
        return value

    @classmethod
    def checks_as_written(
        cls, data: Mapping[str, Any], failed: frozenset[str], context: Any
    ) -> list[tuple[Loc, str]]:
        """The profile, namespace and IDL checks when another key has a problem (the IDL:
        against the mappings that are valid themselves)."""
        sections = (("ros_to_mqtt", RosToMqtt), ("mqtt_to_ros", MqttToRos))
        problems = profile_problems_as_written(cls, data, failed, context, sections, PROFILES)
        namespace = data.get("namespace")
        relative = isinstance(namespace, str) and not namespace.startswith("/")
        if "namespace" not in failed and relative:
            problems.append(
                (("namespace",), f"expected an absolute name like /robot, got {namespace!r}")
            )
        if failed & {"idl_files", "include_dirs"}:
            return problems
        try:
            msg_files, idl_files, include_dirs = (
                valid_as_written(cls, key, data, context)
                for key in ("msg_files", "idl_files", "include_dirs"))
        except ValidationError:
            return problems
        uses = type_uses(*(valid_items(entry, data.get(key), context) for key, entry in (
            ("ros_to_mqtt", RosToMqtt), ("mqtt_to_ros", MqttToRos),
            ("mqtt_to_ros_services", MqttToRosService),
            ("ros_services_to_mqtt", RosServiceToMqtt))))
        return problems + idl_problems(msg_files, idl_files, include_dirs, uses)

    @model_validator(mode="after")
    def _check(self) -> Self:
        problems: list[tuple[Loc, str]] = []
        try:
            check_profiles(self.qos_profiles, [("ros_to_mqtt", self.ros_to_mqtt),
                                               ("mqtt_to_ros", self.mqtt_to_ros)], PROFILES)
        except FieldProblems as exc:
            problems += exc.problems
        if not (self.ros_to_mqtt or self.mqtt_to_ros or self.mqtt_to_ros_services
                or self.ros_services_to_mqtt):
            problems.append(((), "expected at least one of ros_to_mqtt, mqtt_to_ros,"
                                 " mqtt_to_ros_services, ros_services_to_mqtt"))
        if not self.namespace.startswith("/"):
            problems.append((("namespace",), f"expected an absolute name like /robot,"
                                             f" got {self.namespace!r}"))
        # on every validation (check, run, reload): IDL the adapter could not load fails
        # here, with the configuration's other problems, not at start with a backoff
        problems += idl_problems(
            self.msg_files, self.idl_files, self.include_dirs,
            type_uses(self.ros_to_mqtt, self.mqtt_to_ros, self.mqtt_to_ros_services,
                      self.ros_services_to_mqtt),
        )
        if problems:
            raise FieldProblems(problems)
        self._digest = sources_digest([*self.msg_files, *self.idl_files])
        return self

    @property
    def domain(self) -> int:
        """The DDS domain: ``domain_id``, else ``ROS_DOMAIN_ID``, else 0."""
        if self.domain_id is not None:
            return self.domain_id
        text = os.environ.get("ROS_DOMAIN_ID", "").strip()
        return int(text) if text.isdigit() and int(text) <= 232 else 0

    def profile(self, name: str | None, reader: bool = False) -> DdsQos:
        """The QoS of profile ``name`` (a ``qos_profiles`` name first); ``reader``: for a
        reader (``READER_PROFILES``)."""
        wanted = name or "default"
        for profile in self.qos_profiles:
            if profile.name == wanted:
                return DdsQos(**profile.model_dump(exclude={"name"}))
        if reader and wanted in READER_PROFILES:
            return READER_PROFILES[wanted]
        return PROFILES.get(wanted, PROFILES["default"])
