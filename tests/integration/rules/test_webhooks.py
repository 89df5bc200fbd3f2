"""Webhooks in a running gateway: events posted to a real local HTTP server, with EMQX's
fields, topic filters, base64 payloads, custom headers, an HMAC signature, retries; a
dead endpoint while clients publish at full speed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import ssl
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from gateway.api.metrics import new_registry
from tests.helpers.http_sink import HttpSink, StalledSink
from tests.helpers.timeouts import unit
from tests.integration.broker.support import wait_until
from tests.integration.listeners.pki import Pki
from tests.integration.rules.support import gateway_with_clients


def test_lifecycle_and_message_events_with_emqx_fields(tmp_path: Path) -> None:
    with HttpSink() as sink:
        config = f"""
webhooks:
  - name: all
    url: "{sink.url("/events")}"
    events: [client.connect, client.connack, client.connected, client.subscribe,
             session.subscribed, message.publish, message.delivered, message.acked,
             client.unsubscribe, session.unsubscribed, client.disconnected,
             session.terminated]
    topics: ["plant/#"]
    headers: {{X-Site: north}}
    secret: "k3y"
"""
        with gateway_with_clients(tmp_path, config) as (_, clients):
            client = clients.connect(5, "w1")
            client.subscribe("plant/#", 1)
            client.publish("plant/a", b"hello", qos=1)
            client.publish("other/a", b"not posted", qos=1)
            client.expect_message()
            client.unsubscribe("plant/#")
            client.disconnect()
            wanted = {
                "client.connect", "client.connack", "client.connected", "client.subscribe",
                "session.subscribed", "message.publish", "message.delivered",
                "message.acked", "client.unsubscribe", "session.unsubscribed",
                "client.disconnected", "session.terminated",
            }  # fmt: skip

            def seen() -> set[str]:
                return {r.json()["event"] for r in sink.received("/events")}

            wait_until(lambda: seen() >= wanted, what=f"every event in {wanted}")
        requests = sink.received("/events")
        assert all(r.json().get("topic") != "other/a" for r in requests)
        by_event = {r.json()["event"]: r for r in requests}
        connected = by_event["client.connected"].json()
        assert connected["action"] == "client_connected"
        assert (connected["clientid"], connected["proto_ver"], connected["keepalive"]) == (
            "w1",
            5,
            60,
        )
        assert connected["ipaddress"] == "127.0.0.1"
        published = by_event["message.publish"].json()
        assert (published["topic"], published["payload"], published["qos"]) == (
            "plant/a",
            "hello",
            1,
        )
        assert published["clientid"] == "w1"
        delivered = by_event["message.delivered"].json()
        assert (delivered["from_clientid"], delivered["clientid"]) == ("w1", "w1")
        assert by_event["client.disconnected"].json()["reason"] == "normal"
        request = by_event["session.subscribed"]
        assert request.json()["topic"] == "plant/#"
        assert request.headers["X-Site"] == "north"
        expected = hmac.new(b"k3y", request.body, hashlib.sha256).hexdigest()
        assert request.headers["X-Edgebus-Signature"] == f"sha256={expected}"


def test_base64_payloads_and_retries(tmp_path: Path) -> None:
    with HttpSink(status=503) as sink:
        config = f"""
webhooks:
  - name: b64
    url: "{sink.url("/b64")}"
    events: [message.publish]
    payload_encoding: base64
    retries: 2
    retry_backoff: 50ms
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            clients.connect(4).publish("bin/x", b"\x00\xffdata", qos=1)
            requests = sink.wait_for(3, "/b64")  # the first try and 2 retries
            assert base64.b64decode(requests[0].json()["payload"]) == b"\x00\xffdata"
            assert requests[0].json()["payload_encoding"] == "base64"
            stats = wait_until(
                lambda: (s := gw.call(lambda: gw.gateway.webhooks.statuses()[0]))["failed"] and s,
                what="the failure counted",
            )
            assert (stats["sent"], stats["failed"], stats["retried"]) == (0, 1, 2)


def test_a_dead_endpoint_never_slows_the_broker(tmp_path: Path) -> None:
    """Clients publish as fast as they can while the webhook's endpoint never answers:
    every message still reaches the subscriber, and the events the queue cannot hold
    are dropped and counted."""
    with StalledSink() as dead:
        config = f"""
webhooks:
  - name: dead
    url: "{dead.url("/dead")}"
    events: [message.publish, message.delivered]
    queue_size: 100
    timeout: 30s
    pool_size: 2
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            subscriber = clients.subscriber(4, "fast/#", qos=0)
            publisher = clients.connect(4)
            count = 5000
            started = time.monotonic()
            for i in range(count):
                publisher.publish("fast/t", str(i).encode(), qos=0)
            publisher.publish("fast/end", b"end", qos=1)  # acknowledged after the others
            received = subscriber.expect_messages(count + 1, timeout=60)
            elapsed = time.monotonic() - started
            assert [m.payload for m in received[-2:]] == [str(count - 1).encode(), b"end"]
            stats = gw.call(lambda: gw.gateway.webhooks.statuses()[0])
            # 2 events per message, 100 queued, at most 2 in flight: the rest dropped.
            assert stats["dropped"] >= 2 * (count + 1) - 100 - 2
            assert stats["queue_depth"] <= 100
            assert stats["sent"] == 0
            assert elapsed < unit(60)
            scraped = gw.call(lambda: generate_latest(new_registry(gw.gateway)).decode())
            dropped = re.search(r'edgebus_webhook_dropped_total\{webhook="dead"\} (\S+)', scraped)
            assert dropped is not None
            assert float(dropped.group(1)) >= stats["dropped"]


def test_https_endpoints_are_verified(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path / "pki")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(pki.server.cert, pki.server.key)
    with HttpSink(tls=tls) as sink:
        config = f"""
