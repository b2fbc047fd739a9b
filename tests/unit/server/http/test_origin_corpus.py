"""The Origin headers the guard allows and refuses, case by case. A browser sends an origin's
serialization (scheme, host, port: the Fetch standard), so one that is anything more came from
no browser; a sandboxed frame on any site sends `null`.
"""

from __future__ import annotations

import pytest

from localserve.server.http.guard import Guard


def guard(origins: tuple[str, ...] = ()) -> Guard:
    return Guard(True, (), origins, None, None)


ALLOWED = {
    "http://localhost:3000": "a page on localhost, at any port",
    "https://localhost": "over TLS",
    "http://127.0.0.1:8080": "on the loopback address",
    "http://[::1]:3000": "on the IPv6 loopback address",
    "http://app.localhost:5173": "under localhost (RFC 6761)",
    "http://localhost.:3000": "the absolute form of localhost",
    "vscode-webview://abc123": "an editor's webview: the user's own tool",
    "vscode-file://vscode-app": "VS Code's own shell",
    "app://obsidian.md": "a desktop app's shell",
    "file://": "an Electron app's page from disk",
    "tauri://localhost": "a Tauri app's shell",
}

REFUSED = {
    "null": "sandboxed frames and data: pages on any site send it",
    "https://evil.example.com": "another site's page",
    "http://localhost.evil.com": "starts with localhost, but evil.com's",
    "https://127.0.0.1.evil.com": "starts with the loopback address, but evil.com's",
    "http://0.0.0.0:3000": "the '0.0.0.0 day': no local page's origin",
    "http://localhost:3000/path": "an origin has no path: no browser sends one",
    "http://localhost:80": "a browser never writes the default port",
    "HTTP://LOCALHOST:3000": "a browser serializes an origin in lowercase",
    "http://127.1:3000": "a browser sends the address it parsed, 127.0.0.1",
    "http://user@localhost:3000": "an origin has no userinfo",
    "https://localhost@evil.com": "a userinfo, and evil.com's",
    "http://evil.com\\@localhost": "WHATWG reads evil.com (the backslash starts a path)",
    "ftp://localhost": "no page a browser runs scripts for",
    "chrome-extension://abcdefghijklmnop": "another's extension, unless the operator adds it",
    "localhost:3000": "no scheme",
}


@pytest.mark.parametrize(("origin", "why"), ALLOWED.items())
def test_local_pages_and_the_users_own_tools_are_allowed(origin: str, why: str) -> None:
    assert guard().origin_allowed(origin), why


@pytest.mark.parametrize(("origin", "why"), REFUSED.items())
def test_other_origins_are_refused(origin: str, why: str) -> None:
    assert not guard().origin_allowed(origin), why


def test_no_origin_is_no_page_and_allowed() -> None:
    assert guard().origin_allowed(None)


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("https://app.example.org", True),
        ("https://a.b.example.org", True),
        ("https://evil.com/.example.org", False),
        ("https://evil.com#.example.org", False),
        ("https://app.example.org.evil.com", False),
        ("http://app.example.org", False),
    ],
)
def test_the_operators_patterns_match_the_whole_origin(origin: str, allowed: bool) -> None:
    assert guard(("https://*.example.org",)).origin_allowed(origin) is allowed


@pytest.mark.parametrize("origin", ["null", "https://evil.example.com"])
def test_a_star_allows_every_page(origin: str) -> None:
    assert guard(("*",)).origin_allowed(origin)
