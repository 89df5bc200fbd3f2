"""The ``someip`` adapter: SOME/IP services to MQTT and back, through someipy.

``config.py`` (the configuration), ``codec.py`` (AUTOSAR SOME/IP serialization of
YAML-declared layouts to and from JSON), ``messages.py`` (SOME/IP messages as Contexts),
``availability.py`` (service discovery states) are pure and import no someipy;
``methods.py`` (method calls both ways) and ``network.py`` (the adapter's own sockets)
take someipy's objects without importing it; ``adapter.py`` is the only module
importing it; ``process.py`` runs the adapter's own daemon, ``daemon.py`` (someipyd with
the workarounds for its bugs, in that daemon's process). See docs/adapters/someip.md.
"""
