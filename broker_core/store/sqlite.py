"""``SqliteStore``: the embedded durable store (``persistence: sqlite``, the default).

One database file, ``<data_dir>/edgebus.db``, in WAL mode. Changes queue up during an
event-loop turn and go to the writer thread as one list; the writer commits them in
batches. A message fanned out to many persistent sessions is written once
(``messages``) and referenced by one ``deliveries`` row per session; the store counts
references and deletes a message when its last delivery completes. The pending will of
an offline session is one ``wills`` row under its client id, deleted with the session.

The will of a connected client is one ``held_wills`` row under its client id, written
with its CONNECT (``will_held``) and deleted when its connection ends
(``will_released``), clean stop included: a row found at ``open`` belongs to a client
that was connected when the process died. After such a stop (the store's marker, still
``open``: ``marker.stopped_cleanly``) each becomes a pending will due ``delay_s`` after
the broker last ran (``last_alive``), written back as a ``wills`` row of its session so
that another crash does not move it; a client without a session (its session ended with
its connection) has it due at once (``Snapshot.wills``), the row kept until it is
published (``will_deleted``). After a clean stop no row is left; one found anyway is
dropped with a warning.

Backlog policy: the writer's backlog is bounded by ``max_pending`` operations. Past
it, ``backlogged()`` is true and the broker stops reading from publishing clients
until the writer catches up (``on_drained``): nothing is dropped, publishers slow down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from broker_core.acks import Durable
from broker_core.clock import now as clock_now
from broker_core.context import Context, Origin
from broker_core.errors import ProtocolError
from broker_core.mqtt.packets import SubscriptionOptions, Will
from broker_core.mqtt.properties import EMPTY, PacketKind, decode_properties
from broker_core.mqtt.session_state import Delivery, SessionState, Subscription
from broker_core.store.base import RestoredSession, RestoredWill, Snapshot
from broker_core.store.held import HeldWrites
from broker_core.store.marker import stopped_cleanly
from broker_core.store.schema import StoreError, checkpoint, close, connect, marker_path
from broker_core.store.writer import Barrier, Writer

__all__ = ["SqliteStore"]

log = logging.getLogger(__name__)

#: The writer checkpoints the log into the database file after this many seconds without
#: a write (at most once per quiet spell); busy, SQLite does every ~1000 pages of log.
CHECKPOINT_IDLE_S = 5.0

#: While clients are connected, the time the broker last ran (``alive``) is written at most
#: this often: one row of ``meta``, in the same commit as whatever else that loop turn
#: wrote, or a commit of its own on a quiet store (``synchronous=NORMAL``: no fsync). A
#: stamp alone is no write for the idle checkpoint (the writer's ``quiet``).
ALIVE_INTERVAL_S = 2.0

_INSERT_MESSAGE = (
    "INSERT OR REPLACE INTO messages (id, topic, payload, qos, retain, properties,"
    " origin_protocol, origin_name, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_MESSAGE = "DELETE FROM messages WHERE id = ?"
_INSERT_DELIVERY = (
    "INSERT OR REPLACE INTO deliveries (id, client_id, message_id, qos, retain,"
    " subscription_ids, packet_id, released) VALUES (?, ?, ?, ?, ?, ?, ?, 0)"
)
_SENT = "UPDATE deliveries SET packet_id = ? WHERE id = ?"
_RELEASED = "UPDATE deliveries SET released = 1 WHERE id = ?"
_DELETE_DELIVERY = "DELETE FROM deliveries WHERE id = ?"
_INSERT_INCOMING = "INSERT OR IGNORE INTO incoming (client_id, packet_id) VALUES (?, ?)"
_DELETE_INCOMING = "DELETE FROM incoming WHERE client_id = ? AND packet_id = ?"
_SAVE_SESSION = (
    "INSERT OR REPLACE INTO sessions (client_id, expiry_interval, offline_since) VALUES (?, ?, ?)"
)
_SESSION_OFFLINE = "UPDATE sessions SET offline_since = ?, expiry_interval = ? WHERE client_id = ?"
_ALIVE = "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_alive', ?)"
_DELETE_SESSION = (
    "DELETE FROM sessions WHERE client_id = ?",
    "DELETE FROM subscriptions WHERE client_id = ?",
    "DELETE FROM deliveries WHERE client_id = ?",
    "DELETE FROM incoming WHERE client_id = ?",
    "DELETE FROM wills WHERE client_id = ?",
)
_SAVE_SUBSCRIPTION = (
    "INSERT OR REPLACE INTO subscriptions (client_id, topic_filter, qos, no_local,"
    " retain_as_published, retain_handling, subscription_id) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_SUBSCRIPTION = "DELETE FROM subscriptions WHERE client_id = ? AND topic_filter = ?"
_SET_RETAINED = (
    "INSERT OR REPLACE INTO retained (topic, payload, qos, properties, origin_protocol,"
    " origin_name, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_CLEAR_RETAINED = "DELETE FROM retained WHERE topic = ?"
_ADD_DELAYED = (
    "INSERT OR REPLACE INTO delayed (id, due_at, topic, payload, qos, retain, properties,"
    " origin_protocol, origin_name, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_DELAYED = "DELETE FROM delayed WHERE id = ?"
_SAVE_WILL = (
    "INSERT OR REPLACE INTO wills (client_id, due_at, topic, payload, qos, retain, properties,"
    " origin_protocol, origin_name, origin_peer, origin_username)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_DELETE_WILL = "DELETE FROM wills WHERE client_id = ?"
_HOLD_WILL = (
    "INSERT OR REPLACE INTO held_wills (client_id, delay_s, topic, payload, qos, retain,"
    " properties, origin_protocol, origin_name, origin_peer, origin_username)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_RELEASE_WILL = "DELETE FROM held_wills WHERE client_id = ?"


def _properties_blob(context: Context) -> bytes:
    props = context.properties
    return b"\x00" if props is EMPTY else props.encoded()


def _context(
    topic: str,
    payload: bytes,
    qos: int,
    retain: int,
    properties: bytes,
    origin_protocol: str,
    origin_name: str,
    received_at: int,
) -> Context:
    props, _ = decode_properties(properties, 0, len(properties), PacketKind.PUBLISH)
    return Context(
        topic,
        bytes(payload),
        qos,
        bool(retain),
        props,
        Origin(origin_protocol, origin_name),
        received_at=received_at,
    )


Statement = tuple[str, tuple[Any, ...]]
Op = Statement | Barrier


def _transaction(conn: sqlite3.Connection) -> Callable[[list[Statement]], None]:
    """The writer's ``write``: statements in one transaction, consecutive runs of one
    statement through ``executemany``; rolled back when one fails."""

    def write(statements: list[Statement]) -> None:
        conn.execute("BEGIN")
        try:
            run_sql: str | None = None
            run: list[tuple[Any, ...]] = []
            for sql, params in statements:
                if sql is not run_sql:
                    if run:
                        conn.executemany(run_sql, run)  # type: ignore[arg-type]
                    run_sql = sql
                    run = []
                run.append(params)
            if run:
                conn.executemany(run_sql, run)  # type: ignore[arg-type]
            conn.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    return write


class SqliteStore:
    durable = True

    def __init__(self, data_dir: Path, max_pending: int = 100_000) -> None:
        self.path = Path(data_dir) / "edgebus.db"
        self.max_pending = max_pending
        self._ops: list[Op] = []
        self._flush_scheduled = False
        self._pending = 0
        self._writer: Writer[Statement] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drained: list[Callable[[], None]] = []
        self._next_message_key = 1
        self._next_delivery_key = 1
        self._message_keys: dict[int, int] = {}  # Context.id -> messages.id
        self._message_refs: dict[int, int] = {}  # messages.id -> live deliveries
        self._alive_at = 0.0  # the last ``last_alive`` written
        self._held = HeldWrites(self._submit, self._left_out)  # ``incoming_added_after``

    # -- lifecycle -------------------------------------------------------------------------

    def open(self) -> Snapshot:
        """Reads everything back, then starts the writer; call on the event loop."""
        self._loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            clean = stopped_cleanly(self.path)
        except OSError:
            clean = False  # connect() names what is wrong with the marker
        conn = connect(self.path)
        try:
            snapshot = self._load(conn, clean)
        except (sqlite3.Error, ProtocolError, ValueError, TypeError, OverflowError) as exc:
            close(conn, self.path)
            raise StoreError(
                f"{self.path}: cannot read the store ({type(exc).__name__}: {exc}); restore it"
                f" from a backup, or move it and {marker_path(self.path)} away to start with an"
                " empty store on purpose"
            ) from exc
        self._writer = Writer(
            _transaction(conn),
            self._loop,
            self._committed,
            "store",
            finish=lambda: close(conn, self.path),  # checkpoints the log, deletes it
            idle=lambda: checkpoint(conn, self.path, "PASSIVE"),
            idle_s=CHECKPOINT_IDLE_S,
            quiet=lambda op: op[0] is _ALIVE,  # a stamp alone does not put off the checkpoint
        )
        log.info(
            "store %s opened in %.2fs: %d sessions (%d with a pending will), %d wills of"
            " ended sessions, %d retained, %d delayed",
            self.path,
            time.monotonic() - started,
            len(snapshot.sessions),
            sum(1 for restored in snapshot.sessions if restored.will is not None),
            len(snapshot.wills),
            len(snapshot.retained),
            len(snapshot.delayed),
        )
        return snapshot

    def close(self) -> None:
        """Writes everything still queued and stops the writer."""
        if self._writer is None:
            return
        self._flush()
        self._held.release_all()
        self._writer.close()
        self._writer = None

    @property
    def pending(self) -> int:
        return self._pending + len(self._ops)

    def backlogged(self) -> bool:
        return self.pending > self.max_pending

    def on_drained(self, callback: Callable[[], None]) -> None:
        if not self.backlogged():
            callback()
        else:
            self._drained.append(callback)

    def barrier(self, callback: Callable[[bool], None]) -> None:
        if not self.pending:
            callback(True)
            return
        self._op(Barrier(callback))

    # -- journal ---------------------------------------------------------------------------

    def queued(self, state: SessionState, delivery: Delivery) -> None:
        self._insert_delivery(state, delivery)

    def sent(self, state: SessionState, delivery: Delivery) -> None:
        if delivery.key:
            self._op((_SENT, (delivery.packet_id, delivery.key)))
        else:
            self._insert_delivery(state, delivery)

    def released(self, state: SessionState, delivery: Delivery) -> None:
        if delivery.key:
            self._op((_RELEASED, (delivery.key,)))

    def completed(self, state: SessionState, delivery: Delivery) -> None:
        if not delivery.key:
            return
        self._op((_DELETE_DELIVERY, (delivery.key,)))
        delivery.key = 0
        self._release_message(delivery.context)

    def incoming_added(self, state: SessionState, packet_id: int) -> None:
        self._op((_INSERT_INCOMING, (state.client_id, packet_id)))

    def incoming_added_after(
        self, state: SessionState, packet_id: int, participants: Sequence[Durable]
    ) -> Durable:
        """``incoming_added``, in the commit of this loop turn's other writes (the
        message's queue entries, its retained copy), which goes to the writer once every
        one of ``participants`` has committed what it holds now; left out if one failed.
        Later writes wait behind it, in order (``store.held``). Returns what the PUBREC
        waits on besides the store: called back False when the record was left out."""
        op = (_INSERT_INCOMING, (state.client_id, packet_id))
        self._op(op)
        return self._held.hold(op, participants)

    def incoming_removed(self, state: SessionState, packet_id: int) -> None:
        self._op((_DELETE_INCOMING, (state.client_id, packet_id)))

    # -- sessions --------------------------------------------------------------------------

    def session_saved(self, state: SessionState) -> None:
        """A session with a connection (``offline_since`` NULL); ``last_alive`` goes with
        it, so that a session saved after the last ``alive`` is not counted offline from
        before its connection should the process die."""
        self._op((_SAVE_SESSION, (state.client_id, state.expiry_interval, None)))
        now = clock_now()
        self._alive_at = now
        self._op((_ALIVE, (repr(now),)))

    def session_offline(self, state: SessionState, now: float) -> None:
        self._op((_SESSION_OFFLINE, (now, state.expiry_interval, state.client_id)))

    def alive(self, now: float) -> None:
        """Writes ``last_alive`` when the last one is ``ALIVE_INTERVAL_S`` old. At the next
        open, the sessions the store still holds as connected (the process died: a clean
        stop ends every connection) count as offline since then (``_load``)."""
        if now - self._alive_at >= ALIVE_INTERVAL_S:
            self._alive_at = now
            self._op((_ALIVE, (repr(now),)))

    def session_deleted(self, state: SessionState) -> None:
        for delivery in (*(state.queue or ()), *state.outgoing.values()):
            if delivery.key:
                delivery.key = 0
                self._release_message(delivery.context)
        for sql in _DELETE_SESSION:
            self._op((sql, (state.client_id,)))

    def subscription_saved(self, state: SessionState, subscription: Subscription) -> None:
        o = subscription.options
        self._op(
            (
                _SAVE_SUBSCRIPTION,
                (
                    state.client_id,
                    subscription.topic_filter,
                    o.qos,
                    int(o.no_local),
                    int(o.retain_as_published),
                    o.retain_handling,
                    subscription.subscription_id,
                ),
            )
        )

    def subscription_deleted(self, state: SessionState, topic_filter: str) -> None:
        self._op((_DELETE_SUBSCRIPTION, (state.client_id, topic_filter)))

    # -- the will of a connected client, the pending will of an offline session -----------------

    def will_held(self, client_id: str, will: Will, origin: Origin, delay_s: float) -> None:
        """With ``last_alive``, as ``session_saved``: a kill soon after counts from now."""
        self._op((_HOLD_WILL, _will_row(client_id, delay_s, will, origin)))
        now = clock_now()
        self._alive_at = now
        self._op((_ALIVE, (repr(now),)))

    def will_released(self, client_id: str) -> None:
        self._op((_RELEASE_WILL, (client_id,)))

    def will_saved(self, client_id: str, due_at: float, will: Will, origin: Origin) -> None:
        self._op((_SAVE_WILL, _will_row(client_id, due_at, will, origin)))

    def will_deleted(self, client_id: str) -> None:
        """Also a held will restored as due at once for a client without a session
        (``Snapshot.wills``), whose row stays in ``held_wills`` until then."""
        self._op((_DELETE_WILL, (client_id,)))
        self._op((_RELEASE_WILL, (client_id,)))

    # -- retained and delayed ---------------------------------------------------------------

    def retained_set(self, context: Context) -> None:
        self._op(
            (
                _SET_RETAINED,
                (
                    context.topic,
                    context.payload,
                    context.qos,
                    _properties_blob(context),
                    context.origin.protocol,
                    context.origin.name,
                    context.received_at,
                ),
            )
        )

    def retained_cleared(self, topic: str) -> None:
        self._op((_CLEAR_RETAINED, (topic,)))

    def delayed_added(self, key: int, due_at: float, context: Context) -> None:
        self._op(
            (
                _ADD_DELAYED,
                (
                    key,
                    due_at,
                    context.topic,
                    context.payload,
                    context.qos,
                    int(context.retain),
                    _properties_blob(context),
                    context.origin.protocol,
                    context.origin.name,
                    context.received_at,
                ),
            )
        )

    def delayed_removed(self, key: int) -> None:
        self._op((_DELETE_DELAYED, (key,)))

    # -- internals ---------------------------------------------------------------------------

    def _op(self, op: Op) -> None:
        self._ops.append(op)
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Hands this loop turn's operations to the writer as one list."""
        self._flush_scheduled = False
        ops = self._ops
        if not ops or self._writer is None:
            return
        self._ops = []
        self._pending += len(ops)
        held = self._held
        if (held.turn is not None or held.queue) and held.flush(ops):
            return  # waits for durable participants (``incoming_added_after``)
        self._writer.submit(ops)

    def _submit(self, ops: list[Op]) -> None:
        if self._writer is not None:
            self._writer.submit(ops)

    def _left_out(self, count: int) -> None:
        self._pending -= count

    def _committed(self, count: int, barriers: list[Barrier], ok: bool) -> None:
        self._pending -= count
        for barrier in barriers:
            barrier.callback(ok)
        if self._drained and not self.backlogged():
            waiting = self._drained
            self._drained = []
            for callback in waiting:
                callback()

    def _insert_delivery(self, state: SessionState, delivery: Delivery) -> None:
        context = delivery.context
        message = self._message_keys.get(context.id)
        if message is None:
            message = self._next_message_key
            self._next_message_key += 1
            self._message_keys[context.id] = message
            self._message_refs[message] = 0
            self._op(
                (
                    _INSERT_MESSAGE,
                    (
                        message,
                        context.topic,
                        context.payload,
                        context.qos,
                        int(context.retain),
                        _properties_blob(context),
                        context.origin.protocol,
                        context.origin.name,
                        context.received_at,
                    ),
                )
            )
        self._message_refs[message] += 1
        key = self._next_delivery_key
        self._next_delivery_key += 1
        delivery.key = key
        ids = ",".join(map(str, delivery.subscription_ids))
        self._op(
            (
                _INSERT_DELIVERY,
                (
                    key,
                    state.client_id,
                    message,
                    delivery.qos,
                    int(delivery.retain),
                    ids,
                    delivery.packet_id,
                ),
            )
        )

    def _release_message(self, context: Context) -> None:
        message = self._message_keys.get(context.id)
        if message is None:
            return
        refs = self._message_refs[message] - 1
        if refs:
            self._message_refs[message] = refs
            return
        del self._message_refs[message]
        del self._message_keys[context.id]
        self._op((_DELETE_MESSAGE, (message,)))

    def _load_held_wills(
        self, conn: Any, clean: bool, last_alive: float | None, snapshot: Snapshot
    ) -> None:
        """The wills of clients connected when the process died (see the module): those of
        a session become its pending will (a ``wills`` row, read with the others), the
        others go to ``snapshot.wills``."""
        if clean:
            (count,) = conn.execute("SELECT count(*) FROM held_wills").fetchone()
            if count:
                log.warning(
                    "store %s: %d wills of connected clients left after a clean stop, dropped",
                    self.path,
                    count,
                )
                conn.execute("DELETE FROM held_wills")
            return
        if last_alive is None:  # written with every held will: only a damaged store
            last_alive = clock_now()
        conn.execute("BEGIN")
        try:
            conn.execute(
                "INSERT OR REPLACE INTO wills (client_id, due_at, topic, payload, qos, retain,"
                " properties, origin_protocol, origin_name, origin_peer, origin_username)"
                " SELECT client_id, ? + delay_s, topic, payload, qos, retain, properties,"
                " origin_protocol, origin_name, origin_peer, origin_username FROM held_wills"
                " WHERE client_id IN (SELECT client_id FROM sessions)",
                (last_alive,),
            )
            conn.execute(
                "DELETE FROM held_wills WHERE client_id IN (SELECT client_id FROM sessions)"
            )
            conn.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        for row in conn.execute(
            "SELECT client_id, delay_s, topic, payload, qos, retain, properties,"
            " origin_protocol, origin_name, origin_peer, origin_username FROM held_wills"
        ):
            client_id, delay_s, topic, payload, qos, retain, props, *origin = row
            properties, _ = decode_properties(props, 0, len(props), PacketKind.WILL)
            will = Will(topic, bytes(payload), qos, bool(retain), properties)
            restored = RestoredWill(last_alive + delay_s, will, Origin(*origin))
            snapshot.wills.append((client_id, restored))

    def _load(self, conn: Any, clean: bool) -> Snapshot:
        """``clean``: the last run stopped cleanly (``marker.stopped_cleanly``)."""
        snapshot = Snapshot()
        for row in conn.execute(
            "SELECT topic, payload, qos, properties, origin_protocol, origin_name, received_at"
            " FROM retained"
        ):
            topic, payload, qos, props, oproto, oname, received_at = row
            snapshot.retained.append(
                _context(topic, payload, qos, 1, props, oproto, oname, received_at)
            )
        for row in conn.execute(
            "SELECT id, due_at, topic, payload, qos, retain, properties, origin_protocol,"
            " origin_name, received_at FROM delayed ORDER BY due_at"
        ):
            key, due_at, *message = row
            snapshot.delayed.append((key, due_at, _context(*message)))
        # Sessions with a connection when the process died: offline since it last ran
        # (``alive``), so their expiry counts the downtime as an offline session's does;
        # written back, so another crash before they expire does not move it.
        row = conn.execute("SELECT value FROM meta WHERE key = 'last_alive'").fetchone()
        last_alive = None if row is None else float(row[0])
        if last_alive is not None:
            conn.execute(
                "UPDATE sessions SET offline_since = ? WHERE offline_since IS NULL",
                (last_alive,),
            )
        self._load_held_wills(conn, clean, last_alive, snapshot)
        sessions: dict[str, RestoredSession] = {}
        for client_id, expiry, offline_since in conn.execute(
            "SELECT client_id, expiry_interval, offline_since FROM sessions"
        ):
            sessions[client_id] = RestoredSession(client_id, expiry, offline_since)
        for row in conn.execute(
            "SELECT client_id, topic_filter, qos, no_local, retain_as_published,"
            " retain_handling, subscription_id FROM subscriptions"
        ):
            client_id, topic_filter, qos, no_local, rap, handling, sub_id = row
            restored = sessions.get(client_id)
            if restored is not None:
                options = SubscriptionOptions(qos, bool(no_local), bool(rap), handling)
                restored.subscriptions.append(Subscription(topic_filter, options, sub_id))
        contexts: dict[int, Context] = {}
        for row in conn.execute(
            "SELECT id, topic, payload, qos, retain, properties, origin_protocol, origin_name,"
            " received_at FROM messages"
        ):
            contexts[row[0]] = _context(*row[1:])
        self._next_message_key = max(contexts, default=0) + 1
        for row in conn.execute(
            "SELECT id, client_id, message_id, qos, retain, subscription_ids, packet_id, released"
            " FROM deliveries ORDER BY id"
        ):
            key, client_id, message, qos, retain, ids, packet_id, released = row
            restored = sessions.get(client_id)
            context = contexts.get(message)
            if restored is None or context is None:
                continue
            sub_ids = tuple(int(i) for i in ids.split(",")) if ids else ()
            delivery = Delivery(context, qos, bool(retain), sub_ids)
            delivery.key = key
            delivery.packet_id = packet_id
            delivery.released = bool(released)
            restored.deliveries.append(delivery)
            self._message_keys[context.id] = message
            self._message_refs[message] = self._message_refs.get(message, 0) + 1
            self._next_delivery_key = max(self._next_delivery_key, key + 1)
        for client_id, packet_id in conn.execute("SELECT client_id, packet_id FROM incoming"):
            restored = sessions.get(client_id)
            if restored is not None:
                restored.incoming_qos2.add(packet_id)
        for row in conn.execute(
            "SELECT client_id, due_at, topic, payload, qos, retain, properties, origin_protocol,"
            " origin_name, origin_peer, origin_username FROM wills"
        ):
            client_id, due_at, topic, payload, qos, retain, props, *origin = row
            restored = sessions.get(client_id)
            if restored is not None:
                properties, _ = decode_properties(props, 0, len(props), PacketKind.WILL)
                will = Will(topic, bytes(payload), qos, bool(retain), properties)
                restored.will = RestoredWill(due_at, will, Origin(*origin))
        # A will belongs to its session (both go in one commit): none is left without it.
        conn.execute("DELETE FROM wills WHERE client_id NOT IN (SELECT client_id FROM sessions)")
        # Messages no delivery refers to any more (a crash between the two deletes).
        orphans = [(m,) for m in contexts if m not in self._message_refs]
        if orphans:
            conn.executemany(_DELETE_MESSAGE, orphans)
        snapshot.sessions = list(sessions.values())
        return snapshot


def _will_row(client_id: str, when: float, will: Will, origin: Origin) -> tuple[Any, ...]:
    """A row of ``wills`` (``when``: its due time) or ``held_wills`` (its delay)."""
    props = will.properties
    return (
        client_id,
        when,
        will.topic,
        will.payload,
        will.qos,
        int(will.retain),
        b"\x00" if props is EMPTY else props.encoded(),
        origin.protocol,
        origin.name,
        origin.peer,
        origin.username,
    )
