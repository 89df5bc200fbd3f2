"""edgebus protocol adapters: DDS, ROS 2, ZeroMQ, NNG, SOME/IP, and the loopback.

The gateway's configuration schema includes every adapter type's config model, so
it is loaded first: importing an adapter's ``config.py`` on its own then finds the
schema complete instead of half-built.
"""

import gateway.config  # noqa: F401
