"""edgebus: gateway/api."""
