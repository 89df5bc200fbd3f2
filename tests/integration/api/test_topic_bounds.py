"""The HTTP API and the bounds on topics (docs/broker.md, docs/api.md):

- ``POST /publish`` (and each message of ``/publish/batch``) to a topic deeper than
  ``mqtt.max_topic_levels`` is 400, nothing published;
- such a refusal, and one of a ``$SYS`` or ``$share/`` topic or an invalid ``$delayed/``,
  counts in ``edgebus_publish_denied_total`` (and ``limit_hits{limit="topic_levels"}``)
  as the same publish from an MQTT client does;
- ``GET /retained?topic=`` with a filter deeper than the bound is 400, as a SUBSCRIBE
  of it is refused;
- ``GET /topics`` reads only the levels it shows: with a filter of 128 levels,
  ``depth=1`` answers one node (the whole tree was built before, for any depth).
"""

from __future__ import annotations

from tests.helpers.gateway import RunningGateway
from tests.integration.api.support import Http
from tests.integration.api.test_metrics import prometheus
from tests.integration.broker.support import Clients

LEVELS = 128  # the default of mqtt.max_topic_levels


def deep(first: str, levels: int) -> str:
    return first + "/" * (levels - 1)


def test_an_api_publish_deeper_than_max_topic_levels_is_400(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    reader = clients.raw_connect(5, "reader")
    assert reader.subscribe([("#", 0)]).reason_codes == [0]
    for topic in (deep("a", LEVELS + 1), "$delayed/5/" + deep("a", LEVELS + 1)):
        reply = http.post("/api/v1/publish", {"topic": topic, "payload": "x", "retain": True})
        assert reply.status == 400
        assert "mqtt.max_topic_levels (128)" in reply.json()["detail"]
    batch = [{"topic": "ok", "payload": "1"}, {"topic": deep("b", LEVELS + 1), "payload": "2"}]
    reply = http.post("/api/v1/publish/batch", batch)
    assert reply.status == 400
    assert reply.json()["detail"].startswith("[1].topic:")
    reply = http.post("/api/v1/publish", {"topic": deep("c", LEVELS), "payload": "fits"})
    assert reply.status == 200
    received = reader.recv_publish()  # the first to arrive: nothing before was published
    assert (received.topic, received.payload) == (deep("c", LEVELS), b"fits")
    assert gw.call(lambda: len(gw.broker.retained)) == 0
    assert gw.call(lambda: len(gw.broker.delayed)) == 0


DENIED = ("edgebus_publish_denied_total", ())
TOPIC_LEVELS = ("edgebus_limit_hits_total", (("limit", "topic_levels"),))


def _counts(http: Http) -> tuple[float, float]:
    samples = prometheus(http)
    return samples[DENIED], samples[TOPIC_LEVELS]


def test_an_api_publish_refused_by_topic_counts_as_from_mqtt(http: Http, clients: Clients) -> None:
    publisher = clients.raw_connect(5, "publisher")
    assert _counts(http) == (0, 0)
    too_deep = deep("a", LEVELS + 1)
    for topic in (too_deep, "$SYS/x", "$share/g/x", "$delayed/x/y"):
        ack = publisher.publish(topic, b"x", qos=1)
        assert ack is not None and (ack.reason_code or 0) >= 0x80, topic
    from_mqtt = _counts(http)
    assert from_mqtt == (4, 1)

    for topic in (too_deep, "$SYS/x", "$share/g/x", "$delayed/x/y"):
        reply = http.post("/api/v1/publish", {"topic": topic, "payload": "x"})
        assert reply.status == 400, topic
    reply = http.post("/api/v1/publish/batch", [{"topic": "ok"}, {"topic": too_deep}])
    assert reply.status == 400
    assert _counts(http) == (4 + 5, 1 + 2)
    # A topic no client can send (empty, a wildcard) is not a publish refused: not counted.
    assert http.post("/api/v1/publish", {"topic": "a/+"}).status == 400
    assert _counts(http) == (9, 3)


def test_the_topic_tree_reads_only_the_levels_it_shows(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    client = clients.raw_connect(5, "deep")
    filters = [("x/" + "y/" * (LEVELS - 2) + "z", 0), ("x/+", 1)]
    assert client.subscribe(filters).reason_codes == [0, 1]
    http.post(
        "/api/v1/publish", {"topic": "x/r/" + "q/" * 50 + "s", "payload": "1", "retain": True}
    )
    tree = http.get("/api/v1/topics?depth=1").json()
    assert tree == {
        "nodes": 1,
        "children": [
            {"name": "x", "topic": "x", "subscriptions": 0, "retained": False, "children": []}
        ],
    }
    below = http.get("/api/v1/topics?root=x&depth=1").json()
    assert below["nodes"] == 3
    assert [(n["topic"], n["subscriptions"]) for n in below["children"]] == [
        ("x/+", 1),
        ("x/r", 0),
        ("x/y", 0),
    ]
    last = http.get("/api/v1/topics?root=x/" + "y/" * (LEVELS - 2) + "&depth=64")
    assert last.status == 404  # "x/y/.../y/" ends in an empty level no topic has
    root = "x/" + "y/" * (LEVELS - 3) + "y"
    leaf = http.get(f"/api/v1/topics?root={root}&depth=64").json()
    assert leaf["nodes"] == 1
    assert leaf["children"][0]["topic"] == root + "/z"
    assert leaf["children"][0]["subscriptions"] == 1
    retained = http.get("/api/v1/topics?root=x/r/" + "q/" * 49 + "q").json()
    assert [(n["name"], n["retained"]) for n in retained["children"]] == [("s", True)]
    assert http.get("/api/v1/topics?root=nothing").status == 404


def test_a_retained_filter_deeper_than_max_topic_levels_is_400(http: Http) -> None:
    reply = http.post("/api/v1/publish", {"topic": "r/x", "payload": "1", "retain": True})
    assert reply.status == 200
    for depth, status in ((LEVELS, 200), (LEVELS + 1, 400)):
        query = deep("r", depth - 1) + "/%23"  # r/.../# : ``depth`` levels
        reply = http.get(f"/api/v1/retained?topic={query}")
        assert reply.status == status, depth
    assert reply.json() == {
        "detail": f"topic: {LEVELS + 1} levels, more than mqtt.max_topic_levels ({LEVELS})"
    }
