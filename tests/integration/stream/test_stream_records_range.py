"""``GET /api/v1/stream/records``: its ``X-Edgebus-Start`` / ``X-Edgebus-End`` headers give
the range the answer covers, also when ``limit`` cuts it; ``end`` below ``start`` is 422."""

from __future__ import annotations

from pathlib import Path

from gateway.components import SINK
from tests.helpers.gateway import running_gateway
from tests.integration.broker.support import Clients
from tests.integration.components.support import status_of, wait_for
from tests.integration.stream.support import STREAM, header, http_of, offsets_of


def test_the_headers_give_the_range_covered_and_a_reversed_range_is_refused(
    tmp_path: Path,
) -> None:
    with running_gateway(tmp_path, STREAM) as gw:
        http = http_of(gw)
        wait_for(lambda: status_of(gw, SINK, "stream")["state"], lambda s: s == "running")
        clients = Clients(gw)
        try:
            pub = clients.connect(5, "range-pub")
            for n in range(13):
                pub.publish(f"r/{n % 3}", str(n).encode(), qos=1)
        finally:
            clients.close_all()
        wait_for(lambda: offsets_of(http)["end"], lambda end: end == 13)

        def answer(query: str) -> tuple[list[int], tuple[str, str]]:
            for fmt in ("jsonl", "arrow"):
                reply = http.get(f"/api/v1/stream/records?{query}&format={fmt}")
                assert reply.status == 200, reply.text
                covered = (header(reply, "x-edgebus-start"), header(reply, "x-edgebus-end"))
                if fmt == "jsonl":
                    offsets = [
                        int(line.split(",")[0].split(":")[1]) for line in reply.text.splitlines()
                    ]
                    found = (offsets, covered)
                else:
                    assert covered == found[1]
            return found

        assert answer("limit=2") == ([0, 1], ("0", "2"))
        assert answer("start=5&limit=3") == ([5, 6, 7], ("5", "8"))
        assert answer("start=5&end=7&limit=3") == ([5, 6], ("5", "7"))
        assert answer("start=10&limit=5") == ([10, 11, 12], ("10", "13"))
        # With a topic filter: up to the limit-th matching record (r/1: 1, 4, 7, 10).
        assert answer("topic=r/1&limit=2") == ([1, 4], ("0", "5"))
        assert answer("topic=r/1&start=5&limit=9") == ([7, 10], ("5", "13"))
        assert answer("start=3&end=3") == ([], ("3", "3"))

        reply = http.get("/api/v1/stream/records?start=8&end=3")
        assert reply.status == 422, reply.text
        assert "end (3) is below start (8)" in reply.text
