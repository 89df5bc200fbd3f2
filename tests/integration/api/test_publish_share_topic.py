"""``/publish`` and ``/publish/batch`` refuse a topic name starting ``$share/`` (the form
of a shared subscription) with 400, as the broker refuses it from an MQTT client
(docs/api.md, docs/broker.md); nothing is published or retained."""

from __future__ import annotations

from tests.helpers.gateway import RunningGateway
from tests.integration.api.support import Http


def test_share_topic_is_refused_and_not_retained(gw: RunningGateway, http: Http) -> None:
    reply = http.post("/api/v1/publish", {"topic": "$share/g/x", "payload": "1", "retain": True})
    assert reply.status == 400
    assert "$share/" in reply.json()["detail"]
    assert reply.json()["detail"].startswith("topic: ")

    batch = [
        {"topic": "ok/1", "payload": "1", "retain": True},
        {"topic": "$share/g/y", "payload": "2", "retain": True},
    ]
    reply = http.post("/api/v1/publish/batch", batch)
    assert reply.status == 400
    assert "[1]" in reply.json()["detail"] and "$share/" in reply.json()["detail"]

    delayed = {"topic": "$delayed/5/$share/g/z", "payload": "3", "retain": True}
    assert http.post("/api/v1/publish", delayed).status == 400

    for topic in ("%24share%2Fg%2Fx", "%24share%2Fg%2Fy", "ok%2F1"):
        assert http.get(f"/api/v1/retained/{topic}").status == 404

    reply = http.post("/api/v1/publish", {"topic": "share/g/x", "payload": "1", "retain": True})
    assert reply.status == 200
    assert http.get("/api/v1/retained/share%2Fg%2Fx").status == 200
