"""The load probe's verdicts: which llama.cpp configuration survived on each device, kept per
(llama.cpp build, CPU) so the probe runs once for a build on a machine, not at every load.

Some builds die of SIGILL on the first decode with extra buffer types (AMX kernels on Xeons that
advertise AMX); the probe decodes in a throwaway worker with them, then without, and records here
what survived, which buffer types held the weights (so which kernels ran them) and what a token
cost in each (its `trials`). The file, `probe.json` in the user's state folder:

    {
      "format": 1,
      "builds": {
        "<build key>": {
          "cpu": {"device": "cpu", "use_extra_bufts": false,
                  "reason": "with extra buffer types the worker died of SIGILL",
                  "probed_at": "2025-01-31T12:00:00+00:00", "seconds": 2.41,
                  "build": "<the remedy's unpacked build, once it decodes with them>",
                  "trials": [{"extra_bufts": true, "failure": "signal SIGILL",
                              "weights": [], "ms_per_token": null},
                             {"extra_bufts": false, "failure": null,
                              "weights": ["cpu_mapped"], "ms_per_token": 6.1}]}
        }
      }
    }

The build key (`build_key()`) names the llama-cpp-python version, a digest of what ggml was
compiled with (`llama_print_system_info()`) and the CPU's model and flags: a rebuild with other
flags, or the same venv on another machine, gets a key of its own and is probed afresh. A file
that cannot be read or parsed reads as empty (the probe simply runs again); a write replaces the
file whole (temporary file, then os.replace), so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import platformdirs

from localserve_native import build_info, hardware

FORMAT = 1
FILE_NAME = "probe.json"
# Builds kept: a machine that rebuilds now and then must not grow the file for ever.
KEEP_BUILDS = 16


@dataclass(frozen=True)
class Trial:
    """One configuration the probe ran: how it failed (None: it decoded), the buffer types that
    held the model's weights (llama.cpp picks kernels by them: "cpu_repack" runs the repacked
    AVX2/AVX-512 kernels, "amx" the AMX tiles, "cpu_mapped" the plain ones), and the
    milliseconds per token of a short greedy decode of the embedded model, one stream."""

    extra_bufts: bool
    failure: str | None
    weights: tuple[str, ...] = ()
    ms_per_token: float | None = None

    @classmethod
    def from_json(cls, raw: Any) -> Trial:
        """ValueError unless `raw` has every field with its type."""
        if not isinstance(raw, dict):
            raise ValueError("a trial is an object")
        bufts, failure, weights, ms = (
            raw.get(k) for k in ("extra_bufts", "failure", "weights", "ms_per_token")
        )
        if not (
            isinstance(bufts, bool)
            and isinstance(failure, (str, type(None)))
            and isinstance(weights, list)
            and all(isinstance(w, str) for w in weights)
            and (ms is None or (isinstance(ms, (int, float)) and not isinstance(ms, bool)))
        ):
            raise ValueError(f"not a trial: {raw!r}")
        return cls(bufts, failure, tuple(weights), None if ms is None else float(ms))


@dataclass(frozen=True)
class Verdict:
    device: str  # "cpu", or a ggml device name such as "CUDA0"
    use_extra_bufts: bool  # the configuration that survived: load with extra buffer types or not
    reason: str  # what the probe saw, in a sentence
    probed_at: str  # ISO 8601 with its offset (UTC)
    seconds: float  # how long the probe took
    # Where the extra buffer types die: the unpacked build without AMX that decodes with them
    # (native/remedy.py), once the remedy has made and probed it; "" until then.
    build: str = ""
    trials: tuple[Trial, ...] = ()  # each configuration the probe ran, in its order

    @classmethod
    def now(
        cls,
        device: str,
        use_extra_bufts: bool,
        reason: str,
        seconds: float,
        trials: tuple[Trial, ...] = (),
    ) -> Verdict:
        """A verdict stamped with the current time."""
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return cls(device, use_extra_bufts, reason, stamp, round(float(seconds), 3), "", trials)

    def to_json(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["trials"] = [{**t, "weights": list(t["weights"])} for t in raw["trials"]]
        return raw

    @classmethod
    def from_json(cls, raw: Any) -> Verdict:
        """ValueError unless `raw` has every field with its type."""
        if not isinstance(raw, dict):
            raise ValueError("a verdict is an object")
        device, bufts, reason, at, seconds = (
            raw.get(k) for k in ("device", "use_extra_bufts", "reason", "probed_at", "seconds")
        )
        build = raw.get("build", "")
        trials = raw.get("trials", [])
        if not (
            isinstance(device, str)
            and isinstance(bufts, bool)
            and isinstance(reason, str)
            and isinstance(at, str)
            and isinstance(seconds, (int, float))
            and not isinstance(seconds, bool)
            and isinstance(build, str)
            and isinstance(trials, list)
        ):
            raise ValueError(f"not a verdict: {raw!r}")
        ran = tuple(Trial.from_json(trial) for trial in trials)
        return cls(device, bufts, reason, at, float(seconds), build, ran)


def cache_path() -> Path:
    return Path(platformdirs.user_state_dir("localserve", appauthor=False)) / FILE_NAME


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def build_key(
    version: str | None = None,
    system_info: str | None = None,
    cpu: hardware.Cpu | None = None,
) -> str:
    """The key of this build on this CPU; each part not given is read from the running system
    (`system_info` loads llama.cpp, so a caller that has it passes it)."""
    version = version if version is not None else build_info.version()
    system_info = system_info if system_info is not None else build_info.system_info()
    cpu = cpu if cpu is not None else hardware.read_cpu()
    # All flags, not only the few that pick kernels: a kernel update that exposes AMX (or hides
    # it) must invalidate the verdict too.
    flags = _digest(" ".join(sorted(cpu.flags)))
    system = _digest(system_info)
    return f"llama-cpp-python {version}; system {system}; cpu {cpu.model}; flags {flags}"


def _builds(path: Path) -> dict[str, Any]:
    """The file's builds as stored; {} for a file that is absent, unreadable or not ours."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    builds = data.get("builds")
    return builds if isinstance(builds, dict) else {}


def _entries(raw: Any) -> dict[str, Verdict]:
    """A build's verdicts; an entry that does not parse is left out (the probe redoes it)."""
    verdicts: dict[str, Verdict] = {}
    for device, entry in raw.items() if isinstance(raw, dict) else ():
        try:
            verdicts[device] = Verdict.from_json(entry)
        except ValueError:
            continue
    return verdicts


def read(key: str, path: Path | None = None) -> dict[str, Verdict]:
    """The verdicts of the build `key`, by device; {} when it was never probed."""
    return _entries(_builds(path or cache_path()).get(key))


def read_all(path: Path | None = None) -> dict[str, dict[str, Verdict]]:
    """Every build's verdicts, oldest first."""
    return {key: _entries(raw) for key, raw in _builds(path or cache_path()).items()}


def write(key: str, verdict: Verdict, path: Path | None = None) -> None:
    """Record `verdict` for its device under `key`, keeping the other devices and builds.

    Two processes writing at once may lose one's verdict (the last replace wins); that costs one
    more probe, never a torn file."""
    path = path or cache_path()
    builds = _builds(path)
    entries = builds.pop(key, None)
    entries = entries if isinstance(entries, dict) else {}
    entries[verdict.device] = verdict.to_json()
    builds[key] = entries  # re-inserted last: the most recent build is the last one kept
    for old in list(builds)[: max(0, len(builds) - KEEP_BUILDS)]:
        del builds[old]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"format": FORMAT, "builds": builds}, indent=2, sort_keys=False)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
