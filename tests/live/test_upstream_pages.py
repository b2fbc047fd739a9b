"""An upstream's models on the web page (/ui), in Debian's chromium through Playwright: listed
with the server that runs them, and not offered to load. The upstream is a second localserve
daemon, the daemon under test reads it from its config.toml."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.test_ui_browser import CHROMIUM, CHROMIUM_MISSING, FLAGS
from tests.support.daemons import stop_daemon
from tests.support.live import start_daemon
from tests.support.prerequisites import require
from tests.support.upstream_support import configure, get


@pytest.fixture(scope="module", autouse=True)
def chromium() -> None:
    require(Path(CHROMIUM).exists(), CHROMIUM_MISSING)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The daemon under test, and the URL of its upstream."""
    peer, peer_url = start_daemon(["--model", "smollm2", "--parallel", "1", "--ctx", "1024"])
    config = tmp_path_factory.mktemp("upstreams") / "config.toml"
    env = configure(config, {"peer": f"{peer_url}/v1"})
    proc, url = start_daemon(["--model", "smollm2", "--parallel", "1", "--ctx", "1024"], env=env)
    try:
        yield url, f"{peer_url}/v1"
    finally:
        stop_daemon(proc)
        stop_daemon(peer)


def test_the_page_lists_an_upstream_model_as_remote_with_no_load_button(
    served: tuple[str, str], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    url, upstream = served
    remote = [m["name"] for m in get(f"{url}/api/tags")["models"] if m.get("remote_host")]
    assert remote, "the upstream's models are not in /api/tags"
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        try:
            page = browser.new_page()
            page.goto(f"{url}/ui")
            name = remote[0].removesuffix(":latest")
            row = page.locator("#stored tbody tr", has_text=name).first
            row.wait_for(state="attached", timeout=60_000)
            assert f"remote: {upstream}" in row.inner_text()
            assert row.locator("button").count() == 0
        finally:
            browser.close()
