"""edgebus: gateway/config."""
