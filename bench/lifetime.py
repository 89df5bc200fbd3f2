"""Every process the harness starts dies with it, even when it is killed with SIGKILL.

Brokers and load-generator processes call ``die_with_parent()`` as they start
(``PR_SET_PDEATHSIG``: the kernel sends them SIGKILL when their parent exits). The
setting is cleared when a process changes credentials, which is why mosquitto, when
the harness runs as root, is told to stay root (``user root``) instead of switching to
the ``mosquitto`` user.
"""

from __future__ import annotations

import ctypes
import signal

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent exits (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
