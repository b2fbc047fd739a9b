"""What tools probe before they talk to "Ollama": `/`, /api/version, and the error shape."""

from __future__ import annotations

from tests.support.helpers import raw_request


def test_root_answers_that_ollama_is_running(daemon_url: str) -> None:
    status, headers, body = raw_request(f"{daemon_url}/")
    assert status == 200 and body == b"Ollama is running"
    status, _, _ = raw_request(f"{daemon_url}/", method="HEAD")
    assert status == 200


def test_version_answers_a_version_string(daemon_url: str) -> None:
    status, _, body = raw_request(f"{daemon_url}/api/version")
    assert status == 200
    major, minor, patch = (int(p) for p in body["version"].split("."))
    assert (major, minor) >= (0, 5)  # /api/embed and keep_alive unloads exist from here on


def test_an_unknown_api_path_answers_in_ollama_error_shape(daemon_url: str) -> None:
    status, _, body = raw_request(f"{daemon_url}/api/no-such-endpoint", method="POST", body=b"{}")
    assert status in (404, 405) and set(body) == {"error"} and isinstance(body["error"], str)


def test_a_bad_option_type_is_a_400_naming_it(daemon_url: str) -> None:
    payload = b'{"model": "smollm2", "prompt": "Hi", "options": {"temperature": "hot"}}'
    status, _, body = raw_request(f"{daemon_url}/api/generate", method="POST", body=payload)
    assert status == 400 and "temperature" in body["error"]
