"""Who may talk to the daemon: Host names (DNS rebinding), web page origins (drive-by requests
and CORS preflights), API keys, the operator's CLI, and the folders import and scan may read.

Requests are plain HTTP with the headers a browser or an attacker would send."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import openai
import pytest

from tests.support.daemons import raw_request, resident
from tests.support.helpers import MODEL

GENERATE = json.dumps(
    {"model": MODEL, "prompt": "Hi", "stream": False, "options": {"num_predict": 1}}
).encode()
EVIL = "https://evil.example.com"


def get(url: str, path: str, **headers: str):
    return raw_request(f"{url}{path}", headers=headers)


def post(
    url: str, path: str, body: bytes = b"{}", content_type: str = "application/json", **headers
):
    return raw_request(f"{url}{path}", "POST", body, content_type, headers=headers)


# -- Host ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/tags", "/api/ps", "/v1/models", "/health", "/"])
def test_a_foreign_host_header_is_a_403_naming_the_setting(daemon_url, path) -> None:
    status, _, body = get(daemon_url, path, Host="evil.example.com")
    assert status == 403 and "allowed_hosts" in json.dumps(body)


@pytest.mark.parametrize("path", ["/api/generate", "/v1/chat/completions"])
def test_a_foreign_host_header_is_refused_on_streaming_endpoints(daemon_url, path) -> None:
    body = json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Hi"}],
            "prompt": "Hi",
            "stream": True,
        }
    ).encode()
    status, _, _ = post(daemon_url, path, body, Host="evil.example.com:11434")
    assert status == 403


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:11434",
        "127.0.0.1:8080",
        "[::1]:11434",
        "app.localhost",
        "127.1.2.3",
        "localhost.",
        "127.1",
        "[::ffff:127.0.0.1]",
    ],
)
def test_local_host_names_are_served(daemon_url, host) -> None:
    status, _, _ = get(daemon_url, "/api/tags", Host=host)
    assert status == 200


@pytest.mark.parametrize("host", ["0.0.0.0:11434", "127.0.0.1.nip.io", "localhost.evil.com"])
def test_names_that_only_resolve_to_loopback_are_a_403(daemon_url, host) -> None:
    status, _, body = get(daemon_url, "/v1/models", Host=host)
    assert status == 403 and body["error"]["param"] == "allowed_hosts"


@pytest.mark.parametrize(
    "host", ["localhost:80@evil.com", "evil.com#.localhost", "localhost:99999"]
)
def test_a_host_header_that_is_no_host_and_port_is_a_400(daemon_url, host) -> None:
    status, _, body = get(daemon_url, "/api/tags", Host=host)
    assert status == 400 and "is not a host name and port" in body["error"]


def test_two_host_headers_are_a_400(daemon_url) -> None:
    """RFC 9110 wants it; aiohttp's parser answers before the guard sees the request."""
    address = urlsplit(daemon_url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as conn:
        conn.sendall(b"GET /api/tags HTTP/1.1\r\nHost: localhost\r\nHost: evil.com\r\n\r\n")
        assert conn.recv(64).split(b" ")[1] == b"400"


def test_a_host_the_operator_adds_is_served(daemon_factory) -> None:
    _, url = daemon_factory(["--no-default-model", "--allowed-hosts", "*.lan,box"])
    assert get(url, "/api/tags", Host="printer.lan")[0] == 200
    assert get(url, "/api/tags", Host="box:11434")[0] == 200
    assert get(url, "/api/tags", Host="evil.example.com")[0] == 403


# -- Origin --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:3000",
        "https://127.0.0.1",
        "http://[::1]:8080",
        "vscode-webview://abc123",
        "vscode-file://vscode-app",
        "app://obsidian.md",
        "file://",
        "tauri://localhost",
    ],
)
def test_an_allowed_origin_gets_its_answer_with_its_own_origin_back(daemon_url, origin) -> None:
    status, headers, _ = get(daemon_url, "/api/tags", Origin=origin)
    assert status == 200 and headers["Access-Control-Allow-Origin"] == origin


@pytest.mark.parametrize("origin", ["http://localhost:3000", "vscode-webview://abc123"])
def test_a_preflight_from_an_allowed_origin_names_it_and_the_methods(daemon_url, origin) -> None:
    status, headers, _ = raw_request(
        f"{daemon_url}/v1/chat/completions",
        "OPTIONS",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": (
                "authorization, content-type, openai-beta, x-stainless-os"
            ),
        },
    )
    assert status == 204
    assert headers["Access-Control-Allow-Origin"] == origin != "*"
    assert "POST" in headers["Access-Control-Allow-Methods"]
    assert "x-stainless-os" in headers["Access-Control-Allow-Headers"]


