"""edgebus: bridge."""
