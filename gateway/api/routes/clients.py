"""``/clients``: sessions, online or not, with paging and filters; DELETE kicks one.

A client is a session of the broker's registry: connected clients, and persistent
sessions whose client is away (``connected: false``). Kicking sends an MQTT 5 client
DISCONNECT with reason 0x98 (Administrative action) and closes the connection; its
session then lives on or ends as its expiry interval says, like after any disconnect.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response, status

from broker_core.clock import now as clock_now
from broker_core.listeners.connection import MqttConnection
from broker_core.mqtt.session_state import SessionState
from gateway.api.components import GatewayView
from gateway.api.deps import MAX_QUERY, Caller, Gw, Limit, Offset, Responses, page
from gateway.api.schemas import ClientInfo, ClientPage

__all__ = ["client_info", "router"]

log = logging.getLogger(__name__)

router = APIRouter(tags=["clients"])

_NOT_FOUND: Responses = {404: {"description": "No such client"}}


def _connections(gateway: GatewayView) -> dict[int, MqttConnection]:
    """Connections by ``id()`` of their protocol session."""
    return {id(conn.session): conn for conn in gateway.broker.connections}


def client_info(state: SessionState, conn: MqttConnection | None) -> ClientInfo:
    session = state.connection
    return ClientInfo(
        clientid=state.client_id,
        connected=session is not None,
        username=session.origin.username if session is not None else None,
        peer=session.peer if session is not None else None,
        listener=conn.listener.name if conn is not None else None,
        protocol_level=session.protocol_level if session is not None else None,
        keep_alive=session.keep_alive if session is not None else None,
        clean_start=session.clean_start if session is not None else None,
        session_expiry_interval=state.expiry_interval,
        subscriptions=len(state.subscriptions),
        queued_messages=len(state.queue or ()),
        queued_bytes=state.queued_bytes,
        inflight=len(state.outgoing),
        inflight_bytes=state.inflight_bytes,
    )


def _peer_host(peer: str | None) -> str | None:
    if peer is None:
        return None
    host, _, _ = peer.rpartition(":")
    return host.strip("[]") or None


@router.get("/clients", summary="Clients, a page at a time")
async def list_clients(
    gateway: Gw,
    offset: Offset = 0,
    limit: Limit = 100,
    like_clientid: Annotated[
        str | None, Query(max_length=MAX_QUERY, description="Client ids containing this.")
    ] = None,
    username: Annotated[str | None, Query(max_length=MAX_QUERY)] = None,
    ip: Annotated[str | None, Query(max_length=64, description="Peer IP address.")] = None,
    listener: Annotated[str | None, Query(max_length=MAX_QUERY)] = None,
    protocol_level: Annotated[int | None, Query(ge=3, le=5)] = None,
    connected: Annotated[bool | None, Query(description="Only online / offline ones.")] = None,
) -> ClientPage:
    conns = _connections(gateway)
    items: list[ClientInfo] = []
    for state in gateway.broker.sessions:
        session = state.connection
        if connected is not None and (session is not None) != connected:
            continue
        if like_clientid is not None and like_clientid not in state.client_id:
            continue
        conn = conns.get(id(session)) if session is not None else None
        info = client_info(state, conn)
        if username is not None and info.username != username:
            continue
        if ip is not None and _peer_host(info.peer) != ip.strip("[]"):
            continue
        if listener is not None and info.listener != listener:
            continue
        if protocol_level is not None and info.protocol_level != protocol_level:
            continue
        items.append(info)
    items.sort(key=lambda item: item.clientid)
    return ClientPage(
        total=len(items), offset=offset, limit=limit, items=page(items, offset, limit)
    )


def _state(gateway: GatewayView, clientid: str) -> SessionState:
    state = gateway.broker.sessions.get(clientid)
    if state is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no client {clientid!r}")
    return state


@router.get("/clients/{clientid:path}", summary="One client", responses=_NOT_FOUND)
async def get_client(gateway: Gw, clientid: str) -> ClientInfo:
    state = _state(gateway, clientid)
    session = state.connection
    conn = _connections(gateway).get(id(session)) if session is not None else None
    return client_info(state, conn)


@router.delete(
    "/clients/{clientid:path}",
    summary="Kick a client (DISCONNECT 0x98) and end its session",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={404: {"description": "No session with that client id"}},
)
async def kick_client(gateway: Gw, caller: Caller, clientid: str) -> Response:
    state = _state(gateway, clientid)
    session = state.connection
    conn = _connections(gateway).get(id(session)) if session is not None else None
    log.info("client %s kicked through the API by %s", clientid, caller.name)
    gateway.broker.discard_session(clientid)
    if conn is not None:
        conn.after_session_update(clock_now())  # flush the DISCONNECT, close the socket
    return Response(status_code=status.HTTP_204_NO_CONTENT)