@pytest.mark.parametrize("origin", ["null", "http://localhost:3000/path", "http://0.0.0.0:3000"])
def test_an_origin_no_local_page_sends_is_a_403(daemon_url, origin) -> None:
    status, headers, body = get(daemon_url, "/api/tags", Origin=origin)
    assert status == 403 and "origins" in body["error"]
    assert "Access-Control-Allow-Origin" not in headers


def test_a_preflight_from_a_foreign_origin_is_a_403(daemon_url) -> None:
    status, headers, _ = raw_request(
        f"{daemon_url}/api/chat",
        "OPTIONS",
        headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"},
    )
    assert status == 403 and "Access-Control-Allow-Origin" not in headers


@pytest.mark.parametrize(
    "path",
    ["/api/generate", "/api/pull", "/api/admin/import", "/api/admin/scan", "/api/admin/load"],
)
def test_a_drive_by_text_plain_post_from_a_foreign_origin_does_nothing(daemon_url, path) -> None:
    body = json.dumps({"model": "tinyllama", "path": "/root", "prompt": "Hi"}).encode()
    before = set(resident(daemon_url))
    status, headers, answer = post(daemon_url, path, body, "text/plain", Origin=EVIL)
    assert status == 403 and "origins" in json.dumps(answer)
    assert "Access-Control-Allow-Origin" not in headers
    assert set(resident(daemon_url)) == before


def test_an_origin_the_operator_adds_is_allowed(daemon_factory) -> None:
    _, url = daemon_factory(["--no-default-model", "--origins", "https://*.example.org"])
    assert get(url, "/api/tags", Origin="https://app.example.org")[0] == 200
    assert get(url, "/api/tags", Origin=EVIL)[0] == 403


# -- keys ----------------------------------------------------------------------------------------


def test_on_loopback_with_no_key_any_bearer_is_taken(daemon_url) -> None:
    assert get(daemon_url, "/api/tags", Authorization="Bearer undefined")[0] == 200
    assert get(daemon_url, "/api/tags")[0] == 200


@pytest.fixture
def keyed(daemon_factory) -> str:
    _, url = daemon_factory(["--no-default-model", "--api-key", "k-user", "--admin-key", "k-admin"])
    return url


def test_with_a_key_a_request_without_it_is_a_401(keyed) -> None:
    status, _, body = get(keyed, "/api/tags")
    assert status == 401 and "API key" in body["error"]
    assert get(keyed, "/v1/models", Authorization="Bearer wrong")[0] == 401


@pytest.mark.parametrize("header", [{"Authorization": "Bearer k-user"}, {"X-Api-Key": "k-user"}])
def test_with_a_key_the_key_opens_the_api(keyed, header) -> None:
    assert get(keyed, "/api/tags", **header)[0] == 200


def test_health_root_version_and_the_web_page_need_no_key(keyed) -> None:
    for path in ("/health", "/", "/api/version", "/ui/", "/ui/ui.js"):
        assert get(keyed, path)[0] == 200, path


def test_the_admin_endpoints_want_the_admin_key(keyed) -> None:
    body = json.dumps({"model": MODEL}).encode()
    assert post(keyed, "/api/admin/load", body, Authorization="Bearer k-user")[0] == 403
    # Past the guard: the unload itself answers (no such model is loaded).
    assert post(keyed, "/api/admin/unload", body, Authorization="Bearer k-admin")[0] == 404


def test_the_openai_client_sends_its_key(keyed) -> None:
    good = openai.OpenAI(base_url=f"{keyed}/v1", api_key="k-user", max_retries=0)
    assert good.models.list() is not None
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{keyed}/v1", api_key="nope", max_retries=0).models.list()


def test_serving_beyond_loopback_without_a_key_refuses_to_start(tmp_path) -> None:
    import subprocess
    import sys

    from tests.support.daemons import free_port

    cmd = [
        sys.executable,
        "-m",
        "localserve",
        "serve",
        "--no-default-model",
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "--api-key" in done.stderr and "--no-auth" in done.stderr


# -- the operator and the folders import and scan may read ---------------------------------------


def test_scan_outside_the_models_folder_and_import_roots_is_a_403(daemon_url, tmp_path) -> None:
    status, _, body = post(
        daemon_url, "/api/admin/scan", json.dumps({"path": str(tmp_path)}).encode()
    )
    assert status == 403 and "import_roots" in body["error"]


def test_scan_inside_an_import_root_is_answered(daemon_factory, tmp_path) -> None:
    _, url = daemon_factory(["--no-default-model", "--import-roots", str(tmp_path)])
    status, _, body = post(url, "/api/admin/scan", json.dumps({"path": str(tmp_path)}).encode())
    assert status == 200 and body["models"] == []


def test_the_cli_is_the_operator_and_scans_anywhere(daemon_factory, tmp_path) -> None:
    from localserve.client import Client

    _, url = daemon_factory(["--no-default-model", "--api-key", "k-user"])
    assert Client(url).scan(str(tmp_path)) == []
