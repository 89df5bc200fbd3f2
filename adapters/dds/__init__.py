"""The ``dds`` adapter: a DDS bus (Cyclone DDS) to MQTT and back, IDL loaded at run time.

``config.py`` (the configuration, and the DDS settings the ``ros2`` adapter shares),
``codec.py`` (pure conversion between serialized samples and Contexts), ``bridge.py``
(routing between the DDS bus and the hub, shared with ``ros2``), ``adapter.py`` (the only
module importing cyclonedds: the bus and the component).
See docs/adapters/dds.md.
"""
