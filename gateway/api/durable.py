"""Waiting, in an API route, until what the route changed is durable.

A route that changes what the broker stores (a QoS 1/2 publish, a retained message
deleted) answers as an MQTT PUBACK is sent: once the broker's store and every durable
participant (bridge queues, the stream log) have committed everything handed to them so
far (``broker_core.acks.Acknowledgements.after``).
"""

from __future__ import annotations

import asyncio

from broker_core.broker import Broker

__all__ = ["written"]


async def written(broker: Broker) -> bool:
    """True once everything handed to the store and the durable participants so far is
    committed; False when a write failed. At once when nothing is pending."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bool] = loop.create_future()

    def committed(ok: bool) -> None:
        if not done.done():  # the request may have been cancelled
            done.set_result(ok)

    broker.acks.after(done, committed)  # this request is its own owner
    return await done
