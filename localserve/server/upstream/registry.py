"""The upstreams of one daemon: their models, which request names reach them, their health.

**Names.** `model@upstream` always names the upstream's model. A plain name is a local model's
when one is pulled, embedded or loaded under it (the local model wins); otherwise the first
upstream, in the config file's order, that lists it. The listings show each upstream model
under the name that reaches it: plain, or `model@upstream` when a local model or an earlier
upstream has the plain name.

**Health.** Each upstream is probed (GET /v1/models) every `upstream_probe_interval` seconds;
the probe refreshes its list of models and feeds its breaker, as the requests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from localserve.ground.errors import UpstreamUnavailable
from localserve.ground.settings import Settings
from localserve.ground.upstreams import UpstreamConfig
from localserve.server.http import bounded_json
from localserve.server.upstream.breaker import CLOSED, OPEN, Breaker
from localserve.server.upstream.remote_models import (
    LISTING_LIMIT,
    ListingTooLarge,
    RemoteModel,
    read_listing,
)

log = logging.getLogger(__name__)


@dataclass
class Upstream:
    config: UpstreamConfig
    breaker: Breaker
    # What its /v1/models listed last (by id); the configured names before the first answer.
    listed: dict[str, RemoteModel] = field(default_factory=dict)
    in_flight: Counter[str] = field(default_factory=Counter)
    probed_at: float | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def models(self) -> list[RemoteModel]:
        """The models it serves here: the configured ones (with what its listing says of them),
        or all it lists."""
        if self.config.models is None:
            return list(self.listed.values())
        return [self.listed.get(m, RemoteModel(m)) for m in self.config.models]

    def headers(self) -> dict[str, str]:
        """The key goes to this upstream's URL only: requests are sent with redirects off."""
        key = self.config.key()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def admit(self) -> None:
        """Raise the 503 of an open breaker, or let the request go."""
        if not self.breaker.allow():
            why = self.breaker.last_error or "it failed"
            retry = self.breaker.retry_in()
            when = f"tried again in {retry:.0f} s" if retry else "being tried again now"
            raise UpstreamUnavailable(
                self.name,
                self.config.url,
                f"down after {self.breaker.failures} failure(s) ({why}); {when}",
            )

    def failed(self, why: str) -> UpstreamUnavailable:
        self.breaker.failed(why)
        log.warning("upstream %s: %s (breaker %s)", self.name, why, self.breaker.state)
        return UpstreamUnavailable(self.name, self.config.url, why)

    @contextlib.contextmanager
    def serving(self, model: str) -> Iterator[None]:
        """A request to `model` is in flight (Ollama's /api/ps lists it meanwhile)."""
        self.in_flight[model] += 1
        try:
            yield
        finally:
            self.in_flight[model] -= 1
            if self.in_flight[model] <= 0:
                del self.in_flight[model]

    def health(self) -> dict[str, Any]:
        b = self.breaker
        return {
            "name": self.name,
            "url": self.config.url,
            "state": "up" if b.state == CLOSED else ("down" if b.state == "open" else "retrying"),
            "breaker": b.state,
            "failures": b.failures,
            "last_error": b.last_error,
            "retry_in_s": round(b.retry_in(), 1),
            "models": [m.id for m in self.models()],
            "in_flight": sum(self.in_flight.values()),
        }


@dataclass(frozen=True)
class Route:
    upstream: Upstream
    model: RemoteModel
    name: str  # as the request named it, and as the answer names it back


