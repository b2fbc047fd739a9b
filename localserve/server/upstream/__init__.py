"""Upstream models: OpenAI-compatible servers whose models are listed and forwarded to
(docs/upstreams.md). config in ground/upstreams.py; the breaker, the registry and its probe,
the forwarding on the OpenAI face and the Ollama face's translation here."""
