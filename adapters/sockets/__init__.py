"""What the ZeroMQ and NNG adapters share, written once.

- ``config``: the mapping entries (``zmq_to_mqtt`` / ``nng_to_mqtt`` and
  ``mqtt_to_zmq`` / ``mqtt_to_nng``), narrowed by each adapter's ``config.py``;
- ``frames``: the ``prefix`` frame layout (``topic + delimiter + payload``: NanoMQ's
  ``sub_pre`` / ``pub_pre`` and its NNG bridge wire format);
- ``mapping``: mappings compiled from their templates and codecs
  (``gateway.mapping``), with their counters;
- ``requests``: MQTT 5 request/response across the native side (Response Topic and
  Correlation Data), both ways;
- ``peers``: the ``degraded`` reason of connect-side sockets without a peer.

Nothing here imports pyzmq or pynng.
"""
