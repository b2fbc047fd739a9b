"""The tray icon, drawn with Pillow at run time: a disc whose colour and mark say the status.

Every icon has a dark rim inside a light one, so that it stands out on light and dark panels
alike; colour is never the only cue (each status has its own mark, for colour-blind users and
monochrome panels).
"""

from __future__ import annotations

from functools import cache

from PIL import Image, ImageDraw

from localserve_tray.status import Status

SIZE = 64  # pystray scales it to the panel; 64 px stays sharp at 16-32 px and on HiDPI

_FILL = {
    Status.NOT_RUNNING: (128, 128, 128),
    Status.ERROR: (214, 48, 49),
    Status.LOADING: (240, 165, 0),
    Status.GENERATING: (0, 160, 90),
    Status.RUNNING: (0, 120, 215),
    Status.IDLE: (90, 140, 190),
}
_LIGHT, _DARK = (255, 255, 255, 255), (20, 20, 20, 255)


@cache
def icon_image(status: Status) -> Image.Image:
    image = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.ellipse((1, 1, SIZE - 2, SIZE - 2), fill=_LIGHT)
    draw.ellipse((4, 4, SIZE - 5, SIZE - 5), fill=_DARK)
    draw.ellipse((7, 7, SIZE - 8, SIZE - 8), fill=(*_FILL[status], 255))
    _mark(draw, status)
    return image


def _mark(draw: ImageDraw.ImageDraw, status: Status) -> None:
    """A white mark in the disc: the status for a user who cannot tell the colours apart."""
    c, w = SIZE // 2, 6
    if status is Status.NOT_RUNNING:  # a hollow ring: nothing inside
        draw.ellipse((c - 12, c - 12, c + 12, c + 12), outline=_LIGHT, width=w)
    elif status is Status.ERROR:  # an exclamation mark
        draw.rectangle((c - 3, c - 16, c + 3, c + 4), fill=_LIGHT)
        draw.rectangle((c - 3, c + 9, c + 3, c + 15), fill=_LIGHT)
    elif status is Status.LOADING:  # an hourglass
        draw.polygon([(c - 12, c - 14), (c + 12, c - 14), (c, c)], fill=_LIGHT)
        draw.polygon([(c - 12, c + 14), (c + 12, c + 14), (c, c)], fill=_LIGHT)
    elif status is Status.GENERATING:  # three bars, as of a level meter
        for i, h in enumerate((8, 16, 12)):
            x = c - 13 + i * 10
            draw.rectangle((x, c + 10 - 2 * h + 10, x + 6, c + 12), fill=_LIGHT)
    elif status is Status.RUNNING:  # a full dot: loaded and ready
        draw.ellipse((c - 10, c - 10, c + 10, c + 10), fill=_LIGHT)
    else:  # idle: a small dot
        draw.ellipse((c - 5, c - 5, c + 5, c + 5), fill=_LIGHT)
