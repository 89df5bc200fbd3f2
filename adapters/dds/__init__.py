"""The ``dds`` adapter: a DDS bus (Cyclone DDS) to MQTT and back, IDL loaded at run time.

``config.py`` (the configuration, and the DDS settings the ``ros2`` adapter shares),
``codec.py`` (pure conversion between serialized samples and Contexts), ``adapter.py``
(the only module importing cyclonedds: the bus, the bridge to the hub, the component).
See docs/adapters/dds.md.
"""
