"""The ``zmq`` adapter: ZeroMQ sockets (pyzmq) mapped to MQTT topics, both ways.

``config.py`` and ``codec.py`` import no ZeroMQ; ``adapter.py`` is the only module that
imports pyzmq (``pip install 'edgebus[zmq]'``). docs/adapters/zmq.md is the guide.
"""