webhooks:
  - {{name: trusted, url: "{sink.url("/trusted")}", events: [client.connected],
      cafile: "{pki.ca}"}}
  - {{name: unverified, url: "{sink.url("/unverified")}", events: [client.connected],
      tls_verify: false}}
  - {{name: untrusted, url: "{sink.url("/untrusted")}", events: [client.connected],
      retries: 0}}
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            clients.connect(5, "secure")
            assert sink.wait_for(1, "/trusted")[0].json()["clientid"] == "secure"
            assert sink.wait_for(1, "/unverified")[0].json()["clientid"] == "secure"

            def untrusted() -> dict[str, int]:
                hooks = gw.call(gw.gateway.webhooks.statuses)
                return next(h for h in hooks if h["name"] == "untrusted")

            assert wait_until(lambda: untrusted()["failed"] == 1, what="refused")
            assert sink.received("/untrusted") == []


def test_a_request_that_times_out_is_retried_then_failed(tmp_path: Path) -> None:
    with StalledSink() as dead:
        config = f"""
webhooks:
  - name: slow
    url: "{dead.url("/slow")}"
    events: [client.connected]
    timeout: 200ms
    retries: 1
    retry_backoff: 10ms
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            clients.connect(4, "patient")
            stats = wait_until(
                lambda: (s := gw.call(gw.gateway.webhooks.statuses)[0])["failed"] and s,
                what="the post failed after its retry",
            )
            assert (stats["sent"], stats["retried"], stats["failed"]) == (0, 1, 1)


def test_redirects_are_not_followed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A 302 is a failure: the event, its headers and its signature are not sent to the
    host the Location names (aiohttp would re-send them as an empty GET there)."""
    with HttpSink() as elsewhere, HttpSink(status=302) as redirecting:
        redirecting.headers["Location"] = elsewhere.url("/elsewhere?token=t0p")
        config = f"""
webhooks:
  - name: moved
    url: "{redirecting.url("/hook")}"
    events: [client.connected]
    headers: {{X-Token: "hook-token"}}
    secret: "k3y"
    retries: 2
    retry_backoff: 10ms
"""
        with gateway_with_clients(tmp_path, config) as (gw, clients):
            clients.connect(4, "moved")
            stats = wait_until(
                lambda: (s := gw.call(gw.gateway.webhooks.statuses)[0])["failed"] and s,
                what="the redirected post counted as failed",
            )
            assert (stats["sent"], stats["failed"], stats["retried"]) == (0, 1, 0)
            assert len(redirecting.received("/hook")) == 1
            assert redirecting.received("/hook")[0].json()["clientid"] == "moved"
            assert elsewhere.received() == []
        warnings = [r.getMessage() for r in caplog.records if r.name == "gateway.webhook"]
        assert any(
            "HTTP 302 to 'http://127.0.0.1:" in m and "token=**********" in m for m in warnings
        )
        assert not any("t0p" in m for m in warnings)


def test_shared_subscriptions_are_judged_by_their_inner_filter(tmp_path: Path) -> None:
    """client.subscribe / session.subscribed of ``$share/g/plant/x`` pass ``topics:
    ["#"]`` (the default) and ``["plant/#"]``, as ``plant/y`` does."""
    with HttpSink() as sink:
        config = f"""
webhooks:
  - name: all
    url: "{sink.url("/all")}"
    events: [client.subscribe, session.subscribed]
  - name: plant
    url: "{sink.url("/plant")}"
    events: [client.subscribe, session.subscribed]
    topics: ["plant/#"]
  - name: other
    url: "{sink.url("/other")}"
    events: [client.subscribe, session.subscribed]
    topics: ["other/#"]
"""
        with gateway_with_clients(tmp_path, config) as (_, clients):
            client = clients.connect(5, "sharer")
            client.subscribe("$share/g/plant/x", 1)
            client.subscribe("plant/y", 1)
            client.subscribe("$share/g/other/z", 1)
            wanted = {
                (event, topic)
                for event in ("client.subscribe", "session.subscribed")
                for topic in ("$share/g/plant/x", "plant/y")
            }

            def seen(path: str) -> set[tuple[str, str]]:
                return {(r.json()["event"], r.json()["topic"]) for r in sink.received(path)}

            wait_until(lambda: seen("/all") >= wanted, what=f"/all got {wanted}")
            wait_until(lambda: seen("/plant") >= wanted, what=f"/plant got {wanted}")
            wait_until(lambda: len(seen("/other")) == 2, what="/other got $share/g/other/z")
            assert seen("/other") == {
                ("client.subscribe", "$share/g/other/z"),
                ("session.subscribed", "$share/g/other/z"),
            }
            assert ("client.subscribe", "$share/g/other/z") not in seen("/plant")
