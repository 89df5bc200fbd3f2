"""The built-in ``loopback`` adapter: republishes between topic spaces."""
