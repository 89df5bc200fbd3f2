"""edgebus protocol adapters: DDS, ROS 2, ZeroMQ, NNG, SOME/IP, and the loopback.

Each adapter is a component (``gateway.components``), registered by import path in
``gateway/components/registry.py``. Adapters import the gateway and ``broker_core``;
the gateway never imports them at module level.
"""
