"""``RetainedStore``: the broker's own ``$SYS`` messages are held beside the clients'
bounds (``max_messages``, ``max_bytes``), neither counted against them nor refused."""

from __future__ import annotations

from broker_core.context import Context, Origin
from broker_core.retained import RetainedStore, is_broker_own, retained_size

SYS = Origin("sys", "node")
CLIENT = Origin("mqtt", "c1")


def own(topic: str, payload: bytes = b"42") -> Context:
    return Context(f"$SYS/brokers/node/{topic}", payload, 0, True, origin=SYS)


def test_what_is_the_brokers_own() -> None:
    assert is_broker_own(own("uptime")) is True
    assert is_broker_own(Context("$SYS/brokers/node/uptime", b"1", origin=CLIENT)) is False
    assert is_broker_own(Context("plant/a", b"1", origin=SYS)) is False


def test_the_brokers_own_messages_use_no_message_quota() -> None:
    store = RetainedStore(max_messages=2)
    for name in ("version", "uptime", "clients/connected"):
        assert store.set(own(name)) is True
    assert store.set(Context("a", b"1", origin=CLIENT)) is True
    assert store.set(Context("b", b"1", origin=CLIENT)) is True
    assert store.over_limit(Context("c", b"1", origin=CLIENT)) == "retained_messages"
    assert store.set(Context("c", b"1", origin=CLIENT)) is False
    assert store.set(own("clients/maximum")) is True  # the quota is full: still retained
    assert store.set(own("uptime", b"43")) is True
    assert (len(store), store.own, store.refused) == (6, 4, 1)
    store.clear("a")
    assert store.set(Context("c", b"1", origin=CLIENT)) is True
    store.clear("$SYS/brokers/node/version")
    assert (len(store), store.own) == (5, 3)
    assert store.set(Context("d", b"1", origin=CLIENT)) is False


def test_the_brokers_own_messages_use_no_byte_quota() -> None:
    client = Context("a", b"x" * 10, origin=CLIENT)
    version, uptime = own("version", b"v" * 100), own("uptime", b"9" * 100)
    store = RetainedStore(max_bytes=retained_size(client))
    assert store.set(version) is True
    assert store.set(client) is True
    assert store.set(uptime) is True
    assert store.over_limit(Context("b", b"1", origin=CLIENT)) == "retained_bytes"
    own_bytes = retained_size(version) + retained_size(uptime)
    assert (store.bytes, store.own_bytes) == (retained_size(client) + own_bytes, own_bytes)
    store.set(own("uptime", b""))  # cleared
    assert store.own_bytes == retained_size(version)
    assert store.over_limit(Context("b", b"1", origin=CLIENT)) == "retained_bytes"


def test_a_client_message_replacing_a_brokers_own_counts_as_new() -> None:
    store = RetainedStore(max_messages=1)
    assert store.set(Context("x", b"1", origin=CLIENT)) is True
    assert store.set(own("uptime")) is True
    replacing = Context("$SYS/brokers/node/uptime", b"1", origin=CLIENT)
    assert store.over_limit(replacing) == "retained_messages"
