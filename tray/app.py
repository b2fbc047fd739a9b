"""The tray app: an icon and menu that follow the daemon, polled over HTTP through the client.

- **Polling.** /health, /api/ps, /api/tags and /v1/batches every POLL_S while the daemon
  answers; with backoff up to AWAY_MAX_S while it does not. The icon, title and menu change
  only when the state a user sees changed, so menus do not flicker shut under the pointer.
- **Threads.** pystray's `run()` owns the calling thread (on macOS it must be the main one);
  polling runs on a thread of its own, and menu actions on a worker thread, since an HTTP call
  on pystray's thread would freeze the menu.
- **The daemon.** When none answers at a local address, the tray starts one as `localserve
  run` does (launcher.py); Quit stops that daemon and no other.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import webbrowser
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pystray

from localserve.client import JSON, ApiError, Client, ClientError, DaemonUnreachable
from localserve.ground import places
from localserve.ground import settings as config
from localserve.launcher import DaemonDidNotStart, is_local, log_path, start, wait_healthy
from localserve_installer import service
from localserve_tray.icon import icon_image
from localserve_tray.menu import Actions, build_menu
from localserve_tray.status import TrayState, not_running, read_state, starting

log = logging.getLogger(__name__)

POLL_S = 2.0
AWAY_MAX_S = 30.0
SHUTDOWN_WAIT_S = 30.0


class Tray:
    def __init__(self, settings: config.Settings, start_daemon: bool = True) -> None:
        self.settings = settings
        self.client = Client(settings.url, timeout=10.0)
        self.process: subprocess.Popen[bytes] | None = None  # the daemon this tray started
        self.state = not_running()
        self._start_daemon = start_daemon
        self._starting = threading.Event()
        self._failure = ""
        self._polling = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._work = ThreadPoolExecutor(1, thread_name_prefix="tray-action")
        self._poller = threading.Thread(target=self._poll_loop, name="tray-poll", daemon=True)
        self.icon = pystray.Icon(
            "localserve", icon_image(self.state.status), "localserve", self._menu(self.state)
        )

    # -- running --------------------------------------------------------------------------------

    def run(self) -> None:
        """Show the icon until Quit (blocks: call on the main thread)."""
        self.icon.run(setup=self._setup)

    def _setup(self, icon: pystray.Icon) -> None:
        icon.visible = True
        self.begin()

    def begin(self) -> None:
        """Poll once, start a daemon if none answers, then keep polling in the background."""
        if not self.poll().up and self._start_daemon:
            self.start_daemon()
        self._poller.start()

    def poll(self) -> TrayState:
        """Read the daemon's state now and show it if it changed."""
        with self._polling:  # the poll thread, a starting daemon and a test may all ask
            state = self._read()
            if state != self.state:
                self._show(state)
            return state

    def _read(self) -> TrayState:
        try:
            health = self.client.health(timeout=3.0)
            ps, tags = self.client.ps(), self.client.tags()
            return read_state(health, ps, tags, batches=self._batches())
        except DaemonUnreachable:
            return starting() if self._starting.is_set() else not_running(self._failure)
        except ClientError as exc:
            return not_running(str(exc))

    def _batches(self) -> list[JSON]:
        try:
            return self.client.batches()
        except ApiError as exc:
            if exc.route_missing:
                return []  # a daemon older than the Batch API
            raise

    def _show(self, state: TrayState) -> None:
        self.state = state
        self.icon.icon = icon_image(state.status)
        title = f"localserve: {state.line}"
        try:
            self.icon.title = title
        except UnicodeEncodeError:  # the xorg backend writes titles in Latin-1
            self.icon.title = title.encode("latin-1", "replace").decode("latin-1")
        try:
            self.icon.menu = self._menu(state)  # the setter updates the shown menu
        except NotImplementedError:  # pystray's dummy backend (the tests) shows no menu
            pass

    def _poll_loop(self) -> None:
        away = POLL_S
        while not self._stopping.is_set():
            try:
                up = self.poll().up
            except Exception:  # a backend's failure to draw must not end the polling
                log.exception("the tray could not show the daemon's state")
                up = False
            away = POLL_S if up else min(away * 2, AWAY_MAX_S)
            self._wake.wait(POLL_S if up else away)
            self._wake.clear()

    def refresh(self) -> None:
        """Poll at once (after an action), rather than at the next tick."""
        self._wake.set()

    # -- actions ----------------------------------------------------------------------------------

    def _menu(self, state: TrayState) -> pystray.Menu:
        return build_menu(
            state,
            Actions(
                unload=self._in_background(self.client.unload),
                pin=self._in_background(self.client.pin),
                unload_all=self._in_background(self.unload_all),
                load=self._in_background(self.client.load),
                start_daemon=self._in_background(self.start_daemon),
                open_logs=lambda: open_folder(places.log_dir()),
                open_models=lambda: open_folder(places.models_dir(self.settings)),
                open_page=lambda: webbrowser.open(f"{self.settings.url}/ui"),
                at_login=lambda: service.installed(tray=True),
                toggle_at_login=self._in_background(self.toggle_at_login),
                quit=self.quit,
            ),
        )

    def _in_background(self, func: Callable[..., object]) -> Callable[..., None]:
        def submit(*args: object) -> None:
            self._work.submit(self._attempt, func, *args)

        return submit

    def _attempt(self, func: Callable[..., object], *args: object) -> None:
        try:
            func(*args)
        except (ClientError, DaemonDidNotStart, OSError) as exc:
            log.warning("tray action failed: %s", exc)
            try:
                self.icon.notify(str(exc), "localserve")
            except NotImplementedError:  # a backend without notifications: the log has it
                pass
        finally:
            self.refresh()

    def unload_all(self) -> None:
        for model in self.state.loaded:
            self.client.unload(model.name)

    def start_daemon(self) -> None:
        """Start a daemon at the configured address, as `localserve run` does; only a local
        one (a remote address is someone else's to start)."""
        if not is_local(self.settings.host) or self._starting.is_set():
            return
        self._starting.set()
        self._failure = ""
        try:
            path = log_path()
            self.process = start(self.settings, path, by="tray")
            self.poll()
            wait_healthy(self.client, self.process, path)
        except DaemonDidNotStart as exc:
            self._failure = str(exc).splitlines()[0]
            raise
        finally:
            self._starting.clear()
            self.poll()

    def toggle_at_login(self) -> None:
        if service.installed(tray=True):
            service.uninstall(tray=True)
        else:
            service.install(tray=True)

    def quit(self) -> None:
        """Stop polling, stop the daemon this tray started (none other), and remove the icon."""
        self._stopping.set()
        self._wake.set()
        self.stop_own_daemon()
        self._work.shutdown(wait=False, cancel_futures=True)
        self.icon.stop()

    def stop_own_daemon(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            self.client.shutdown()
            process.wait(timeout=SHUTDOWN_WAIT_S)
        except (ClientError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


def open_folder(path: Path) -> None:
    """Show a folder in the desktop's file manager."""
    path.mkdir(parents=True, exist_ok=True)
    if sys.platform == "win32":
        os.startfile(path)  # type: ignore[attr-defined]
    else:
        opener = "open" if sys.platform == "darwin" else "xdg-open"
        subprocess.Popen(
            [opener, str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