class Registry:
    def __init__(self, configs: tuple[UpstreamConfig, ...], settings: Settings) -> None:
        self.settings = settings
        self.upstreams = [
            Upstream(c, Breaker(max(1, settings.upstream_failures), settings.upstream_retry))
            for c in configs
        ]
        self.session: aiohttp.ClientSession | None = None
        self._probe: asyncio.Task[None] | None = None

    # -- names ----------------------------------------------------------------------------------

    def listed(self, local: Callable[[str], bool]) -> list[Route]:
        """Every upstream model under the name that reaches it (see the module's docstring)."""
        routes: list[Route] = []
        taken: set[str] = set()
        for up in self.upstreams:
            for m in up.models():
                plain = m.id not in taken and not local(m.id)
                routes.append(Route(up, m, m.id if plain else f"{m.id}@{up.name}"))
                taken.add(m.id)
        return routes

    def find(self, name: str, local: Callable[[str], bool]) -> Route | None:
        """The upstream model a request's name reaches, or None (a local name, or unknown)."""
        if not self.upstreams:
            return None
        base, at, where = name.rpartition("@")
        if at:
            up = next((u for u in self.upstreams if u.name == where), None)
            if up is not None and base:
                # One it does not list still goes: the upstream's own 404 then says so.
                return Route(up, _match(up, base) or RemoteModel(base), name)
        for up in self.upstreams:
            found = _match(up, name)
            if found is not None:
                return None if local(name) else Route(up, found, name)
        return None

    # -- health -----------------------------------------------------------------------------

    def health(self) -> list[dict[str, Any]]:
        return [u.health() for u in self.upstreams]

    def timeout(self) -> aiohttp.ClientTimeout:
        s = self.settings
        return aiohttp.ClientTimeout(
            total=None,
            connect=s.upstream_connect_timeout,
            sock_connect=s.upstream_connect_timeout,
            sock_read=s.upstream_first_byte_timeout,
        )

    async def probe(self, up: Upstream) -> None:
        """GET /v1/models: refreshes the upstream's models and feeds its breaker."""
        assert self.session is not None
        try:
            async with self.session.get(
                f"{up.config.url}/models",
                headers=up.headers(),
                allow_redirects=False,
                timeout=self.timeout(),
            ) as r:
                if r.status != 200:
                    why = f"GET /models answered {r.status}"
                    if 300 <= r.status < 400:
                        why += f" to {r.headers.get('Location', 'elsewhere')} (not followed)"
                    if r.status in (401, 403):
                        why += f" (check the key in ${up.config.key_env or 'its key_env'})"
                    up.failed(why)
                    return
                body = bounded_json.loads(await _capped(r))
        except ListingTooLarge as exc:
            up.failed(str(exc))
            return
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            up.failed(describe(exc))
            return
        seen = {m.id: m.created for m in up.listed.values()}
        up.listed = read_listing(body, seen, int(time.time()))
        up.probed_at = time.time()
        if up.breaker.state != CLOSED:
            log.info("upstream %s is up again", up.name)
        up.breaker.succeeded()

    async def _probe_loop(self, first: asyncio.Future[list[None]]) -> None:
        await first
        while True:
            await asyncio.sleep(max(0.1, self.settings.upstream_probe_interval))
            # An open breaker waits out its interval: then the probe (or a request) is its trial.
            due = [u for u in self.upstreams if u.breaker.state != OPEN or not u.breaker.retry_in()]
            await asyncio.gather(*(self._probe_safely(u) for u in due))

    async def _probe_safely(self, up: Upstream) -> None:
        """A probe whose every fault is that upstream's failed probe: one loop probes every
        upstream, and a fault that escaped it would end the probes of all of them."""
        try:
            await self.probe(up)
        except Exception as exc:
            log.exception("upstream %s: the probe failed", up.name)
            up.failed(f"the probe failed: {describe(exc)}")

    async def start(self, app: web.Application) -> None:
        if not self.upstreams:
            return
        # No proxies from the environment: an upstream is reached where its URL says.
        self.session = aiohttp.ClientSession(trust_env=False)
        first = asyncio.ensure_future(
            asyncio.gather(*(self._probe_safely(u) for u in self.upstreams))
        )
        self._probe = asyncio.create_task(self._probe_loop(first))
        # The first listings (an editor's model picker at start) hold the upstreams' models:
        # the daemon listens once the first probes answered, or after the connect timeout.
        await asyncio.wait([first], timeout=self.settings.upstream_connect_timeout + 1.0)

    async def stop(self, app: web.Application) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        if self.session is not None:
            await self.session.close()


async def _capped(r: aiohttp.ClientResponse) -> bytes:
    """The answer's body, read no further than LISTING_LIMIT: a larger one is refused by its
    Content-Length before a byte is read, or once the bytes that came pass the limit."""
    if r.content_length is not None and r.content_length > LISTING_LIMIT:
        raise ListingTooLarge(r.content_length)
    body = bytearray()
    async for chunk in r.content.iter_chunked(64 << 10):
        body += chunk
        if len(body) > LISTING_LIMIT:
            raise ListingTooLarge()
    return bytes(body)


def _match(up: Upstream, name: str) -> RemoteModel | None:
    """The model of `up` a name means: its id, or the id as an Ollama client may write it
    (another case, or with `:latest`)."""
    models = {m.id: m for m in up.models()}
    for candidate in (name, name.removesuffix(":latest")):
        if candidate in models:
            return models[candidate]
        folded = {k.lower(): v for k, v in models.items()}
        if candidate.lower() in folded:
            return folded[candidate.lower()]
    return None


def describe(exc: BaseException) -> str:
    """What went wrong, in words, without the request (its headers hold the key)."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return f"cannot connect ({exc.os_error.strerror or exc.os_error})"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "it closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the answer was cut off"
    return f"{type(exc).__name__}: {exc}"
