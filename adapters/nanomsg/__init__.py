"""The ``nng`` adapter: NNG (nanomsg's successor) sockets via pynng, mapped to MQTT.

``config.py`` and ``codec.py`` import no pynng; ``adapter.py`` is the only module that
imports it (``pip install 'edgebus[nng]'``). docs/adapters/nanomsg.md is the guide.
"""
