"""The tray in a real X window: Xvfb, trayer as the panel's tray host (stalonetray is not in
Debian 12; trayer speaks the same XEMBED tray protocol), and pystray's xorg backend in a
`localserve tray` process of its own. Screenshots of the panel show the icon
drawn, and changed when the daemon's state changes (idle, then a model loaded).

With LOCALSERVE_SCREENSHOTS=DIR the two shots, side by side, are saved as DIR/tray.png (that
is how docs/tray.png was made).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageGrab

from localserve.client import Client
from localserve_tray.icon import _FILL
from localserve_tray.status import Status
from tests.support.daemons import poll
from tests.support.live import running_daemon
from tests.support.prerequisites import require


@pytest.fixture(scope="module", autouse=True)
def x_server_and_tray_host() -> None:
    require(
        shutil.which("Xvfb") and shutil.which("trayer"),
        "needs Xvfb and trayer (apt-get install xvfb trayer)",
    )


PANEL_PX = (96, 48)
PANEL = "0x303030"  # a dark panel; the icon's light rim is what shows on it
SHOT_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def display() -> Iterator[str]:
    """A virtual screen with a tray host in its top-left corner."""
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "320x120x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as f:
        name = f":{f.readline().strip()}"
    host = subprocess.Popen(
        [
            "trayer",
            "--edge",
            "top",
            "--align",
            "left",
            "--widthtype",
            "pixel",
            "--width",
            str(PANEL_PX[0]),
            "--heighttype",
            "pixel",
            "--height",
            str(PANEL_PX[1]),
            "--tint",
            PANEL,
            "--transparent",
            "true",
            "--alpha",
            "0",
            "--SetDockType",
            "false",
            "--SetPartialStrut",
            "false",
        ],
        env={**os.environ, "DISPLAY": name},
        stderr=subprocess.DEVNULL,
    )
    try:
        poll("the tray host's window", lambda: _panel(name).getpixel((2, 2)) != (0, 0, 0), 30)
        yield name
    finally:
        for process in (host, xvfb):
            process.terminate()
            process.wait(timeout=10)


def _panel(name: str) -> Image.Image:
    return ImageGrab.grab(bbox=(0, 0, *PANEL_PX), xdisplay=name).convert("RGB")


def _shows(shot: Image.Image, status: Status) -> bool:
    """Whether the status's fill colour covers a part of the panel an icon would (trayer
    draws it at about 24 px, its disc's fill some 150 of those pixels)."""
    fill = _FILL[status]
    colours = shot.getcolors(maxcolors=1 << 16) or []
    near = sum(n for n, px in colours if all(abs(a - b) <= 12 for a, b in zip(px, fill)))
    return near > 60


def _showing(display: str, status: Status) -> Image.Image | None:
    shot = _panel(display)
    return shot if _shows(shot, status) else None


def test_the_icon_is_drawn_in_the_panel_and_changes_with_the_state(display: str) -> None:
    with running_daemon(["--no-default-model", "--parallel", "2", "--ctx", "1024"]) as (_, url):
        env = {**os.environ, "DISPLAY": display, "PYSTRAY_BACKEND": "xorg"}
        port = url.rsplit(":", 1)[1]
        tray = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "localserve_tray",
                "--host",
                "127.0.0.1",
                "--port",
                port,
                "--no-start",
            ],
            env=env,
        )
        try:
            idle = poll("the idle icon", lambda: _showing(display, Status.IDLE), SHOT_TIMEOUT_S)
            Client(url).load("smollm2")
            loaded = poll(
                "the loaded icon", lambda: _showing(display, Status.RUNNING), SHOT_TIMEOUT_S
            )
        finally:
            tray.terminate()
            tray.wait(timeout=10)
    assert idle.tobytes() != loaded.tobytes()
    if os.environ.get("LOCALSERVE_SCREENSHOTS"):
        both = Image.new("RGB", (PANEL_PX[0] * 2 + 8, PANEL_PX[1]), "#303030")
        both.paste(idle, (0, 0))
        both.paste(loaded, (PANEL_PX[0] + 8, 0))
        both.save(Path(os.environ["LOCALSERVE_SCREENSHOTS"]) / "tray.png")
