"""The broker's own retained ``$SYS`` statistics do not count against
``mqtt.max_retained_messages``: with a bound of 2 and ``$SYS`` on, a client (paho, MQTT 5,
over a real socket) retains 2 messages, the 3rd is refused with 0x97 Quota exceeded, and
every ``$SYS`` statistic is still retained and kept up to date."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.gateway import running_gateway
from tests.integration.broker.support import Clients, wait_until

# The statistics published retained under $SYS/brokers/<node>/ (broker_core.sys_topics).
STATISTICS = (
    "version", "uptime", "clients/connected", "clients/total", "clients/maximum",
    "messages/received", "messages/sent", "messages/dropped", "messages/retained/count",
    "messages/delayed/count", "bytes/received", "bytes/sent", "subscriptions/count",
)  # fmt: skip
ACCEPTED = (0x00, 0x10)  # Success, No matching subscribers
QUOTA_EXCEEDED = 0x97

CONFIG = """
mqtt:
  max_retained_messages: 2
sys:
  interval: 100ms
  events: true
"""


def test_sys_statistics_do_not_use_the_clients_retained_quota(tmp_path: Path) -> None:
    with running_gateway(tmp_path, CONFIG) as gw:
        prefix = f"$SYS/brokers/{gw.broker.node_name}/"
        clients = Clients(gw)
        try:
            wait_until(
                lambda: gw.call(lambda: gw.broker.retained.get(prefix + "subscriptions/count")),
                what="the first $SYS statistics retained",
            )
            publisher = clients.connect(5, "retainer")
            assert publisher.publish("plant/a", b"1", qos=1, retain=True) in ACCEPTED
            assert publisher.publish("plant/b", b"2", qos=1, retain=True) in ACCEPTED
            assert publisher.publish("plant/c", b"3", qos=1, retain=True) == QUOTA_EXCEEDED
            assert publisher.publish("plant/a", b"1'", qos=1, retain=True) in ACCEPTED

            reader = clients.subscriber(5, "plant/#", 1, "plant-reader")
            held = {(m.topic, m.payload, m.retain) for m in reader.expect_messages(2)}
            assert held == {("plant/a", b"1'", True), ("plant/b", b"2", True)}
            reader.expect_no_message()

            # The statistics keep being retained with the clients' quota full: the count
            # of retained messages held (2 clients' and 13 $SYS ones) comes up to date.
            count = prefix + "messages/retained/count"
            wait_until(
                lambda: gw.call(lambda: gw.broker.retained.get(count)).payload == b"15",
                what="the retained count published with the quota full",
            )
            watcher = clients.subscriber(5, "$SYS/#", 0, "sys-reader")
            retained = {m.topic: m.payload for m in watcher.drain() if m.retain}
            assert set(retained) == {prefix + name for name in STATISTICS}
            assert retained[count] == b"15"
            # refused: the client's 3rd message only, never a $SYS statistic
            assert gw.call(lambda: gw.broker.retained.refused) == 1
        finally:
            clients.close_all()
