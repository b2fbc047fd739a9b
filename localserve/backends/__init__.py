"""Backends: one module per runtime behind the protocol in `base`."""
