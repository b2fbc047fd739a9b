"""`host` settings that carry a port, as OLLAMA_HOST allows: 0.0.0.0:8080, [::1]:8080."""

from __future__ import annotations

from typing import Any


def split_host_port(values: dict[str, Any]) -> None:
    """`LOCALSERVE_HOST=0.0.0.0:8080` (as OLLAMA_HOST allows) sets both; a port given on its
    own at the same level wins over the one inside the host."""
    host = values.get("host")
    if not isinstance(host, str):
        return
    for scheme in ("http://", "https://"):
        if host.startswith(scheme):
            host = host[len(scheme) :]
    host = host.rstrip("/")
    if host.startswith("["):  # [::1]:8080
        addr, _, rest = host[1:].partition("]")
        values["host"] = addr
        if rest.startswith(":") and rest[1:].isdigit():
            values.setdefault("port", int(rest[1:]))
        return
    if host.count(":") == 1:
        addr, _, port = host.partition(":")
        if port.isdigit():
            values["host"] = addr
            values.setdefault("port", int(port))
            return
    values["host"] = host
