"""localserve: a local LLM server that keeps several models hot and batches concurrent requests."""

__version__ = "0.1.0"
