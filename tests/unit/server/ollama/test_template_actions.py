"""How server/ollama/template.py finds the actions of a `template`, in time linear in it (#57):
a "{{" and 1,600 spaces once took 27 s (a regex with a lazy run between two runs of spaces),
and trimming after each "-}}" copied the rest of the template. Each template below is about
the 1 MiB body limit. tests/unit/server/ollama/test_ollama_template.py has what renders."""

from __future__ import annotations

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.ollama.template import render

MiB = 1 << 20


def test_an_open_brace_pair_and_1600_spaces_with_no_close_is_text() -> None:
    template = "{{" + " " * 1600
    assert render(template, "", "p") == template


def test_an_open_brace_pair_and_a_mebibyte_of_spaces_with_no_close_is_text() -> None:
    template = "a {{ .Prompt }} {{" + " " * MiB
    assert render(template, "", "p") == "a p {{" + " " * MiB


def test_a_field_between_a_mebibyte_of_spaces_each_side_is_the_field() -> None:
    assert render("{{" + " " * MiB + ".Prompt" + " " * MiB + "}}", "", "p") == "p"


def test_an_action_of_a_mebibyte_of_spaces_is_refused() -> None:
    with pytest.raises(BadRequest, match="only"):
        render("{{" + " " * MiB + "}}", "", "p")


def test_an_action_ends_at_the_first_close_after_its_open() -> None:
    assert render("{{ .Prompt }}}}", "", "p") == "p}}"


def test_an_open_inside_an_action_is_part_of_it() -> None:
    with pytest.raises(BadRequest, match="only"):
        render("{{ {{ .Prompt }}", "", "p")


def test_a_dash_trims_only_with_a_space_beside_it() -> None:
    assert render("a {{- .Prompt -}} b", "", "p") == "apb"
    with pytest.raises(BadRequest, match="only"):
        render("a {{-.Prompt}}", "", "p")


def test_a_dash_close_trims_a_mebibyte_of_spaces_after_it() -> None:
    assert render("{{ .Prompt -}}" + " " * MiB + "x", "", "p") == "px"


def test_a_mebibyte_of_dash_trimmed_actions_renders_each() -> None:
    count = MiB // len("{{- .Prompt -}} ")
    assert render("{{- .Prompt -}} " * count, "", "p") == "p" * count
