"""edgebus: gateway."""
