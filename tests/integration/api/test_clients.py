"""``/health``, ``/brokers`` and ``/clients``: listing, filters, paging, kicking."""

from __future__ import annotations

from broker_core.broker import VERSION
from broker_core.mqtt.reason_codes import ReasonCode
from tests.helpers.gateway import RunningGateway
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients, connect_props, wait_until


def test_health_and_brokers(gw: RunningGateway, http: Http) -> None:
    health = http.get("/api/v1/health").json()
    assert (health["status"], health["node"]) == ("ok", "edgebus@127.0.0.1")
    [broker] = http.get("/api/v1/brokers").json()
    host, port = gw.address()
    assert (broker["node"], broker["version"]) == ("edgebus@127.0.0.1", VERSION)
    assert broker["listeners"] == [{"name": "tcp:127.0.0.1:0", "address": f"{host}:{port}"}]
    assert broker["uptime_s"] >= 0


def test_clients_with_filters_and_paging(gw: RunningGateway, http: Http, clients: Clients) -> None:
    alpha = clients.paho(5, "alpha")
    alpha.connect(keepalive=30)
    beta = clients.paho(4, "beta")
    beta.connect()
    gamma = clients.paho(5, "gamma-alpha")
    gamma.connect(properties=connect_props(SessionExpiryInterval=300))
    gamma.disconnect()
    wait_until(lambda: gw.call(lambda: gw.broker.sessions.online_count()) == 2)

    page = http.get("/api/v1/clients").json()
    assert page["total"] == 3
    assert [c["clientid"] for c in page["items"]] == ["alpha", "beta", "gamma-alpha"]
    one = http.get("/api/v1/clients/alpha").json()
    assert one["peer"].startswith("127.0.0.1:")
    assert {k: v for k, v in one.items() if k != "peer"} == {
        "clientid": "alpha",
        "connected": True,
        "username": None,
        "listener": "tcp:127.0.0.1:0",
        "protocol_level": 5,
        "keep_alive": 30,
        "clean_start": True,
        "session_expiry_interval": 0,
        "subscriptions": 0,
        "queued_messages": 0,
        "queued_bytes": 0,
        "inflight": 0,
        "inflight_bytes": 0,
    }
    away = http.get("/api/v1/clients/gamma-alpha").json()
    assert (away["connected"], away["peer"], away["session_expiry_interval"]) == (False, None, 300)

    def ids(query: str) -> list[str]:
        reply = http.get(f"/api/v1/clients?{query}")
        assert reply.status == 200
        return [c["clientid"] for c in reply.json()["items"]]

    assert ids("like_clientid=alpha") == ["alpha", "gamma-alpha"]
    assert ids("protocol_level=4") == ["beta"]
    assert ids("connected=false") == ["gamma-alpha"]
    assert ids("connected=true&ip=127.0.0.1") == ["alpha", "beta"]
    assert ids("listener=tcp:127.0.0.1:0") == ["alpha", "beta"]
    assert ids("username=nobody") == []
    assert ids("offset=1&limit=1") == ["beta"]
    paged = http.get("/api/v1/clients?offset=2&limit=5").json()
    assert (paged["total"], paged["offset"], paged["limit"]) == (3, 2, 5)
    assert http.get("/api/v1/clients?limit=0").status == 422
    assert http.get("/api/v1/clients?protocol_level=9").status == 422


def test_unknown_client_is_404_with_a_json_body(http: Http) -> None:
    reply = http.get("/api/v1/clients/nobody%2Fhere")
    assert reply.status == 404
    assert reply.json() == {"detail": "no client 'nobody/here'"}


def test_client_ids_with_slashes(gw: RunningGateway, http: Http, clients: Clients) -> None:
    odd = clients.paho(5, "line/1/robot")
    odd.connect()
    assert http.get("/api/v1/clients/line/1/robot").json()["clientid"] == "line/1/robot"


def test_delete_kicks_an_mqtt5_client_with_administrative_action(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    victim = clients.paho(5, "victim")
    victim.connect()
    bystander = clients.paho(5, "bystander")
    bystander.connect()
    reply = http.delete("/api/v1/clients/victim")
    assert (reply.status, reply.body) == (204, b"")
    info = victim.wait_disconnected()
    assert (info.reason_code, info.from_server) == (ReasonCode.ADMINISTRATIVE_ACTION, True)
    wait_until(lambda: http.get("/api/v1/clients/victim").status == 404)
    assert bystander.is_connected
    assert http.delete("/api/v1/clients/victim").status == 404


def test_delete_closes_an_mqtt311_client(gw: RunningGateway, http: Http, clients: Clients) -> None:
    old = clients.paho(4, "old")
    old.connect()
    assert http.delete("/api/v1/clients/old").status == 204
    old.wait_disconnected()


def test_kicking_an_offline_session_ends_it(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    sleeper = clients.paho(5, "sleeper")
    sleeper.connect(properties=connect_props(SessionExpiryInterval=300))
    sleeper.subscribe("dreams/#", 1)
    sleeper.disconnect()
    wait_until(lambda: not http.get("/api/v1/clients/sleeper").json()["connected"])
    assert http.delete("/api/v1/clients/sleeper").status == 204
    assert http.get("/api/v1/clients/sleeper").status == 404
    assert http.delete("/api/v1/clients/sleeper").status == 404
    again = clients.paho(5, "sleeper")
    assert not again.connect(
        clean_start=False, properties=connect_props(SessionExpiryInterval=300)
    ).session_present


def test_a_kicked_client_leaves_its_will(gw: RunningGateway, http: Http, clients: Clients) -> None:
    watcher = clients.paho(5, "watcher")
    watcher.connect()
    watcher.subscribe("wills/#", 1)
    doomed = clients.paho(5, "doomed")
    doomed.will_set("wills/doomed", b"gone", 1)
    doomed.connect()
    assert http.delete("/api/v1/clients/doomed").status == 204
    message = watcher.expect_message()
    assert (message.topic, message.payload) == ("wills/doomed", b"gone")
