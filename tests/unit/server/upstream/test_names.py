"""Which name reaches which model: `model@upstream` always; a plain name a local model's first,
then the first upstream's that lists it (server/upstream/registry.py)."""

from __future__ import annotations

from localserve.ground.settings import Settings
from localserve.ground.upstreams import UpstreamConfig
from localserve.server.upstream.registry import Registry, RemoteModel


def registry() -> Registry:
    r = Registry(
        (
            UpstreamConfig("a", "http://a/v1", models=("m1", "shared", "smollm2")),
            UpstreamConfig("b", "http://b/v1"),
        ),
        Settings(),
    )
    r.upstreams[1].listed = {
        "shared": RemoteModel("shared", 8192),
        "Qwen/Big": RemoteModel("Qwen/Big", 32768),
    }
    return r


def local(name: str) -> bool:
    return name in ("smollm2", "smollm2:latest")


def test_listed_names_mark_the_clashes() -> None:
    names = [(r.name, r.upstream.name, r.model.id) for r in registry().listed(local)]
    assert names == [
        ("m1", "a", "m1"),
        ("shared", "a", "shared"),
        ("smollm2@a", "a", "smollm2"),
        ("shared@b", "b", "shared"),
        ("Qwen/Big", "b", "Qwen/Big"),
    ]


def test_find() -> None:
    r = registry()

    def where(name: str) -> tuple[str, str] | None:
        found = r.find(name, local)
        return None if found is None else (found.upstream.name, found.model.id)

    assert where("m1") == ("a", "m1")
    assert where("shared") == ("a", "shared")
    assert where("shared@b") == ("b", "shared")
    assert where("smollm2") is None  # the local model wins
    assert where("smollm2@a") == ("a", "smollm2")
    assert where("qwen/big:latest") == ("b", "Qwen/Big")
    assert where("unknown") is None
    assert where("unlisted@b") == ("b", "unlisted")  # the upstream's own 404 answers it
    assert r.find("Qwen/Big", local).model.context_length == 32768  # type: ignore[union-attr]
