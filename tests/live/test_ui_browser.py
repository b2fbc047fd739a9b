"""The web page at /ui in a real browser: Debian's chromium, headless, driven by Playwright,
against a live daemon. No network: chromium starts with a fresh profile and nothing of its own
to fetch.

With LOCALSERVE_SCREENSHOTS=DIR, each view's screenshot is saved there (docs/ui-chat.png and
docs/ui-models.png were made so).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.daemons import poll
from tests.support.helpers import NO_END, REPO
from tests.support.live import running_daemon
from tests.support.prerequisites import require

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_MISSING = "needs Debian's chromium (apt-get install chromium)"


@pytest.fixture(scope="module", autouse=True)
def chromium() -> None:
    require(Path(CHROMIUM).exists(), CHROMIUM_MISSING)


FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ANSWER_S = 120_000  # ms: an answer on a busy 2-core machine


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(["--model", "smollm2", "--parallel", "2", "--ctx", "1024"]) as (_, url):
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1100, "height": 700},
        )
        yield context
        context.close()


@pytest.fixture
def page(browser, url: str):
    page = browser.new_page()
    page.set_default_timeout(ANSWER_S)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{url}/ui")
    page.wait_for_selector("#model-select option[value='smollm2']", state="attached")
    yield page
    page.close()
    assert errors == [], errors  # no script error on the page


def screenshot(page, name: str) -> None:
    folder = os.environ.get("LOCALSERVE_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / name))


def ask(page, text: str, max_tokens: int) -> None:
    page.fill("#max-tokens", str(max_tokens))
    page.fill("#prompt", text)
    page.click("#send")


def test_a_message_gets_a_streamed_answer(page) -> None:
    ask(page, "Write a short poem about the sea.", 48)
    streaming = page.wait_for_selector(".message.assistant.streaming")
    poll(
        "text before the end",
        lambda: (
            streaming.inner_text().strip()
            and "streaming" in (streaming.get_attribute("class") or "")
        ),
        120,
        0.02,
    )
    page.wait_for_selector(".message.assistant:not(.streaming)")
    answer = page.locator(".message.assistant").last
    assert answer.inner_text().strip()
    assert page.locator(".message.user").last.inner_text() == "Write a short poem about the sea."
    screenshot(page, "ui-chat.png")


def never_ending(route) -> None:
    """Sampled SmolLM2 often answers this prompt in 4 to 50 tokens ("One thousand."), and on a
    loaded machine the whole answer lands before Stop does (CI saw a 120 s timeout so). Its
    end tokens are banned on the way out, so the answer runs to max_tokens; the page, the
    daemon and the stream are the real ones."""
    body = route.request.post_data_json
    route.continue_(post_data=json.dumps({**body, "logit_bias": NO_END}))


def test_stop_ends_an_answer_mid_stream_and_frees_its_slot(page, url: str) -> None:
    page.route("**/v1/chat/completions", never_ending)
    ask(page, "Count from one to one thousand, in words.", 800)
    node = page.wait_for_selector(".message.assistant.streaming")
    poll("the first words", lambda: node.inner_text().strip(), 120, 0.05)
    # Not page.click: it waits for the button to stand still, and streaming text keeps moving
    # the layout; on a loaded machine the answer ended first (CI saw a 120 s timeout so).
    page.dispatch_event("#stop", "click")
    page.wait_for_selector(".message.assistant[data-stopped]")
    assert page.is_visible("#send") and not page.is_visible("#stop")
    poll(
        "the slot freed",
        lambda: all(
            m["localserve"]["in_flight"] == 0 for m in httpx.get(f"{url}/api/ps").json()["models"]
        ),
        30,
    )


def test_unload_from_the_models_view_changes_api_ps(page, url: str) -> None:
    page.click("#models-tab")
    page.wait_for_selector("#loaded button.unload[data-model='smollm2']")
    screenshot(page, "ui-models.png")
    page.click("#loaded button.unload[data-model='smollm2']")
    page.wait_for_selector("#loaded button.unload[data-model='smollm2']", state="detached")
    assert httpx.get(f"{url}/api/ps").json()["models"] == []
    page.wait_for_selector("#stored button.load[data-model='smollm2']")  # and it can come back
    page.click("#stored button.load[data-model='smollm2']")
    page.wait_for_selector("#loaded button.unload[data-model='smollm2']")
    assert [m["name"] for m in httpx.get(f"{url}/api/ps").json()["models"]] == ["smollm2:latest"]


def test_the_page_shows_live_figures_from_metrics(page) -> None:
    page.wait_for_function("document.querySelector('#memory').textContent.includes('cpu')")
    assert "MiB" in page.inner_text("#memory")


def test_the_page_needs_nothing_from_another_origin(page, url: str) -> None:
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.reload()
    page.wait_for_selector("#model-select option[value='smollm2']", state="attached")
    assert requested and all(u.startswith(url) for u in requested), requested


def test_the_shipped_files_name_no_other_site() -> None:
    folder = REPO / "localserve" / "server" / "ui"
    assert not [p.name for p in folder.iterdir() if p.is_file() and "://" in p.read_text()]
