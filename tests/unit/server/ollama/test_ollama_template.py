"""The Go-template subset of /api/generate's `template`, and Ollama's prompt truncation (pure)."""

from __future__ import annotations

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.ollama.options import fit_prompt
from localserve.server.ollama.template import render

CHATML = (
    "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
    "<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n{{ .Response }}"
)


def test_fields_and_an_if_block_render_as_in_go() -> None:
    assert render(CHATML, "Be brief.", "Hi") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_an_if_block_on_an_empty_field_is_left_out() -> None:
    assert render(CHATML, "", "Hi").startswith("<|im_start|>user\nHi")


def test_else_takes_the_other_branch() -> None:
    assert render("{{ if .System }}S{{ else }}none{{ end }}:{{ .Prompt }}", "", "p") == "none:p"


def test_dashes_trim_the_whitespace_beside_an_action() -> None:
    assert render("A  {{- .Prompt -}}  B", "", "x") == "AxB"


def test_anything_beyond_the_subset_is_refused() -> None:
    with pytest.raises(BadRequest, match="only"):
        render("{{ range .Messages }}{{ .Content }}{{ end }}", "", "x")


def test_a_prompt_that_fits_is_left_alone() -> None:
    assert fit_prompt(list(range(10)), ctx=64, num_keep=4) == list(range(10))


def test_a_prompt_too_long_keeps_its_head_and_its_latest_tokens_in_half_the_window() -> None:
    fitted = fit_prompt(list(range(100)), ctx=64, num_keep=4)
    assert fitted == [0, 1, 2, 3] + list(range(72, 100))
