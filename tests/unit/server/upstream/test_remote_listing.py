"""The upstream probe reads whatever an upstream's GET /v1/models sends: every listing is read
without raising, and no more than LISTING_LIMIT bytes of it (server/upstream/remote_models.py).
The probes run against real aiohttp servers on loopback, in this process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from localserve.ground.settings import Settings
from localserve.ground.upstreams import UpstreamConfig
from localserve.server.upstream.registry import Registry
from localserve.server.upstream.remote_models import LISTING_LIMIT, RemoteModel, read_listing

NOW = 1_700_000_000


def listing(*entries: Any) -> dict[str, Any]:
    return {"object": "list", "data": list(entries)}


@pytest.mark.parametrize(
    "created",
    ["yesterday", "1700000000", None, True, [1], {"at": 1}, -5, 0, 10**30, float("nan"), 1e300],
    ids=repr,
)
def test_a_created_that_is_no_usable_time_is_when_the_model_was_first_seen(created: Any) -> None:
    read = read_listing(listing({"id": "m", "created": created}), {"m": 1_600_000_000}, NOW)
    assert read == {"m": RemoteModel("m", None, 1_600_000_000)}


def test_a_created_that_is_a_float_is_read_as_whole_seconds() -> None:
    assert read_listing(listing({"id": "m", "created": 1.6e9 + 0.5}), {}, NOW)["m"].created == 1.6e9


def test_a_model_never_seen_with_no_created_is_dated_now() -> None:
    assert read_listing(listing({"id": "m"}), {}, NOW)["m"].created == NOW


@pytest.mark.parametrize(
    "entry", [{}, {"id": None}, {"id": 7}, {"id": ""}, {"id": ["m"]}, "m", 7, None], ids=repr
)
def test_an_entry_with_no_text_id_is_skipped(entry: Any) -> None:
    assert read_listing(listing(entry, {"id": "kept"}), {}, NOW) == {
        "kept": RemoteModel("kept", None, NOW)
    }


@pytest.mark.parametrize(
    "body",
    [None, 7, "text", [], [{"id": "m"}], {}, {"data": None}, {"data": 7}, {"data": {"id": "m"}}],
    ids=repr,
)
def test_a_listing_that_is_no_list_of_models_lists_none(body: Any) -> None:
    assert read_listing(body, {}, NOW) == {}


@pytest.mark.parametrize("context", ["8192", True, -1, 0, 8.5, None, {"n": 1}], ids=repr)
def test_a_context_length_that_is_no_positive_integer_is_unknown(context: Any) -> None:
    assert read_listing(listing({"id": "m", "context_length": context}), {}, NOW)["m"] == (
        RemoteModel("m", None, NOW)
    )


def test_llama_cpp_servers_context_is_read_from_meta() -> None:
    entry = {"id": "m", "meta": {"n_ctx_train": 32768}}
    assert read_listing(listing(entry), {}, NOW)["m"].context_length == 32768


# -- probes against a real server ----------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def probed(*handlers: Handler, probes: int = 1) -> Registry:
    """A registry of one upstream per handler (named u0, u1, ...), after `probes` rounds of the
    probe loop's own probing."""

    async def go() -> Registry:
        servers = []
        for handler in handlers:
            app = web.Application()
            app.router.add_get("/v1/models", handler)
            servers.append(TestServer(app, host="127.0.0.1"))
        for server in servers:
            await server.start_server()
        configs = tuple(
            UpstreamConfig(f"u{i}", str(s.make_url("/v1"))) for i, s in enumerate(servers)
        )
        registry = Registry(configs, Settings(upstream_probe_interval=0.1))
        await registry.start(web.Application())
        await asyncio.sleep(0.1 * (probes - 1) + 0.05)
        await registry.stop(web.Application())
        for server in servers:
            await server.close()
        return registry

    return asyncio.run(go())


def answering(body: bytes, counter: list[int] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        if counter is not None:
            counter.append(1)
        return web.Response(body=body, content_type="application/json")

    return handler


def test_a_listing_with_text_for_created_lists_its_model() -> None:
    body = json.dumps(listing({"id": "m", "created": "yesterday"})).encode()
    (up,) = probed(answering(body)).upstreams
    assert list(up.listed) == ["m"]
    assert up.breaker.failures == 0


def test_an_odd_listing_from_one_upstream_leaves_the_probes_of_the_others_going() -> None:
    odd = json.dumps({"data": 7, "created": "x"}).encode()
    calls: list[int] = []
    good = answering(json.dumps(listing({"id": "g"})).encode(), calls)
    registry = probed(answering(odd), good, probes=4)
    assert len(calls) >= 3
    assert list(registry.upstreams[1].listed) == ["g"]


def test_a_listing_over_the_limit_is_a_failed_probe_that_says_why() -> None:
    huge = json.dumps(listing(*({"id": f"m{i}"} for i in range(LISTING_LIMIT // 10)))).encode()
    (up,) = probed(answering(huge)).upstreams
    assert up.breaker.failures == 1
    assert "MiB a listing may take" in (up.breaker.last_error or "")
    assert not up.listed


def test_a_streamed_listing_over_the_limit_is_cut_off_once_past_it() -> None:
    chunk, chunks = 64 << 10, 16 * LISTING_LIMIT // (64 << 10)
    sent: list[int] = []

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)  # chunked: no Content-Length to refuse it by
        await response.write(b'{"data": [')
        try:
            for _ in range(chunks):
                await response.write(b" " * chunk)
                sent.append(chunk)
        except (ConnectionError, asyncio.CancelledError):
            pass
        return response

    (up,) = probed(endless).upstreams
    assert "MiB a listing may take" in (up.breaker.last_error or "")
    assert len(sent) < chunks  # the probe hung up rather than read on
