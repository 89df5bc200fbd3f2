"""``KeyWatch``: remote endpoints that DDS never matches with ours because one side's type
has a key and the other's has none, and that nothing in DDS reports.

A DDS writer and reader of one topic match only when both types have a key or both have
none; the RTPS entity kind in each endpoint's GUID says which (DDSI-RTPS 2.5, 9.3.1.2:
``0x02`` writer with key, ``0x03`` writer without, ``0x04`` reader without, ``0x07``
reader with key). Cyclone DDS (11.0) leaves such a pair unmatched without a status: no
``inconsistent_topic``, no ``requested_incompatible_qos``/``offered_incompatible_qos``
(it raises those, with the TYPE_CONSISTENCY policy, for types that differ otherwise),
matched counts that stay at 0. So data silently does not flow. ``KeyWatch`` compares the
kind of each remote endpoint the builtin topics (DCPSPublication / DCPSSubscription)
announce on a topic with the kind of the adapter's own endpoints of that topic, in both
orders of discovery, and forgets a remote endpoint when it is deleted. A remote endpoint
in no partition of ours would not be matched anyway and is left out.

Pure bookkeeping (no cyclonedds): the bridge feeds it on the event loop and reports what
it returns (a log line per new mismatch, the adapter's degraded reason, a counter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

__all__ = ["KeyWatch", "Mismatch", "keyed_of", "partitions_meet"]

#: DDSI-RTPS entity kinds of user-defined writers and readers: keyed?
_KINDS = {0x02: True, 0x03: False, 0x04: False, 0x07: True}
#: Remote endpoints remembered per watch (topics the adapter may use later included);
#: past it the oldest are forgotten (a writer created afterwards is then not checked
#: against them).
MAX_REMOTE = 10_000


def keyed_of(guid: Any) -> bool | None:
    """Whether the endpoint with this GUID (a ``uuid.UUID`` or 16 bytes) has a keyed type,
    from its RTPS entity kind; None for kinds that are not user writers or readers."""
    raw = guid.bytes if hasattr(guid, "bytes") else bytes(guid)
    if len(raw) != 16:
        return None
    return _KINDS.get(raw[15])


def partitions_meet(ours: Sequence[str], theirs: Sequence[str]) -> bool:
    """Whether endpoints in these partitions can match (DDS 2.2.3.13: no partition is
    the default partition ``""``; a name with ``*`` or ``?`` is a pattern matching the
    other side's plain names; two patterns do not match each other)."""
    for mine in ours or ("",):
        for other in theirs or ("",):
            if mine == other:
                return True
            wild_mine, wild_other = _wild(mine), _wild(other)
            if wild_mine != wild_other and (fnmatchcase(other, mine) if wild_mine
                                            else fnmatchcase(mine, other)):
                return True
    return False


def _wild(name: str) -> bool:
    return "*" in name or "?" in name


def _keyness(keyed: bool) -> str:
    return "keyed" if keyed else "keyless"


@dataclass(frozen=True, slots=True)
class _Local:
    mapping: str  # "dds_to_mqtt[0]"
    topic: str
    role: str  # ours: "reader" or "writer"
    type_name: str
    keyed: bool


@dataclass(frozen=True, slots=True)
class _Remote:
    topic: str
    role: str  # theirs: "writer" or "reader"
    type_name: str
    keyed: bool


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One remote endpoint that one of ours will never match."""

    mapping: str
    topic: str
    role: str  # ours
    type_name: str  # ours
    keyed: bool  # ours
    remote_type: str
    remote_keyed: bool

    @property
    def remote_role(self) -> str:
        return "writer" if self.role == "reader" else "reader"

    def log_message(self) -> str:
        effect = ("its samples are not bridged" if self.role == "reader"
                  else "it gets none of this mapping's messages")
        return (f"{self.mapping} topic {self.topic!r}: a remote {self.remote_role}'s type "
                f"{self.remote_type} is {_keyness(self.remote_keyed)}, our {self.role}'s type "
                f"{self.type_name} is {_keyness(self.keyed)}; DDS never matches endpoints "
                f"whose types differ in having a key (and reports nothing): {effect}")

    def reason(self) -> str:
        return (f"{self.mapping} {self.topic!r}: remote {self.remote_role} of "
                f"{self.remote_type} is {_keyness(self.remote_keyed)}, {self.type_name} is "
                f"{_keyness(self.keyed)} (never matched)")


class KeyWatch:
    """Our endpoints and the remote ones per topic; which pairs differ in key-ness."""

    def __init__(self, partitions: Sequence[str] = ()) -> None:
        self.partitions = tuple(partitions)  # ours (the adapter's publisher and subscriber)
        self._local: dict[str, list[_Local]] = {}
        self._remote: dict[Any, _Remote] = {}  # GUID -> endpoint, oldest first
        self._mismatched: dict[Any, list[Mismatch]] = {}  # remote GUID -> its mismatches

    def local(self, mapping: str, topic: str, role: str, type_name: str,
              keyed: bool | None) -> list[Mismatch]:
        """One of our endpoints (``role`` "reader" or "writer") was created; the
        mismatches with remote endpoints known already."""
        if keyed is None:
            return []
        mine = _Local(mapping, topic, role, type_name, keyed)
        self._local.setdefault(topic, []).append(mine)
        found: list[Mismatch] = []
        for guid, remote in self._remote.items():
            mismatch = _compare(mine, remote)
            if mismatch is not None:
                self._mismatched.setdefault(guid, []).append(mismatch)
                found.append(mismatch)
        return found

    def remote(self, guid: Any, topic: str, role: str, type_name: str,
               partitions: Sequence[str] = ()) -> list[Mismatch]:
        """A remote endpoint was announced (again); its new mismatches with ours."""
        keyed = keyed_of(guid)
        if keyed is None or guid in self._remote \
                or not partitions_meet(self.partitions, partitions):
            return []
        if len(self._remote) >= MAX_REMOTE:
            oldest = next(iter(self._remote))
            self.gone(oldest)
        remote = self._remote[guid] = _Remote(topic, role, type_name, keyed)
        found = [m for m in (_compare(mine, remote) for mine in self._local.get(topic, ()))
                 if m is not None]
        if found:
            self._mismatched[guid] = found
        return found

    def gone(self, guid: Any) -> bool:
        """A remote endpoint was deleted; True when that ended mismatches."""
        self._remote.pop(guid, None)
        return self._mismatched.pop(guid, None) is not None

    @property
    def mismatches(self) -> list[Mismatch]:
        """Every current mismatch, one per remote endpoint and our endpoint."""
        return [m for found in self._mismatched.values() for m in found]


def _compare(mine: _Local, remote: _Remote) -> Mismatch | None:
    if remote.topic != mine.topic or remote.role == mine.role or remote.keyed == mine.keyed:
        return None
    return Mismatch(mine.mapping, mine.topic, mine.role, mine.type_name, mine.keyed,
                    remote.type_name, remote.keyed)
