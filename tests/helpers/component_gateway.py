"""``python -m tests.helpers.component_gateway run -c cfg.yaml``: the edgebus CLI with the
test component types of ``tests.helpers.components`` registered, for tests that run the
gateway in a subprocess (``start_edgebus(..., main="tests.helpers.component_gateway")``).
"""

from __future__ import annotations

from gateway.cli import main
from tests.helpers.components import register_test_types

if __name__ == "__main__":
    register_test_types()
    main()
