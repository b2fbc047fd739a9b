"""`localserve doctor`: this machine's hardware, the llama.cpp build installed, what the load
probe found for it, and what to fix with the exact command.

It runs here, not through the daemon: it is about the machine and the Python environment a daemon
would run in, and it must work when no daemon can start. It never fails: what it cannot find out
reads "unknown (reason)", and the exit code is 0.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from localserve.cli import output
from localserve.cli.output import OK

WIDTH = 19  # the label column


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the hardware and the llama.cpp build; say what to fix",
        description="Report the CPU's features, the GPUs, onnxruntime's providers, the installed "
        "llama.cpp build and the load probe's verdicts for it, then what is wrong and the "
        "command that fixes it.",
    )
    p.add_argument("--json", action="store_true", help="print the same as one JSON object")
    p.set_defaults(handler=doctor_command)


def doctor_command(args: argparse.Namespace) -> int:
    # Imported here: gathering runs tools and a child process, which only this command wants.
    from localserve_native import report

    try:
        found = report.gather()
    except Exception as exc:  # each probe is guarded; this is the guard behind the guards
        found = {"error": f"unknown ({type(exc).__name__}: {exc})"}
    if not args.json:
        try:
            print(render(found), end="")
            return OK
        except Exception:  # a shape render() did not expect: the facts still print, as JSON
            pass
    print(json.dumps(found, indent=2, default=str))
    return OK


def _line(label: str, value: object) -> str:
    return f"  {label:<{WIDTH}}{value}\n"


def _yes(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _hardware(hardware: Mapping[str, Any]) -> str:
    text = "CPU\n"
    cpu = hardware.get("cpu")
    if isinstance(cpu, dict):
        features = cpu.get("features") or {}
        text += _line("model", f"{cpu.get('model')} (from {cpu.get('source')})")
        text += _line("has", " ".join(f for f, on in features.items() if on) or "-")
        text += _line("lacks", " ".join(f for f, on in features.items() if not on) or "-")
    else:
        text += _line("model", cpu)
    text += "\nGPUs\n"
    for tool, gpus in (hardware.get("gpus") or {}).items():
        if not isinstance(gpus, list):
            text += _line(tool, gpus)
        elif not gpus:
            text += _line(tool, "no GPU listed")
        for gpu in gpus if isinstance(gpus, list) else []:
            details = ", ".join(str(gpu[k]) for k in ("kind", "memory", "driver") if gpu.get(k))
            text += _line(tool, f"{gpu.get('name')}" + (f" ({details})" if details else ""))
    text += "\nONNX Runtime\n"
    for label, key in (("onnxruntime-genai", "onnxruntime_genai"), ("onnxruntime", "onnxruntime")):
        found = hardware.get(key)
        if not isinstance(found, dict):
            text += _line(label, found)
            continue
        providers = found.get("providers")
        if isinstance(providers, dict):
            listed = ", ".join(f"{name} {_yes(ok)}" for name, ok in providers.items())
        else:
            listed = ", ".join(providers or [])
        text += _line(label, f"{found.get('version')}: {listed or 'no providers'}")
    return text


def _llama(llama: Mapping[str, Any]) -> str:
    text = "llama.cpp\n"
    text += _line("llama-cpp-python", llama.get("version"))
    text += _line("gpu offload", _yes(llama.get("gpu_offload")))
    backends = llama.get("backends")
    text += _line("backends", ", ".join(backends) if isinstance(backends, list) else backends)
    devices = llama.get("devices")
    if isinstance(devices, list):
        for device in devices or [{"name": "none"}]:
            total, free = device.get("memory_total"), device.get("memory_free")
            memory = total and f"{output.size(free or 0)} free of {output.size(total)}"
            details = ", ".join(filter(None, (device.get("kind"), memory)))
            name = str(device.get("name"))
            if device.get("description"):
                name += f": {device['description']}"
            text += _line("device", name + (f" ({details})" if details else ""))
    else:
        text += _line("devices", devices)
    text += _line("system info", llama.get("system_info"))
    return text


def _verdict(verdict: Mapping[str, Any]) -> str:
    survived = "with" if verdict.get("use_extra_bufts") else "without"
    seconds = verdict.get("seconds")
    took = f", took {seconds:.1f} s" if isinstance(seconds, (int, float)) else ""
    return (
        f"loads {survived} extra buffer types: {verdict.get('reason')} "
        f"(probed {output.ago(verdict.get('probed_at'))}{took})"
    )


def _trial(trial: Mapping[str, Any]) -> str:
    """One configuration the probe ran: the kernels (the weights' buffer types) and a token's
    measured cost on the embedded model, or how it failed."""
    label = "with extra buffer types" if trial.get("extra_bufts") else "without them"
    if trial.get("failure"):
        return f"{label}: failed, {trial['failure']}"
    weights = ", ".join(trial.get("weights") or ()) or "unknown"
    ms = trial.get("ms_per_token")
    cost = f"{ms:.2f} ms a token ({1000 / ms:.0f} tok/s)" if ms else "not timed"
    return f"{label}: weights in {weights}; {cost}"


def _probe(probe: Mapping[str, Any]) -> str:
    text = "load probe\n"
    text += _line("cache", probe.get("file"))
    text += _line("build key", probe.get("key"))
    found = probe.get("verdicts")
    if isinstance(found, dict):
        for device, verdict in found.items():
            text += _line(device, _verdict(verdict))
            for trial in verdict.get("trials") or ():
                text += _line("", f"  {_trial(trial)}")
    else:
        text += _line("verdicts", found)
    others = probe.get("other_builds")
    if others:
        text += _line("other builds", f"{others} probed before (other versions, flags or CPUs)")
    return text


def _advice(advice: list[Mapping[str, Any]]) -> str:
    text = "what to fix\n"
    if not advice:
        return text + "  nothing found\n"
    for item in advice:
        optional = "(optional) " if item.get("optional") else ""
        text += f"  - {optional}{item.get('problem')}\n"
        text += f"      {item.get('fix') or 'no command fixes this'}\n"
    return text


def render(found: Mapping[str, Any]) -> str:
    """The report as plain sections, for a person (or a bug report: it pastes as it is)."""
    return "\n".join(
        (
            _hardware(found.get("hardware") or {}),
            _llama(found.get("llama_cpp") or {}),
            _probe(found.get("probe") or {}),
            _advice(found.get("advice") or []),
        )
    )
