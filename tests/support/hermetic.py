"""The settings of localserve that the developer's shell may hold, which no daemon or CLI the
suite starts may see (a LOCALSERVE_PORT would point `localserve status` at the developer's
own daemon). The suite's own knobs are no settings of localserve's, and stay.
"""

from __future__ import annotations

from collections.abc import MutableMapping

# Read by tests alone, never by localserve: where built test models are cached, how long the
# OpenAPI fuzzing hunts, where screenshots go.
SUITE_KNOBS = ("LOCALSERVE_TEST_", "LOCALSERVE_SCREENSHOTS")


def is_setting(name: str) -> bool:
    """Whether a variable is one localserve reads (or may one day): any LOCALSERVE_ name but
    the suite's knobs. Upper-cased, as Windows matches names."""
    upper = name.upper()
    return upper.startswith("LOCALSERVE_") and not upper.startswith(SUITE_KNOBS)


def clear_settings(environ: MutableMapping[str, str]) -> None:
    for name in [name for name in environ if is_setting(name)]:
        del environ[name]
