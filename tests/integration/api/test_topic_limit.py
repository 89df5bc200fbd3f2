"""``GET /topics`` holds at most ``limit`` nodes (docs/api.md): a tree larger than that
is cut after whole levels but the last, says ``truncated``, and marks ``more`` the nodes
whose children it leaves out; asking again with each of them as ``root`` gives the rest.
A tree within the limit is answered as before, with neither key."""

from __future__ import annotations

from typing import Any

from gateway.api.routes.topics import DEFAULT_NODES, MAX_NODES
from tests.helpers.gateway import RunningGateway
from tests.integration.api.support import Http
from tests.integration.broker.support import Clients

WIDE = 1500  # a/0 ... a/1499
LEAVES = 10  # a/N/0 ... a/N/9: 1 + 1,500 + 15,000 subscribed levels
RETAINED_ONLY = "a/5/r"  # a level only a retained message names
RETAINED_TOO = "a/1499"  # a level subscribed and retained


def _subscribe_all(clients: Clients) -> set[str]:
    filters = [f"a/{n}/{leaf}" for n in range(WIDE) for leaf in range(LEAVES)]
    for start in range(0, len(filters), 1000):  # mqtt.max_subscriptions a client
        client = clients.raw_connect(5, f"wide{start}")
        chunk = [(f, 0) for f in filters[start : start + 1000]]
        assert client.subscribe(chunk).reason_codes == [0] * len(chunk)
    return {"a"} | {f"a/{n}" for n in range(WIDE)} | set(filters)


def _nodes(children: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for node in children:
        found.append(node)
        found += _nodes(node["children"])
    return found


def _children_of(tree: set[str]) -> dict[str, set[str]]:
    children: dict[str, set[str]] = {}
    for topic in tree:
        children.setdefault(topic.rpartition("/")[0], set()).add(topic)
    return children


def test_a_tree_over_limit_is_cut_marked_and_can_be_continued(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    tree = _subscribe_all(clients)
    for topic in (RETAINED_ONLY, RETAINED_TOO):
        reply = http.post("/api/v1/publish", {"topic": topic, "payload": "1", "retain": True})
        assert reply.status == 200
    tree.add(RETAINED_ONLY)
    children = _children_of(tree)

    for limit, query in ((DEFAULT_NODES, ""), (MAX_NODES, f"&limit={MAX_NODES}"), (7, "&limit=7")):
        answer = http.get(f"/api/v1/topics?depth=64{query}").json()
        nodes = _nodes(answer["children"])
        assert answer["truncated"] is True
        assert answer["nodes"] == len(nodes) == limit
        shown = {node["topic"] for node in nodes}
        assert shown <= tree
        assert all(t.rpartition("/")[0] in shown for t in shown if "/" in t)  # whole paths
        levels = sorted({t.count("/") for t in shown})
        assert all(
            children.get(t, set()) <= shown for t in shown if t.count("/") < levels[-1] - 1
        )  # every level but the last two whole
        for node in nodes:
            topic = node["topic"]
            left_out = bool(children.get(topic, set()) - shown)
            assert node.get("more", False) is left_out, topic
            assert "more" not in node or node["more"] is True
            assert node["retained"] is (topic == RETAINED_TOO)
            assert node["subscriptions"] == (
                1 if topic.count("/") == 2 and topic != RETAINED_ONLY else 0
            )

    # Asking again below each node marked "more" gives the rest of the tree.
    seen: set[str] = set()
    pending = [("", 64)]
    while pending:
        root, depth = pending.pop()
        query = f"root={root}&" if root else ""
        answer = http.get(f"/api/v1/topics?{query}depth={depth}&limit={MAX_NODES}").json()
        for node in _nodes(answer["children"]):
            seen.add(node["topic"])
            if node.get("more"):
                pending.append((node["topic"], 64 - node["topic"].count("/") - 1))
    assert seen == tree


def test_a_tree_within_limit_is_answered_whole_without_the_new_keys(
    gw: RunningGateway, http: Http, clients: Clients
) -> None:
    client = clients.raw_connect(5, "few")
    assert client.subscribe([("p/q", 0), ("p/+", 0)]).reason_codes == [0, 0]
    expected = {
        "nodes": 3,
        "children": [
            {
                "name": "p", "topic": "p", "subscriptions": 0, "retained": False,
                "children": [
                    {"name": "+", "topic": "p/+", "subscriptions": 1, "retained": False,
                     "children": []},
                    {"name": "q", "topic": "p/q", "subscriptions": 1, "retained": False,
                     "children": []},
                ],
            }
        ],
    }  # fmt: skip
    assert http.get("/api/v1/topics").json() == expected
    assert http.get("/api/v1/topics?limit=3").json() == expected
    cut = http.get("/api/v1/topics?limit=2").json()
    assert cut["truncated"] is True
    assert cut["nodes"] == 2
    assert cut["children"][0]["more"] is True
    # The deepest level asked for has children, but depth, not limit, leaves them out.
    assert "truncated" not in http.get("/api/v1/topics?depth=1&limit=1").json()


def test_a_bad_limit_is_refused_like_the_other_parameters(http: Http) -> None:
    for value in ("0", "-1", str(MAX_NODES + 1), "many"):
        reply = http.get(f"/api/v1/topics?limit={value}")
        assert reply.status == 422, value
        assert reply.json()["detail"][0]["loc"] == ["query", "limit"]
    assert http.get("/api/v1/topics?depth=0").status == 422  # as depth is
    assert http.get(f"/api/v1/topics?limit={MAX_NODES}").status == 200


def test_a_cut_node_of_the_empty_first_level_can_be_continued(
    gw: RunningGateway, http: Http
) -> None:
    """``/a/b`` has an empty first level, whose node's topic is ``""``: ``root=`` (empty)
    asks for the tree below it, as for any node marked ``more`` (before: the whole tree
    again, so a crawler following the ``more`` marks never got below it)."""
    for topic in ("/a/b", "/a/c", "z"):
        reply = http.post("/api/v1/publish", {"topic": topic, "payload": "1", "retain": True})
        assert reply.status == 200
    cut = http.get("/api/v1/topics?depth=64&limit=2").json()
    assert cut["truncated"] is True
    marked = [node["topic"] for node in _nodes(cut["children"]) if node.get("more")]
    assert marked == [""]
    empty = http.get("/api/v1/topics?depth=64&root=").json()
    assert {node["topic"] for node in _nodes(empty["children"])} == {"/a", "/a/b", "/a/c"}
    whole = http.get("/api/v1/topics?depth=64").json()
    assert {node["topic"] for node in _nodes(whole["children"])} == {
        "", "/a", "/a/b", "/a/c", "z"
    }
