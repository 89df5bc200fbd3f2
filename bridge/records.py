"""The records of a bridge's inbound QoS 2 Packet Identifiers in the broker's store, and
when they go (docs/bridges.md, "Inbound QoS 2").

A bridge records the remote's Packet Identifier of each QoS 2 message between its
PUBLISH and its PUBREL in the store's ``incoming`` table, under the key
``"\\0bridge/<name>/<client id>"`` (``key_of``; no MQTT client id can be it, and no
bridge name holds a ``/``). The records are the bridge's session state with its remote,
and they go with the bridge, as EMQX and mosquitto drop a bridge's session state with
the bridge:

- ``forget_bridge``: the bridge was removed for good (``DELETE /api/v1/bridges/<name>``,
  a reload without it, a rename), once its last run ended (its link is closed): every
  record under its name;
- ``forget_other_client_ids``, at each start of a bridge: the records under its name
  but another client id (the client id changed: the remote knows that session under the
  old one, which this bridge no longer uses);
- ``forget_absent``, when the gateway starts its components: the records of bridge
  names it does not have (removed from the file while the gateway was down, or added
  through the API in an earlier run: those last until the gateway stops).

What that costs: a bridge added again under the same name and client id while the
remote still holds unreleased QoS 2 messages of its session (up to its Receive
Maximum) gets those resent and publishes them again: delivered twice, never lost. A
pause, a restart, a reload that keeps the bridge (also as ``enabled: false``) and a
restart of the gateway keep the records. So the rows left in the store are at most the
configured bridges' (each bounded by its Receive Maximum), not one per message in
flight of every bridge ever removed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from broker_core.mqtt.session_state import SessionState
    from broker_core.store.base import Store

__all__ = [
    "PREFIX",
    "forget_absent",
    "forget_bridge",
    "forget_other_client_ids",
    "key_of",
    "name_of",
    "read_records",
]

log = logging.getLogger(__name__)

PREFIX = "\0bridge/"


def key_of(name: str, client_id: str) -> str:
    """U+0000 is in no MQTT client id [MQTT-1.5.4-2]: no session's rows are these."""
    return f"{PREFIX}{name}/{client_id}"


def name_of(key: str) -> str | None:
    """The bridge name of a record's key; None for an MQTT client's."""
    if not key.startswith(PREFIX):
        return None
    name, slash, _ = key[len(PREFIX) :].partition("/")
    return name if slash else None


class StoreKey:
    """What the store's ``incoming_added`` / ``incoming_removed`` read of a session: its
    client id, here a bridge's key."""

    __slots__ = ("client_id",)

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id

    def session(self) -> SessionState:
        return cast("SessionState", self)


def _path(store: Store) -> Path | None:
    path = getattr(store, "path", None)
    return None if not store.durable or path is None else Path(path)


def read_records(path: Path, name: str | None = None) -> list[tuple[str, int]]:
    """The bridges' records committed in the store file at ``path``: all, or ``name``'s
    (every client id), as (key, Packet Identifier)."""
    import sqlite3  # here: a gateway without a durable store never needs it

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        prefix = PREFIX if name is None else key_of(name, "")
        # The keys starting with ``prefix`` (which ends with "/"; "0" follows it), as a
        # range: SQLite's text functions stop at the U+0000 in front, comparisons do not.
        rows = conn.execute(
            "SELECT client_id, packet_id FROM incoming WHERE client_id >= ? AND client_id < ?",
            (prefix, prefix[:-1] + "0"),
        )
        return [(str(key), int(mid)) for key, mid in rows]
    finally:
        conn.close()


def _remove(store: Store, records: Iterable[tuple[str, int]]) -> int:
    """Hands the removal of ``records`` to the store (its next commit, after every write
    handed to it before); their number."""
    count = 0
    sessions: dict[str, Any] = {}
    for key, mid in records:
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = StoreKey(key).session()
        store.incoming_removed(session, mid)
        count += 1
    return count


def _read(store: Store, name: str | None, what: str) -> list[tuple[str, int]]:
    path = _path(store)
    if path is None or not path.exists():
        return []
    import sqlite3

    try:
        return read_records(path, name)
    except (OSError, sqlite3.Error) as exc:
        log.warning(
            "cannot read the bridges' QoS 2 records %s (%s: %s); they stay in the store",
            what, type(exc).__name__, exc,
        )  # fmt: skip
        return []


def forget_bridge(store: Store, name: str, held: Iterable[tuple[str, int]] = ()) -> int:
    """The bridge ``name`` was removed for good, its last run over: every record under
    its name (committed ones, read from the file, and ``held``: those its runs handed to
    the store that may not be committed yet) is removed. Returns how many."""
    found = set(_read(store, name, f"of the removed bridge {name}"))
    found.update(held)
    count = _remove(store, sorted(found))
    if count:
        log.info("bridge %s removed: its %d inbound QoS 2 records are removed", name, count)
    return count


def forget_other_client_ids(
    store: Store, name: str, key: str, records: Iterable[tuple[str, int]]
) -> int:
    """Of ``records`` (read at a start of the bridge ``name``), those under another client
    id than ``key``'s are removed. Returns how many."""
    other = [(k, mid) for k, mid in records if k != key and name_of(k) == name]
    count = _remove(store, other)
    if count:
        log.info(
            "bridge %s: its client id changed: %d inbound QoS 2 records of the old one"
            " are removed", name, count,
        )  # fmt: skip
    return count


def forget_absent(hub: Any, names: Iterable[str]) -> int:
    """When the gateway starts its components: the records of bridges not among
    ``names`` (the configured ones, disabled included) are removed. ``hub``: the
    gateway's ``Hub`` (its broker's store). Returns how many."""
    store: Store = hub.broker.store
    wanted = set(names)
    absent = [(k, mid) for k, mid in _read(store, None, "at start") if name_of(k) not in wanted]
    count = _remove(store, absent)
    if count:
        gone = sorted({str(name_of(k)) for k, _ in absent})
        log.info(
            "%d inbound QoS 2 records of bridges no longer configured (%s) are removed",
            count, ", ".join(gone),
        )  # fmt: skip
    return count
