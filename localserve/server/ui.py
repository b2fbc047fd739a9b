"""GET /ui: the daemon's web page (chat, models, live figures), served from files in the
package: no CDN, nothing fetched from anywhere else, and a Content-Security-Policy that says so
to the browser. The page calls the API it came from, so it is a same-origin caller under
http/guard.py's rules; it asks for the API key when the daemon wants one."""

from __future__ import annotations

from functools import cache
from importlib import resources

from aiohttp import web

FILES = {
    "index.html": "text/html",
    "ui.js": "text/javascript",
    "markdown.js": "text/javascript",
    "ui.css": "text/css",
}
PATHS = frozenset({"/ui", "/ui/", *(f"/ui/{name}" for name in FILES)})
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


@cache
def _read(name: str) -> bytes:
    return resources.files("localserve.server").joinpath("ui").joinpath(name).read_bytes()


async def page(request: web.Request) -> web.Response:
    name = request.match_info.get("name") or "index.html"
    if name not in FILES:
        raise web.HTTPNotFound(reason=f"no file {name} in the page")
    return web.Response(
        body=_read(name),
        content_type=FILES[name],
        charset="utf-8",
        headers={
            "Content-Security-Policy": _POLICY,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
        },
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get("/ui", page)
    app.router.add_get("/ui/", page)
    app.router.add_get("/ui/{name}", page)
