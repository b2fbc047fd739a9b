"""The tray's menu, built from one TrayState (Lemonade's tray is the model): the status line,
each loaded model with Unload and Pin, Unload all, Load ▸ with ticks, the web page, the
daemon's folders, Start at login, Quit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pystray

from localserve_tray.status import LoadedModel, TrayState

# What a menu item runs; whatever it returns is dropped (webbrowser.open's bool, say).
Action = Callable[[], object]


@dataclass(frozen=True)
class Actions:
    """What the menu's items do; each returns at once (the tray runs the work off its thread)."""

    unload: Callable[[str], None]
    pin: Callable[[str, bool], None]
    unload_all: Action
    load: Callable[[str], None]
    start_daemon: Action
    open_logs: Action
    open_models: Action
    open_page: Action
    at_login: Callable[[], bool]  # whether the service and tray start at login
    toggle_at_login: Action
    quit: Action


def build_menu(state: TrayState, act: Actions) -> pystray.Menu:
    item = pystray.MenuItem
    items: list[pystray.MenuItem] = [item(state.line, None, enabled=False)]
    if not state.up:
        items.append(item("Start localserve", _call(act.start_daemon)))
    items.append(pystray.Menu.SEPARATOR)
    items += [item(m.label, _model_menu(m, act)) for m in state.loaded]
    if state.up:
        items.append(item("Unload all", _call(act.unload_all), enabled=bool(state.loaded)))
        stored = [
            item(name, _call(act.load, name), checked=_const(state.is_loaded(name)))
            for name in state.stored
        ]
        items.append(item("Load", pystray.Menu(*stored) if stored else None, enabled=bool(stored)))
        if state.remote:  # served elsewhere: nothing to load, only to know they are there
            remote = [item(f"{name} ({host})", None, enabled=False) for name, host in state.remote]
            items.append(item("Remote models", pystray.Menu(*remote)))
    items += [
        pystray.Menu.SEPARATOR,
        item("Open web chat", _call(act.open_page), enabled=state.up),
        item("Open logs folder", _call(act.open_logs)),
        item("Open models folder", _call(act.open_models)),
        item("Start at login", _call(act.toggle_at_login), checked=lambda _: act.at_login()),
        pystray.Menu.SEPARATOR,
        item("Quit", _call(act.quit)),
    ]
    return pystray.Menu(*items)


def _model_menu(model: LoadedModel, act: Actions) -> pystray.Menu:
    return pystray.Menu(
        pystray.MenuItem("Unload", _call(act.unload, model.name)),
        pystray.MenuItem(
            "Pinned", _call(act.pin, model.name, not model.pinned), checked=_const(model.pinned)
        ),
    )


def _call(func: Callable[..., object], *args: object) -> Callable[[], object]:
    # pystray inspects an action's arity; a closure of none keeps its item and icon out of it.
    return lambda: func(*args)


def _const(value: bool) -> Callable[[pystray.MenuItem], bool]:
    return lambda _: value
